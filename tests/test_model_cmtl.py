"""cmtl / cmtl-logistic: the optimum against cvxpy's joint problem in (W, M) (both losses),
the certificate, k > T refused, and the target kinds."""
from __future__ import annotations

import numpy as np
import pytest

from classic_oracles import cvxpy_optimum, tiny
from mtlbench.errors import ConfigError
from mtlbench.protocol import ProtocolConfig, run_protocol
from mtlbench_models.cmtl import CMTL, CMTLAdmm, CMTLFista, CMTLLogistic

cp = pytest.importorskip("cvxpy")


def _penalty(m, T):
    def pen(W):
        eta = m.rho2_ / m.rho1_
        M = cp.Variable((T, T), symmetric=True)
        expr = m.rho1_ * eta * (1 + eta) * cp.matrix_frac(W.T, eta * np.eye(T) + M)
        return expr, [M >> 0, np.eye(T) - M >> 0, cp.trace(M) == m.k]
    return pen


@pytest.mark.parametrize("cls,loss", [(CMTL, "squared"), (CMTLLogistic, "logistic")])
@pytest.mark.parametrize("k", [1, 2])
def test_optimum_matches_cvxpy(cls, loss, k):
    tasks = tiny(1, binary=loss != "squared", d=3, T=5)
    m = cls(cluster_ratio=0.5, ridge_ratio=0.05, k=k, tol=1e-7, max_iter=50000).fit(tasks)
    assert m.converged_
    assert m.gap_ <= m.tol                     # a relative duality gap for both losses
    ref = cvxpy_optimum(tasks, loss, lambda b: _penalty(m, tasks.T)(b[0]))
    assert m.fitted_objective(tasks) == pytest.approx(ref, rel=1e-6)


def test_admm_and_fista_reach_the_same_optimum_from_a_warm_start():
    """cmtl's own solver (ADMM) and its race alternative (FISTA), cold and warm."""
    tasks = tiny(4, binary=False, d=6, T=5, n=4)
    a = CMTLAdmm(cluster_ratio=3.0, ridge_ratio=0.02, tol=1e-9).fit(tasks)
    b = CMTLFista(cluster_ratio=3.0, ridge_ratio=0.02, tol=1e-9).fit(tasks)
    assert a.converged_ and b.converged_ and set(CMTL.solvers) == {"admm", "fista"}
    assert a.fitted_objective(tasks) == pytest.approx(b.fitted_objective(tasks), rel=1e-8)
    warm = CMTLAdmm(cluster_ratio=2.0, ridge_ratio=0.02, tol=1e-9).fit(tasks, init=a)
    cold = CMTLFista(cluster_ratio=2.0, ridge_ratio=0.02, tol=1e-9).fit(tasks)
    assert warm.converged_
    assert warm.fitted_objective(tasks) == pytest.approx(cold.fitted_objective(tasks), rel=1e-8)


@pytest.mark.parametrize("cls", [CMTL, CMTLLogistic])
def test_small_max_iter_is_not_converged_and_k_above_t_is_refused(cls):
    tasks = tiny(3, binary=True)
    slow = cls(cluster_ratio=1e-3, ridge_ratio=1e-3, max_iter=2).fit(tasks)
    assert not slow.converged_ and slow.n_iter_ == 2
    with pytest.raises(ValueError, match=r"k = 9 clusters exceeds the 4 tasks of 'tiny'"):
        cls(k=9).fit(tasks)


def test_squared_runs_on_real_targets_and_logistic_is_refused():
    reg = tiny(5, binary=False, T=5, n=16)
    out = run_protocol(CMTL(), {"cluster_ratio": [0.01, 0.1]}, reg, ProtocolConfig(), 0)
    assert np.isfinite(out.val_score)
    with pytest.raises(ConfigError, match=r"model 'cmtl-logistic' handles binary"):
        run_protocol(CMTLLogistic(), {"cluster_ratio": [0.1]}, reg, ProtocolConfig(), 0)


def test_lbfgs_and_fista_reach_the_same_optimum_and_the_fallback_reaches_tiny_gaps():
    """cmtl-logistic's own solver (L-BFGS on the smooth objective) and its race alternative
    (FISTA with the proximal map), cold and warm; at a tolerance near the rounding of F,
    L-BFGS's line search stops first and FISTA from its point reaches the gap."""
    from mtlbench_models.cmtl import CMTLLogisticFista

    tasks = tiny(6, binary=True, d=6, T=5, n=12)
    a = CMTLLogistic(cluster_ratio=3.0, ridge_ratio=0.01, tol=1e-9).fit(tasks)
    b = CMTLLogisticFista(cluster_ratio=3.0, ridge_ratio=0.01, tol=1e-9).fit(tasks)
    assert a.converged_ and b.converged_ and set(CMTLLogistic.solvers) == {"fista"}
    assert a.fitted_objective(tasks) == pytest.approx(b.fitted_objective(tasks), rel=1e-8)
    hist = np.asarray(a.objective_history_)
    assert np.all(np.diff(hist) <= 1e-13 * hist[1:])      # monotone to rounding
    warm = CMTLLogistic(cluster_ratio=1.0, ridge_ratio=0.01, tol=1e-9).fit(tasks, init=a)
    cold = CMTLLogisticFista(cluster_ratio=1.0, ridge_ratio=0.01, tol=1e-9).fit(tasks)
    assert warm.converged_
    assert warm.fitted_objective(tasks) == pytest.approx(cold.fitted_objective(tasks), rel=1e-8)
    tight = CMTLLogistic(cluster_ratio=3.0, ridge_ratio=0.01, tol=1e-14).fit(tasks)
    assert tight.converged_ and tight.gap_ <= 1e-14
    assert len(tight.objective_history_) == tight.n_iter_ + 1
