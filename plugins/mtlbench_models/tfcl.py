"""TFCL: Task-Feature Collaborative Learning, the base model (problem P, Alg. 1).

Yang, Xu, Cao, He, Huang, "Learning Personalized Attribute Preference via Multi-task AUC
Optimization" / "Task-Feature Collaborative Learning with Application to Personalized
Attribute Prediction", IEEE TPAMI (``shared/paper/tfcl-tpami.tex``).

Objective (problem (P), Sec. "Task-Feature Collaborative Learning: The General Framework")::

    min_{W, U in Gamma}  J(W) + alpha_1 <L(W), U> + alpha_2/2 ||W||_F^2
    Gamma = {U symmetric, 0 <= U <= I, tr U = k}

with L(W) = [[diag(|W| 1), -|W|], [-|W|^T, diag(|W|^T 1)]] the Laplacian of the bipartite
feature-task graph (N = d + T nodes; features first).  By Thm. eig,
min_U <L, U> = sum of the k smallest eigenvalues of L.

Loss J (hyperparameter ``loss``):
  * ``"auc"`` (default) -- the paper's squared pairwise AUC surrogate, per user
    l_t = 1/2 r^T L_AUC r, r = X_t w_t - ytil (eq. loss_eve/grad_eve; see
    ``_losses.SquaredAUCLoss`` for the factor 1/2);
  * ``"squared"`` -- the instance-wise loss sum_t 1/2 ||y_t - X_t w_t||^2 of the paper's
    Experimental Settings (registered as ``tfcl-noauc``: the "TFCL w/o AUC loss" row).

Solver (Alg. 1), one U-step and one proximal W-step per iteration:

  * U-step (Thm. eigsol, alpha_3 = 0 closed form): U = V diag(c) V^T over the q smallest
    eigenpairs of L(W^{t-1}), c_i = 1 (i <= p), (k-p)/(q-p) (p < i <= q), 0 after, where
    p = #{lambda_i < lambda_k}, q = #{lambda_i <= lambda_k}, ties decided with the explicit
    tolerance ``eig_rtol * 2 max_degree`` (2 max_degree >= lambda_max).  Every case of the
    proof of Thm. eigsol (Appendix A) is covered: 1 (simple k-th gap), 2a, 2b (zero
    eigenvalue of multiplicity >= k, i.e. >= k connected components) and 2c (lambda_k equal
    to all larger eigenvalues); 2d is L = 0 (W = 0), where U = (k/N) I.
    How: the zero eigenspace is spanned exactly by the indicator vectors of connected
    components (scipy.sparse.csgraph), never computed numerically; L is block diagonal over
    components, and for each component only its few smallest non-zero eigenpairs are
    computed: dense ``eigh`` for small components, otherwise ARPACK in shift-invert mode
    where (L - sigma I)^{-1} is applied through the Schur complement on the smaller side
    of the bipartite graph (the other block of L - sigma I is diagonal), i.e. one
    min(d,T)^2 x max(d,T) factorisation and O(nnz(W) + min(d,T)^2) per solve; the start
    vector is warm-started from the previous iteration's eigenvectors.  Each computed pair
    is Rayleigh-Ritz refined and its residual checked (fallback: dense eigh of the
    component).  U is never formed: U = c0 P0 + V1 diag(c1) V1^T (P0: projector onto the
    component indicators).
  * W-step (Prop. sol): W~ = W - grad J(W) / C,
    W = sign(W~) max(|W~| / (1 + alpha_2/C) - alpha_1/(C + alpha_2) D, 0),
    D_ij = U_ii + U_{d+j,d+j} - 2 U_{i,d+j} (the whole U, all q eigenvectors with weights c);
    C = ``c_factor`` x (Lipschitz constant of grad J), c_factor > 1.

Recorded every iteration: F(W^t, U^t) = J(W^t) + alpha_1 <L(W^t), U^t> + alpha_2/2||W^t||^2
(``objective_history_``; <L(W), U> = sum_ij |W_ij| D_ij), which is non-increasing:
U^t minimises F(W^{t-1}, .) and the W-step is a majorise-minimise step for C > Lipschitz.
Also ``w_change_history_`` (||W^t - W^{t-1}||_F), ``u_change_history_`` (||U^t - U^{t-1}||_F,
computed from the factors) and ``embeddings_`` (the spectral embeddings f_1..f_N, rows of
V_{1:k}, of the first 5 iterations, for the paper's Fig. "Evolution of Spectral Embeddings").

Stopping rule: stop when |F^t - F^{t-1}| <= tol max(1, |F^t|) and
||W^t - W^{t-1}||_F <= sqrt(tol) max(1, ||W^t||_F), or after ``max_iter`` iterations.

Hyperparameter names -> paper symbols (problem (P), Alg. 1), up to the data scale below:
    lam_group = alpha_1 (weight of <L(W), U>), lam_ridge = alpha_2, k = k;
    alpha_3 of (P*) is not a parameter: any 0 <= alpha_3/(2C) < eigengap gives the same U
    (Thm. eigsol), so the alpha_3 = 0 closed form is used.
For TFCL-Q (``tfcl_q.py``) the same names are used: lam_group is alpha_2 of (Q) but alpha_1
of Thm. conv_app / Alg. 2, lam_ridge is alpha_3 of (Q) but alpha_2 of Thm. conv_app, etc.
(see that module).

Hyperparameter scales (``lam_scale``).  With ``lam_scale="absolute"`` lam_group and lam_ridge
are the paper's alpha_1, alpha_2.  With ``lam_scale="data"`` (the default, used by the grids)
they are multiples of scales computed from the training data, so one grid serves both losses
and any data set:

    alpha_1 = lam_group * lambda_max,  lambda_max = (d + T) ||grad J(0)||_inf / (2k)
    alpha_2 = lam_ridge * Lipschitz(grad J)

lambda_max is the weight at which the first W-step from W^0 = 0 (U^0 = (k/N) I, D = 2k/N)
leaves W = 0, so lam_group in (0, 1) spans "everything zero" to "no co-grouping".  The
values used are stored as ``alpha_group_``, ``alpha_ridge_`` (and in ``diagnostics_``), and
``objective_history_`` is the (P) objective with these alphas.  The squared loss needs
alphas ~50x larger than the AUC loss on the simulated data (its gradient and curvature are
larger); the data scale absorbs that.

Warm starts.  ``fit(tasks, init=prev)`` reuses only the previous fit's eigenvectors as
Lanczos start vectors of the U-step; W always starts at 0.  (P) is non-convex: warm-starting
W along the grid made the solution depend on the path (on the simulated data lam_group = 0.1
reached the true blocks when reached from 0.3 but not from 0.6 or from 0), while the
protocol's final refit on train+validation starts cold -- validation would then score a
different model from the one tested.

Default grids (``GRID_TFCL``, ``GRID_TFCL_NOAUC``; lam_ridge fixed at 1e-3, k = 5 = the
number of blocks in the simulated data) and how they were chosen: on the simulated data
(generator seed 0) with a split of the common protocol at protocol seed 99 (not one of the
seeds of the reported runs), every model was fitted on the training part and scored by mean
validation AUC only (test data never looked at).  Validation AUC, cold starts:
  tfcl:       lam_group 0.6: 67.2, 0.5: 75.2, 0.4: 81.5, 0.3: 97.9, 0.2: 97.9, 0.15: 97.9,
              0.1: 87.7, 0.03: 82.8 (lam_ridge 1e-4, 1e-3, 1e-2 within 0.03 of each other at
              0.3, so lam_ridge is not searched);
  tfcl-noauc: lam_group 0.6: 68.3, 0.5: 75.6, 0.45: 75.7, 0.4: 94.2, 0.35: 93.5, 0.3: 86.2,
              0.25: 80.3, 0.2: 76.4, 0.1: 76.2 -- a narrow window, hence the fine grid.
Each grid brackets its validation optimum with worse points on both sides, so selection does
not sit on an edge on that split.

Groups (``feature_groups_``, ``task_groups_``): k-means (k clusters, 10 restarts, fixed seed)
on the row-normalised spectral embedding of the final L(W) (component indicators first,
largest components first, then the smallest non-zero eigenvectors, k columns in all);
isolated nodes (an all-zero row/column of W) are labelled -1.

Not verifiable from the paper: the initial W^0 (we use W^0 = 0, so the first U is (k/N) I and
the first step is a uniform soft-threshold), the value of C (only C > rho is required), the
stopping rule (tol = 1e-6, max_iter = 200 by default) and the paper's hyperparameter grid.
Thm. eigsol's statement leaves p undefined when lambda_1 = ... = lambda_k
(with lambda_0 = 0); we use p = 0 there, which is the proof's case 2b.

Also: the ``check-ustep`` CLI command (``mtlbench check-ustep``) cross-checks the closed-form
U-step against an SDP solved by cvxpy.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

from threadpoolctl import threadpool_limits

from mtlbench import Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl
from mtlbench.model import param_problems

from ._losses import SquaredAUCLoss, SquaredLoss

__all__ = [
    "UStep", "ustep", "ustep_dense", "bipartite_laplacian", "tfcl_wstep", "ustep_weights",
    "TFCL", "TFCLNoAUC", "ustep_case",
]

DEFAULT_EIG_RTOL = 1e-8
# Declared search spaces (lam_scale="data": multiples of data-derived scales; bounds and the
# design of the starting grids: module docstring, "Search spaces").
SPACE_TFCL = {
    "lam_group": Log([0.02, 0.05, 0.12], low=0.0, high=0.5),
    "k": Int([2, 4, 8], low=2),
    "lam_ridge": Log([1e-3], low=0.0),
}
SPACE_TFCL_NOAUC = {
    "lam_group": Log([0.02, 0.05, 0.12], low=0.0, high=0.5),
    "k": Int([2, 4, 8], low=2),
    "lam_ridge": Log([1e-3], low=0.0),
}
_DENSE_COMPONENT = 300     # components up to this many nodes: dense eigh
_N_EMBED_ITERS = 5


# ----------------------------------------------------------------------------- graph
def bipartite_laplacian(W: np.ndarray) -> np.ndarray:
    """Dense L(W) = diag(A 1) - A, A = [[0, |W|], [|W|^T, 0]] (features first). Tests only."""
    A = np.abs(np.asarray(W, dtype=np.float64))
    d, T = A.shape
    L = np.zeros((d + T, d + T))
    L[:d, d:] = -A
    L[d:, :d] = -A.T
    L[np.arange(d), np.arange(d)] = A.sum(1)
    L[np.arange(d, d + T), np.arange(d, d + T)] = A.sum(0)
    return L


def ustep_weights(lams: np.ndarray, k: int, tol: float) -> tuple[np.ndarray, int, int]:
    """Thm. eigsol weights for ascending eigenvalues ``lams`` (at least the q smallest).

    p = #{lambda_i < lambda_k - tol}, q = #{lambda_i <= lambda_k + tol};
    c_i = 1 for i <= p, (k - p)/(q - p) for p < i <= q, 0 otherwise.
    """
    lams = np.asarray(lams, dtype=np.float64)
    lk = lams[k - 1]
    p = int(np.count_nonzero(lams < lk - tol))
    q = int(np.count_nonzero(lams <= lk + tol))
    c = np.zeros(lams.shape[0])
    c[:p] = 1.0
    c[p:q] = (k - p) / (q - p)
    return c, p, q


def ustep_case(p: int, q: int, k: int, N: int) -> str:
    """Name of the case of the proof of Thm. eigsol (Appendix A) that (p, q) falls in."""
    if p == k - 1 and q == k:
        return "1"
    if p == 0 and q == N:
        return "2d"
    if p == 0:
        return "2b"
    if q == N:
        return "2c"
    return "2a"


@dataclass
class UStep:
    """The closed-form U of Thm. eigsol in factored form, never as an N x N matrix.

    U = c0 * P0 + V1 diag(c1) V1^T, where P0 = sum_C 1_C 1_C^T / |C| projects onto the
    indicator vectors of the connected components (the exact zero eigenspace of L) and V1
    holds the selected non-zero eigenvectors.  ``lams`` are the q smallest eigenvalues
    (zeros first), ``p``/``q`` as in Thm. eigsol, ``case`` the proof's case.
    """

    d: int
    T: int
    k: int
    labels: np.ndarray            # (N,) connected component of each node
    sizes: np.ndarray             # (m,) component sizes
    c0: float                     # weight of the zero eigenspace (all of it is selected)
    V1: np.ndarray                # (N, r) selected non-zero eigenvectors
    c1: np.ndarray                # (r,) their weights
    lams: np.ndarray              # (q,) eigenvalues of the selected pairs, ascending
    p: int
    q: int
    tol: float
    case: str
    stats: dict = field(default_factory=dict)
    _eig_cache: list | None = None  # per-component eigenvectors for warm starts

    @property
    def N(self) -> int:
        return self.d + self.T

    @property
    def m(self) -> int:
        return int(self.sizes.shape[0])

    def dense(self) -> np.ndarray:
        """U as a dense N x N matrix (tests and the cvxpy cross-check only)."""
        U = (self.V1 * self.c1) @ self.V1.T
        if self.c0:
            same = self.labels[:, None] == self.labels[None, :]
            U += self.c0 * same / self.sizes[self.labels][:, None]
        return U

    def distances(self) -> np.ndarray:
        """D (d x T): D_ij = U_ii + U_{d+j,d+j} - 2 U_{i,d+j} = ||f_i - f_{d+j}||^2 (Prop. sol)."""
        d = self.d
        G = self.V1 * np.sqrt(self.c1)
        Gf, Gt = G[:d], G[d:]
        D = (np.einsum("ij,ij->i", Gf, Gf)[:, None] + np.einsum("ij,ij->i", Gt, Gt)[None, :]
             - 2.0 * (Gf @ Gt.T))
        if self.c0:
            lf, lt = self.labels[:d], self.labels[d:]
            inv = 1.0 / self.sizes
            D += self.c0 * (inv[lf][:, None] + inv[lt][None, :]
                            - 2.0 * (lf[:, None] == lt[None, :]) * inv[lf][:, None])
        return np.maximum(D, 0.0)

    def frob_sq(self) -> float:
        return float(self.c0 ** 2 * self.m + np.sum(self.c1 ** 2))

    def embedding(self, ncols: int | None = None) -> np.ndarray:
        """Spectral embedding rows f_1..f_N (N x k): the k smallest eigenvectors of L, the
        zero eigenspace given by normalised component indicators (largest components first)."""
        ncols = self.k if ncols is None else ncols
        order = np.argsort(-self.sizes, kind="stable")[:ncols]
        E = np.zeros((self.N, ncols))
        for j, comp in enumerate(order):
            idx = self.labels == comp
            E[idx, j] = 1.0 / np.sqrt(self.sizes[comp])
        rest = ncols - order.shape[0]
        if rest > 0:
            E[:, order.shape[0]:order.shape[0] + min(rest, self.V1.shape[1])] = self.V1[:, :rest]
        return E


def _inner_same(a: UStep, b: UStep) -> float:
    """<U_a, U_b> (Frobenius) from the factors."""
    Ga = a.V1 * np.sqrt(a.c1)
    Gb = b.V1 * np.sqrt(b.c1)
    out = float(np.sum((Ga.T @ Gb) ** 2))
    if a.c0 and b.c0:
        cont = sp.coo_matrix((np.ones(a.N), (a.labels, b.labels)),
                             shape=(a.m, b.m)).tocsr()
        cont.sum_duplicates()
        cc = cont.tocoo()
        out += a.c0 * b.c0 * float(np.sum(cc.data ** 2 / (a.sizes[cc.row] * b.sizes[cc.col])))
    for x, y in ((a, b), (b, a)):
        if x.c0 and y.c1.shape[0]:
            Gy = y.V1 * np.sqrt(y.c1)
            seg = np.zeros((x.m, Gy.shape[1]))
            np.add.at(seg, x.labels, Gy)
            out += x.c0 * float(np.sum(np.sum(seg ** 2, axis=1) / x.sizes))
    return out


def ustep_diff_norm(a: UStep, b: UStep) -> float:
    """||U_a - U_b||_F without forming either matrix (Gram identity: absolute accuracy about
    sqrt(machine eps) * ||U||_F, enough for convergence histories)."""
    val = a.frob_sq() + b.frob_sq() - 2.0 * _inner_same(a, b)
    return float(np.sqrt(max(val, 0.0)))


# ----------------------------------------------------------------------------- eigensolvers
class _Component:
    """The Laplacian of one connected component: features ``fi`` x tasks ``tj``."""

    def __init__(self, A, fi: np.ndarray, tj: np.ndarray, nodes: np.ndarray):
        self.A = A                          # |W|[fi][:, tj], dense ndarray or csr
        self.fi, self.tj, self.nodes = fi, tj, nodes
        self.a, self.b = fi.shape[0], tj.shape[0]
        self.n = self.a + self.b
        self.d1 = np.asarray(A.sum(axis=1)).ravel()
        self.d2 = np.asarray(A.sum(axis=0)).ravel()
        self.scale = 2.0 * max(self.d1.max(), self.d2.max())

    def matvec(self, X: np.ndarray) -> np.ndarray:
        X1, X2 = X[:self.a], X[self.a:]
        A = self.A
        top = self.d1[:, None] * X1 - A @ X2
        bot = self.d2[:, None] * X2 - A.T @ X1
        return np.vstack([top, bot])

    def dense_laplacian(self) -> np.ndarray:
        A = self.A.toarray() if sp.issparse(self.A) else self.A
        return bipartite_laplacian(A)

    def dense_eigs(self, nev: int) -> tuple[np.ndarray, np.ndarray]:
        """The nev smallest non-zero eigenpairs (dense eigh; drops the one zero eigenvalue)."""
        lam, V = np.linalg.eigh(self.dense_laplacian())
        return lam[1:1 + nev], V[:, 1:1 + nev]

    def shift_invert(self, sigma: float, max_below: int | None = None):
        """Solver of (L - sigma I) x = b through the Schur complement on the smaller side.

        With ``max_below`` (needs sigma < every degree on the bigger side, so that block is
        positive diagonal) the Schur complement is factorised by LU and, by Sylvester's law
        of inertia, #{eigenvalues of L < sigma} = #{negative eigenvalues of S}; if that
        exceeds ``max_below`` the shift is rejected and None is returned."""
        A = self.A
        small_is_tasks = self.b <= self.a
        if small_is_tasks:
            dbig, dsmall, B = self.d1 - sigma, self.d2 - sigma, A
        else:
            dbig, dsmall, B = self.d2 - sigma, self.d1 - sigma, A.T
        # (L - sigma I) = [[diag(dbig), -B], [-B^T, diag(dsmall)]] in (big, small) order
        inv_big = 1.0 / dbig
        if sp.issparse(B):
            S = -(B.T @ sp.diags(inv_big) @ B).toarray()
        else:
            S = -(B.T * inv_big) @ B
        S[np.diag_indices_from(S)] += dsmall
        a = self.a
        if max_below is not None:
            if not np.all(dbig > 0):
                return None
            if int(np.count_nonzero(np.linalg.eigvalsh(S) < 0)) > max_below:
                return None
            lu = sla.lu_factor(S, check_finite=False)

            def small_solve(r):
                return sla.lu_solve(lu, r, check_finite=False)
        else:
            cf = sla.cho_factor(S, lower=True, check_finite=False)

            def small_solve(r):
                return sla.cho_solve(cf, r, check_finite=False)

        def solve(Bv: np.ndarray) -> np.ndarray:
            vec = Bv.ndim == 1
            Y = Bv.reshape(self.n, -1)
            if small_is_tasks:
                yb, ys = Y[:a], Y[a:]
            else:
                ys, yb = Y[:a], Y[a:]
            xs = small_solve(ys + B.T @ (inv_big[:, None] * yb))
            xb = inv_big[:, None] * (yb + B @ xs)
            out = np.vstack([xb, xs]) if small_is_tasks else np.vstack([xs, xb])
            return out.ravel() if vec else out

        return solve

    def partial_eigs(self, nev: int, v0: np.ndarray | None, rtol: float
                     ) -> tuple[np.ndarray, np.ndarray, str]:
        """The nev smallest non-zero eigenpairs by shift-invert Lanczos on the deflated
        operator P (L - sigma I)^{-1} P (P removes the constant, the exact null vector)."""
        n = self.n
        solve = None
        if not sp.issparse(self.A):
            # Dense component: the wanted non-zero eigenvalues are clustered well above 0, so
            # a shift just below the cluster converges in far fewer Lanczos steps than
            # sigma ~ 0.  A shift is accepted only if the inertia count proves that 0 is the
            # only eigenvalue below it (then the pairs nearest sigma are the smallest ones).
            dbig = self.d1 if self.b <= self.a else self.d2
            for frac in (0.9, 0.5):
                sigma = frac * float(dbig.min())
                if sigma > 0:
                    solve = self.shift_invert(sigma, max_below=1)
                if solve is not None:
                    break
        label = "shift-invert-above0" if solve is not None else "shift-invert"
        if solve is None:
            sigma = -1e-6 * self.scale
            solve = self.shift_invert(sigma)
        one = np.full(n, 1.0 / np.sqrt(n))

        def op(x):
            x = x - one * (one @ x)
            y = solve(x)
            return y - one * (one @ y)

        OPinv = LinearOperator((n, n), matvec=op, dtype=np.float64)
        Lop = LinearOperator((n, n), matvec=lambda x: self.matvec(x.reshape(n, 1)).ravel(),
                             dtype=np.float64)
        if v0 is not None:
            v0 = v0 - one * (one @ v0)
            if np.linalg.norm(v0) < 1e-12:
                v0 = None
        try:
            lam, V = eigsh(Lop, k=nev, sigma=sigma, which="LM", OPinv=OPinv, v0=v0,
                           tol=1e-13, ncv=min(n - 1, max(2 * nev + 1, nev + 16)))
        except (ArpackNoConvergence, ArpackError):
            lam, V = self.dense_eigs(nev)
            return lam, V, "dense-fallback"
        # Rayleigh-Ritz refinement and residual check.
        V = V - one[:, None] * (one @ V)[None, :]
        V, _ = np.linalg.qr(V)
        LV = self.matvec(V)
        H = V.T @ LV
        th, Z = np.linalg.eigh((H + H.T) / 2)
        V = V @ Z
        res = np.linalg.norm(LV @ Z - V * th, axis=0)
        if res.max() > 1e3 * rtol * self.scale:
            lam, V = self.dense_eigs(nev)
            return lam, V, "dense-fallback"
        return th, V, label


def _components(W: np.ndarray):
    """Connected components of the bipartite graph of |W| (features 0..d-1, tasks d..d+T-1)."""
    d, T = W.shape
    S = sp.csr_matrix(np.abs(W))
    S.eliminate_zeros()
    coo = S.tocoo()
    # Each edge once (feature -> task); connected_components(directed=False) symmetrises.
    G = sp.csr_matrix((np.ones(coo.nnz), (coo.row, coo.col + d)), shape=(d + T, d + T))
    m, labels = connected_components(G, directed=False)
    return m, labels, S


def ustep(W: np.ndarray, k: int, rtol: float = DEFAULT_EIG_RTOL,
          prev: UStep | None = None) -> UStep:
    """Closed-form U-step of Thm. eigsol for L(W) with a partial eigensolver.

    Parameters
    ----------
    W : (d, T) array
    k : number of groups, 1 <= k <= d + T
    rtol : eigenvalues within ``rtol * 2 max_degree`` of lambda_k count as tied with it
        (this decides p and q); eigenpairs are computed to residual <= 1e-3 of that.
    prev : the previous iteration's UStep (warm start of the Lanczos start vectors)
    """
    W = np.asarray(W, dtype=np.float64)
    d, T = W.shape
    N = d + T
    if not 1 <= k <= N:
        raise ValueError(f"tfcl: k must be in [1, d + T = {N}], got {k}")
    t0 = time.perf_counter()
    m, labels, S = _components(W)
    absW = np.abs(W)
    deg = np.concatenate([absW.sum(1), absW.sum(0)])
    scale = 2.0 * float(deg.max()) if N else 0.0
    tol = rtol * scale
    sizes = np.bincount(labels, minlength=m)
    dense_A = S.nnz > 0.1 * d * T
    # Components with >= 2 nodes hold non-zero eigenvalues.
    comps = []
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for c in np.flatnonzero(sizes >= 2):
        nodes = order[bounds[c]:bounds[c + 1]]
        fi, tj = nodes[nodes < d], nodes[nodes >= d] - d
        A = absW[np.ix_(fi, tj)] if dense_A else S[fi][:, tj]
        comps.append(_Component(A, fi, tj, np.concatenate([fi, tj + d])))
    r = max(k - m, 1)
    want = [min(r + 2, cc.n - 1) for cc in comps]
    got: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(comps)
    methods: dict[str, int] = {}
    prev_V = None
    if prev is not None and prev.N == N and prev.V1.shape[1]:
        prev_V = prev.V1
    while True:
        for i, cc in enumerate(comps):
            if got[i] is not None and got[i][0].shape[0] >= want[i]:
                continue
            nev = want[i]
            if cc.n <= _DENSE_COMPONENT or nev >= cc.n - 2:
                lam_c, V_c = cc.dense_eigs(nev)
                how = "dense"
            else:
                v0 = None
                if prev_V is not None:
                    rng = np.random.default_rng(cc.n)
                    v0 = prev_V[cc.nodes] @ (1.0 + 0.1 * rng.random(prev_V.shape[1]))
                lam_c, V_c, how = cc.partial_eigs(nev, v0, rtol)
            methods[how] = methods.get(how, 0) + 1
            got[i] = (lam_c, V_c)
        # All eigenvalues known so far: m zeros plus the computed non-zero ones.
        nz = np.concatenate([g[0] for g in got]) if got else np.zeros(0)
        allv = np.concatenate([np.zeros(m), np.sort(nz)])
        if allv.shape[0] < k:       # not enough computed yet: ask every component for more
            more = False
            for i, cc in enumerate(comps):
                if want[i] < cc.n - 1:
                    want[i] = min(2 * want[i] + 1, cc.n - 1)
                    more = True
            if not more:
                raise RuntimeError("tfcl: internal error, fewer eigenvalues than k")
            continue
        lk = allv[k - 1]
        more = False
        for i, cc in enumerate(comps):   # a component might hide more eigenvalues <= lk + tol
            if got[i][0].shape[0] < cc.n - 1 and got[i][0][-1] <= lk + tol:
                want[i] = min(2 * want[i] + 1, cc.n - 1)
                more = True
        if not more:
            break
    c_all, p, q = ustep_weights(allv, k, tol)
    c0 = float(c_all[0]) if m else 0.0
    sel_vecs, sel_c, sel_l = [], [], []
    lk_hi = lk + tol
    w_tie = (k - p) / (q - p)
    for cc, (lam_c, V_c) in zip(comps, got):
        keep = lam_c <= lk_hi
        if not keep.any():
            continue
        full = np.zeros((N, int(keep.sum())))
        full[cc.nodes] = V_c[:, keep]
        sel_vecs.append(full)
        sel_c.append(np.where(lam_c[keep] < lk - tol, 1.0, w_tie))
        sel_l.append(lam_c[keep])
    V1 = np.hstack(sel_vecs) if sel_vecs else np.zeros((N, 0))
    c1 = np.concatenate(sel_c) if sel_c else np.zeros(0)
    lams_sel = np.concatenate(sel_l) if sel_l else np.zeros(0)
    srt = np.argsort(lams_sel, kind="stable")
    V1, c1, lams_sel = V1[:, srt], c1[srt], lams_sel[srt]
    lams = np.concatenate([np.zeros(m), lams_sel])
    stats = {"seconds": time.perf_counter() - t0, "components": m, "methods": methods,
             "computed_pairs": int(sum(g[0].shape[0] for g in got))}
    return UStep(d=d, T=T, k=k, labels=labels, sizes=sizes, c0=c0, V1=V1, c1=c1,
                 lams=lams, p=p, q=q, tol=tol, case=ustep_case(p, q, k, N), stats=stats)


def ustep_dense(W: np.ndarray, k: int, rtol: float = DEFAULT_EIG_RTOL) -> UStep:
    """Reference U-step from the full dense spectrum (numpy.linalg.eigh of L(W)).

    Same tie rule as :func:`ustep`; U = V diag(c) V^T with the q smallest eigenvectors.
    """
    W = np.asarray(W, dtype=np.float64)
    d, T = W.shape
    N = d + T
    if not 1 <= k <= N:
        raise ValueError(f"tfcl: k must be in [1, d + T = {N}], got {k}")
    L = bipartite_laplacian(W)
    lam, V = np.linalg.eigh(L)
    scale = 2.0 * float(np.max(np.diag(L))) if N else 0.0
    tol = rtol * scale
    c, p, q = ustep_weights(lam, k, tol)
    return UStep(d=d, T=T, k=k, labels=np.zeros(N, dtype=np.intp), sizes=np.array([N]),
                 c0=0.0, V1=V[:, :q], c1=c[:q], lams=lam[:q], p=p, q=q, tol=tol,
                 case=ustep_case(p, q, k, N), stats={"methods": {"numpy-eigh": 1}})


# ----------------------------------------------------------------------------- W-step
def tfcl_wstep(W_tilde: np.ndarray, D: np.ndarray, lam_group: float, lam_ridge: float,
               C: float) -> np.ndarray:
    """Prop. sol: argmin_W 1/2||W - W~||^2 + (a1/C) sum |W_ij| D_ij + a2/(2C) ||W||^2
    = sign(W~) max(|W~|/(1 + a2/C) - a1/(C + a2) D, 0)."""
    return np.sign(W_tilde) * np.maximum(
        np.abs(W_tilde) / (1.0 + lam_ridge / C) - lam_group / (C + lam_ridge) * D, 0.0)


def groups_from_embedding(u: UStep, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Feature / task groups: k-means on the row-normalised spectral embedding (see module
    docstring); isolated nodes get -1."""
    from sklearn.cluster import KMeans

    E = u.embedding(k)
    isolated = u.sizes[u.labels] == 1
    labels = -np.ones(u.N, dtype=np.intp)
    idx = np.flatnonzero(~isolated)
    if idx.size:
        X = E[idx]
        nrm = np.linalg.norm(X, axis=1, keepdims=True)
        X = X / np.maximum(nrm, 1e-300)
        n_clusters = min(k, idx.size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            km = KMeans(n_clusters=n_clusters, n_init=10, random_state=seed).fit(X)
        labels[idx] = km.labels_
    return labels[:u.d], labels[u.d:]


# ----------------------------------------------------------------------------- model
def make_loss(tasks: TaskSet, loss: str, model_name: str):
    """The loss object of ``tasks`` (built once per TaskSet object: ``tasks.memo``; it holds
    only data-derived, read-only arrays such as class means and Lipschitz constants)."""
    if loss == "auc":
        return tasks.memo(("tfcl", "SquaredAUCLoss"), lambda: SquaredAUCLoss(tasks))
    if loss == "squared":
        return tasks.memo(("tfcl", "SquaredLoss"), lambda: SquaredLoss(tasks))
    raise ValueError(f"{model_name}: loss must be 'auc' or 'squared', got {loss!r}")


def loss_at_zero(tasks: TaskSet, J, loss: str) -> np.ndarray:
    """grad J(0) (d x T), once per TaskSet object."""
    return tasks.memo(("tfcl", "grad0", loss), lambda: J.grad(np.zeros((tasks.d, tasks.T))))


def group_scale(G0: np.ndarray) -> float:
    """The data scale of the co-grouping weight: s = (d + T) ||grad J(0)||_inf / 2.

    From W = 0 (where U = (k/N) I and D_ij = 2k/N) the W-step of Prop. sol returns W = 0
    exactly when alpha_1 2k/N >= ||grad J(0)||_inf, i.e. when alpha_1 >= s / k: with
    alpha_1 = lam_group * s, every lam_group >= 1/k gives W = 0 (a fixed point of Alg. 1).
    The scale does not depend on k, so k keeps its own effect (module docstring, "What k
    does")."""
    d, T = G0.shape
    return float((d + T) * np.max(np.abs(G0)) / 2.0) if G0.size else 1.0


def validate_declared(model) -> None:
    """``check_params`` (declared kinds and bounds); with lam_scale="absolute" the lam_*
    values are the paper's raw alphas, so only their sign is checked (``check_common``)."""
    params = model.get_params(deep=False)
    if getattr(model, "lam_scale", "data") == "absolute":
        params = {k: v for k, v in params.items() if not k.startswith("lam_")}
    problems = param_problems(type(model), params)
    if problems:
        raise ValueError(f"{model.name}: " + "; ".join(problems))


def check_lam_scale(name: str, lam_scale) -> None:
    if lam_scale not in ("data", "absolute"):
        raise ValueError(f"{name}: lam_scale must be 'data' or 'absolute', got {lam_scale!r}")


def check_common(name: str, k, max_iter, tol, c_factor, eig_rtol, **lams) -> None:
    """Checks beyond the declared bounds (``check_params``): types and strict inequalities."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{name}: k must be an integer >= 1, got {k!r}")
    for key, v in lams.items():
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"{name}: {key} must be >= 0, got {v!r}")
    if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
        raise ValueError(f"{name}: max_iter must be an integer >= 1, got {max_iter!r}")
    if not tol > 0:
        raise ValueError(f"{name}: tol must be > 0, got {tol!r}")
    if not c_factor > 1:
        raise ValueError(f"{name}: c_factor must be > 1 (C above the Lipschitz constant), "
                         f"got {c_factor!r}")
    if not 0 < eig_rtol < 1e-2:
        raise ValueError(f"{name}: eig_rtol must be in (0, 1e-2), got {eig_rtol!r}")


def stop_rule(f_prev: float, f_new: float, dw: float, w_norm: float, tol: float) -> bool:
    """The stopping rule of every TFCL-family fit (non-convex: objective and iterate change):
    |F^t - F^{t-1}| <= tol max(1, |F^t|)  and  ||W^t - W^{t-1}||_F <= sqrt(tol) max(1, ||W^t||_F).
    """
    return (abs(f_prev - f_new) <= tol * max(1.0, abs(f_new))
            and dw <= np.sqrt(tol) * max(1.0, w_norm))


def momentum_next(t_k: float) -> tuple[float, float]:
    """FISTA's sequence: t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2, beta = (t_k - 1) / t_{k+1}."""
    t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t_k * t_k))
    return t_next, (t_k - 1.0) / t_next


COMMON_CONSTRAINTS = {
    "max_iter": Int([2000], low=1),
    "tol": Log([1e-6], low=0.0),
    "c_factor": Linear([1.01], low=1.0),
    "eig_rtol": Log([DEFAULT_EIG_RTOL], low=0.0, high=1e-2),
}


class TFCL(LinearMTLModel):
    """TFCL base model, problem (P) solved by Alg. 1 (see the module docstring).

    Parameters
    ----------
    lam_group : alpha_1, weight of the co-grouping term <L(W), U>, in units of
        s = (d + T)||grad J(0)||_inf / 2 when lam_scale="data" (W = 0 for lam_group >= 1/k)
    lam_ridge : alpha_2, ridge weight (a multiple of the Lipschitz constant when "data")
    lam_scale : "data" (default) or "absolute" -- see "Hyperparameter scales" above
    k : number of task-feature groups (>= 2; see "What k does")
    loss : "auc" (squared pairwise AUC surrogate) or "squared" (instance-wise squared loss)
    accelerate : extrapolated W-steps with a monotone safeguard (default) or Alg. 1's plain
        proximal steps (False); both minimise (P) with a non-increasing objective
    max_iter, tol : stopping rule (module docstring); ``converged_`` says whether it was met
    c_factor : C = c_factor * Lipschitz(grad J), > 1
    eig_rtol : relative tolerance deciding eigenvalue ties in the U-step
    """

    name = "tfcl"
    paper = ("Yang et al., Task-Feature Collaborative Learning with Application to "
             "Personalized Attribute Prediction, IEEE TPAMI (base model P, Alg. 1)")
    search_space = SPACE_TFCL
    param_constraints = COMMON_CONSTRAINTS
    convex = False
    supports_warm_start = False

    def __init__(self, lam_group: float = 0.05, lam_ridge: float = 1e-3, k: int = 4,
                 loss: str = "auc", lam_scale: str = "data", accelerate: bool = True,
                 max_iter: int = 2000, tol: float = 1e-6, c_factor: float = 1.01,
                 eig_rtol: float = DEFAULT_EIG_RTOL):
        self.lam_group = lam_group
        self.lam_ridge = lam_ridge
        self.k = k
        self.loss = loss
        self.lam_scale = lam_scale
        self.accelerate = accelerate
        self.max_iter = max_iter
        self.tol = tol
        self.c_factor = c_factor
        self.eig_rtol = eig_rtol

    def _validate(self) -> None:
        validate_declared(self)
        check_common(self.name, self.k, self.max_iter, self.tol, self.c_factor, self.eig_rtol,
                     lam_group=self.lam_group, lam_ridge=self.lam_ridge)
        check_lam_scale(self.name, self.lam_scale)

    def objective(self, J_val: float, W: np.ndarray, D: np.ndarray) -> float:
        return float(J_val + self.alpha_group_ * np.sum(np.abs(W) * D)
                     + 0.5 * self.alpha_ridge_ * np.sum(W * W))

    def fit(self, tasks: TaskSet, init=None) -> "TFCL":
        # Small problems: single-threaded BLAS is faster than contended multi-threading.
        with threadpool_limits(limits=1 if tasks.d + tasks.T <= 1000 else None):
            return self._fit(tasks)

    def _fit(self, tasks: TaskSet) -> "TFCL":
        self._validate()
        if self.k > tasks.d + tasks.T:
            raise ValueError(f"{self.name}: k must be <= d + T = {tasks.d + tasks.T}, got {self.k}")
        J = make_loss(tasks, self.loss, self.name)
        C = self.c_factor * J.lipschitz
        k = int(self.k)
        if self.lam_scale == "data":
            self.group_scale_ = group_scale(loss_at_zero(tasks, J, self.loss))
            a1 = float(self.lam_group) * self.group_scale_
            a2 = float(self.lam_ridge) * float(J.lipschitz)
        else:
            self.group_scale_ = None
            a1, a2 = float(self.lam_group), float(self.lam_ridge)
        self.alpha_group_, self.alpha_ridge_ = a1, a2
        W = np.zeros((tasks.d, tasks.T))
        W_prev, u_prev = W, None
        obj_hist, dw_hist, du_hist, embeds = [], [], [], []
        timings = {"ustep": 0.0, "gradient": 0.0, "prox": 0.0}
        J_val, G = J.value_and_grad(W)
        G_prev = G
        t_k, restarts, accepted, converged, it = 1.0, 0, 0, False, 0
        for it in range(1, self.max_iter + 1):
            t0 = time.perf_counter()
            # U^t minimises F(W^{t-1}, .) (Thm. eigsol); the eigensolver is warm-started from
            # the previous iteration's eigenvectors (inside this fit only).
            u = ustep(W, k, self.eig_rtol, prev=u_prev)
            D = u.distances()
            timings["ustep"] += time.perf_counter() - t0
            f_ref = self.objective(J_val, W, D)          # F(W^{t-1}, U^t)
            W_new = None
            if self.accelerate and t_k > 1.0:
                t_next, beta = momentum_next(t_k)
                # J is quadratic, so grad J(Y) = G + beta (G - G_prev) exactly.
                t1 = time.perf_counter()
                Y = W + beta * (W - W_prev)
                W_try = tfcl_wstep(Y - (G + beta * (G - G_prev)) / C, D, a1, a2, C)
                t2 = time.perf_counter()
                J_try, G_try = J.value_and_grad(W_try)
                timings["prox"] += t2 - t1
                timings["gradient"] += time.perf_counter() - t2
                f_try = self.objective(J_try, W_try, D)
                if f_try <= f_ref:
                    W_new, J_new, G_new, f_new, t_k = W_try, J_try, G_try, f_try, t_next
                    accepted += 1
                else:
                    restarts += 1
            if W_new is None:
                # Alg. 1's step: majorise-minimise, so F(W^t, U^t) <= F(W^{t-1}, U^t).
                t1 = time.perf_counter()
                W_new = tfcl_wstep(W - G / C, D, a1, a2, C)
                t2 = time.perf_counter()
                J_new, G_new = J.value_and_grad(W_new)
                timings["prox"] += t2 - t1
                timings["gradient"] += time.perf_counter() - t2
                f_new = self.objective(J_new, W_new, D)
                # momentum (re)starts after a plain step
                t_k = momentum_next(1.0)[0] if self.accelerate else 1.0
            obj_hist.append(f_new)
            dw = float(np.linalg.norm(W_new - W))
            dw_hist.append(dw)
            du_hist.append(ustep_diff_norm(u, u_prev) if u_prev is not None else float("nan"))
            if it <= _N_EMBED_ITERS:
                embeds.append(u.embedding(k))
            W_prev, G_prev = W, G
            W, G, J_val, u_prev = W_new, G_new, J_new, u
            if it > 1 and stop_rule(obj_hist[-2], obj_hist[-1], dw, float(np.linalg.norm(W)),
                                    self.tol):
                converged = True
                break
        self.coef_ = W
        self.n_iter_ = it
        self.converged_ = converged
        self.objective_history_ = obj_hist
        self.w_change_history_ = dw_hist
        self.u_change_history_ = du_hist
        self.embeddings_ = embeds
        self.lipschitz_ = float(J.lipschitz)
        self.C_ = float(C)
        u_final = ustep(W, k, self.eig_rtol, prev=u_prev)
        self.ustep_ = u_final
        self.feature_groups_, self.task_groups_ = groups_from_embedding(u_final, k)
        self.diagnostics_ = {"timings": timings, "final_ustep_case": u_final.case,
                             "alpha_group": a1, "alpha_ridge": a2, "components": u_final.m,
                             "converged": converged, "iterations": it,
                             "extrapolated_steps": accepted, "momentum_restarts": restarts}
        return self


class TFCLNoAUC(TFCL):
    """TFCL with the instance-wise squared loss: the paper's "TFCL w/o AUC loss" row."""

    name = "tfcl-noauc"
    paper = TFCL.paper + "; ablation without the AUC loss (Tab. 'Ablation Study')"
    search_space = SPACE_TFCL_NOAUC

    def __init__(self, lam_group: float = 0.05, lam_ridge: float = 1e-3, k: int = 4,
                 loss: str = "squared", lam_scale: str = "data", accelerate: bool = True,
                 max_iter: int = 2000, tol: float = 1e-6, c_factor: float = 1.01,
                 eig_rtol: float = DEFAULT_EIG_RTOL):
        super().__init__(lam_group=lam_group, lam_ridge=lam_ridge, k=k, loss=loss,
                         lam_scale=lam_scale, accelerate=accelerate, max_iter=max_iter,
                         tol=tol, c_factor=c_factor, eig_rtol=eig_rtol)


@hookimpl
def register_models(register):
    register(TFCL)
    register(TFCLNoAUC)


# The ``check-ustep`` command lives in tfcl_check.py; its hook is re-exported here so the
# entry point ``mtlbench_models.tfcl`` registers it.
from .tfcl_check import register_commands  # noqa: E402,F401
