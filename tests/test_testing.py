"""The conformance kit catches broken plugins with a message that names the check, and its
pytest plugin works (ModelConformance/DatasetConformance classes, --mtlbench-conformance)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from mtlbench import Dataset, Int, Linear, LinearMTLModel, Log, TaskSet
from mtlbench.testing import (ConformanceError, DataNotAvailable, check_dataset, check_model,
                              run_model_check)
from mtlbench_models.stl import STL, ridge_solve


class GoodRidge(LinearMTLModel):
    name = "goodridge"
    search_space = {"lam": Log([0.1, 1.0], low=0.0)}

    def __init__(self, lam=1.0):
        self.lam = lam

    def fit(self, tasks, init=None):
        self.coef_ = np.column_stack([ridge_solve(tasks.X(t), tasks.y(t), self.lam)
                                      for t in range(tasks.T)])
        self.converged_ = True  # closed form
        return self


class ChangesParam(GoodRidge):
    name = "changesparam"

    def __init__(self, lam=1.0):
        self.lam = float(lam) * 2


class GlobalRandom(GoodRidge):
    name = "globalrandom"

    def fit(self, tasks, init=None):
        super().fit(tasks)
        self.coef_ = self.coef_ + 1e-3 * np.random.standard_normal(self.coef_.shape)
        return self


class Unpicklable(GoodRidge):
    name = "unpicklable"

    def fit(self, tasks, init=None):
        super().fit(tasks)
        self.link_ = lambda x: x
        return self


class WrongShape(GoodRidge):
    name = "wrongshape"

    def decision_function(self, X, task):
        return (X @ self.coef_)[:, None]


class BadSpace(GoodRidge):
    name = "badspace"
    search_space = {"alpha": [1.0]}


class EmptySpace(GoodRidge):
    name = "emptyspace"
    search_space = {"lam": []}


class OneStartValue(GoodRidge):
    name = "onestart"
    search_space = {"lam": Log([1.0], low=0.0)}


class RejectsGridValue(GoodRidge):
    name = "rejects"
    search_space = {"lam": Linear([1.0, -1.0])}

    def fit(self, tasks, init=None):
        if self.lam <= 0:
            raise ValueError(f"rejects: lam must be > 0, got {self.lam}")
        return super().fit(tasks)


class Flipped(GoodRidge):
    name = "flipped"

    def decision_function(self, X, task):
        return -super().decision_function(X, task)


class Increasing(GoodRidge):
    name = "increasing"
    monotone_objective = True

    def fit(self, tasks, init=None):
        super().fit(tasks)
        self.objective_history_ = [3.0, 2.0, 2.5]
        return self


class KeepsFirstFit(GoodRidge):
    name = "keepsfirst"

    def fit(self, tasks, init=None):
        if not hasattr(self, "coef_"):
            super().fit(tasks)
        return self


@pytest.mark.parametrize("cls,check,message", [
    (ChangesParam, "clone", "__init__ changed lam: passed 1.0, stored 2.0"),
    (GlobalRandom, "deterministic", "two fits on the same data differ"),
    (Unpicklable, "pickle", "pickle round trip raised"),
    (WrongShape, "fit_shapes", r"decision_function returned shape \(9, 1, 6\)"),
    (BadSpace, "search_space", "'alpha' is not an __init__ parameter"),
    (EmptySpace, "search_space", "is empty"),
    (OneStartValue, "search_space", r"lam = Log\(\[1\].*starts from one value; declare a start "
                                    r"range of at least two distinct values"),
    (RejectsGridValue, "search_space", r"lam=-1.0.*lam must be > 0"),
    (Flipped, "beats_chance", "mean test AUC"),
    (Increasing, "objective_history", "objective increased at iteration 2"),
    (KeepsFirstFit, "refit", "coef_ has shape"),
])
def test_kit_catches_broken_models(cls, check, message):
    with pytest.raises(ConformanceError, match=message) as info:
        run_model_check(check, cls)
    assert f"{cls.name} (" in str(info.value) and f": {check}" in str(info.value)


class OldListRidge(GoodRidge):
    """The first release's plain list; ``k`` (unused by the fit) refuses values below 2."""
    name = "oldlist"
    search_space = {"lam": [0.1, 1.0, 10.0], "k": [2, 4]}

    def __init__(self, lam=1.0, k=2):
        self.lam = lam
        self.k = k

    def fit(self, tasks, init=None):
        if self.k < 2:
            raise ValueError(f"oldlist: k must be >= 2, got {self.k}")
        return super().fit(tasks)


class OldListBounded(OldListRidge):
    name = "oldlist-bounded"
    search_space = {"lam": [0.1, 1.0, 10.0], "k": Int([2, 4], low=2)}


def test_the_kit_explains_and_checks_a_plain_list_search_space():
    """A plain list is searched as a range, not as the listed values: the kit says so with
    the declaration to write, and fits the value the search proposes one step past an end of
    the list (k=1 for [2, 4], within the sign bound): a fit that refuses it fails, naming the
    bound to declare."""
    from mtlbench.plugins import PluginMigrationWarning

    with pytest.warns(PluginMigrationWarning) as caught:
        with pytest.raises(ConformanceError, match=r"search_space\['k'\] = \[2, 4\] is a plain "
                                                   r"list, searched as the range Int\(\[2, 4\], "
                                                   r"low=0, high=None\): the search proposes k=1 "
                                                   r"when the best listed value is 2.*declare the "
                                                   r"real bounds, e.g. 'k': Int\(\[2, 4\], "
                                                   r"low=2\)"):
            run_model_check("search_space", OldListRidge)
    notes = [str(w.message) for w in caught]
    assert len(notes) == 2 and "oldlist (test_testing.OldListRidge): search_space: " \
        "search_space['k'] = [2, 4] is a plain list, searched as the range Int" in notes[1]
    with pytest.warns(PluginMigrationWarning) as caught:
        run_model_check("search_space", OldListBounded)   # lam: 0.01 and 100 fit
    assert [str(w.message).split(": ", 2)[2][:25] for w in caught] == \
        ["search_space['lam'] = [0."]


def test_kit_passes_a_good_model():
    out = check_model(GoodRidge)
    assert out["beats_chance"] > 0.8
    check_model(STL, {"lam": 10.0}, checks=["clone", "fit_shapes"])


class TinyData(Dataset):
    name = "tinydata"
    description = "two tasks"
    source = "generated"

    def load(self, problem="tinydata", *, data_dir=None, cache_dir=None):
        rng = np.random.default_rng(0)
        ys = [np.array([1.0, -1.0] * 4), np.array([1.0, -1.0] * 5)]
        return TaskSet.from_arrays("tinydata", [rng.standard_normal((len(y), 3)) for y in ys], ys)


class Nondeterministic(TinyData):
    name = "nondet"

    def load(self, problem="nondet", *, data_dir=None, cache_dir=None):
        ys = [np.array([1.0, -1.0] * 4)]
        return TaskSet.from_arrays("nondet", [np.random.standard_normal((8, 3))], ys)


class Missing(TinyData):
    name = "missing"

    def availability(self, *, data_dir=None, cache_dir=None):
        return "needs local files"


class BadParams(TinyData):
    name = "badparams"

    def params(self):
        return {"f": object()}


def test_dataset_checks():
    assert check_dataset(TinyData)["load:tinydata"].startswith("TaskSet('tinydata'")
    assert check_dataset(Missing())["load:missing"].startswith("skipped:")
    with pytest.raises(ConformanceError, match="two loads"):
        check_dataset(Nondeterministic)
    with pytest.raises(ConformanceError, match="JSON-able"):
        check_dataset(BadParams)


def test_dataset_missing_data_is_not_available():
    from mtlbench.testing import check_dataset_load

    with pytest.raises(DataNotAvailable):
        check_dataset_load(Missing(), "missing")


def _pytest(args, cwd):
    env = dict(os.environ, COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=240)


def test_pytest_plugin_classes_and_option(tmp_path):
    (tmp_path / "test_mine.py").write_text(textwrap.dedent("""
        from mtlbench.testing import DatasetConformance, ModelConformance
        from mtlbench_models.stl import STL
        from mtlbench_datasets.simulated import Simulated

        class TestSTL(ModelConformance):
            model_class = STL

        class TestSim(DatasetConformance):
            dataset = Simulated

        def test_fixture(mtlbench_small_problem, mtlbench_uneven_problem):
            assert mtlbench_small_problem.T == 10 and len(set(mtlbench_uneven_problem.sizes())) > 1
    """))
    proc = _pytest([], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "15 passed, 1 skipped" in proc.stdout

    proc = _pytest(["--mtlbench-conformance", "lasso,simulated", "-k", "mtlbench-conformance",
                    "-rA"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "mtlbench-conformance[model:lasso:pickle]" in proc.stdout
    assert "mtlbench-conformance[dataset:simulated:load_deterministic]" in proc.stdout

    proc = _pytest(["--mtlbench-conformance", "nosuchmodel"], tmp_path)
    assert proc.returncode != 0 and "no installed model or dataset named 'nosuchmodel'" in \
        proc.stdout + proc.stderr


def test_docs_plugin_examples_pass_the_kit(tmp_path):
    """The model, dataset and test file shown in docs/plugins.md work as printed."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    model = next(b for b in blocks if "class ShrinkToMean" in b)
    dataset = next(b for b in blocks if "class TwoBlocks" in b)
    tests = next(b for b in blocks if "class TestShrink" in b)
    (tmp_path / "mtlbench_shrink.py").write_text(model)
    (tmp_path / "mtlbench_twoblocks.py").write_text(dataset)
    (tmp_path / "test_doc_example.py").write_text(tests)
    env_path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=env_path),
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "14 passed, 1 skipped" in proc.stdout


# ---------------------------------------------------------------- warm starts of convex models
class GradientRidge(GoodRidge):
    """Ridge by gradient descent from init (or 0) until the gradient norm is below 1e-10:
    a convex model whose warm start cannot change the answer."""

    name = "gradridge"
    convex = True
    supports_warm_start = True

    def __init__(self, lam=1.0, max_iter=100000):
        self.lam = lam
        self.max_iter = max_iter

    def fit(self, tasks, init=None):
        cols, obj = [], 0.0
        for t in range(tasks.T):
            X, y = tasks.X(t), tasks.y(t)
            H = X.T @ X + self.lam * np.eye(X.shape[1])
            step = 1.0 / np.linalg.eigvalsh(H)[-1]
            w = init.coef_[:, t].copy() if init is not None else np.zeros(X.shape[1])
            for _ in range(self.max_iter):
                g = H @ w - X.T @ y
                if np.linalg.norm(g) < 1e-10:
                    break
                w -= step * g
            cols.append(w)
            obj += 0.5 * np.sum((X @ w - y) ** 2) + 0.5 * self.lam * w @ w
        self.coef_ = np.column_stack(cols)
        self.objective_history_ = [obj]
        return self


class LazyWarm(GradientRidge):
    """Declares convex + warm start but stops after 2 steps from init: changes the answer."""

    name = "lazywarm"

    def fit(self, tasks, init=None):
        if init is None:
            return super().fit(tasks)
        return GradientRidge.fit(self.set_params(max_iter=2), tasks, init) and \
            self.set_params(max_iter=100000)


def test_convex_warm_start_reaches_the_cold_objective():
    run_model_check("warm_start", GradientRidge)
    with pytest.raises(ConformanceError, match="warm start must not change the answer"):
        run_model_check("warm_start", LazyWarm)


def test_non_convex_warm_start_is_only_run():
    class NonConvexLazy(LazyWarm):
        name = "nclazy"
        convex = False

    from mtlbench.plugins import PluginMigrationWarning

    with pytest.warns(PluginMigrationWarning, match="without convex = True"):
        run_model_check("warm_start", NonConvexLazy)  # never warm-started by the protocol


def test_the_kit_warns_about_declarations_that_do_not_fit_together():
    """Warm starts declared without ``convex`` (they stay off) and a fit that
    leaves ``converged_`` unset (convergence "not recorded", whatever diagnostics_ says) are
    reported, naming the model and the change."""
    from mtlbench.plugins import PluginMigrationWarning

    class WarmOnly(GoodRidge):
        name = "warmonly"
        supports_warm_start = True

    class Silent(GoodRidge):
        name = "silent"

        def fit(self, tasks, init=None):
            super().fit(tasks)
            del self.converged_
            self.diagnostics_ = {"converged": True}
            return self

    with pytest.warns(PluginMigrationWarning, match="warmonly .*: metadata: supports_warm_"
                                                    "start = True without convex = True"):
        run_model_check("metadata", WarmOnly)
    with pytest.warns(PluginMigrationWarning, match=r"silent .*: fit_shapes: converged_ is "
                                                    r"not set after fit.*\"not recorded\""):
        run_model_check("fit_shapes", Silent)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_model_check("fit_shapes", GoodRidge)
