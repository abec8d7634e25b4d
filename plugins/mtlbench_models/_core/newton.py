"""Proximal Newton for task-separable datafits of small dimension plus an L1 penalty.

    min_W  F(W) = sum_t l_t(w_t) + lam ||W||_1,   W of shape (k, T), k small

(e.g. the sparse codes of a factored model on its reduced designs X_t L).  Each iteration,
for all tasks at once (Lee, Sun & Saunders, "Proximal Newton-type methods for minimizing
composite functions", SIAM J. Optim. 2014):

* the quadratic model of l_t at w_t from the datafit's per-task Hessians H_t (k x k;
  ``task_hessians``), plus lam ||.||_1, is minimised by cyclic coordinate descent (every
  task's coordinate i in one vectorised step; the products H_t d_t updated in O(k T)); after
  every sweep each task's point jumps to the model's exact minimiser on its orthant face
  (the support and signs it has: one k x k linear solve per task, batched) where that
  minimiser keeps the signs (it then lowers the model: the face is convex and contains the
  point), so the sweeps only have to find the support and signs; the sweeps stop when no
  coordinate moves by more than 1e-12 of the largest |w| (or after ``sweeps``);
* each task's step a_t d_t is chosen by backtracking (halving) until its own objective
  decreases by Armijo's condition F_t(w_t + a d_t) <= F_t(w_t) + 1e-4 a Delta_t,
  Delta_t = grad_t^T d_t + lam (||w_t + d_t||_1 - ||w_t||_1) <= 0; once the predicted
  decrease a |Delta_t| is below 1e-15 |F_t| (the rounding of F_t) a step is taken if F_t does
  not increase (it still improves w_t), else w_t is kept.  F never increases.

Certificate: the relative duality gap at every iterate, the sum of the T separate problems'
gaps (each task's dual point scaled into its own dual ball, ``L1.task_dual_scales``; the
datafit's ``gap`` takes the scales as a (T, 1) array, as ``LogisticLoss.gap`` does): an upper
bound of F - F*, zero at the optimum; converged iff it is <= ``tol`` within ``max_iter``
iterations.
"""
from __future__ import annotations

import numpy as np

from mtlbench import report_progress

from .solvers import Result

__all__ = ["ProxNewton"]

ARMIJO = 1e-4
EPS = 1e-15           # a predicted decrease below EPS |F_t| is at the rounding of F_t


def _silent(*args) -> None:
    """A progress report that goes nowhere."""


class ProxNewton:
    """Proximal Newton on a datafit with ``task_hessians`` and ``task_values_of`` (e.g.
    ``LogisticLoss``) plus ``L1`` (module docstring).  Options: ``tol`` (relative duality
    gap), ``max_iter`` (Newton iterations), ``sweeps`` (coordinate sweeps per subproblem),
    ``report`` (False: no ``report_progress`` calls, for a solver run inside another model's
    iterations)."""

    def __init__(self, tol: float = 1e-8, max_iter: int = 200, sweeps: int = 50,
                 report: bool = True) -> None:
        self.tol, self.max_iter, self.sweeps = float(tol), int(max_iter), int(sweeps)
        self.report = bool(report)

    def _direction(self, X: np.ndarray, G: np.ndarray, H: np.ndarray, lam: float):
        """Coordinate descent on g^T D + 1/2 D^T H D + lam ||X + D||_1, per column."""
        k, T = X.shape
        Hc = np.ascontiguousarray(H.transpose(1, 2, 0))        # Hc[i][j, t] = H_t[j, i]
        diag = np.einsum("tii->it", H)
        floor = 1e-12 * max(float(diag.max()), 1e-300) if diag.size else 1.0
        h = np.maximum(diag, floor)                             # (k, T)
        thr = lam / h
        lo = -thr
        Xn = X.copy()                                           # X + D
        HD = np.zeros((k, T))                                   # column t: H_t D_t
        scale = 1e-12 * max(float(np.abs(X).max()), 1e-300)
        HX = np.matmul(H, X.T[:, :, None])[:, :, 0].T           # (k, T): H_t X_t
        faces: dict = {}                                        # the last face solves
        for _ in range(self.sweeps):
            moved = 0.0
            for i in range(k):
                x = Xn[i]
                v = x - (G[i] + HD[i]) / h[i]
                # soft thresholding, minus x (np.clip's numbers without its dispatch)
                delta = (v - np.minimum(np.maximum(v, lo[i]), thr[i])) - x
                if not delta.any():
                    continue
                Xn[i] += delta
                HD += Hc[i] * delta
                moved = max(moved, float(np.abs(delta).max()))
            if moved <= scale:
                break
            HD = self._face(X, Xn, G, H, HX, HD, lam, faces)
        return Xn - X

    @staticmethod
    def _face(X, Xn, G, H, HX, HD, lam, faces):
        """Replace each column of Xn by the model's minimiser on its orthant face (support and
        signs of Xn, the other coordinates zero) where that minimiser keeps the signs (``HX``:
        the products H_t X_t, (k, T)).  Within one direction the face's system depends on the
        signs alone: ``faces`` keeps the last solves (signs, minimisers, whether they keep the
        signs) and only the tasks whose signs changed are solved again."""
        A = Xn != 0
        if not A.any():
            return HD
        sg = np.sign(Xn)
        new = (np.ones(X.shape[1], dtype=bool) if not faces
               else np.any(sg != faces["signs"], axis=0))
        xs = np.empty_like(Xn) if not faces else faces["xs"].copy()
        ok = np.zeros(X.shape[1], dtype=bool) if not faces else faces["ok"].copy()
        if new.any():
            every = bool(new.all())                              # (then no copies)
            An, sn = (A, sg) if every else (A[:, new], sg[:, new])
            rhs = np.where(An, (HX - G - lam * sg) if every
                           else HX[:, new] - G[:, new] - lam * sn, 0.0)
            Am = An.T                                            # (T_new, k)
            M = np.where(Am[:, :, None] & Am[:, None, :], H if every else H[new], 0.0)
            k = X.shape[0]
            idx = np.arange(k)
            M[:, idx, idx] = np.where(Am, M[:, idx, idx], 1.0)
            try:
                xn = np.linalg.solve(M, rhs.T[:, :, None])[:, :, 0].T
            except np.linalg.LinAlgError:
                return HD
            xs[:, new] = xn
            ok[new] = (np.all(np.where(An, np.sign(xn) == sn, True), axis=0)
                       & np.all(np.isfinite(xn), axis=0))
        faces.update(signs=sg, xs=xs, ok=ok)
        if not ok.any():
            return HD
        Xn[:, ok] = np.where(A[:, ok], xs[:, ok], 0.0)
        D = Xn - X
        return np.matmul(H, D.T[:, :, None])[:, :, 0].T

    def solve(self, datafit, penalty, W0: np.ndarray) -> Result:
        """Minimise J + lam ||.||_1 from ``W0`` (k x T); returns a ``Result``."""
        lam = float(penalty.lam)
        X = np.array(W0, dtype=np.float64)
        Z = datafit.forward(X)
        Ft = datafit.task_values_of(Z) + lam * np.abs(X).sum(axis=0)
        G = datafit.grad_of(Z)

        def certificate(X, Z, F, G):
            s = penalty.task_dual_scales(G)[:, None]
            gap = datafit.gap(Z, X, penalty.value(X), s, G)
            return gap / max(abs(F), 1e-300)

        F = float(Ft.sum())
        cert = certificate(X, Z, F, G)
        hist = [F]
        progress = report_progress if self.report else _silent
        progress(0, F, cert * abs(F))
        it = 0
        while cert > self.tol and it < self.max_iter:
            it += 1
            D = self._direction(X, G, datafit.task_hessians(Z), lam)
            l1 = np.abs(X).sum(axis=0)
            delta = np.einsum("kt,kt->t", G, D) + lam * (np.abs(X + D).sum(axis=0) - l1)
            a = np.ones(X.shape[1])
            todo = delta < 0
            Xn, Zn, Fn = X.copy(), Z.copy(), Ft.copy()
            for _ in range(60):
                if not todo.any():
                    break
                Xt = X + a * D
                Zt = datafit.forward(Xt)
                Ftry = datafit.task_values_of(Zt) + lam * np.abs(Xt).sum(axis=0)
                tiny = -a * delta <= EPS * np.abs(Ft)
                ok = todo & (Ftry <= np.where(tiny, Ft, Ft + ARMIJO * a * delta))
                Xn[:, ok], Zn[ok], Fn[ok] = Xt[:, ok], Zt[ok], Ftry[ok]
                todo &= ~ok & ~tiny
                a = np.where(todo, 0.5 * a, a)
            if np.array_equal(Xn, X):                     # no task can decrease: at precision
                break
            X, Z, Ft = Xn, Zn, Fn
            G = datafit.grad_of(Z)
            F = float(Ft.sum())
            cert = certificate(X, Z, F, G)
            hist.append(F)
            progress(it, F, cert * abs(F))
        return Result(X, hist, it, float(cert), "gap", bool(cert <= self.tol))
