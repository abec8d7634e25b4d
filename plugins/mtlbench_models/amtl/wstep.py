"""AMTL's W-step: B fixed, the smooth convex quadratic

    min_W sum_t c_t L_t(w_t) + lam ||W (I - B)||_F^2,   c_t = 1 + mu sum_s B_ts,

by preconditioned conjugate gradients warm-started at the current W (CG iterates never
increase a convex quadratic).  Hessian products use the cached per-task Gram spectra
(``TaskSpectra``: O(T d r), no d T x d T matrix); the preconditioner is the exact inverse of the
block diagonal, (c_t X_t^T X_t + 2 lam M_tt I)^{-1} with M = (I - B)(I - B)^T, applied in O(d r)
per task from the same spectra.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

from mtlbench_models._core.representations import TaskSpectra


def sparse_if_worth(B):
    """B itself, or B as a CSR matrix when it is large and sparse enough that products P B
    (P: d x T) are cheaper that way (d x nnz instead of d x T^2); same products to rounding."""
    T = B.shape[0]
    if T < 200:
        return B
    nnz = np.count_nonzero(B)
    return sparse.csr_matrix(B) if nnz <= 0.05 * T * T else B


def orthonormal_spectra(spec: TaskSpectra) -> bool:
    """Whether every task's V_t has orthonormal columns (zero padding columns aside) to 1e-10:
    always for n_t >= d (eigenvectors of the Gram matrix); checked for the kernel-side tasks
    (n_t < d, V_t = X_t^T U e^{-1/2}), whose tiny kept eigenvalues can cost orthogonality."""
    worst = 0.0
    for t in np.flatnonzero(spec.sizes < spec.d):
        Vt = spec.V[t][:, spec.e[t] > 0]
        if Vt.shape[1]:
            worst = max(worst, float(np.abs(Vt.T @ Vt - np.eye(Vt.shape[1])).max()))
    return worst <= 1e-10


def coupling_products(B, d):
    """dtype -> (P -> P M), M = (I - B)(I - B)^T, for P d x T: one product with M (formed once,
    T^3) when d > T, else (P - P B) - (P - P B) B^T (2 d T^2, or 2 d nnz(B) with B in sparse form,
    ``sparse_if_worth``), so no T x T x T product when d < T.  The products are formed in the
    given dtype and returned in float64."""
    T = B.shape[0]
    if d > T:
        IB = np.eye(T) - B
        M = IB @ IB.T

        def dense(dtype):
            M_ = M.astype(dtype, copy=False)
            return lambda P: (P.astype(dtype, copy=False) @ M_).astype(np.float64, copy=False)
        return dense
    Bm = sparse_if_worth(B)
    Bt = Bm.T.copy()

    def through_b(dtype):
        Bm_, Bt_ = Bm.astype(dtype, copy=False), Bt.astype(dtype, copy=False)

        def apply(P):
            P = P.astype(dtype, copy=False)
            Q = P - P @ Bm_
            return (Q - Q @ Bt_).astype(np.float64, copy=False)
        return apply
    return through_b


class _Preconditioned:
    """The block-diagonal preconditioner's side of the W-step CG: P, G P and <R, Z> from the
    residual R.  ``fused`` (orthonormal V_t, ``orthonormal_spectra``): the preconditioned
    residual Z_t = R_t / a_t + V_t (k_t o V_t^T R_t) has V_t^T Z_t = V_t^T R_t / (c_t e_t + a_t), so
    V_t^T P_t follows P's recurrence without a pass over the spectra, <R, Z> needs no lift, and
    G_t P_t = V_t (e_t o V_t^T P_t) is lifted in the same batched product as Z: two passes over
    the stacked spectra per iteration (one projection, one two-column lift) instead of three;
    the same CG up to rounding."""

    def __init__(self, spec: TaskSpectra, c, a, fused: bool):
        self.spec, self.c, self.a, self.fused = spec, c, a, fused
        self.inv_a = 1.0 / a
        if fused:
            self.den = c[:, None] * spec.e + a[:, None]                    # T x r
            self.kcoef = 1.0 / self.den - self.inv_a[:, None]

    def first(self, R):
        """(P, G P, <R, Z>) of the first direction P = Z."""
        spec = self.spec
        if not self.fused:
            Z = spec.shifted_solve(R, self.c, self.a)
            return Z, spec.gram_apply(Z), float(np.sum(R * Z))
        Qr = spec.project(R)
        rz = float(np.sum(R * R * self.inv_a)) + float(np.sum(self.kcoef * Qr * Qr))
        self.QP = Qr / self.den
        two = np.matmul(spec.V, np.stack([self.kcoef * Qr, spec.e * self.QP], axis=2))
        return R * self.inv_a + two[:, :, 0].T, two[:, :, 1].T, rz

    def next(self, R, P, rz):
        """(P, G P, <R, Z>) of the next direction P = Z + beta P, beta = <R, Z> / ``rz``."""
        spec = self.spec
        if not self.fused:
            Z = spec.shifted_solve(R, self.c, self.a)
            rz_new = float(np.sum(R * Z))
            P = Z + (rz_new / rz) * P
            return P, spec.gram_apply(P), rz_new
        Qr = spec.project(R)
        rz_new = float(np.sum(R * R * self.inv_a)) + float(np.sum(self.kcoef * Qr * Qr))
        beta = rz_new / rz
        self.QP = Qr / self.den + beta * self.QP
        two = np.matmul(spec.V, np.stack([self.kcoef * Qr, spec.e * self.QP], axis=2))
        return R * self.inv_a + two[:, :, 0].T + beta * P, two[:, :, 1].T, rz_new


def w_step(spec: TaskSpectra, W, GW, B, lam, mu, cg_tol, cg_max_iter, xtol, fused=False,
           finish=False, low=None, finish_cg=10):
    """PCG from W for argmin_W sum_t c_t L_t(w_t) + lam ||W (I - B)||_F^2 (module docstring).
    GW = [G_t w_t]_t on entry.  Returns (W, GW, CG iterations, relative gradient residual
    ||grad|| / ||c o X^T y||_F at the returned W); GW is updated alongside W.

    CG stops at relative residual ``cg_tol`` or after ``cg_max_iter`` iterations (an inexact
    block step).  ``finish`` (the previous outer iteration met every other part of the stopping
    rule): CG goes on past ``cg_max_iter`` until the relative residual is at most xtol / 2, at
    most ``finish_cg`` x ``cg_max_iter`` iterations, so that an inexact W-step is never what keeps
    a fit from meeting the rule.  ``fused``: see ``_Preconditioned``.  ``low`` (e.g. float32):
    the coupling products of the CG directions, P M, in that precision; the starting residual,
    G P and the iterates stay float64, so GW stays exact."""
    c = 1.0 + mu * B.sum(axis=1)
    a = 2.0 * lam * (1.0 + np.einsum("st,st->s", B, B))     # 2 lam M_tt, M = (I-B)(I-B)^T
    products = coupling_products(B, W.shape[0])
    coupling = products(np.float64)                 # the residual's: always float64
    coupling_lo = coupling if low is None else products(low)
    rhs = spec.Xty * c
    X, GX = W.copy(), GW.copy()
    R = rhs - (c * GX + (2.0 * lam) * coupling(X))
    rhs_norm = float(np.linalg.norm(rhs))
    thr = float(cg_tol) * rhs_norm
    max_cg = int(cg_max_iter)
    thr_soft = 0.5 * float(xtol) * rhs_norm if finish else np.inf
    if float(np.linalg.norm(R)) <= thr:
        return X, GX, 0, float(np.linalg.norm(R)) / max(rhs_norm, 1e-300)
    pre = _Preconditioned(spec, c, a, fused)
    P, GP, rz = pre.first(R)
    n = 0
    for n in range(1, finish_cg * max_cg + 1):
        HP = c * GP + (2.0 * lam) * coupling_lo(P)
        alpha = rz / float(np.sum(P * HP))
        X = X + alpha * P
        GX = GX + alpha * GP
        R = R - alpha * HP
        rn = float(np.linalg.norm(R))
        if rn <= thr or (n >= max_cg and (rn <= thr_soft or not finish)) \
                or n == finish_cg * max_cg:
            break
        P, GP, rz = pre.next(R, P, rz)
    return X, GX, n, float(np.linalg.norm(R)) / max(rhs_norm, 1e-300)
