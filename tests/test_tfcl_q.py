"""TFCL-Q (problem Q, Alg. 2) and its ablations."""
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench_models.tfcl_q import TFCLCoc, TFCLQ, TFCLQNoAUC, TFCLQNoG, common_lipschitz
from mtlbench_models.tfcl import make_loss


def tasks_with_outlier(seed, T=8, d=6, n=24):
    rng = np.random.default_rng(seed)
    w_common = rng.standard_normal(d)
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        w = w_common if t else -w_common          # task 0: an outlier user
        y = np.where(X @ w + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("q", Xs, ys)


@pytest.mark.parametrize("cls", [TFCLQ, TFCLQNoAUC, TFCLQNoG, TFCLCoc])
@pytest.mark.parametrize("schedule", ["gauss-seidel", "jacobi"])
@pytest.mark.parametrize("accelerate", [True, False])
def test_objective_never_increases(cls, schedule, accelerate):
    ts = tasks_with_outlier(0)
    scale = 10.0 if cls is TFCLQNoAUC else 1.0
    m = cls(lam_common=0.1 * scale, lam_group=0.5 * scale, lam_ridge=0.1 * scale,
            lam_personal=0.2 * scale, k=2, schedule=schedule, lam_scale="absolute",
            accelerate=accelerate, max_iter=120).fit(ts)
    h = np.array(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-9 * np.maximum(1, np.abs(h[:-1]))), np.diff(h).max()
    np.testing.assert_allclose(m.coef_, m.theta_c_[:, None] + m.theta_g_ + m.theta_p_)


def test_nog_has_no_group_component():
    m = TFCLQNoG(k=2, max_iter=50).fit(tasks_with_outlier(1))
    assert np.all(m.theta_g_ == 0)
    assert not hasattr(m, "task_groups_")


def test_personal_component_flags_the_outlier():
    ts = tasks_with_outlier(2, T=10, n=60)
    m = TFCLQ(lam_common=0.01, lam_group=0.05, lam_ridge=0.1, lam_personal=0.05, k=2,
              lam_scale="absolute",
              max_iter=400).fit(ts)
    norms = np.linalg.norm(m.theta_p_, axis=0)
    assert norms[0] == norms.max() and norms[0] > 0


def test_common_lipschitz_matches_dense():
    ts = tasks_with_outlier(3)
    J = make_loss(ts, "auc", "t")
    H = np.zeros((ts.d, ts.d))
    for t in range(ts.T):
        for i, e in enumerate(np.eye(ts.d)):
            W = np.zeros((ts.d, ts.T))
            W[:, t] = e
            H[:, i] += J.grad(W)[:, t] - J.grad(np.zeros((ts.d, ts.T)))[:, t]
    assert np.isclose(common_lipschitz(J, ts.d, ts.T), np.linalg.eigvalsh(H)[-1], rtol=1e-5)


def test_errors():
    with pytest.raises(ValueError, match="tfcl-q: schedule"):
        TFCLQ(schedule="x").fit(tasks_with_outlier(0))
    with pytest.raises(ValueError, match="tfcl-q: lam_personal"):
        TFCLQ(lam_personal=-1).fit(tasks_with_outlier(0))
    with pytest.raises(ValueError, match="tfcl-coc: k must"):
        TFCLCoc(k=50).fit(tasks_with_outlier(0))


@pytest.mark.parametrize("cls", [TFCLQ, TFCLQNoAUC, TFCLQNoG, TFCLCoc])
def test_cold_fits_converge_and_ignore_init(cls):
    ts = tasks_with_outlier(4)
    assert cls.convex is False and cls.supports_warm_start is False
    a = cls(k=2).fit(ts)
    b = cls(k=2).fit(ts, init=a)
    assert a.converged_ and a.n_iter_ < a.max_iter
    np.testing.assert_array_equal(a.coef_, b.coef_)
    capped = cls(k=2, max_iter=2).fit(ts)
    assert capped.converged_ is False and capped.diagnostics_["converged"] is False


@pytest.mark.parametrize("cls", [TFCLQ, TFCLQNoAUC, TFCLQNoG, TFCLCoc])
def test_accelerated_and_plain_reach_the_same_objective(cls):
    """Accelerated and plain sweeps (unpolished: the iteration counts compare the two paths)
    reach the same objective, and so does the default polished fit."""
    ts = tasks_with_outlier(5, T=10, n=60)
    a = cls(k=2, tol=1e-10, polish=False).fit(ts)
    b = cls(k=2, tol=1e-10, accelerate=False, polish=False, max_iter=20000).fit(ts)
    c = cls(k=2, tol=1e-10).fit(ts)
    assert a.converged_ and b.converged_ and c.converged_ and a.n_iter_ <= b.n_iter_ + 2
    fa, fb, fc = (m.objective_history_[-1] for m in (a, b, c))
    assert abs(fa - fb) <= 1e-5 * max(1.0, abs(fb))
    assert abs(fc - fb) <= 1e-5 * max(1.0, abs(fb))


def test_declared_spaces():
    from mtlbench.search.space import Int, space_problems

    for cls in (TFCLQ, TFCLQNoAUC, TFCLQNoG, TFCLCoc):
        assert space_problems(cls.search_space) == []   # every parameter has a start range
    assert TFCLQ.search_space["k"].low == 2 and TFCLCoc.search_space["k"].low == 1
    # the largest k each fit accepts is the declared bound the search clips to
    assert TFCLQ.search_space["k"].high == "d + T"
    assert TFCLCoc.search_space["k"].high == "min(d, T)"
    assert isinstance(TFCLCoc.search_space["k"], Int)
    # start ranges (curvature units; module docstring "Search spaces")
    lo_hi = lambda p: (min(p.grid), max(p.grid))
    for cls in (TFCLQ, TFCLQNoAUC, TFCLCoc):
        assert lo_hi(cls.search_space["lam_common"]) == (1e-2, 100.0)
        assert lo_hi(cls.search_space["lam_ridge"]) == (1e-3, 1.0)
    assert lo_hi(TFCLQNoG.search_space["lam_common"]) == (1e-3, 3.0)
    assert lo_hi(TFCLCoc.search_space["lam_group"]) == (1e-2, 100.0)


def wide_tasks(seed, T=12, d=20, n=8):
    """Fewer rows than features (n_t < d, as at the paper's scale): each task's weights have a
    part outside its row space that the loss does not see."""
    rng = np.random.default_rng(seed)
    basis = rng.standard_normal((d, 2))
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        y = np.where(X @ (basis @ rng.standard_normal(2)) > 0, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("wide", Xs, ys)


@pytest.mark.parametrize("seed", range(5))
def test_nullspace_mm_step_keeps_the_loss_and_does_not_increase_the_penalty(seed):
    from mtlbench_models._core.penalties import cocluster_penalty
    from mtlbench_models.tfcl_q import nullspace_mm_step, row_space_bases

    ts = wide_tasks(seed)
    J = make_loss(ts, "auc", "t")
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((ts.d, ts.T)) * rng.uniform(0.1, 3, ts.T)
    a2, a3, k = 10 ** rng.uniform(-2, 1), 10 ** rng.uniform(-4, 0), int(rng.integers(1, 5))
    U, s, Vt = np.linalg.svd(X, full_matrices=False)
    top = (U[:, :k] * s[:k]) @ Vt[:k]
    Y = nullspace_mm_step(X, top, row_space_bases(J), a2, a3)

    def pen(g):
        return a2 * cocluster_penalty(g, k) + 0.5 * a3 * np.sum(g * g)

    assert abs(J.value(Y) - J.value(X)) <= 1e-9 * max(1.0, J.value(X))
    assert pen(Y) <= pen(X) * (1 + 1e-12)
    assert not np.allclose(Y, X)          # the step moves (n_t < d: the null spaces are not 0)


def test_coc_nullspace_steps_reach_the_sweeps_objective():
    """TFCL(Coc) with the null-space steps (default) and Alg. 2's sweeps only (polish=False)
    reach the same objective from the same start when n_t < d, and the objective never
    increases."""
    ts = wide_tasks(7)
    kw = dict(k=2, lam_group=0.05, lam_ridge=1e-3, lam_common=0.1, lam_personal=0.3,
              tol=1e-11, max_iter=50000)
    a = TFCLCoc(**kw).fit(ts)
    b = TFCLCoc(**kw, polish=False).fit(ts)
    assert a.converged_ and b.converged_
    h = np.array(a.objective_history_)
    assert np.all(np.diff(h) <= 1e-9 * np.maximum(1, np.abs(h[:-1])))
    fa, fb = a.objective_history_[-1], b.objective_history_[-1]
    assert fa <= fb + 1e-6 * max(1.0, abs(fb))
