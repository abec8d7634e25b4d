"""The one-file model of docs/plugins.md ("Writing a model from the layer"),
examples/l21_logistic.py: short, passes the conformance kit, and reaches the cvxpy optimum of
its objective (with a certified duality gap); lam_ratio = 1 gives W = 0."""
from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench.testing import ModelConformance

FILE = Path(__file__).resolve().parents[1] / "examples" / "l21_logistic.py"


def _load():
    name = "mtlbench_example_l21_logistic"
    if name not in sys.modules:            # registered so that fitted models pickle
        spec = importlib.util.spec_from_file_location(name, FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


L21Logistic = _load().L21Logistic


class TestL21LogisticConformance(ModelConformance):
    model_class = L21Logistic


def test_the_example_is_one_short_file():
    assert len(FILE.read_text(encoding="utf-8").splitlines()) <= 60


def _tasks(seed=0, T=4, d=6, n=25):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, T))
    W[d // 2:] = 0.0                          # shared irrelevant features
    Xs = [rng.standard_normal((n + 3 * t, d)) for t in range(T)]
    ys = []
    for t, X in enumerate(Xs):
        y = np.where(X @ W[:, t] + 0.5 * rng.standard_normal(X.shape[0]) > 0, 1.0, -1.0)
        y[:2] = (1.0, -1.0)
        ys.append(y)
    return TaskSet.from_arrays("toy", Xs, ys)


@pytest.mark.parametrize("lam_ratio", [0.05, 0.3])
def test_reaches_the_cvxpy_optimum(lam_ratio):
    tasks = _tasks()
    m = L21Logistic(lam_ratio=lam_ratio, tol=1e-7, max_iter=20000).fit(tasks)
    assert m.converged_ and m.gap_ <= 1e-7
    lam = m.penalty_.lam
    W = cp.Variable((tasks.d, tasks.T))
    loss = sum(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), tasks.X(t) @ W[:, t])))
               for t in range(tasks.T))
    prob = cp.Problem(cp.Minimize(loss + lam * cp.sum(cp.norm(W, 2, axis=1))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    F = m.fitted_objective(tasks)
    assert F == pytest.approx(m.objective_history_[-1], rel=1e-12)
    assert F == pytest.approx(prob.value, rel=1e-6)
    np.testing.assert_allclose(m.coef_, W.value, atol=1e-4)
    if lam_ratio >= 0.3:                  # whole features switched off, exactly
        assert np.any(np.linalg.norm(m.coef_, axis=1) == 0.0)


def test_lam_ratio_one_gives_zero_and_bad_input_is_one_line():
    tasks = _tasks(1)
    assert np.all(L21Logistic(lam_ratio=1.0).fit(tasks).coef_ == 0.0)
    with pytest.raises(ValueError, match="lam_ratio"):
        L21Logistic(lam_ratio=-1.0).fit(tasks)


def test_the_docs_show_the_file():
    """docs/plugins.md prints the example's code: the file is that block under its docstring."""
    import re

    docs = (FILE.parents[1] / "docs" / "plugins.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python\n(.*?)```", docs, re.S)
                 if "class L21Logistic" in b)
    assert FILE.read_text(encoding="utf-8").endswith('"""\n' + block)
