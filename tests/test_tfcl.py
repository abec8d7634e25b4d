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
def test_objective_never_increases(seed, loss):
    ts = random_tasks(seed)
    lam = 0.5 if loss == "auc" else 5.0
    m = TFCL(lam_group=lam, lam_ridge=0.1, k=3, loss=loss, lam_scale="absolute",
             max_iter=150).fit(ts)
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
    m = TFCL(lam_group=0.2, k=5).fit(ts)   # data-scaled default mode
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(ts.meta["task_groups"], m.task_groups_) > 0.5
    assert m.feature_groups_.shape == (ts.d,) and m.task_groups_.shape == (ts.T,)
    assert m.decision_function(ts.X(0), 0).shape == (200,)


def test_warm_start_and_clone():
    ts = random_tasks(1)
    a = TFCL(lam_group=0.3, k=2, lam_scale="absolute", max_iter=100).fit(ts)
    b = clone(a, lam_group=0.4).fit(ts, init=a)
    c = TFCL(lam_group=0.4, k=2, lam_scale="absolute", max_iter=100).fit(ts)
    assert b.n_iter_ <= c.n_iter_ + 5
    assert TFCL.supports_warm_start and TFCL(lam_group=7).get_params()["lam_group"] == 7


@pytest.mark.parametrize("kw,msg", [({"lam_group": -1}, "lam_group"), ({"k": 0}, "k must"),
                                    ({"loss": "hinge"}, "loss must"), ({"c_factor": 1.0}, "c_factor"),
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
