"""Exact minimisation of a TFCL-family objective over a fixed structure ("polishing").

Once U and the support of the co-grouping block stop changing, every further iteration of
Alg. 1 / Alg. 2 is a proximal-gradient step on one convex problem: with U fixed, the support of
theta_g fixed (signs s) and theta_p = 0, the objective restricted to that structure is the
strictly convex quadratic

    q(c, g) = J(c 1^T + g) + a_c/2 ||c||^2 + <lin, g> + a_g/2 ||g||^2,   g_t supported on A_t,

(lin = alpha_1 D o s: the weighted l1 term on its support; no c for problem (P)), whose minimiser
the iterations approach at a rate set by the condition number (up to L/a_g: slow at weak ridge).
``solve_fixed_structure`` computes that minimiser directly; the caller accepts it only if it is
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


def solve_fixed_structure(J: StackedLeastSquares, mask: np.ndarray | None, lin: np.ndarray | None,
                          a_g: float, a_c: float | None) -> tuple[np.ndarray | None, np.ndarray]:
    """Minimiser (c, g) of q above.  ``mask`` (d x T booleans): the support of g (None: no g);
    ``lin`` (d x T): the linear term on the support; ``a_c`` None: no shared part c.
    Returns (c or None, g as a d x T array, zero off the mask)."""
    d, T = J.d, J.T
    g = np.zeros((d, T))
    parts = []
    H = np.zeros((d, d))
    rhs = np.zeros(d)
    for idx, Z3, c2 in J.buckets:
        sel = slice(None) if idx is None else idx
        if mask is None:
            if a_c is not None:
                Zf = Z3.reshape(-1, d)
                H += Zf.T @ Zf
                rhs += Zf.T @ c2.ravel()
            parts.append(None)
            continue
        Mk = mask[:, sel].T.astype(np.float64)                        # (Tb, d)
        ZA = Z3 * Mk[:, None, :]
        m = Z3.shape[1]
        K = np.matmul(ZA, ZA.transpose(0, 2, 1))
        K[:, np.arange(m), np.arange(m)] += a_g
        ZAlin = np.matmul(ZA, lin[:, sel].T[:, :, None])[:, :, 0]       # (Tb, m)
        if a_c is not None:
            SZ = np.linalg.solve(K, Z3)                                 # S_t Z_t
            H += a_g * (Z3.reshape(-1, d).T @ SZ.reshape(-1, d))
            rhs += np.einsum("tmd,tm->d", SZ, a_g * c2 + ZAlin)
        parts.append((sel, Mk, ZA, K, ZAlin))
    c = None
    if a_c is not None:
        H[np.diag_indices(d)] += a_c
        c = np.linalg.solve(H, rhs)
    if mask is None:
        return c, g
    for (idx, Z3, c2), (sel, Mk, ZA, K, ZAlin) in zip(J.buckets, parts):
        e = -c2 if c is None else np.matmul(Z3, c) - c2
        r = np.linalg.solve(K, (a_g * e - ZAlin)[:, :, None])[:, :, 0]
        ZAr = np.matmul(r[:, None, :], ZA)[:, 0, :]                     # (Tb, d)
        g[:, sel] = (-(ZAr + Mk * lin[:, sel].T) / a_g).T * Mk.T
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
