"""Mean-regularised multi-task learning (Evgeniou & Pontil, "Regularized multi-task learning",
KDD 2004), squared-loss form, as an mtlbench model plugin.

Objective (one weight vector w_t per task, a shared mean w0)::

    min_{W, w0}  sum_t 1/2 ||y_t - X_t w_t||^2  +  lam1/2 sum_t ||w_t - w0||^2  +  lam2/2 ||w0||^2

This is Evgeniou & Pontil's eq. (2) with w_t = w0 + v_t and the hinge loss replaced by the
squared loss that mtlbench's competitors use: their lambda_1/T sum_t ||v_t||^2 is our
lam1/2 sum_t ||w_t - w0||^2 and their lambda_2 ||w0||^2 is our lam2/2 ||w0||^2 (their loss is
not halved, so the correspondence is lam1 = 2 lambda_1/T, lam2 = 2 lambda_2 when the loss is
scaled alike).  lam1 -> 0 gives independent least squares, lam1 -> inf one pooled ridge model
with weight lam2; lam2 -> inf shrinks w0 to 0, i.e. per-task ridge with weight lam1.

Solver (exact, no iterations).  For fixed w0 each task is a ridge problem,
w_t = (G_t + lam1 I)^{-1} (X_t^T y_t + lam1 w0) with G_t = X_t^T X_t; the optimality condition
in w0 is lam1 sum_t (w0 - w_t) + lam2 w0 = 0.  Substituting gives the d x d SPD system

    (lam2 I + lam1 M) w0 = lam1 sum_t a_t,
    a_t = (G_t + lam1 I)^{-1} X_t^T y_t,   M = sum_t G_t (G_t + lam1 I)^{-1},

and then w_t = a_t + lam1 (G_t + lam1 I)^{-1} w0.  When n_t < d the task's products use the
n_t x n_t kernel K_t = X_t X_t^T (push-through identity
(G_t + lam1 I)^{-1} X_t^T = X_t^T (K_t + lam1 I)^{-1}); no per-task d x d inverse is formed,
only the single d x d matrix M.  Cost O(sum_t n_t d min(n_t, d) + d^3).  The solution is
exact up to Cholesky round-off, so ``objective_history_`` holds the single optimal value,
``n_iter_`` is 1 and ``converged_`` is True.

Hyperparameters: ``lam1`` > 0 (coupling to the mean), ``lam2`` > 0 (ridge on the mean).

Search space (mtlbench's rule: every model starts from the same 12-point design over the
declared start ranges): ``lam1`` Log, start range [0.1, 100], ``lam2`` Log, start range
[0.1, 10], both with low 0 and no upper bound -- every positive weight is a different model
and the limits above (independent least squares, one pooled model, per-task ridge) are never
reached at a finite value.  The ranges are this example's choice, decades around 1 in the
units of the squared loss; the decade grids set the search's extension step (10).
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mtlbench import LinearMTLModel, Log, TaskSet, hookimpl

__version__ = "0.1.0"


class MeanRegularizedMTL(LinearMTLModel):
    """Tasks shrunk towards a shared mean w0 (Evgeniou & Pontil 2004), squared loss."""

    name = "meanreg-example"
    paper = "Evgeniou & Pontil, Regularized multi-task learning, KDD 2004"
    search_space = {"lam1": Log([0.1, 1.0, 10.0, 100.0], low=0.0, high=None),
                    "lam2": Log([0.1, 1.0, 10.0], low=0.0, high=None)}
    monotone_objective = True  # a closed form: the history is one value

    def __init__(self, lam1: float = 1.0, lam2: float = 1.0):
        self.lam1 = lam1
        self.lam2 = lam2

    def fit(self, tasks: TaskSet, init=None) -> "MeanRegularizedMTL":
        for key in ("lam1", "lam2"):
            val = getattr(self, key)
            if isinstance(val, bool) or not isinstance(val, (int, float)) or not val > 0:
                raise ValueError(f"meanreg-example: {key} must be a number > 0, got {val!r}")
        lam1, lam2 = float(self.lam1), float(self.lam2)
        d, T = tasks.d, tasks.T
        A = np.empty((d, T))           # a_t = (G_t + lam1 I)^{-1} X_t^T y_t
        M = np.zeros((d, d))           # sum_t G_t (G_t + lam1 I)^{-1}
        solvers = []                   # v -> (G_t + lam1 I)^{-1} v, per task
        for t in range(T):
            X, y = tasks.X(t), tasks.y(t)
            n = X.shape[0]
            if n < d:
                K = X @ X.T
                K[np.diag_indices_from(K)] += lam1
                cf = cho_factor(K)
                A[:, t] = X.T @ cho_solve(cf, y)
                M += X.T @ cho_solve(cf, X)          # X^T (K + lam1 I)^{-1} X
                solvers.append(("kernel", X, cf))
            else:
                G = X.T @ X
                G[np.diag_indices_from(G)] += lam1
                cf = cho_factor(G)
                A[:, t] = cho_solve(cf, X.T @ y)
                M += np.eye(d) - lam1 * cho_solve(cf, np.eye(d))  # G (G + lam1 I)^{-1}
                solvers.append(("gram", X, cf))
        S = lam1 * M
        S[np.diag_indices_from(S)] += lam2
        S = 0.5 * (S + S.T)
        w0 = cho_solve(cho_factor(S), lam1 * A.sum(axis=1))
        W = np.empty((d, T))
        for t, (kind, X, cf) in enumerate(solvers):
            if kind == "kernel":   # (G + lam1 I)^{-1} w0 = (w0 - X^T (K + lam1 I)^{-1} X w0) / lam1
                shrink = w0 - X.T @ cho_solve(cf, X @ w0)
            else:
                shrink = lam1 * cho_solve(cf, w0)
            W[:, t] = A[:, t] + shrink
        self.coef_ = W
        self.mean_coef_ = w0
        self.n_iter_ = 1
        self.converged_ = True  # exact (closed form): no iteration, no tolerance
        self.objective_history_ = [objective(tasks, W, w0, lam1, lam2)]
        return self


def objective(tasks: TaskSet, W: np.ndarray, w0: np.ndarray, lam1: float, lam2: float) -> float:
    """The objective in the module docstring."""
    loss = sum(0.5 * float(np.sum((tasks.y(t) - tasks.X(t) @ W[:, t]) ** 2))
               for t in range(tasks.T))
    return float(loss + 0.5 * lam1 * np.sum((W - w0[:, None]) ** 2) + 0.5 * lam2 * w0 @ w0)


@hookimpl
def register_models(register):
    register(MeanRegularizedMTL)
