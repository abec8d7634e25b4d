"""Mean-regularised multi-task learning, with the squared and the logistic loss.

T. Evgeniou and M. Pontil, "Regularized multi-task learning", Proceedings of the 10th ACM
SIGKDD International Conference on Knowledge Discovery and Data Mining (KDD), 2004.  Each task's
weights are a shared vector plus a task-specific one, w_t = w_0 + v_t, and the paper's
problem (2) is

    min_{w_0, v}  sum_t l_t(w_0 + v_t) + lam1/T sum_t ||v_t||^2 + lam2 ||w_0||^2.

Minimising over w_0 for fixed W (w_0 = lam1 / (lam1 + lam2) wbar, wbar = mean_t w_t) leaves a
problem in W alone (the paper's Lemma 2.1 / problem (3), a sum of ||w_t||^2 and of
||w_t - wbar||^2), which this module writes as

    min_W  J(W) + a sum_t ||w_t - wbar||^2 + b T ||wbar||^2,
    a = lam1 / T,   b = lam1 lam2 / (T (lam1 + lam2)),   so 0 < b <= a,

(``_core.penalties.MeanRegularised(a, lam_mean=b)``).  The paper's loss is the hinge loss
(an SVM); here J is the squared loss sum_t 1/2 ||y_t - X_t w_t||^2 (``meanreg``) or the
logistic loss sum_t sum_i log(1 + exp(-y_ti x_ti^T w_t)) (``meanreg-logistic``, no
intercept: the paper has none).  b -> a (lam2 -> inf) is independent ridge per task with
weight a; b -> 0 leaves the mean unpenalised.

Solver: the squared variant's optimum in closed form: the optimality condition
(X_t^T X_t + 2a I) w_t = X_t^T y_t + 2 (a - b) wbar reduces to one d x d system for wbar
(``MeanReg.closed_form``, through the tasks' Gram spectra); the logistic variant by FISTA
(``_core.solvers.FISTA``: FISTA-BKTR, monotone restart; ``_core.classic.PenalisedModel``) with the
penalty's exact proximal map (the column mean and the deviations from it shrunk apart).
Stopping rule and certificate: the relative duality gap <= ``tol`` (1e-6), the penalty's
conjugate being finite (both weights > 0); the closed form is certified the same way (FISTA
refines it if rounding left its gap above ``tol``); ``converged_`` says whether it held
within ``max_iter``.

Search space (scale-free): ``lam_ratio`` = a / curvature, curvature = mean_t tr(H_t) / d the
data term's curvature per feature (H_t = X_t^T X_t, or X_t^T X_t / 4 for the logistic
loss): a weight of 1 is as strong as the data.  Log, low 0, no upper bound (every a > 0 is a
different model; a -> inf is one pooled model).  ``mean_ratio`` = b / a = lam2 / (lam1 + lam2)
in (0, 1]: a mixing weight, bound 1 from the math (= independent ridge, w_0 = 0), low 0
excluded (the mean unpenalised: unbounded for the logistic loss on separable data).  Start
ranges designed on ``simulated[seed=101]`` (2 repetitions) and
``synthetic-attributes[seed=101]`` (attr0, attr1; no edge and no degenerate selection
there): lam_ratio [0.01, 10] (selected 0.29 - 0.73 and 1.8 - 10), mean_ratio [0.01, 1]
(selected 0.015 - 0.08: the mean shrunk one to two decades less than the deviations).

MALSAR has no mean-regularised function: its ``Least_SRMTL`` with the structure
R = I - 11^T / T, no l1 term and its ridge ``opts.rho_L2`` is the squared variant's objective
(``benchmarks/bench_malsar.py`` compares the two); the logistic variant has no MALSAR
counterpart (MALSAR's logistic functions average each task's loss and fit intercepts).

Unverified: the paper's equation numbers (read from its text as (2) and Lemma 2.1).
"""
from __future__ import annotations

import numpy as np

from mtlbench import Log, TaskSet, hookimpl

from ._core.classic import PenalisedModel
from ._core.penalties import MeanRegularised
from ._core.representations import TaskSpectra


class MeanReg(PenalisedModel):
    """Evgeniou & Pontil's mean-regularised MTL with the squared loss."""

    name = "meanreg"
    paper = ("Evgeniou & Pontil, Regularized multi-task learning, KDD 2004 "
             "(mean-regularised MTL, squared loss)")
    search_space = {"lam_ratio": Log([0.01, 0.1, 1.0, 10.0], low=0.0, high=None),
                    "mean_ratio": Log([0.01, 0.1, 1.0], low=0.0, high=1.0)}
    target_kinds = ("binary", "real")
    cost_hint = 1.2  # s per unit on the reference problem (mtlbench.runner.cost)

    def __init__(self, lam_ratio: float = 0.1, mean_ratio: float = 0.1, tol: float = 1e-6,
                 max_iter: int = 5000):
        self.lam_ratio = lam_ratio
        self.mean_ratio = mean_ratio
        self.tol = tol
        self.max_iter = max_iter

    def penalty(self, G0: np.ndarray, tasks: TaskSet) -> MeanRegularised:
        a = float(self.lam_ratio) * self.curvature(tasks)
        self.lam_, self.lam_mean_ = a, float(self.mean_ratio) * a
        return MeanRegularised(self.lam_, lam_mean=self.lam_mean_)

    def closed_form(self, tasks: TaskSet) -> np.ndarray | None:
        """The squared variant's optimum (module docstring): w_t = A_t^{-1} (X_t^T y_t +
        2 (a - b) wbar), A_t = X_t^T X_t + 2a I, with wbar from the d x d system
        (I - 2 (a - b) mean_t A_t^{-1}) wbar = mean_t A_t^{-1} X_t^T y_t, through the tasks'
        stacked Gram spectra (``TaskSpectra``: A_t^{-1} = I / 2a + V_t diag(1/(e_t + 2a) -
        1/2a) V_t^T)."""
        if self.loss != "squared":
            return None
        sp = TaskSpectra.of(tasks)
        a, b, T = self.lam_, self.lam_mean_, tasks.T
        ones, shift = np.ones(T), np.full(T, 2.0 * a)
        coef = 1.0 / (sp.e + 2.0 * a) - 1.0 / (2.0 * a)                     # T x r
        V = sp.V.transpose(1, 0, 2).reshape(tasks.d, -1)                  # d x (T r)
        mean_inv = (V * coef.ravel()) @ V.T / T + np.eye(tasks.d) / (2.0 * a)
        rhs = sp.shifted_solve(sp.Xty, ones, shift).mean(axis=1)
        wbar = np.linalg.solve(np.eye(tasks.d) - 2.0 * (a - b) * mean_inv, rhs)
        return sp.shifted_solve(sp.Xty + 2.0 * (a - b) * wbar[:, None], ones, shift)

    def diagnostics(self) -> dict:
        return {"lam": self.lam_, "lam_mean": self.lam_mean_}


class MeanRegLogistic(MeanReg):
    """Evgeniou & Pontil's mean-regularised MTL with the logistic loss (no intercept)."""

    name = "meanreg-logistic"
    paper = ("Evgeniou & Pontil, Regularized multi-task learning, KDD 2004 "
             "(mean-regularised MTL, logistic loss)")
    target_kinds = ("binary",)
    cost_hint = 3.1
    loss = "logistic"
    intercept = False


@hookimpl
def register_models(register):
    register(MeanReg)
    register(MeanRegLogistic)
