"""NC-CMTL (Nie, Hu & Li, KDD 2018): MM oracles.

* every re-weighted step does not increase the paper's objective F (not a proxy);
* the per-task closed form equals a direct (cvxpy) minimisation of the majoriser, on both
  solve paths (d <= n_t: Gram side; d > n_t: push-through / Woodbury side);
* F's regulariser equals a brute-force eigen-decomposition of W W^T + s I.
"""
import cvxpy as cp
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench_models.nc_cmtl import (NCCMTL, majoriser_solve, nc_cmtl_objective,
                                     reweight_matrix)


def _tasks(seed, T=6, d=10, n=15, grow=1):
    """T tasks, task t with n + grow * (t % 6) rows (unequal sizes: the padded stacks)."""
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, 2)) @ rng.standard_normal((2, T))
    Xs, ys = [], []
    for t in range(T):
        m = n + grow * (t % 6)
        X = rng.standard_normal((m, d))
        s = X @ W[:, t] + 0.5 * rng.standard_normal(m)
        y = np.where(s > np.median(s), 1.0, -1.0)
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("toy", Xs, ys)


@pytest.mark.parametrize("d,n,T", [(8, 20, 6), (30, 12, 6), (10, 6, 25)])
@pytest.mark.parametrize("mu", [0.1, 3.0])
def test_each_reweighted_step_does_not_increase_true_objective(d, n, T, mu):
    tasks = _tasks(1, T=T, d=d, n=n)
    m = NCCMTL(mu=mu, tol=0.0, xtol=0.0, max_iter=25).fit(tasks)
    h = np.array(m.objective_history_)
    assert len(h) == m.n_iter_ + 1
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1])), np.diff(h).max()
    # the recorded value is the paper's objective of the returned W
    Xs = [tasks.X(t) for t in range(tasks.T)]
    ys = [tasks.y(t) for t in range(tasks.T)]
    assert h[-1] == pytest.approx(nc_cmtl_objective(Xs, ys, m.coef_, mu), rel=1e-12)


@pytest.mark.parametrize("q", [1.0, 0.5])
def test_steps_monotone_for_other_q(q):
    tasks = _tasks(2, d=12, n=10)
    h = np.array(NCCMTL(mu=1.0, q=q, tol=0.0, xtol=0.0, max_iter=15).fit(tasks).objective_history_)
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1]))


def test_regulariser_matches_brute_force_eigenvalues():
    rng = np.random.default_rng(3)
    W = rng.standard_normal((7, 4))
    s, mu = 2.5, 0.7
    lam = np.linalg.eigvalsh(W @ W.T + s * np.eye(7))
    Xs = [np.zeros((3, 7))] * 4
    ys = [np.ones(3)] * 4                     # loss = sum_t ||1||/sqrt(3) = 4
    expected = 4.0 + mu * np.log1p(np.sqrt(lam)).sum()
    assert nc_cmtl_objective(Xs, ys, W, mu, 1.0, s) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("d,n", [(6, 15), (25, 9)])
def test_closed_form_matches_direct_minimisation_of_majoriser(d, n):
    rng = np.random.default_rng(4)
    T, s, mu, q = 5, 1.5, 0.8, 1.0
    W0 = rng.standard_normal((d, T))
    X = rng.standard_normal((n, d))
    y = np.sign(rng.standard_normal(n))
    w_prev = W0[:, 0]
    e = np.linalg.norm(y - X @ w_prev)
    dt = e ** (q - 2)
    # D from a brute-force eigen-decomposition (independent of reweight_matrix)
    lam, V = np.linalg.eigh(W0 @ W0.T + s * np.eye(d))
    D = (V * (1.0 / (2 * np.sqrt(lam) * (1 + np.sqrt(lam))))) @ V.T
    w = cp.Variable(d)
    # majoriser of task 0 (terms constant in w dropped)
    maj = (q / (2 * np.sqrt(n)) * dt * cp.sum_squares(y - X @ w)
           + mu * cp.quad_form(w, cp.psd_wrap(D)))
    cp.Problem(cp.Minimize(maj)).solve(solver="CLARABEL")
    a, P, delta = reweight_matrix(W0, s)
    rho = mu * np.sqrt(n) / (q * dt)
    ours = majoriser_solve(X, y, rho, a, P, delta)
    np.testing.assert_allclose(ours, w.value, rtol=1e-5, atol=1e-6 * np.abs(w.value).max())
    # both solve paths agree
    gram_path = majoriser_solve(X, y, rho, a, P, delta, gram=X.T @ X, Xty=X.T @ y)
    np.testing.assert_allclose(ours, gram_path, rtol=1e-8, atol=1e-10)


def test_invalid_hyperparameters_name_model_and_parameter():
    tasks = _tasks(0)
    with pytest.raises(ValueError, match="nc-cmtl: mu"):
        NCCMTL(mu=-1).fit(tasks)
    with pytest.raises(ValueError, match="nc-cmtl: q"):
        NCCMTL(q=3).fit(tasks)
    with pytest.raises(ValueError, match="nc-cmtl: q"):
        NCCMTL(q=0.0).fit(tasks)
    with pytest.raises(ValueError, match="nc-cmtl: max_iter"):
        NCCMTL(max_iter=0).fit(tasks)


def test_stopping_rule_and_converged_flag():
    tasks = _tasks(5, d=8, n=20)
    m = NCCMTL(mu=3.0).fit(tasks)
    assert m.converged_ is True and m.n_iter_ < m.max_iter
    h = m.objective_history_
    assert h[-2] - h[-1] <= m.tol * abs(h[-2])
    short = NCCMTL(mu=3.0, tol=0.0, xtol=0.0, max_iter=2).fit(tasks)
    assert short.converged_ is False and short.n_iter_ == 2


def test_declared_space_validates_non_convex_and_cold():
    from mtlbench.search.space import Param, normalise_space, space_problems
    assert NCCMTL.convex is False and NCCMTL.supports_warm_start is False
    space = normalise_space(NCCMTL.search_space)
    assert all(isinstance(p, Param) for p in space.values())
    assert space_problems(space) == []
    NCCMTL().check_params()
    for v in space["mu"].grid:
        NCCMTL(mu=v).check_params()
    tasks = _tasks(6)
    a = NCCMTL(mu=2.0).fit(tasks)
    b = NCCMTL(mu=2.0).fit(tasks, init=NCCMTL(mu=50.0).fit(tasks))   # init is ignored
    np.testing.assert_array_equal(a.coef_, b.coef_)


def test_runs_on_simulated_and_predicts():
    from mtlbench_datasets.simulated import make_simulated
    ts = make_simulated(0)
    m = NCCMTL(mu=10.0).fit(ts)
    assert m.coef_.shape == (ts.d, ts.T)
    assert np.isfinite(m.decision_function(ts.X(0), 0)).all()


def test_batched_gram_side_step_equals_per_task_closed_form():
    """One MM step of the fit (all tasks on the Gram side: one batched solve) equals the per-task
    closed form ``majoriser_solve`` from W^0 = [X_t^T y_t]."""
    tasks = _tasks(7, d=8, n=20)
    mu, q, s = 2.0, 1.0, 10.0
    m = NCCMTL(mu=mu, tol=0.0, xtol=0.0, max_iter=1).fit(tasks)
    Xs = [tasks.X(t) for t in range(tasks.T)]
    ys = [tasks.y(t) for t in range(tasks.T)]
    W0 = np.column_stack([X.T @ y for X, y in zip(Xs, ys)])
    a, P, delta = reweight_matrix(W0, s)
    expected = np.column_stack([
        majoriser_solve(X, y, mu * np.sqrt(y.shape[0]) * np.linalg.norm(y - X @ W0[:, t]) / q,
                        a, P, delta)
        for t, (X, y) in enumerate(zip(Xs, ys))])
    np.testing.assert_allclose(m.coef_, expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("d,n,T", [(30, 12, 6), (40, 9, 6), (14, 6, 30)])
def test_batched_push_through_step_equals_per_task_closed_form(d, n, T):
    """A fit whose tasks are all on the push-through side (d > n_t) takes the batched step
    (T < d: thin SVD, ``push_through_step``; d <= T: eigh of WW^T + sI,
    ``push_through_step_full``); one MM step equals the per-task closed form
    ``majoriser_solve`` from W^0."""
    tasks = _tasks(5, T=T, d=d, n=n)
    mu, q, s = 0.7, 1.0, 10.0
    m = NCCMTL(mu=mu, tol=0.0, xtol=0.0, max_iter=1).fit(tasks)
    Xs = [tasks.X(t) for t in range(tasks.T)]
    ys = [tasks.y(t) for t in range(tasks.T)]
    assert all(X.shape[0] < d for X in Xs)
    W0 = np.column_stack([X.T @ y for X, y in zip(Xs, ys)])
    a, P, delta = reweight_matrix(W0, s)
    expected = np.column_stack([
        majoriser_solve(X, y, mu * np.sqrt(y.shape[0]) * np.linalg.norm(y - X @ W0[:, t]) / q,
                        a, P, delta)
        for t, (X, y) in enumerate(zip(Xs, ys))])
    np.testing.assert_allclose(m.coef_, expected, rtol=1e-9, atol=1e-12)


def test_report_progress_once_per_mm_step():
    from mtlbench.progress import listen
    tasks = _tasks(8, d=30, n=12)          # push-through side, unequal task sizes (padding)
    seen = []
    with listen(lambda i, obj, cert: seen.append((i, obj() if callable(obj) else obj, cert))):
        m = NCCMTL(mu=2.0).fit(tasks)
    assert [i for i, _, _ in seen] == list(range(0, m.n_iter_ + 1))
    np.testing.assert_allclose([v for _, v, _ in seen], m.objective_history_, rtol=1e-12)
