"""CoCMTL: closed-form prox of the co-cluster term vs numerical minimisation; PALM monotone;
the reduced problem equals the minimum over (P, Q) (cvxpy), its gradient (finite differences)
and preconditioner; the stationarity residual is the gradient of F (finite differences); the
fit's history is monotone and ``converged_`` follows the residual rule."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from mtlbench import TaskSet
from mtlbench_models._core.datafits import SquaredLoss
from mtlbench_models.cocmtl import (CoCMTL, ReducedCoCluster, cocluster_penalty,
                                    mean_reg_penalty, prox_cocluster, prox_mean_reg,
                                    stationarity_residual, top_k_truncation)


def _prox_obj(X, Q, tau, k):
    return 0.5 * np.sum((X - Q) ** 2) + tau * cocluster_penalty(X, k)


# seed 0 in the quick loop; the other seeds (seconds of numerical minimisation each) are slow
@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in (1, 2, 3))])
@pytest.mark.parametrize("shape,k", [((5, 4), 2), ((3, 6), 1), ((4, 4), 3)])
def test_prox_cocluster_matches_numerical_minimisation(seed, shape, k):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal(shape)
    tau = float(rng.uniform(0.05, 3.0))
    X = prox_cocluster(Q, tau, k)
    f = lambda x: _prox_obj(x.reshape(shape), Q, tau, k)
    best = np.inf
    for scale in (0.0, 0.5, 2.0):  # non-convex: several starts, derivative-free
        x0 = (Q + scale * rng.standard_normal(shape)).ravel()
        res = minimize(f, x0, method="Powell",
                       options={"xtol": 1e-10, "ftol": 1e-13, "maxiter": 200000})
        best = min(best, res.fun)
    assert f(X.ravel()) <= best + 1e-9
    # the closed form: top-k singular values kept, the rest divided by 1 + 2 tau
    s = np.linalg.svd(Q, compute_uv=False)
    sx = np.linalg.svd(X, compute_uv=False)
    expect = np.sort(np.concatenate([s[:k], s[k:] / (1 + 2 * tau)]))[::-1]
    np.testing.assert_allclose(sx, expect, atol=1e-12)


def test_prox_cocluster_edge_cases_and_tall_wide():
    rng = np.random.default_rng(1)
    for shape in [(30, 7), (7, 30)]:
        Q = rng.standard_normal(shape)
        U, s, Vt = np.linalg.svd(Q, full_matrices=False)
        X = prox_cocluster(Q, 0.7, 3)
        s2 = s.copy()
        s2[3:] /= 1 + 1.4
        np.testing.assert_allclose(X, (U * s2) @ Vt, atol=1e-12)
    Q = rng.standard_normal((6, 4))
    np.testing.assert_allclose(prox_cocluster(Q, 0.0, 2), Q)
    np.testing.assert_allclose(prox_cocluster(Q, 1.0, 4), Q)
    np.testing.assert_allclose(prox_cocluster(Q, 1.0, 0), Q / 3)
    assert cocluster_penalty(Q, 4) == 0.0
    np.testing.assert_allclose(cocluster_penalty(Q, 1),
                               np.sum(np.linalg.svd(Q, compute_uv=False)[1:] ** 2))
    with pytest.raises(ValueError, match="tau"):
        prox_cocluster(Q, -1.0, 2)
    with pytest.raises(ValueError, match="k"):
        prox_cocluster(Q, 1.0, -1)


def test_prox_mean_reg_is_the_exact_minimiser():
    rng = np.random.default_rng(2)
    V = rng.standard_normal((5, 6))
    tau = 0.8
    X = prox_mean_reg(V, tau)
    f = lambda x: 0.5 * np.sum((x.reshape(V.shape) - V) ** 2) \
        + tau * mean_reg_penalty(x.reshape(V.shape))
    g = minimize(f, np.zeros(V.size), method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose(X.ravel(), g.x, atol=1e-6)


def _small_tasks(seed=0, T=12, d=15, n=25):
    rng = np.random.default_rng(seed)
    W = np.zeros((d, T))
    W[:8, :6] = rng.normal(2, 1, (8, 6))
    W[8:, 6:] = rng.normal(-1, 1, (7, 6))
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        s = X @ W[:, t] + 0.3 * rng.standard_normal(n)
        y = np.where(s > np.median(s), 1.0, -1.0)
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("small", Xs, ys)


PALM = 20000       # palm_sweeps >= max_iter: the paper's PALM alone (with the residual rule)


@pytest.mark.parametrize("lam1,lam2,k", [(0.1, 1.0, 2), (1.0, 10.0, 3), (0.01, 0.1, 1)])
@pytest.mark.parametrize("palm_sweeps", [50, PALM])
def test_objective_never_increases(lam1, lam2, k, palm_sweeps):
    tasks = _small_tasks()
    m = CoCMTL(lam1_ratio=lam1, lam2_ratio=lam2, k=k, tol=0.0, max_iter=300,
               palm_sweeps=palm_sweeps).fit(tasks)
    h = np.asarray(m.objective_history_)
    # (tol = 0: the rule never holds, so the fit runs to max_iter)
    assert len(h) == m.n_iter_ + 1 and m.n_iter_ == 300 and not m.converged_
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))
    assert h[-1] < h[0]
    # the recorded value is the paper's objective at the returned (P, Q)
    np.testing.assert_allclose(h[-1], m.objective_from_scratch(tasks), rtol=1e-10)
    np.testing.assert_allclose(m.coef_, m.P_ + m.Q_)


@pytest.mark.parametrize("palm_sweeps", [50, PALM])
def test_fixed_point_is_palm_stationary(palm_sweeps):
    """At convergence (P, Q) is a PALM fixed point: prox-gradient steps with PALM's constant
    leave it unchanged (whichever solver reached it)."""
    tasks = _small_tasks(seed=3)
    m = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-10, max_iter=20000,
               palm_sweeps=palm_sweeps).fit(tasks)
    assert m.converged_
    loss = SquaredLoss(tasks)
    c = m.gamma * loss.lipschitz
    G = loss.grad(m.P_ + m.Q_)
    P2 = prox_mean_reg(m.P_ - G / c, m.lam1_ / c)
    Q2 = prox_cocluster(m.Q_ - G / c, m.lam2_ / c, 2)
    scale = np.linalg.norm(m.coef_)
    assert np.linalg.norm(P2 - m.P_) <= 1e-8 * scale
    assert np.linalg.norm(Q2 - m.Q_) <= 1e-8 * scale


def test_cocmtl_validation_and_warm_start():
    tasks = _small_tasks()
    with pytest.raises(ValueError, match="cocmtl: lam2_ratio"):
        CoCMTL(lam2_ratio=-1).fit(tasks)
    with pytest.raises(ValueError, match="cocmtl: k"):
        CoCMTL(k=0).fit(tasks)
    with pytest.raises(ValueError, match="cocmtl: gamma"):
        CoCMTL(gamma=1.0).fit(tasks)
    with pytest.raises(ValueError, match="cocmtl: palm_sweeps"):
        CoCMTL(palm_sweeps=0).fit(tasks)
    a = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-10, max_iter=5000).fit(tasks)
    b = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-10, max_iter=5000).fit(tasks, init=a)
    assert b.n_iter_ < a.n_iter_
    assert b.objective_history_[-1] <= a.objective_history_[-1] * (1 + 1e-8)
    assert a.decision_function(tasks.X(0), 0).shape == (tasks.X(0).shape[0],)


def _residual(m, tasks):
    """The stopping rule's quantity, recomputed from the fitted (P_, Q_) alone."""
    G = SquaredLoss(tasks).grad(m.coef_)
    res = stationarity_residual(G, m.P_, m.Q_, m.lam1_, m.lam2_, int(m.k))
    lip = SquaredLoss(tasks, "padded").lipschitz
    return res / (lip * max(1.0, np.sqrt(np.sum(m.P_ ** 2) + np.sum(m.Q_ ** 2))))


@pytest.mark.parametrize("palm_sweeps", [50, PALM])
def test_cocmtl_stopping_rule_and_converged_flag(palm_sweeps):
    """converged_ iff ||grad F(P, Q)|| <= tol * Lip(grad J) * max(1, ||(P, Q)||) at the returned
    point (recomputed here); a capped fit is not converged; the history is monotone."""
    tasks = _small_tasks(seed=5)
    m = CoCMTL(lam1_ratio=0.3, lam2_ratio=1.0, k=2, palm_sweeps=palm_sweeps).fit(tasks)
    assert m.converged_ and m.n_iter_ < m.max_iter
    assert _residual(m, tasks) <= m.tol
    assert m.diagnostics_["residual"] == pytest.approx(_residual(m, tasks), rel=1e-6)
    h = np.asarray(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))
    capped = CoCMTL(lam1_ratio=0.3, lam2_ratio=1.0, k=2, palm_sweeps=palm_sweeps,
                    max_iter=3).fit(tasks)
    assert not capped.converged_ and capped.n_iter_ == 3
    assert _residual(capped, tasks) > capped.tol


@pytest.mark.parametrize("seed,lam1,lam2,k", [(6, 0.1, 1.0, 2), (9, 1.0, 3.0, 3),
                                              (10, 0.3, 30.0, 1)])
def test_reduced_phase_reaches_the_palm_objective(seed, lam1, lam2, k):
    """PALM then L-BFGS on the reduced problem ends where PALM alone ends (on these instances
    the same local solution; both certified by the same rule)."""
    tasks = _small_tasks(seed=seed)
    kw = dict(lam1_ratio=lam1, lam2_ratio=lam2, k=k, tol=1e-9, max_iter=20000)
    hybrid = CoCMTL(**kw).fit(tasks)
    palm = CoCMTL(palm_sweeps=PALM, **kw).fit(tasks)
    assert hybrid.converged_ and palm.converged_
    assert hybrid.diagnostics_["lbfgs_iter"] > 0
    assert hybrid.objective_from_scratch(tasks) <= palm.objective_from_scratch(tasks) * (1 + 1e-8)


def test_cocmtl_accelerated_reaches_at_least_plain_palm():
    tasks = _small_tasks(seed=6)
    kw = dict(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-9, max_iter=20000, palm_sweeps=PALM)
    fast = CoCMTL(**kw).fit(tasks)
    plain = CoCMTL(accelerate=False, **kw).fit(tasks)
    assert fast.converged_ and plain.converged_
    assert fast.n_iter_ < plain.n_iter_
    assert fast.objective_history_[-1] <= plain.objective_history_[-1] * (1 + 1e-6)


def test_cocmtl_k_changes_the_fit():
    tasks = _small_tasks(seed=7)
    a = CoCMTL(lam1_ratio=0.1, lam2_ratio=10.0, k=1).fit(tasks)
    b = CoCMTL(lam1_ratio=0.1, lam2_ratio=10.0, k=3).fit(tasks)
    assert np.linalg.norm(a.coef_ - b.coef_) > 1e-3 * np.linalg.norm(b.coef_)


def test_cocmtl_backtracking_matches_fixed_step_palm():
    """Adaptive block step constants (never above PALM's gamma * Lip) keep the objective
    non-increasing and end at the fixed-step PALM objective up to the stopping tolerance."""
    tasks = _small_tasks(seed=4)
    kw = dict(lam1_ratio=0.3, lam2_ratio=1.0, k=2, tol=1e-9, max_iter=20000, palm_sweeps=PALM)
    fixed = CoCMTL(backtrack=False, **kw).fit(tasks)
    adaptive = CoCMTL(backtrack=True, **kw).fit(tasks)
    assert fixed.converged_ and adaptive.converged_
    h = np.asarray(adaptive.objective_history_)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))
    assert all(0 < r <= 1.0 for r in adaptive.diagnostics_["step_ratio"].values())
    assert adaptive.objective_from_scratch(tasks) <= \
        fixed.objective_from_scratch(tasks) * (1 + 1e-7)


def test_report_progress_once_per_iteration_with_the_recorded_objective():
    from mtlbench.progress import listen
    tasks = _small_tasks(seed=2)
    seen = []
    with listen(lambda i, obj, cert: seen.append((i, obj() if callable(obj) else obj, cert))):
        m = CoCMTL(lam1_ratio=0.3, lam2_ratio=1.0, k=2).fit(tasks)
    assert m.diagnostics_["lbfgs_iter"] > 0
    assert [i for i, _, _ in seen] == list(range(1, m.n_iter_ + 1))
    np.testing.assert_allclose([v for _, v, _ in seen], m.objective_history_[1:], rtol=1e-12)
    assert all(c is None for _, _, c in seen)


def test_accepted_accelerated_sweeps_satisfy_palm_sufficient_decrease():
    """Every sweep lowers F by at least (1 - 1/gamma)/2 * min step constant * ||step||^2 from
    its base point; along the iterates this implies F_k - F_{k+1} > 0 unless the step is 0."""
    tasks = _small_tasks(seed=8)
    m = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-12, max_iter=400,
               palm_sweeps=PALM).fit(tasks)
    h = np.asarray(m.objective_history_)
    # never an increase beyond rounding (at the fixed point F moves by ~1e-14 relative)
    assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]))
    assert m.diagnostics_["restarts"] >= 1     # the test did reject some extrapolated sweeps


# ---- the reduced problem ----------------------------------------------------------------------

def _unequal_tasks(seed, T=6, d=7):
    """Tasks with n_t below and above d (both branches of task_eigenrows), unequal sizes."""
    rng = np.random.default_rng(seed)
    sizes = [4, 5, 9, 12, 3, 8][:T]
    Xs = [rng.standard_normal((n, d)) * rng.uniform(0.5, 2.0, d) for n in sizes]
    ys = [rng.permutation(np.where(np.arange(n) % 2 == 0, 1.0, -1.0)) for n in sizes]
    return TaskSet.from_arrays("unequal", Xs, ys)


def _random_factors(red, rng):
    return red.pack(rng.standard_normal(red.d), rng.standard_normal((red.d, red.k)),
                    rng.standard_normal((red.T, red.k)))


@pytest.mark.parametrize("seed,lam1,lam2,k", [(0, 0.5, 2.0, 2), (1, 3.0, 0.2, 1)])
def test_reduced_value_is_the_minimum_over_P_and_Q(seed, lam1, lam2, k):
    """Phi(c 1^T + L) = min over (P, Q) of J(P + Q) + lam1 sum_t ||p_t - c||^2
    + lam2 ||Q - L||^2 (cvxpy), attained at ``recover``'s (P, Q), where F(P, Q) <= Phi and
    grad J(P + Q) is the returned gradient."""
    import cvxpy as cp
    tasks = _unequal_tasks(seed)
    red = ReducedCoCluster(tasks, lam1, lam2, k)
    rng = np.random.default_rng(seed + 10)
    x = _random_factors(red, rng)
    c, U, B = red.unpack(x)
    L = U @ B.T
    phi, _ = red.value_grad(x)
    P, Q = cp.Variable((tasks.d, tasks.T)), cp.Variable((tasks.d, tasks.T))
    W = P + Q
    J = sum(0.5 * cp.sum_squares(tasks.X(t) @ W[:, t] - tasks.y(t)) for t in range(tasks.T))
    obj = J + lam1 * cp.sum_squares(P - c[:, None] @ np.ones((1, tasks.T))) \
        + lam2 * cp.sum_squares(Q - L)
    prob = cp.Problem(cp.Minimize(obj))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10)
    assert phi == pytest.approx(prob.value, rel=1e-7)
    Pr, Qr, GJ = red.recover(x)
    loss = SquaredLoss(tasks)
    # recover splits M = c' 1^T + L' with c' its column mean: the same Phi(M)
    M = red.matrix(x)
    cm = M.mean(axis=1, keepdims=True)
    majorant = (loss.value(Pr + Qr) + lam1 * np.sum((Pr - cm) ** 2)
                + lam2 * np.sum((Qr - (M - cm)) ** 2))
    assert majorant == pytest.approx(phi, rel=1e-10)
    F = loss.value(Pr + Qr) + lam1 * mean_reg_penalty(Pr) + lam2 * cocluster_penalty(Qr, k)
    assert F <= phi * (1 + 1e-12)
    np.testing.assert_allclose(GJ, loss.grad(Pr + Qr), atol=1e-10 * max(1, np.abs(GJ).max()))


def test_reduced_gradient_by_finite_differences_and_preconditioner_is_spd():
    tasks = _unequal_tasks(3)
    red = ReducedCoCluster(tasks, 0.7, 1.5, 2)
    rng = np.random.default_rng(4)
    x = _random_factors(red, rng)
    f, g = red.value_grad(x)
    for _ in range(5):
        v = rng.standard_normal(x.size)
        eps = 1e-6
        fd = (red.value_grad(x + eps * v)[0] - red.value_grad(x - eps * v)[0]) / (2 * eps)
        assert fd == pytest.approx(g @ v, rel=1e-6, abs=1e-8)
    red.refresh_preconditioner(x)
    n = x.size
    H0 = np.column_stack([red.precondition(x, e) for e in np.eye(n)])
    np.testing.assert_allclose(H0, H0.T, atol=1e-10 * np.abs(H0).max())
    assert np.linalg.eigvalsh(0.5 * (H0 + H0.T)).min() > 0


def test_stationarity_residual_is_the_gradient_norm_of_F():
    """Where sigma_k(Q) > sigma_{k+1}(Q), the residual is ||grad F|| (central differences)."""
    tasks = _unequal_tasks(5)
    rng = np.random.default_rng(6)
    d, T, k, lam1, lam2 = tasks.d, tasks.T, 2, 0.8, 1.3
    P, Q = rng.standard_normal((d, T)), rng.standard_normal((d, T))
    loss = SquaredLoss(tasks)
    F = lambda P, Q: loss.value(P + Q) + lam1 * mean_reg_penalty(P) \
        + lam2 * cocluster_penalty(Q, k)
    eps = 1e-6
    gP, gQ = np.zeros_like(P), np.zeros_like(Q)
    for i in range(d):
        for t in range(T):
            E = np.zeros_like(P)
            E[i, t] = eps
            gP[i, t] = (F(P + E, Q) - F(P - E, Q)) / (2 * eps)
            gQ[i, t] = (F(P, Q + E) - F(P, Q - E)) / (2 * eps)
    res = stationarity_residual(loss.grad(P + Q), P, Q, lam1, lam2, k)
    assert res == pytest.approx(np.sqrt(np.sum(gP ** 2) + np.sum(gQ ** 2)), rel=1e-6)
    Qk = top_k_truncation(Q, k)
    s = np.linalg.svd(Q, compute_uv=False)
    assert np.sum((Q - Qk) ** 2) == pytest.approx(np.sum(s[k:] ** 2), rel=1e-10)
