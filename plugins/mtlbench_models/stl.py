"""STL: independent per-task ridge regression, the single-task baseline.

For each task t (no sharing between tasks):

    w_t = argmin_w 1/2 ||y_t - X_t w||^2 + lam/2 ||w||^2
        = X_t^T (X_t X_t^T + lam I)^{-1} y_t      (n_t <= d, the cheaper side)
        = (X_t^T X_t + lam I)^{-1} X_t^T y_t      (n_t > d)

Leaderboards report each model's per-task wins/ties/losses against this baseline.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mtlbench import LinearMTLModel, TaskSet, hookimpl


def ridge_solve(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin_w 1/2 ||y - X w||^2 + lam/2 ||w||^2 through the smaller Gram matrix."""
    n, d = X.shape
    if n <= d:
        K = X @ X.T
        K[np.diag_indices_from(K)] += lam
        return X.T @ cho_solve(cho_factor(K), y)
    G = X.T @ X
    G[np.diag_indices_from(G)] += lam
    return cho_solve(cho_factor(G), X.T @ y)


class STL(LinearMTLModel):
    """Independent ridge per task; ``lam`` > 0 is the ridge weight."""

    name = "stl"
    paper = "Independent single-task ridge regression (baseline)"
    search_space = {"lam": [1e-1, 1.0, 10.0, 100.0, 1e3, 1e4]}

    def __init__(self, lam: float = 1.0):
        self.lam = lam

    def fit(self, tasks: TaskSet, init=None) -> "STL":
        if not self.lam > 0:
            raise ValueError(f"stl: lam must be > 0, got {self.lam}")
        self.coef_ = np.column_stack(
            [ridge_solve(tasks.X(t), tasks.y(t), float(self.lam)) for t in range(tasks.T)])
        self.n_iter_ = 1
        return self


@hookimpl
def register_models(register):
    register(STL)
