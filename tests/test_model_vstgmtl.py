"""VSTG-MTL (Jeong & Jun, KDD 2018): the objective never increases (block iterations, joint
steps, extrapolation), the per-task ridge solves and the SVD form of the loss agree with direct
formulas, the composed l1 + l_{1,inf} prox (also with per-row weights) agrees with cvxpy, the
U-step and V-step reach the cvxpy optima of their convex sub-problems, the joint steps end at
a point where both blocks are optimal (cvxpy), the memo gives bit-identical fits, progress is
reported once per outer iteration, and the fitted model runs on the simulated data.
(The k-support norm and prox oracles live in tests/test_penalties.py.)"""
import cvxpy as cp
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench_models._core.penalties import (ksupport_norm, prox_ksupport_sq_with_value,
                                             prox_l1_l1inf_rows)
from mtlbench_models.vstgmtl import _MEMO_KEY, VSTGMTL, _Problem, _State, vstg_objective


def _tasks(seed, T=8, d=12, n=14):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((d, 3)) @ rng.standard_normal((3, T))
    W[d // 2:] = 0.0
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n + t % 3, d))
        s = X @ W[:, t] + 0.3 * rng.standard_normal(X.shape[0])
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("toy", Xs, ys)


@pytest.mark.parametrize("gamma1,gamma2,mu",
                         [(0.05, 0.05, 0.05), (0.01, 0.2, 0.5), (0.3, 1e-4, 0.01)])
def test_alternating_objective_never_increases(gamma1, gamma2, mu):
    tasks = _tasks(0)
    m = VSTGMTL(gamma1=gamma1, gamma2=gamma2, mu=mu, n_bases=4, k=2, tol=0.0, xtol=0.0, max_iter=15,
                u_max_iter=30, fista_max_iter=50).fit(tasks)
    h = np.array(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1])), np.diff(h).max()
    prob = _Problem(tasks)
    assert h[-1] == pytest.approx(vstg_objective(prob, m.U_, m.V_, m.gamma1_, m.gamma2_, m.mu_, 2),
                                  rel=1e-12)
    np.testing.assert_allclose(m.coef_, m.U_ @ m.V_)


def _ragged_tasks(seed):
    """Tasks with n_t > d, n_t = d and n_t < d (exercises the zero padding of the SVD stack)."""
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n, 7)) for n in (12, 7, 3, 5)]
    ys = [np.resize([1.0, -1.0], X.shape[0]) for X in Xs]
    return TaskSet.from_arrays("ragged", Xs, ys)


def test_svd_form_of_loss_and_ridge_matches_direct_formulas():
    tasks = _ragged_tasks(1)
    prob = _Problem(tasks)
    rng = np.random.default_rng(2)
    W = rng.standard_normal((tasks.d, tasks.T))
    direct = sum(0.5 * np.sum((tasks.y(t) - tasks.X(t) @ W[:, t]) ** 2) for t in range(tasks.T))
    assert prob.loss_w(W) == pytest.approx(direct, rel=1e-12)
    Xty = np.column_stack([tasks.X(t).T @ tasks.y(t) for t in range(tasks.T)])
    np.testing.assert_allclose(prob.Xty, Xty, rtol=1e-10, atol=1e-12)
    for rho in (1e-3, 0.7, 50.0):
        got = prob.ridge(W, rho)
        for t in range(tasks.T):
            X, y = tasks.X(t), tasks.y(t)
            want = np.linalg.solve(X.T @ X + rho * np.eye(tasks.d), X.T @ y + rho * W[:, t])
            np.testing.assert_allclose(got[:, t], want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(
        prob.diagH, np.column_stack([np.diag(tasks.X(t).T @ tasks.X(t)) for t in range(tasks.T)]),
        rtol=1e-10, atol=1e-12)
    U = rng.standard_normal((tasks.d, 3))
    A, b = prob.task_blocks(U)
    for t in range(tasks.T):
        XU = tasks.X(t) @ U
        np.testing.assert_allclose(A[t], XU.T @ XU, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(b[:, t], XU.T @ tasks.y(t), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("tau1,tau2", [(0.3, 0.5), (0.0, 0.8), (1.0, 0.0), (0.05, 3.0)])
def test_composed_prox_is_the_prox_of_the_sum(tau1, tau2):
    """prox of tau1 ||.||_1 + tau2 ||.||_{1,inf} = prox_{l_inf} o soft-thresholding (cvxpy)."""
    rng = np.random.default_rng(int(10 * tau1 + tau2))
    V = rng.standard_normal((6, 5)) * 1.5
    V[0, :2] = V[0, 2]                      # ties in the largest modulus
    Z = cp.Variable(V.shape)
    obj = (0.5 * cp.sum_squares(Z - V) + tau1 * cp.sum(cp.abs(Z))
           + tau2 * cp.sum(cp.max(cp.abs(Z), axis=1)))
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12,
                                       tol_feas=1e-12)
    P = prox_l1_l1inf_rows(V, tau1, tau2)
    f = lambda A: (0.5 * np.sum((A - V) ** 2) + tau1 * np.abs(A).sum()
                   + tau2 * np.abs(A).max(axis=1).sum())
    assert f(P) <= f(Z.value) + 1e-9
    np.testing.assert_allclose(P, Z.value, atol=1e-6)


def test_memo_gives_bit_identical_fits():
    tasks = _tasks(7)
    kw = dict(gamma1=0.05, gamma2=0.02, mu=0.1, n_bases=4, k=2)
    a = VSTGMTL(**kw).fit(tasks)                       # fills the memo
    VSTGMTL(gamma1=0.2, mu=0.01, n_bases=3).fit(tasks)  # another point of a search
    b = VSTGMTL(**kw).fit(tasks)
    fresh = VSTGMTL(**kw).fit(_tasks(7))
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.coef_, fresh.coef_)


def test_u_step_reaches_cvxpy_optimum():
    tasks = _tasks(3, T=6, d=8, n=10)
    prob = _Problem(tasks)
    rng = np.random.default_rng(4)
    K = 3
    V = rng.standard_normal((K, prob.T))
    U0 = 0.1 * rng.standard_normal((prob.d, K))
    g1, g2 = 0.5, 1.0
    m = VSTGMTL(u_max_iter=5000)
    F = lambda U_, V_: vstg_objective(prob, U_, V_, g1, g2, 0.0, 2)
    state = _State()
    state.tol_u = 1e-10
    U_fista, n = m._u_step(prob, U0, V, g1, g2, state)
    assert n < 5000
    U = cp.Variable((prob.d, K))
    loss = sum(0.5 * cp.sum_squares(tasks.y(t) - tasks.X(t) @ U @ V[:, t]) for t in range(tasks.T))
    obj = loss + g1 * cp.sum(cp.abs(U)) + g2 * cp.sum(cp.max(cp.abs(U), axis=1))
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL")
    assert F(U_fista, V) <= obj.value * (1 + 1e-6) + 1e-8
    np.testing.assert_allclose(U_fista, U.value, atol=1e-3 * max(1.0, np.abs(U.value).max()))


def test_warm_start_and_groups_on_simulated():
    from mtlbench_datasets.simulated import make_simulated
    ts = make_simulated(0)
    m = VSTGMTL(gamma1=0.01, mu=0.01, n_bases=5, max_iter=5).fit(ts)
    assert m.coef_.shape == (ts.d, ts.T)
    assert m.feature_groups_.shape == (ts.d,) and m.task_groups_.shape == (ts.T,)
    m2 = VSTGMTL(gamma1=0.02, mu=0.01, n_bases=5, max_iter=2).fit(ts, init=m)
    # warm start begins at the previous model's (U, V)
    assert m2.objective_history_[0] == pytest.approx(
        vstg_objective(_Problem(ts), m.U_, m.V_, m2.gamma1_, m2.gamma2_, m2.mu_, 3), rel=1e-12)
    assert np.isfinite(m2.coef_).all()


def test_invalid_hyperparameters():
    tasks = _tasks(0)
    with pytest.raises(ValueError, match="vstgmtl: k"):
        VSTGMTL(n_bases=3, k=0).fit(tasks)
    with pytest.raises(ValueError, match="vstgmtl: n_bases"):
        VSTGMTL(n_bases=0).fit(tasks)
    with pytest.raises(ValueError, match="vstgmtl: gamma1"):
        VSTGMTL(gamma1=-1).fit(tasks)
    with pytest.raises(ValueError, match="vstgmtl: gamma2"):
        VSTGMTL(gamma2=-1).fit(tasks)


def test_k_at_least_n_bases_is_the_l2_model():
    """k >= K: the k-support norm of a K-vector is its l2 norm, so k is clipped to K."""
    tasks = _tasks(5)
    a = VSTGMTL(n_bases=3, k=3, max_iter=5).fit(tasks)
    b = VSTGMTL(n_bases=3, k=7, max_iter=5).fit(tasks)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    v = np.random.default_rng(0).standard_normal(3)
    assert ksupport_norm(v, 3) == pytest.approx(np.linalg.norm(v), rel=1e-12)


def test_stopping_rule_and_converged_flag():
    tasks = _tasks(6)
    m = VSTGMTL(gamma1=0.01, gamma2=0.01, mu=0.05, n_bases=4, k=2).fit(tasks)
    assert m.converged_ is True and m.n_iter_ < m.max_iter
    h = m.objective_history_
    assert h[-2] - h[-1] <= m.tol * abs(h[-2])
    short = VSTGMTL(gamma1=0.01, gamma2=0.01, mu=0.05, n_bases=4, k=2, tol=0.0, xtol=0.0,
                    max_iter=2).fit(tasks)
    assert short.converged_ is False and short.n_iter_ == 2


def test_declared_space_validates_and_is_non_convex():
    from mtlbench.search.space import Param, normalise_space, space_problems
    assert VSTGMTL.convex is False and VSTGMTL.supports_warm_start is False
    space = normalise_space(VSTGMTL.search_space)
    assert set(space) == {"gamma1", "gamma2", "mu", "n_bases", "k"}
    assert all(isinstance(p, Param) for p in space.values())
    assert space["n_bases"].kind == "int" and space["k"].kind == "int" and space["k"].low == 1
    # what the fit clips to is declared as a bound: K <= min(d, T), k <= K
    assert space["n_bases"].high == "min(d, T)" and space["k"].high == "n_bases"
    assert space_problems(space) == []
    VSTGMTL().check_params()
    for name, p in space.items():
        for v in p.grid:
            VSTGMTL(**{name: v}).check_params()


@pytest.mark.parametrize("start", ["power", "tiny"])
def test_v_step_reaches_cvxpy_optimum(start, monkeypatch):
    """The V-step (per-task FISTA, power-iteration step sizes made safe by backtracking) solves
    min_v 1/2 ||y_t - X_t U v||^2 + mu (||v||_k^sp)^2 for every task; the oracle writes the
    squared k-support norm in its box-norm form min {sum_i v_i^2 / theta_i : 0 <= theta <= 1,
    sum theta <= k} (Argyriou et al. 2012; McDonald et al. 2016).  "tiny": the Lipschitz
    estimate is replaced by 1e-12, so only the backtracking makes the steps valid."""
    import mtlbench_models.vstgmtl as vm
    if start == "tiny":
        monkeypatch.setattr(vm, "_power_lambda_max", lambda A, state: np.full(A.shape[0], 1e-12))
    tasks = _tasks(11, T=5, d=9, n=12)
    prob = _Problem(tasks)
    rng = np.random.default_rng(12)
    K, k, mu = 4, 2, 0.7
    U = rng.standard_normal((prob.d, K))
    V0 = rng.standard_normal((K, prob.T))
    m = VSTGMTL(fista_max_iter=20000)
    V, n = m._v_step(prob, U, V0, mu, k, tol=1e-12, state=_State())
    assert n < 20000
    for t in range(prob.T):
        Z, y = tasks.X(t) @ U, tasks.y(t)
        v, th = cp.Variable(K), cp.Variable(K)
        box = sum(cp.quad_over_lin(v[i], th[i]) for i in range(K))
        obj = 0.5 * cp.sum_squares(y - Z @ v) + mu * box
        cp.Problem(cp.Minimize(obj), [th <= 1, cp.sum(th) <= k]).solve(solver="CLARABEL")
        mine = 0.5 * np.sum((y - Z @ V[:, t]) ** 2) + mu * ksupport_norm(V[:, t], k) ** 2
        assert mine <= obj.value * (1 + 1e-6) + 1e-8
        np.testing.assert_allclose(V[:, t], v.value, atol=1e-4 * max(1.0, np.abs(v.value).max()))


def test_power_estimate_is_a_lower_bound_of_lambda_max():
    from mtlbench_models.vstgmtl import _power_lambda_max
    rng = np.random.default_rng(3)
    M = rng.standard_normal((7, 10, 5))
    A = np.matmul(M.transpose(0, 2, 1), M)
    est = _power_lambda_max(A, _State())
    top = np.linalg.eigvalsh(A)[:, -1]
    assert np.all(est <= top * (1 + 1e-12))
    assert np.all(est >= 0.5 * top)


def test_extrapolation_only_lowers_the_objective():
    tasks = _tasks(2)
    m = VSTGMTL(gamma1=0.02, gamma2=0.01, mu=0.05, n_bases=4, k=2).fit(tasks)
    h = np.array(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-10 * np.abs(h[:-1]))
    assert 1 <= m.diagnostics_["extrapolated"] <= m.n_iter_ - 1       # exercised here


def _block_optima_cvxpy(tasks, U, V, g1, g2, mu, k):
    """min_U F(U, V) and min_V F(U, V) by cvxpy (the two convex block problems; the squared
    k-support norm in its box-norm form)."""
    T, (d, K) = tasks.T, U.shape
    Uc = cp.Variable((d, K))
    loss_u = sum(0.5 * cp.sum_squares(tasks.y(t) - tasks.X(t) @ Uc @ V[:, t]) for t in range(T))
    pen_v = mu * sum(ksupport_norm(V[:, t], k) ** 2 for t in range(T))
    pu = cp.Problem(cp.Minimize(loss_u + g1 * cp.sum(cp.abs(Uc))
                                + g2 * cp.sum(cp.max(cp.abs(Uc), axis=1)) + pen_v))
    pu.solve(solver="CLARABEL")
    Vc, Th = cp.Variable((K, T)), cp.Variable((K, T))
    loss_v = sum(0.5 * cp.sum_squares(tasks.y(t) - tasks.X(t) @ U @ Vc[:, t]) for t in range(T))
    box = sum(cp.quad_over_lin(Vc[i, t], Th[i, t]) for i in range(K) for t in range(T))
    pen_u = g1 * np.abs(U).sum() + g2 * np.abs(U).max(axis=1).sum()
    pv = cp.Problem(cp.Minimize(loss_v + mu * box + pen_u), [Th <= 1, cp.sum(Th, axis=0) <= k])
    pv.solve(solver="CLARABEL")
    return pu.value, pv.value


def test_joint_steps_never_increase_and_end_at_a_critical_point():
    """The accelerated joint steps are monotone step by step, and run long they stop at a
    critical point of the non-convex F: there each block is optimal given the other (F is
    block-convex with separable penalties), which cvxpy checks block by block."""
    tasks = _tasks(3, T=5, d=7, n=9)
    prob = _Problem(tasks)
    m = VSTGMTL(gamma1=0.05, gamma2=0.05, mu=0.1, n_bases=3, k=2)
    g1, g2, mu = 0.05 * 3.0, 0.05 * 3.0, 0.1 * 9.0
    rng = np.random.default_rng(5)
    U, V = rng.standard_normal((prob.d, 3)), rng.standard_normal((3, prob.T))
    F = vstg_objective(prob, U, V, g1, g2, mu, 2)
    state = _State()
    for _ in range(40):
        U, V, F_new, n = m._joint_steps(prob, U, V, F, g1, g2, mu, 2, state, n_steps=1)
        assert F_new <= F * (1 + 1e-14)
        assert F_new == pytest.approx(vstg_objective(prob, U, V, g1, g2, mu, 2), rel=1e-12)
        F = F_new
    for _ in range(60):
        U, V, F, n = m._joint_steps(prob, U, V, F, g1, g2, mu, 2, state, n_steps=100)
    opt_u, opt_v = _block_optima_cvxpy(tasks, U, V, g1, g2, mu, 2)
    assert F <= opt_u * (1 + 1e-6) + 1e-8 and F <= opt_v * (1 + 1e-6) + 1e-8
    assert F >= opt_u * (1 - 1e-6) - 1e-8 and F >= opt_v * (1 - 1e-6) - 1e-8   # oracle sanity


def test_progress_reported_once_per_outer_iteration():
    from mtlbench.progress import ProgressRecorder
    tasks = _tasks(4)
    rec = ProgressRecorder()
    with rec.recording():
        m = VSTGMTL(gamma1=0.02, gamma2=0.01, mu=0.05, n_bases=4, k=2).fit(tasks)
    assert [p.iteration for p in rec.points] == list(range(m.n_iter_ + 1))
    np.testing.assert_allclose([p.objective for p in rec.points], m.objective_history_, rtol=1e-15)
    assert all(p.certificate is None for p in rec.points)


def test_composed_prox_with_row_weights():
    """The U-steps use per-row weights (a row metric): row i gets (tau1_i, tau2_i) (cvxpy)."""
    rng = np.random.default_rng(21)
    V = rng.standard_normal((7, 4)) * 2.0
    V[2, :3] = V[2, 3]
    t1, t2 = rng.uniform(0.0, 1.0, 7), rng.uniform(0.0, 2.0, 7)
    t1[0], t2[1] = 0.0, 0.0
    Z = cp.Variable(V.shape)
    obj = (0.5 * cp.sum_squares(Z - V) + cp.sum(cp.multiply(t1[:, None], cp.abs(Z)))
           + cp.sum(cp.multiply(t2, cp.max(cp.abs(Z), axis=1))))
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL")
    np.testing.assert_allclose(prox_l1_l1inf_rows(V, t1, t2), Z.value, atol=1e-6)


@pytest.mark.parametrize("d,n", [(12, 14), (20, 14)])
def test_image_loss_and_gradient_match_direct_formulas(d, n):
    """Both data representations of the joint steps (``gram`` when every n_t >= d, else the
    SVD pieces) give the loss, its gradient and X_t^T X_t w_t of the direct formulas."""
    tasks = _tasks(3, d=d, n=n)
    prob = _Problem(tasks)
    assert (prob.gram is not None) == (n >= d)
    W = np.random.default_rng(4).standard_normal((d, tasks.T))
    Xs = [tasks.X(t) for t in range(tasks.T)]
    R = [X @ W[:, t] - tasks.y(t) for t, X in enumerate(Xs)]
    loss = 0.5 * sum(float(r @ r) for r in R)
    grad = np.stack([X.T @ r for X, r in zip(Xs, R)], axis=1)
    hess = np.stack([X.T @ (X @ W[:, t]) for t, X in enumerate(Xs)], axis=1)
    Im = prob.image(W)
    f, G = prob.loss_grad(W, Im)
    assert f == pytest.approx(loss, rel=1e-12)
    assert prob.loss_image(W, Im) == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(G, grad, rtol=1e-10, atol=1e-10 * np.abs(grad).max())
    np.testing.assert_allclose(prob.hess(W), hess, rtol=1e-10, atol=1e-10 * np.abs(hess).max())
    for rho in (1e-3, 0.7, 50.0):
        got = prob.ridge(W, rho)
        for t, X in enumerate(Xs):
            want = np.linalg.solve(X.T @ X + rho * np.eye(d), X.T @ tasks.y(t) + rho * W[:, t])
            np.testing.assert_allclose(got[:, t], want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(prob.diagH, np.stack([np.diag(X.T @ X) for X in Xs], axis=1),
                               rtol=1e-10, atol=1e-12)
    U = np.random.default_rng(5).standard_normal((d, 3))
    A, b = prob.task_blocks(U)
    for t, X in enumerate(Xs):
        XU = X @ U
        np.testing.assert_allclose(A[t], XU.T @ XU, rtol=1e-10, atol=1e-10 * np.abs(A[t]).max())
        np.testing.assert_allclose(b[:, t], XU.T @ tasks.y(t), rtol=1e-10,
                                   atol=1e-10 * np.abs(b).max())


def test_fit_same_with_either_representation():
    """The Gram representation only changes rounding: a fit with it forced off (the SVD
    pieces) ends at the same objective."""
    tasks = _tasks(5)
    kw = dict(gamma1=0.05, gamma2=0.02, mu=0.1, n_bases=4, k=2)
    a = VSTGMTL(**kw).fit(tasks)
    prob = _Problem(tasks)
    assert prob.gram is not None
    prob.gram = None
    other = TaskSet.from_arrays("toy", [tasks.X(t) for t in range(tasks.T)],
                                [tasks.y(t) for t in range(tasks.T)])
    other.memo(_MEMO_KEY, lambda: prob)
    b = VSTGMTL(**kw).fit(other)
    assert a.converged_ and b.converged_
    assert b.objective_history_[-1] == pytest.approx(a.objective_history_[-1], rel=1e-6)


@pytest.mark.parametrize("K,m,k", [(20, 100, 3), (5, 190, 4), (12, 30, 1), (40, 7, 5), (3, 9, 3)])
def test_ksupport_prox_of_a_matrix_is_the_prox_of_each_column(K, m, k):
    """The column layout of the squared k-support prox (the joint steps' and V-steps' K x T
    matrices, one weight per column) gives every column the W and value of that column alone
    (asserted to 1e-12), with exact ties, zero columns and entries and weights over many
    decades."""
    rng = np.random.default_rng(K * m + k)
    V = rng.standard_normal((K, m)) * 10.0 ** rng.uniform(-3, 3, m)
    V[0, 0] = 0.0
    V[:, 1] = 0.0
    V[1, 2] = -V[2, 2]
    V[:, 3] = 1.5
    lam = 10.0 ** rng.uniform(-4, 4, m)
    W, val = prox_ksupport_sq_with_value(V, lam, k)
    cols = [prox_ksupport_sq_with_value(V[:, j], lam[j], k) for j in range(m)]
    W0, val0 = np.column_stack([c[0] for c in cols]), np.array([c[1] for c in cols])
    np.testing.assert_allclose(W, W0, rtol=1e-12, atol=1e-12 * np.abs(W0).max())
    np.testing.assert_allclose(val, val0, rtol=1e-12, atol=1e-12 * np.abs(val0).max())
