"""Two additions to the model layer: FISTA's FISTA-BKTR option (``decrease``: the step
constant may decrease) reaches the optimum the default reaches, certified, with a
non-increasing objective; the dirty model's infimal convolution
min_{P+Q=W} lam1 ||P||_{1,inf} + lam2 ||Q||_1 (``L1InfConvL1``): its value, split, prox and
the projection onto the l1-ball-and-box set (``project_l1_box_rows``) against cvxpy, and the
split's two end regimes."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtlbench import TaskSet
from mtlbench_models._core import datafits as df
from mtlbench_models._core.penalties import L21, L1InfConvL1, project_l1_box_rows
from mtlbench_models._core.solvers import FISTA

CLARABEL = {"solver": "CLARABEL", "tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11,
            "tol_feas": 1e-11}


def _tasks(seed=0, T=4, d=6, n=12):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, T))
    W[d // 2:] = 0.0
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n + t, d)) * rng.uniform(0.2, 3.0, d)   # unequal curvature
        s = X @ W[:, t] + 0.5 * rng.standard_normal(n + t)
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("toy", Xs, ys)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_bktr_reaches_the_default_optimum_certified_and_monotone(loss):
    tasks = _tasks(3)
    J = df.SquaredLoss(tasks) if loss == "squared" else df.InterceptLogisticLoss(tasks)
    lam = 0.2 * L21(1.0).dual_norm(J.grad(np.zeros((tasks.d, tasks.T))))
    W0 = np.zeros((tasks.d, tasks.T))
    ref = FISTA(tol=1e-10, max_iter=50000).solve(J, L21(lam), W0)
    res = FISTA(tol=1e-10, max_iter=50000, decrease=0.5).solve(J, L21(lam), W0)
    assert ref.converged and res.converged
    assert abs(res.history[-1] - ref.history[-1]) <= 1e-9 * abs(ref.history[-1])
    assert np.all(np.diff(res.history) <= 1e-12 * abs(res.history[0]))


@pytest.mark.parametrize("decrease,backtracking", [(1.0, True), (0.0, True), (0.5, False)])
def test_bktr_refuses_a_bad_decrease(decrease, backtracking):
    with pytest.raises(ValueError, match="decrease"):
        FISTA(decrease=decrease, backtracking=backtracking)


def _solve(objective, constraints=()):
    prob = cp.Problem(cp.Minimize(objective), list(constraints))
    prob.solve(**CLARABEL)
    return prob.value


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 6), radius=st.floats(0.0, 3.0),
       box=st.floats(0.0, 1.5), scale=st.sampled_from([0.1, 1.0, 5.0]))
def test_l1_box_projection_is_the_euclidean_projection(seed, m, radius, box, scale):
    V = np.random.default_rng(seed).standard_normal((2, m)) * scale
    U = project_l1_box_rows(V, radius, box)
    for i in range(2):
        u = cp.Variable(m)
        _solve(cp.sum_squares(u - V[i]), [cp.norm1(u) <= radius, cp.abs(u) <= box])
        np.testing.assert_allclose(U[i], u.value, atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), m=st.integers(1, 6), lam1=st.floats(0.01, 3.0),
       lam2=st.floats(0.01, 1.0), L=st.floats(0.5, 3.0))
def test_infconv_value_split_and_prox_match_their_definitions(seed, m, lam1, lam2, L):
    W = np.random.default_rng(seed).standard_normal((3, m))
    g = L1InfConvL1(lam1, lam2)
    P = cp.Variable((3, m))
    inner = lam1 * cp.sum(cp.max(cp.abs(P), axis=1))
    ref = _solve(inner + lam2 * cp.sum(cp.abs(W - P)))
    assert abs(g.value(W) - ref) <= 1e-7 * max(1.0, ref)
    Ps, Qs = g.split(W)
    np.testing.assert_allclose(Ps + Qs, W, atol=1e-15)
    X = cp.Variable((3, m))
    _solve(L / 2 * cp.sum_squares(X - W) + inner + lam2 * cp.sum(cp.abs(X - P)))
    np.testing.assert_allclose(g.prox(W, L), X.value, atol=1e-6)
    Xp, value = g.prox_with_value(W, L)            # the value from the projection
    np.testing.assert_array_equal(Xp, g.prox(W, L))
    assert value == pytest.approx(g.value(Xp), rel=1e-12, abs=1e-14)


def test_infconv_split_ends():
    W = np.random.default_rng(0).standard_normal((5, 4))
    P, Q = L1InfConvL1(0.5, 1.0).split(W)          # lam1 <= lam2: all of W is block part
    assert np.all(Q == 0.0) and np.array_equal(P, W)
    P, Q = L1InfConvL1(4.5, 1.0).split(W)          # lam1 > T lam2: all of W is elementwise
    assert np.all(P == 0.0) and np.array_equal(Q, W)
