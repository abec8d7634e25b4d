"""LASSO: per-task l1-regularised least squares (Tibshirani 1996), the paper's sparse baseline.

Objective (one rho shared by all tasks, instance-wise squared loss as in the paper's
Experimental Settings):

    min_W  sum_t 1/2 ||y_t - X_t w_t||^2 + rho ||W||_1

It separates over tasks; each task is solved by scikit-learn's coordinate descent, whose
objective is (1/(2 n_t)) ||y - X w||^2 + a ||w||_1, so a = rho / n_t gives the same minimiser.
``rho = rho_ratio * rho_max`` with rho_max = max_t ||X_t^T y_t||_inf, the smallest rho for
which W = 0 is optimal: the grid is then scale-free across datasets.

Search space: ``rho_ratio`` is log-scaled; its start range [0.003, 0.3] is the first
release's grid {0.003, 0.01, 0.03, 0.1, 0.3} (unchanged, so ``--search grid`` reproduces the
published numbers bit for bit; docs/tuning.md, rule version 4 spreads 12 design points over
the range); bounds: rho_ratio > 0, and ``high = 1``: at rho_ratio >= 1 the penalty
is >= rho_max and W = 0 is optimal for every task (every larger value is the same model).

Convergence: scikit-learn's coordinate descent stops when, after a sweep whose largest
coefficient update is small, the duality gap of the task's problem
1/2 ||y_t - X_t w||^2 + rho ||w||_1 is <= tol * ||y_t||^2 (tol = 1e-8 by default, i.e. a
relative gap of 1e-8 in units of the loss at w = 0).  ``converged_`` is True when every task
met it within ``max_iter`` sweeps (no ConvergenceWarning).  Convex: warm starts along a
search cannot change the optimum.
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso as _SkLasso

from mtlbench import Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl


def lasso_rho_max(tasks: TaskSet) -> float:
    return float(max(np.abs(tasks.X(t).T @ tasks.y(t)).max() for t in range(tasks.T)))


def lasso_objective(tasks: TaskSet, W: np.ndarray, rho: float) -> float:
    loss = sum(0.5 * np.sum((tasks.y(t) - tasks.X(t) @ W[:, t]) ** 2) for t in range(tasks.T))
    return float(loss + rho * np.abs(W).sum())


class LASSO(LinearMTLModel):
    """Per-task l1 least squares; ``rho_ratio`` in (0, 1] scales rho_max."""

    name = "lasso"
    paper = "Tibshirani, Regression shrinkage and selection via the lasso, JRSS-B 1996"
    search_space = {"rho_ratio": Log([0.003, 0.01, 0.03, 0.1, 0.3], low=None, high=1.0)}
    param_constraints = {"tol": Linear([1e-8], low=0.0), "max_iter": Int([10000], low=1)}
    convex = True
    supports_warm_start = True

    def __init__(self, rho_ratio: float = 0.03, tol: float = 1e-8, max_iter: int = 10000):
        self.rho_ratio = rho_ratio
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, tasks: TaskSet, init=None) -> "LASSO":
        self.check_params()
        self.rho_ = float(self.rho_ratio) * lasso_rho_max(tasks)
        W = np.zeros((tasks.d, tasks.T))
        warm = init is not None and getattr(init, "coef_", None) is not None \
            and init.coef_.shape == W.shape
        iters = 0
        unconverged = 0
        for t in range(tasks.T):
            X, y = tasks.X(t), tasks.y(t)
            est = _SkLasso(alpha=self.rho_ / X.shape[0], fit_intercept=False, tol=self.tol,
                           max_iter=self.max_iter, warm_start=warm, selection="cyclic")
            if warm:
                est.coef_ = init.coef_[:, t].copy()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                est.fit(X, y)
            unconverged += any(issubclass(w.category, ConvergenceWarning) for w in caught)
            W[:, t] = est.coef_
            iters = max(iters, int(est.n_iter_))
        self.coef_ = W
        self.n_iter_ = iters
        self.converged_ = unconverged == 0
        self.diagnostics_ = {"rho": self.rho_, "unconverged_tasks": int(unconverged)}
        self.objective_history_ = [lasso_objective(tasks, W, self.rho_)]
        return self


@hookimpl
def register_models(register):
    register(LASSO)
