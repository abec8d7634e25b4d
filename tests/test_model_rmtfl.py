"""rMTFL: objective within 1e-5 (relative) of a cvxpy solve of the same convex problem."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import TaskSet
from mtlbench_models._core.datafits import SquaredLoss
from mtlbench_models.rmtfl import RMTFL, rmtfl_lambda_max


def _tasks(seed, T=6, d=8, n=12, outliers=(0,)):
    rng = np.random.default_rng(seed)
    W = np.zeros((d, T))
    W[:3] = rng.normal(1.0, 0.5, (3, T))           # shared rows
    for t in outliers:
        W[:, t] = rng.normal(0.0, 2.0, d)            # outlier columns
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        s = X @ W[:, t] + 0.5 * rng.standard_normal(n)
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("small", Xs, ys)


def _cvxpy_objective(tasks, lam1, lam2):
    d, T = tasks.d, tasks.T
    P = cp.Variable((d, T))
    Q = cp.Variable((d, T))
    W = P + Q
    loss = sum(0.5 * cp.sum_squares(tasks.X(t) @ W[:, t] - tasks.y(t)) for t in range(T))
    pen = lam1 * cp.sum(cp.norm(P, 2, axis=1)) + lam2 * cp.sum(cp.norm(Q, 2, axis=0))
    prob = cp.Problem(cp.Minimize(loss + pen))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-9, tol_gap_rel=1e-9)
    return prob.value


@pytest.mark.parametrize("seed,r1,r2", [(0, 0.05, 0.25), (1, 0.25, 0.05), (2, 0.01, 1.0),
                                        (3, 0.3, 0.3)])
def test_rmtfl_objective_matches_cvxpy(seed, r1, r2):
    tasks = _tasks(seed)
    m = RMTFL(lam1_ratio=r1, lam2_ratio=r2, tol=1e-11, max_iter=50000).fit(tasks)
    ref = _cvxpy_objective(tasks, m.lam1_, m.lam2_)
    ours = m.fitted_objective(tasks)
    assert ours == pytest.approx(m.objective_history_[-1], rel=1e-12)
    assert abs(ours - ref) <= 1e-5 * abs(ref), (ours, ref)
    np.testing.assert_allclose(m.coef_, m.P_ + m.Q_)
    assert m.P_.shape == m.Q_.shape == (tasks.d, tasks.T)


def test_rmtfl_exposes_shared_rows_and_outlier_columns():
    tasks = _tasks(5, T=8, d=10, n=40, outliers=(2,))
    m = RMTFL(lam1_ratio=0.1, lam2_ratio=0.4, tol=1e-9).fit(tasks)
    assert m.task_outliers_.dtype == bool and m.task_outliers_.shape == (tasks.T,)
    assert m.shared_features_.shape == (tasks.d,)
    # zero rows of P and zero columns of Q are exact zeros (group shrinkage)
    rows = np.linalg.norm(m.P_, axis=1)
    cols = np.linalg.norm(m.Q_, axis=0)
    assert np.all((rows == 0) | (rows > 1e-12)) and np.all((cols == 0) | (cols > 1e-12))
    assert m.diagnostics_["outlier_tasks"] == np.flatnonzero(cols > 0).tolist()


def test_rmtfl_lambda_max_gives_zero_solution():
    tasks = _tasks(7)
    m = RMTFL(lam1_ratio=1.0, lam2_ratio=1.0).fit(tasks)
    # exact zeros by construction (no arithmetic touches them at lambda_max)
    assert np.all(m.coef_ == 0) and m.n_iter_ == 0
    # just below lambda_max the solver runs; its solution is tiny relative to the data scale
    m1, m2 = rmtfl_lambda_max(SquaredLoss(tasks))
    near = RMTFL(lam1_ratio=1.0 - 1e-9, lam2_ratio=1.0 - 1e-9, tol=1e-10).fit(tasks)
    assert np.abs(near.coef_).max() <= 1e-6 * max(m1, m2)
    m1, m2 = rmtfl_lambda_max(SquaredLoss(tasks))
    assert m.lam1_ == pytest.approx(m1) and m.lam2_ == pytest.approx(m2)


def test_rmtfl_warm_start_and_validation():
    tasks = _tasks(8)
    a = RMTFL(lam1_ratio=0.05, lam2_ratio=0.25, tol=1e-9).fit(tasks)
    b = RMTFL(lam1_ratio=0.05, lam2_ratio=0.25, tol=1e-9).fit(tasks, init=a)
    assert b.n_iter_ <= 3
    assert b.fitted_objective(tasks) == pytest.approx(a.fitted_objective(tasks), rel=1e-8)
    with pytest.raises(ValueError, match="rmtfl: lam1_ratio"):
        RMTFL(lam1_ratio=-0.1).fit(tasks)
    with pytest.raises(ValueError, match="rmtfl: max_iter"):
        RMTFL(max_iter=0).fit(tasks)


def test_rmtfl_stops_on_its_relative_duality_gap():
    """The stated rule: gap(P, Q) <= tol * F(P, Q); the gap bounds the distance to the optimum
    (F - F* <= gap, checked against cvxpy); a capped fit reports converged_ = False."""
    from mtlbench_models.rmtfl import rmtfl_gap, rmtfl_penalty
    tasks = _tasks(11, T=7, d=9, n=15)
    m = RMTFL(lam1_ratio=0.1, lam2_ratio=0.3, tol=1e-6).fit(tasks)
    loss = SquaredLoss(tasks)
    F = m.fitted_objective(tasks)
    gap = rmtfl_gap(m.coef_, loss.grad(m.coef_), 2 * loss.value(m.coef_),
                    rmtfl_penalty(m.P_, m.Q_, m.lam1_, m.lam2_), m.lam1_, m.lam2_)
    assert m.converged_ and m.diagnostics_["converged"]
    assert 0 <= gap <= 1e-6 * F * (1 + 1e-6)
    ref = _cvxpy_objective(tasks, m.lam1_, m.lam2_)
    assert F - ref <= gap + 1e-7 * abs(ref)
    capped = RMTFL(lam1_ratio=0.1, lam2_ratio=0.3, tol=1e-12, max_iter=2).fit(tasks)
    assert not capped.converged_ and capped.n_iter_ == 2


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), r1=st.floats(0.05, 0.9), r2=st.floats(0.05, 0.9),
       scale=st.floats(0.0, 2.0))
def test_rmtfl_gap_is_an_upper_bound_anywhere(seed, r1, r2, scale):
    """Weak duality: at any (P, Q), gap >= F(P, Q) - F* >= 0."""
    from mtlbench_models.rmtfl import rmtfl_gap, rmtfl_penalty
    tasks = _tasks(seed % 7)
    opt = RMTFL(lam1_ratio=r1, lam2_ratio=r2, tol=1e-12, max_iter=50000).fit(tasks)
    F_opt = opt.fitted_objective(tasks)
    rng = np.random.default_rng(seed)
    P = opt.P_ + scale * rng.standard_normal(opt.P_.shape)
    Q = opt.Q_ + scale * rng.standard_normal(opt.Q_.shape)
    loss = SquaredLoss(tasks)
    W = P + Q
    pen = rmtfl_penalty(P, Q, opt.lam1_, opt.lam2_)
    F = loss.value(W) + pen
    gap = rmtfl_gap(W, loss.grad(W), 2 * loss.value(W), pen, opt.lam1_, opt.lam2_)
    assert gap >= F - F_opt - 1e-9 * F
