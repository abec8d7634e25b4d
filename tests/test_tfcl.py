"""TFCL base model (problem P, Alg. 1): monotone objective, fixed point, API contract."""
import numpy as np
import pytest

from mtlbench import TaskSet, clone
from mtlbench_datasets.simulated import make_simulated
from mtlbench_models.tfcl import TFCL, TFCLNoAUC, make_loss, tfcl_wstep, ustep


def random_tasks(seed, T=6, d=8, n=25):
    rng = np.random.default_rng(seed)
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        y = np.where(X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        y[0], y[1] = 1.0, -1.0
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("rand", Xs, ys)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("loss", ["auc", "squared"])
@pytest.mark.parametrize("accelerate", [True, False])
def test_objective_never_increases(seed, loss, accelerate):
    ts = random_tasks(seed)
    lam = 0.5 if loss == "auc" else 5.0
    m = TFCL(lam_group=lam, lam_ridge=0.1, k=3, loss=loss, lam_scale="absolute",
             accelerate=accelerate, max_iter=150).fit(ts)
    h = np.array(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-9 * np.maximum(1, np.abs(h[:-1])))
    assert len(m.w_change_history_) == len(h) == m.n_iter_
    assert len(m.embeddings_) == min(5, m.n_iter_)
    assert m.embeddings_[0].shape == (ts.d + ts.T, 3)


def test_fixed_point_at_convergence():
    ts = random_tasks(42)
    m = TFCL(lam_group=0.5, lam_ridge=0.1, k=3, lam_scale="absolute", max_iter=5000,
             tol=1e-14).fit(ts)
    W = m.coef_
    J = make_loss(ts, "auc", "tfcl")
    C = m.C_
    D = ustep(W, 3).distances()
    W_next = tfcl_wstep(W - J.grad(W) / C, D, 0.5, 0.1, C)
    assert np.linalg.norm(W_next - W) <= 1e-6 * max(1.0, np.linalg.norm(W))


def test_simulated_recovers_structure():
    ts = make_simulated(0)
    m = TFCL(lam_group=0.04, k=5).fit(ts)   # data-scaled default mode
    assert m.converged_
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(ts.meta["task_groups"], m.task_groups_) > 0.5
    assert m.feature_groups_.shape == (ts.d,) and m.task_groups_.shape == (ts.T,)
    assert m.decision_function(ts.X(0), 0).shape == (200,)


def test_non_convex_fits_start_cold_and_clone():
    """(P) is non-convex: the model declares it, and a fit does not depend on ``init``."""
    ts = random_tasks(1)
    assert TFCL.convex is False and TFCL.supports_warm_start is False
    a = TFCL(lam_group=0.3, k=2, lam_scale="absolute").fit(ts)
    b = clone(a, lam_group=0.4).fit(ts, init=a)
    c = TFCL(lam_group=0.4, k=2, lam_scale="absolute").fit(ts)
    np.testing.assert_array_equal(b.coef_, c.coef_)
    assert TFCL(lam_group=7).get_params()["lam_group"] == 7


def block_tasks(seed=3, blocks=6, d_b=3, t_b=3, n=40):
    """Tasks whose true W is block diagonal with ``blocks`` blocks (more components than k)."""
    rng = np.random.default_rng(seed)
    d, T = blocks * d_b, blocks * t_b
    W = np.zeros((d, T))
    for b in range(blocks):
        W[b * d_b:(b + 1) * d_b, b * t_b:(b + 1) * t_b] = rng.normal(2.0, 1.0, (d_b, t_b))
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n, d))
        s = X @ W[:, t] + 0.1 * rng.standard_normal(n)
        ys.append(np.where(s > np.quantile(s, 0.7), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays("blocks", Xs, ys)


@pytest.mark.parametrize("loss", ["auc", "squared"])
def test_k_changes_the_fit_with_more_components_than_k(loss):
    """With the group weight scaled by 1/k, U proportional to k while the graph
    has >= k components made coef_ identical for k = 2, 3, 4.  The data scale no longer
    depends on k, so each k gives a different fit."""
    ts = block_tasks()
    fits = {k: TFCL(lam_group=0.05, k=k, loss=loss).fit(ts) for k in (2, 3, 4)}
    assert all(m.converged_ for m in fits.values())
    # the data's true W has 6 blocks (6 components, more than every k tried); the first
    # iterates of every fit have more components than k (every node starts isolated)
    for a, b in ((2, 3), (3, 4), (2, 4)):
        assert np.abs(fits[a].coef_ - fits[b].coef_).max() > 1e-3 * np.abs(fits[a].coef_).max()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_weight_above_one_over_k_empties_w(seed):
    """The declared upper bound: lam_group * k > 1 gives W = 0 (the first W-step from 0 is
    empty and W = 0 is a fixed point); just below, W is not 0.  At lam_group = 1/k exactly the
    threshold holds with equality in exact arithmetic (alpha_1 D_ij = ||grad J(0)||_inf), and
    the two computed sides differ by a few ulps (W^1 had entries of 3e-17 on random_tasks(0)
    and (1) and none on (2)), so rounding decides there; the test steps 1e-12 relative above
    the threshold, 4 orders of magnitude above that rounding."""
    ts = random_tasks(seed)
    for k in (2, 4):
        assert np.all(TFCL(lam_group=(1.0 + 1e-12) / k, k=k).fit(ts).coef_ == 0)
        assert np.any(TFCL(lam_group=0.9 / k, k=k).fit(ts).coef_ != 0)


def test_stopping_rule_and_converged_flag():
    from mtlbench_models.tfcl import stop_rule

    assert stop_rule(10.0, 10.0 - 5e-6, 1e-4, 1.0, 1e-6)
    assert not stop_rule(10.0, 10.0 - 2e-5, 1e-4, 1.0, 1e-6)       # objective still moving
    assert not stop_rule(10.0, 10.0, 2e-3, 1.0, 1e-6)               # iterate still moving
    ts = random_tasks(4)
    m = TFCL(lam_group=0.05, k=3).fit(ts)
    h = m.objective_history_
    assert m.converged_ and m.n_iter_ < m.max_iter
    assert abs(h[-1] - h[-2]) <= m.tol * max(1.0, abs(h[-1]))
    assert m.w_change_history_[-1] <= np.sqrt(m.tol) * max(1.0, np.linalg.norm(m.coef_))
    capped = TFCL(lam_group=0.05, k=3, max_iter=2).fit(ts)
    assert not capped.converged_ and capped.n_iter_ == 2
    assert capped.diagnostics_["converged"] is False


@pytest.mark.parametrize("loss", ["auc", "squared"])
def test_accelerated_and_plain_reach_the_same_objective(loss):
    """Both minimise (P); on data with clear blocks they reach the same critical value."""
    ts = block_tasks(5)
    a = TFCL(lam_group=0.05, k=6, loss=loss, tol=1e-10).fit(ts)
    b = TFCL(lam_group=0.05, k=6, loss=loss, tol=1e-10, accelerate=False).fit(ts)
    assert a.converged_ and b.converged_ and a.n_iter_ <= b.n_iter_
    fa, fb = a.objective_history_[-1], b.objective_history_[-1]
    assert abs(fa - fb) <= 1e-6 * max(1.0, abs(fb))


def test_declared_space():
    from mtlbench.search.space import Int, Log, space_problems

    for cls in (TFCL, TFCLNoAUC):
        sp = cls.search_space
        assert isinstance(sp["k"], Int) and sp["k"].low == 2 and sp["k"].high == "d + T"
        # version 4 of the search rule: W = 0 at lam_group >= 1/k is a joint bound
        assert isinstance(sp["lam_group"], Log) and sp["lam_group"].high == "1/k"
        assert space_problems(sp) == []   # every parameter declares a start range
    with pytest.raises(ValueError, match="tfcl: k must be >= 2"):
        TFCL(k=1).fit(random_tasks(0))


@pytest.mark.parametrize("k", [2, 3])
def test_lam_group_past_its_bound_1_over_k_gives_w_zero(k):
    """The declared joint bound high="1/k" is where W = 0 begins (module docstring; at 1/k
    itself the two sides of the threshold agree only up to rounding)."""
    assert TFCL(lam_group=0.5 / k, k=k).fit(random_tasks(0)).coef_.any()
    assert not TFCL(lam_group=(1 + 1e-9) / k, k=k).fit(random_tasks(0)).coef_.any()


@pytest.mark.parametrize("kw,msg", [({"lam_group": -1}, "lam_group"), ({"k": 0}, "k must"),
                                    ({"loss": "hinge"}, "loss must"),
                                    ({"c_factor": 1.0}, "c_factor"),
                                    ({"k": 10_000}, "k must"),
                                    ({"lam_scale": "x"}, "lam_scale")])
def test_errors_name_model_and_parameter(kw, msg):
    with pytest.raises(ValueError, match=f"tfcl.*{msg}"):
        TFCL(**kw).fit(random_tasks(0))


def test_noauc_variant_uses_squared_loss():
    assert TFCLNoAUC().loss == "squared" and TFCLNoAUC.name == "tfcl-noauc"


def test_registered():
    from mtlbench.plugins import get_registry

    reg = get_registry()
    for name in ("tfcl", "tfcl-noauc", "tfcl-q", "tfcl-q-noauc", "tfcl-q-nog", "tfcl-coc"):
        assert name in reg.model_names


@pytest.mark.parametrize("name", ["tfcl", "tfcl-noauc", "tfcl-q", "tfcl-coc"])
def test_per_data_memo_is_bit_identical(name):
    """The loss object and scales cached with TaskSet.memo give exactly the fit of a fresh
    TaskSet (no cache)."""
    from mtlbench.plugins import get_registry

    cls = get_registry().model_class(name)
    ts = random_tasks(7)
    first = cls(k=2).fit(ts)
    again = cls(k=2).fit(ts)                       # memo filled by the first fit
    fresh = cls(k=2).fit(random_tasks(7))          # same data, empty memo
    np.testing.assert_array_equal(first.coef_, again.coef_)
    np.testing.assert_array_equal(first.coef_, fresh.coef_)
