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

def ksupport_sq(V: np.ndarray, k: int) -> np.ndarray | float:
    """(||v||_k^sp)^2 of every column of V (a 1-d V is one vector; returns a float then).

    Argyriou et al. (2012), Prop. 2.1: with z = |v| sorted decreasingly and r in {0, ..., k-1},
    the box-form point theta = 1 on the k-r-1 largest entries and theta_i = (r+1) z_i / T_r on
    the rest (T_r = the sum of the rest) gives the value

        val_r = sum_{i < k-r} z_i^2 + T_r^2 / (r+1)     (1-based indices),

    and is feasible (theta <= 1) iff z_{k-r} <= T_r / (r+1).  Every feasible value is >= the
    norm^2 (it is the box-form objective at a feasible theta) and the optimal theta is one of
    them (the r of Prop. 2.1), so norm^2 = min of val_r over the feasible r.  Taking the minimum
    instead of searching for the r whose two strict inequalities hold keeps exact ties (equal
    |v_i|) exact: there rounding can break both inequalities of the right r, and falling back to
    r = k-1 returned (sum z)^2 / k, too small (the earlier implementations did).  k >= len(v) is
    the squared l2 norm, k = 1 the squared l1 norm.  O(p log p) per column.
    """
    V = np.asarray(V, dtype=np.float64)
    one_d = V.ndim == 1
    M = V[:, None] if one_d else V
    p, m = M.shape
    k = int(k)
    if k < 1:
        raise ValueError(f"ksupport_sq: k must be >= 1, got {k}")
    Z = -np.sort(-np.abs(M), axis=0)
    if k >= p:
        out = np.einsum("ij,ij->j", Z, Z)
    else:
        Zk = Z[:k]                                                     # z_{k-r} for r = k-1 .. 0
        tail = np.cumsum(Z[::-1], axis=0)[::-1][:k]                    # T_r = sum_{i >= k-r} z_i
        head = np.zeros((k, m))
        np.cumsum(Zk[:-1] ** 2, axis=0, out=head[1:])                  # sum_{i < k-r} z_i^2
        cnt = (k - np.arange(k, dtype=np.float64))[:, None]            # r + 1
        feasible = Zk * cnt <= tail * (1.0 + 1e-12)
        out = np.where(feasible, head + tail * tail / cnt, np.inf).min(axis=0)
    return float(out[0]) if one_d else out


def ksupport_norm(w: np.ndarray, k: int) -> float:
    """k-support norm of a vector: sqrt(``ksupport_sq``).  k >= len(w) gives the l2 norm, k = 1
    the l1 norm."""
    return float(np.sqrt(ksupport_sq(np.asarray(w, dtype=np.float64).ravel(), k)))


def prox_ksupport_sq(V: np.ndarray, lam: float | np.ndarray, k: int) -> np.ndarray:
    """argmin_W 1/2 ||W - V||^2 + lam/2 (||W||_k^sp)^2, column by column (a 1-d V is one column).

    ``lam`` >= 0 may be a scalar or one value per column.  Exact, O(p log p) per column of
    length p (one sort), vectorised over columns.

    Derivation (box-norm form above): for fixed theta the minimiser is
    w_i = v_i theta_i / (theta_i + lam); what remains, sum_i lam v_i^2 / (2 (theta_i + lam)), is
    convex in theta and its KKT conditions give theta_i = clip(lam (|v_i| / tau - 1), 0, 1) with
    the scalar tau > 0 such that sum_i theta_i = k (the budget binds unless at most k entries
    are nonzero; then theta_i = 1 and W = V / (1 + lam), tau = 0).  Substituting theta,

        w_i = sign(v_i) min( |v_i| / (1 + lam), max(|v_i| - tau, 0) ):

    entries with |v_i| >= (1 + lam) tau / lam are scaled by 1/(1+lam), the next ones
    soft-thresholded by tau, the rest set to 0 -- Algorithm 1 of Argyriou et al. (2012).

    Finding tau: with u = 1/tau, the budget sum_i theta_i(u) is continuous, piecewise linear and
    nondecreasing in u, with kinks where an entry starts rising (u = 1/|v_i|) or saturates
    (u = (1 + lam) / (lam |v_i|)).  The kinks are sorted once; at every kink the counts of
    saturated (a) and nonzero (b) entries are exact integer cumulative counts, and the sum S of
    the rising entries is a difference of prefix sums of the sorted |v|, so the budget there,
    a + lam (u S - (b - a)), carries no accumulated rounding (an earlier version accumulated
    slope x width products, which broke down when tiny entries put kinks at 1e17).  The root
    lies in the first segment whose right end reaches k, where tau = lam S / (k - a + lam (b - a))
    in closed form; a segment with no rising entry (the budget flat at k) gives tau = its right
    kink.  Checked against the box-norm problem solved by cvxpy and against a brute-force
    evaluation of the budget at every kink (tests/test_prox.py).
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
    tau = np.zeros(m)
    binding = (np.count_nonzero(A, axis=0) > k) & (lam > 0)
    if binding.any():
        every = bool(binding.all())
        todo = np.flatnonzero(binding)
        z = np.sort(A if every else A[:, todo], axis=0)[::-1]        # decreasing, p x n
        lt = lam if every else lam[todo]
        n = z.shape[1]
        prefix = np.zeros((p + 1, n))
        np.cumsum(z, axis=0, out=prefix[1:])
        with np.errstate(divide="ignore"):
            rise = 1.0 / z                                           # inf for zero entries
        kinks = np.concatenate([rise, rise * ((1.0 + lt) / lt)])
        order = np.argsort(kinks, axis=0)
        cols = np.arange(n)
        u = kinks[order, cols]
        b = np.cumsum(order < p, axis=0)                             # nonzero after the kink
        a = np.arange(1, 2 * p + 1)[:, None] - b                     # saturated after it
        S = prefix[b, cols] - prefix[a, cols]                        # sum of the rising |v|
        with np.errstate(invalid="ignore"):
            budget = a + lt * (u * S - (b - a))                      # sum of theta at the kink
        budget[np.isinf(u)] = np.inf
        j = np.argmax(budget >= k, axis=0)          # exists: the budget reaches nnz > k
        jm = np.maximum(j - 1, 0)                   # the segment (u_{j-1}, u_j]
        aj, bj, Sj = a[jm, cols], b[jm, cols], S[jm, cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where((j > 0) & (Sj > 0), lt * Sj / (k - aj + lt * (bj - aj)), 1.0 / u[j, cols])
        if every:
            tau = t
        else:
            tau[todo] = t
    out = np.minimum(A / (1.0 + lam), A - tau)
    np.maximum(out, 0.0, out=out)
    out *= np.sign(M)
    return out[:, 0] if one_d else out


def project_l1_ball_rows(V: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of V onto the l1 ball of the given radius (>= 0;
    a scalar or one per row; Duchi et al., ICML 2008, sort-based, vectorised over rows).
    Radius 0 projects onto {0}."""
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
    tau = np.where(radius > 0, tau, A.max(axis=1, initial=0.0))   # the sort rule needs radius > 0
    return np.sign(V) * np.maximum(A - tau[:, None], 0.0)


def prox_l1inf_rows(V: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """Penalty sum_i tau_i ||X[i, :]||_inf (the l_{1,inf} norm over rows; ``tau`` >= 0, a scalar
    or one weight per row).

    Moreau decomposition: prox_{tau ||.||_inf}(v) = v - P_{tau B_1}(v), with P the projection
    onto the l1 ball of radius tau (the dual-norm ball)."""
    V = np.asarray(V, dtype=np.float64)
    tau = np.asarray(tau, dtype=np.float64)
    if np.all(tau <= 0):
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


def _prox_cocluster_with_truncation(Q: np.ndarray, tau: float,
                                    k: int) -> tuple[np.ndarray, float, np.ndarray]:
    """prox_cocluster(Q, tau, k), Omega of the result and its rank-k truncation (the prox keeps
    the top k singular triplets of Q and scales the rest by 1 / (1 + 2 tau), so the truncation
    of the result is that of Q).  Requires 1 <= k < min(Q.shape)."""
    shrink = 1.0 / (1.0 + 2.0 * tau)
    B, tail, right = _top_right_subspace(Q, k)
    top = (Q @ B) @ B.T if right else B @ (B.T @ Q)
    return shrink * Q + (1.0 - shrink) * top, tail * shrink ** 2, top
