"""Exact minimisation of a TFCL-family objective over a fixed structure ("polishing").

Once U and the support of the co-grouping block stop changing, every further iteration of
Alg. 1 / Alg. 2 is a proximal-gradient step on one convex problem: with U fixed, the support of
theta_g fixed (signs s) and theta_p = 0, the objective restricted to that structure is the
strictly convex quadratic

    q(c, g) = J(c 1^T + g) + a_c/2 ||c||^2 + <lin, g> + a_g/2 ||g||^2,   g_t supported on A_t,

(lin = alpha_1 D o s: the weighted l1 term on its support; no c for problem (P)), whose minimiser
the iterations approach at a rate set by the condition number (up to L/a_g: slow at weak ridge).
``FixedStructure`` computes that minimiser directly; the caller accepts it only if it is
the minimiser of the convex W-subproblem itself (signs kept, the optimality conditions of the
zero entries of g and of theta_p = 0 hold: ``kkt_ok``) and reproduces the same U, i.e. it is a
fixed point of Alg. 1 / Alg. 2 -- the point those iterations converge to on that structure.

How (J = sum_t 1/2 ||Z_t w_t - c_t||^2, Z_t: m_t x d with m_t = n_t + 1 or n_t << d here): for
fixed c, task t's block is a ridge problem on the columns A_t, solved in the m_t-dimensional
row space by the push-through identity.  Its optimal residual r_t = Z_t w_t - c_t is

    r_t = S_t (a_g e_t - Z_{A_t} lin_t),  e_t = Z_t c - c_t,  S_t = (a_g I + Z_{A_t} Z_{A_t}^T)^{-1},

and g_{A_t} = -(Z_{A_t}^T r_t + lin_{A_t}) / a_g.  The shared part then solves the d x d system
[a_g sum_t Z_t^T S_t Z_t + a_c I] c = sum_t Z_t^T S_t (a_g c_t + Z_{A_t} lin_t) (one d x d matrix
for all tasks, no per-task d x d matrix); without theta_g (TFCL-Q w/o G) it is the ridge system
[sum_t Z_t^T Z_t + a_c I] c = sum_t Z_t^T c_t.  Cost: one batched m x m factorisation per task,
O(T m^2 d + T m d^2) -- tens of gradient passes, once per structure.
"""
from __future__ import annotations

import numpy as np

from .._losses import StackedLeastSquares


class FixedStructure:
    """The minimiser (c, g) of q above for one structure, for any linear term ``lin``.

    ``mask`` (d x T booleans): the support of g (None: no g); ``a_c`` None: no shared part c.
    With K_t = I + Z_A Z_A^T / a_g = a_g S_t^{-1} (m_t x m_t), the formulas of the module
    docstring read

        r_t = K_t^{-1} (Z_t c - c_t - Z_A lin_t / a_g),   g_t = -(Z_A^T r_t + lin_t) / a_g,
        [sum_t Z_t^T K_t^{-1} Z_t + a_c I] c = sum_t Z_t^T K_t^{-1} (c_t + Z_A lin_t / a_g).

    The per-task K_t^{-1} and the d x d system depend on the structure only, so they are
    formed once and ``solve(lin)`` (called again when the signs change) is cheap."""

    def __init__(self, J: StackedLeastSquares, mask: np.ndarray | None, a_g: float,
                 a_c: float | None) -> None:
        d = J.d
        self.J, self.mask, self.a_c, self.a_g = J, mask, a_c, a_g
        self.parts = []
        H = np.zeros((d, d))
        for idx, Z3, c2 in J.buckets:
            sel = slice(None) if idx is None else idx
            if mask is None:
                if a_c is not None:
                    Zf = Z3.reshape(-1, d)
                    H += Zf.T @ Zf
                self.parts.append(None)
                continue
            Mk = mask[:, sel].T.astype(np.float64)                    # (Tb, d)
            ZA = Z3 * Mk[:, None, :]
            m = Z3.shape[1]
            K = np.matmul(ZA / a_g, ZA.transpose(0, 2, 1))
            K[:, np.arange(m), np.arange(m)] += 1.0
            Kinv = np.linalg.inv(K)
            KZ = None
            if a_c is not None:
                KZ = np.matmul(Kinv, Z3)
                H += Z3.reshape(-1, d).T @ KZ.reshape(-1, d)
            self.parts.append((sel, Mk, ZA, Kinv, KZ))
        self.H = None
        if a_c is not None:
            H[np.diag_indices(d)] += a_c
            self.H = H

    def solve(self, lin: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray]:
        """(c or None, g as a d x T array, zero off the mask); ``lin`` None: no linear term."""
        J = self.J
        d, T = J.d, J.T
        g = np.zeros((d, T))
        shifts = []
        for part in self.parts:
            if part is None or lin is None:
                shifts.append(None)
                continue
            sel, Mk, ZA = part[:3]
            Llin = lin[:, sel].T * Mk / self.a_g                   # (Tb, d)
            shifts.append((Llin, np.matmul(ZA, Llin[:, :, None])[:, :, 0]))
        c = None
        if self.H is not None:
            rhs = np.zeros(d)
            for (idx, Z3, c2), part, sh in zip(J.buckets, self.parts, shifts):
                if part is None:
                    rhs += Z3.reshape(-1, d).T @ c2.ravel()
                    continue
                KZ = part[4]
                rhs += np.einsum("tmd,tm->d", KZ, c2 if sh is None else c2 + sh[1])
            c = np.linalg.solve(self.H, rhs)
        if self.mask is None:
            return c, g
        for (idx, Z3, c2), (sel, Mk, ZA, Kinv, KZ), sh in zip(J.buckets, self.parts, shifts):
            e = -c2 if c is None else np.matmul(Z3, c) - c2
            if sh is not None:
                e = e - sh[1]
            r = np.matmul(Kinv, e[:, :, None])[:, :, 0]
            ZAr = np.matmul(r[:, None, :], ZA)[:, 0, :]                 # (Tb, d)
            gt = -ZAr / self.a_g
            if sh is not None:
                gt -= sh[0]
            g[:, sel] = (gt * Mk).T
        return c, g


def kkt_ok(G: np.ndarray, g: np.ndarray, mask: np.ndarray, signs: np.ndarray,
           threshold: np.ndarray, personal: float | None) -> bool:
    """Whether the solved point is the minimiser of the convex subproblem over *all* W (not
    only its structure): every entry of g on the mask kept its sign (so the l1 term is the
    linear term used), every entry off the mask satisfies |grad_ij| <= threshold_ij (0 is
    optimal there), and with ``personal`` (TFCL-Q) every user's theta_p = 0 is optimal,
    ||grad_t||_2 <= alpha_4.  ``G``: gradient of J at the solved W.  The inequalities carry a
    relative slack of 1e-9 (rounding of a point that is exact up to the solve's accuracy)."""
    if mask is not None:
        if not np.array_equal(np.sign(g[mask]), signs[mask]):
            return False
        slack = 1e-9 * max(float(np.max(np.abs(G), initial=0.0)), float(threshold.max(initial=0.0)))
        if np.any(np.abs(G[~mask]) > threshold[~mask] + slack):
            return False
    if personal is not None:
        norms = np.linalg.norm(G, axis=0)
        if np.any(norms > personal * (1.0 + 1e-9)):
            return False
    return True
