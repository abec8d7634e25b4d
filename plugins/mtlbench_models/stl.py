"""STL: independent per-task ridge regression, the single-task baseline.

Ridge regression: A. E. Hoerl and R. W. Kennard, "Ridge Regression: Biased Estimation for
Nonorthogonal Problems", Technometrics 12(1):55-67, 1970.  Not a model of the TFCL paper; the
leaderboards report each model's per-task wins/ties/losses against it.

Objective, for each task t separately (no sharing between tasks)::

    w_t = argmin_w 1/2 ||y_t - X_t w||^2 + lam/2 ||w||^2
        = X_t^T (X_t X_t^T + lam I)^{-1} y_t      (n_t <= d, the cheaper side)
        = (X_t^T X_t + lam I)^{-1} X_t^T y_t      (n_t > d)

Solver: the closed form, one Cholesky solve per task; ``converged_`` is always True.  Convex.
Certificate: the duality gap of the ridge problems (:func:`ridge_gap`, at rounding level at
the closed form), reported with the last progress report of a fit (``mtlbench race``; the
earlier reports carry the objective of the tasks solved so far, the others at w_t = 0).

Search space: ``lam`` Log, start range [0.1, 1e4] with the points {0.1, 1, ..., 1e4} (what
``--search grid`` fits; docs/tuning.md), not rescaled by the data.  On features of unit scale
the loss's curvature per feature is about n_t, so the five decades hold ridges from far weaker
to far stronger than the data's own curvature for n_t from about 10 to 1000, n_t ~ d and
n_t >> d alike (math, no data).  The only limit is lam > 0: ridge is defined for every positive
weight, and a large lam shrinks w_t towards the direction X_t^T y_t without reaching it, so
there is no finite upper bound.

Unverified: nothing model-specific (the closed form is exact).
"""
from __future__ import annotations

import numpy as np

from mtlbench import LinearMTLModel, Log, TaskSet, hookimpl, report_progress
from mtlbench.progress import progress_active

from ._core.datafits import SquaredLoss
from ._core.representations import ridge_solve
from ._core.penalties import SquaredFrobenius
from ._core.solvers import duality_gap

__all__ = ["STL", "ridge_objective", "ridge_gap", "ridge_solve"]


def ridge_objective(tasks: TaskSet, W: np.ndarray, lam: float) -> float:
    """sum_t 1/2 ||y_t - X_t w_t||^2 + lam/2 ||w_t||^2 at W (d, T)."""
    return SquaredLoss(tasks).value(W) + SquaredFrobenius(lam).value(W)


def ridge_gap(tasks: TaskSet, W: np.ndarray, lam: float) -> float:
    """Duality gap of the ridge problems at W (d, T), summed over tasks (>= 0; zero exactly at
    the optimum w_t = X_t^T r_t / lam): the squared loss's conjugate at the residuals plus the
    ridge's, ||X^T r||^2 / (2 lam) (``solvers.duality_gap``)."""
    return max(duality_gap(SquaredLoss(tasks), SquaredFrobenius(lam), W), 0.0)


class STL(LinearMTLModel):
    """Independent ridge per task; ``lam`` > 0 is the ridge weight."""

    name = "stl"
    cost_hint = 1.2  # s per unit on the reference problem (mtlbench.runner.cost)
    is_baseline = True  # the per-user win/tie/loss column of the leaderboards compares with it
    paper = "Independent single-task ridge regression (baseline)"
    search_space = {"lam": Log([1e-1, 1.0, 10.0, 100.0, 1e3, 1e4], low=None, high=None)}
    convex = True
    target_kinds = ("binary", "real")

    def __init__(self, lam: float = 1.0):
        self.lam = lam

    def fit(self, tasks: TaskSet, init=None) -> "STL":
        self.check_params()
        lam = float(self.lam)
        if not progress_active():
            self.coef_ = np.column_stack(
                [ridge_solve(tasks.X(t), tasks.y(t), lam) for t in range(tasks.T)])
        else:
            W = np.zeros((tasks.d, tasks.T))
            for t in range(tasks.T):
                W[:, t] = ridge_solve(tasks.X(t), tasks.y(t), lam)
                report_progress(t + 1, lambda: ridge_objective(tasks, W, lam),
                                (lambda: ridge_gap(tasks, W, lam)) if t == tasks.T - 1 else None)
            self.coef_ = W
        self.n_iter_ = 1
        self.converged_ = True
        return self

    def fitted_objective(self, tasks: TaskSet) -> float:
        """sum_t 1/2 ||y_t - X_t w_t||^2 + lam/2 ||w_t||^2 at ``coef_`` on ``tasks``."""
        return ridge_objective(tasks, self.coef_, float(self.lam))


@hookimpl
def register_models(register):
    register(STL)
