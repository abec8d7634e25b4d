"""CoCMTL: closed-form prox of the co-cluster term vs numerical minimisation; PALM monotone."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from mtlbench import TaskSet
from mtlbench_models.cocmtl import (CoCMTL, cocluster_penalty, mean_reg_penalty,
                                    prox_cocluster, prox_mean_reg)


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


@pytest.mark.parametrize("lam1,lam2,k", [(0.1, 1.0, 2), (1.0, 10.0, 3), (0.01, 0.1, 1)])
def test_palm_objective_never_increases(lam1, lam2, k):
    tasks = _small_tasks()
    m = CoCMTL(lam1_ratio=lam1, lam2_ratio=lam2, k=k, tol=0.0, max_iter=300).fit(tasks)
    h = np.asarray(m.objective_history_)
    # (tol = 0: runs to max_iter unless F stops changing to the last bit)
    assert len(h) == m.n_iter_ + 1 and m.n_iter_ <= 300
    assert m.n_iter_ == 300 or h[-1] == h[-2]
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))
    assert h[-1] < h[0]
    # the recorded value is the paper's objective at the returned (P, Q)
    np.testing.assert_allclose(h[-1], m.objective_from_scratch(tasks), rtol=1e-10)
    np.testing.assert_allclose(m.coef_, m.P_ + m.Q_)


def test_palm_fixed_point_is_stationary():
    """At convergence (P, Q) is a PALM fixed point: prox-gradient steps leave it unchanged."""
    tasks = _small_tasks(seed=3)
    m = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-14, max_iter=20000).fit(tasks)
    from mtlbench_models._losses import SquaredLoss
    loss = SquaredLoss(tasks)
    c = m.gamma * loss.lipschitz
    G = loss.grad(m.P_ + m.Q_)
    P2 = prox_mean_reg(m.P_ - G / c, m.lam1_ / c)
    Q2 = prox_cocluster(m.Q_ - G / c, m.lam2_ / c, 2)
    scale = np.linalg.norm(m.coef_)
    assert np.linalg.norm(P2 - m.P_) <= 1e-5 * scale
    assert np.linalg.norm(Q2 - m.Q_) <= 1e-5 * scale


def test_cocmtl_validation_and_warm_start():
    tasks = _small_tasks()
    with pytest.raises(ValueError, match="cocmtl: lam2_ratio"):
        CoCMTL(lam2_ratio=-1).fit(tasks)
    with pytest.raises(ValueError, match="cocmtl: k"):
        CoCMTL(k=0).fit(tasks)
    with pytest.raises(ValueError, match="cocmtl: gamma"):
        CoCMTL(gamma=1.0).fit(tasks)
    a = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-10, max_iter=5000).fit(tasks)
    b = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-10, max_iter=5000).fit(tasks, init=a)
    assert b.n_iter_ < a.n_iter_
    assert b.objective_history_[-1] <= a.objective_history_[-1] * (1 + 1e-8)
    assert a.decision_function(tasks.X(0), 0).shape == (tasks.X(0).shape[0],)


@pytest.mark.parametrize("accelerate", [True, False])
def test_cocmtl_stopping_rule_and_converged_flag(accelerate):
    """Stops when the relative objective change <= tol AND the relative iterate change <= xtol;
    converged_ says whether that happened before max_iter; both variants are monotone."""
    tasks = _small_tasks(seed=5)
    m = CoCMTL(lam1_ratio=0.3, lam2_ratio=1.0, k=2, accelerate=accelerate).fit(tasks)
    h = np.asarray(m.objective_history_)
    assert m.converged_ and m.n_iter_ < m.max_iter
    F0 = 0.5 * sum(float(tasks.y(t) @ tasks.y(t)) for t in range(tasks.T))   # F(0, 0)
    assert abs(h[-2] - h[-1]) <= m.tol * max(abs(h[-1]), F0)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))
    capped = CoCMTL(lam1_ratio=0.3, lam2_ratio=1.0, k=2, accelerate=accelerate,
                    max_iter=3).fit(tasks)
    assert not capped.converged_ and capped.n_iter_ == 3


def test_cocmtl_accelerated_reaches_at_least_plain_palm():
    tasks = _small_tasks(seed=6)
    kw = dict(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-10, xtol=1e-8, max_iter=20000)
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
    kw = dict(lam1_ratio=0.3, lam2_ratio=1.0, k=2, tol=1e-10, xtol=1e-8, max_iter=20000)
    fixed = CoCMTL(backtrack=False, **kw).fit(tasks)
    adaptive = CoCMTL(backtrack=True, **kw).fit(tasks)
    assert fixed.converged_ and adaptive.converged_
    h = np.asarray(adaptive.objective_history_)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))
    assert all(0 < r <= 1.0 for r in adaptive.diagnostics_["step_ratio"].values())
    assert adaptive.objective_from_scratch(tasks) <= \
        fixed.objective_from_scratch(tasks) * (1 + 1e-7)


def test_report_progress_once_per_sweep_with_the_recorded_objective():
    from mtlbench.progress import listen
    tasks = _small_tasks(seed=2)
    seen = []
    with listen(lambda i, obj, cert: seen.append((i, obj() if callable(obj) else obj, cert))):
        m = CoCMTL(lam1_ratio=0.3, lam2_ratio=1.0, k=2).fit(tasks)
    assert [i for i, _, _ in seen] == list(range(1, m.n_iter_ + 1))
    np.testing.assert_allclose([v for _, v, _ in seen], m.objective_history_[1:], rtol=1e-12)
    assert all(c is None for _, _, c in seen)


def test_accepted_accelerated_sweeps_satisfy_palm_sufficient_decrease():
    """Every sweep lowers F by at least (1 - 1/gamma)/2 * min step constant * ||step||^2 from
    its base point; along the iterates this implies F_k - F_{k+1} > 0 unless the step is 0."""
    tasks = _small_tasks(seed=8)
    m = CoCMTL(lam1_ratio=0.1, lam2_ratio=1.0, k=2, tol=1e-12, xtol=1e-10,
               max_iter=400).fit(tasks)
    h = np.asarray(m.objective_history_)
    # never an increase beyond rounding (at the fixed point F moves by ~1e-14 relative)
    assert np.all(np.diff(h) <= 1e-12 * np.abs(h[:-1]))
    assert m.diagnostics_["restarts"] >= 1     # the test did reject some extrapolated sweeps
