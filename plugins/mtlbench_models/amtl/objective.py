"""AMTL's objective and its loss terms: every computation of the per-task squared losses
L_t(w_t) = 1/2 ||y_t - X_t w_t||^2 lives here.

    F(W, B) = sum_t c_t L_t(w_t) + lam ||W - W B||_F^2,   c_t = 1 + mu sum_s B_ts,

evaluated in three forms: from the data (``amtl_objective``, the tests' reference); as a
quadratic form from X_t^T X_t w_t, carried by the solver, so no pass over the data
(``gram_objective``; it cancels as L_t -> 0); and from the compressed loss residuals
(``LossResiduals``, ``residual_objective``), which do not cancel and are what the
Levenberg-Marquardt phase works on.  The data enter only through ``TaskSpectra``.
"""
from __future__ import annotations

import numpy as np

from mtlbench_models._core.representations import TaskSpectra


def task_losses(Xs, ys, W) -> np.ndarray:
    """[1/2 ||y_t - X_t w_t||^2]_t from the data."""
    return np.array([0.5 * float(np.sum((y - X @ W[:, t]) ** 2))
                     for t, (X, y) in enumerate(zip(Xs, ys))])


def amtl_objective(Xs, ys, W, B, lam, mu) -> float:
    """F(W, B) from the data (see the module docstring)."""
    L = task_losses(Xs, ys, W)
    R = W - W @ B
    return float(((1.0 + mu * B.sum(axis=1)) * L).sum() + lam * np.sum(R * R))


def gram_objective(spec: TaskSpectra, W, GW, B, lam, mu):
    """(F(W, B), the per-task losses, R = W - W B), from GW = [X_t^T X_t w_t]_t (no pass over
    the data); R is what the next B-step's gradient needs (``bstep.b_setup``)."""
    fit = np.einsum("it,it->t", W, GW - 2.0 * spec.Xty) + spec.yy
    L = 0.5 * np.maximum(fit, 0.0)
    R = W - W @ B
    return float(((1.0 + mu * B.sum(axis=1)) * L).sum() + lam * np.sum(R * R)), L, R


class LossResiduals:
    """The loss part of F as a sum of squares, compressed to r = min(n_t, d) + 1 numbers per
    task: with G_t = V_t diag(e_t) V_t^T (``TaskSpectra``), s = sqrt(e_t),
    ytil_t = V_t^T X_t^T y_t / s and rho_t^2 = y_t^T y_t - ||ytil_t||^2,

        2 L_t(w) = ||y_t - X_t w||^2 = ||s o V_t^T w - ytil_t||^2 + rho_t^2,

    so the T x (r + 1) array ``of(W)`` = [s o V_t^T w_t - ytil_t, rho_t]_t has row norms^2 = 2 L_t
    (exactly, up to rounding: X_t^T y_t lies in the span of V_t).  Unlike the quadratic form
    w^T G w - 2 w^T X^T y + y^T y, the residual form does not cancel when L_t -> 0.  Data only:
    cached per TaskSet."""

    def __init__(self, spec: TaskSpectra):
        live = spec.e > 0
        self.s = np.sqrt(spec.e)
        self.ytil = np.where(live, spec.project(spec.Xty) / np.where(live, self.s, 1.0), 0.0)
        self.rho = np.sqrt(np.maximum(spec.yy - np.einsum("tr,tr->t", self.ytil, self.ytil), 0.0))

    def of(self, spec: TaskSpectra, W) -> np.ndarray:
        return np.concatenate([self.s * spec.project(W) - self.ytil, self.rho[:, None]], axis=1)


class LowPrecisionSpectra:
    """The stacked spectra V (T x d x r) and e (T x r) of ``TaskSpectra`` and the loss residuals'
    scale s = sqrt(e) (``LossResiduals``) in a lower precision, with the same ``project`` and
    ``lift``: the Levenberg-Marquardt inner CG's operators read them in place of the float64
    ones.  Data only: cached per TaskSet."""

    def __init__(self, spec: TaskSpectra, res: LossResiduals, dtype):
        self.T, self.d, self.r = spec.T, spec.d, spec.r
        self.V = spec.V.astype(dtype)
        self.e = spec.e.astype(dtype)
        self.s = res.s.astype(dtype)

    project = TaskSpectra.project        # the same batched products, on this object's V
    lift = TaskSpectra.lift


def residual_objective(spec, res: LossResiduals, W, B, lam, mu):
    """(F, E, R, L): F(W, B) from the compressed loss residuals E (``LossResiduals``), the
    reconstruction residual R = W - W B and the per-task losses L."""
    E = res.of(spec, W)
    L = 0.5 * np.einsum("tr,tr->t", E, E)
    R = W - W @ B
    return float(((1.0 + mu * B.sum(axis=1)) * L).sum() + lam * np.sum(R * R)), E, R, L


def loss_floor(spec: TaskSpectra) -> float:
    """A loss this small counts as 0 (1e-12 of the largest y_t^T y_t, at least 1e-12)."""
    return 1e-12 * max(float(spec.yy.max()), 1.0)


def interpolating(spec: TaskSpectra, res: LossResiduals) -> bool:
    """Whether every task can fit its training labels exactly (its loss floor rho_t^2 / 2 at
    most ``loss_floor``): n_t < d with full-rank X_t for every task, so inf F = 0."""
    return bool(np.all(0.5 * res.rho * res.rho <= loss_floor(spec)))
