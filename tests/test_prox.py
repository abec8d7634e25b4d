"""Oracles for the k-support-norm and l_{1,inf} helpers of _prox.py (cvxpy / brute force)."""
import cvxpy as cp
import numpy as np
import pytest

from mtlbench_models._prox import (ksupport_norm, project_l1_ball_rows, prox_ksupport_sq,
                                   prox_l1inf_rows)


def _ksupport_sq_cvx(v, k):
    """(||v||_k^sp)^2 by its variational (box-norm) form, solved by cvxpy."""
    p = v.size
    th = cp.Variable(p)
    obj = sum(cp.quad_over_lin(v[i], th[i]) for i in range(p))
    prob = cp.Problem(cp.Minimize(obj), [th >= 0, th <= 1, cp.sum(th) <= k])
    prob.solve(solver="CLARABEL")
    return prob.value


def _ksupport_brute(v, k):
    """Through the dual norm: ||v||^sp_k = max <v, u> s.t. the l2 norm of the k largest |u_i| <= 1."""
    u = cp.Variable(v.size)
    # ||u||_(k) <= 1  <=>  sum of the k largest u_i^2 <= 1 (convex: sum_largest of squares)
    prob = cp.Problem(cp.Maximize(v @ u), [cp.sum_largest(cp.square(u), k) <= 1])
    prob.solve(solver="CLARABEL")
    return prob.value


@pytest.mark.parametrize("seed", range(6))
def test_ksupport_norm_matches_numerical_value(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(3, 12))
    k = int(rng.integers(1, p + 1))
    v = rng.standard_normal(p) * rng.uniform(0.1, 5)
    if seed % 3 == 0:
        v[rng.integers(0, p, 2)] = 0.0
    ours = ksupport_norm(v, k)
    assert ours == pytest.approx(np.sqrt(_ksupport_sq_cvx(v, k)), rel=1e-5, abs=1e-7)
    assert ours == pytest.approx(_ksupport_brute(v, k), rel=1e-5, abs=1e-7)


def test_ksupport_norm_limits():
    v = np.array([3.0, -1.0, 0.5, 2.0])
    assert ksupport_norm(v, 1) == pytest.approx(np.abs(v).sum())
    assert ksupport_norm(v, 4) == pytest.approx(np.linalg.norm(v))


@pytest.mark.parametrize("seed", range(8))
def test_prox_ksupport_sq_matches_cvxpy(seed):
    rng = np.random.default_rng(100 + seed)
    p = int(rng.integers(2, 12))
    k = int(rng.integers(1, p + 1))
    lam = float(rng.uniform(0.05, 5))
    v = rng.standard_normal(p) * rng.uniform(0.1, 5)
    if seed % 4 == 0:
        v[0] = 0.0
        v[-1] = v[1] if p > 2 else v[-1]       # ties
    w, th = cp.Variable(p), cp.Variable(p)
    obj = 0.5 * cp.sum_squares(w - v) + lam / 2 * sum(cp.quad_over_lin(w[i], th[i]) for i in range(p))
    cp.Problem(cp.Minimize(obj), [th >= 0, th <= 1, cp.sum(th) <= k]).solve(solver="CLARABEL")
    ours = prox_ksupport_sq(v, lam, k)
    np.testing.assert_allclose(ours, w.value, atol=2e-4 * max(1.0, np.abs(v).max()))
    # our point is at least as good as the solver's on the exact objective
    f = lambda x: 0.5 * np.sum((x - v) ** 2) + lam / 2 * ksupport_norm(x, k) ** 2
    assert f(ours) <= f(w.value) + 1e-7


def test_prox_ksupport_sq_columnwise_and_limits():
    rng = np.random.default_rng(7)
    V = rng.standard_normal((6, 5))
    lam = np.array([0.1, 0.5, 1.0, 2.0, 0.0])
    out = prox_ksupport_sq(V, lam, 2)
    for j in range(5):
        np.testing.assert_allclose(out[:, j], prox_ksupport_sq(V[:, j], lam[j], 2))
    np.testing.assert_allclose(out[:, 4], V[:, 4])               # lam = 0: identity
    # k >= p: squared l2 norm -> v / (1 + lam)
    np.testing.assert_allclose(prox_ksupport_sq(V[:, 0], 0.7, 6), V[:, 0] / 1.7)


@pytest.mark.parametrize("seed", range(5))
def test_prox_l1inf_matches_cvxpy(seed):
    rng = np.random.default_rng(200 + seed)
    n, m = int(rng.integers(1, 6)), int(rng.integers(1, 8))
    V = rng.standard_normal((n, m)) * rng.uniform(0.1, 3)
    tau = float(rng.uniform(0.05, 3))
    X = cp.Variable((n, m))
    obj = 0.5 * cp.sum_squares(X - V) + tau * cp.sum(cp.max(cp.abs(X), axis=1))
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL")
    np.testing.assert_allclose(prox_l1inf_rows(V, tau), X.value, atol=1e-5 * max(1.0, np.abs(V).max()))


def test_project_l1_ball_rows():
    rng = np.random.default_rng(9)
    V = rng.standard_normal((5, 7)) * 3
    P = project_l1_ball_rows(V, 1.5)
    assert np.all(np.abs(P).sum(axis=1) <= 1.5 + 1e-12)
    x = cp.Variable(7)
    cp.Problem(cp.Minimize(cp.sum_squares(x - V[0])), [cp.norm1(x) <= 1.5]).solve(solver="CLARABEL")
    np.testing.assert_allclose(P[0], x.value, atol=1e-6)
    small = V * 0.01
    np.testing.assert_allclose(project_l1_ball_rows(small, 10.0), small)
