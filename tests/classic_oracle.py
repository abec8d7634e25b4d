"""A cvxpy oracle shared by the classic baselines' tests: the model's objective written
independently (data term per MALSAR's convention plus a cvxpy penalty) on tiny problems."""
from __future__ import annotations

import warnings

import numpy as np

from mtlbench import TaskSet

CLARABEL = {"solver": "CLARABEL", "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}


def tiny(seed: int, binary: bool, d: int = 4, T: int = 4, n: int = 10) -> TaskSet:
    rng = np.random.default_rng(seed)
    Xs = [rng.standard_normal((n + 2 * t, d)) for t in range(T)]
    ys = [X @ rng.standard_normal(d) + 0.5 * rng.standard_normal(X.shape[0]) for X in Xs]
    if binary:
        ys = [np.where(y > 0, 1.0, -1.0) for y in ys]
        for y in ys:
            y[:2] = (1.0, -1.0)
    return TaskSet.from_arrays("tiny", Xs, ys, target_kind="binary" if binary else "real")


def cvxpy_optimum(cp, tasks: TaskSet, penalty, loss: str) -> float:
    """min over W (and intercepts c for ``logistic-mean``) of the data term plus
    ``penalty(W)``: ``squared`` sum_t 1/2 ||.||^2, ``logistic`` summed, ``logistic-mean``
    MALSAR's averaged loss with intercepts."""
    d, T = tasks.d, tasks.T
    W, c = cp.Variable((d, T)), cp.Variable(T)
    terms = []
    for t in range(T):
        z = tasks.X(t) @ W[:, t]
        if loss == "squared":
            terms.append(0.5 * cp.sum_squares(z - tasks.y(t)))
        elif loss == "logistic":
            terms.append(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), z))))
        else:
            terms.append(cp.sum(cp.logistic(-cp.multiply(tasks.y(t), z + c[t])))
                         / tasks.y(t).size)
    expr, cons = penalty(W)
    prob = cp.Problem(cp.Minimize(sum(terms) + expr), cons)
    with warnings.catch_warnings():   # "inaccurate": the tests compare at 1e-6 relative
        warnings.simplefilter("ignore", UserWarning)
        prob.solve(**CLARABEL)
    return float(prob.value)
