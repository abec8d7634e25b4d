"""srmtl / srmtl-logistic: the optimum against cvxpy (both losses, the default and a meta
graph), W = 0 at rho_ratio = 1, the certificate, and the target kinds."""
from __future__ import annotations

import numpy as np
import pytest

from classic_oracles import cvxpy_optimum, tiny
from mtlbench import TaskSet
from mtlbench.errors import ConfigError
from mtlbench.protocol import ProtocolConfig, run_protocol
from mtlbench_models.srmtl import SRMTL, SRMTLLogistic, task_laplacian

cp = pytest.importorskip("cvxpy")


def _penalty(m, Lg):
    e, U = np.linalg.eigh(Lg)
    R = U * np.sqrt(np.maximum(e, 0.0))                 # R R^T = Lg: tr(W Lg W^T) = ||W R||^2

    def pen(W):
        return m.rho1_ * cp.sum_squares(W @ R) + m.rho2_ * cp.sum(cp.abs(W)), []
    return pen


def _with_graph(tasks: TaskSet) -> TaskSet:
    A = np.zeros((tasks.T, tasks.T))
    A[0, 1] = A[1, 0] = 2.0
    A[2, 3] = A[3, 2] = 0.5
    A[1, 2] = A[2, 1] = 1.0
    return TaskSet.from_arrays("g", [tasks.X(t) for t in range(tasks.T)],
                               [tasks.y(t) for t in range(tasks.T)], meta={"task_graph": A},
                               target_kind=tasks.target_kind)


@pytest.mark.parametrize("cls,loss", [(SRMTL, "squared"), (SRMTLLogistic, "logistic")])
@pytest.mark.parametrize("graph", [False, True])
def test_optimum_matches_cvxpy(cls, loss, graph):
    tasks = tiny(1, binary=loss != "squared")
    tasks = _with_graph(tasks) if graph else tasks
    m = cls(graph_ratio=0.3, rho_ratio=0.1, tol=1e-7, max_iter=50000).fit(tasks)
    assert m.converged_
    assert m.gap_ <= m.tol                     # a relative duality gap for both losses
    ref = cvxpy_optimum(tasks, loss,
                        lambda b: _penalty(m, task_laplacian(tasks))(b[0]))
    assert m.fitted_objective(tasks) == pytest.approx(ref, rel=1e-6)


@pytest.mark.parametrize("graph", [False, True])
def test_under_determined_tasks_run_coordinate_descent_to_the_cvxpy_optimum(graph):
    """n_t < d: ``srmtl`` runs block coordinate descent (the exact row minimiser for the
    complete graph, proximal row steps for a graph of the data) and reaches the optimum;
    with n_t >= d it runs FISTA."""
    tasks = tiny(3, binary=False, d=9, n=5)
    tasks = _with_graph(tasks) if graph else tasks
    m = SRMTL(graph_ratio=0.3, rho_ratio=0.1, tol=1e-8, max_iter=50000)
    assert m._coordinate_descent(tasks) and not m._coordinate_descent(tiny(1, binary=False))
    m.fit(tasks)
    assert m.converged_ and m.gap_ <= m.tol
    ref = cvxpy_optimum(tasks, "squared", lambda b: _penalty(m, task_laplacian(tasks))(b[0]))
    assert m.fitted_objective(tasks) == pytest.approx(ref, rel=1e-6)


def test_default_graph_is_the_mean_regulariser():
    tasks = tiny(2, binary=False)
    W = np.random.default_rng(0).standard_normal((tasks.d, tasks.T))
    Lg = task_laplacian(tasks)
    dev = W - W.mean(axis=1, keepdims=True)
    assert np.sum((W @ Lg) * W) == pytest.approx(np.sum(dev * dev), rel=1e-12)


@pytest.mark.parametrize("cls", [SRMTL, SRMTLLogistic])
def test_rho_ratio_one_gives_zero_weights_and_small_max_iter_is_not_converged(cls):
    tasks = tiny(3, binary=True)
    m = cls(graph_ratio=0.1, rho_ratio=1.0).fit(tasks)
    assert m.converged_ and not np.any(m.coef_)
    assert np.abs(m.coef_).max() == 0 and np.any(cls(rho_ratio=0.9).fit(tasks).coef_)
    slow = cls(graph_ratio=1e-3, rho_ratio=0.01, max_iter=2).fit(tasks)
    assert not slow.converged_ and slow.n_iter_ == 2


def test_a_bad_meta_graph_is_one_clear_line():
    tasks = tiny(4, binary=False)
    bad = TaskSet.from_arrays("bad", [tasks.X(t) for t in range(tasks.T)],
                              [tasks.y(t) for t in range(tasks.T)],
                              meta={"task_graph": np.ones((2, 2))}, target_kind="real")
    with pytest.raises(ValueError, match=r"meta\['task_graph'\] of 'bad' must be a symmetric"):
        SRMTL().fit(bad)


def test_squared_runs_on_real_targets_and_logistic_is_refused():
    reg = tiny(5, binary=False, T=5, n=16)
    out = run_protocol(SRMTL(), {"rho_ratio": [0.05, 0.2]}, reg, ProtocolConfig(), 0)
    assert np.isfinite(out.val_score)
    with pytest.raises(ConfigError, match=r"model 'srmtl-logistic' handles binary"):
        run_protocol(SRMTLLogistic(), {"rho_ratio": [0.1]}, reg, ProtocolConfig(), 0)
