"""Proximal operators shared by the model plugins (all vectorised, float64).

Each ``prox_*(V, tau)`` returns argmin_X 1/2 ||X - V||_F^2 + tau * penalty(X).
"""
from __future__ import annotations

import numpy as np


def prox_l1(V: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """Soft thresholding: penalty ||X||_1 (``tau`` may be an array of the shape of V)."""
    return np.sign(V) * np.maximum(np.abs(V) - tau, 0.0)


def prox_group_rows(V: np.ndarray, tau: float) -> np.ndarray:
    """Row-group shrinkage: penalty sum_i ||X[i, :]||_2 (the l_{2,1} norm over rows)."""
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    scale = np.maximum(1.0 - tau / np.maximum(norms, 1e-300), 0.0)
    return V * scale


def prox_group_cols(V: np.ndarray, tau: float) -> np.ndarray:
    """Column-group shrinkage: penalty sum_t ||X[:, t]||_2 (the column-wise l_{1,2} norm)."""
    return prox_group_rows(V.T, tau).T


def prox_trace(V: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Singular value thresholding: penalty ||X||_* .  Returns (X, singular values of X)."""
    U, s, Vt = np.linalg.svd(V, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    keep = s > 0
    return (U[:, keep] * s[keep]) @ Vt[keep], s
