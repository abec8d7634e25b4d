"""ADMM (``_core.splitting``): the same certified optimum as FISTA on under-determined tasks
(the clustered relaxation with a prox that reports its value, L1 with a dual norm), warm
starts, residual balancing switched off, the cap, and disagreeing shapes refused."""
from __future__ import annotations

import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench_models._core.datafits import SquaredLoss
from mtlbench_models._core.penalties import L1, ClusterRelaxation
from mtlbench_models._core.representations import TaskSpectra
from mtlbench_models._core.solvers import FISTA, duality_gap
from mtlbench_models._core.splitting import ADMM


def _tasks(seed: int, d: int = 12, T: int = 6) -> TaskSet:
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((5 + t, d)) for t in range(T)]          # n_t < d
    ys = [X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(X.shape[0]) for X in Xs]
    return TaskSet.from_arrays("toy", Xs, ys, target_kind="real")


@pytest.mark.parametrize("penalty", [ClusterRelaxation(2.0, 0.05, 2), L1(0.5)])
@pytest.mark.parametrize("options", [{}, {"max_changes": 0, "check_every": 3},
                                     {"adapt_every": 1}])
def test_admm_reaches_fistas_certified_optimum(penalty, options):
    tasks = _tasks(1)
    J = SquaredLoss(tasks, wide="padded")
    W0 = np.zeros((tasks.d, tasks.T))
    ref = FISTA(tol=1e-10, max_iter=100000).solve(J, penalty, W0)
    res = ADMM(TaskSpectra.of(tasks), rho=1.0, tol=1e-10, max_iter=100000,
               **options).solve(J, penalty, W0)
    assert ref.converged and res.converged and res.certificate_kind == "gap"
    F = lambda W: J.value(W) + penalty.value(W)
    assert F(res.W) == pytest.approx(F(ref.W), rel=1e-9)
    assert duality_gap(J, penalty, res.W) <= 1e-10 * F(res.W) * (1 + 1e-6)
    assert len(res.history) == res.n_iter + 1 and res.history[-1] == pytest.approx(F(res.W))


def test_admm_warm_start_at_the_optimum_and_the_cap():
    tasks = _tasks(2)
    J, pen = SquaredLoss(tasks, wide="padded"), ClusterRelaxation(1.0, 0.1, 2)
    solver = ADMM(TaskSpectra.of(tasks), rho=0.5, tol=1e-8)
    res = solver.solve(J, pen, np.zeros((tasks.d, tasks.T)))
    again = solver.solve(J, pen, res.W)
    assert again.converged and again.n_iter == 0
    capped = ADMM(TaskSpectra.of(tasks), rho=0.5, tol=1e-14, max_iter=4,
                  check_every=3).solve(J, pen, np.zeros((tasks.d, tasks.T)))
    assert not capped.converged and capped.n_iter == 4
    assert capped.certificate == pytest.approx(
        duality_gap(J, pen, capped.W) / capped.history[-1], rel=1e-9)


def test_admm_refuses_disagreeing_shapes_and_bad_options():
    tasks = _tasks(3)
    J = SquaredLoss(tasks)
    with pytest.raises(ValueError, match=r"ADMM: the spectra \(12 x 6\), the datafit"):
        ADMM(TaskSpectra.of(tasks), rho=1.0).solve(J, L1(0.1), np.zeros((3, 6)))
    with pytest.raises(ValueError, match=r"ADMM: rho must be > 0"):
        ADMM(TaskSpectra.of(tasks), rho=0.0)
