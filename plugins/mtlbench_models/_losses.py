"""Smooth multi-task losses shared by the model plugins.

All losses act on W of shape (d, T) (column t = task t) and return float64 values.
"""
from __future__ import annotations

import numpy as np

from mtlbench.data import TaskSet


class SquaredLoss:
    """Instance-wise squared loss of the paper's competitors (Sec. Experimental Settings):

        J(W) = sum_t 1/2 ||y_t - X_t w_t||^2.

    Per-task Gram matrices are never formed when d is large: value and gradient cost
    O(n_t d) per task.  ``task_weights`` (length T) scale each task's term (e.g. 1/n_t).

    Attributes
    ----------
    Xs, ys : per-task arrays, shapes (n_t, d) and (n_t,)
    lipschitz : float
        Lipschitz constant of grad J: max_t weight_t * ||X_t||_2^2.
    """

    def __init__(self, tasks: TaskSet, task_weights: np.ndarray | None = None) -> None:
        self.Xs = [tasks.X(t) for t in range(tasks.T)]
        self.ys = [tasks.y(t) for t in range(tasks.T)]
        self.T = tasks.T
        self.d = tasks.d
        self.weights = (np.ones(self.T) if task_weights is None
                        else np.asarray(task_weights, dtype=np.float64))
        self.task_lipschitz = np.array(
            [w * spectral_norm_sq(X) for w, X in zip(self.weights, self.Xs)])
        self.lipschitz = float(self.task_lipschitz.max())

    def residuals(self, W: np.ndarray) -> list[np.ndarray]:
        return [X @ W[:, t] - y for t, (X, y) in enumerate(zip(self.Xs, self.ys))]

    def value(self, W: np.ndarray) -> float:
        return float(sum(0.5 * w * r @ r for w, r in zip(self.weights, self.residuals(W))))

    def grad(self, W: np.ndarray) -> np.ndarray:
        G = np.empty((self.d, self.T))
        for t, (X, y) in enumerate(zip(self.Xs, self.ys)):
            G[:, t] = self.weights[t] * (X.T @ (X @ W[:, t] - y))
        return G

    def value_and_grad(self, W: np.ndarray) -> tuple[float, np.ndarray]:
        G = np.empty((self.d, self.T))
        val = 0.0
        for t, (X, y) in enumerate(zip(self.Xs, self.ys)):
            r = X @ W[:, t] - y
            val += 0.5 * self.weights[t] * (r @ r)
            G[:, t] = self.weights[t] * (X.T @ r)
        return float(val), G


def spectral_norm_sq(X: np.ndarray) -> float:
    """||X||_2^2, the largest eigenvalue of X^T X, from the smaller Gram side."""
    n, d = X.shape
    G = X @ X.T if n <= d else X.T @ X
    return float(np.linalg.eigvalsh(G)[-1]) if G.shape[0] else 0.0
