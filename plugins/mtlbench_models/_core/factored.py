"""A datafit of a factor: J(A X) or J(X B) for a fixed matrix, as a datafit of X.

Models of the form W = L S (a d x k basis L, k x T codes S) minimise in blocks: with L fixed,
J(L S) is a datafit of S (``Factored(J, left=L)``); with S fixed, J(L S) is a datafit of L
(``Factored(J, right=S)``).  Both offer the datafit interface of ``datafits.py`` (``forward``,
``value_of``, ``grad_of``, ``combine``, ``lipschitz``, ``gap``), so every solver of the layer
runs on them unchanged:

* gradient: A^T grad J(A X) (left) or grad J(X B) B^T (right);
* Lipschitz constant: Lip(grad J) ||A||_2^2 (left; per task A^T H_t A <= Lip ||A||^2 I) or
  Lip(grad J) ||B||_2^2 (right; the Hessian sum_t b_t b_t^T (x) H_t <= Lip ||B B^T||);
* states: those of J at the product (linear in X when J's are, so ``combine`` carries over);
* duality gap: J's, read at the product: <X, grad_X> = <A X, grad J> (resp. <X B, grad J>),
  and the dual point in the scores is the same, so the penalty's dual norm is taken of the
  factor's gradient (what the solvers pass).

:class:`TaskQuadratics` is the squared loss's J(A S) in the codes' own dimension: per task
1/2 ||y_t - X_t A s_t||^2 = 1/2 s_t^T G_t s_t - g_t^T s_t + c_t / 2 with the k x k Gram
matrix G_t = (X_t A)^T (X_t A), g_t = (X_t A)^T y_t, c_t = ||y_t||^2 (:func:`reduced_squared`
builds them from the data's padded rows or Gram matrices, whichever is cheaper): every
evaluation is O(T k^2), and it offers the per-task interface of ``newton.ProxNewton``
(``task_values_of``, ``task_hessians``, a gap with one dual scale per task).
"""
from __future__ import annotations

import numpy as np

from .datafits import LeastSquares, squared_gap

__all__ = ["Factored", "TaskQuadratics", "reduced_squared"]


class Factored:
    """J(A X) (``left=A``, A of shape (d, k), X of shape (k, T)) or J(X B) (``right=B``, B of
    shape (k, T), X of shape (d, k)) as a datafit of X (module docstring).  ``quadratic`` is
    True when J is a least-squares datafit (then so is the factored one)."""

    def __init__(self, datafit, left: np.ndarray | None = None,
                 right: np.ndarray | None = None) -> None:
        if (left is None) == (right is None):
            raise ValueError("Factored: give exactly one of left= or right=")
        self.datafit = datafit
        self.left = None if left is None else np.asarray(left, dtype=np.float64)
        self.right = None if right is None else np.asarray(right, dtype=np.float64)
        M = self.left if left is not None else self.right
        if M.ndim != 2:
            raise ValueError(f"Factored: the factor must be a 2-d array, got shape {M.shape}")
        if left is not None:
            if M.shape[0] != datafit.d:
                raise ValueError(f"Factored: left factor has {M.shape[0]} rows, the datafit "
                                 f"{datafit.d} features")
            self.d, self.T = M.shape[1], datafit.T
        else:
            if M.shape[1] != datafit.T:
                raise ValueError(f"Factored: right factor has {M.shape[1]} columns, the "
                                 f"datafit {datafit.T} tasks")
            self.d, self.T = datafit.d, M.shape[0]
        norm2 = float(np.linalg.norm(M, 2)) ** 2 if M.size else 0.0
        self.lipschitz = float(datafit.lipschitz) * norm2
        self.quadratic = isinstance(datafit, LeastSquares) or getattr(datafit, "quadratic",
                                                                      False)
        self.value_of, self.combine = datafit.value_of, datafit.combine

    def product(self, X: np.ndarray) -> np.ndarray:
        """The model matrix: A X or X B."""
        return self.left @ X if self.left is not None else X @ self.right

    def forward(self, X: np.ndarray):
        return self.datafit.forward(self.product(X))

    def grad_of(self, S) -> np.ndarray:
        G = self.datafit.grad_of(S)
        return self.left.T @ G if self.left is not None else G @ self.right.T

    def value(self, X: np.ndarray) -> float:
        return self.value_of(self.forward(X))

    def grad(self, X: np.ndarray) -> np.ndarray:
        return self.grad_of(self.forward(X))

    def value_and_grad(self, X: np.ndarray) -> tuple[float, np.ndarray]:
        S = self.forward(X)
        return self.value_of(S), self.grad_of(S)

    def grad_at_zero(self) -> np.ndarray:
        """grad J(A 0) = A^T grad J(0) (resp. grad J(0) B^T): from J's ``grad_at_zero`` when it
        has one (no pass over the data), else from a state at zero."""
        at_zero = getattr(self.datafit, "grad_at_zero", None)
        G = at_zero() if at_zero is not None else self.datafit.grad(
            np.zeros((self.datafit.d, self.datafit.T)))
        return self.left.T @ G if self.left is not None else G @ self.right.T

    def gap(self, S, X: np.ndarray, pen: float, s: float, G: np.ndarray | None = None,
            f: float | None = None) -> float:
        """J's duality gap (module docstring) with the factor's gradient ``G``."""
        G = self.grad_of(S) if G is None else G
        return self.datafit.gap(S, X, pen, s, G, f)


class TaskQuadratics:
    """J(S) = sum_t 1/2 s_t^T G_t s_t - g_t^T s_t + c_t / 2 (S of shape (k, T); G (T, k, k)
    symmetric positive semi-definite, g (k, T), c (T,)): T separate least-squares problems of
    dimension k (module docstring).  State: [s_t, G_t s_t] per task, shape (T, 2k) (tasks on
    the first axis, as ``ProxNewton`` selects them).  Duality: the squared loss's gap
    (``datafits.squared_gap``) per task, ||r_t||^2 = 2 l_t(s_t) (clipped at 0: rounding of
    the expanded square), with one dual scale per task or one for all."""

    quadratic = True

    def __init__(self, G: np.ndarray, g: np.ndarray, c: np.ndarray) -> None:
        self.G, self.g, self.c = G, g, np.asarray(c, dtype=np.float64)
        self.T, self.d = G.shape[0], G.shape[1]
        self.k = self.d

    def forward(self, S: np.ndarray) -> np.ndarray:
        return np.concatenate([S.T, np.matmul(self.G, S.T[:, :, None])[:, :, 0]], axis=1)

    def task_values_of(self, Z: np.ndarray) -> np.ndarray:
        s, q = Z[:, :self.k], Z[:, self.k:]
        return np.maximum(np.einsum("tk,tk->t", s, 0.5 * q - self.g.T) + 0.5 * self.c, 0.0)

    def value_of(self, Z: np.ndarray) -> float:
        return float(self.task_values_of(Z).sum())

    def grad_of(self, Z: np.ndarray) -> np.ndarray:
        return Z[:, self.k:].T - self.g

    def task_hessians(self, Z: np.ndarray) -> np.ndarray:
        return self.G

    def value(self, S: np.ndarray) -> float:
        return self.value_of(self.forward(S))

    def grad(self, S: np.ndarray) -> np.ndarray:
        return self.grad_of(self.forward(S))

    def gap(self, Z: np.ndarray, S: np.ndarray, pen: float, s, G: np.ndarray | None = None,
            f: float | None = None) -> float:
        """pen + sum_t [a_t <s_t, grad_t> + (1 - a_t)^2 / 2 ||r_t||^2], a = ``s`` (a scalar or
        one scale per task, shape (T, 1))."""
        G = self.grad_of(Z) if G is None else G
        a = np.broadcast_to(np.asarray(s, dtype=np.float64).reshape(-1), (self.T,))
        wg = np.einsum("kt,kt->t", S, G)
        return float(pen + np.sum(squared_gap(0.0, a, wg, 2.0 * self.task_values_of(Z))))


def reduced_squared(A: np.ndarray, X3: np.ndarray, y3: np.ndarray, grams) -> TaskQuadratics:
    """The squared loss sum_t 1/2 ||y_t - X_t A s_t||^2 as a :class:`TaskQuadratics` of S:
    ``X3``, ``y3`` the zero-padded rows (T, n_max, d) and labels (T, n_max); ``grams`` a
    callable returning (H, B, c) (H_t = X_t^T X_t, B[:, t] = X_t^T y_t, c_t = ||y_t||^2):
    G_t from the rows X_t A when n_max < d (T n_max d k flops), else A^T H_t A."""
    if X3.shape[1] < X3.shape[2]:
        Z = np.matmul(X3, A)                                     # (T, n_max, k)
        G = np.matmul(Z.transpose(0, 2, 1), Z)
        g = np.matmul(Z.transpose(0, 2, 1), y3[:, :, None])[:, :, 0].T
        c = np.einsum("tn,tn->t", y3, y3)
    else:
        H, B, c = grams()
        G = np.matmul(A.T, np.matmul(H, A))
        g = A.T @ B
    return TaskQuadratics(0.5 * (G + G.transpose(0, 2, 1)), g, c)
