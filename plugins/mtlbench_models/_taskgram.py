"""Per-task Gram spectra, stacked: the data-only precomputation of AMTL and VSTG-MTL.

For each task t the Gram matrix G_t = X_t^T X_t (d x d) is kept as its eigen-decomposition on the
smaller side, G_t = V_t diag(e_t) V_t^T with V_t (d x r_t) orthonormal and r_t = min(n_t, d):

* n_t >= d: eigh of the d x d Gram matrix;
* n_t < d: eigh of the n_t x n_t kernel X_t X_t^T = U diag(e) U^T, then V_t = X_t^T U diag(e)^{-1/2}
  (directions with e <= 1e-12 max(e) are dropped: they carry no data); no d x d matrix is built.

All tasks are zero-padded to r = max_t r_t and stacked, ``V`` (T x d x r) and ``e`` (T x r), so
that G_t p_t, (c_t G_t + a_t I)^{-1} p_t and w_t^T G_t w_t are batched matrix products over all
tasks at once (padding columns are zero with e = 0, so they contribute nothing).  Cost: one
O(T min(n, d)^2 max(n, d)) decomposition per TaskSet, cached through ``TaskSet.memo``; memory
T d r floats (simulated: 100 x 80 x 80; SUN scale: 250 x 2048 x 50).
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import eigh

from mtlbench import TaskSet


class TaskSpectra:
    """Stacked per-task Gram spectra plus X_t^T y_t and y_t^T y_t (see the module docstring)."""

    def __init__(self, tasks: TaskSet):
        T, d = tasks.T, tasks.d
        Xs = [tasks.X(t) for t in range(T)]
        ys = [tasks.y(t) for t in range(T)]
        self.T, self.d = T, d
        self.sizes = np.array([y.shape[0] for y in ys])
        r = int(min(max(self.sizes.max(), 1), d))
        self.r = r
        self.V = np.zeros((T, d, r))
        self.e = np.zeros((T, r))
        for t, X in enumerate(Xs):
            n = X.shape[0]
            if n >= d:
                ev, vec = eigh(X.T @ X)
                ev = np.maximum(ev, 0.0)
                self.V[t, :, :d] = vec
                self.e[t, :d] = ev
            else:
                ev, U = eigh(X @ X.T)
                keep = ev > 1e-12 * max(float(ev.max(initial=0.0)), 1e-300)
                ev, U = ev[keep], U[:, keep]
                self.V[t, :, :ev.size] = (X.T @ U) / np.sqrt(ev)
                self.e[t, :ev.size] = ev
        # the d x d Gram matrices themselves when that is no bigger than the spectra (d <= r):
        # a Gram product is then one pass over T d^2 numbers instead of two over T d r
        self.G = None
        if d <= r:
            self.G = np.stack([X.T @ X for X in Xs])                          # T x d x d
        self.Xty = np.column_stack([X.T @ y for X, y in zip(Xs, ys)])     # d x T
        self.yy = np.array([float(y @ y) for y in ys])                      # T
        # mean feature energy per coordinate, mean_t ||X_t||_F^2 / d = mean_t tr(G_t) / d
        self.energy = float(self.e.sum(axis=1).mean()) / d

    @classmethod
    def of(cls, tasks: TaskSet) -> "TaskSpectra":
        """The spectra of ``tasks``, computed once per TaskSet object (``tasks.memo``)."""
        return tasks.memo(("compa.TaskSpectra", 1), lambda: cls(tasks))

    # ---- batched products over tasks; P is d x T (column t belongs to task t)
    def project(self, P: np.ndarray) -> np.ndarray:
        """V_t^T p_t for every t, as a T x r array."""
        return np.matmul(self.V.transpose(0, 2, 1), P.T[:, :, None])[:, :, 0]

    def lift(self, Q: np.ndarray) -> np.ndarray:
        """V_t q_t for every t (Q: T x r), as a d x T array."""
        return np.matmul(self.V, Q[:, :, None])[:, :, 0].T

    def gram_apply(self, P: np.ndarray) -> np.ndarray:
        """[G_t p_t]_t (d x T)."""
        if self.G is not None:
            return np.matmul(self.G, P.T[:, :, None])[:, :, 0].T
        return self.lift(self.e * self.project(P))

    def quad(self, P: np.ndarray) -> np.ndarray:
        """[p_t^T G_t p_t]_t (T,)."""
        Q = self.project(P)
        return np.einsum("tr,tr->t", self.e, Q * Q)

    def shifted_solve(self, P: np.ndarray, c: np.ndarray, a: np.ndarray) -> np.ndarray:
        """[(c_t G_t + a_t I)^{-1} p_t]_t (d x T) for c_t >= 0, a_t > 0 (exact)."""
        Q = self.project(P)
        coef = 1.0 / (c[:, None] * self.e + a[:, None]) - 1.0 / a[:, None]
        return P / a[None, :] + self.lift(coef * Q)

    def losses(self, W: np.ndarray) -> np.ndarray:
        """[1/2 ||y_t - X_t w_t||^2]_t from the spectra (no pass over the data)."""
        fit = self.quad(W) - 2.0 * np.einsum("it,it->t", W, self.Xty) + self.yy
        return 0.5 * np.maximum(fit, 0.0)
