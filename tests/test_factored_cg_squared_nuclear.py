"""The layer pieces of the factored models: ``Factored`` (J(A X), J(X B)) gradients against
finite differences and its Lipschitz bound; ``ConjugateGradient`` against the closed-form
ridge and monotone; ``SquaredNuclear``'s prox against cvxpy and its conjugate by the
Fenchel-Young equality at the prox."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from classic_oracles import left_factor_optimum
from mtlbench import TaskSet
from mtlbench_models._core.datafits import LogisticLoss, SquaredLoss
from mtlbench_models._core.factored import Factored
from mtlbench_models._core.penalties import SquaredFrobenius, SquaredNuclear
from mtlbench_models._core.quadratic import ConjugateGradient


def _tasks(seed=0, d=5, T=4, n=9):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n + t, d)) for t in range(T)]
    ys = [np.where(rng.standard_normal(n + t) > 0, 1.0, -1.0) for t in range(T)]
    for y in ys:
        y[:2] = [1.0, -1.0]
    return TaskSet.from_arrays("tiny", Xs, ys)


@pytest.mark.parametrize("loss", [SquaredLoss, LogisticLoss])
@pytest.mark.parametrize("side", ["left", "right"])
def test_factored_gradient_matches_finite_differences(loss, side):
    tasks = _tasks()
    rng = np.random.default_rng(1)
    J = loss(tasks)
    k = 3
    if side == "left":
        F = Factored(J, left=rng.standard_normal((tasks.d, k)))
        X = rng.standard_normal((k, tasks.T))
    else:
        F = Factored(J, right=rng.standard_normal((k, tasks.T)))
        X = rng.standard_normal((tasks.d, k))
    assert F.value(X) == pytest.approx(J.value(F.product(X)), rel=1e-14)
    G = F.grad(X)
    D = rng.standard_normal(X.shape)
    h = 1e-6
    fd = (F.value(X + h * D) - F.value(X - h * D)) / (2 * h)
    assert np.sum(G * D) == pytest.approx(fd, rel=1e-6)
    # the Lipschitz bound: ||grad(X) - grad(Y)|| <= lip ||X - Y||
    Y = X + rng.standard_normal(X.shape)
    lip = F.lipschitz * (1 + 1e-12)
    assert np.linalg.norm(F.grad(X) - F.grad(Y)) <= lip * np.linalg.norm(X - Y)


def test_cg_reaches_the_ridge_closed_form_monotonically():
    tasks = _tasks(2)
    rng = np.random.default_rng(3)
    J, S, lam = SquaredLoss(tasks), rng.standard_normal((3, tasks.T)), 0.7
    F = Factored(J, right=S)
    res = ConjugateGradient(tol=1e-12).solve(F, SquaredFrobenius(lam), np.zeros((tasks.d, 3)))
    L = left_factor_optimum(tasks, S, lam)
    assert res.converged
    np.testing.assert_allclose(res.W, L, rtol=1e-8, atol=1e-10)
    assert np.all(np.diff(res.history) <= 1e-12 * abs(res.history[0]))
    assert not ConjugateGradient(tol=1e-12, max_iter=1).solve(
        F, SquaredFrobenius(lam), np.zeros((tasks.d, 3))).converged


@pytest.mark.parametrize("ridge", [0.0, 0.3])
@pytest.mark.parametrize("shape", [(5, 3), (3, 6)])
def test_squared_nuclear_prox_matches_cvxpy_and_conjugate_fenchel_young(ridge, shape):
    rng = np.random.default_rng(4)
    V = rng.standard_normal(shape)
    g, L = SquaredNuclear(0.8, ridge=ridge), 2.5
    X = g.prox(V, L)
    Xv = cp.Variable(shape)
    cp.Problem(cp.Minimize(L / 2 * cp.sum_squares(Xv - V) + ridge / 2 * cp.sum_squares(Xv)
                           + 0.4 * cp.square(cp.normNuc(Xv)))).solve(solver="CLARABEL")
    np.testing.assert_allclose(X, Xv.value, atol=1e-6)
    Xw, value = g.prox_with_value(V, L)         # one Gram eigh: the same map and g there
    np.testing.assert_allclose(Xw, X, rtol=0, atol=1e-12)
    assert value == pytest.approx(g.value(X), rel=1e-10)
    # prox optimality: L (V - X) is a subgradient of g at X, so Fenchel-Young holds with equality
    Z = L * (V - X)
    assert g.value(X) + g.conjugate(Z) == pytest.approx(np.sum(X * Z), rel=1e-10)
    # and the conjugate is the supremum: no point beats it
    for _ in range(20):
        Y = rng.standard_normal(shape)
        assert np.sum(Y * Z) - g.value(Y) <= g.conjugate(Z) + 1e-12
