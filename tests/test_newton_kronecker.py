"""``ProxNewton`` (L1-regularised per-task problems in few dimensions) against cvxpy, monotone,
certified; ``LogisticLoss``'s per-task values and Hessians against its value and finite
differences of its gradient, its reduced designs against ``Factored``; the squared loss's
k-dimensional form (``TaskQuadratics`` from rows or Gram matrices) against ``Factored`` and,
under ``ProxNewton``, against a cvxpy LASSO;
``KroneckerPreconditioner`` inverts A P B + shift P; preconditioned CG reaches the ridge's
closed form monotonically."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from classic_oracles import left_factor_optimum
from mtlbench import TaskSet
from mtlbench_models._core.datafits import LogisticLoss, SquaredLoss
from mtlbench_models._core.factored import Factored, reduced_squared
from mtlbench_models._core.newton import ProxNewton
from mtlbench_models._core.penalties import L1, SquaredFrobenius
from mtlbench_models._core.quadratic import ConjugateGradient, KroneckerPreconditioner
from mtlbench_models._core.representations import padded_task_rows, task_grams


def _tasks(seed=0, d=4, T=3, n=8):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n + 2 * t, d)) for t in range(T)]   # unequal sizes: padding
    ys = [np.where(X @ rng.standard_normal(d) + rng.standard_normal(len(X)) > 0, 1.0, -1.0)
          for X in Xs]
    for y in ys:
        y[:2] = [1.0, -1.0]
    return TaskSet.from_arrays("tiny", Xs, ys)


def test_task_values_and_hessians_of_the_logistic_loss():
    tasks = _tasks()
    J = LogisticLoss(tasks)
    rng = np.random.default_rng(1)
    W = rng.standard_normal((tasks.d, tasks.T))
    Z = J.forward(W)
    assert J.task_values_of(Z).sum() == pytest.approx(J.value(W), rel=1e-13)
    H = J.task_hessians(Z)
    D = rng.standard_normal(W.shape)
    h = 1e-6
    fd = (J.grad(W + h * D) - J.grad(W - h * D)) / (2 * h)
    np.testing.assert_allclose(np.einsum("tij,jt->it", H, D), fd, rtol=1e-6, atol=1e-8)
    # the reduced designs X_t A give J(A S) as a datafit of S
    A = rng.standard_normal((tasks.d, 2))
    S = rng.standard_normal((2, tasks.T))
    R, F = J.left_factor(A), Factored(J, left=A)
    assert R.value(S) == pytest.approx(F.value(S), rel=1e-13)
    np.testing.assert_allclose(R.grad(S), F.grad(S), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mu", [0.05, 0.5, 3.0])
def test_prox_newton_matches_cvxpy_monotone_and_certified(mu):
    tasks = _tasks(2)
    J = LogisticLoss(tasks)
    res = ProxNewton(tol=1e-10).solve(J, L1(mu), np.zeros((tasks.d, tasks.T)))
    assert res.converged and res.certificate <= 1e-10
    assert np.all(np.diff(res.history) <= 0)
    Wv = cp.Variable((tasks.d, tasks.T))
    loss = sum(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), tasks.X(t) @ Wv[:, t])))
               for t in range(tasks.T))
    p = cp.Problem(cp.Minimize(loss + mu * cp.sum(cp.abs(Wv))))
    p.solve(solver="CLARABEL")
    assert res.history[-1] == pytest.approx(p.value, rel=1e-6)
    np.testing.assert_allclose(res.W, Wv.value, atol=1e-4)
    assert not ProxNewton(tol=1e-10, max_iter=1).solve(
        J, L1(mu), np.zeros((tasks.d, tasks.T))).converged


def test_kronecker_preconditioner_inverts_its_operator():
    rng = np.random.default_rng(3)
    A0, B0 = rng.standard_normal((5, 5)), rng.standard_normal((3, 3))
    A, B = A0 @ A0.T, B0 @ B0.T
    M = KroneckerPreconditioner(np.linalg.eigh(A), B, 0.4)
    P = rng.standard_normal((5, 3))
    np.testing.assert_allclose(M(A @ P @ B + 0.4 * P), P, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="shift must be > 0"):
        KroneckerPreconditioner(np.linalg.eigh(A), B, 0.0)


def test_preconditioned_cg_reaches_the_ridge_closed_form_monotonically():
    tasks = _tasks(4)
    rng = np.random.default_rng(5)
    J, S, lam = SquaredLoss(tasks), rng.standard_normal((2, tasks.T)), 0.7
    d, k = tasks.d, 2
    F = Factored(J, right=S)
    Abar = sum(tasks.X(t).T @ tasks.X(t) for t in range(tasks.T)) / tasks.T
    M = KroneckerPreconditioner(np.linalg.eigh(Abar), S @ S.T, lam)
    res = ConjugateGradient(tol=1e-12).solve(F, SquaredFrobenius(lam), np.zeros((d, k)),
                                             precondition=M)
    L = left_factor_optimum(tasks, S, lam)
    assert res.converged
    q = lambda P: F.value(P) + SquaredFrobenius(lam).value(P)
    assert 0 <= q(res.W) - q(L) <= 1e-12 * abs(q(L)) + 1e-13  # within the certified gap
    np.testing.assert_allclose(res.W, L, rtol=1e-5, atol=1e-7)
    assert np.all(np.diff(res.history) <= 1e-12 * abs(res.history[0]))


@pytest.mark.parametrize("wide", [False, True])
def test_task_quadratics_is_the_factored_squared_loss_and_its_lasso_matches_cvxpy(wide):
    tasks = _tasks(6, d=12 if wide else 4)          # n_max < d: from the rows; else the Grams
    rng = np.random.default_rng(7)
    A = rng.standard_normal((tasks.d, 3))
    X3, y3, _ = padded_task_rows(tasks)
    Jk = reduced_squared(A, X3, y3, lambda: task_grams(tasks))
    ref = Factored(SquaredLoss(tasks), left=A)
    S = rng.standard_normal((3, tasks.T))
    assert Jk.value(S) == pytest.approx(ref.value(S), rel=1e-12)
    np.testing.assert_allclose(Jk.grad(S), ref.grad(S), rtol=1e-11, atol=1e-11)
    mu = 0.3 * np.abs(Jk.grad(np.zeros((3, tasks.T)))).max()
    res = ProxNewton(tol=1e-10).solve(Jk, L1(mu), np.zeros((3, tasks.T)))
    assert res.converged and np.all(np.diff(res.history) <= 0)
    Sv = cp.Variable((3, tasks.T))
    loss = sum(0.5 * cp.sum_squares(tasks.y(t) - tasks.X(t) @ A @ Sv[:, t])
               for t in range(tasks.T))
    p = cp.Problem(cp.Minimize(loss + mu * cp.sum(cp.abs(Sv))))
    p.solve(solver="CLARABEL")
    assert res.history[-1] == pytest.approx(p.value, rel=1e-7)
    np.testing.assert_allclose(res.W, Sv.value, atol=1e-5)
