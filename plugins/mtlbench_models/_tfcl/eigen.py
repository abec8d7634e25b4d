"""TFCL's graph Laplacian and eigensolvers (used by the U-step, ``ustep.py``).

L(W) = [[diag(|W| 1), -|W|], [-|W|^T, diag(|W|^T 1)]] is the Laplacian of the bipartite
feature-task graph of W (d x T; N = d + T nodes, features first).  ``_components`` splits the
graph into connected components (scipy.sparse.csgraph); ``_Component`` holds the Laplacian of
one component and computes its smallest non-zero eigenpairs, by dense ``eigh`` or by ARPACK in
shift-invert mode where (L - sigma I)^{-1} is applied through the Schur complement on the
smaller side of the bipartite graph (see the ``tfcl`` module docstring, "Solver").
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh


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
        """The nev smallest non-zero eigenpairs (dense eigh; drops the one zero eigenvalue).
        Only the nev + 1 smallest pairs are computed (LAPACK's MRRR driver: 2x faster than the
        full spectrum at N = 180 with nev = 6) unless they are most of the spectrum."""
        L = self.dense_laplacian()
        if 2 * (nev + 1) < self.n:
            lam, V = sla.eigh(L, subset_by_index=[0, nev], driver="evr", check_finite=False)
            return lam[1:], V[:, 1:]
        lam, V = np.linalg.eigh(L)
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
        if v0 is None:
            # A fixed start vector: ARPACK's own random start is drawn from OS entropy, which
            # made fits differ run to run at ~1e-14 (results must be exactly reproducible).
            v0 = np.random.default_rng(0).standard_normal(n)
            v0 -= one * (one @ v0)
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

