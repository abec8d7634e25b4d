"""The datafits of the model layer (``_core.datafits``): every representation of the squared
loss gives the direct formula's value and gradient, states are linear in W, gradients agree
with finite differences (squared, AUC and logistic losses), the Lipschitz constants bound the
curvature, duality gaps are >= 0 and vanish at the optimum; the per-TaskSet cache does not
change results; the competitors' declared search spaces validate."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import TaskSet
from mtlbench.model import param_problems
from mtlbench.search.space import Param, normalise_space, space_problems
from mtlbench_models._core import penalties as pen
from mtlbench_models._core.datafits import LogisticLoss, SquaredAUCLoss, SquaredLoss
from mtlbench_models._core.representations import ridge_solve, task_eigenrows
from mtlbench_models._core.solvers import duality_gap
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


def _direct(Xs, ys, W):
    """sum_t 1/2 ||X_t w_t - y_t||^2, its gradient and the residual norms, task by task."""
    val, G, rr = 0.0, np.empty_like(W), []
    for t, (X, y) in enumerate(zip(Xs, ys)):
        r = X @ W[:, t] - y
        val += 0.5 * float(r @ r)
        G[:, t] = X.T @ r
        rr.append(float(r @ r))
    return val, G, np.array(rr)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(1, 5), d=st.integers(1, 12),
       n=st.integers(3, 20), rep=st.sampled_from(["gram", "rows", "padded", "buckets", "svd"]))
def test_every_representation_is_the_squared_loss(seed, T, d, n, rep):
    tasks = _tasks(seed, T, d, n)
    Xs, ys = [tasks.X(t) for t in range(T)], [tasks.y(t) for t in range(T)]
    q = SquaredLoss(tasks, rep)
    rng = np.random.default_rng(seed + 1)
    W0, W1 = rng.standard_normal((2, d, T))
    val, G, _ = _direct(Xs, ys, W1)
    A0, A1 = q.forward(W0), q.forward(W1)
    scale = 1.0 + val
    assert abs(q.value_of(A1) - val) <= 1e-10 * scale
    np.testing.assert_allclose(q.grad_of(A1), G, atol=1e-10 * scale)
    # states are linear in W: combine gives the state of the extrapolated point
    beta = 0.7
    vb = _direct(Xs, ys, W1 + beta * (W1 - W0))[0]
    assert abs(q.value_of(q.combine(A1, A0, beta)) - vb) <= 1e-9 * (1.0 + vb)
    lip = max(np.linalg.eigvalsh(X.T @ X)[-1] for X in Xs)
    assert q.lipschitz == pytest.approx(lip, rel=1e-10)


def test_representation_choice_by_cost_and_bad_names():
    assert SquaredLoss(_tasks(0, 3, 8, 40)).representation == "gram"      # d < 2 n_t
    assert SquaredLoss(_tasks(0, 3, 60, 10)).representation == "rows"     # n_t << d
    assert SquaredLoss(_tasks(0, 3, 60, 10), wide="padded").representation == "padded"
    with pytest.raises(ValueError, match="representation must be one of"):
        SquaredLoss(_tasks(0, 3, 8, 40), "grams")


@given(seed=st.integers(0, 10_000), T=st.integers(1, 6), d=st.integers(1, 12),
       n_lo=st.integers(2, 9), spread=st.integers(0, 5),
       rep=st.sampled_from(["gram", "rows", "padded", "buckets"]))
@settings(max_examples=40, deadline=None)
def test_representations_with_unequal_task_sizes(seed, T, d, n_lo, spread, rep):
    """The padded and bucketed stacks give each task's exact J, grad J and residual norm
    (tasks of unequal sizes)."""
    rng = np.random.default_rng(seed)
    ns = rng.integers(n_lo, n_lo + spread + 1, size=T)
    Xs = [rng.standard_normal((int(n), d)) for n in ns]
    ys = [np.where(np.arange(int(n)) % 2 == 0, 1.0, -1.0) for n in ns]   # both classes
    quad = SquaredLoss(TaskSet.from_arrays("padded", Xs, ys), rep)
    W = rng.standard_normal((d, T))
    val, G, rr = _direct(Xs, ys, W)
    S = quad.forward(W)
    assert quad.value_of(S) == pytest.approx(val, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(quad.grad_of(S), G, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(quad.residual_norms_sq(S), rr, rtol=1e-9, atol=1e-9)


def _fd_check(J, d, T, seed):
    rng = np.random.default_rng(seed)
    W, V = rng.standard_normal((d, T)), rng.standard_normal((d, T))
    h = 1e-6
    fd = (J.value(W + h * V) - J.value(W - h * V)) / (2 * h)
    assert fd == pytest.approx(float(np.sum(J.grad(W) * V)), rel=1e-6, abs=1e-8)
    v, G = J.value_and_grad(W)
    assert v == pytest.approx(J.value(W), rel=1e-14) and np.allclose(G, J.grad(W))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), T=st.integers(1, 4), d=st.integers(1, 9),
       n=st.integers(3, 15), kind=st.sampled_from(["squared", "padded", "auc", "logistic"]))
def test_gradients_by_finite_differences(seed, T, d, n, kind):
    tasks = _tasks(seed, T, d, n)
    J = {"squared": lambda: SquaredLoss(tasks), "padded": lambda: SquaredLoss(tasks, "padded"),
         "auc": lambda: SquaredAUCLoss(tasks), "logistic": lambda: LogisticLoss(tasks)}[kind]()
    _fd_check(J, d, T, seed)


def test_logistic_loss_is_stable_and_its_constants_bound_the_curvature():
    tasks = _tasks(4, T=3, d=5, n=12)
    J = LogisticLoss(tasks)
    W = 1e4 * np.random.default_rng(0).standard_normal((5, 3))     # huge margins both ways
    direct = sum(float(np.sum(np.logaddexp(0.0, -tasks.y(t) * (tasks.X(t) @ W[:, t]))))
                 for t in range(3))
    assert np.isfinite(J.value(W)) and J.value(W) == pytest.approx(direct, rel=1e-12)
    assert np.all(np.isfinite(J.grad(W)))
    # the Hessian of task t, X^T diag(s (1 - s)) X, is below ||X||^2 / 4
    W = np.random.default_rng(1).standard_normal((5, 3))
    for t in range(3):
        X = tasks.X(t)
        s = 1.0 / (1.0 + np.exp(-tasks.y(t) * (X @ W[:, t])))
        H = X.T @ (X * (s * (1 - s))[:, None])
        assert np.linalg.eigvalsh(H)[-1] <= J.task_lipschitz[t] * (1 + 1e-12)
    assert J.lipschitz == pytest.approx(J.task_lipschitz.max())


_PENALTIES = {"l1": lambda: pen.L1(0.5), "l21": lambda: pen.L21(0.7),
              "l21c": lambda: pen.L21(0.7, "columns"), "l1inf": lambda: pen.L1Inf(0.4),
              "nuclear": lambda: pen.Nuclear(0.9), "ridge": lambda: pen.SquaredFrobenius(0.3),
              "ksupport": lambda: pen.SquaredKSupport(0.3, 2)}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 10.0),
       kind=st.sampled_from(["squared", "auc", "logistic"]),
       penalty=st.sampled_from(sorted(_PENALTIES)))
def test_duality_gap_is_nonnegative_anywhere(seed, scale, kind, penalty):
    tasks = _tasks(seed, 4, 6, 9)
    J = {"squared": SquaredLoss, "auc": SquaredAUCLoss, "logistic": LogisticLoss}[kind](tasks)
    g = _PENALTIES[penalty]()
    W = scale * np.random.default_rng(seed).standard_normal((6, 4))
    assert duality_gap(J, g, W) >= -1e-10 * (1.0 + J.value(W) + g.value(W))


def test_duality_gap_vanishes_at_the_closed_form_ridge():
    """min J + lam/2 ||W||^2 has the per-task ridge solutions; the gap there is rounding."""
    tasks = _tasks(2, 4, 7, 10)
    J, g = SquaredLoss(tasks), pen.SquaredFrobenius(0.8)
    W = J.ridge(0.8)
    F = J.value(W) + g.value(W)
    assert abs(duality_gap(J, g, W)) <= 1e-10 * F
    assert duality_gap(J, g, W + 0.01) > 1e-6 * F


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


def test_models_use_the_layers_ridge_solve():
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


@pytest.mark.parametrize("sizes,d", [([3, 5, 2, 4], 6), ([9, 12, 7, 15], 5), ([4, 11, 6], 6)])
def test_task_eigenrows_is_an_exact_change_of_basis(sizes, d):
    """||y - X w||^2 = ||z - R w||^2 + c and R^T R = X^T X for every task (n_t below and above
    d, unequal sizes), with orthogonal rows of squared norms E."""
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
