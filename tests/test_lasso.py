"""LASSO against an exact cvxpy solve of the same objective."""
import cvxpy as cp
import numpy as np
import pytest

from mtlbench_models.lasso import LASSO, lasso_objective

from conftest import small_problem


@pytest.mark.parametrize("seed, ratio", [(0, 0.05), (1, 0.2), (2, 0.01)])
def test_lasso_objective_matches_cvxpy(seed, ratio):
    ts = small_problem(T=3, n=25, d=6, seed=seed)
    model = LASSO(rho_ratio=ratio).fit(ts)
    rho = model.rho_
    W = cp.Variable((ts.d, ts.T))
    loss = sum(0.5 * cp.sum_squares(ts.y(t) - ts.X(t) @ W[:, t]) for t in range(ts.T))
    prob = cp.Problem(cp.Minimize(loss + rho * cp.sum(cp.abs(W))))
    prob.solve(solver=cp.CLARABEL)
    ours = lasso_objective(ts, model.coef_, rho)
    assert ours == pytest.approx(prob.value, rel=1e-6)
    np.testing.assert_allclose(model.coef_, W.value, atol=1e-4)


def test_lasso_warm_start_gives_the_same_solution():
    ts = small_problem(T=3, n=25, d=6)
    a = LASSO(rho_ratio=0.05).fit(ts)
    b = LASSO(rho_ratio=0.05).fit(ts, init=LASSO(rho_ratio=0.2).fit(ts))
    np.testing.assert_allclose(a.coef_, b.coef_, atol=1e-7)


def test_lasso_rejects_bad_hyperparameter():
    with pytest.raises(ValueError, match="lasso: rho_ratio must be > 0"):
        LASSO(rho_ratio=-1).fit(small_problem())


def test_lasso_converged_flag():
    ts = small_problem(T=3, n=25, d=6)
    assert LASSO(rho_ratio=0.05).fit(ts).converged_
    capped = LASSO(rho_ratio=0.001, tol=1e-14, max_iter=1).fit(ts)
    assert not capped.converged_ and capped.diagnostics_["unconverged_tasks"] >= 1
