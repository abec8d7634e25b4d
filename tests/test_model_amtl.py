"""AMTL (Lee, Yang & Hwang, ICML 2016): B-step = non-negative weighted lasso per column (cvxpy
oracle), alternating objective never increases, diag(B) = 0 and B >= 0."""
import cvxpy as cp
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench_models.amtl import AMTL, amtl_objective, b_step, task_losses


def _tasks(seed, T=7, d=6, n=12):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((d, 2))
    W = base[:, rng.integers(0, 2, T)] + 0.3 * rng.standard_normal((d, T))
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        s = X @ W[:, t] + (0.2 + t) * 0.3 * rng.standard_normal(n)     # harder tasks later
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("toy", Xs, ys)


@pytest.mark.parametrize("seed,lam,mu", [(0, 1.0, 0.05), (1, 0.3, 0.5), (2, 2.0, 0.01)])
def test_b_step_matches_cvxpy(seed, lam, mu):
    rng = np.random.default_rng(seed)
    d, T = 5, 6
    W = rng.standard_normal((d, T))
    losses = rng.uniform(0.5, 3.0, T)
    B, _ = b_step(W, losses, lam, mu, tol=1e-12, max_pass=20000)
    Bv = cp.Variable((T, T), nonneg=True)
    obj = lam * cp.sum_squares(W - W @ Bv) + mu * cp.sum(cp.multiply(losses[:, None], Bv))
    cp.Problem(cp.Minimize(obj), [cp.diag(Bv) == 0]).solve(solver="CLARABEL")
    ours = lam * np.sum((W - W @ B) ** 2) + mu * np.sum(losses[:, None] * B)
    assert ours <= obj.value + 1e-7 * max(1.0, abs(obj.value))
    np.testing.assert_allclose(B, Bv.value, atol=1e-4)
    assert np.all(B >= 0) and np.all(np.diag(B) == 0)


def test_b_step_per_column_is_weighted_nonnegative_lasso():
    """Column t alone: min_{b >= 0, b_t = 0} lam ||w_t - W b||^2 + mu sum_s l_s b_s."""
    rng = np.random.default_rng(5)
    W = rng.standard_normal((4, 5))
    losses = rng.uniform(0.1, 2, 5)
    B, _ = b_step(W, losses, 0.7, 0.2, tol=1e-12, max_pass=20000)
    t = 2
    b = cp.Variable(5, nonneg=True)
    cp.Problem(cp.Minimize(0.7 * cp.sum_squares(W[:, t] - W @ b) + 0.2 * losses @ b),
               [b[t] == 0]).solve(solver="CLARABEL")
    np.testing.assert_allclose(B[:, t], b.value, atol=1e-5)


@pytest.mark.parametrize("lam,mu", [(1.0, 0.01), (0.1, 0.1), (10.0, 0.05)])
def test_alternating_objective_never_increases_and_constraints_hold(lam, mu):
    tasks = _tasks(3)
    m = AMTL(lam=lam, mu=mu, tol=0.0, max_iter=15).fit(tasks)
    h = np.array(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1])), np.diff(h).max()
    assert np.all(m.B_ >= 0) and np.all(np.diag(m.B_) == 0)
    Xs = [tasks.X(t) for t in range(tasks.T)]
    ys = [tasks.y(t) for t in range(tasks.T)]
    assert h[-1] == pytest.approx(amtl_objective(Xs, ys, m.coef_, m.B_, m.lam_, mu), rel=1e-12)


def test_w_step_solves_the_quadratic():
    tasks = _tasks(4, T=4, d=3, n=8)
    Xs = [tasks.X(t) for t in range(tasks.T)]
    ys = [tasks.y(t) for t in range(tasks.T)]
    rng = np.random.default_rng(0)
    B = np.abs(rng.standard_normal((4, 4)))
    np.fill_diagonal(B, 0)
    m = AMTL(lam=1.0, mu=0.3, cg_max_iter=500)
    lam, mu = 0.8, 0.3
    Xty = np.column_stack([X.T @ y for X, y in zip(Xs, ys)])
    W, _ = m._w_step(Xs, Xty, np.zeros((3, 4)), B, lam, mu)
    Wv = cp.Variable((3, 4))
    c = 1 + mu * B.sum(axis=1)
    obj = sum(c[t] * 0.5 * cp.sum_squares(ys[t] - Xs[t] @ Wv[:, t]) for t in range(4)) \
        + lam * cp.sum_squares(Wv - Wv @ B)
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL")
    np.testing.assert_allclose(W, Wv.value, atol=1e-5)


def test_runs_on_simulated_with_warm_start():
    from mtlbench_datasets.simulated import make_simulated
    ts = make_simulated(0)
    m = AMTL(lam=1.0, mu=0.1, max_iter=3).fit(ts)
    assert m.coef_.shape == (ts.d, ts.T) and m.B_.shape == (ts.T, ts.T)
    m2 = AMTL(lam=10.0, mu=0.1, max_iter=2).fit(ts, init=m)
    assert np.isfinite(m2.coef_).all()


def test_invalid_hyperparameters():
    with pytest.raises(ValueError, match="amtl: lam"):
        AMTL(lam=0).fit(_tasks(0))
    with pytest.raises(ValueError, match="amtl: mu"):
        AMTL(mu=-1).fit(_tasks(0))
