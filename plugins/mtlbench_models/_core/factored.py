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
"""
from __future__ import annotations

import numpy as np

from .datafits import LeastSquares

__all__ = ["Factored"]


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

    def gap(self, S, X: np.ndarray, pen: float, s: float, G: np.ndarray | None = None,
            f: float | None = None) -> float:
        """J's duality gap (module docstring) with the factor's gradient ``G``."""
        G = self.grad_of(S) if G is None else G
        return self.datafit.gap(S, X, pen, s, G, f)
