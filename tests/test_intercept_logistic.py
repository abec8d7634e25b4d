"""InterceptLogisticLoss (MALSAR's logistic term, intercepts minimised out): the intercepts are
the 1-d minimisers, the gradient matches finite differences, the Lipschitz constant bounds the
curvature, the duality gap is >= 0 anywhere and vanishes at the optimum."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import minimize_scalar

from classic_oracles import small_tasks
from mtlbench_models._core import FISTA, L21, InterceptLogisticLoss, Nuclear, duality_gap


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

