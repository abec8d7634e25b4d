"""The solvers of the model layer (``_core.solvers``) against cvxpy on small problems: FISTA on
squared loss + L1 / L2,1 / nuclear norm and logistic loss + L2,1 (1e-6 relative in objective),
the decomposition W = P + Q (rMTFL's form), block coordinate descent; their certificates: the
duality gap is >= 0 at every iterate, tends to 0 and is met at convergence; warm starts reach
the same optimum; the residual certificate of a smooth penalty without a conjugate."""
from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench.progress import listen
from mtlbench_models._core import datafits as df
from mtlbench_models._core import penalties as pen
from mtlbench_models._core.solvers import (FISTA, BlockCoordinateDescent, SmoothSum,
                                           SumOfBlocks, duality_gap)


def _tasks(seed=0, T=4, d=6, n=12):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, T))
    W[d // 2:] = 0.0
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n + t, d))
        s = X @ W[:, t] + 0.5 * rng.standard_normal(n + t)
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("toy", Xs, ys)


def _cvx_loss(tasks, W, kind):
    if kind == "squared":
        return sum(0.5 * cp.sum_squares(tasks.X(t) @ W[:, t] - tasks.y(t)) for t in range(tasks.T))
    return sum(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), tasks.X(t) @ W[:, t])))
               for t in range(tasks.T))


def _cvx_penalty(name, lam, W):
    return {"l1": lambda: lam * cp.sum(cp.abs(W)),
            "l21": lambda: lam * cp.sum(cp.norm(W, 2, axis=1)),
            "nuclear": lambda: lam * cp.normNuc(W)}[name]()


def _layer_penalty(name, lam):
    return {"l1": pen.L1, "l21": pen.L21, "nuclear": pen.Nuclear}[name](lam)


def _solve_cvx(objective):
    prob = cp.Problem(cp.Minimize(objective))
    with warnings.catch_warnings():    # "inaccurate" at these tolerances: the values agree
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return prob.value


@pytest.mark.parametrize("kind,name,ratio", [("squared", "l1", 0.3), ("squared", "l21", 0.2),
                                             ("squared", "nuclear", 0.3),
                                             ("logistic", "l21", 0.2)])
@pytest.mark.parametrize("options", [{}, {"gradient_restart": True},
                                     {"decrease": 0.8, "gradient_restart": True},
                                     {"decrease": 0.5, "gradient_restart": True}],
                         ids=["plain", "gradient-restart", "bktr-gradient-restart",
                              "bktr-0.5-gradient-restart"])
def test_fista_reaches_the_cvxpy_optimum_with_a_certified_gap(kind, name, ratio, options):
    tasks = _tasks(1)
    J = df.SquaredLoss(tasks) if kind == "squared" else df.LogisticLoss(tasks)
    lam = ratio * _layer_penalty(name, 1.0).dual_norm(J.grad(np.zeros((tasks.d, tasks.T))))
    g = _layer_penalty(name, lam)
    gaps = []
    with listen(lambda i, obj, cert: gaps.append(cert)):
        res = FISTA(tol=1e-7, max_iter=20000, **options).solve(J, g,
                                                               np.zeros((tasks.d, tasks.T)))
    assert res.converged and res.certificate <= 1e-7 and res.certificate_kind == "gap"
    F = J.value(res.W) + g.value(res.W)
    assert res.history[-1] == pytest.approx(F, rel=1e-12)
    assert np.all(np.diff(res.history) <= 1e-12 * np.abs(res.history[:-1]))   # monotone
    assert min(gaps) >= -1e-12 * F and gaps[-1] < 1e-6 * gaps[0]                # gap -> 0
    Wv = cp.Variable((tasks.d, tasks.T))
    ref = _solve_cvx(_cvx_loss(tasks, Wv, kind) + _cvx_penalty(name, lam, Wv))
    assert F == pytest.approx(ref, rel=1e-6)
    assert F - ref <= duality_gap(J, g, res.W) + 1e-7 * abs(ref)   # the gap bounds F - F*


def test_fista_warm_start_reaches_the_same_optimum():
    tasks = _tasks(2)
    J = df.SquaredLoss(tasks)
    lam_max = pen.L21.dual_norm(pen.L21(1.0), J.grad(np.zeros((tasks.d, tasks.T))))
    solver = FISTA(tol=1e-7, max_iter=20000)
    first = solver.solve(J, pen.L21(0.5 * lam_max), np.zeros((tasks.d, tasks.T)))
    cold = solver.solve(J, pen.L21(0.3 * lam_max), np.zeros((tasks.d, tasks.T)))
    warm = solver.solve(J, pen.L21(0.3 * lam_max), first.W)
    assert warm.converged and cold.converged
    assert warm.history[-1] == pytest.approx(cold.history[-1], rel=2e-7)
    assert warm.n_iter < cold.n_iter


def test_fista_on_the_decomposition_w_equals_p_plus_q():
    """rMTFL's problem J(P + Q) + lam1 ||P||_{1,2} + lam2 ||Q^T||_{1,2} by FISTA on the stacked
    blocks, against cvxpy; the BlockSum gap certifies it."""
    tasks = _tasks(3)
    J = df.SquaredLoss(tasks)
    G0 = J.grad(np.zeros((tasks.d, tasks.T)))
    lam1 = 0.3 * pen.L21(1.0).dual_norm(G0)
    lam2 = 0.5 * pen.L21(1.0, "columns").dual_norm(G0)
    g = pen.BlockSum(pen.L21(lam1), pen.L21(lam2, "columns"))
    res = FISTA(tol=1e-7, max_iter=50000).solve(SumOfBlocks(J), g,
                                               np.zeros((2, tasks.d, tasks.T)))
    assert res.converged
    P, Q = cp.Variable((tasks.d, tasks.T)), cp.Variable((tasks.d, tasks.T))
    ref = _solve_cvx(_cvx_loss(tasks, P + Q, "squared") + lam1 * cp.sum(cp.norm(P, 2, axis=1))
                     + lam2 * cp.sum(cp.norm(Q, 2, axis=0)))
    assert res.history[-1] == pytest.approx(ref, rel=1e-6)
    assert g.dual_scale(G0) == min(pen.L21(lam1).dual_scale(G0),
                                   pen.L21(lam2, "columns").dual_scale(G0))


@pytest.mark.parametrize("name", ["l1", "l21"])
def test_block_coordinate_descent_reaches_the_cvxpy_optimum(name):
    tasks = _tasks(4, d=5, n=30)
    J = df.SquaredLoss(tasks, "gram")
    lam = 0.3 * _layer_penalty(name, 1.0).dual_norm(J.grad(np.zeros((tasks.d, tasks.T))))
    g = _layer_penalty(name, lam)
    res = BlockCoordinateDescent(tol=1e-7, max_sweeps=5000).solve(
        J, g, np.zeros((tasks.d, tasks.T)))
    assert res.converged and np.all(np.diff(res.history) <= 1e-12 * np.abs(res.history[:-1]))
    Wv = cp.Variable((tasks.d, tasks.T))
    ref = _solve_cvx(_cvx_loss(tasks, Wv, "squared") + _cvx_penalty(name, lam, Wv))
    assert res.history[-1] == pytest.approx(ref, rel=1e-6)
    with pytest.raises(ValueError, match="gram"):
        BlockCoordinateDescent().solve(df.SquaredLoss(tasks, "rows"), g, np.zeros((5, 4)))


@pytest.mark.parametrize("graph", ["mean", "laplacian"])
def test_block_coordinate_descent_with_a_row_separable_graph_term(graph):
    """Squared loss + a graph term + L1 (SRMTL's problem): the exact row minimiser (the
    complete graph's mean regulariser) and the proximal row step (a general Laplacian) reach
    the cvxpy optimum; F never increases; the options (no active set, no extrapolation)
    reach the same optimum."""
    tasks = _tasks(5, T=5, d=6, n=8)
    J = df.SquaredLoss(tasks, "gram")
    rho1, lam = 0.7, 0.2 * pen.L1.dual_norm(J.grad(np.zeros((tasks.d, tasks.T))))
    A = np.ones((5, 5)) / 5 if graph == "mean" else np.diag(np.ones(4), 1) + np.diag(np.ones(4), -1)
    Lg = np.diag(A.sum(1)) - A
    h = pen.MeanRegularised(rho1) if graph == "mean" else pen.GraphLaplacian(rho1, Lg)
    Wv = cp.Variable((tasks.d, tasks.T))
    ref = _solve_cvx(_cvx_loss(tasks, Wv, "squared") + rho1 * sum(
        cp.quad_form(Wv[i, :], cp.psd_wrap(Lg)) for i in range(tasks.d))
        + lam * cp.sum(cp.abs(Wv)))
    for options in ({}, {"active_set": False, "anderson": 0}):
        res = BlockCoordinateDescent(tol=1e-9, max_sweeps=20000, **options).solve(
            SmoothSum(J, h), pen.L1(lam), np.zeros((tasks.d, tasks.T)))
        assert res.converged
        assert np.all(np.diff(res.history) <= 1e-12 * np.abs(res.history[:-1]))
        assert res.history[-1] == pytest.approx(ref, rel=1e-6)
    with pytest.raises(ValueError, match="separate over the rows"):
        BlockCoordinateDescent().solve(SmoothSum(J, pen.SquaredFrobenius(1.0)), pen.L1(lam),
                                       np.zeros((tasks.d, tasks.T)))


@pytest.mark.parametrize("kind", ["squared", "logistic"])
def test_task_scaled_gap_bounds_the_suboptimality(kind):
    """The duality gap with one dual scale per task (L1; inside a SmoothSum with a graph
    term the quadratic's dual point unscaled) is an upper bound of F(W) - F* at any W, and
    the certificate is the smaller of it and the uniformly scaled gap."""
    from mtlbench_models._core.solvers import _task_scaled_gap
    tasks = _tasks(7, T=4, d=5, n=14)
    J = df.SquaredLoss(tasks, "gram") if kind == "squared" else df.LogisticLoss(tasks)
    lam = 0.4 * pen.L1.dual_norm(J.grad(np.zeros((tasks.d, tasks.T))))
    g = pen.L1(lam)
    Wv = cp.Variable((tasks.d, tasks.T))
    rng = np.random.default_rng(0)
    for h in (None, pen.MeanRegularised(0.3)):
        sm = J if h is None else SmoothSum(J, h)
        extra = 0 if h is None else 0.3 * cp.sum_squares(Wv - cp.sum(Wv, axis=1, keepdims=True)
                                                         / tasks.T)
        ref = _solve_cvx(_cvx_loss(tasks, Wv, kind) + extra + lam * cp.sum(cp.abs(Wv)))
        W_opt = FISTA(tol=1e-10, max_iter=20000).solve(sm, g, np.zeros((tasks.d, tasks.T))).W
        for scale in (1.0, 0.1, 0.01, 1e-3):
            W = W_opt + scale * rng.standard_normal(W_opt.shape)
            S = sm.forward(W)
            F = sm.value_of(S) + g.value(W)
            per_task = _task_scaled_gap(sm, g, S, W, g.value(W), sm.grad_of(S), sm.value_of(S))
            assert per_task >= F - ref - 1e-8 * abs(ref)
            assert np.isfinite(per_task) or scale > 0.01
            assert duality_gap(sm, g, W) <= min(per_task, sm.gap(
                S, W, g.value(W), g.dual_scale(sm.grad_of(S)))) + 1e-12 * abs(F)


def test_block_coordinate_descent_active_rows_and_extrapolation_keep_the_optimum():
    """L2,1 with most rows zero at the optimum: the active-row sweeps with Anderson
    extrapolation stop at the optimum of the full sweeps, F non-increasing."""
    tasks = _tasks(6, T=4, d=12, n=20)
    J = df.SquaredLoss(tasks, "gram")
    g = pen.L21(0.5 * pen.L21(1.0).dual_norm(J.grad(np.zeros((tasks.d, tasks.T)))))
    full = BlockCoordinateDescent(tol=1e-10, max_sweeps=20000, active_set=False,
                                  anderson=0).solve(J, g, np.zeros((tasks.d, tasks.T)))
    fast = BlockCoordinateDescent(tol=1e-10, max_sweeps=20000).solve(
        J, g, np.zeros((tasks.d, tasks.T)))
    assert full.converged and fast.converged
    assert np.all(np.diff(fast.history) <= 1e-12 * np.abs(fast.history[:-1]))
    assert fast.history[-1] == pytest.approx(full.history[-1], rel=1e-9)
    assert np.count_nonzero(np.abs(fast.W).max(axis=1)) < tasks.d
    with pytest.raises(ValueError, match="anderson"):
        BlockCoordinateDescent(anderson=-1)


def test_residual_certificate_of_a_smooth_penalty_without_conjugate():
    """J + lam tr(W L W^T) (a task graph) has no finite conjugate of its penalty: FISTA
    certifies the optimality residual, and reaches the solution of the linear system."""
    tasks = _tasks(5, T=4, d=4, n=10)
    A = np.array([[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 0], [1, 0, 0, 0]], dtype=float)
    Lg = np.diag(A.sum(1)) - A
    g = pen.GraphLaplacian(0.7, Lg)
    J = df.SquaredLoss(tasks)
    res = FISTA(tol=1e-12, max_iter=50000).solve(J, g, np.zeros((4, 4)))
    assert res.converged and res.certificate_kind == "residual"
    d, T = 4, 4                                        # grad = 0: block system in vec(W)
    H = np.zeros((d * T, d * T))
    b = np.zeros(d * T)
    for t in range(T):
        X = tasks.X(t)
        H[t * d:(t + 1) * d, t * d:(t + 1) * d] += X.T @ X
        b[t * d:(t + 1) * d] = X.T @ tasks.y(t)
    H += 2 * 0.7 * np.kron(Lg, np.eye(d))
    W = np.linalg.solve(H, b).reshape(T, d).T
    np.testing.assert_allclose(res.W, W, atol=1e-8 * np.abs(W).max())
    with pytest.raises(ValueError, match="no dual norm or conjugate"):
        FISTA(certificate="gap").solve(J, g, np.zeros((4, 4)))


def _suppressor_tasks(seed=0, T=3, n=40):
    """Feature 0 (z) is uncorrelated with the labels but needed: feature 1 = z + e carries
    the signal e, which only x1 - x0 isolates; three noise features."""
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for _ in range(T):
        z, e = 3.0 * rng.standard_normal(n), rng.standard_normal(n)
        Xs.append(np.column_stack([z, z + e, rng.standard_normal((n, 3))]))
        ys.append(np.where(e + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0))
    return TaskSet.from_arrays("suppressor", Xs, ys)


@pytest.mark.parametrize("penalty,ratio,start", [("l21", 0.5, "zero"), ("l21", 0.2, "zero"),
                                                 ("l21", 0.2, "warm"), ("infconv", 0.3, "zero"),
                                                 ("infconv", 0.2, "warm")])
def test_row_working_set_reaches_the_whole_problems_optimum(penalty, ratio, start):
    """FISTA on the working set of rows certifies the whole problem: its gap (recomputed on
    all rows) is <= tol and its objective is plain FISTA's, also where the rows violated at
    the start miss a row of the optimum (l21 at 0.5: the suppressor feature 0 joins through
    the whole problem's gradient)."""
    from mtlbench_models._core.penalties import L1InfConvL1
    from mtlbench_models._core.solvers import RowWorkingSet

    tasks = _suppressor_tasks()
    J = df.InterceptLogisticLoss(tasks)
    G0 = J.grad(np.zeros((tasks.d, tasks.T)))
    if penalty == "l21":
        make = lambda r: pen.L21(r * pen.L21(1.0).dual_norm(G0))
    else:
        make = lambda r: L1InfConvL1(r * pen.L1Inf.dual_norm(G0), 0.6 * r * pen.L1.dual_norm(G0))
    W0 = np.zeros((tasks.d, tasks.T))
    if start == "warm":                         # the optimum at a stronger penalty
        W0 = FISTA(tol=1e-9, max_iter=20000).solve(J, make(1.5 * ratio), W0).W
    g = make(ratio)
    ref = FISTA(tol=1e-10, max_iter=20000).solve(df.InterceptLogisticLoss(tasks), g, W0)
    fista = FISTA(tol=1e-7, max_iter=20000, decrease=0.8, gradient_restart=True, check_every=10)
    res = RowWorkingSet(fista).solve(J, g, W0)
    F = J.value(res.W) + g.value(res.W)
    gap = duality_gap(df.InterceptLogisticLoss(tasks), g, res.W) / F
    assert res.converged and res.certificate <= 1e-7
    assert gap == pytest.approx(res.certificate, rel=1e-6, abs=1e-12) and gap <= 1e-7
    assert F == pytest.approx(ref.history[-1], rel=1e-7)
    assert res.n_iter == len(res.history) - 1
    if (penalty, ratio) == ("l21", 0.5):
        assert list(np.flatnonzero(g.row_dual_ratios(G0) > 1)) == [1]
        assert list(np.flatnonzero(np.any(res.W != 0, axis=1))) == [0, 1]


def test_restricted_rows_are_the_loss_of_those_rows():
    tasks = _tasks(1, T=4, d=8, n=10)
    J = df.InterceptLogisticLoss(tasks)
    rows = np.array([0, 2, 5])
    W = np.zeros((tasks.d, tasks.T))
    W[rows] = np.random.default_rng(0).standard_normal((3, tasks.T))
    Jr = J.restrict_rows(rows)
    Sr = Jr.forward(W[rows])
    assert Jr.d == 3 and Jr.lipschitz == J.lipschitz
    np.testing.assert_allclose(Sr, J.forward(W), rtol=1e-14, atol=1e-14)
    assert Jr.value_of(Sr) == pytest.approx(J.value(W), rel=1e-14)
    np.testing.assert_allclose(Jr.grad_of(Sr), J.grad(W)[rows], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Jr.intercepts_of(Sr), J.intercepts(W), rtol=1e-12, atol=1e-14)


def test_row_working_set_refuses_a_penalty_without_rows():
    from mtlbench_models._core.solvers import RowWorkingSet

    tasks = _tasks(0)
    with pytest.raises(ValueError, match="rows"):
        RowWorkingSet(FISTA()).solve(df.InterceptLogisticLoss(tasks), pen.Nuclear(0.1),
                                     np.zeros((tasks.d, tasks.T)))


@pytest.mark.parametrize("kind", ["squared", "logistic", "intercept"])
def test_mean_dual_gap_bounds_the_suboptimality_and_is_second_order(kind):
    """The gap with the mean regulariser's dual point corrected row by row into the l1 ball
    (``_mean_dual_gap``) is an upper bound of F(W) - F* at any W; near an optimum whose every
    row has zero entries (which absorb the correction's row sum) it is of the order of the
    distance squared, where the scaled dual points' gaps are of its order."""
    from mtlbench_models._core.solvers import _mean_dual_gap, _task_scaled_gap
    tasks = _tasks(8, T=8, d=6, n=9)
    J = {"squared": lambda: df.SquaredLoss(tasks, "gram"),
         "logistic": lambda: df.LogisticLoss(tasks),
         "intercept": lambda: df.InterceptLogisticLoss(tasks)}[kind]()
    lam = 0.4 * pen.L1.dual_norm(J.grad(np.zeros((tasks.d, tasks.T))))
    g, h = pen.L1(lam), pen.MeanRegularised(0.2)
    sm = SmoothSum(J, h)
    W_opt = FISTA(tol=1e-13, max_iter=50000).solve(sm, g, np.zeros((tasks.d, tasks.T))).W
    F_opt = sm.value(W_opt) + g.value(W_opt)
    assert np.all(np.any(W_opt == 0, axis=1)) and np.any(W_opt != 0)
    rng = np.random.default_rng(1)
    E = rng.standard_normal(W_opt.shape)
    near = {}
    for scale in (1.0, 0.1, 1e-2, 1e-3, 1e-4, 1e-5):
        W = W_opt + scale * E * (W_opt != 0)         # the optimum's support kept
        for out in (W, W_opt + scale * E):           # and everywhere
            S = sm.forward(out)
            F = sm.value_of(S) + g.value(out)
            assert _mean_dual_gap(sm, g, S, out, g.value(out), sm.grad_of(S),
                                  sm.value_of(S)) >= F - F_opt - 1e-10 * abs(F_opt)
        S = sm.forward(W)
        f, p, G = sm.value_of(S), g.value(W), sm.grad_of(S)
        near[scale] = (_mean_dual_gap(sm, g, S, W, p, G, f),
                       min(_task_scaled_gap(sm, g, S, W, p, G, f),
                           sm.gap(S, W, p, g.dual_scale(G), G, f)))
    (m4, o4), (m5, o5) = near[1e-4], near[1e-5]
    assert np.isfinite(m4) and m5 <= m4 / 30.0       # second order: / 100 per decade
    assert o5 >= o4 / 30.0 and m5 <= 0.1 * o5          # the scaled ones: first order
    # the optimum's gap is at rounding level
    S = sm.forward(W_opt)
    assert _mean_dual_gap(sm, g, S, W_opt, g.value(W_opt), sm.grad_of(S),
                          sm.value_of(S)) <= 1e-9 * abs(F_opt)
    # not stated for a mean weight on the column mean, or another penalty
    S = SmoothSum(J, pen.MeanRegularised(0.2, lam_mean=0.1)).forward(W_opt)
    assert _mean_dual_gap(SmoothSum(J, pen.MeanRegularised(0.2, lam_mean=0.1)), g, S, W_opt,
                          0.0, W_opt, 0.0) == np.inf
