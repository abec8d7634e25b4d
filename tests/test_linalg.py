"""_linalg: the Gram and row representations of J agree with SquaredLoss; the per-TaskSet cache
does not change results; the competitors' declared search spaces validate."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import TaskSet
from mtlbench.model import param_problems
from mtlbench.search.space import Param, normalise_space, space_problems
from mtlbench_models._linalg import BatchedTaskQuadratic, TaskQuadratic, ridge_solve
from mtlbench_models._losses import SquaredLoss
from mtlbench_models.cocmtl import CoCMTL
from mtlbench_models.lasso import LASSO
from mtlbench_models.ramusa import RAMUSA
from mtlbench_models.rmtfl import RMTFL
from mtlbench_models.stl import STL

from conftest import small_problem

MODELS = [LASSO, STL, RMTFL, RAMUSA, CoCMTL]


def _tasks(seed, T, d, n):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n, d)) for _ in range(T)]
    ys = [np.where(rng.standard_normal(n) > 0, 1.0, -1.0) for _ in range(T)]
    for y in ys:
        y[:2] = (1.0, -1.0)
    return TaskSet.from_arrays("q", Xs, ys)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(1, 5), d=st.integers(1, 12),
       n=st.integers(3, 20), mode=st.sampled_from(["gram", "rows"]))
def test_task_quadratic_matches_squared_loss(seed, T, d, n, mode):
    tasks = _tasks(seed, T, d, n)
    loss = SquaredLoss(tasks)
    q = TaskQuadratic(tasks, mode=mode)
    rng = np.random.default_rng(seed + 1)
    W0, W1 = rng.standard_normal((2, d, T))
    A0, A1 = q.forward(W0), q.forward(W1)
    scale = 1.0 + loss.value(W1)
    assert abs(q.value(A1) - loss.value(W1)) <= 1e-10 * scale
    np.testing.assert_allclose(q.grad(A1), loss.grad(W1), atol=1e-10 * scale)
    # states are linear in W: combine gives the state of the extrapolated point
    beta = 0.7
    Ab = q.combine(A1, A0, beta)
    Wb = W1 + beta * (W1 - W0)
    assert abs(q.value(Ab) - loss.value(Wb)) <= 1e-9 * (1.0 + loss.value(Wb))
    assert q.lipschitz == pytest.approx(loss.lipschitz, rel=1e-12)


def test_mode_choice_by_cost():
    assert TaskQuadratic(_tasks(0, 3, 8, 40)).mode == "gram"      # d < 2 n_t
    assert TaskQuadratic(_tasks(0, 3, 60, 10)).mode == "rows"     # n_t << d


@pytest.mark.parametrize("cls,params", [
    (RMTFL, {"lam1_ratio": 0.2, "lam2_ratio": 0.3}),
    (RAMUSA, {"lam_ratio": 0.1, "theta_ratio": 0.3}),
    (CoCMTL, {"lam1_ratio": 0.3, "lam2_ratio": 1.0, "k": 2}),
])
def test_cache_gives_bit_identical_fits(cls, params):
    """A fit on a TaskSet whose memo is warm (a search's later points) equals a fresh one."""
    ts = small_problem(T=5, n=30, d=6, seed=3)
    first = cls(**params).fit(ts)          # fills ts's memo
    again = cls(**params).fit(ts)          # uses it
    fresh = cls(**params).fit(small_problem(T=5, n=30, d=6, seed=3))
    assert np.array_equal(first.coef_, again.coef_)
    assert np.array_equal(first.coef_, fresh.coef_)


def test_ridge_solve_is_the_normal_equations_solution():
    rng = np.random.default_rng(0)
    for n, d in [(5, 9), (12, 4)]:
        X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
        w = ridge_solve(X, y, 0.7)
        np.testing.assert_allclose(X.T @ (X @ w - y) + 0.7 * w, 0.0, atol=1e-10)


def test_old_import_paths_still_work():
    from mtlbench_models.rmtfl import Residuals  # noqa: F401
    from mtlbench_models.stl import ridge_solve as rs
    assert rs is ridge_solve


@pytest.mark.parametrize("cls", MODELS, ids=lambda c: c.name)
def test_declared_space_validates(cls):
    space = normalise_space(cls.search_space)
    assert space and all(isinstance(p, Param) and p.kind != "categorical" for p in space.values())
    assert space_problems(space) == []  # a start range per parameter, known bound names
    for name, p in space.items():
        for v in p.grid:
            assert p.check(v) is None, (name, v)
        if isinstance(p.low, (int, float)) and p.low > 0:
            assert p.check(p.low / 2) is not None
        if isinstance(p.high, (int, float)):
            assert p.check(p.high) is None and p.check(p.high * 2) is not None
    # the defaults of every declared parameter are allowed
    assert param_problems(cls, cls().get_params(deep=False)) == []
    assert isinstance(cls.convex, bool)


def test_convexity_declarations():
    assert LASSO.convex and STL.convex and RMTFL.convex
    assert not RAMUSA.convex and not CoCMTL.convex
    assert not RAMUSA.supports_warm_start and not CoCMTL.supports_warm_start


def test_lasso_and_stl_keep_their_published_grids():
    """``--search grid`` must reproduce the published LASSO and STL numbers."""
    assert normalise_space(LASSO.search_space)["rho_ratio"].grid == (0.003, 0.01, 0.03, 0.1, 0.3)
    assert normalise_space(STL.search_space)["lam"].grid == (0.1, 1.0, 10.0, 100.0, 1e3, 1e4)


@given(seed=st.integers(0, 10_000), T=st.integers(1, 6), d=st.integers(1, 12),
       n_lo=st.integers(2, 9), spread=st.integers(0, 5))
@settings(max_examples=40, deadline=None)
def test_batched_task_quadratic_matches_squared_loss_with_unequal_sizes(seed, T, d, n_lo, spread):
    """The zero-padded stack gives each task's exact J and grad J (tasks of unequal sizes)."""
    rng = np.random.default_rng(seed)
    ns = rng.integers(n_lo, n_lo + spread + 1, size=T)
    Xs = [rng.standard_normal((int(n), d)) for n in ns]
    ys = [np.where(np.arange(int(n)) % 2 == 0, 1.0, -1.0) for n in ns]   # both classes
    tasks = TaskSet.from_arrays("padded", Xs, ys)
    loss, quad = SquaredLoss(tasks), BatchedTaskQuadratic(tasks)
    W = rng.standard_normal((d, T))
    S = quad.forward(W)
    assert quad.value(S) == pytest.approx(loss.value(W), rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(quad.grad(S), loss.grad(W), rtol=1e-10, atol=1e-10)
    assert quad.lipschitz == pytest.approx(loss.lipschitz, rel=1e-12)
    # the state is linear in W: combine gives the state of W1 + beta (W1 - W0)
    W0 = rng.standard_normal((d, T))
    np.testing.assert_allclose(quad.combine(S, quad.forward(W0), 0.7),
                               quad.forward(W + 0.7 * (W - W0)), rtol=1e-10, atol=1e-10)


def test_batched_task_quadratic_gradient_by_finite_differences():
    tasks = _tasks(3, T=4, d=7, n=5)
    quad = BatchedTaskQuadratic(tasks)
    rng = np.random.default_rng(0)
    W, V = rng.standard_normal((7, 4)), rng.standard_normal((7, 4))
    h = 1e-6
    fd = (quad.value(quad.forward(W + h * V)) - quad.value(quad.forward(W - h * V))) / (2 * h)
    assert fd == pytest.approx(float(np.sum(quad.grad(quad.forward(W)) * V)), rel=1e-7)


@pytest.mark.parametrize("sizes,d", [([3, 5, 2, 4], 6), ([9, 12, 7, 15], 5), ([4, 11, 6], 6)])
def test_task_eigenrows_is_an_exact_change_of_basis(sizes, d):
    """||y - X w||^2 = ||z - R w||^2 + c and R^T R = X^T X for every task (n_t below and above
    d, unequal sizes), with orthogonal rows of squared norms E."""
    from mtlbench_models._linalg import task_eigenrows
    rng = np.random.default_rng(len(sizes) + d)
    Xs = [rng.standard_normal((n, d)) * rng.uniform(0.3, 3.0, d) for n in sizes]
    ys = [rng.permutation(np.where(np.arange(n) % 2 == 0, 1.0, -1.0)) for n in sizes]
    tasks = TaskSet.from_arrays("eig", Xs, ys)
    E, R, z, c = task_eigenrows(tasks)
    for t, (X, y) in enumerate(zip(Xs, ys)):
        np.testing.assert_allclose(R[t].T @ R[t], X.T @ X, atol=1e-10 * np.abs(X.T @ X).max())
        np.testing.assert_allclose(R[t] @ R[t].T, np.diag(E[t]), atol=1e-9 * E[t].max())
        for _ in range(3):
            w = rng.standard_normal(d)
            lhs = np.sum((y - X @ w) ** 2)
            assert np.sum((z[t] - R[t] @ w) ** 2) + c[t] == pytest.approx(lhs, rel=1e-10)
