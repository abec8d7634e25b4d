"""AMTL's B-step: W fixed, the transfer graph B solves, column by column, the non-negative
weighted lasso

    min_{b_t >= 0, b_tt = 0}  lam ||w_t - W b_t||^2 + mu sum_s l_s B_st,    l_s = L_s(w_s),

a convex quadratic q_t per column (divided by 2 lam below).  Solved by scaled projected
gradient steps with exact line search, vectorised over all T x T entries (``b_descent``).
Also here: the KKT residual of B = 0 (``transfer_threshold``, which scales ``mu``) and of any
B (``b_kkt_residual``, the stationarity test).
"""
from __future__ import annotations

import numpy as np


def c_times(W, C, D):
    """C D for C = W^T W (T x T) and D (T x T): C @ D (T^3) or W^T (W D) (2 d T^2), whichever is
    cheaper (``C`` is None when the second is)."""
    if C is not None:
        return C @ D
    return W.T @ (W @ D)


def b_descent(B, G, W, C, diagC, pen, steps, tol, low=None):
    """Scaled projected-gradient steps with exact line search on all columns of the B-step (in
    place): B, G = C B - C (kept in step), W and C (or None) for products with C, diagC = diag C,
    pen = mu l / (2 lam).  Column t is the convex quadratic

        q_t(b) = 1/2 b^T C b - C_t^T b + pen^T b,   b >= 0, b_t = 0,   gradient g_t = G_t + pen.

    One step, vectorised over all entries: the Jacobi target P(b - g / diag C) (P: clip at 0,
    b_t = 0; a row with C_ss = 0, i.e. w_s = 0, goes to 0) gives the feasible direction
    d_t = P(...) - b_t, a descent direction (g^T d <= -d^T diag(C) d) that is zero iff b_t meets
    the KKT conditions; then the exact minimiser of q_t on the segment,
    alpha_t = min(1, -g_t^T d_t / d_t^T C d_t), so no column's objective increases.
    Stops before a step when max |d| <= ``tol`` x max(1, max B) (the KKT residual).  One step
    costs one product C D, formed in ``low`` (e.g. float32; C then in ``low`` too, from
    ``b_setup(low=...)``) when given: B, G and the line search stay float64.  Returns (steps
    taken, last KKT residual)."""
    live = diagC > 0
    inv = np.where(live, 1.0 / np.where(live, diagC, 1.0), 0.0)[:, None]
    dead = np.flatnonzero(~live)
    if low is not None:
        if C is None:
            W = W.astype(low)
        else:
            C = C.astype(low, copy=False)
    Gp = np.empty_like(B)
    D = np.empty_like(B)
    res = np.inf
    for k in range(steps):
        np.add(G, pen[:, None], out=Gp)
        np.multiply(Gp, inv, out=D)
        np.subtract(B, D, out=D)
        np.maximum(D, 0.0, out=D)
        D[dead] = 0.0
        np.fill_diagonal(D, 0.0)
        D -= B
        res = max(-float(D.min(initial=0.0)), float(D.max(initial=0.0)))
        if res <= tol * max(1.0, float(B.max(initial=0.0))):
            return k, res
        CD = c_times(W, C, D if low is None else D.astype(low)).astype(np.float64, copy=False)
        num = -np.einsum("st,st->t", Gp, D)
        curv = np.einsum("st,st->t", D, CD)
        pos = curv > 0
        alpha = np.where(pos, np.clip(num / np.where(pos, curv, 1.0), 0.0, 1.0), 1.0)
        D *= alpha
        B += D
        CD *= alpha
        G += CD
    return steps, res


def b_setup(W, B, losses, lam, mu, R=None, low=None):
    """(C or None, diag C, G = C B - C, pen) for the B-step at W (see ``b_descent``).  G is
    formed as W^T (W B - W) (2 d T^2, no T x T x T product), or d T^2 when the reconstruction
    residual R = W - W B of this (W, B) is given (the objective evaluation has it).  C is formed
    only when T <= 2 d (else products go through W), in ``low`` when given (for
    ``b_descent(low=...)`` only)."""
    d, T = W.shape
    diagC = np.einsum("it,it->t", W, W)
    WB_W = W @ B - W if R is None else -R
    G = W.T @ WB_W
    if T <= 2 * d:
        Wc = W if low is None else W.astype(low)
        C = Wc.T @ Wc
    else:
        C = None
    pen = mu * np.asarray(losses, dtype=np.float64) / (2.0 * lam)
    return C, diagC, G, pen


def b_step(W: np.ndarray, losses: np.ndarray, lam: float, mu: float, B0: np.ndarray | None = None,
           tol: float = 1e-6, max_pass: int = 100) -> tuple[np.ndarray, int]:
    """All columns of argmin_{B >= 0, diag B = 0} lam ||W - W B||_F^2 + mu sum_{s,t} losses_s B_st.

    ``b_descent`` from ``B0`` (default 0) until the KKT residual is at most ``tol`` x
    max(1, max B) or ``max_pass`` steps.  Returns (B, steps)."""
    T = W.shape[1]
    B = np.zeros((T, T)) if B0 is None else np.array(B0, dtype=np.float64)
    np.fill_diagonal(B, 0.0)
    C, diagC, G, pen = b_setup(W, B, losses, lam, mu)
    steps, _ = b_descent(B, G, W, C, diagC, pen, int(max_pass), tol)
    return B, steps


def b_kkt_residual(W, R, B, losses, lam, mu) -> float:
    """max |P(B - g / diag C) - B|, g = the B-step gradient / (2 lam) at (W, B) from the
    reconstruction residual R = W - W B (``b_descent``'s measure: 0 iff B meets the KKT
    conditions of the B-step at W)."""
    diagC = np.einsum("it,it->t", W, W)
    live = diagC > 0
    g = -(W.T @ R) + (mu / (2.0 * lam)) * np.asarray(losses)[:, None]
    target = np.maximum(B - g / np.where(live, diagC, 1.0)[:, None], 0.0)
    target[~live] = 0.0
    np.fill_diagonal(target, 0.0)
    return float(np.abs(target - B).max(initial=0.0))


def transfer_threshold(W, losses, lam, floor) -> float:
    """max_{s != t} 2 lam w_s^T w_t / L_s: the smallest mu at which B = 0 meets the KKT
    conditions of the B-step at W (mu L_s >= 2 lam w_s^T w_t for every s != t); 0 if no pair of
    columns is positively aligned.  Losses below ``floor`` count as ``floor``."""
    C = W.T @ W
    np.fill_diagonal(C, -np.inf)
    ratio = 2.0 * lam * C / np.maximum(losses, floor)[:, None]
    return max(float(ratio.max()), 0.0) if ratio.size > 1 else 0.0
