"""Shared pieces of the tests of the classic models: small problems and an independent cvxpy
statement of each objective (per-task sums, explicit intercepts), solved by Clarabel to
1e-10."""
from __future__ import annotations

import warnings

import cvxpy as cp
import numpy as np
from click.testing import CliRunner

from mtlbench import TaskSet
from mtlbench.cli import cli


def small_tasks(seed: int = 0, T: int = 4, d: int = 6, n: int = 18) -> TaskSet:
    """T tasks over d features sharing 3 relevant rows, unequal sizes, both classes each."""
    rng = np.random.default_rng(seed)
    W = np.zeros((d, T))
    W[:3] = rng.normal(1.0, 0.5, (3, T))
    W[3, 0] = 2.0                                    # one task-specific feature
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n + 3 * t, d))
        s = X @ W[:, t] + 0.7 * rng.standard_normal(X.shape[0]) + 0.4
        y = np.where(s > 0, 1.0, -1.0)
        y[:2] = (1.0, -1.0)
        Xs.append(X)
        ys.append(y)
    return TaskSet.from_arrays("small", Xs, ys)


def tiny(seed: int, binary: bool, d: int = 4, T: int = 4, n: int = 10) -> TaskSet:
    """T tasks of n + 2t rows over d features, real targets or their signs (both classes)."""
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n + 2 * t, d)) for t in range(T)]
    ys = [X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(X.shape[0]) for X in Xs]
    if binary:
        ys = [np.where(y > 0, 1.0, -1.0) for y in ys]
        for y in ys:
            y[:2] = (1.0, -1.0)
    return TaskSet.from_arrays("tiny", Xs, ys, target_kind="binary" if binary else "real")


def cvxpy_optimum(tasks: TaskSet, loss: str, penalty, n_blocks: int = 1) -> float:
    """min over the blocks (and intercepts) of J(sum of blocks) + penalty(blocks): ``loss``
    ``squared`` (sum_t 1/2 ||.||^2), ``logistic`` (MALSAR's: per-task intercepts, each task's
    loss averaged over its rows) or ``logistic-sum`` (summed, no intercepts); ``penalty``
    returns an expression or (expression, constraints)."""
    d, T = tasks.d, tasks.T
    blocks = [cp.Variable((d, T)) for _ in range(n_blocks)]
    W = sum(blocks)
    if loss == "squared":
        data = sum(0.5 * cp.sum_squares(tasks.X(t) @ W[:, t] - tasks.y(t)) for t in range(T))
    elif loss == "logistic-sum":
        data = sum(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), tasks.X(t) @ W[:, t])))
                   for t in range(T))
    else:
        c = cp.Variable(T)
        data = sum(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), tasks.X(t) @ W[:, t] + c[t])))
                   / tasks.y(t).size for t in range(T))
    pen = penalty(blocks)
    expr, cons = pen if isinstance(pen, tuple) else (pen, [])
    prob = cp.Problem(cp.Minimize(data + expr), cons)
    with warnings.catch_warnings():      # "may be inaccurate" at 1e-10: the value is checked
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value)


def left_factor_optimum(tasks: TaskSet, S: np.ndarray, lam: float) -> np.ndarray:
    """GO-MTL's L-step for the squared loss in closed form: the L (d x k) with
    sum_t X_t^T X_t L s_t s_t^T + lam L = sum_t X_t^T y_t s_t^T, solved in vec(L)."""
    d, k = tasks.d, S.shape[0]
    M = lam * np.eye(d * k)
    rhs = np.zeros((d, k))
    for t in range(tasks.T):
        X, y, s = tasks.X(t), tasks.y(t), S[:, t]
        M += np.kron(np.outer(s, s), X.T @ X)
        rhs += np.outer(X.T @ y, s)
    return np.linalg.solve(M, rhs.ravel(order="F")).reshape((d, k), order="F")


def check_optimum(model, tasks: TaskSet, penalty, n_blocks: int = 1) -> None:
    """The fit converged, its fitted objective is its last history value, and it is within
    1e-6 relative of the cvxpy optimum (``penalty`` of ``n_blocks`` summed blocks)."""
    ref = cvxpy_optimum(tasks, model.loss, penalty, n_blocks)
    ours = model.fitted_objective(tasks)
    assert model.converged_ and model.gap_ <= model.tol
    assert abs(ours - model.objective_history_[-1]) <= 1e-12 * abs(ours)
    assert abs(ours - ref) <= 1e-6 * abs(ref), (ours, ref)


def check_not_converged_at_a_tiny_cap(cls, tasks: TaskSet, **params) -> None:
    m = cls(max_iter=2, tol=1e-10, **params).fit(tasks)
    assert not m.converged_ and m.n_iter_ == 2 and m.gap_ > 1e-10


def check_targets_end_to_end(tmp_path, data_dir, squared: str, logistic: str) -> None:
    """The squared variant runs on school-regression (one repetition, the declared grid);
    the logistic one is refused on it in one line."""
    store = str(tmp_path / "s.sqlite")
    args = ["compare", "--datasets", "school-regression", "--reps", "1", "--search", "grid",
            "--data-dir", str(data_dir), "--store", store, "-j", "1"]
    res = CliRunner().invoke(cli, args + ["--models", squared])
    assert res.exit_code == 0, res.output
    assert "rmse" in res.output.lower()
    res = CliRunner().invoke(cli, args + ["--models", logistic])
    assert res.exit_code != 0
    line = next(ln for ln in res.output.splitlines() if logistic in ln)
    assert "real" in line, res.output
