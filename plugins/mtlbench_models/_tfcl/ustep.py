"""The closed-form U-step of Thm. eigsol (TFCL, Alg. 1) in factored form.

U = argmin_{U in Gamma} <L(W), U>, Gamma = {U symmetric, 0 <= U <= I, tr U = k}, is
U = V diag(c) V^T over the q smallest eigenpairs of L(W) (weights c: ``ustep_weights``), never
formed as an N x N matrix: U = c0 P0 + V1 diag(c1) V1^T (``UStep``).  ``ustep`` uses the
partial eigensolvers of ``eigen.py``; ``ustep_dense`` is the full-spectrum reference.  The
cases of the proof (Appendix A) and the tie tolerance are described in the ``tfcl`` module
docstring ("Solver").
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from scipy.sparse.csgraph import connected_components

from .eigen import _Component, _components, bipartite_laplacian

DEFAULT_EIG_RTOL = 1e-8
_DENSE_COMPONENT = 300     # components up to this many nodes: dense eigh
# Every eigenvalue ``ustep`` computes is within _EIG_ERROR * rtol * 2 max_degree of the exact one
# (the residual bound ``_Component.partial_eigs`` checks; dense eigh is far more accurate).
_EIG_ERROR = 1e3


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
    _D: np.ndarray | None = None    # distances(), once computed

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
        """D (d x T): D_ij = U_ii + U_{d+j,d+j} - 2 U_{i,d+j} = ||f_i - f_{d+j}||^2 (Prop. sol).
        Computed once per UStep (read-only)."""
        if self._D is None:
            self._D = self._distances()
            self._D.flags.writeable = False
        return self._D

    def _distances(self) -> np.ndarray:
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


def same_components_only(a: UStep, b: UStep) -> bool:
    """Both U = c0 P0 over the same components (no eigenvectors): then they are equal."""
    return (a.V1.shape[1] == 0 and b.V1.shape[1] == 0 and a.m == b.m
            and (a.labels is b.labels or np.array_equal(a.labels, b.labels)))


def ustep_diff_norm(a: UStep, b: UStep) -> float:
    """||U_a - U_b||_F without forming either matrix (Gram identity: absolute accuracy about
    sqrt(machine eps) * ||U||_F, enough for convergence histories)."""
    if same_components_only(a, b):
        # U_a - U_b = (c0_a - c0_b) P0: exact, and 0 when the U-step repeated itself
        return abs(a.c0 - b.c0) * float(np.sqrt(a.m))
    val = a.frob_sq() + b.frob_sq() - 2.0 * _inner_same(a, b)
    return float(np.sqrt(max(val, 0.0)))



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
    comps = _nontrivial_components(absW, S, labels, sizes, m)
    prev_V = None
    if prev is not None and prev.N == N and prev.V1.shape[1]:
        prev_V = prev.V1
    got, allv, lk, nz, methods = _smallest_eigenpairs(comps, m, k, tol, rtol, prev_V)
    c_all, p, q = ustep_weights(allv, k, tol)
    c0 = float(c_all[0]) if m else 0.0
    V1, c1, lams_sel = _selected_pairs(comps, got, N, lk, tol, (k - p) / (q - p))
    lams = np.concatenate([np.zeros(m), lams_sel])
    stats = {"seconds": time.perf_counter() - t0, "components": m, "methods": methods,
             "computed_pairs": int(sum(g[0].shape[0] for g in got)),
             # smallest computed non-zero eigenvalue, lambda_{m+1}(L) (UStepper's certificate)
             "min_nonzero": float(nz.min()) if nz.size else float("inf"),
             "eig_error": _EIG_ERROR * rtol * scale}
    return UStep(d=d, T=T, k=k, labels=labels, sizes=sizes, c0=c0, V1=V1, c1=c1,
                 lams=lams, p=p, q=q, tol=tol, case=ustep_case(p, q, k, N), stats=stats)


def _nontrivial_components(absW: np.ndarray, S, labels: np.ndarray, sizes: np.ndarray,
                           m: int) -> list[_Component]:
    """The components of >= 2 nodes (they hold the non-zero eigenvalues), each with its block
    of |W| (dense when W is more than 10 % full, else sparse)."""
    d, T = absW.shape
    dense_A = S.nnz > 0.1 * d * T
    comps = []
    order = np.argsort(labels, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for c in np.flatnonzero(sizes >= 2):
        nodes = order[bounds[c]:bounds[c + 1]]
        fi, tj = nodes[nodes < d], nodes[nodes >= d] - d
        A = absW[np.ix_(fi, tj)] if dense_A else S[fi][:, tj]
        comps.append(_Component(A, fi, tj, np.concatenate([fi, tj + d])))
    return comps


def _smallest_eigenpairs(comps, m: int, k: int, tol: float, rtol: float, prev_V):
    """The smallest non-zero eigenpairs of every component, as many as decide the U-step:
    at least k eigenvalues in all (with the m zeros) and, in every component, every eigenvalue
    <= lambda_k + tol.  Returns (per component (eigenvalues, vectors), all eigenvalues known
    sorted with the zeros, lambda_k, the non-zero ones, solver methods used)."""
    r = max(k - m, 1)
    want = [min(r + 2, cc.n - 1) for cc in comps]
    got: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(comps)
    methods: dict[str, int] = {}
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
            return got, allv, lk, nz, methods


def _selected_pairs(comps, got, N: int, lk: float, tol: float, w_tie: float):
    """The eigenvectors of U (eigenvalues <= lambda_k + tol) lifted to all N nodes, their
    weights (1 below lambda_k - tol, ``w_tie`` for the tied ones) and eigenvalues, sorted
    by eigenvalue."""
    sel_vecs, sel_c, sel_l = [], [], []
    lk_hi = lk + tol
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
    return V1[:, srt], c1[srt], lams_sel[srt]


class UStepper:
    """The U-steps of one fit: ``stepper(W)`` is ``ustep(W, k, rtol, prev)`` (the same U, the
    same p, q and case), skipping the eigensolver when the last one already proves the answer.

    While the graph has m >= k connected components, Thm. eigsol gives U = (k/m) P0 (case 2b,
    or 2d for W = 0) *unless* a non-zero eigenvalue lies within the tie tolerance
    tol = rtol * 2 max_degree of lambda_k = 0; the components alone (a graph search, no
    eigenvalues) then decide U.  ``ustep`` computes the smallest non-zero eigenvalues only to
    rule that tie out.  Here the ruling is carried forward by Weyl's inequality: if a full
    U-step at a reference point W_ref (m_ref components) found lambda_{m_ref+1}(L(W_ref)) >= ell
    (its computed value less its error bound), then for any W with m >= m_ref components

        lambda_{m+1}(L(W)) >= lambda_{m_ref+1}(L(W_ref)) - ||L(W) - L(W_ref)||_2
                           >= ell - 2 max_node sum_j | |W| - |W_ref| |_node,j

    (L is linear in |W|, and by Gershgorin the Laplacian of a signed weight matrix has norm at
    most twice its largest absolute weighted degree).  When that bound exceeds tol the tie is
    ruled out exactly and U = (k/m) P0 is returned without an eigensolver; otherwise (and
    whenever m < k, where U needs eigenvectors) the full ``ustep`` runs and, if it lands in
    the m >= k regime, becomes the new reference.  Before the eigensolver, a cheaper exact
    certificate is tried: Cholesky factorisations of each component's Laplacian with one node
    deleted (``_grounded_certificate``: interlacing).  The components are recomputed only when
    the support of W changed.  ``stats["methods"]`` says which path was taken
    ("weyl-certified", "grounded-cholesky" or the eigensolvers).
    """

    def __init__(self, k: int, rtol: float = DEFAULT_EIG_RTOL) -> None:
        self.k, self.rtol = int(k), float(rtol)
        self.prev: UStep | None = None
        self._support = None            # (support of W, m, labels) of the last call
        self._ref = None                # (|W_ref|, m_ref, lower bound of lambda_{m_ref+1})
        self.calls = {"weyl-certified": 0, "grounded-cholesky": 0, "eigensolver": 0}

    def __call__(self, W: np.ndarray) -> UStep:
        W = np.asarray(W, dtype=np.float64)
        d, T = W.shape
        k = self.k
        support = W != 0.0
        if self._support is not None and np.array_equal(support, self._support[0]):
            m, labels = self._support[1], self._support[2]
        else:
            m, labels = _support_components(support)
            self._support = (support, m, labels)
        if m >= k:
            absW = np.abs(W)
            scale = 2.0 * float(max(absW.sum(1).max(initial=0.0), absW.sum(0).max(initial=0.0)))
            tol = self.rtol * scale
            how = None
            if self._ref is not None and m >= self._ref[1]:
                change = np.abs(absW - self._ref[0])
                drift = 2.0 * float(max(change.sum(1).max(initial=0.0),
                                        change.sum(0).max(initial=0.0)))
                if self._ref[2] - drift > tol:
                    how = "weyl-certified"
            if how is None:
                # one Cholesky per component instead of its eigenpairs
                if _grounded_certificate(absW, labels, m, tol):
                    how = "grounded-cholesky"
            if how is not None:
                self.calls[how] += 1
                u = _components_only(d, T, k, m, labels, tol)
                u.stats["methods"] = {how: 1}
                if self.prev is not None and same_components_only(u, self.prev):
                    u._D = self.prev._D        # the same U: the same D
                self.prev = u
                return u
        t0 = time.perf_counter()
        u = ustep(W, k, self.rtol, prev=self.prev)
        self.calls["eigensolver"] += 1
        if u.m >= k and u.V1.shape[1] == 0:
            self._ref = (np.abs(W), u.m, u.stats["min_nonzero"] - u.stats["eig_error"])
        else:
            self._ref = None
        u.stats["seconds"] = time.perf_counter() - t0
        self.prev = u
        return u


def _grounded_certificate(absW: np.ndarray, labels: np.ndarray, m: int, sigma: float) -> bool:
    """True only if every connected component with >= 2 nodes has lambda_2 > sigma, i.e.
    lambda_{m+1}(L(W)) > sigma.  Proof used: deleting one node v of a component leaves a
    principal submatrix L_v of its Laplacian, and by Cauchy interlacing
    lambda_1(L_v) <= lambda_2(L); so a successful Cholesky factorisation of L_v - sigma I
    (lambda_1(L_v) > sigma) certifies lambda_2(L) > sigma.  v = the node of largest degree."""
    d, T = absW.shape
    sizes = np.bincount(labels, minlength=m)
    for comp in np.flatnonzero(sizes >= 2):
        nodes = np.flatnonzero(labels == comp)
        fi, tj = nodes[nodes < d], nodes[nodes >= d] - d
        Lc = bipartite_laplacian(absW[np.ix_(fi, tj)])
        keep = np.arange(Lc.shape[0]) != int(np.argmax(np.diag(Lc)))
        Lv = Lc[np.ix_(keep, keep)]
        Lv[np.diag_indices_from(Lv)] -= sigma
        try:
            np.linalg.cholesky(Lv)
        except np.linalg.LinAlgError:
            return False
    return True


def _support_components(support: np.ndarray) -> tuple[int, np.ndarray]:
    """Connected components of the bipartite graph with edges ``support`` (d x T booleans):
    the same graph, hence the same labels, as ``eigen._components``."""
    d, T = support.shape
    cols = np.nonzero(support)[1]
    indptr = np.empty(d + T + 1, dtype=np.int32)
    indptr[0] = 0
    np.cumsum(support.sum(1), out=indptr[1:d + 1])
    indptr[d + 1:] = indptr[d]
    G = sp.csr_matrix((np.ones(cols.size), (cols + d).astype(np.int32), indptr),
                      shape=(d + T, d + T))
    m, labels = connected_components(G, directed=False)
    return int(m), labels


def _components_only(d: int, T: int, k: int, m: int, labels: np.ndarray, tol: float) -> UStep:
    """U = (k/m) P0 when m >= k and no non-zero eigenvalue ties with 0 (case 2b, or 2d)."""
    N = d + T
    return UStep(d=d, T=T, k=k, labels=labels, sizes=np.bincount(labels, minlength=m),
                 c0=k / m, V1=np.zeros((N, 0)), c1=np.zeros(0), lams=np.zeros(m), p=0, q=m,
                 tol=tol, case=ustep_case(0, m, k, N),
                 stats={"components": m, "methods": {"weyl-certified": 1},
                        "computed_pairs": 0})


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

