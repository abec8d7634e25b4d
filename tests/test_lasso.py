"""LASSO: the batched homotopy against an exact cvxpy solve and against scikit-learn's
coordinate descent (the alternative solver), on both data representations (padded rows when
n_t < d, Gram matrices when n_t > d) and on degenerate integer designs."""
import cvxpy as cp
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from mtlbench import TaskSet
from mtlbench.progress import ProgressRecorder
from mtlbench_models.lasso import LASSO, LASSOSklearnCD, _lasso_data, lasso_objective

from conftest import small_problem


def _cvxpy_optimum(ts, rho):
    W = cp.Variable((ts.d, ts.T))
    loss = sum(0.5 * cp.sum_squares(ts.y(t) - ts.X(t) @ W[:, t]) for t in range(ts.T))
    prob = cp.Problem(cp.Minimize(loss + rho * cp.sum(cp.abs(W))))
    prob.solve(solver=cp.CLARABEL)
    return prob.value, W.value


def _tasks(T, n, d, seed):
    """Tasks of n_t = n + t rows (uneven: padding is exercised)."""
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n + t, d)) for t in range(T)]
    ys = [np.where(X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(X.shape[0]) > 0,
                   1.0, -1.0) for X in Xs]
    for y in ys:
        y[:2] = [1.0, -1.0]
    return TaskSet.from_arrays("t", Xs, ys)


@pytest.mark.parametrize("seed, ratio, n, d", [(0, 0.05, 25, 6), (1, 0.2, 25, 6),
                                               (2, 0.01, 25, 6), (3, 0.01, 8, 20),
                                               (4, 0.003, 10, 40)])
def test_lasso_objective_matches_cvxpy(seed, ratio, n, d):
    ts = _tasks(3, n, d, seed)
    model = LASSO(rho_ratio=ratio).fit(ts)
    assert _lasso_data(ts).mode == ("gram" if d < n + 2 else "rows")
    ref, W = _cvxpy_optimum(ts, model.rho_)
    ours = lasso_objective(ts, model.coef_, model.rho_)
    assert model.converged_
    # the homotopy is exact: it is never above the conic solver's optimum by more than that
    # solver's own accuracy, and its certified gap is at rounding level
    assert ours <= ref * (1 + 1e-7)
    assert ours == pytest.approx(ref, rel=1e-6)
    assert model.diagnostics_["max_relative_gap"] < 1e-12
    assert model.fitted_objective(ts) == pytest.approx(model.objective_history_[-1], rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), ratio=st.floats(0.002, 0.9),
       shape=st.sampled_from([(6, 30), (40, 12), (15, 15)]))
@example(seed=127, ratio=0.0078125, shape=(6, 30))      # the reference CD stops at max_iter
def test_homotopy_and_coordinate_descent_agree(seed, ratio, shape):
    n, d = shape
    ts = _tasks(4, n, d, seed)
    h = LASSO(rho_ratio=ratio).fit(ts)
    s = LASSOSklearnCD(rho_ratio=ratio, max_iter=100_000).fit(ts)
    assert h.converged_
    Fh, Fs = h.fitted_objective(ts), s.fitted_objective(ts)
    # each is above the optimum by at most its duality gap, whether or not it met its tolerance
    # (scikit-learn's CD can stop at max_iter on n < d designs with a small rho: seed 127,
    # ratio 2^-7, (6, 30) ends with a gap of 7.7e-6 on one task and says it did not converge)
    data = _lasso_data(ts)
    gap_h = float(data.gaps(h.coef_.T, h.rho_)[0].sum())
    gap_s = float(data.gaps(s.coef_.T, s.rho_)[0].sum())
    assert abs(Fh - Fs) <= max(gap_h, gap_s) + 1e-12 * abs(Fs)
    if s.converged_:
        # both certify a gap <= 1e-8 ||y_t||^2 per task: their objectives differ by less
        total_yy = sum(ts.y(t) @ ts.y(t) for t in range(ts.T))
        assert abs(Fh - Fs) <= 1e-8 * total_yy
    assert Fh <= Fs + 1e-12 * abs(Fs)


def test_degenerate_plus_minus_one_design_with_ties_and_duplicated_columns():
    """Integer +-1 designs (conjoint data) tie events; a duplicated and a zero column lie in
    the span of any support containing their twin: the fit still certifies every task."""
    rng = np.random.default_rng(5)
    Xs, ys = [], []
    for t in range(8):
        X = rng.choice([-1.0, 1.0], size=(12, 10))
        X = np.column_stack([X, X[:, 0], np.zeros(12)])
        y = np.where(X @ rng.standard_normal(12) > 0, 1.0, -1.0)
        y[:2] = [1.0, -1.0]
        Xs.append(X), ys.append(y)
    ts = TaskSet.from_arrays("pm1", Xs, ys)
    for ratio in (0.3, 0.03, 0.003, 0.0005):
        m = LASSO(rho_ratio=ratio).fit(ts)
        assert m.converged_, (ratio, m.diagnostics_)
        assert np.all(m.coef_[-1] == 0)
        ref, _ = _cvxpy_optimum(ts, m.rho_)
        assert m.fitted_objective(ts) <= ref * (1 + 1e-6)


def test_warm_start_along_a_path_gives_the_cold_solution():
    ts = _tasks(5, 20, 30, 7)
    prev = None
    for ratio in (0.3, 0.003, 0.05, 0.01):
        warm = LASSO(rho_ratio=ratio).fit(ts, init=prev)
        cold = LASSO(rho_ratio=ratio).fit(ts)
        assert warm.diagnostics_["warm_started_tasks"] == (0 if prev is None else ts.T)
        np.testing.assert_allclose(warm.coef_, cold.coef_, atol=1e-10)
        prev = warm


def test_a_warm_start_from_other_data_is_not_trusted():
    """init fitted on other tasks fails the optimality check and the fit starts cold."""
    ts, other = _tasks(3, 20, 10, 1), _tasks(3, 20, 10, 2)
    m = LASSO(rho_ratio=0.05).fit(ts, init=LASSO(rho_ratio=0.1).fit(other))
    assert m.diagnostics_["warm_started_tasks"] == 0
    np.testing.assert_allclose(m.coef_, LASSO(rho_ratio=0.05).fit(ts).coef_, atol=1e-12)


def test_lasso_rejects_bad_hyperparameter():
    with pytest.raises(ValueError, match="lasso: rho_ratio must be > 0"):
        LASSO(rho_ratio=-1).fit(small_problem())


def test_converged_flag_is_the_certified_gap():
    ts = _tasks(3, 8, 40, 3)
    capped = LASSO(rho_ratio=0.001, tol=1e-14, max_iter=1).fit(ts)
    assert capped.converged_ == (capped.diagnostics_["max_relative_gap"] <= 1e-14)
    assert not capped.converged_ and capped.diagnostics_["unconverged_tasks"] >= 1
    sk = LASSOSklearnCD(rho_ratio=0.001, tol=1e-14, max_iter=1).fit(ts)
    assert not sk.converged_ and sk.diagnostics_["unconverged_tasks"] >= 1


@pytest.mark.parametrize("cls", [LASSO, LASSOSklearnCD])
def test_progress_reports_end_at_the_fitted_objective_with_its_gap(cls):
    ts = _tasks(3, 10, 25, 4)
    rec = ProgressRecorder()
    with rec.recording():
        m = cls(rho_ratio=0.01).fit(ts)
    assert len(rec.points) >= 2
    last = rec.points[-1]
    assert last.objective == pytest.approx(m.fitted_objective(ts), rel=1e-12)
    assert last.certificate is not None and 0 <= last.certificate <= 1e-8 * sum(
        ts.y(t) @ ts.y(t) for t in range(ts.T))
    # no listener: the same fit, bit for bit
    np.testing.assert_array_equal(cls(rho_ratio=0.01).fit(ts).coef_, m.coef_)


@pytest.mark.parametrize("seed", [3, 11, 21, 36, 38])
def test_a_non_unique_solution_does_not_depend_on_the_order_of_the_rows(seed):
    """+-1 designs with fewer rows than features (as a conjoint survey's): the LASSO solution
    is often not unique, and the path meets exactly tied join events (a free feature that the
    support and another free feature span).  Reordering a task's rows changes only the
    rounding; the homotopy must pick the same solution (ties go to the smallest index)."""
    rng = np.random.default_rng(seed)
    T, n, d = 6, 12, 14
    Xs = [rng.choice([-1.0, 1.0], size=(n, d)) for _ in range(T)]
    ys = [rng.choice([-1.0, 1.0], size=n) for _ in range(T)]
    for y in ys:
        y[:2] = [-1.0, 1.0]
    ref = LASSO(rho_ratio=0.05).fit(TaskSet.from_arrays("pm1", Xs, ys)).coef_
    for _ in range(4):
        perms = [rng.permutation(n) for _ in range(T)]
        W = LASSO(rho_ratio=0.05).fit(TaskSet.from_arrays(
            "pm1", [X[p] for X, p in zip(Xs, perms)], [y[p] for y, p in zip(ys, perms)])).coef_
        np.testing.assert_allclose(W, ref, rtol=0, atol=1e-9)
