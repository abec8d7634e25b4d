"""InterceptLogisticLoss (MALSAR's logistic term, intercepts minimised out): the intercepts are
the 1-d minimisers, the gradient matches finite differences, the Lipschitz constant bounds the
curvature, the duality gap is >= 0 anywhere and vanishes at the optimum."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import minimize_scalar
from scipy.special import expit

from classic_oracles import small_tasks
from mtlbench_models._core import FISTA, L21, InterceptLogisticLoss, Nuclear, duality_gap
from mtlbench_models._core.datafits import _sigmoid_neg


def _objective(tasks, W, c, average=True):
    return sum(float(np.sum(np.logaddexp(0.0, -tasks.y(t) * (tasks.X(t) @ W[:, t] + c[t]))))
               / (tasks.y(t).size if average else 1.0) for t in range(tasks.T))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 5.0), average=st.booleans())
def test_intercepts_minimise_and_the_gradient_is_exact(seed, scale, average):
    tasks = small_tasks(seed % 50, T=3, d=5, n=12)
    J = InterceptLogisticLoss(tasks, average=average)
    rng = np.random.default_rng(seed)
    W = scale * rng.standard_normal((5, 3))
    c = J.intercepts(W)
    for t in range(3):
        f = lambda v, t=t: _objective(tasks, W, np.where(np.arange(3) == t, v, c), average)
        best = minimize_scalar(f, bracket=(c[t] - 1, c[t] + 1), tol=1e-12).fun
        assert f(c[t]) <= best + 1e-12 * (1 + abs(best))
    assert J.value(W) == pytest.approx(_objective(tasks, W, c, average), rel=1e-13)
    V, h = rng.standard_normal(W.shape), 1e-6
    fd = (J.value(W + h * V) - J.value(W - h * V)) / (2 * h)
    assert fd == pytest.approx(float(np.sum(J.grad(W) * V)), rel=1e-5, abs=1e-8)


def test_lipschitz_constant_bounds_the_curvature():
    tasks = small_tasks(3)
    J = InterceptLogisticLoss(tasks)
    rng = np.random.default_rng(0)
    W, V = rng.standard_normal((tasks.d, tasks.T)), rng.standard_normal((tasks.d, tasks.T))
    for t in range(tasks.T):
        D = np.zeros_like(W)
        D[:, t] = V[:, t] / np.linalg.norm(V[:, t])
        h = 1e-4
        curv = (J.value(W + h * D) - 2 * J.value(W) + J.value(W - h * D)) / h ** 2
        assert curv <= J.task_lipschitz[t] * (1 + 1e-4)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 5.0), nuclear=st.booleans())
def test_gap_is_nonnegative_anywhere(seed, scale, nuclear):
    tasks = small_tasks(seed % 50, T=3, d=5, n=12)
    J = InterceptLogisticLoss(tasks)
    g = Nuclear(0.05) if nuclear else L21(0.05)
    W = scale * np.random.default_rng(seed).standard_normal((5, 3))
    assert duality_gap(J, g, W) >= -1e-12 * (1.0 + J.value(W) + g.value(W))


def test_gap_vanishes_at_the_optimum():
    tasks = small_tasks(4)
    J = InterceptLogisticLoss(tasks)
    res = FISTA(tol=1e-7, max_iter=20000).solve(J, L21(0.02), np.zeros((tasks.d, tasks.T)))
    assert res.converged and 0.0 <= res.certificate <= 1e-7



def _root_residual(tasks, W, c, average=True):
    """max_t |d/dc_t| of the objective at c, relative to the sum of its terms' moduli."""
    out = 0.0
    for t in range(tasks.T):
        y = tasks.y(t)
        r = y * expit(-y * (tasks.X(t) @ W[:, t] + c[t]))
        out = max(out, abs(float(r.sum())) / float(np.abs(r).sum()))
    return out


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), average=st.booleans(),
       steps=st.lists(st.floats(1e-9, 3.0), min_size=2, max_size=8))
def test_intercepts_are_the_roots_along_any_sequence_of_states(seed, average, steps):
    """Each solve starts from a prediction off the last solved state (near or far, plain or
    extrapolated by ``combine``): every result is the root, as from a fresh loss."""
    tasks = small_tasks(seed % 50, T=3, d=5, n=12)
    J = InterceptLogisticLoss(tasks, average=average)
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((5, 3))
    S_prev, W_prev = J.forward(W), W
    J.intercepts_of(S_prev)
    for size in steps:
        W = W_prev + size * rng.standard_normal(W.shape)
        S = J.forward(W)
        for state, point in ((S, W), (J.combine(S, S_prev, 0.7), W + 0.7 * (W - W_prev))):
            c = J.intercepts_of(state)
            fresh = InterceptLogisticLoss(tasks, average=average).intercepts(point)
            np.testing.assert_allclose(c, fresh, rtol=1e-12, atol=1e-12)
            assert _root_residual(tasks, point, c) <= 1e-13
            assert J.value_of(state) == pytest.approx(_objective(tasks, point, c, average),
                                                      rel=1e-13)
        S_prev, W_prev = S, W


def test_sigmoid_is_expit_and_finite_everywhere():
    z = np.concatenate([np.linspace(-50.0, 50.0, 2001), [-1e4, -800.0, 0.0, 709.0, 800.0,
                                                          1e4, -np.inf, np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = _sigmoid_neg(z)
    ref = expit(-z)
    np.testing.assert_allclose(a, ref, rtol=4e-16, atol=0.0)
    assert np.all((a >= 0.0) & (a <= 1.0))
    assert a[-1] == 0.0 and a[-2] == 1.0
