"""TFCL family solver pieces: UStepper (Weyl-certified U-steps), exact polishing on a fixed
structure (oracles: dense normal equations, cvxpy), the graph without the columns the loss
ignores, the curvature scale of ridge-type weights, and progress reports."""
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench.progress import listen
from mtlbench_models._tfcl.core import graph_columns, make_loss, ridge_scale
from mtlbench_models._tfcl.polish import (FixedStructure, PersonalStructure,
                                          kkt_shared_personal_ok)
from mtlbench_models._tfcl.ustep import UStepper, ustep
from mtlbench_models.tfcl import TFCL, TFCLNoAUC
from mtlbench_models.tfcl_q import TFCLCoc, TFCLQ, TFCLQNoAUC, TFCLQNoG


def random_tasks(seed, T=6, d=8, n=25, bias=False, task_level=False):
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    w_common = rng.standard_normal(d)
    for t in range(T):
        X = rng.standard_normal((n, d))
        if bias:
            X[:, 0] = 1.0
        if task_level:
            X[:, 1] = 0.1 * (t + 1) / 3.0          # constant within the task
        w = w_common + 0.7 * rng.standard_normal(d)
        y = np.where(X @ w + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("rand", Xs, ys)


# ----------------------------------------------------------------------------- UStepper
@pytest.mark.parametrize("seed", range(4))
def test_ustepper_equals_ustep_along_a_path(seed):
    """Along a sequence of slowly changing W (fixed support with isolated nodes, then a
    merge), every U of the stepper equals the full U-step's, and the certified paths (no
    eigensolver) are taken."""
    rng = np.random.default_rng(seed)
    d, T, k = 12, 9, 3
    W = np.abs(rng.standard_normal((d, T))) * (rng.random((d, T)) < 0.5)
    W[:3] = 0.0                         # isolated features: m >= k
    stepper = UStepper(k)
    for step in range(8):
        Wt = W * (1.0 + 0.01 * step)
        if step == 6:
            Wt = Wt.copy()
            Wt[0, 0] = 0.5             # one more edge: fewer components
        a, b = stepper(Wt), ustep(Wt, k)
        assert (a.p, a.q, a.case, a.m) == (b.p, b.q, b.case, b.m)
        np.testing.assert_allclose(a.dense(), b.dense(), atol=1e-10)
        np.testing.assert_allclose(a.distances(), b.distances(), atol=1e-10)
    # no eigensolver once the m >= k answer is certified (Weyl or Cholesky)
    assert stepper.calls["eigensolver"] <= 2
    assert stepper.calls["weyl-certified"] + stepper.calls["grounded-cholesky"] >= 6


def test_ustepper_never_certifies_a_tie():
    """A component whose Fiedler value is within the tie tolerance of 0 (a tiny bridge) must
    go through the eigensolver: U then carries its Fiedler vector (case 2a/2b tie), exactly as
    ``ustep``."""
    W = np.zeros((4, 4))
    W[:2, :2] = 1.0
    W[2:, 2:] = 1.0
    W[1, 2] = 1e-12                     # two blocks joined by a negligible edge
    stepper = UStepper(2)
    stepper(W * 1.0)
    a, b = stepper(W * 1.0), ustep(W, 2)
    assert (a.p, a.q) == (b.p, b.q)
    np.testing.assert_allclose(a.dense(), b.dense(), atol=1e-10)


# ----------------------------------------------------------------------------- polishing
def _dense_minimiser(Zs, cs, mask, lin, a_g, a_c):
    """Oracle: the normal equations of q over (c, g_A) as one dense linear system."""
    T = len(Zs)
    d = Zs[0].shape[1]
    idx = [np.flatnonzero(mask[:, t]) for t in range(T)]
    nc = d if a_c is not None else 0
    sizes = [nc] + [len(i) for i in idx]
    off = np.concatenate([[0], np.cumsum(sizes)])
    n = off[-1]
    H = np.zeros((n, n))
    b = np.zeros(n)
    if a_c is not None:
        H[:d, :d] += a_c * np.eye(d)
    for t, (Z, c) in enumerate(zip(Zs, cs)):
        blocks = [(slice(0, nc), Z)] if a_c is not None else []
        blocks.append((slice(off[t + 1], off[t + 2]), Z[:, idx[t]]))
        for si, Ai in blocks:
            b[si] += Ai.T @ c
            for sj, Aj in blocks:
                H[si, sj] += Ai.T @ Aj
        sg = slice(off[t + 1], off[t + 2])
        H[sg, sg] += a_g * np.eye(len(idx[t]))
        b[sg] -= lin[idx[t], t]
    x = np.linalg.solve(H, b)
    g = np.zeros((d, T))
    for t in range(T):
        g[idx[t], t] = x[off[t + 1]:off[t + 2]]
    return (x[:d] if a_c is not None else None), g


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("a_g", [1e-4, 0.3, 30.0])
def test_fixed_structure_matches_dense_normal_equations(shared, a_g):
    ts = random_tasks(3, T=7, d=9, n=11)          # n_t + 1 = 12 > d: both regimes of K_t
    J = make_loss(ts, "auc", "t")
    rng = np.random.default_rng(0)
    mask = rng.random((ts.d, ts.T)) < 0.6
    lin = rng.standard_normal((ts.d, ts.T)) * mask
    a_c = 0.7 if shared else None
    c, g = FixedStructure(J, mask, a_g, a_c).solve(lin)
    c_ref, g_ref = _dense_minimiser(*_stacked(J), mask, lin, a_g, a_c)
    scale = max(1.0, np.abs(g_ref).max())
    np.testing.assert_allclose(g, g_ref, atol=1e-8 * scale)
    assert np.all(g[~mask] == 0)
    if shared:
        np.testing.assert_allclose(c, c_ref, atol=1e-8 * max(1.0, np.abs(c_ref).max()))


def test_fixed_structure_without_group_block_is_ridge():
    ts = random_tasks(4)
    J = make_loss(ts, "squared", "t")
    c, g = FixedStructure(J, None, 1.0, 0.5).solve(None)
    H = sum(ts.X(t).T @ ts.X(t) for t in range(ts.T)) + 0.5 * np.eye(ts.d)
    rhs = sum(ts.X(t).T @ ts.y(t) for t in range(ts.T))
    np.testing.assert_allclose(c, np.linalg.solve(H, rhs), rtol=1e-10)
    assert not g.any()


def _stacked(J):
    """(Z_t, c_t) of every task in task order from the loss's buckets."""
    out = []
    for idx, Z3, c2 in J.buckets:
        order = range(Z3.shape[0]) if idx is None else idx
        for b, t in enumerate(order):
            out.append((t, Z3[b], c2[b]))
    out.sort(key=lambda z: z[0])
    return [z[1] for z in out], [z[2] for z in out]


@pytest.mark.parametrize("group", [False, True])
@pytest.mark.parametrize("a_p", [0.02, 0.2, 5.0])
def test_personal_structure_against_cvxpy(group, a_p):
    """PersonalStructure minimises a_c/2||c||^2 + sum_t [1/2||Z_t(c + g_t + p_t) - c_t||^2
    + <lin_t, g_t> + a_g/2||g_t||^2 + a_p||p_t||] over c, p and g on a fixed support (the
    l_{1,2} term makes it a second-order cone problem: cvxpy is the oracle).  a_p from
    every user personal (0.02) to none (5.0); supports full, empty and partial."""
    cp = pytest.importorskip("cvxpy")
    ts = random_tasks(5, T=6, d=9, n=11)
    J = make_loss(ts, "auc", "t")
    Zs, cs = _stacked(J)
    rng = np.random.default_rng(1)
    d, T = ts.d, ts.T
    a_c, a_g = 0.4, 0.3
    mask = lin = None
    if group:
        mask = rng.random((d, T)) < 0.6
        mask[:, 0] = True                     # a task with full support
        mask[:, 1] = False                    # and one with none
        lin = 0.05 * rng.standard_normal((d, T)) * mask
    c, g, p = PersonalStructure(J, mask, a_g, a_c, a_p).solve(lin, np.zeros(d))
    cv = cp.Variable(d)
    Pv = cp.Variable((d, T))
    obj = 0.5 * a_c * cp.sum_squares(cv)
    Gv = None
    if group:
        Gv = cp.Variable((d, T))
        obj += cp.sum(cp.multiply(lin, Gv)) + 0.5 * a_g * cp.sum_squares(Gv)
    for t in range(T):
        w = cv + Pv[:, t] + (Gv[:, t] if group else 0)
        obj += 0.5 * cp.sum_squares(Zs[t] @ w - cs[t]) + a_p * cp.norm(Pv[:, t], 2)
    cons = [Gv[~mask] == 0] if group else []
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)

    def value(c, g, p):
        W = c[:, None] + p + (g if group else 0)
        v = 0.5 * a_c * c @ c + J.value(W) + a_p * np.linalg.norm(p, axis=0).sum()
        if group:
            v += np.sum(lin * g) + 0.5 * a_g * np.sum(g * g)
        return v

    f_new, f_ref = value(c, g, p), value(cv.value, Gv.value if group else None, Pv.value)
    assert f_new <= f_ref + 1e-9 * max(1.0, abs(f_ref))
    np.testing.assert_allclose(c, cv.value, atol=1e-5)
    if group:
        assert np.all(g[~mask] == 0)
    # its own optimality conditions hold at the rounding level
    W = c[:, None] + p + (g if group else 0)
    assert kkt_shared_personal_ok(J.grad(W), c, a_c, p, a_p)
    n_pers = int((np.linalg.norm(p, axis=0) > 0).sum())
    assert n_pers == {0.02: T, 5.0: 0}.get(a_p, n_pers)


def test_personal_structure_without_personal_users_is_fixed_structure():
    ts = random_tasks(3, T=7, d=9, n=11)
    J = make_loss(ts, "auc", "t")
    rng = np.random.default_rng(0)
    mask = rng.random((ts.d, ts.T)) < 0.6
    lin = rng.standard_normal((ts.d, ts.T)) * mask
    c0, g0 = FixedStructure(J, mask, 0.3, 0.7).solve(lin)
    c, g, p = PersonalStructure(J, mask, 0.3, 0.7, 1e6).solve(lin, np.zeros(ts.d))
    assert not p.any()
    np.testing.assert_allclose(c, c0, atol=1e-10 * max(1.0, np.abs(c0).max()))
    np.testing.assert_allclose(g, g0, atol=1e-10 * max(1.0, np.abs(g0).max()))


def test_polished_fit_is_a_fixed_point_at_or_below_the_plain_solver():
    """The polished fit is a fixed point of Alg. 1 (one more U-step and W-step moves nothing)
    and its objective is no higher than Alg. 1 iterated to a tight tolerance."""
    from mtlbench_models.tfcl import tfcl_wstep

    from test_tfcl import block_tasks

    ts = block_tasks(5)    # 6 blocks: the fits end with m >= k components (polishing applies)
    for loss in ("auc", "squared"):
        lam = 0.1
        a = TFCL(lam_group=lam, k=3, loss=loss).fit(ts)
        b = TFCL(lam_group=lam, k=3, loss=loss, polish=False, tol=1e-12,
                 max_iter=20000).fit(ts)
        assert a.converged_ and a.diagnostics_["polished"] >= 1
        fa, fb = a.objective_history_[-1], b.objective_history_[-1]
        assert fa <= fb + 1e-9 * max(1.0, abs(fb))
        J = make_loss(ts, loss, "t")
        D = ustep(a.coef_, 3).distances()
        W_next = tfcl_wstep(a.coef_ - J.grad(a.coef_) / a.C_, D, a.alpha_group_,
                            a.alpha_ridge_, a.C_)
        assert np.linalg.norm(W_next - a.coef_) <= 1e-8 * max(1.0, np.linalg.norm(a.coef_))


@pytest.mark.parametrize("cls", [TFCLQ, TFCLQNoAUC, TFCLQNoG])
def test_polished_q_fit_not_above_plain_solver(cls):
    from test_tfcl import block_tasks

    ts = block_tasks(6)
    a = cls(k=6, lam_personal=1.0).fit(ts)           # theta_p = 0, m >= k: polished
    b = cls(k=6, lam_personal=1.0, polish=False, tol=1e-12, max_iter=20000).fit(ts)
    assert a.converged_ and b.converged_ and a.diagnostics_["polished"] >= 1
    fa, fb = a.objective_history_[-1], b.objective_history_[-1]
    assert fa <= fb + 1e-9 * max(1.0, abs(fb))


@pytest.mark.parametrize("cls", [TFCLQ, TFCLQNoAUC, TFCLQNoG])
def test_polished_q_fit_with_personal_users_is_a_fixed_point(cls):
    """With personal users (theta_p != 0) the polish applies too: the fit is polished, its
    objective is no higher than Alg. 2 iterated to a tight tolerance without polishing, and
    the plain sweep of Alg. 2 from it moves nothing beyond rounding."""
    from test_tfcl import block_tasks

    ts = block_tasks(6)
    a = cls(k=6, lam_personal=0.05, tol=1e-10).fit(ts)
    b = cls(k=6, lam_personal=0.05, polish=False, tol=1e-12, max_iter=20000).fit(ts)
    assert a.diagnostics_["n_personal_users"] > 0
    assert a.converged_ and b.converged_ and a.diagnostics_["polished"] >= 1
    fa, fb = a.objective_history_[-1], b.objective_history_[-1]
    assert fa <= fb + 1e-9 * max(1.0, abs(fb))
    # the fit's last iteration is the plain sweep after the accepted polish: it moved W by
    # rounding only (the stopping rule itself asks for 1e-5 at this tol)
    assert a.w_change_history_[-1] <= 1e-8 * max(1.0, np.linalg.norm(a.coef_))


def test_polish_against_cvxpy_oracle():
    """At a fixed U (the polished fit's), the polished W minimises the convex W-subproblem
    F(., U) -- checked against cvxpy on the same problem."""
    cp = pytest.importorskip("cvxpy")
    ts = random_tasks(8, T=5, d=6, n=20)
    m = TFCL(lam_group=0.05, k=2, loss="squared").fit(ts)
    assert m.diagnostics_["polished"] >= 1
    D = ustep(m.coef_, 2).distances()
    Wv = cp.Variable((ts.d, ts.T))
    loss = sum(0.5 * cp.sum_squares(ts.X(t) @ Wv[:, t] - ts.y(t)) for t in range(ts.T))
    obj = loss + m.alpha_group_ * cp.sum(cp.multiply(D, cp.abs(Wv))) \
        + 0.5 * m.alpha_ridge_ * cp.sum_squares(Wv)
    cp.Problem(cp.Minimize(obj)).solve(solver="CLARABEL")
    J = make_loss(ts, "squared", "t")
    f_ours = m.objective(J.value(m.coef_), m.coef_, D)
    assert f_ours <= obj.value + 1e-7 * max(1.0, abs(obj.value))
    np.testing.assert_allclose(m.coef_, Wv.value, atol=1e-5)


# ----------------------------------------------------------------------------- graph rule
def test_graph_leaves_out_columns_constant_within_every_task():
    ts = random_tasks(9, bias=True, task_level=True)
    assert list(graph_columns(make_loss(ts, "auc", "t"))) == list(range(2, ts.d))
    # the squared loss depends on a bias column: it stays in the graph
    assert graph_columns(make_loss(ts, "squared", "t")) is None
    m = TFCL(lam_group=0.05, k=3).fit(ts)
    assert np.all(m.coef_[:2] == 0) and np.all(m.feature_groups_[:2] == -1)
    assert m.diagnostics_["graph_features"] == ts.d - 2
    assert m.embeddings_[0].shape == (ts.d + ts.T, 3)


def test_k_changes_the_fit_with_constant_columns():
    """With the bias and a task-level column as isolated graph nodes, k = 2 was
    exactly ridge and nearby k gave identical fits.  Without them every k in the searched
    range gives a different fit."""
    ts = random_tasks(10, T=8, d=10, n=30, bias=True, task_level=True)
    fits = {k: TFCL(lam_group=0.3 / k, k=k).fit(ts) for k in (2, 3, 4)}
    ridge = TFCL(lam_group=1e-12, k=2).fit(ts).coef_
    for k, m in fits.items():
        assert m.converged_
        assert np.abs(m.coef_ - ridge).max() > 1e-3 * np.abs(ridge).max()
    for a, b in ((2, 3), (3, 4), (2, 4)):
        assert np.abs(fits[a].coef_ - fits[b].coef_).max() > 1e-3 * np.abs(fits[a].coef_).max()


# ----------------------------------------------------------------------------- ridge scale
def _scaled(ts, c):
    return TaskSet.from_arrays("s", [c * ts.X(t) for t in range(ts.T)],
                               [ts.y(t) for t in range(ts.T)])


@pytest.mark.parametrize("cls", [TFCL, TFCLNoAUC, TFCLQ, TFCLCoc])
def test_scaling_all_features_scales_the_fit(cls):
    """Every data scale (group, ridge, curvature, personal) is equivariant: features times c
    give coefficients divided by c, the same groups and the same scores' order."""
    ts = random_tasks(11, T=6, d=7, n=30)
    kw = dict(k=2) if cls is not TFCLCoc else dict(k=2, lam_group=0.1)
    a = cls(**kw).fit(ts)
    b = cls(**kw).fit(_scaled(ts, 8.0))
    np.testing.assert_allclose(b.coef_ * 8.0, a.coef_, atol=1e-6 * np.abs(a.coef_).max())
    if hasattr(a, "task_groups_"):
        np.testing.assert_array_equal(a.task_groups_, b.task_groups_)
        np.testing.assert_array_equal(a.feature_groups_, b.feature_groups_)


def test_ridge_scale_is_the_mean_curvature():
    ts = random_tasks(12, T=4, d=5, n=20, bias=True)
    J = make_loss(ts, "squared", "t")
    expect = np.mean([np.trace(ts.X(t).T @ ts.X(t)) for t in range(ts.T)]) / ts.d
    assert np.isclose(ridge_scale(J), expect)
    Ja = make_loss(ts, "auc", "t")        # the bias column is free: averaged over d - 1
    assert np.isclose(ridge_scale(Ja) * (ts.d - 1),
                      np.mean([np.sum(Z[:m] ** 2) for Z, m in _task_Z(Ja)]))
    m = TFCL(lam_ridge=0.3).fit(ts)
    assert np.isclose(m.alpha_ridge_, 0.3 * ridge_scale(Ja))


def _task_Z(J):
    for idx, Z3, c2 in J.buckets:
        for b in range(Z3.shape[0]):
            yield Z3[b], Z3.shape[1]


# ----------------------------------------------------------------------------- progress
@pytest.mark.parametrize("cls", [TFCL, TFCLQ, TFCLQNoG, TFCLCoc])
def test_progress_reported_once_per_iteration(cls):
    seen = []
    with listen(lambda it, obj, cert: seen.append((it, obj, cert))):
        m = cls(k=2).fit(random_tasks(13))
    assert [s[0] for s in seen] == list(range(1, m.n_iter_ + 1))
    assert [s[1] for s in seen] == m.objective_history_
    assert all(s[2] is None for s in seen)


@pytest.mark.parametrize("seed", range(20))
def test_grounded_certificate_never_overclaims(seed):
    """Oracle: the dense spectrum.  Whenever the Cholesky certificate says lambda_{m+1} >
    sigma, it is (never a false certificate, on graphs with weights over four decades)."""
    from mtlbench_models._tfcl.eigen import bipartite_laplacian
    from mtlbench_models._tfcl.ustep import _grounded_certificate, _support_components

    rng = np.random.default_rng(seed)
    d, T = int(rng.integers(3, 12)), int(rng.integers(3, 12))
    W = rng.random((d, T)) * (rng.random((d, T)) < 0.4) * 10.0 ** rng.uniform(-3, 1, (d, T))
    m, labels = _support_components(W != 0)
    lam = np.linalg.eigvalsh(bipartite_laplacian(W))
    if m == d + T:
        return
    lam_next = lam[m]                                   # lambda_{m+1}
    for sigma in lam_next * np.array([0.01, 0.5, 0.999, 1.001, 2.0]):
        if _grounded_certificate(np.abs(W), labels, m, sigma):
            assert lam_next > sigma
    assert not _grounded_certificate(np.abs(W), labels, m, 1.001 * lam_next)


def test_compact_loss_is_the_same_function_on_d_rows():
    """Tasks with more rows than features are replaced by d rows (thin QR): the gradient and
    the differences of values are unchanged (the value itself moves by a constant)."""
    from mtlbench_models._tfcl.polish import compact_loss

    ts = random_tasks(2, T=5, d=6, n=30)                  # n_t + 1 = 31 > d = 6
    for loss in ("auc", "squared"):
        J = make_loss(ts, loss, "t")
        Jc = compact_loss(J)
        assert all(Z3.shape[1] == ts.d for _, Z3, _ in Jc.buckets)
        rng = np.random.default_rng(0)
        W0, W1 = rng.standard_normal((2, ts.d, ts.T))
        np.testing.assert_allclose(Jc.grad(W1), J.grad(W1), atol=1e-10)
        np.testing.assert_allclose(Jc.value(W1) - Jc.value(W0), J.value(W1) - J.value(W0),
                                   rtol=1e-10, atol=1e-10)
    short = make_loss(random_tasks(2, T=5, d=40, n=10), "auc", "t")
    assert compact_loss(short) is short                    # m_t <= d everywhere: unchanged
