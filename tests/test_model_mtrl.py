"""MTRL (squared and logistic): the optimum against cvxpy on the paper's joint (W, b, Omega)
form, the closed-form Omega-step against cvxpy, a monotone objective, warm starts, and
``converged_`` only with the certificate; the squared variants of MTRL and GO-MTL run a unit on
real-valued targets and their logistic variants are refused there in one line."""
from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mtlbench import TaskSet
from mtlbench_models.mtrl import (MTRL, MTRLAdmm, MTRLCvxpy, MTRLFista, MTRLLogistic,
                                  omega_step)


def _tasks(seed=0, d=4, T=3, n=8, real=False):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n + 2 * t, d)) + 0.5 for t in range(T)]
    w = rng.standard_normal(d)
    if real:
        ys = [X @ (w + 0.3 * rng.standard_normal(d)) + 1.0 + 0.1 * rng.standard_normal(len(X))
              for X in Xs]
        return TaskSet.from_arrays("tiny", Xs, ys, target_kind="real")
    ys = []
    for X in Xs:
        y = np.where(X @ w + 0.8 * rng.standard_normal(len(X)) > 0.5, 1.0, -1.0)
        y[:2] = [1.0, -1.0]
        ys.append(y)
    return TaskSet.from_arrays("tiny", Xs, ys)


def _cvxpy_joint(tasks, lam1, lam2, logistic):
    """The paper's problem in (W, b, Omega): tr(W Omega^{-1} W^T) = matrix_frac(W^T, Omega)."""
    d, T = tasks.d, tasks.T
    W, b, Om = cp.Variable((d, T)), cp.Variable(T), cp.Variable((T, T), PSD=True)
    loss = 0
    for t in range(T):
        z = tasks.X(t) @ W[:, t] + b[t]
        loss += (cp.sum(cp.logistic(-cp.multiply(tasks.y(t), z))) if logistic
                 else 0.5 * cp.sum_squares(tasks.y(t) - z))
    obj = loss + lam1 / 2 * cp.sum_squares(W) + lam2 / 2 * cp.matrix_frac(W.T, Om)
    prob = cp.Problem(cp.Minimize(obj), [cp.trace(Om) == 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prob.solve(solver="CLARABEL")
    return prob.value, W.value, b.value


@pytest.mark.parametrize("cls,real", [(MTRL, True), (MTRL, False), (MTRLLogistic, False)])
def test_optimum_matches_cvxpy_joint_form(cls, real):
    tasks = _tasks(1, real=real)
    m = cls(lam1_ratio=0.05, lam2_ratio=0.2, tol=1e-11, max_iter=200000).fit(tasks)
    assert m.converged_
    value, W, b = _cvxpy_joint(tasks, m.lam1_, m.lam2_, cls is MTRLLogistic)
    F = m.fitted_objective(tasks)
    assert F == pytest.approx(value, rel=1e-6)
    assert F <= value * (1 + 1e-7)
    np.testing.assert_allclose(m.coef_, W, atol=2e-3 * np.abs(W).max())
    np.testing.assert_allclose(m.intercept_, b, atol=2e-3 * max(np.abs(b).max(), 1.0))


def test_omega_step_matches_cvxpy():
    rng = np.random.default_rng(5)
    W = rng.standard_normal((4, 3))
    Om = cp.Variable((3, 3), PSD=True)
    prob = cp.Problem(cp.Minimize(cp.matrix_frac(W.T, Om)), [cp.trace(Om) == 1])
    prob.solve(solver="CLARABEL")
    Om_hat = omega_step(W)
    np.testing.assert_allclose(Om_hat, Om.value, atol=1e-5)
    assert np.trace(W @ np.linalg.solve(Om_hat, W.T)) == pytest.approx(
        np.linalg.svd(W, compute_uv=False).sum() ** 2, rel=1e-10)
    assert prob.value == pytest.approx(np.linalg.svd(W, compute_uv=False).sum() ** 2, rel=1e-6)


def _joint(m, tasks, W, b, Om):
    """The paper's objective at (W, b, Omega), from scratch (squared loss; Omega^{-1} the
    pseudo-inverse where Omega is singular and W's rows lie in its range, as at the
    Omega-step)."""
    loss = sum(0.5 * float(np.sum((tasks.y(t) - tasks.X(t) @ W[:, t] - b[t]) ** 2))
               for t in range(tasks.T))
    return (loss + 0.5 * m.lam1_ * float(np.sum(W * W))
            + 0.5 * m.lam2_ * float(np.trace(W @ np.linalg.pinv(Om, hermitian=True) @ W.T)))


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(1e-3, 1.0))
def test_each_alternating_step_decreases_the_joint_objective(seed, scale):
    """The W-step (the fit, Omega minimised out) and the Omega-step (closed form) each give a
    joint objective no larger than any (W, b, Omega) near them: from a random feasible point,
    the Omega-step at its W decreases it, and the fit at its Omega_ is below both."""
    rng = np.random.default_rng(seed)
    tasks = _tasks(seed % 7, real=True)
    m = MTRL(lam1_ratio=0.05, lam2_ratio=0.2, tol=1e-10, max_iter=100000).fit(tasks)
    d, T = tasks.d, tasks.T
    W = m.coef_ + scale * rng.standard_normal((d, T))
    b = m.intercept_ + scale * rng.standard_normal(T)
    A = rng.standard_normal((T, T))
    Om = A @ A.T + 1e-3 * np.eye(T)
    Om /= np.trace(Om)
    F0 = _joint(m, tasks, W, b, Om)
    F1 = _joint(m, tasks, W, b, omega_step(W))                    # Omega-step
    F2 = _joint(m, tasks, m.coef_, m.intercept_, m.Omega_)        # the fit
    assert F1 <= F0 * (1 + 1e-12)
    assert F2 <= F1 * (1 + 1e-9)
    assert F2 == pytest.approx(m.fitted_objective(tasks), rel=1e-6)   # (Omega_ ill-conditioned)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), lam1=st.floats(1e-3, 1.0), lam2=st.floats(1e-3, 1.0),
       logistic=st.booleans())
def test_objective_never_increases(seed, lam1, lam2, logistic):
    cls = MTRLLogistic if logistic else MTRL
    m = cls(lam1_ratio=lam1, lam2_ratio=lam2, max_iter=300).fit(_tasks(seed))
    h = np.asarray(m.objective_history_)
    assert np.all(np.diff(h) <= 1e-12 * abs(h[0]))


@pytest.mark.parametrize("cls", [MTRL, MTRLLogistic])
def test_converged_only_with_the_certificate_and_warm_start(cls):
    tasks = _tasks(2)
    assert not cls(max_iter=1, tol=1e-12).fit(tasks).converged_
    cold = cls(lam1_ratio=0.1, lam2_ratio=0.1).fit(tasks)
    warm = cls(lam1_ratio=0.1, lam2_ratio=0.12).fit(
        tasks, init=cls(lam1_ratio=0.1, lam2_ratio=0.1).fit(tasks))
    again = cls(lam1_ratio=0.1, lam2_ratio=0.12).fit(tasks)
    assert cold.converged_ and warm.converged_
    assert warm.fitted_objective(tasks) == pytest.approx(again.fitted_objective(tasks), rel=1e-5)


def test_admm_and_fista_reach_the_same_optimum_on_under_determined_tasks():
    """Tasks with fewer rows than features: ``auto`` runs ADMM; it and FISTA reach one optimum
    (also from a warm start at other weights)."""
    tasks = _tasks(4, d=10, T=5, n=4, real=True)
    auto = MTRL(lam1_ratio=0.01, lam2_ratio=0.1, tol=1e-9, max_iter=100000).fit(tasks)
    fista = MTRLFista(lam1_ratio=0.01, lam2_ratio=0.1, tol=1e-9, max_iter=100000).fit(tasks)
    assert auto.diagnostics_["solver"] == "admm" and fista.diagnostics_["solver"] == "fista"
    assert auto.converged_ and fista.converged_
    assert auto.fitted_objective(tasks) == pytest.approx(fista.fitted_objective(tasks), rel=1e-8)
    warm = MTRLAdmm(lam1_ratio=0.02, lam2_ratio=0.05, tol=1e-9, max_iter=100000).fit(
        tasks, init=auto)
    cold = MTRLFista(lam1_ratio=0.02, lam2_ratio=0.05, tol=1e-9, max_iter=100000).fit(tasks)
    assert warm.converged_
    assert warm.fitted_objective(tasks) == pytest.approx(cold.fitted_objective(tasks), rel=1e-8)
    np.testing.assert_allclose(warm.intercept_, cold.intercept_, atol=1e-4)
    assert set(MTRL.solvers) == {"cvxpy", "admm", "fista"}


def test_cvxpy_solver_agrees():
    tasks = _tasks(3, real=True)
    a = MTRL(lam1_ratio=0.1, lam2_ratio=0.3, tol=1e-10, max_iter=100000).fit(tasks)
    b = MTRLCvxpy(lam1_ratio=0.1, lam2_ratio=0.3).fit(tasks)
    assert b.fitted_objective(tasks) == pytest.approx(a.fitted_objective(tasks), rel=1e-6)


@pytest.mark.parametrize("squared, logistic", [("mtrl", "mtrl-logistic"),
                                               ("gomtl", "gomtl-logistic")])
def test_squared_variant_runs_on_real_targets_and_logistic_is_refused(squared, logistic):
    from mtlbench.errors import ConfigError
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig, run_protocol
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(4)
    Xs = [rng.standard_normal((16 + t, 4)) for t in range(4)]
    ys = [2.0 + X @ (w0 + 0.3 * rng.standard_normal(4)) + 0.1 * rng.standard_normal(len(X))
          for X in Xs]
    tasks = TaskSet.from_arrays("reg", Xs, ys, target_kind="real")
    reg = get_registry()
    sq = reg.model_class(squared)
    out = run_protocol(sq(), dict(sq.search_space), tasks, ProtocolConfig(budget=4), 0)
    assert out.select_by == "rmse" and np.isfinite(out.metrics["rmse"])
    lg = reg.model_class(logistic)
    with pytest.raises(ConfigError, match=rf"model '{logistic}' handles binary .* targets"):
        run_protocol(lg(), dict(lg.search_space), tasks, ProtocolConfig(budget=4), 0)
