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
def test_objective_never_increases(cls, schedule):
    ts = tasks_with_outlier(0)
    scale = 10.0 if cls is TFCLQNoAUC else 1.0
    m = cls(lam_common=0.1 * scale, lam_group=0.5 * scale, lam_ridge=0.1 * scale,
            lam_personal=0.2 * scale, k=2, schedule=schedule, lam_scale="absolute",
            max_iter=120).fit(ts)
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


def test_warm_start():
    ts = tasks_with_outlier(4)
    a = TFCLQ(k=2, max_iter=200).fit(ts)
    b = TFCLQ(k=2, lam_group=a.lam_group * 1.1, max_iter=200).fit(ts, init=a)
    assert b.n_iter_ >= 1 and np.isfinite(b.objective_history_[-1])
