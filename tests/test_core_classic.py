"""The layer's pieces of the classic baselines: the clustered-MTL relaxation (value against
cvxpy's minimum over M, gradient by finite differences, prox by its optimality condition,
conjugate by Fenchel-Young), the mean regulariser with a weight on the mean, ``SmoothSum``'s
duality gap, and FISTA's decreasing step and sparse certificates on the logistic losses."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtlbench import TaskSet
from mtlbench_models._core.datafits import InterceptLogisticLoss, LogisticLoss, SquaredLoss
from mtlbench_models._core.penalties import (L1, ClusterRelaxation, GraphLaplacian,
                                             MeanRegularised, cluster_relaxation_weights)
from mtlbench_models._core.solvers import FISTA, SmoothSum, duality_gap

cp = pytest.importorskip("cvxpy")
CLARABEL = {"solver": "CLARABEL", "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def _tasks(seed: int, d: int = 4, T: int = 3, n: int = 9, binary: bool = True) -> TaskSet:
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n + t, d)) for t in range(T)]
    ys = [rng.standard_normal(n + t) for t in range(T)]
    if binary:
        ys = [np.where(y > 0, 1.0, -1.0) for y in ys]
        for y in ys:
            y[:2] = (1.0, -1.0)
    return TaskSet.from_arrays("toy", Xs, ys, target_kind="binary" if binary else "real")


@pytest.mark.parametrize("shape,k", [((6, 4), 1), ((6, 4), 2.5), ((3, 6), 2)])
def test_cluster_relaxation_is_the_minimum_over_m(shape, k):
    W = np.random.default_rng(1).standard_normal(shape)
    rho1, rho2 = 0.8, 0.3
    g = ClusterRelaxation(rho1, rho2, k)
    T = shape[1]
    M = cp.Variable((T, T), symmetric=True)
    prob = cp.Problem(cp.Minimize(g.c * cp.matrix_frac(W.T, g.eta * np.eye(T) + M)),
                      [M >> 0, np.eye(T) - M >> 0, cp.trace(M) == k])
    prob.solve(**CLARABEL)
    assert g.value(W) == pytest.approx(prob.value, rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), k=st.integers(1, 5),
       shape=st.sampled_from([(3, 5), (7, 5), (24, 40), (40, 24)]))
def test_cluster_relaxation_gradient_prox_and_conjugate(seed, k, shape):
    """Both sides of W; the larger shapes leave most of the spectrum out of the conjugate's
    index range."""
    rng = np.random.default_rng(seed)
    W, D = rng.standard_normal((2,) + shape)
    W[:, :2] *= 3.0                                   # a few leading directions
    g = ClusterRelaxation(float(rng.uniform(0.1, 2)), float(rng.uniform(0.1, 2)), k)
    h = 1e-6
    fd = (g.value(W + h * D) - g.value(W - h * D)) / (2 * h)
    assert fd == pytest.approx(float(np.sum(g.grad(W) * D)), rel=1e-5, abs=1e-7)
    L = float(rng.uniform(0.3, 4))
    X = g.prox(W, L)                                  # L (V - X) = grad g(X)
    np.testing.assert_allclose(L * (W - X), g.grad(X), atol=1e-9)
    Xv, value = g.prox_with_value(W, L)                  # value from the spectrum
    np.testing.assert_allclose(Xv, X, atol=1e-12)
    assert value == pytest.approx(g.value(Xv), rel=1e-10, abs=1e-12)
    Y = L * (W - X)                                   # Fenchel-Young: equality there
    assert g.value(X) + g.conjugate(Y) == pytest.approx(float(np.sum(X * Y)), rel=1e-9)
    A, B = rng.standard_normal((2,) + W.shape)
    assert g.value(A) + g.conjugate(B) >= float(np.sum(A * B)) - 1e-12


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), k=st.floats(0.5, 6.0))
def test_cluster_weights_meet_the_budget_and_the_kkt_conditions(seed, k):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0, 3, 6) * (rng.random(6) < 0.8)
    eta = float(rng.uniform(0.05, 2))
    m = cluster_relaxation_weights(s, eta, k)
    assert m.sum() == pytest.approx(k, rel=1e-12) and np.all((m >= 0) & (m <= 1))
    free = (m > 1e-12) & (m < 1 - 1e-12) & (s > 0)    # interior: s / (eta + m)^2 is one nu
    if free.sum() > 1:
        nu = s[free] / (eta + m[free]) ** 2
        np.testing.assert_allclose(nu, nu[0], rtol=1e-9)


def test_mean_regulariser_with_a_weight_on_the_mean():
    g = MeanRegularised(0.6, lam_mean=0.25)
    V = np.random.default_rng(2).standard_normal((4, 5))
    X = cp.Variable(V.shape)
    mean = cp.sum(X, axis=1) / 5
    expr = 0.6 * cp.sum_squares(X - cp.reshape(mean, (4, 1), order="F") @ np.ones((1, 5))) \
        + 0.25 * 5 * cp.sum_squares(mean)
    prob = cp.Problem(cp.Minimize(2.0 / 2 * cp.sum_squares(X - V) + expr))
    prob.solve(**CLARABEL)
    np.testing.assert_allclose(g.prox(V, 2.0), X.value, atol=1e-6)
    assert g.value(X.value) == pytest.approx(expr.value, rel=1e-8)
    P = g.prox(V, 2.0)
    Y = 2.0 * (V - P)
    assert g.value(P) + g.conjugate(Y) == pytest.approx(float(np.sum(P * Y)), rel=1e-9)
    np.testing.assert_allclose(g.grad(P), Y, atol=1e-12)
    assert not hasattr(MeanRegularised(0.6), "conjugate")   # not finite: no duality gap


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_smooth_sum_gap_bounds_the_distance_to_cvxpys_optimum(loss):
    """J + rho1 tr(W L W^T) + rho2 ||W||_1: the gap is >= F - F* at every iterate and the
    optimum agrees with cvxpy to 1e-6 relative."""
    tasks = _tasks(4, binary=True)
    T, d = tasks.T, tasks.d
    Lg = np.eye(T) - np.full((T, T), 1.0 / T)
    J = SquaredLoss(tasks) if loss == "squared" else LogisticLoss(tasks)
    smooth, pen = SmoothSum(J, GraphLaplacian(0.9, Lg)), L1(0.3)
    W = cp.Variable((d, T))
    if loss == "squared":
        data = sum(0.5 * cp.sum_squares(tasks.X(t) @ W[:, t] - tasks.y(t)) for t in range(T))
    else:
        data = sum(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), tasks.X(t) @ W[:, t])))
                   for t in range(T))
    obj = data + 0.9 * cp.sum_squares(W @ Lg) + 0.3 * cp.sum(cp.abs(W))   # Lg^2 = Lg
    prob = cp.Problem(cp.Minimize(obj))
    prob.solve(**CLARABEL)
    res = FISTA(tol=1e-8, max_iter=20000).solve(smooth, pen, np.zeros((d, T)))
    assert res.converged and res.certificate_kind == "gap"
    F = smooth.value(res.W) + pen.value(res.W)
    assert F == pytest.approx(prob.value, rel=1e-6)
    for V in (np.zeros((d, T)), res.W + 0.1, 0.5 * res.W):
        gap = duality_gap(smooth, pen, V)
        assert gap >= smooth.value(V) + pen.value(V) - prob.value - 1e-7


@pytest.mark.parametrize("intercept", [False, True])
def test_fista_decreasing_step_and_sparse_certificates_reach_the_same_optimum(intercept):
    """FISTA-BKTR (``decrease``) and check_every > 1 change the path, not the answer: the same
    optimum to the gap's accuracy, certified; a cap that is not a multiple of check_every is
    still certified at the cap."""
    tasks = _tasks(7, d=5, T=4, n=12)
    J = InterceptLogisticLoss(tasks) if intercept else LogisticLoss(tasks)
    pen = ClusterRelaxation(0.05, 0.01, 2)
    W0 = np.zeros((tasks.d, tasks.T))
    ref = FISTA(tol=1e-8, max_iter=50000).solve(J, pen, W0)
    new = FISTA(tol=1e-8, max_iter=50000, decrease=0.8, check_every=7).solve(J, pen, W0)
    assert ref.converged and new.converged and new.certificate_kind == "gap"
    F = lambda W: J.value(W) + pen.value(W)
    assert F(new.W) == pytest.approx(F(ref.W), rel=1e-7)
    capped = FISTA(tol=1e-10, max_iter=10, decrease=0.8, check_every=7).solve(J, pen, W0)
    assert not capped.converged and capped.n_iter == 10
    assert capped.certificate == pytest.approx(duality_gap(J, pen, capped.W) / F(capped.W),
                                               rel=1e-9)
    with pytest.raises(ValueError, match="decrease must be in"):
        FISTA(decrease=1.25)
    with pytest.raises(ValueError, match="check_every must be >= 1"):
        FISTA(check_every=0)
