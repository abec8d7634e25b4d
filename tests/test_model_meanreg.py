"""meanreg / meanreg-logistic: the optimum against cvxpy (both losses), the equivalence with
Evgeniou & Pontil's (w_0, v_t) form, the certificate, and the target kinds."""
from __future__ import annotations

import numpy as np
import pytest

from classic_oracles import cvxpy_optimum, tiny
from mtlbench.errors import ConfigError
from mtlbench.protocol import ProtocolConfig, run_protocol
from mtlbench_models.meanreg import MeanReg, MeanRegLogistic

cp = pytest.importorskip("cvxpy")


def _penalty(m):
    def pen(W):
        T = W.shape[1]
        mean = cp.sum(W, axis=1) / T
        dev = W - cp.reshape(mean, (W.shape[0], 1), order="F") @ np.ones((1, T))
        return m.lam_ * cp.sum_squares(dev) + m.lam_mean_ * T * cp.sum_squares(mean), []
    return pen


@pytest.mark.parametrize("cls,loss", [(MeanReg, "squared"), (MeanRegLogistic, "logistic-sum")])
@pytest.mark.parametrize("params", [{"lam_ratio": 0.05, "mean_ratio": 0.1},
                                    {"lam_ratio": 1.0, "mean_ratio": 1.0}])
def test_optimum_matches_cvxpy(cls, loss, params):
    tasks = tiny(1, binary=loss != "squared")
    m = cls(tol=1e-7, max_iter=20000, **params).fit(tasks)
    assert m.converged_ and m.gap_ <= m.tol
    assert m.fitted_objective(tasks) == pytest.approx(
        cvxpy_optimum(tasks, loss, lambda b: _penalty(m)(b[0])), rel=1e-6)


def test_the_paper_form_with_w0_has_the_same_optimum():
    """lam1/T sum_t ||v_t||^2 + lam2 ||w_0||^2 over w_t = w_0 + v_t equals the penalty in W
    with a = lam1 / T and b = lam1 lam2 / (T (lam1 + lam2))."""
    tasks = tiny(2, binary=False)
    m = MeanReg(lam_ratio=0.2, mean_ratio=0.3, tol=1e-10, max_iter=20000).fit(tasks)
    T, d = tasks.T, tasks.d
    lam1 = T * m.lam_
    lam2 = lam1 * m.mean_ratio / (1 - m.mean_ratio)           # b / a = lam2 / (lam1 + lam2)
    w0, V = cp.Variable(d), cp.Variable((d, T))
    data = sum(0.5 * cp.sum_squares(tasks.X(t) @ (w0 + V[:, t]) - tasks.y(t)) for t in range(T))
    prob = cp.Problem(cp.Minimize(data + lam1 / T * cp.sum_squares(V)
                                  + lam2 * cp.sum_squares(w0)))
    prob.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    assert m.fitted_objective(tasks) == pytest.approx(prob.value, rel=1e-7)
    np.testing.assert_allclose(m.coef_, w0.value[:, None] + V.value, atol=1e-4)


def test_a_too_small_max_iter_is_not_converged():
    tasks = tiny(3, binary=True)
    m = MeanRegLogistic(lam_ratio=1e-3, mean_ratio=0.01, max_iter=2).fit(tasks)
    assert not m.converged_ and m.gap_ > m.tol and m.n_iter_ == 2


@pytest.mark.parametrize("params", [{"lam_ratio": 1e-3, "mean_ratio": 0.01},
                                    {"lam_ratio": 3.0, "mean_ratio": 1.0}])
def test_the_squared_optimum_is_in_closed_form_and_certified_by_its_gap(params):
    """No iteration: the closed form's duality gap is at rounding level (wide tasks, n < d)."""
    tasks = tiny(3, binary=False, d=12, T=5, n=6)
    m = MeanReg(max_iter=1, **params).fit(tasks)
    assert m.converged_ and m.n_iter_ == 0 and m.gap_ < 1e-12


def test_squared_runs_on_real_targets_and_logistic_is_refused():
    reg = tiny(4, binary=False, T=5, n=16)
    out = run_protocol(MeanReg(), {"lam_ratio": [0.01, 0.1]}, reg, ProtocolConfig(), 0)
    assert np.isfinite(out.val_score)
    with pytest.raises(ConfigError, match=r"model 'meanreg-logistic' handles binary"):
        run_protocol(MeanRegLogistic(), {"lam_ratio": [0.1]}, reg, ProtocolConfig(), 0)


def test_a_closed_form_certified_at_its_start_computes_no_step_constant():
    """The closed form's fit reads no Lipschitz constant (each a spectral norm per task):
    none is in the TaskSet's cache afterwards; a datafit that reads it later gets
    ||X_t||_2^2."""
    from mtlbench_models._core.datafits import SquaredLoss

    tasks = tiny(5, binary=False, d=12, T=5, n=6)
    m = MeanReg(lam_ratio=0.3, mean_ratio=0.1).fit(tasks)
    assert m.converged_ and m.n_iter_ == 0
    assert not [key for key in tasks._memo if "lipschitz" in str(key)]
    J = SquaredLoss(tasks)
    expected = [np.linalg.norm(tasks.X(t), 2) ** 2 for t in range(tasks.T)]
    np.testing.assert_allclose(J.task_lipschitz, expected, rtol=1e-10)
    assert J.lipschitz == pytest.approx(max(expected), rel=1e-10)
