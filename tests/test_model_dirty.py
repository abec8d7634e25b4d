"""dirty / dirty-logistic: the optimum of each loss matches cvxpy, the gap certifies it, a
tiny cap is not converged, (P, Q) = 0 exactly when both ratios are 1, the degenerate regimes
(lam2 >= lam1: Q = 0), both target kinds end to end."""
from __future__ import annotations

import cvxpy as cp
import numpy as np
import pytest

from classic_oracles import (check_not_converged_at_a_tiny_cap, check_optimum,
                             check_targets_end_to_end, small_tasks)
from mtlbench_models.dirty import Dirty, DirtyLogistic


@pytest.mark.parametrize("cls", [Dirty, DirtyLogistic])
@pytest.mark.parametrize("r1,r2", [(0.2, 0.6), (0.5, 0.3)])
def test_optimum_matches_cvxpy(cls, r1, r2):
    tasks = small_tasks(7)
    m = cls(lam1_ratio=r1, lam2_ratio=r2, tol=1e-7, max_iter=20000).fit(tasks)
    lam1, lam2 = m.lams()
    check_optimum(m, tasks, lambda B: lam1 * cp.sum(cp.max(cp.abs(B[0]), axis=1))
                  + lam2 * cp.sum(cp.abs(B[1])), n_blocks=2)
    np.testing.assert_allclose(m.coef_, m.P_ + m.Q_)


@pytest.mark.parametrize("cls", [Dirty, DirtyLogistic])
def test_lambda_max_and_caps(cls):
    tasks = small_tasks(8)
    m = cls(lam1_ratio=1.0, lam2_ratio=1.0).fit(tasks)
    assert m.converged_ and m.n_iter_ == 0 and np.all(m.coef_ == 0.0)
    check_not_converged_at_a_tiny_cap(cls, tasks, lam1_ratio=0.1, lam2_ratio=0.3)


def test_elementwise_weight_above_the_block_weight_leaves_q_zero():
    tasks = small_tasks(9)
    m = Dirty(lam1_ratio=0.05, lam2_ratio=0.9, tol=1e-8).fit(tasks)
    lam1, lam2 = m.lams()
    assert lam2 >= lam1 and np.all(m.Q_ == 0.0) and np.any(m.P_ != 0.0)


@pytest.mark.slow
def test_squared_runs_on_regression_and_logistic_is_refused(tmp_path, shared_data_dir):
    check_targets_end_to_end(tmp_path, shared_data_dir, "dirty", "dirty-logistic")
