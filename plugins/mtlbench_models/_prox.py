"""Proximal operators shared by the model plugins (all vectorised, float64).

Each ``prox_*(V, tau)`` returns argmin_X 1/2 ||X - V||_F^2 + tau * penalty(X).
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import eigh


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


# ---------------------------------------------------------------------------------------------
# k-support norm (Argyriou, Foygel & Srebro, "Sparse prediction with the k-support norm",
# NIPS 2012) and l_{1,inf} (Quattoni et al. 2009).  Used by VSTG-MTL (Jeong & Jun, KDD 2018).
#
# Both k-support helpers rest on the box-norm variational form (McDonald, Pontil & Stamos,
# "Spectral k-support norm regularization", NIPS 2014, with box [0, 1] and budget k):
#
#     (||w||_k^sp)^2 = min { sum_i w_i^2 / theta_i : 0 < theta_i <= 1, sum_i theta_i <= k }.
# ---------------------------------------------------------------------------------------------

def ksupport_norm(w: np.ndarray, k: int) -> float:
    """k-support norm of a vector (Argyriou et al. 2012, Prop. 2.1).

    With z = |w| sorted decreasingly (z_0 = +inf), r in {0, ..., k-1} is the unique integer with
    z_{k-r-1} > (1/(r+1)) sum_{i>=k-r} z_i >= z_{k-r}, and
    ||w||^sp_k = ( sum_{i<k-r} z_i^2 + (sum_{i>=k-r} z_i)^2 / (r+1) )^{1/2}   (1-based indices).
    k >= len(w) gives the l2 norm, k = 1 the l1 norm.
    """
    z = np.sort(np.abs(np.asarray(w, dtype=np.float64).ravel()))[::-1]
    d = z.size
    k = int(k)
    if k < 1:
        raise ValueError(f"ksupport_norm: k must be >= 1, got {k}")
    if k >= d:
        return float(np.sqrt(z @ z))
    tail = np.cumsum(z[::-1])[::-1]           # tail[j] = sum_{i>=j} z_i (0-based)
    for r in range(k):
        j = k - r - 1                          # 0-based index of z_{k-r}
        avg = tail[j] / (r + 1)
        upper = np.inf if j == 0 else z[j - 1]
        if upper > avg >= z[j] or r == k - 1:
            return float(np.sqrt(z[:j] @ z[:j] + tail[j] ** 2 / (r + 1)))
    raise AssertionError("unreachable")  # pragma: no cover


def prox_ksupport_sq(V: np.ndarray, lam: float | np.ndarray, k: int) -> np.ndarray:
    """argmin_W 1/2 ||W - V||^2 + lam/2 (||W||_k^sp)^2, column by column (a 1-d V is one column).

    ``lam`` may be a scalar or one value per column.  Exact, O(p^2) per column of length p
    (fine for the short columns VSTG-MTL needs; p = number of latent bases).

    Derivation (box-norm form above): for fixed theta the minimiser is
    w_i = v_i theta_i / (theta_i + lam); what remains, sum_i lam v_i^2 / (2 (theta_i + lam)),
    is convex in theta and its KKT conditions give theta_i = clip(s |v_i| - lam, 0, 1) with the
    scalar s > 0 such that sum_i theta_i = k (the budget binds unless at most k entries are
    nonzero, where theta_i = 1 and W = V / (1 + lam)).  sum_i theta_i(s) is piecewise linear and
    nondecreasing in s with kinks at lam / |v_i| and (1 + lam) / |v_i|: we evaluate it at every
    kink and interpolate linearly inside the bracketing segment.  This is the same solution as
    Algorithm 1 of Argyriou et al. (2012) (top entries scaled by 1/(1+lam), middle entries
    shifted by a common amount, the rest set to 0).
    """
    V = np.asarray(V, dtype=np.float64)
    one_d = V.ndim == 1
    M = V[:, None] if one_d else V
    p, m = M.shape
    k = int(k)
    if k < 1:
        raise ValueError(f"prox_ksupport_sq: k must be >= 1, got {k}")
    lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), (m,))
    if np.any(lam < 0):
        raise ValueError("prox_ksupport_sq: lam must be >= 0")
    A = np.abs(M)
    out = M / (1.0 + lam)                      # the case "at most k nonzeros" (and k >= p)
    nnz = np.count_nonzero(A, axis=0)
    todo = np.flatnonzero((nnz > k) & (lam > 0))
    if todo.size:                               # vectorised over columns: O(p^2) work per column
        a, l = A[:, todo], lam[todo]
        with np.errstate(divide="ignore"):
            kinks = np.concatenate([l / a, (1.0 + l) / a], axis=0)         # (2p, m'), inf at zeros
        finite = np.isfinite(kinks)
        big = 2.0 * np.where(finite, kinks, 0.0).max(axis=0) + 1.0
        kinks = np.sort(np.where(finite, kinks, big), axis=0)
        theta_sum = np.clip(kinks[:, None, :] * a[None, :, :] - l, 0.0, 1.0).sum(axis=1)
        i = np.argmax(theta_sum >= k, axis=0)   # first kink with sum >= k (max sum = nnz > k)
        cols = np.arange(todo.size)
        s1, f1 = kinks[i, cols], theta_sum[i, cols]
        im1 = np.maximum(i - 1, 0)
        s0 = np.where(i > 0, kinks[im1, cols], 0.0)
        f0 = np.where(i > 0, theta_sum[im1, cols], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(f1 > f0, s0 + (k - f0) * (s1 - s0) / (f1 - f0), s1)
        theta = np.clip(s * a - l, 0.0, 1.0)
        out[:, todo] = M[:, todo] * theta / (theta + l)
    return out[:, 0] if one_d else out


def project_l1_ball_rows(V: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of V onto the l1 ball of the given radius
    (Duchi et al., ICML 2008, sort-based, vectorised over rows)."""
    V = np.asarray(V, dtype=np.float64)
    n, m = V.shape
    radius = np.broadcast_to(np.asarray(radius, dtype=np.float64), (n,))
    A = np.abs(V)
    inside = A.sum(axis=1) <= radius
    U = -np.sort(-A, axis=1)                    # decreasing
    css = np.cumsum(U, axis=1) - radius[:, None]
    idx = np.arange(1, m + 1)
    cond = U - css / idx > 0
    rho = m - 1 - np.argmax(cond[:, ::-1], axis=1)   # last index where cond holds
    tau = css[np.arange(n), rho] / (rho + 1)
    tau = np.where(inside, 0.0, np.maximum(tau, 0.0))
    return np.sign(V) * np.maximum(A - tau[:, None], 0.0)


def prox_l1inf_rows(V: np.ndarray, tau: float) -> np.ndarray:
    """Penalty sum_i ||X[i, :]||_inf (the l_{1,inf} norm over rows).

    Moreau decomposition: prox_{tau ||.||_inf}(v) = v - P_{tau B_1}(v), with P the projection
    onto the l1 ball of radius tau (the dual-norm ball)."""
    V = np.asarray(V, dtype=np.float64)
    if tau <= 0:
        return V.copy()
    return V - project_l1_ball_rows(V, tau)


# ---------------------------------------------------------------------------------------------
# CoCMTL's co-cluster term (Xu, Huang, Chen, Chen, AAAI 2015): the truncated sum of squared
# singular values, used by CoCMTL and TFCL-Coc.
# ---------------------------------------------------------------------------------------------

def _top_right_subspace(Q: np.ndarray, k: int) -> tuple[np.ndarray, float, bool]:
    """Orthonormal basis of the top-k singular subspace of Q on its smaller side.

    Returns (B, tail, right): when ``right`` B is T x k with Q B B^T the rank-k truncation of Q,
    else B is d x k with B B^T Q the truncation.  ``tail`` = sum_{i>k} sigma_i(Q)^2
    = ||Q||_F^2 - (sum of the k largest eigenvalues of the smaller Gram matrix), clipped at 0
    (absolute error ~ 1e-15 ||Q||_F^2).  Only the top k eigenpairs are computed (LAPACK MRRR
    with an index subset; the top eigenvectors are the best-conditioned ones, so this is
    accurate for the top-k subspace).  Requires 1 <= k < min(d, T).
    """
    d, T = Q.shape
    right = T <= d
    G = Q.T @ Q if right else Q @ Q.T
    m = G.shape[0]
    evals, evecs = eigh(G, subset_by_index=(m - k, m - 1), driver="evr", check_finite=False)
    B = evecs[:, ::-1]
    tail = max(float(np.trace(G)) - float(np.maximum(evals, 0.0).sum()), 0.0)
    return B, tail, right


def cocluster_penalty(Q: np.ndarray, k: int) -> float:
    """CoCMTL's co-cluster term Omega2(Q) = sum_{i > k} sigma_i(Q)^2.

    Computed as ||Q||_F^2 - (sum of the k largest eigenvalues of the smaller Gram matrix):
    absolute error ~ 1e-15 ||Q||_F^2, no SVD."""
    Q = np.asarray(Q, dtype=np.float64)
    k = int(k)
    if k >= min(Q.shape):
        return 0.0
    if k <= 0:
        return float(np.sum(Q * Q))
    return _top_right_subspace(Q, k)[1]


def prox_cocluster(Q: np.ndarray, tau: float, k: int) -> np.ndarray:
    """Proximal map of CoCMTL's co-cluster term (Xu, Huang, Chen, Chen, AAAI 2015).

    Returns ``argmin_X 1/2 ||X - Q||_F^2 + tau * Omega(X)`` with

        Omega(X) = sum_{i = k+1}^{min(d, T)} sigma_i(X)^2

    (sigma_1 >= sigma_2 >= ... the singular values of X): the truncated sum of squared singular
    values, zero iff rank X <= k.  Closed form: with Q = U diag(s) V^T,

        X = U diag(s_1, ..., s_k, s_{k+1}/(1 + 2 tau), ..., s_r/(1 + 2 tau)) V^T
          = Q / (1 + 2 tau) + (2 tau / (1 + 2 tau)) * Q V_k V_k^T

    Proof sketch: Omega is unitarily invariant, so (von Neumann) X shares Q's singular vectors;
    Omega(x) = min_{|S| = k} sum_{i not in S} x_i^2, and minimising jointly over S and x gives
    value tau/(1+2tau) * sum_{i not in S} s_i^2, smallest for S = top k.  The minimiser is unique
    when s_k > s_{k+1}; with a tie any top-k choice is a minimiser.

    Parameters
    ----------
    Q : array (d, T)
    tau : float >= 0
    k : int >= 0 (k >= min(d, T) returns Q unchanged; k = 0 gives Q / (1 + 2 tau))

    Cost: one Gram matrix on the smaller side (O(d T min(d, T))) and its eigen-decomposition;
    only the top-k eigenvectors are used.
    """
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim != 2:
        raise ValueError(f"prox_cocluster: Q must be a 2-d array, got shape {Q.shape}")
    tau = float(tau)
    if not tau >= 0:
        raise ValueError(f"prox_cocluster: tau must be >= 0, got {tau}")
    k = int(k)
    if k < 0:
        raise ValueError(f"prox_cocluster: k must be >= 0, got {k}")
    if tau == 0 or k >= min(Q.shape):
        return Q.copy()
    shrink = 1.0 / (1.0 + 2.0 * tau)
    if k == 0:
        return Q * shrink
    return _prox_cocluster_with_value(Q, tau, k)[0]


def _prox_cocluster_with_value(Q: np.ndarray, tau: float, k: int) -> tuple[np.ndarray, float]:
    """prox_cocluster(Q, tau, k) and Omega(X) of the result (from the same eigen-decomposition)."""
    shrink = 1.0 / (1.0 + 2.0 * tau)
    if k >= min(Q.shape):
        return Q.copy(), 0.0
    if k == 0:
        return Q * shrink, float(np.sum(Q * Q)) * shrink ** 2
    B, tail, right = _top_right_subspace(Q, k)
    top = (Q @ B) @ B.T if right else B @ (B.T @ Q)
    return shrink * Q + (1.0 - shrink) * top, tail * shrink ** 2
