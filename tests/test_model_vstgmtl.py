"""VSTG-MTL (Jeong & Jun, KDD 2018): alternating objective never increases, the three
loss-system solvers agree with a direct solve, the U-step ADMM reaches the cvxpy optimum of
its convex sub-problem, and the fitted model runs on the simulated data.
(The k-support and l_{1,inf} prox oracles live in tests/test_prox.py.)"""
import cvxpy as cp
import numpy as np
import pytest

import mtlbench_models.vstgmtl as vm
from mtlbench import TaskSet
from mtlbench_models.vstgmtl import VSTGMTL, _LossSystem, _Problem, vstg_objective


def _tasks(seed, T=8, d=12, n=14):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, 3)) @ rng.standard_normal((3, T))
    W[d // 2:] = 0.0
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n + t % 3, d))
        s = X @ W[:, t] + 0.3 * rng.standard_normal(X.shape[0])
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("toy", Xs, ys)


@pytest.mark.parametrize("gamma1,gamma2,mu", [(0.05, 0.05, 0.05), (0.01, 0.2, 0.5), (0.3, 1e-4, 0.01)])
def test_alternating_objective_never_increases(gamma1, gamma2, mu):
    tasks = _tasks(0)
    m = VSTGMTL(gamma1=gamma1, gamma2=gamma2, mu=mu, n_bases=4, k=2, tol=0.0, xtol=0.0, max_iter=15,
                admm_max_iter=30, fista_max_iter=50).fit(tasks)
    h = np.array(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1])), np.diff(h).max()
    prob = _Problem(tasks)
    assert h[-1] == pytest.approx(vstg_objective(prob, m.U_, m.V_, m.gamma1_, m.gamma2_, m.mu_, 2),
                                  rel=1e-12)
    np.testing.assert_allclose(m.coef_, m.U_ @ m.V_)


def _direct_solve(prob, V, rho, B):
    d, K = prob.d, V.shape[0]
    H = rho * np.eye(d * K)
    for t, X in enumerate(prob.Xs):
        H += np.kron(np.outer(V[:, t], V[:, t]), X.T @ X)
    return np.linalg.solve(H, B.ravel(order="F")).reshape(d, K, order="F")


@pytest.mark.parametrize("mode", ["dense-dK", "woodbury-N", "cg"])
def test_loss_system_paths_match_direct_solve(mode, monkeypatch):
    tasks = _tasks(1, T=5, d=7, n=6)
    prob = _Problem(tasks)
    rng = np.random.default_rng(2)
    V = rng.standard_normal((3, 5))
    if mode != "dense-dK":
        monkeypatch.setattr(vm, "_DENSE_MAX", 0 if mode == "cg" else 10 ** 6)
        prob.grams = None if mode == "woodbury-N" else prob.grams
    sysm = _LossSystem(prob, V, 0.5)
    assert sysm.mode == mode
    B = rng.standard_normal((7, 3))
    np.testing.assert_allclose(sysm.solve(B, np.zeros((7, 3))), _direct_solve(prob, V, sysm.rho, B),
                               rtol=1e-7, atol=1e-9)
    # rho is scaled by lambda_max(Phi^T Phi) (within the 1% power-iteration margin)
    H = sum(np.kron(np.outer(V[:, t], V[:, t]), X.T @ X) for t, X in enumerate(prob.Xs))
    assert np.linalg.eigvalsh(H)[-1] <= sysm.L * 1.0001 <= 1.03 * np.linalg.eigvalsh(H)[-1]


def test_u_step_reaches_cvxpy_optimum():
    tasks = _tasks(3, T=6, d=8, n=10)
    prob = _Problem(tasks)
    rng = np.random.default_rng(4)
    K = 3
    V = rng.standard_normal((K, prob.T))
    U0 = 0.1 * rng.standard_normal((prob.d, K))
    g1, g2 = 0.5, 1.0
    m = VSTGMTL(admm_max_iter=3000, admm_tol=1e-9)
    F = lambda U_, V_: vstg_objective(prob, U_, V_, g1, g2, 0.0, 2)
    U_admm, _, _ = m._u_step(prob, U0, V, g1, g2, F)
    U = cp.Variable((prob.d, K))
    loss = sum(0.5 * cp.sum_squares(y - X @ U @ V[:, t]) for t, (X, y) in enumerate(zip(prob.Xs, prob.ys)))
    obj = loss + g1 * cp.sum(cp.abs(U)) + g2 * cp.sum(cp.max(cp.abs(U), axis=1))
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL")
    assert F(U_admm, V) <= obj.value * (1 + 1e-6) + 1e-8
    np.testing.assert_allclose(U_admm, U.value, atol=1e-3 * max(1.0, np.abs(U.value).max()))


def test_warm_start_and_groups_on_simulated():
    from mtlbench_datasets.simulated import make_simulated
    ts = make_simulated(0)
    m = VSTGMTL(gamma1=0.01, mu=0.01, n_bases=5, max_iter=5).fit(ts)
    assert m.coef_.shape == (ts.d, ts.T)
    assert m.feature_groups_.shape == (ts.d,) and m.task_groups_.shape == (ts.T,)
    m2 = VSTGMTL(gamma1=0.02, mu=0.01, n_bases=5, max_iter=2).fit(ts, init=m)
    # warm start begins at the previous model's (U, V)
    assert m2.objective_history_[0] == pytest.approx(
        vstg_objective(_Problem(ts), m.U_, m.V_, m2.gamma1_, m2.gamma2_, m2.mu_, 3), rel=1e-12)
    assert np.isfinite(m2.coef_).all()


def test_invalid_hyperparameters():
    tasks = _tasks(0)
    with pytest.raises(ValueError, match="vstgmtl: k"):
        VSTGMTL(n_bases=3, k=0).fit(tasks)
    with pytest.raises(ValueError, match="vstgmtl: n_bases"):
        VSTGMTL(n_bases=0).fit(tasks)
    with pytest.raises(ValueError, match="vstgmtl: gamma1"):
        VSTGMTL(gamma1=-1).fit(tasks)
    with pytest.raises(ValueError, match="vstgmtl: gamma2"):
        VSTGMTL(gamma2=-1).fit(tasks)


def test_k_at_least_n_bases_is_the_l2_model():
    """k >= K: the k-support norm of a K-vector is its l2 norm, so k is clipped to K."""
    tasks = _tasks(5)
    a = VSTGMTL(n_bases=3, k=3, max_iter=5).fit(tasks)
    b = VSTGMTL(n_bases=3, k=7, max_iter=5).fit(tasks)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    v = np.random.default_rng(0).standard_normal(3)
    from mtlbench_models._prox import ksupport_norm
    assert ksupport_norm(v, 3) == pytest.approx(np.linalg.norm(v), rel=1e-12)


def test_stopping_rule_and_converged_flag():
    tasks = _tasks(6)
    m = VSTGMTL(gamma1=0.01, gamma2=0.01, mu=0.05, n_bases=4, k=2).fit(tasks)
    assert m.converged_ is True and m.n_iter_ < m.max_iter
    h = m.objective_history_
    assert h[-2] - h[-1] <= m.tol * abs(h[-2])
    short = VSTGMTL(gamma1=0.01, gamma2=0.01, mu=0.05, n_bases=4, k=2, tol=0.0, xtol=0.0,
                    max_iter=2).fit(tasks)
    assert short.converged_ is False and short.n_iter_ == 2


def test_declared_space_validates_and_is_non_convex():
    from mtlbench.space import Param, normalise_space
    assert VSTGMTL.convex is False and VSTGMTL.supports_warm_start is False
    space = normalise_space(VSTGMTL.search_space)
    assert set(space) == {"gamma1", "gamma2", "mu", "n_bases", "k"}
    assert all(isinstance(p, Param) for p in space.values())
    assert space["n_bases"].kind == "int" and space["k"].kind == "int" and space["k"].low == 1
    assert np.prod([len(p.grid) for p in space.values()]) <= 9
    VSTGMTL().check_params()
    for name, p in space.items():
        for v in p.grid:
            VSTGMTL(**{name: v}).check_params()
