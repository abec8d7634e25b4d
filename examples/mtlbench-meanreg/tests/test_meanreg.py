"""Tests of the mean-regularised MTL plugin: the mtlbench conformance kit plus an oracle."""
import numpy as np
import pytest

from mtlbench import TaskSet
from mtlbench.testing import ModelConformance

from mtlbench_meanreg import MeanRegularizedMTL, objective


class TestMeanRegConformance(ModelConformance):
    model_class = MeanRegularizedMTL


def _tasks(sizes=(5, 9, 30), d=8, seed=0):
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n, d)) for n in sizes]
    ys = [np.where(rng.standard_normal(n) > 0, 1.0, -1.0) for n in sizes]
    for y in ys:
        y[:2] = (1.0, -1.0)
    return TaskSet.from_arrays("toy", Xs, ys)


def test_matches_cvxpy():
    cp = pytest.importorskip("cvxpy")
    tasks = _tasks()
    lam1, lam2 = 0.7, 2.0
    m = MeanRegularizedMTL(lam1=lam1, lam2=lam2).fit(tasks)
    W = cp.Variable((tasks.d, tasks.T))
    w0 = cp.Variable(tasks.d)
    obj = sum(0.5 * cp.sum_squares(tasks.y(t) - tasks.X(t) @ W[:, t]) for t in range(tasks.T))
    obj += 0.5 * lam1 * sum(cp.sum_squares(W[:, t] - w0) for t in range(tasks.T))
    obj += 0.5 * lam2 * cp.sum_squares(w0)
    prob = cp.Problem(cp.Minimize(obj))
    prob.solve(solver="CLARABEL")
    assert m.objective_history_[0] <= prob.value + 1e-6 * max(1.0, abs(prob.value))
    np.testing.assert_allclose(m.coef_, W.value, atol=1e-5)
    np.testing.assert_allclose(m.mean_coef_, w0.value, atol=1e-5)


def test_gradient_is_zero_at_solution():
    tasks = _tasks(sizes=(4, 20, 12), d=10, seed=3)
    m = MeanRegularizedMTL(lam1=2.0, lam2=0.5).fit(tasks)
    W, w0 = m.coef_, m.mean_coef_
    for t in range(tasks.T):
        X, y = tasks.X(t), tasks.y(t)
        g = X.T @ (X @ W[:, t] - y) + 2.0 * (W[:, t] - w0)
        np.testing.assert_allclose(g, 0.0, atol=1e-9)
    np.testing.assert_allclose(2.0 * (w0[:, None] - W).sum(axis=1) + 0.5 * w0, 0.0, atol=1e-9)
    assert np.isclose(m.objective_history_[0], objective(tasks, W, w0, 2.0, 0.5))


def test_large_lam1_pools_the_tasks():
    tasks = _tasks()
    m = MeanRegularizedMTL(lam1=1e8, lam2=1.0).fit(tasks)
    np.testing.assert_allclose(m.coef_, np.repeat(m.mean_coef_[:, None], tasks.T, 1), atol=1e-6)


@pytest.mark.parametrize("bad", [0.0, -1.0, "x"])
def test_invalid_lambda_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="meanreg-example: lam1 must be"):
        MeanRegularizedMTL(lam1=bad).fit(_tasks())
