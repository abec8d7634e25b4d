"""Proximal operators shared by the model plugins (all vectorised, float64).

Each ``prox_*(V, tau)`` returns argmin_X 1/2 ||X - V||_F^2 + tau * penalty(X).
"""
from __future__ import annotations

import functools

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

    ``lam`` >= 0 may be a scalar or one value per column.  Exact; see
    ``prox_ksupport_sq_with_value``, which also returns (||W||_k^sp)^2 per column."""
    return prox_ksupport_sq_with_value(V, lam, k)[0]


def prox_ksupport_sq_with_value(V: np.ndarray, lam: float | np.ndarray,
                                k: int) -> tuple[np.ndarray, np.ndarray | float]:
    """(W, (||W||_k^sp)^2 per column) with W = ``prox_ksupport_sq(V, lam, k)``.

    Exact, one sort per column and O(k p) arithmetic per column of length p, vectorised over
    columns (no per-column branching: the few numpy calls, not the arithmetic, are the cost
    at the sizes VSTG-MTL uses, p = K <= 40, k <= 5).

    Derivation (box-norm form above): for fixed theta the minimiser is
    w_i = v_i theta_i / (theta_i + lam); what remains, sum_i lam v_i^2 / (2 (theta_i + lam)), is
    convex in theta and its KKT conditions give theta_i = clip(lam (|v_i| / tau - 1), 0, 1) with
    the scalar tau > 0 such that sum_i theta_i = k (the budget binds unless at most k entries
    are nonzero; then theta_i = 1 and W = V / (1 + lam)).  Substituting theta,

        w_i = sign(v_i) min( |v_i| / (1 + lam), max(|v_i| - tau, 0) ):

    entries with |v_i| >= (1 + lam) tau / lam are scaled by 1/(1+lam), the next ones
    soft-thresholded by tau, the rest set to 0 -- Algorithm 1 of Argyriou et al. (2012).

    Finding tau, in closed form: with z = |v| sorted decreasingly and u = 1/tau, the budget is
    sum_i min(1, max(0, lam (u z_i - 1))) = min_a max_b [a + lam (u S_ab - (b - a))] over
    a saturated entries (the a largest) and rising entries a+1..b, S_ab = z_{a+1} + ... + z_b
    (sum_i min(1, g_i) = min over sets A of |A| + sum_{i not in A} g_i, and the optimal sets
    are the top-a and the next entries, for every u).  Every bracket is increasing in u, so
    the budget reaches k exactly when every max_b does, i.e. at u* = max_a min_b of the roots
    of the brackets:

        tau = min_{a = 0..k-1} max_{b = a+1..p} lam S_ab / (k - a + lam (b - a))

    (a >= k contributes nothing: those brackets are >= k already).  No segment search, so
    exact ties and entries 1e-18 of the others are no special case (both broke earlier
    versions); a column with at most k nonzeros gets a tau with the same W = V / (1 + lam)
    (tau <= 0, or when exactly k are nonzero a tau below their saturation point), and lam = 0
    gives tau = 0, W = V.  The value follows from the same theta, which is also optimal in the
    box form of ||W||^2 (theta_i = min(1, |w_i| lam / tau), summing to k): saturated entries
    contribute w_i^2, rising ones w_i tau / lam.  Checked against the box-norm problem solved
    by cvxpy, the Fenchel-Young equality and ``ksupport_sq`` (tests/test_prox.py).
    """
    V = np.asarray(V, dtype=np.float64)
    one_d = V.ndim == 1
    M = V[:, None] if one_d else V
    p, m = M.shape
    k = int(k)
    if k < 1:
        raise ValueError(f"prox_ksupport_sq: k must be >= 1, got {k}")
    lam = np.asarray(lam, dtype=np.float64)
    if lam.shape != (m,):
        lam = np.full(m, float(lam)) if lam.ndim == 0 else np.broadcast_to(lam, (m,))
    lam_min = float(lam.min()) if m else 0.0
    if lam_min < 0:
        raise ValueError("prox_ksupport_sq: lam must be >= 0")
    A = np.abs(M)
    if k >= p:                                       # the squared l2 norm
        W = A / (1.0 + lam)
        val = np.einsum("ij,ij->j", W, W)
    else:
        prefix = np.zeros((m, p + 1))                # column j: 0, z_1, z_1 + z_2, ...
        np.cumsum(np.sort(A.T, axis=1)[:, ::-1], axis=1, out=prefix[:, 1:])
        # all b = 1..p for every a: for b <= a, S_ab = -(z_{b+1} + ... + z_a) <= 0 over a
        # positive denominator (|b - a|), below the max over b > a (>= 0), so no mask
        budget, offset = _ksupport_bracket_constants(k, p)                      # k - a, |b - a|
        inv_lam = (1.0 / lam if lam_min > 0
                   else np.divide(1.0, lam, out=np.full(m, np.inf), where=lam > 0))[:, None, None]
        step = max(1, (1 << 20) // max(m * p, 1))   # bound the m x a x p temporaries
        tau = None
        for a0 in range(0, k, step):
            a1 = min(k, a0 + step)
            S = prefix[:, None, 1:] - prefix[:, a0:a1, None]                  # S_ab
            ratio = S / (budget[a0:a1] * inv_lam + offset[a0:a1])     # lam = 0: S / inf = 0
            t = ratio.max(axis=2).min(axis=1)
            tau = t if tau is None else np.minimum(tau, t)
        scaled = A / (1.0 + lam)
        thresholded = A - tau
        saturated = scaled <= thresholded
        W = np.where(saturated, scaled, np.maximum(thresholded, 0.0))
        if lam_min > 0:
            val = np.einsum("ij,ij->j", W, np.where(saturated, W, tau * inv_lam[:, 0, 0]))
        else:                                        # lam = 0 (W = V): no theta to reuse
            with np.errstate(invalid="ignore"):
                val = np.einsum("ij,ij->j", W, np.where(saturated, W, tau * inv_lam[:, 0, 0]))
            none = lam == 0
            val[none] = ksupport_sq(W[:, none], k)
    W *= np.sign(M)
    return (W[:, 0], float(val[0])) if one_d else (W, val)


@functools.lru_cache(maxsize=64)
def _ksupport_bracket_constants(k: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(k - a as a k x 1 column, |b - a| as k x p) for a = 0..k-1, b = 1..p (read-only)."""
    a = np.arange(k)[:, None]
    budget = (k - a).astype(np.float64)
    offset = np.abs(np.arange(1, p + 1)[None, :] - a).astype(np.float64)
    budget.flags.writeable = False
    offset.flags.writeable = False
    return budget, offset


def l1_ball_threshold_rows(A: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Per row of A >= 0, the threshold t >= 0 of the Euclidean projection onto the l1 ball of
    the given radius (>= 0; a scalar or one per row): the projection is max(A - t, 0).

    With z the row sorted decreasingly and S_j = z_1 + ... + z_j, sum_i max(z_i - t, 0) =
    max_j (S_j - j t) (every partial sum is a lower bound, the j of the positive entries
    attains it), which is >= radius iff t <= max_j (S_j - radius) / j; so
    t = max(0, max_j (S_j - radius) / j) (Duchi et al., ICML 2008, without the search for
    the last positive index).  Radius 0 gives t = max_i z_i (projection onto {0})."""
    radius = np.asarray(radius, dtype=np.float64)
    S = np.cumsum(np.sort(A, axis=1)[:, ::-1], axis=1)
    S -= radius[:, None] if radius.ndim else radius
    S /= _counts(A.shape[1])
    return S.max(axis=1, initial=0.0)


@functools.lru_cache(maxsize=64)
def _counts(m: int) -> np.ndarray:
    """1, 2, ..., m as float64 (read-only)."""
    out = np.arange(1, m + 1, dtype=np.float64)
    out.flags.writeable = False
    return out


def project_l1_ball_rows(V: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of V onto the l1 ball of the given radius (>= 0;
    a scalar or one per row; ``l1_ball_threshold_rows``).  Radius 0 projects onto {0}."""
    V = np.asarray(V, dtype=np.float64)
    A = np.abs(V)
    return np.sign(V) * np.maximum(A - l1_ball_threshold_rows(A, radius)[:, None], 0.0)


def prox_l1inf_rows(V: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """Penalty sum_i tau_i ||X[i, :]||_inf (the l_{1,inf} norm over rows; ``tau`` >= 0, a scalar
    or one weight per row).

    Moreau decomposition: prox_{tau ||.||_inf}(v) = v - P_{tau B_1}(v), with P the projection
    onto the l1 ball of radius tau (the dual-norm ball); as P(v) = sign(v) max(|v| - t, 0),
    this clips every |v_i| at the row's threshold t (``l1_ball_threshold_rows``)."""
    V = np.asarray(V, dtype=np.float64)
    A = np.abs(V)
    return np.sign(V) * np.minimum(A, l1_ball_threshold_rows(A, tau)[:, None])


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
