"""Penalties on W (d x T, column t = task t): value, proximal map, dual norm.

Each penalty object has ``value(W)`` (W of shape (d, T); stacked (B, d, T) for ``BlockSum``)
and ``prox(V, L)`` = argmin_X L/2 ||X - V||_F^2 + g(X) (V of W's shape, L > 0 a float, or an
array broadcasting against V for per-row step constants where the map allows it; the step
of a proximal-gradient method with step constant L); a smooth penalty also has
``grad(W)`` and ``lipschitz``.  A penalty g = lam ||.|| (a weighted norm) has
``dual_norm(G)`` (the dual norm ||G||_*) and ``dual_scale(G)`` = min(1, lam / ||G||_*), the
factor that puts a dual point into the dual ball {||.||_* <= lam} (the conjugate of g is the
indicator of that ball); a penalty with a finite conjugate has ``conjugate(V)``.  Both give the
duality gaps of ``solvers.py``.  Penalties that separate over the rows have
``row_dual_ratios(G)`` (each row's dual norm over its weight: a zero row stays zero under a
proximal step from gradient G iff its ratio is <= 1; coordinate descent's active rows);
``L1.task_dual_scales`` scales a dual point task by task.  :class:`MeanRegL1Rows` is the
exact minimiser of one row's problem of a squared loss + ``MeanRegularised`` + ``L1``
(coordinate descent for SRMTL).

=====================  ==================================================  =====================
penalty                g(W)                                                dual norm / conjugate
=====================  ==================================================  =====================
``L1(lam)``            lam sum_ij |W_ij|                                   max_ij |G_ij|
``L21(lam)``           lam sum_i ||W[i, :]||_2   (rows: shared features)   max_i ||G[i, :]||_2
``L21(lam, "columns")`` lam sum_t ||W[:, t]||_2  (columns: outlier tasks)  max_t ||G[:, t]||_2
``L1Inf(lam)``         lam sum_i max_t |W_it|                              max_i ||G[i, :]||_1
``Nuclear(lam)``       lam sum_i sigma_i(W)                                sigma_1(G)
``SquaredFrobenius``   lam/2 ||W||_F^2  (smooth)                           ||V||^2 / (2 lam)
``SquaredKSupport``    lam sum_t (||w_t||_k^sp)^2  (k-support norm)        sum_t ||v_t||_(k)^2/4lam
``GraphLaplacian``     lam tr(W L W^T), L a T x T Laplacian (smooth)       --
``MeanRegularised``    lam sum_t ||w_t - wbar||^2 + lam_mean T ||wbar||^2  conjugate (both > 0)
``ClusterRelaxation``  min_M c tr(W (eta I + M)^{-1} W^T)  (smooth, CMTL)  conjugate: top-k sum
``CoCluster(lam, k)``  lam sum_{i > k} sigma_i(W)^2  (non-convex)          --
``L1PlusL1Inf``        lam1 ||W||_1 + lam2 sum_i max_t |W_it|              --
``L1InfConvL1``        min_{P+Q=W} lam1 ||P||_{1,inf} + lam2 ||Q||_1       both balls (max)
``BlockSum(g_1, ...)`` sum_b g_b(X_b) on stacked blocks X (W = sum_b X_b)  max_b of the blocks'
=====================  ==================================================  =====================

(||v||_(k) is the l2 norm of the k largest |v_i|.)  The proximal maps are also plain functions
(``prox_l1(V, tau)``, ``prox_group_rows``, ... : argmin_X 1/2 ||X - V||^2 + tau * penalty(X))
for solvers that call them directly; every map is implemented once, here.  Sources: the
k-support norm (Argyriou, Foygel & Srebro, "Sparse prediction with the k-support norm",
NIPS 2012) and its box-norm form (McDonald, Pontil & Stamos, NIPS 2014); l_{1,inf} (Quattoni
et al. 2009; the l1-ball projection of Duchi et al., ICML 2008); the co-cluster term of
CoCMTL (Xu, Huang, Chen & Chen, AAAI 2015); the composed l1 + l_{1,inf} map (Yu, "On
decomposing the proximal map", NIPS 2013).
"""
from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import eigh

__all__ = ["L1", "L21", "L1Inf", "Nuclear", "SquaredFrobenius", "SquaredKSupport",
           "GraphLaplacian", "MeanRegularised", "CoCluster", "L1PlusL1Inf", "BlockSum",
           "ClusterRelaxation", "cluster_relaxation_weights",
           "prox_l1", "prox_group_rows", "prox_group_cols", "prox_trace", "prox_trace_svd",
           "ksupport_sq", "ksupport_norm", "prox_ksupport_sq", "prox_ksupport_sq_with_value",
           "l1_ball_threshold_rows", "project_l1_ball_rows", "prox_l1inf_rows",
           "prox_l1_l1inf_rows", "prox_mean_reg", "mean_reg_penalty", "mean_reg_l1_dual_rows",
           "cocluster_penalty",
           "prox_cocluster", "top_k_truncation", "SquaredNuclear", "squared_l1_threshold",
           "gram_eigh", "smaller_gram", "MeanRegL1Rows"]


# ============================================================================ proximal maps
def prox_l1(V: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """Soft thresholding: penalty ||X||_1 (``tau`` may be an array of the shape of V)."""
    return np.sign(V) * np.maximum(np.abs(V) - tau, 0.0)


def prox_group_rows(V: np.ndarray, tau: float) -> np.ndarray:
    """Row-group shrinkage: penalty sum_i ||X[i, :]||_2 (the l_{2,1} norm over rows)."""
    norms = np.linalg.norm(V, axis=1, keepdims=True)
    scale = np.maximum(1.0 - tau / np.maximum(norms, 1e-300), 0.0)
    return V * scale


def prox_group_cols(V: np.ndarray, tau: float) -> np.ndarray:
    """Column-group shrinkage: penalty sum_t ||X[:, t]||_2 (the column-wise l_{2,1} norm)."""
    return prox_group_rows(V.T, tau).T


def prox_trace_svd(V: np.ndarray, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """Singular value thresholding by a LAPACK SVD: penalty ||X||_*.  Returns (X, singular
    values of X, descending)."""
    U, s, Vt = np.linalg.svd(V, full_matrices=False)
    s = np.maximum(s - tau, 0.0)
    keep = s > 0
    return (U[:, keep] * s[keep]) @ Vt[keep], s


def smaller_gram(V: np.ndarray) -> tuple[np.ndarray, bool]:
    """(the smaller Gram matrix of V, right): V^T V (T x T) when ``right`` (T <= d), else
    V V^T; its eigenvalues are the squared singular values of V."""
    right = V.shape[1] <= V.shape[0]
    return (V.T @ V if right else V @ V.T), right


def gram_eigh(V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.linalg.eigh`` of :func:`smaller_gram` (V): the squared singular values of V
    (ascending) and the eigenvectors."""
    return np.linalg.eigh(smaller_gram(V)[0])


def prox_trace(V: np.ndarray, tau: float, few: bool = False, above: float | None = None,
               gram_eig: tuple[np.ndarray, np.ndarray] | None = None):
    """Singular value thresholding argmin_X 1/2||X - V||_F^2 + tau ||X||_*.

    Returns (X, singular values of X in descending order, length min(d, T)), and with
    ``above`` given also U1 V1^T (d x T), U1, V1 the singular vectors of X whose singular
    values exceed ``above`` (a subgradient of sum_i max(sigma_i(X) - above, 0) at X).  Uses the
    eigen-decomposition of the smaller Gram matrix (only the singular values above tau and
    their vectors matter: X = V B B^T-type products with B = E diag(1 - tau/sigma)); falls back
    to :func:`prox_trace_svd` when tau < 1e-6 sigma_1 (Gram precision).  ``few=True`` (the
    caller expects few singular values above tau): only the eigenpairs of the Gram matrix
    above tau^2 are computed (LAPACK ``syevr`` with a value range) -- the same exact set.
    ``gram_eig``: the caller's ``np.linalg.eigh`` of that Gram matrix (:func:`gram_eigh`),
    not recomputed."""
    d, T = V.shape
    m = min(d, T)
    right = T <= d
    zero = np.zeros_like(V)
    if m == 0:
        return (zero, np.zeros(0)) if above is None else (zero, np.zeros(0), zero)
    if gram_eig is not None:
        evals, evecs = gram_eig
    elif few:
        G = smaller_gram(V)[0]
        evals, evecs = eigh(G, subset_by_value=(tau * tau, np.inf), driver="evr",
                            check_finite=False)
    else:
        # (the value subset is slower whenever more than a few singular values exceed tau)
        evals, evecs = gram_eigh(V)
    sig = np.sqrt(np.maximum(evals[::-1], 0.0))
    evecs = evecs[:, ::-1]
    keep = sig > tau
    if not keep.any():
        return (zero, np.zeros(m)) if above is None else (zero, np.zeros(m), zero)
    if tau < 1e-6 * sig[0]:
        if above is None:
            return prox_trace_svd(V, tau)
        U, sv, Vt = np.linalg.svd(V, full_matrices=False)
        s = np.maximum(sv - tau, 0.0)
        pos, sel = s > 0, s > above
        return (U[:, pos] * s[pos]) @ Vt[pos], s, U[:, sel] @ Vt[sel]
    sig, evecs = sig[keep], evecs[:, keep]
    B = evecs * (1.0 - tau / sig)
    X = (V @ B) @ evecs.T if right else B @ (evecs.T @ V)
    s = np.zeros(m)
    s[:sig.size] = sig - tau
    if above is None:
        return X, s
    sel = sig - tau > above
    E, g = evecs[:, sel], sig[sel]
    # the other side's singular vectors of X are those of V: V v_i / sigma_i (or V^T u_i / sigma_i)
    M = ((V @ E) / g) @ E.T if right else E @ ((E.T @ V) / g[:, None])
    return X, s, M


# ---------------------------------------------------------------------- k-support norm
# Both k-support maps rest on the box-norm variational form (budget k, box [0, 1]):
#     (||w||_k^sp)^2 = min { sum_i w_i^2 / theta_i : 0 < theta_i <= 1, sum_i theta_i <= k }.


def _columns(V, k, who: str) -> tuple[np.ndarray, bool, int]:
    """(V as float64 columns p x m, whether V was 1-d, k as an int >= 1) for the k-support
    functions (one vector is one column)."""
    V = np.asarray(V, dtype=np.float64)
    one_d = V.ndim == 1
    k = int(k)
    if k < 1:
        raise ValueError(f"{who}: k must be >= 1, got {k}")
    return (V[:, None] if one_d else V), one_d, k

def ksupport_sq(V: np.ndarray, k: int) -> np.ndarray | float:
    """(||v||_k^sp)^2 of every column of V (a 1-d V is one vector; returns a float then).

    Argyriou et al. (2012), Prop. 2.1: with z = |v| sorted decreasingly and r in {0, ..., k-1},
    the box-form point theta = 1 on the k-r-1 largest entries and theta_i = (r+1) z_i / T_r on
    the rest (T_r = the sum of the rest) gives the value

        val_r = sum_{i < k-r} z_i^2 + T_r^2 / (r+1)     (1-based indices),

    and is feasible (theta <= 1) iff z_{k-r} <= T_r / (r+1).  Every feasible value is >= the
    norm^2 (it is the box-form objective at a feasible theta) and the optimal theta is one of
    them, so norm^2 = min of val_r over the feasible r (exact ties stay exact: no search for
    the r whose two strict inequalities hold).  k >= len(v) is the squared l2 norm, k = 1 the
    squared l1 norm.  O(p log p) per column."""
    M, one_d, k = _columns(V, k, "ksupport_sq")
    p, m = M.shape
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
    ``lam`` >= 0: a scalar or one value per column (``prox_ksupport_sq_with_value``)."""
    return prox_ksupport_sq_with_value(V, lam, k)[0]


def prox_ksupport_sq_with_value(V: np.ndarray, lam: float | np.ndarray, k: int,
                                out: np.ndarray | None = None
                                ) -> tuple[np.ndarray, np.ndarray | float]:
    """(W, (||W||_k^sp)^2 per column) with W = argmin 1/2 ||W - V||^2 + lam/2 (||W||_k^sp)^2
    column by column; ``lam`` >= 0 a scalar or one value per column; ``out``: an array of V's
    shape to write W into.

    Derivation (box-norm form above): for fixed theta the minimiser is
    w_i = v_i theta_i / (theta_i + lam); what remains is convex in theta and its KKT conditions
    give theta_i = clip(lam (|v_i| / tau - 1), 0, 1) with tau > 0 such that sum_i theta_i = k
    (unless at most k entries are nonzero: then W = V / (1 + lam)).  Substituting theta,

        w_i = sign(v_i) min( |v_i| / (1 + lam), max(|v_i| - tau, 0) )

    (Algorithm 1 of Argyriou et al. 2012).  tau in closed form, with z = |v| sorted decreasingly
    and S_ab = z_{a+1} + ... + z_b:

        tau = min_{a = 0..k-1} max_{b = 1..p} lam S_ab / (k - a + lam |b - a|)

    (the budget sum_i min(1, max(0, lam (z_i / tau - 1))) is a min over a of a max over b of
    brackets increasing in 1/tau; for b <= a the bracket is below the max, so no mask).  No
    segment search, so exact ties and tiny entries are no special case.  The value follows from
    the same theta (saturated entries contribute w_i^2, rising ones w_i tau / lam); columns with
    lam = 0 get W = V and ``ksupport_sq``.  Laid out with the columns last, every numpy call
    runs over contiguous rows; one sort per column and O(k p) arithmetic, in chunks of columns
    that bound the k x p x m temporaries.  Checked against the box-norm problem solved by
    cvxpy, the Fenchel-Young equality and ``ksupport_sq`` (tests)."""
    M, one_d, k = _columns(V, k, "prox_ksupport_sq")
    p, m = M.shape
    lam = np.asarray(lam, dtype=np.float64)
    if lam.shape != (m,):
        lam = np.full(m, float(lam)) if lam.ndim == 0 else np.broadcast_to(lam, (m,))
    if m and float(lam.min()) < 0:
        raise ValueError("prox_ksupport_sq: lam must be >= 0")
    if k >= p or m == 0:                             # the squared l2 norm
        W = np.abs(M) / (1.0 + lam)
        val = np.einsum("ij,ij->j", W, W)
        W *= np.sign(M)
        if out is not None:
            out[...] = W.reshape(out.shape)
            W = out.reshape(M.shape)
        return (W[:, 0], float(val[0])) if one_d else (W, val)
    none = lam == 0
    safe = np.where(none, 1.0, lam) if none.any() else lam
    W = np.empty((p, m)) if out is None else out.reshape(M.shape)
    val = np.empty(m)
    step = max(1, (1 << 20) // (k * p))             # bound the k x p x m temporaries
    for j0 in range(0, m, step):
        j1 = min(m, j0 + step)
        W[:, j0:j1], val[j0:j1] = _ksupport_cols(M[:, j0:j1], safe[j0:j1], k)
    if none.any():
        W[:, none] = M[:, none]
        val[none] = ksupport_sq(M[:, none], k)
    return (W[:, 0], float(val[0])) if one_d else (W, val)


def _ksupport_cols(V: np.ndarray, lam: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The closed form of ``prox_ksupport_sq_with_value`` for p x m columns V with k < p and
    lam > 0 (one value per column)."""
    p, m = V.shape
    A = np.abs(V)
    prefix = np.empty((p + 1, m))                 # row b: z_1 + ... + z_b per column
    prefix[0] = 0.0
    np.cumsum(np.sort(A, axis=0)[::-1], axis=0, out=prefix[1:])
    budget, offset = _bracket_constants(k, p)                            # k - a, |b - a|
    inv_lam = 1.0 / lam
    ratio = prefix[None, 1:, :] - prefix[:k, None, :]                  # S_ab, k x p x m
    ratio /= budget * inv_lam + offset
    tau = ratio.max(axis=1).min(axis=0)
    scaled = A / (1.0 + lam)
    thresholded = A - tau
    saturated = scaled <= thresholded
    np.maximum(thresholded, 0.0, out=thresholded)
    W = np.minimum(scaled, thresholded)
    val = (W * np.where(saturated, W, tau * inv_lam)).sum(axis=0)
    return np.copysign(W, V, out=W), val


@functools.lru_cache(maxsize=64)
def _bracket_constants(k: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(k - a as k x 1 x 1, |b - a| as k x p x 1) for a = 0..k-1, b = 1..p (read-only)."""
    a = np.arange(k)[:, None, None]
    budget = (k - a).astype(np.float64)
    offset = np.abs(np.arange(1, p + 1)[None, :, None] - a).astype(np.float64)
    budget.flags.writeable = False
    offset.flags.writeable = False
    return budget, offset


# ---------------------------------------------------------------------- l_{1,inf}
def l1_ball_threshold_rows(A: np.ndarray, radius: float | np.ndarray) -> np.ndarray:
    """Per row of A >= 0, the threshold t >= 0 of the Euclidean projection onto the l1 ball of
    the given radius (>= 0; a scalar or one per row): the projection is max(A - t, 0).

    With z the row sorted decreasingly and S_j = z_1 + ... + z_j, sum_i max(z_i - t, 0) =
    max_j (S_j - j t), which is >= radius iff t <= max_j (S_j - radius) / j; so
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
    a scalar or one per row).  Radius 0 projects onto {0}."""
    V = np.asarray(V, dtype=np.float64)
    A = np.abs(V)
    return np.sign(V) * np.maximum(A - l1_ball_threshold_rows(A, radius)[:, None], 0.0)


def prox_l1inf_rows(V: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """Penalty sum_i tau_i ||X[i, :]||_inf (``tau`` >= 0, a scalar or one weight per row).

    Moreau decomposition: prox_{tau ||.||_inf}(v) = v - P_{tau B_1}(v), P the projection onto
    the l1 ball of radius tau (the dual-norm ball); as P(v) = sign(v) max(|v| - t, 0), this
    clips every |v_i| at the row's threshold t."""
    V = np.asarray(V, dtype=np.float64)
    A = np.abs(V)
    return np.sign(V) * np.minimum(A, l1_ball_threshold_rows(A, tau)[:, None])


def prox_l1_l1inf_rows(V: np.ndarray, tau1, tau2, out: np.ndarray | None = None) -> np.ndarray:
    """argmin_Z 1/2 ||Z - V||_F^2 + sum_i (tau1_i ||Z[i, :]||_1 + tau2_i ||Z[i, :]||_inf)
    (``tau1``, ``tau2``: scalars or one value per row; ``out``: an array of V's shape for Z).

    The composition prox_{tau2 ||.||_inf} o prox_{tau1 ||.||_1}, row by row.  Valid because soft
    thresholding keeps every sign and the set of entries of largest modulus of a row, so the
    l_inf subdifferential at the thresholded row contains the one at the original row (or the
    row becomes 0, where it is the whole dual ball); by Yu (2013, Thm. 1) the composition is
    then the prox of the sum.  The l_inf step clips the thresholded moduli at the row's l1-ball
    threshold (as ``prox_l1inf_rows``), written out to take the signs once."""
    tau1 = np.asarray(tau1, dtype=np.float64)
    A = np.abs(V) - (tau1[:, None] if tau1.ndim else tau1)
    np.maximum(A, 0.0, out=A)
    return np.multiply(np.sign(V), np.minimum(A, l1_ball_threshold_rows(A, tau2)[:, None]),
                       out=out)


# ---------------------------------------------------------------------- mean regulariser
def prox_mean_reg(V: np.ndarray, tau: float) -> np.ndarray:
    """argmin_X 1/2 ||X - V||_F^2 + tau ||X (I - 11^T/T)||_F^2: keep the column mean of V,
    shrink the deviations from it by 1/(1 + 2 tau)."""
    mean = V.mean(axis=1, keepdims=True)
    return mean + (V - mean) / (1.0 + 2.0 * tau)


class MeanRegL1Rows:
    """The exact minimiser of one row's problem for coordinate descent on the rows of
    J + lam sum_t ||w_t - wbar||^2 + tau ||W||_1 with a squared J:

        argmin_w  1/2 sum_t D_t w_t^2 + c^T w + lam sum_t (w_t - wbar)^2 + tau ||w||_1

    over w in R^T (row i of W: D = D[i] the tasks' curvatures (X_t^T X_t)_ii, c the rest of
    the linear term; D > 0 or lam > 0; lam, tau >= 0; wbar = mean_t w_t).

    As sum_t (w_t - wbar)^2 = min_mu sum_t (w_t - mu)^2, the minimum over w at a fixed mu is
    the soft thresholding w_t(mu) = S(2 lam mu - c_t, tau) / a_t, a_t = D_t + 2 lam, and wbar
    is the root of psi(mu) = mean_t w_t(mu) - mu, piecewise linear and strictly decreasing
    (each w_t has slope k_t = 2 lam / a_t < 1 or 0).  From a guess of the signs of w (a warm
    start: the row's current signs) psi's root on the piece of those signs is taken while the
    signs at that root are the same (then it is psi's root), at most ``ROW_NEWTON`` times;
    else (or without a guess) psi's 2T breakpoints (c_t -+ tau) / (2 lam) are sorted, the
    slope and intercept of sum_t w_t after each one are cumulative sums, and the root is
    solved on the segment where psi changes sign.  With lam = 0 it is the per-entry soft
    thresholding S(-c_t, tau) / D_t."""

    def __init__(self, D: np.ndarray, lam: float, tau: float) -> None:
        self.lam, self.tau = float(lam), float(tau)
        a = np.asarray(D, dtype=np.float64) + 2.0 * self.lam
        # a_t = 0 (lam = 0 and a feature absent from task t): J does not depend on w_t, and
        # c_t = 0 there; w_t = 0 is a minimiser
        self.inv_a = np.divide(1.0, a, out=np.zeros_like(a), where=a > 0)          # (d, T)
        self.k = 2.0 * self.lam * self.inv_a
        self.k_sum = self.k.sum(axis=1)
        self.ta = self.tau * self.inv_a

    def __call__(self, i: int, c: np.ndarray, signs: np.ndarray | None = None) -> np.ndarray:
        """w for row i, linear term c (T,) and a guess of w's signs (-1, 0, +1; T,)."""
        lam, tau, inv_a = self.lam, self.tau, self.inv_a[i]
        if lam <= 0.0:
            return np.sign(-c) * np.maximum(np.abs(c) - tau, 0.0) * inv_a
        T = c.size
        k = self.k[i]
        if signs is not None:
            side, ca, ta = signs, c * inv_a, self.ta[i]
            for _ in range(ROW_NEWTON):
                # on the piece: sum_t w_t = s mu + b, the sides (-1, 0, +1) fixed
                on = side * side
                mu = -float(ca @ on + ta @ side) / (T - float(k @ on))
                u = 2.0 * lam * mu - c
                keep = np.abs(u) > tau
                new = np.copysign(keep, u)          # the sides at mu (-0 == 0)
                if not np.any(new != side):
                    return (u - np.copysign(tau, u)) * keep * inv_a
                side = new
        # below every breakpoint w_t = (2 lam mu - c_t + tau) / a_t; at (c_t - tau) / (2 lam)
        # it becomes 0 (slope -k_t, intercept -(tau - c_t) / a_t), at (c_t + tau) / (2 lam)
        # it leaves 0 (slope +k_t, intercept -(c_t + tau) / a_t)
        E = np.concatenate(((c - tau) / (2.0 * lam), (c + tau) / (2.0 * lam)))
        order = np.argsort(E, kind="stable")
        E = E[order]
        i0 = float(((tau - c) * inv_a).sum())
        slope = np.concatenate((-k, k))[order].cumsum() + self.k_sum[i]
        icpt = np.concatenate(((c - tau) * inv_a, -(c + tau) * inv_a))[order].cumsum() + i0
        psi = (icpt + slope * E) / T - E
        j = int(np.count_nonzero(psi > 0.0))     # psi > 0 left of the root: after E[j-1]
        s0, b0 = (self.k_sum[i], i0) if j == 0 else (slope[j - 1], icpt[j - 1])
        mu = float(b0 / (T - s0))
        u = 2.0 * lam * mu - c
        return np.sign(u) * np.maximum(np.abs(u) - tau, 0.0) * inv_a


#: :class:`MeanRegL1Rows`' root steps from a guess before it sorts the breakpoints.
ROW_NEWTON = 4


def mean_reg_l1_dual_rows(W: np.ndarray, A: np.ndarray, lam: float,
                          tau: float) -> np.ndarray | None:
    """The correction Delta (d x T) of the mean regulariser's dual point in the duality gap of
    J + lam sum_t ||w_t - wbar||^2 + tau ||W||_1 (lam > 0, tau >= 0), row by row:

        argmin_Delta  sum_t W_t Delta_t + Delta_t^2 / (4 lam)
        s.t.          sum_t Delta_t = 0,   |A_t + Delta_t| <= tau,

    A = grad J(W) + grad h(W) (h the mean regulariser).  The dual point grad h(W) + Delta
    keeps zero row sums (where h's conjugate ||V||^2 / (4 lam) is finite) and puts the total
    dual point A + Delta into the l1 dual ball; the gap at it is
    tau ||W||_1 + <W, A> + sum_t (W_t Delta_t + Delta_t^2 / (4 lam)) plus the datafit's
    Fenchel term (``solvers._mean_dual_gap``): where every row of the optimum has zero
    entries strictly inside the ball (they take up the row sum at the cost Delta_t^2 /
    (4 lam) alone), second order in the distance to the optimum, where the scaled dual points
    are first order.  Per row the minimiser is
    Delta_t(nu) = clip(-2 lam (W_t + nu), -tau - A_t, tau - A_t) at the root nu of
    psi(nu) = sum_t Delta_t(nu) (piecewise linear, non-increasing).  Vectorised over the rows
    not yet at their root (|psi| <= ``ROW_ROOT_TOL`` sum_t |Delta_t|): from nu = -wbar
    (Delta = -grad h(W)), at most ``DUAL_ROW_NEWTON`` steps to the root of psi on the current
    piece (its unclipped entries fixed), kept strictly inside the bracket of psi's signs
    (first the outermost breakpoints; bisection otherwise); the rows left get psi's 2T
    breakpoints sorted, the slope and intercept after each one as cumulative sums.  None when
    some row has no feasible Delta (|sum_t A_it| > T tau)."""
    d, T = W.shape
    lo, hi = -tau - A, tau - A
    if not (np.all(lo.sum(axis=1) <= 0.0) and np.all(hi.sum(axis=1) >= 0.0)):
        return None
    if d == 0 or T == 0:
        return np.zeros_like(W)
    k = 2.0 * float(lam)
    nu = -W.mean(axis=1)
    # psi(left) = sum hi >= 0 >= sum lo = psi(right)
    left, right = (-hi / k - W).min(axis=1), (-lo / k - W).max(axis=1)
    rows = np.arange(d)
    for _ in range(DUAL_ROW_NEWTON):
        Wr, lr, hr, nr = W[rows], lo[rows], hi[rows], nu[rows]
        u = -k * (Wr + nr[:, None])
        D = np.clip(u, lr, hr)
        psi = D.sum(axis=1)
        on = np.abs(psi) > ROW_ROOT_TOL * np.abs(D).sum(axis=1)       # not yet the root
        if not on.any():
            rows = rows[:0]
            break
        rows, u, psi, nr = rows[on], u[on], psi[on], nr[on]
        lr, hr = lr[on], hr[on]
        left[rows] = np.where(psi > 0.0, nr, left[rows])
        right[rows] = np.where(psi < 0.0, nr, right[rows])
        nf = np.count_nonzero((u > lr) & (u < hr), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = nr + psi / (k * nf)
        lo_r, hi_r = left[rows], right[rows]
        ok = (nf > 0) & (step > lo_r) & (step < hi_r)
        nu[rows] = np.where(ok, step, 0.5 * (lo_r + hi_r))
    else:
        u = -k * (W[rows] + nu[rows][:, None])
        D = np.clip(u, lo[rows], hi[rows])
        rows = rows[np.abs(D.sum(axis=1)) > ROW_ROOT_TOL * np.abs(D).sum(axis=1)]
    if rows.size:
        nu[rows] = _mean_dual_roots_sorted(W[rows], lo[rows], hi[rows], k)
    return np.clip(-k * (W + nu[:, None]), lo, hi)


def _mean_dual_roots_sorted(W: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                            k: float) -> np.ndarray:
    """The roots nu of psi(nu) = sum_t clip(-k (W_t + nu), lo_t, hi_t) per row (lo <= hi,
    sum lo <= 0 <= sum hi): the 2T breakpoints sorted, slope and intercept after each one
    as cumulative sums."""
    d, T = W.shape
    # Delta_t = hi_t for nu <= a_t, linear between, lo_t for nu >= b_t
    E = np.concatenate((-hi / k - W, -lo / k - W), axis=1)                # (d, 2T)
    dC = np.concatenate((-k * W - hi, k * W + lo), axis=1)
    dK = np.concatenate((np.full((d, T), -k), np.full((d, T), k)), axis=1)
    order = np.argsort(E, axis=1, kind="stable")
    E = np.take_along_axis(E, order, axis=1)
    C = np.take_along_axis(dC, order, axis=1).cumsum(axis=1) + hi.sum(axis=1)[:, None]
    K = np.take_along_axis(dK, order, axis=1).cumsum(axis=1)
    j = np.count_nonzero(C + K * E > 0.0, axis=1)       # the root: after event j - 1
    jm = np.clip(j - 1, 0, 2 * T - 1)[:, None]
    Cj, Kj = np.take_along_axis(C, jm, axis=1)[:, 0], np.take_along_axis(K, jm, axis=1)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((j > 0) & (Kj < 0.0), -Cj / Kj, E[:, 0])


#: :func:`mean_reg_l1_dual_rows`' root steps before it sorts the breakpoints of the rows left.
DUAL_ROW_NEWTON = 12

#: :func:`mean_reg_l1_dual_rows` takes nu as the root where |psi(nu)| <= this x sum_t |Delta_t|
#: (rounding of the sum).
ROW_ROOT_TOL = 1e-13


def mean_reg_penalty(P: np.ndarray) -> float:
    """||P (I - 11^T/T)||_F^2 = sum_t ||p_t - mean_s p_s||^2."""
    D = P - P.mean(axis=1, keepdims=True)
    return float(np.sum(D * D))


# ---------------------------------------------------------------------- co-cluster term
def _top_right_subspace(Q: np.ndarray, k: int) -> tuple[np.ndarray, float, bool]:
    """Orthonormal basis of the top-k singular subspace of Q on its smaller side.

    Returns (B, tail, right): when ``right`` B is T x k with Q B B^T the rank-k truncation of Q,
    else B is d x k with B B^T Q the truncation.  ``tail`` = sum_{i>k} sigma_i(Q)^2
    = ||Q||_F^2 - (sum of the k largest eigenvalues of the smaller Gram matrix), clipped at 0
    (absolute error ~ 1e-15 ||Q||_F^2).  Only the top k eigenpairs are computed (LAPACK MRRR
    with an index subset).  Requires 1 <= k < min(d, T)."""
    d, T = Q.shape
    right = T <= d
    G = Q.T @ Q if right else Q @ Q.T
    m = G.shape[0]
    evals, evecs = eigh(G, subset_by_index=(m - k, m - 1), driver="evr", check_finite=False)
    B = evecs[:, ::-1]
    tail = max(float(np.trace(G)) - float(np.maximum(evals, 0.0).sum()), 0.0)
    return B, tail, right


def top_k_truncation(Q: np.ndarray, k: int) -> np.ndarray:
    """The best rank-k approximation of Q (Eckart-Young), from the top-k eigenpairs of the
    smaller Gram matrix; Q itself when k >= min(d, T)."""
    d, T = Q.shape
    if k >= min(d, T):
        return Q.copy()
    right = T <= d
    G = Q.T @ Q if right else Q @ Q.T
    m = G.shape[0]
    _, B = eigh(G, subset_by_index=(m - k, m - 1), driver="evr", check_finite=False)
    return (Q @ B) @ B.T if right else B @ (B.T @ Q)


def cocluster_penalty(Q: np.ndarray, k: int) -> float:
    """Omega(Q) = sum_{i > k} sigma_i(Q)^2, as ||Q||_F^2 - (sum of the k largest eigenvalues of
    the smaller Gram matrix): absolute error ~ 1e-15 ||Q||_F^2, no SVD."""
    Q = np.asarray(Q, dtype=np.float64)
    k = int(k)
    if k >= min(Q.shape):
        return 0.0
    if k <= 0:
        return float(np.sum(Q * Q))
    return _top_right_subspace(Q, k)[1]


def prox_cocluster(Q: np.ndarray, tau: float, k: int) -> np.ndarray:
    """argmin_X 1/2 ||X - Q||_F^2 + tau Omega(X), Omega(X) = sum_{i = k+1}^{min(d, T)} sigma_i(X)^2.

    Closed form: with Q = U diag(s) V^T,

        X = U diag(s_1, ..., s_k, s_{k+1}/(1 + 2 tau), ..., s_r/(1 + 2 tau)) V^T
          = Q / (1 + 2 tau) + (2 tau / (1 + 2 tau)) * Q V_k V_k^T.

    Omega is unitarily invariant, so (von Neumann) X shares Q's singular vectors;
    Omega(x) = min_{|S| = k} sum_{i not in S} x_i^2, and minimising jointly over S and x gives
    value tau/(1+2tau) * sum_{i not in S} s_i^2, smallest for S = top k (unique when
    s_k > s_{k+1}; with a tie any top-k choice is a minimiser).  Q: (d, T); tau >= 0; k >= 0
    (k >= min(d, T) returns Q unchanged; k = 0 gives Q / (1 + 2 tau)).  Cost: one Gram matrix
    on the smaller side and its top-k eigenpairs."""
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
    return prox_cocluster_with_value(Q, tau, k)[0]


def prox_cocluster_with_value(Q: np.ndarray, tau: float, k: int) -> tuple[np.ndarray, float]:
    """prox_cocluster(Q, tau, k) and Omega of the result (from the same eigen-decomposition)."""
    shrink = 1.0 / (1.0 + 2.0 * tau)
    if k >= min(Q.shape):
        return Q.copy(), 0.0
    if k == 0:
        return Q * shrink, float(np.sum(Q * Q)) * shrink ** 2
    B, tail, right = _top_right_subspace(Q, k)
    top = (Q @ B) @ B.T if right else B @ (B.T @ Q)
    return shrink * Q + (1.0 - shrink) * top, tail * shrink ** 2


def prox_cocluster_with_truncation(Q: np.ndarray, tau: float,
                                   k: int) -> tuple[np.ndarray, float, np.ndarray]:
    """prox_cocluster(Q, tau, k), Omega of the result and its rank-k truncation (the prox keeps
    the top k singular triplets of Q and scales the rest by 1 / (1 + 2 tau), so the truncation
    of the result is that of Q).  Requires 1 <= k < min(Q.shape)."""
    shrink = 1.0 / (1.0 + 2.0 * tau)
    B, tail, right = _top_right_subspace(Q, k)
    top = (Q @ B) @ B.T if right else B @ (B.T @ Q)
    return shrink * Q + (1.0 - shrink) * top, tail * shrink ** 2, top


# ============================================================================ penalty objects
def _scale(lam: float, r: float) -> float:
    """min(1, lam / r): the factor that puts a dual point of dual norm r into the ball of
    radius lam."""
    return lam / r if r > lam else 1.0


class L1:
    """g(W) = lam sum_ij |W_ij|; prox: soft thresholding; dual norm: max_ij |G_ij|."""

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)

    def value(self, W: np.ndarray) -> float:
        return self.lam * float(np.abs(W).sum())

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return prox_l1(V, self.lam / L)

    @staticmethod
    def dual_norm(G: np.ndarray) -> float:
        return float(np.abs(G).max()) if G.size else 0.0

    def dual_scale(self, G: np.ndarray) -> float:
        return _scale(self.lam, self.dual_norm(G))

    def row_dual_ratios(self, G: np.ndarray) -> np.ndarray:
        """max_t |G_it| / lam per row (d,): a zero row of W stays zero under a proximal step
        from gradient G iff its ratio is <= 1 (``BlockCoordinateDescent``'s active rows)."""
        return np.abs(G).max(axis=1, initial=0.0) / self.lam

    @staticmethod
    def dual_norm_per_task(G: np.ndarray) -> np.ndarray:
        """max_i |G_it| per column (T,): the dual norms of the T separate problems."""
        return np.abs(G).max(axis=0) if G.shape[0] else np.zeros(G.shape[1])

    def task_dual_scales(self, G: np.ndarray, shift: np.ndarray | None = None) -> np.ndarray:
        """Per column t the largest s_t <= 1 with |s_t G_it + shift_it| <= lam for every i
        (T,): without ``shift``, min(1, lam / max_i |G_it|), the dual scales of the T separate
        problems (one task each; an all-zero column gets 1); with it (a fixed part of the dual
        point, e.g. a smooth penalty's gradient), nan where no s_t in [0, 1] fits."""
        if shift is None:
            return np.minimum(1.0, self.lam / np.maximum(self.dual_norm_per_task(G), 1e-300))
        lam = self.lam
        # -lam <= s G + b <= lam  <=>  (-lam - b sign G) / |G| <= s <= (lam - b sign G) / |G|
        # where G != 0; where G = 0 it needs |b| <= lam
        A = np.abs(G)
        bs = shift * np.sign(G)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.minimum(((lam - bs) / A).min(axis=0, initial=np.inf), 1.0)
            lo = np.maximum(((-lam - bs) / A).max(axis=0, initial=-np.inf), 0.0)
        bad = np.any((A == 0.0) & (np.abs(shift) > lam), axis=0) | ~(s >= lo)
        return np.where(bad, np.nan, s)


class L21:
    """g(W) = lam sum_i ||W[i, :]||_2 (``groups="rows"``: a feature shared by all tasks or
    none) or lam sum_t ||W[:, t]||_2 (``groups="columns"``: whole tasks switched on or off);
    prox: group shrinkage; dual norm: the largest group's l2 norm."""

    def __init__(self, lam: float, groups: str = "rows") -> None:
        if groups not in ("rows", "columns"):
            raise ValueError(f"L21: groups must be 'rows' or 'columns', got {groups!r}")
        self.lam = float(lam)
        self.groups = groups
        self._axis = 1 if groups == "rows" else 0

    def value(self, W: np.ndarray) -> float:
        return self.lam * np.linalg.norm(W, axis=self._axis).sum()

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        tau = self.lam / L
        return prox_group_rows(V, tau) if self._axis == 1 else prox_group_cols(V, tau)

    def dual_norm(self, G: np.ndarray) -> float:
        return float(np.sqrt((G * G).sum(axis=self._axis).max())) if G.size else 0.0

    def dual_scale(self, G: np.ndarray) -> float:
        return _scale(self.lam, self.dual_norm(G))

    def row_dual_ratios(self, G: np.ndarray) -> np.ndarray:
        """||G[i, :]||_2 / lam per row (d,; ``groups="rows"``): a zero row stays zero under a
        proximal step from gradient G iff its ratio is <= 1."""
        return np.sqrt(np.einsum("it,it->i", G, G)) / self.lam


class L1Inf:
    """g(W) = lam sum_i max_t |W_it| (rows); prox: clipping at the rows' l1-ball thresholds;
    dual norm: max_i ||G[i, :]||_1."""

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)

    def value(self, W: np.ndarray) -> float:
        return self.lam * float(np.abs(W).max(axis=1).sum()) if W.size else 0.0

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return prox_l1inf_rows(V, self.lam / L)

    @staticmethod
    def dual_norm(G: np.ndarray) -> float:
        return float(np.abs(G).sum(axis=1).max()) if G.size else 0.0

    def dual_scale(self, G: np.ndarray) -> float:
        return _scale(self.lam, self.dual_norm(G))

    def row_dual_ratios(self, G: np.ndarray) -> np.ndarray:
        """||G[i, :]||_1 / lam per row (d,): a zero row stays zero under a proximal step from
        gradient G iff its ratio is <= 1."""
        return np.abs(G).sum(axis=1) / self.lam


class Nuclear:
    """g(W) = lam ||W||_* (the trace norm); prox: singular value thresholding
    (:func:`prox_trace`; ``prox_with_value`` reads g at the result from the singular values
    the prox computed, no second decomposition); dual norm: the spectral norm (the largest
    eigenvalue of the smaller Gram matrix)."""

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)

    def value(self, W: np.ndarray) -> float:
        return self.lam * float(_singular_values(W).sum())

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return prox_trace(V, self.lam / L)[0]

    def prox_with_value(self, V: np.ndarray, L: float) -> tuple[np.ndarray, float]:
        X, s = prox_trace(V, self.lam / L)
        return X, self.lam * float(s.sum())

    @staticmethod
    def dual_norm(G: np.ndarray) -> float:
        if G.size == 0:
            return 0.0
        m = min(G.shape)
        top = eigh(smaller_gram(G)[0], subset_by_index=(m - 1, m - 1), eigvals_only=True,
                   driver="evr", check_finite=False)
        return float(np.sqrt(max(float(top[0]), 0.0)))

    def dual_scale(self, G: np.ndarray) -> float:
        return _scale(self.lam, self.dual_norm(G))


class SquaredFrobenius:
    """g(W) = lam/2 ||W||_F^2 (smooth: grad lam W, Lipschitz lam); prox V / (1 + lam/L);
    conjugate g*(V) = ||V||^2 / (2 lam)."""

    def __init__(self, lam: float) -> None:
        self.lam = float(lam)
        self.lipschitz = self.lam

    def value(self, W: np.ndarray) -> float:
        return 0.5 * self.lam * float(np.sum(W * W))

    def grad(self, W: np.ndarray) -> np.ndarray:
        return self.lam * W

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return V / (1.0 + self.lam / L)

    def conjugate(self, V: np.ndarray) -> float:
        return float(np.sum(V * V)) / (2.0 * self.lam) if self.lam > 0 else \
            (0.0 if not np.any(V) else np.inf)


class SquaredKSupport:
    """g(W) = lam sum_t (||w_t||_k^sp)^2, the squared k-support norm of every column (task);
    prox: :func:`prox_ksupport_sq_with_value`; conjugate g*(V) = sum_t ||v_t||_(k)^2 / (4 lam)
    (||.||_(k): the l2 norm of the k largest moduli, the dual of the k-support norm)."""

    def __init__(self, lam: float, k: int) -> None:
        self.lam, self.k = float(lam), int(k)

    def value(self, W: np.ndarray) -> float:
        return self.lam * float(np.sum(ksupport_sq(W, self.k)))

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return prox_ksupport_sq_with_value(V, 2.0 * self.lam / L, self.k)[0]

    def conjugate(self, V: np.ndarray) -> float:
        top = -np.sort(-np.abs(V), axis=0)[:self.k]
        return float(np.sum(top * top)) / (4.0 * self.lam)


class GraphLaplacian:
    """g(W) = lam tr(W L W^T) = lam/2 sum_{s,t} A_st ||w_s - w_t||^2 for the task graph of
    Laplacian L = diag(A 1) - A (T x T, symmetric, A >= 0); smooth: grad 2 lam W L, Lipschitz
    2 lam lambda_max(L); prox (exact, from L's eigen-decomposition U diag(e) U^T):
    X = V U diag(1 / (1 + 2 lam e / L)) U^T."""

    def __init__(self, lam: float, laplacian: np.ndarray) -> None:
        Lg = np.asarray(laplacian, dtype=np.float64)
        if Lg.ndim != 2 or Lg.shape[0] != Lg.shape[1] or not np.allclose(Lg, Lg.T):
            raise ValueError("GraphLaplacian: the Laplacian must be a symmetric T x T matrix")
        self.lam, self.L = float(lam), Lg
        self._e, self._U = np.linalg.eigh(Lg)
        self._e = np.maximum(self._e, 0.0)
        self.lipschitz = 2.0 * self.lam * float(self._e[-1]) if self._e.size else 0.0

    def value(self, W: np.ndarray) -> float:
        return self.lam * float(np.sum((W @ self.L) * W))

    def grad(self, W: np.ndarray) -> np.ndarray:
        return 2.0 * self.lam * (W @ self.L)

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return ((V @ self._U) / (1.0 + 2.0 * self.lam * self._e / L)) @ self._U.T


class MeanRegularised:
    """g(W) = lam sum_t ||w_t - wbar||^2 + lam_mean T ||wbar||^2, wbar = mean_t w_t
    (= lam ||W (I - J)||_F^2 + lam_mean ||W J||_F^2, J = 11^T / T: Evgeniou & Pontil's
    mean-regularised MTL; with lam_mean = 0, CoCMTL's global-similarity term); smooth: grad
    2 lam W (I - J) + 2 lam_mean W J, Lipschitz 2 max(lam, lam_mean); prox: the column mean
    and the deviations from it shrunk apart (:func:`prox_mean_reg` when lam_mean = 0);
    conjugate g*(V) = ||V (I - J)||^2 / (4 lam) + ||V J||^2 / (4 lam_mean), an attribute only
    when both weights are > 0 (finite everywhere: a duality gap, ``solvers.duality_gap``)."""

    def __init__(self, lam: float, lam_mean: float = 0.0) -> None:
        self.lam, self.lam_mean = float(lam), float(lam_mean)
        self.lipschitz = 2.0 * max(self.lam, self.lam_mean)
        if self.lam > 0 and self.lam_mean > 0:
            self.conjugate = self._conjugate

    def value(self, W: np.ndarray) -> float:
        if self.lam_mean == 0:
            return self.lam * mean_reg_penalty(W)
        m = W.mean(axis=1)
        return self.lam * mean_reg_penalty(W) + self.lam_mean * W.shape[1] * float(m @ m)

    def grad(self, W: np.ndarray) -> np.ndarray:
        mean = W.sum(axis=1, keepdims=True) / W.shape[1]       # W.mean(1), fewer passes
        if self.lam_mean == 0:
            return 2.0 * self.lam * (W - mean)
        return 2.0 * self.lam * (W - mean) + 2.0 * self.lam_mean * mean

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        if self.lam_mean == 0:
            return prox_mean_reg(V, self.lam / L)
        mean = V.mean(axis=1, keepdims=True)
        return mean / (1.0 + 2.0 * self.lam_mean / L) + (V - mean) / (1.0 + 2.0 * self.lam / L)

    def _conjugate(self, V: np.ndarray) -> float:
        mean = V.mean(axis=1, keepdims=True)
        dev, along = float(np.sum((V - mean) ** 2)), V.shape[1] * float(np.sum(mean * mean))
        return dev / (4.0 * self.lam) + along / (4.0 * self.lam_mean)


class CoCluster:
    """g(W) = lam sum_{i > k} sigma_i(W)^2, CoCMTL's co-cluster term (non-convex: zero iff
    rank W <= k); prox: :func:`prox_cocluster` (closed form); no dual norm."""

    def __init__(self, lam: float, k: int) -> None:
        self.lam, self.k = float(lam), int(k)

    def value(self, W: np.ndarray) -> float:
        return self.lam * cocluster_penalty(W, self.k)

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return prox_cocluster(V, self.lam / L, self.k)


def cluster_relaxation_weights(s: np.ndarray, eta: float, k: float) -> np.ndarray:
    """argmin_m sum_i s_i / (eta + m_i) over 0 <= m_i <= 1, sum_i m_i = k (s >= 0, eta > 0,
    0 < k <= len(s)): the eigenvalues of the optimal M of the clustered-MTL relaxation, in the
    eigenbasis of W^T W (eigenvalues s).

    KKT: m_i = clip(u sqrt(s_i) - eta, 0, 1) with u = 1/sqrt(nu) > 0 such that sum_i m_i = k;
    g(u) = sum_i m_i(u) is continuous, nondecreasing and linear between the breakpoints
    eta / sqrt(s_i), (1 + eta) / sqrt(s_i), so u is found exactly: g at every breakpoint, then
    the linear piece that crosses k (no iteration).  The piece is located on the sorted
    breakpoints by the cumulative slopes (O(p log p)) and its two ends are evaluated exactly
    (moved while rounding of the cumulative sums placed them on the wrong side of k).  When at
    most k of the s_i are > 0 they get m_i = 1 and the rest of the budget goes to the zero ones
    equally (their m does not change the value)."""
    s = np.maximum(np.asarray(s, dtype=np.float64), 0.0)
    r = np.sqrt(s)
    pos = r > 0
    m = np.zeros_like(r)
    if np.count_nonzero(pos) <= k:
        m[pos] = 1.0
        if np.count_nonzero(~pos):
            m[~pos] = (k - np.count_nonzero(pos)) / np.count_nonzero(~pos)
        return m
    rp = r[pos]
    g = lambda u: float(np.clip(u * rp - eta, 0.0, 1.0).sum())
    br = np.concatenate([eta / rp, (1.0 + eta) / rp])
    order = np.argsort(br, kind="stable")
    br = br[order]
    slope = np.cumsum(np.concatenate([rp, -rp])[order])   # g's slope right of each breakpoint
    approx = np.zeros(br.size)
    np.cumsum(slope[:-1] * np.diff(br), out=approx[1:])   # g at the breakpoints
    # j: the first breakpoint with g >= k (g(br[-1]) = #pos > k), the ends checked exactly
    j = min(int(np.searchsorted(approx, k)), br.size - 1)
    while j > 0 and g(br[j - 1]) >= k:
        j -= 1
    while g(br[j]) < k:
        j += 1
    gj = g(br[j])
    if gj == k or j == 0:
        u = br[j]
    else:                                    # g(br[j - 1]) < k <= gj, so br[j - 1] < br[j]
        g0 = g(br[j - 1])
        u = br[j - 1] + (k - g0) * (br[j] - br[j - 1]) / (gj - g0)
    m[pos] = np.clip(u * rp - eta, 0.0, 1.0)
    return m


class ClusterRelaxation:
    """g(W) = min_M c tr(W (eta I + M)^{-1} W^T) over {M : 0 <= M <= I, tr M = k} (T x T),
    eta = rho2 / rho1, c = rho1 eta (1 + eta): the convex relaxation of clustered MTL (Zhou,
    Chen & Ye, NIPS 2011; MALSAR ``Least_CMTL``).  For M a rank-k projection P the term is
    rho1 tr(W (I - P) W^T) + rho2 ||W||_F^2 (k clusters' spread plus a ridge).

    Closed form in W (convex: a partial minimum of a jointly convex function; 2-homogeneous):
    the optimal M shares the eigenvectors U of W^T W (eigenvalues s, von Neumann's trace
    inequality, 1/(eta + m) decreasing in m) with eigenvalues
    m = :func:`cluster_relaxation_weights` (s, eta, k), so g(W) = c sum_i s_i / (eta + m_i);
    grad g(W) = 2 c W U diag(1 / (eta + m)) U^T (Danskin), Lipschitz 2 c / eta.
    prox (exact): the same minimisation over M after minimising over X in closed form,
    argmin_X L/2 ||X - V||^2 + c tr(X A X^T) = L V (L I + 2 c A)^{-1}, A = (eta I + M)^{-1},
    leaves sum_i s_i c / (eta + 2c/L + m_i) (s: eigenvalues of V^T V): m from
    ``cluster_relaxation_weights`` with eta + 2c/L, then X = V U diag((eta + m) / (eta + m +
    2c/L)) U^T.  Conjugate: g* = max over M of the quadratics' conjugates,
    g*(V) = (eta ||V||_F^2 + the sum of the k largest eigenvalues of V^T V (the fraction of
    the next for a fractional k)) / (4 c).  Every map uses the eigen-decomposition of the
    smaller Gram matrix (d x d when d < T: the eigenvalues of W^T W beyond d are 0), the
    conjugate only its ceil(k) largest eigenvalues."""

    def __init__(self, rho1: float, rho2: float, k: float) -> None:
        self.rho1, self.rho2, self.k = float(rho1), float(rho2), float(k)
        if not (self.rho1 > 0 and self.rho2 > 0 and self.k > 0):
            raise ValueError("ClusterRelaxation: rho1, rho2 and k must be > 0")
        self.eta = self.rho2 / self.rho1
        self.c = self.rho1 * self.eta * (1.0 + self.eta)
        self.lipschitz = 2.0 * self.c / self.eta

    def _spectrum(self, W: np.ndarray):
        """(s: the T eigenvalues of W^T W, E: eigenvectors of the smaller Gram, right): when
        ``right`` E is T x T (of W^T W), else d x d (of W W^T; s padded with zeros)."""
        G, right = smaller_gram(W)
        evals, E = eigh(G, driver="evd", check_finite=False)
        s = np.zeros(W.shape[1])
        s[:evals.size] = np.maximum(evals, 0.0)
        return s, E, right

    def _check_k(self, T: int) -> None:
        if self.k > T:
            raise ValueError(f"ClusterRelaxation: k = {self.k:g} exceeds the number of tasks {T}")

    def value(self, W: np.ndarray) -> float:
        self._check_k(W.shape[1])
        return self._value_of_spectrum(self._spectrum(W)[0])

    def _value_of_spectrum(self, s: np.ndarray) -> float:
        return self.c * float(np.sum(s / (self.eta + cluster_relaxation_weights(s, self.eta,
                                                                                self.k))))

    def _apply(self, V: np.ndarray, eta: float, scale) -> tuple[np.ndarray, np.ndarray]:
        """(V U diag(f) U^T, the eigenvalues of its X^T X), f = scale(m) with m the weights
        at ``eta`` (on the smaller side; X^T X = U diag(f^2 s) U^T in V's eigenbasis)."""
        self._check_k(V.shape[1])
        s, E, right = self._spectrum(V)
        f = scale(cluster_relaxation_weights(s, eta, self.k))
        if right:
            X = (V @ E * f) @ E.T
        else:
            X = (E * f[:E.shape[0]]) @ (E.T @ V)
        return X, s * f * f

    def grad(self, W: np.ndarray) -> np.ndarray:
        return self._apply(W, self.eta, lambda m: 2.0 * self.c / (self.eta + m))[0]

    def value_and_grad(self, W: np.ndarray) -> tuple[float, np.ndarray]:
        """(g(W), grad g(W)) from one eigen-decomposition: g(W) = 1/2 <W, grad g(W)> (at the
        optimal M, g is the quadratic c tr(W A W^T) whose gradient is grad g)."""
        G = self.grad(W)
        return 0.5 * float(np.sum(W * G)), G

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return self.prox_with_value(V, L)[0]

    def prox_with_value(self, V: np.ndarray, L: float) -> tuple[np.ndarray, float]:
        """(prox(V), g(prox(V))): the value from the output's spectrum, f^2 s, without a second
        eigen-decomposition."""
        extra = 2.0 * self.c / L
        X, sx = self._apply(V, self.eta + extra,
                            lambda m: (self.eta + m) / (self.eta + m + extra))
        return X, self._value_of_spectrum(sx)

    def conjugate(self, V: np.ndarray) -> float:
        """From the ceil(k) largest eigenvalues of the smaller Gram matrix only (LAPACK's MRRR
        with an index range) and ||V||_F^2."""
        self._check_k(V.shape[1])
        G, _ = smaller_gram(V)
        n, q = G.shape[0], int(np.ceil(self.k))
        top = np.zeros(q)
        top[:min(q, n)] = np.maximum(eigh(G, eigvals_only=True, driver="evr",
                                          subset_by_index=(max(n - q, 0), n - 1),
                                          check_finite=False)[::-1], 0.0)
        whole = int(np.floor(self.k))
        best = float(top[:whole].sum()) + (self.k - whole) * (float(top[whole])
                                                              if whole < q else 0.0)
        return (self.eta * float(np.trace(G)) + best) / (4.0 * self.c)


class L1PlusL1Inf:
    """g(W) = lam1 ||W||_1 + lam2 sum_i max_t |W_it| (VSTG-MTL's variable selection);
    prox: :func:`prox_l1_l1inf_rows` (the composition, exact)."""

    def __init__(self, lam1: float, lam2: float) -> None:
        self.lam1, self.lam2 = float(lam1), float(lam2)

    def value(self, W: np.ndarray) -> float:
        A = np.abs(W)
        return self.lam1 * float(A.sum()) + self.lam2 * float(A.max(axis=1).sum())

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return prox_l1_l1inf_rows(V, self.lam1 / L, self.lam2 / L)



def project_l1_box_rows(V: np.ndarray, radius: float, box: float) -> np.ndarray:
    """Euclidean projection of every row of V onto {u : ||u||_1 <= radius, ||u||_inf <= box}
    (radius, box >= 0): u = sign(v) min(max(|v| - t, 0), box), t >= 0 the smallest threshold
    with sum_j min(max(|v_j| - t, 0), box) <= radius (that sum is piecewise linear and
    decreasing in t, with breakpoints |v_j| and |v_j| - box: sorted, it is evaluated at every
    breakpoint by cumulative sums and t interpolated on the segment that crosses the radius)."""
    V = np.asarray(V, dtype=np.float64)
    A = np.abs(V)
    U = np.minimum(A, box)
    need = np.flatnonzero(U.sum(axis=1) > radius)    # rows the box alone does not project
    if need.size:
        U[need] = _l1_box_moduli(A[need], radius, box)
    return np.sign(V) * U


def _l1_box_moduli(A: np.ndarray, radius: float, box: float) -> np.ndarray:
    """min(max(A - t, 0), box) per row of A >= 0 with t > 0 the threshold of
    :func:`project_l1_box_rows` (rows whose clipped sum exceeds the radius)."""
    d, m = A.shape
    # breakpoints in decreasing order; passing |v_j| an entry starts to count (+1), passing
    # |v_j| - box it saturates (-1)
    E = np.concatenate([A, A - box], axis=1)
    order = np.argsort(-E, axis=1)
    E = np.take_along_axis(E, order, axis=1)
    active = np.cumsum(np.where(order < m, 1.0, -1.0), axis=1)   # after each breakpoint
    # phi at the breakpoints: phi(E_0) = 0, phi(E_{k+1}) = phi(E_k) + active_k (E_k - E_{k+1})
    phi = np.zeros((d, 2 * m))
    np.cumsum(active[:, :-1] * (E[:, :-1] - E[:, 1:]), axis=1, out=phi[:, 1:])
    k = (phi <= radius).sum(axis=1) - 1              # the last breakpoint below the radius
    rows = np.arange(d)
    Ek, act = E[rows, k], active[rows, k]
    t = np.where(act > 0, Ek - (radius - phi[rows, k]) / np.maximum(act, 1.0), Ek)
    return np.minimum(np.maximum(A - np.maximum(t, 0.0)[:, None], 0.0), box)


class L1InfConvL1:
    """g(W) = min_{P + Q = W} lam1 ||P||_{1,inf} + lam2 ||Q||_1, the infimal convolution of
    the dirty model's two norms (a norm separating over the rows).  Row by row the inner
    minimum is attained at P = sign(w) min(|w|, c), Q = w - P with c the k-th largest |w_t|,
    k = ceil(lam1 / lam2) (c = 0 when k > T: P = 0; k = 1: Q = 0), as the piecewise linear
    lam1 c + lam2 sum_t (|w_t| - c)_+ has slope lam1 - lam2 #{t : |w_t| > c} (:meth:`split`).
    The conjugate is the indicator of the intersection of the dual balls {max_i ||G[i, :]||_1
    <= lam1} and {max |G| <= lam2}; prox (Moreau): V - the projection onto lam1 / L, lam2 / L
    of that set (:func:`project_l1_box_rows`).  ``dual_scale``: min(1, lam1 / max_i
    ||G[i, :]||_1, lam2 / max |G|)."""

    def __init__(self, lam1: float, lam2: float) -> None:
        self.lam1, self.lam2 = float(lam1), float(lam2)

    def split(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(P, Q) with P + Q = W attaining the infimum (row-shared clipping level c)."""
        W = np.asarray(W, dtype=np.float64)
        A = np.abs(W)
        T = W.shape[1]
        if self.lam2 <= 0.0 or T == 0:
            return np.zeros_like(W), W.copy()
        k = int(np.ceil(self.lam1 / self.lam2 - 1e-12)) if self.lam1 > 0 else 0
        if k > T or k <= 0:
            c = np.zeros(W.shape[0]) if k > T else A.max(axis=1, initial=0.0)
        else:
            c = -np.partition(-A, k - 1, axis=1)[:, k - 1]
        P = np.sign(W) * np.minimum(A, c[:, None])
        return P, W - P

    def value(self, W: np.ndarray) -> float:
        if W.size == 0:
            return 0.0
        P, Q = self.split(W)
        return self.lam1 * float(np.abs(P).max(axis=1).sum()) + self.lam2 * float(
            np.abs(Q).sum())

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return V - project_l1_box_rows(V, self.lam1 / L, self.lam2 / L)

    def prox_with_value(self, V: np.ndarray, L: float) -> tuple[np.ndarray, float]:
        """(prox(V), g(prox(V))): g is the support function of the dual set C, and
        L (V - X) = L P_{C/L}(V) is a subgradient of g at X = prox(V), so g(X) = L <P, X>
        (a sum of non-negative terms: P and X share their signs entrywise)."""
        P = project_l1_box_rows(V, self.lam1 / L, self.lam2 / L)
        X = V - P
        return X, L * float(np.vdot(P, X))

    def dual_scale(self, G: np.ndarray) -> float:
        return min(_scale(self.lam1, L1Inf.dual_norm(G)), _scale(self.lam2, L1.dual_norm(G)))

    def row_dual_ratios(self, G: np.ndarray) -> np.ndarray:
        """max(||G[i, :]||_1 / lam1, max_t |G_it| / lam2) per row (d,): the row's gauge of the
        dual set; a zero row stays zero under a proximal step from gradient G iff its ratio
        is <= 1."""
        A = np.abs(G)
        return np.maximum(A.sum(axis=1) / self.lam1, A.max(axis=1, initial=0.0) / self.lam2)


class BlockSum:
    """sum_b g_b(X_b) over a stacked variable X (B x d x T) whose model is W = sum_b X_b (the
    decomposition models: rMTFL's P + Q, dirty models); prox block by block.  For norms
    g_b = lam_b ||.||_b the conjugate of the infimal convolution over W = sum_b X_b is the
    indicator of the intersection of the dual balls, so ``dual_scale`` is the smallest of the
    blocks' (the scaled dual point must lie in every ball)."""

    def __init__(self, *blocks) -> None:
        self.blocks = blocks

    def value(self, X: np.ndarray) -> float:
        return float(sum(g.value(x) for g, x in zip(self.blocks, X)))

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return np.stack([g.prox(v, L) for g, v in zip(self.blocks, V)])

    def dual_scale(self, G: np.ndarray) -> float:
        return min(g.dual_scale(G) for g in self.blocks)


# ---------------------------------------------------------------------- squared trace norm
def _singular_values(V: np.ndarray) -> np.ndarray:
    """The singular values of V, descending (LAPACK, no vectors: absolute accuracy ~1e-16
    sigma_1, which sums of them need; a Gram matrix's eigenvalues give ~1e-8 sigma_1)."""
    if V.size == 0:
        return np.zeros(0)
    return np.linalg.svd(V, compute_uv=False)


def squared_l1_threshold(s: np.ndarray, a: float, b: float) -> float:
    """For s >= 0 sorted decreasingly, a > 0, b >= 0: the threshold c >= 0 of the maximiser
    x = max(s - c, 0) / a of <s, x> - a/2 ||x||^2 - b/2 (sum_i x_i)^2 over x >= 0.

    Its optimality conditions are a x_i = max(s_i - b S, 0), S = sum_i x_i; with the j largest
    entries active, S = (s_1 + ... + s_j) / (a + j b), and the active set is the largest j with
    s_j > b S_j (the condition holds on a prefix); c = b S."""
    if s.size == 0 or s[0] <= 0 or b == 0:
        return 0.0
    j = np.arange(1, s.size + 1)
    S = np.cumsum(s) / (a + j * b)
    active = np.flatnonzero(s > b * S)
    return float(b * S[active[-1]])


class SquaredNuclear:
    """g(W) = lam/2 ||W||_*^2 + ridge/2 ||W||_F^2 (the squared trace norm, plus a ridge).

    A spectral function h(sigma(W)), h(x) = lam/2 ||x||_1^2 + ridge/2 ||x||^2 (absolutely
    symmetric), so its prox and conjugate act on the singular values (Lewis 1995):
    prox(V, L) = L/(L + ridge) * SVT(V, c) (singular value thresholding, :func:`prox_trace`)
    with c = :func:`squared_l1_threshold` (L s, L + ridge, lam) / L on the singular values s
    of V; conjugate g*(V) = h*(sigma(V)), the maximum of <z, x> - h(x) over x >= 0 at
    x = max(z - c, 0) / ridge (c from the same threshold), or ||V||_2^2 / (2 lam) when
    ridge = 0.  min over Omega > 0 with tr(Omega) = 1 of tr(W Omega^{-1} W^T) is ||W||_*^2
    (at Omega = (W^T W)^{1/2} / tr((W^T W)^{1/2})), so lam/2 ||W||_*^2 is the task-covariance
    penalty of MTRL with the covariance minimised out."""

    def __init__(self, lam: float, ridge: float = 0.0) -> None:
        self.lam, self.ridge = float(lam), float(ridge)
        if not (self.lam >= 0 and self.ridge >= 0 and self.lam + self.ridge > 0):
            raise ValueError("SquaredNuclear: lam and ridge must be >= 0, not both 0")

    def value(self, W: np.ndarray) -> float:
        s = _singular_values(W)
        return 0.5 * self.lam * float(s.sum()) ** 2 + 0.5 * self.ridge * float(np.sum(W * W))

    def prox(self, V: np.ndarray, L: float) -> np.ndarray:
        return self.prox_with_value(V, L)[0]

    def prox_with_value(self, V: np.ndarray, L: float) -> tuple[np.ndarray, float]:
        """(prox(V, L), g there): one eigen-decomposition of V's smaller Gram matrix gives
        the singular values s of V (for the threshold c) and the thresholding; g of the
        result from its singular values L/(L + ridge) max(s - c, 0)."""
        if V.size == 0:
            return np.zeros_like(V), 0.0
        evals, evecs = gram_eigh(V)
        s = np.sqrt(np.maximum(evals[::-1], 0.0))
        c = squared_l1_threshold(L * s, L + self.ridge, self.lam) / L
        X, sx = prox_trace(V, c, gram_eig=(evals, evecs))
        a = L / (L + self.ridge)
        sx = a * sx
        return a * X, 0.5 * self.lam * float(sx.sum()) ** 2 + 0.5 * self.ridge * float(sx @ sx)

    def conjugate(self, V: np.ndarray) -> float:
        z = _singular_values(V)
        if z.size == 0:
            return 0.0
        if self.ridge == 0:
            return float(z[0]) ** 2 / (2.0 * self.lam)
        c = squared_l1_threshold(z, self.ridge, self.lam)
        x = np.maximum(z - c, 0.0) / self.ridge
        return float(z @ x - 0.5 * self.ridge * (x @ x) - 0.5 * self.lam * x.sum() ** 2)
