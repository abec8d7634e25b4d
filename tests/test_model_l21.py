"""l21 / l21-logistic: the optimum of each loss matches cvxpy, the gap certifies it, a tiny cap
is not converged, W = 0 exactly at lam_ratio = 1, both target kinds end to end."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from classic_oracles import (check_not_converged_at_a_tiny_cap, check_optimum,
                             check_targets_end_to_end, small_tasks, tiny)
from mtlbench_models.l21 import L21, L21Logistic


@pytest.mark.parametrize("cls", [L21, L21Logistic])
@pytest.mark.parametrize("lam_ratio", [0.05, 0.4])
def test_optimum_matches_cvxpy(cls, lam_ratio):
    tasks = small_tasks(1)
    m = cls(lam_ratio=lam_ratio, tol=1e-7, max_iter=20000).fit(tasks)
    lam = m.penalty_.lam
    check_optimum(m, tasks, lambda B: lam * cp.sum(cp.norm(B[0], 2, axis=1)))


@pytest.mark.parametrize("cls", [L21, L21Logistic])
def test_lambda_max_and_caps(cls):
    tasks = small_tasks(2)
    m = cls(lam_ratio=1.0).fit(tasks)
    assert m.converged_ and m.n_iter_ == 0 and np.all(m.coef_ == 0.0)
    assert np.any(cls(lam_ratio=0.99, tol=1e-8).fit(tasks).coef_ != 0.0)
    check_not_converged_at_a_tiny_cap(cls, tasks, lam_ratio=0.05)


def test_logistic_intercepts_enter_the_scores():
    tasks = small_tasks(3)
    m = L21Logistic(lam_ratio=1.0).fit(tasks)
    # W = 0: each task's intercept is the log-odds of its labels, its scores that constant
    for t in range(tasks.T):
        y = tasks.y(t)
        assert m.intercept_[t] == pytest.approx(np.log(np.sum(y > 0) / np.sum(y < 0)), abs=1e-10)
        assert np.allclose(m.decision_function(tasks.X(t), t), m.intercept_[t])


@pytest.mark.slow
def test_squared_runs_on_regression_and_logistic_is_refused(tmp_path, shared_data_dir):
    check_targets_end_to_end(tmp_path, shared_data_dir, "l21", "l21-logistic")


@pytest.mark.parametrize("binary", [False, True])
def test_the_cvxpy_race_solver_reaches_the_models_optimum(binary):
    """``solvers["cvxpy"]`` (``CvxpyFit`` on the shared conic helper) minimises the same
    objective as the model's own solver."""
    cls = L21Logistic if binary else L21
    tasks = tiny(0, binary)
    ours = cls(tol=1e-9).fit(tasks).fitted_objective(tasks)
    conic = cls.solvers["cvxpy"]().fit(tasks)
    assert conic.diagnostics_["conic_solver"] in ("CLARABEL", "ECOS", "SCS")
    assert conic.fitted_objective(tasks) == pytest.approx(ours, rel=1e-8)


def test_the_conic_problem_is_refused_above_its_size_in_one_line():
    from mtlbench_models._core.conic import CVXPY_MAX_ENTRIES, stacked_design

    X = np.empty((CVXPY_MAX_ENTRIES // 10 + 1, 10))
    with pytest.raises(ValueError, match=r"^l21 \(cvxpy\): the conic problem is not built"):
        stacked_design("l21", [X], [np.zeros(X.shape[0])])
