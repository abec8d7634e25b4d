"""trace-norm / trace-norm-logistic: the optimum of each loss matches cvxpy, the gap certifies
it (ADMM on under-determined tasks too, and FISTA's optimum there), a tiny cap is not converged, W = 0 exactly at lam_ratio = 1, RAMUSA's first stage is the
same problem, both target kinds end to end."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from classic_oracles import (check_not_converged_at_a_tiny_cap, check_optimum,
                             check_targets_end_to_end, small_tasks)
from mtlbench_models.ramusa import stage_solve, trace_lambda_max
from mtlbench_models._core.datafits import SquaredLoss
from mtlbench_models.trace import Trace, TraceAdmm, TraceFista, TraceLogistic


@pytest.mark.parametrize("cls", [Trace, TraceLogistic])
@pytest.mark.parametrize("lam_ratio", [0.05, 0.4])
def test_optimum_matches_cvxpy(cls, lam_ratio):
    tasks = small_tasks(4)
    m = cls(lam_ratio=lam_ratio, tol=1e-7, max_iter=20000).fit(tasks)
    lam = m.penalty_.lam
    check_optimum(m, tasks, lambda B: lam * cp.normNuc(B[0]))


@pytest.mark.parametrize("lam_ratio", [0.05, 0.4])
def test_admm_on_under_determined_tasks_matches_cvxpy_and_fista(lam_ratio):
    """Tasks with fewer rows than features: ``auto`` runs ADMM; its optimum is cvxpy's and
    FISTA's, also from a warm start at another weight."""
    tasks = small_tasks(7, T=5, d=16, n=6)
    m = Trace(lam_ratio=lam_ratio, tol=1e-7, max_iter=20000).fit(tasks)
    assert m._admm(tasks) and set(Trace.solvers) == {"cvxpy", "admm", "fista"}
    check_optimum(m, tasks, lambda B: m.penalty_.lam * cp.normNuc(B[0]))
    ref = TraceFista(lam_ratio=lam_ratio, tol=1e-10, max_iter=50000).fit(tasks)
    start = TraceAdmm(lam_ratio=1.5 * lam_ratio, tol=1e-10, max_iter=50000).fit(tasks)
    warm = TraceAdmm(lam_ratio=lam_ratio, tol=1e-10, max_iter=50000).fit(tasks, init=start)
    assert ref.converged_ and warm.converged_
    assert warm.fitted_objective(tasks) == pytest.approx(ref.fitted_objective(tasks), rel=1e-9)


@pytest.mark.parametrize("cls", [Trace, TraceLogistic])
def test_lambda_max_and_caps(cls):
    tasks = small_tasks(5)
    m = cls(lam_ratio=1.0).fit(tasks)
    assert m.converged_ and m.n_iter_ == 0 and np.all(m.coef_ == 0.0)
    assert np.linalg.matrix_rank(cls(lam_ratio=0.9, tol=1e-8).fit(tasks).coef_) == 1
    check_not_converged_at_a_tiny_cap(cls, tasks, lam_ratio=0.05)


def test_ramusa_stage_one_is_the_trace_model():
    tasks = small_tasks(6)
    m = Trace(lam_ratio=0.2, tol=1e-8, max_iter=20000).fit(tasks)
    loss = SquaredLoss(tasks)
    assert m.penalty_.lam == pytest.approx(0.2 * trace_lambda_max(loss), rel=1e-14)
    out = stage_solve(loss, m.penalty_.lam, None, np.zeros((tasks.d, tasks.T)), tol=1e-10,
                      max_iter=20000)
    W = out[0]
    F = loss.value(W) + m.penalty_.value(W)
    assert abs(F - m.fitted_objective(tasks)) <= 1e-7 * F


@pytest.mark.slow
def test_squared_runs_on_regression_and_logistic_is_refused(tmp_path, shared_data_dir):
    check_targets_end_to_end(tmp_path, shared_data_dir, "trace-norm", "trace-norm-logistic")
