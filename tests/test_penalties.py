"""The penalties of the model layer (``_core.penalties``): every proximal map against its
definition (cvxpy, or the optimality conditions), Moreau's identity with the dual norm for the
norms, the k-support norm and l_{1,inf} helpers against cvxpy / brute force / the
Fenchel-Young optimality certificate."""
import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtlbench_models._core import penalties as pen
from mtlbench_models._core.penalties import (ksupport_norm, ksupport_sq, project_l1_ball_rows,
                                             prox_ksupport_sq, prox_ksupport_sq_with_value,
                                             prox_l1inf_rows)


def _ksupport_sq_cvx(v, k):
    """(||v||_k^sp)^2 by its variational (box-norm) form, solved by cvxpy."""
    p = v.size
    th = cp.Variable(p)
    obj = sum(cp.quad_over_lin(v[i], th[i]) for i in range(p))
    prob = cp.Problem(cp.Minimize(obj), [th >= 0, th <= 1, cp.sum(th) <= k])
    prob.solve(solver="CLARABEL")
    return prob.value


def _ksupport_brute(v, k):
    """Through the dual norm: ||v||^sp_k = max <v, u> s.t. the l2 norm of the k largest
    |u_i| <= 1."""
    u = cp.Variable(v.size)
    # ||u||_(k) <= 1  <=>  sum of the k largest u_i^2 <= 1 (convex: sum_largest of squares)
    prob = cp.Problem(cp.Maximize(v @ u), [cp.sum_largest(cp.square(u), k) <= 1])
    prob.solve(solver="CLARABEL")
    return prob.value


@pytest.mark.parametrize("seed", range(6))
def test_ksupport_norm_matches_numerical_value(seed):
    rng = np.random.default_rng(seed)
    p = int(rng.integers(3, 12))
    k = int(rng.integers(1, p + 1))
    v = rng.standard_normal(p) * rng.uniform(0.1, 5)
    if seed % 3 == 0:
        v[rng.integers(0, p, 2)] = 0.0
    ours = ksupport_norm(v, k)
    assert ours == pytest.approx(np.sqrt(_ksupport_sq_cvx(v, k)), rel=1e-5, abs=1e-7)
    assert ours == pytest.approx(_ksupport_brute(v, k), rel=1e-5, abs=1e-7)


def test_ksupport_norm_limits():
    v = np.array([3.0, -1.0, 0.5, 2.0])
    assert ksupport_norm(v, 1) == pytest.approx(np.abs(v).sum())
    assert ksupport_norm(v, 4) == pytest.approx(np.linalg.norm(v))


@pytest.mark.parametrize("seed", range(8))
def test_prox_ksupport_sq_matches_cvxpy(seed):
    rng = np.random.default_rng(100 + seed)
    p = int(rng.integers(2, 12))
    k = int(rng.integers(1, p + 1))
    lam = float(rng.uniform(0.05, 5))
    v = rng.standard_normal(p) * rng.uniform(0.1, 5)
    if seed % 4 == 0:
        v[0] = 0.0
        v[-1] = v[1] if p > 2 else v[-1]       # ties
    w, th = cp.Variable(p), cp.Variable(p)
    obj = (0.5 * cp.sum_squares(w - v)
           + lam / 2 * sum(cp.quad_over_lin(w[i], th[i]) for i in range(p)))
    cp.Problem(cp.Minimize(obj), [th >= 0, th <= 1, cp.sum(th) <= k]).solve(solver="CLARABEL")
    ours = prox_ksupport_sq(v, lam, k)
    np.testing.assert_allclose(ours, w.value, atol=2e-4 * max(1.0, np.abs(v).max()))
    # our point is at least as good as the solver's on the exact objective
    f = lambda x: 0.5 * np.sum((x - v) ** 2) + lam / 2 * ksupport_norm(x, k) ** 2
    assert f(ours) <= f(w.value) + 1e-7


def _topk_sq(U, k):
    """||u||_(k)^2 per column: the sum of the k largest u_i^2 (the squared dual norm)."""
    return -np.sort(-(U * U), axis=0)[:k].sum(axis=0)


def _prox_optimality_residual(V, lam, k, W):
    """Fenchel-Young: W = prox of phi = lam/2 ksup^2 at V iff
    phi(W) + phi*(V - W) - <W, V - W> = 0 (>= 0 for every W), phi*(u) = ||u||_(k)^2 / (2 lam).
    Returned relative to ||V||^2 per column."""
    R = V - W
    gap = (lam / 2 * ksupport_sq(W, k) + _topk_sq(R, k) / (2 * lam)
           - np.einsum("ij,ij->j", W, R))
    return gap / np.maximum(np.einsum("ij,ij->j", V, V), 1e-300)


def _tricky_columns(draw_seed, p, m):
    """Columns with zeros, exact ties (also across signs), entries 1e-18 of the others and a
    dynamic range of 1e+-6: the inputs that break segment searches for tau."""
    rng = np.random.default_rng(draw_seed)
    V = rng.standard_normal((p, m)) * 10.0 ** rng.uniform(-6, 6, m)
    V[rng.random((p, m)) < 0.3] = 0.0
    V[rng.random((p, m)) < 0.2] *= 1e-18
    if p > 2:
        V[1] = V[0]
    if p > 3:
        V[2, ::2] = -V[0, ::2]
    return V


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 25), st.integers(1, 30), st.integers(1, 8), st.integers(0, 10 ** 9))
def test_prox_ksupport_sq_certified_by_fenchel_young(p, k, m, seed):
    """The prox is exact on every input, certified by the Fenchel-Young equality (an exact
    optimality condition, no solver tolerance involved)."""
    V = _tricky_columns(seed, p, m)
    lam = 10.0 ** np.random.default_rng(seed + 1).uniform(-4, 4, m)
    W = prox_ksupport_sq(V, lam, k)
    assert np.all(np.abs(_prox_optimality_residual(V, lam, k, W)) <= 1e-11)
    assert np.all(np.abs(W) <= np.abs(V) * (1 + 1e-15))            # a shrinkage, signs kept
    assert np.all(W * V >= 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 25), st.integers(1, 30), st.integers(1, 8), st.integers(0, 10 ** 9))
def test_prox_ksupport_sq_value_is_the_norm_of_the_prox(p, k, m, seed):
    """The value returned with the prox (from the prox's own theta) equals ksupport_sq of the
    returned point, also for lam = 0 columns (the identity)."""
    V = _tricky_columns(seed, p, m)
    lam = 10.0 ** np.random.default_rng(seed + 2).uniform(-4, 4, m)
    lam[0] = 0.0 if seed % 3 == 0 else lam[0]
    W, val = prox_ksupport_sq_with_value(V, lam, k)
    np.testing.assert_array_equal(W, prox_ksupport_sq(V, lam, k))
    ref = ksupport_sq(W, k)
    assert np.all(np.abs(val - ref) <= 1e-10 * ref + 1e-300)


def test_prox_ksupport_sq_tiny_entry_regression():
    """A column with three O(0.01) entries and one of 3e-18, k = 3: the correct prox scales the
    three by 1/(1+lam) (at most k entries are effectively nonzero); a segment search
    accumulating slope x width products up to kinks at 1e17 returns 0 here."""
    v = np.array([4.9834e-02, -1.1340e-02, -1.1500e-02, 0, 0, 0, 0, 0, 0, -3.4716e-18])
    lam = 0.09006505
    w = prox_ksupport_sq(v, lam, 3)
    np.testing.assert_allclose(w[:3], v[:3] / (1 + lam), rtol=1e-12)
    assert abs(w[-1]) <= 1e-17
    assert abs(_prox_optimality_residual(v[:, None], np.array([lam]), 3, w[:, None])[0]) <= 1e-12


def test_ksupport_sq_exact_ties_regression():
    """Four nonzeros (three tied) and k = 4: the norm is the l2 norm.  A search for the r
    whose two strict inequalities hold fails here (rounding of the tied average breaks both
    for the right r, and a fallback r = k-1 gives (sum |w|)^2 / k, 16% too small)."""
    w = np.array([-54.008091526253835, -54.008091526253835, 54.008091526253835, 0.0, 0.0,
                  -125.28468793363798])
    assert ksupport_sq(w, 4) == pytest.approx(float(w @ w), rel=1e-14)
    assert ksupport_norm(w, 4) == pytest.approx(np.linalg.norm(w), rel=1e-14)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 20), st.integers(1, 25), st.integers(1, 6), st.integers(0, 10 ** 9))
def test_ksupport_sq_bounds_continuity_and_columns(p, k, m, seed):
    """l2 <= ksup <= l1 (= l2 when at most k entries are nonzero), 1-Lipschitz in l2-norm
    perturbations below the l1 bound |N(a) - N(b)| <= N(a - b) <= ||a - b||_1 (a formula that
    mishandles ties jumps by far more), and the vectorised columns equal the per-vector
    values."""
    V = _tricky_columns(seed, p, m)
    sq = ksupport_sq(V, k)
    l2, l1 = np.sqrt(np.einsum("ij,ij->j", V, V)), np.abs(V).sum(axis=0)
    tol = 1e-12 * np.maximum(l1, 1e-300)
    assert np.all(np.sqrt(sq) >= l2 - tol) and np.all(np.sqrt(sq) <= l1 + tol)
    few = np.count_nonzero(V, axis=0) <= k
    np.testing.assert_allclose(sq[few], (l2 ** 2)[few], rtol=1e-12)
    D = 1e-9 * np.random.default_rng(seed).standard_normal(V.shape) * np.maximum(l1, 1e-300)
    moved = np.sqrt(ksupport_sq(V + D, k))
    assert np.all(np.abs(moved - np.sqrt(sq)) <= np.abs(D).sum(axis=0) * (1 + 1e-9) + tol)
    for j in range(m):
        assert ksupport_sq(V[:, j], k) == pytest.approx(sq[j], rel=1e-15, abs=1e-300)


def test_prox_ksupport_sq_columnwise_and_limits():
    rng = np.random.default_rng(7)
    V = rng.standard_normal((6, 5))
    lam = np.array([0.1, 0.5, 1.0, 2.0, 0.0])
    out = prox_ksupport_sq(V, lam, 2)
    for j in range(5):
        np.testing.assert_allclose(out[:, j], prox_ksupport_sq(V[:, j], lam[j], 2))
    np.testing.assert_allclose(out[:, 4], V[:, 4])               # lam = 0: identity
    # k >= p: squared l2 norm -> v / (1 + lam)
    np.testing.assert_allclose(prox_ksupport_sq(V[:, 0], 0.7, 6), V[:, 0] / 1.7)


@pytest.mark.parametrize("seed", range(5))
def test_prox_l1inf_matches_cvxpy(seed):
    rng = np.random.default_rng(200 + seed)
    n, m = int(rng.integers(1, 6)), int(rng.integers(1, 8))
    V = rng.standard_normal((n, m)) * rng.uniform(0.1, 3)
    tau = float(rng.uniform(0.05, 3))
    X = cp.Variable((n, m))
    obj = 0.5 * cp.sum_squares(X - V) + tau * cp.sum(cp.max(cp.abs(X), axis=1))
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL")
    np.testing.assert_allclose(prox_l1inf_rows(V, tau), X.value,
                               atol=1e-5 * max(1.0, np.abs(V).max()))


def test_project_l1_ball_rows():
    rng = np.random.default_rng(9)
    V = rng.standard_normal((5, 7)) * 3
    P = project_l1_ball_rows(V, 1.5)
    assert np.all(np.abs(P).sum(axis=1) <= 1.5 + 1e-12)
    x = cp.Variable(7)
    cp.Problem(cp.Minimize(cp.sum_squares(x - V[0])), [cp.norm1(x) <= 1.5]).solve(solver="CLARABEL")
    np.testing.assert_allclose(P[0], x.value, atol=1e-6)
    small = V * 0.01
    np.testing.assert_allclose(project_l1_ball_rows(small, 10.0), small)


def test_project_l1_ball_rows_per_row_radius_and_zero():
    """Per-row radii, and radius 0 projects onto {0} (the sort rule alone needs radius > 0;
    the l_inf prox of a row with weight 0 is the identity)."""
    rng = np.random.default_rng(10)
    V = rng.standard_normal((4, 6)) * 2
    r = np.array([0.0, 0.5, 3.0, 100.0])
    P = project_l1_ball_rows(V, r)
    np.testing.assert_array_equal(P[0], 0.0)
    for i in (1, 2):
        x = cp.Variable(6)
        cp.Problem(cp.Minimize(cp.sum_squares(x - V[i])), [cp.norm1(x) <= r[i]]).solve(
            solver="CLARABEL", tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
        np.testing.assert_allclose(P[i], x.value, atol=1e-6)
    np.testing.assert_allclose(P[3], V[3])
    np.testing.assert_allclose(prox_l1inf_rows(V, r)[0], V[0])


# ------------------------------------------------------------------ the penalty objects


def _laplacian(T, seed):
    rng = np.random.default_rng(seed)
    A = np.triu(rng.uniform(0, 1, (T, T)) * (rng.random((T, T)) < 0.6), 1)
    A = A + A.T
    return np.diag(A.sum(1)) - A


_CONVEX = {
    "l1": (lambda lam: pen.L1(lam), lambda X, lam: lam * cp.sum(cp.abs(X))),
    "l21": (lambda lam: pen.L21(lam), lambda X, lam: lam * cp.sum(cp.norm(X, 2, axis=1))),
    "l21c": (lambda lam: pen.L21(lam, "columns"),
             lambda X, lam: lam * cp.sum(cp.norm(X, 2, axis=0))),
    "l1inf": (lambda lam: pen.L1Inf(lam), lambda X, lam: lam * cp.sum(cp.max(cp.abs(X), axis=1))),
    "nuclear": (lambda lam: pen.Nuclear(lam), lambda X, lam: lam * cp.normNuc(X)),
    "ridge": (lambda lam: pen.SquaredFrobenius(lam), lambda X, lam: lam / 2 * cp.sum_squares(X)),
    "meanreg": (lambda lam: pen.MeanRegularised(lam),
                lambda X, lam: lam * cp.sum_squares(X - cp.sum(X, axis=1, keepdims=True)
                                                    / X.shape[1])),
    "graph": (lambda lam: pen.GraphLaplacian(lam, _laplacian(5, 1)),
              lambda X, lam: lam * sum(cp.quad_form(X[i, :], _laplacian(5, 1), assume_PSD=True)
                                       for i in range(X.shape[0]))),
    "l1+l1inf": (lambda lam: pen.L1PlusL1Inf(lam, 0.5 * lam),
                 lambda X, lam: lam * cp.sum(cp.abs(X))
                 + 0.5 * lam * cp.sum(cp.max(cp.abs(X), axis=1))),
}


@pytest.mark.parametrize("name", sorted(_CONVEX))
@pytest.mark.parametrize("seed", range(2))
def test_prox_is_the_minimiser_of_its_definition(name, seed):
    """prox(V, L) = argmin_X L/2 ||X - V||^2 + g(X), against cvxpy (objective and point)."""
    make, expr = _CONVEX[name]
    rng = np.random.default_rng(seed)
    V, L, lam = rng.standard_normal((4, 5)) * 2.0, float(rng.uniform(0.5, 3)), 0.7
    g = make(lam)
    X = g.prox(V, L)
    Xv = cp.Variable(V.shape)
    prob = cp.Problem(cp.Minimize(L / 2 * cp.sum_squares(Xv - V) + expr(Xv, lam)))
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    ours = L / 2 * np.sum((X - V) ** 2) + g.value(X)
    assert ours <= prob.value + 1e-7 * max(1.0, abs(prob.value))
    np.testing.assert_allclose(X, Xv.value, atol=1e-5)


@pytest.mark.parametrize("name", ["l1", "l21", "l21c", "l1inf", "nuclear"])
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10 ** 6), lam=st.floats(0.01, 5.0), L=st.floats(0.1, 10.0))
def test_moreau_identity_with_the_dual_norm(name, seed, lam, L):
    """For g = lam ||.||: V = prox(V, L) + P(V), P the projection onto the dual ball of
    radius lam / L, i.e. the residual Y = L (V - prox) has dual norm <= lam and
    <prox, Y> = g(prox) (Fenchel-Young with the indicator conjugate); dual_scale puts any
    point into the ball."""
    g = _CONVEX[name][0](lam)
    V = np.random.default_rng(seed).standard_normal((5, 4)) * 3.0
    X = g.prox(V, L)
    Y = L * (V - X)
    assert g.dual_norm(Y) <= lam * (1 + 1e-9) + 1e-12
    assert float(np.sum(X * Y)) == pytest.approx(g.value(X), rel=1e-9, abs=1e-10)
    s = g.dual_scale(V)
    assert 0 < s <= 1 and g.dual_norm(s * V) <= lam * (1 + 1e-12)


@pytest.mark.parametrize("name", ["ridge", "meanreg", "graph"])
def test_smooth_penalties_gradient_and_prox_optimality(name):
    g = _CONVEX[name][0](0.6)
    rng = np.random.default_rng(3)
    W, D = rng.standard_normal((2, 4, 5))
    h = 1e-6
    fd = (g.value(W + h * D) - g.value(W - h * D)) / (2 * h)
    assert fd == pytest.approx(float(np.sum(g.grad(W) * D)), rel=1e-7)
    X = g.prox(W, 2.5)                             # L (V - X) = grad g(X)
    np.testing.assert_allclose(2.5 * (W - X), g.grad(X), atol=1e-12)
    E = rng.standard_normal((4, 5))               # the Lipschitz constant bounds the curvature
    bound = g.lipschitz * np.linalg.norm(E) * (1 + 1e-12)
    assert np.linalg.norm(g.grad(W + E) - g.grad(W)) <= bound


@pytest.mark.parametrize("name", ["ridge", "ksupport"])
def test_conjugates_satisfy_fenchel_young(name):
    """g(X) + g*(Y) >= <X, Y> for all pairs, with equality at Y = L (V - prox(V, L))."""
    g = pen.SquaredFrobenius(0.8) if name == "ridge" else pen.SquaredKSupport(0.8, 2)
    rng = np.random.default_rng(4)
    V = rng.standard_normal((5, 4))
    X = g.prox(V, 1.7)
    Y = 1.7 * (V - X)
    assert g.value(X) + g.conjugate(Y) == pytest.approx(float(np.sum(X * Y)), rel=1e-9)
    for _ in range(5):
        A, B = rng.standard_normal((2, 5, 4))
        assert g.value(A) + g.conjugate(B) >= float(np.sum(A * B)) - 1e-12


def test_block_sum_and_cocluster_objects():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((2, 4, 6))
    g = pen.BlockSum(pen.L21(0.4), pen.L21(0.9, "columns"))
    assert g.value(X) == pytest.approx(pen.L21(0.4).value(X[0])
                                       + pen.L21(0.9, "columns").value(X[1]))
    P = g.prox(X, 2.0)
    np.testing.assert_array_equal(P[0], pen.L21(0.4).prox(X[0], 2.0))
    np.testing.assert_array_equal(P[1], pen.L21(0.9, "columns").prox(X[1], 2.0))
    c = pen.CoCluster(0.5, 2)
    Q = rng.standard_normal((6, 5))
    np.testing.assert_allclose(c.prox(Q, 2.0), pen.prox_cocluster(Q, 0.25, 2))
    s = np.linalg.svd(Q, compute_uv=False)
    assert c.value(Q) == pytest.approx(0.5 * np.sum(s[2:] ** 2), rel=1e-10)
    with pytest.raises(ValueError, match="groups must be"):
        pen.L21(1.0, "cols")


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 9), st.sampled_from([0.0, 0.4, 2.0]),
       st.sampled_from([0.0, 0.3, 1.5]))
def test_mean_reg_l1_row_minimiser_is_exact_from_any_sign_guess(seed, T, lam, tau):
    """MeanRegL1Rows: the row's minimiser (cvxpy), the same from the sorted breakpoints and
    from any guess of the signs."""
    rng = np.random.default_rng(seed)
    D, c = rng.random(T) + 0.1, 2.0 * rng.standard_normal(T)
    rows = pen.MeanRegL1Rows(D[None, :], lam, tau)
    w = rows(0, c)
    for guess in (np.sign(w), rng.integers(-1, 2, T).astype(float)):
        np.testing.assert_allclose(rows(0, c, guess), w, rtol=1e-10, atol=1e-12)
    x = cp.Variable(T)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum(cp.multiply(D, x ** 2)) + c @ x + lam * cp.sum_squares(
        x - cp.sum(x) / T) + tau * cp.norm1(x)))
    prob.solve(solver="CLARABEL")

    def value(v):
        return 0.5 * D @ (v * v) + c @ v + lam * np.sum((v - v.mean()) ** 2) + tau * np.abs(v).sum()
    assert value(w) <= prob.value + 1e-7 * max(1.0, abs(prob.value))


def test_mean_reg_l1_row_minimiser_without_curvature_in_a_task():
    """A feature absent from a task (D_t = 0, c_t = 0) and no graph weight: that entry is 0,
    the others are the soft thresholdings S(-c_t, tau) / D_t."""
    rows = pen.MeanRegL1Rows(np.array([[1.0, 0.0, 2.0]]), 0.0, 0.1)
    np.testing.assert_allclose(rows(0, np.array([0.5, 0.0, -1.0])), [-0.4, 0.0, 0.45])


def test_mean_reg_l1_dual_rows_is_the_row_qp_minimiser():
    """Each row of the correction minimises sum_t W_t D_t + D_t^2 / (4 lam) subject to
    sum_t D_t = 0 and |A_t + D_t| <= tau (cvxpy); the root steps and the sorted breakpoints
    give the same rows; an infeasible row gives None."""
    from mtlbench_models._core.penalties import _mean_dual_roots_sorted, mean_reg_l1_dual_rows
    rng = np.random.default_rng(3)
    for trial in range(12):
        d, T = int(rng.integers(1, 6)), int(rng.integers(1, 9))
        W = rng.normal(size=(d, T)) * (rng.random((d, T)) < 0.6)
        tau, lam = float(rng.uniform(0.1, 2.0)), float(rng.uniform(1e-3, 3.0))
        A = rng.uniform(-1.5, 1.5, (d, T)) * tau
        A -= A.mean(axis=1, keepdims=True) * rng.random()
        if np.any(np.abs(A.sum(axis=1)) > T * tau):
            assert mean_reg_l1_dual_rows(W, A, lam, tau) is None
            continue
        D = mean_reg_l1_dual_rows(W, A, lam, tau)
        nu = _mean_dual_roots_sorted(W, -tau - A, tau - A, 2.0 * lam)
        np.testing.assert_allclose(D, np.clip(-2.0 * lam * (W + nu[:, None]), -tau - A,
                                              tau - A), atol=1e-10)
        for i in range(d):
            x = cp.Variable(T)
            prob = cp.Problem(cp.Minimize(W[i] @ x + cp.sum_squares(x) / (4.0 * lam)),
                              [cp.sum(x) == 0, cp.abs(A[i] + x) <= tau])
            prob.solve(solver="CLARABEL")
            val = W[i] @ D[i] + D[i] @ D[i] / (4.0 * lam)
            assert abs(D[i].sum()) <= 1e-10 * (1.0 + tau * T)
            assert np.all(np.abs(A[i] + D[i]) <= tau * (1 + 1e-12))
            assert val <= prob.value + 1e-7 * (1.0 + abs(prob.value))
