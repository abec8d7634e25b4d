"""LASSO: per-task l1-regularised least squares, the TFCL paper's sparse baseline.

R. Tibshirani, "Regression Shrinkage and Selection via the Lasso", Journal of the Royal
Statistical Society B 58(1):267-288, 1996; a competitor of the TFCL paper (Sec. Competitors),
with the instance-wise squared loss of its Sec. Experimental Settings and one rho shared by
all tasks::

    min_W  F(W) = sum_t 1/2 ||y_t - X_t w_t||^2 + rho ||W||_1

It separates over tasks.  ``rho = rho_ratio * rho_max`` with rho_max = max_t ||X_t^T y_t||_inf,
the smallest rho for which W = 0 is optimal, so the ratio is scale-free across data sets.

Solvers (both minimise F; ``mtlbench race`` races them, ``docs/race.md``):

``homotopy`` (:class:`LASSO`, the default): the LASSO path (Osborne, Presnell & Turlach 2000;
    Efron, Hastie, Johnstone & Tibshirani 2004, "LARS-lasso"), followed for all tasks at once
    from a point where the optimality conditions hold exactly, down (or up) to rho
    (:func:`lasso_path_solve`).  Between kinks, where a feature joins or leaves a task's
    support, the solution is affine in the penalty; each step moves every task to its next
    kink, with rank-one updates of the inverse of X_S^T X_S.  At rho the coefficients are
    solved afresh on the final support and signs, so the answer is exact up to rounding (a
    duality gap near 1e-15 ||y_t||^2), where coordinate descent needs thousands of sweeps when
    n_t < d and rho is small (the attribute data: about 35 labels per user, d = 100).  A cold
    fit starts from W = 0 at each task's own rho_max_t = ||X_t^T y_t||_inf; with ``init`` (a
    LASSO fitted at another rho) the path starts from init's solution for every task whose
    optimality conditions hold there (to 1e-9 relative).  The data are read as padded rows
    when d >= max_t n_t and as per-task Gram matrices otherwise.  Exact ties or collinear
    features (integer-coded designs) can make the path non-unique; a task whose gap misses
    the tolerance after the path is finished by coordinate descent with exact solves on the
    support it finds (:func:`lasso_cd_finish`).
``sklearn-cd`` (:class:`LASSOSklearnCD`): scikit-learn's cyclic coordinate descent per task;
    its objective (1/(2 n_t)) ||y - X w||^2 + a ||w||_1 with a = rho / n_t has the same
    minimiser.

Stopping rule and certificate (both solvers): the duality gap of each task's problem
1/2 ||y_t - X_t w||^2 + rho ||w||_1 must be <= tol * ||y_t||^2 (tol = 1e-8 by default: a
relative gap of 1e-8 in units of the loss at w = 0, scikit-learn's own criterion), checked for
the homotopy at its end (:meth:`_LassoData.gaps`).  ``converged_`` is True when every task
meets it (for ``sklearn-cd``: within ``max_iter`` sweeps, no ConvergenceWarning).
``max_iter`` caps the path steps of the homotopy and the sweeps of coordinate descent.  The
certificate reported to the race is the sum of the tasks' gaps (an upper bound of F - F*).
Convex: warm starts along a search cannot change the optimum.

Search space: ``rho_ratio`` Log, start range [0.003, 0.3] with the points {0.003, 0.01, 0.03,
0.1, 0.3} (what ``--search grid`` fits; docs/tuning.md); bounds rho_ratio > 0 and
``high = 1``: at rho_ratio >= 1 the penalty is >= rho_max and W = 0 is optimal for every task,
so every larger value is the same model.

Unverified: on which data the start range was first chosen is not recorded.
"""
from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso as _SkLasso

from mtlbench import Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl, report_progress
from mtlbench.progress import progress_active

from ._core.datafits import SquaredLoss, squared_gap
from ._core.representations import padded_task_rows, padded_task_rows_t, task_grams
from ._core.penalties import L1

#: The path's incremental updates (inverse Gram, coefficients, correlations) are recomputed
#: from the data every this many steps, so rounding cannot accumulate along a long path.
_REFRESH_EVERY = 32
#: A feature whose squared distance to the span of the support is below this fraction of its
#: squared norm is taken to lie in that span (duplicated, constant-in-task or collinear
#: features): it cannot join -- in exact arithmetic its correlation stays tied to the
#: support's -- until a feature leaves the support.
_SPAN_RTOL = 1e-10
#: Features whose join events come within this fraction of (time + penalty) of the first
#: one are tied (in exact arithmetic they often are: a feature that the support and another
#: free feature span reaches the boundary with it); the one of smallest index joins, so the
#: choice among non-unique solutions does not depend on rounding.
_TIE_RTOL = 1e-9


def lasso_objective(tasks: TaskSet, W: np.ndarray, rho: float) -> float:
    """F(W) = sum_t 1/2 ||y_t - X_t w_t||^2 + rho ||W||_1 at W (d, T)."""
    return SquaredLoss(tasks).value(W) + L1(rho).value(W)


# ------------------------------------------------------------------------- the tasks' data
class _LassoData:
    """What the solvers read of the tasks, in one of two exact representations:

    * ``rows`` (d >= n_max, the paper's attribute data): the tasks stacked with zero rows up
      to the largest task, X3 (T, n_max, d), its transpose XT (T, d, n_max), Y (T, n_max); zero
      rows add nothing to a task's loss or gradient;
    * ``gram`` (d < n_max): G[t] = X_t^T X_t (T, d, d), smaller than the padded rows, and
      the only thing the path needs: every quantity below is a function of G, X^T y, y^T y.

    Both hold xty[t] = X_t^T y_t, yy[t] = ||y_t||^2 and rho_max[t] = ||X_t^T y_t||_inf (the
    smallest penalty at which w_t = 0 is optimal).  The slot content of feature j (what the
    path keeps per support slot) is x_j (n_max,) in rows mode, G[j, :] (d,) in gram mode.
    """

    def __init__(self, tasks: TaskSet | None) -> None:
        if tasks is None:       # an empty shell, filled by ``subset``
            return
        T, d = tasks.T, tasks.d
        n = np.array([tasks.X(t).shape[0] for t in range(T)])
        n_max = int(n.max()) if T else 0
        self.mode = "gram" if d < n_max else "rows"
        if self.mode == "rows":            # the squared loss's padded rows (shared cache)
            self.X3, self.Y, _ = padded_task_rows(tasks)
            self.XT = padded_task_rows_t(tasks)
            self.xty = np.matmul(self.Y[:, None, :], self.X3)[:, 0, :]
            self.yy = np.einsum("tn,tn->t", self.Y, self.Y)
        else:                              # the squared loss's Gram matrices (shared cache)
            self.G, B, self.yy = task_grams(tasks)
            self.xty = np.ascontiguousarray(B.T)
        self.rho_max = L1.dual_norm_per_task(self.xty.T) if d else np.zeros(T)

    @property
    def d(self) -> int:
        return self.xty.shape[1]

    def subset(self, rows: np.ndarray) -> "_LassoData":
        out = _LassoData(None)
        out.mode = self.mode
        for name in ("xty", "yy", "rho_max") + (("X3", "XT", "Y") if self.mode == "rows"
                                                 else ("G",)):
            setattr(out, name, getattr(self, name)[rows])
        return out

    # -- per-task quantities at W (m, d)
    def correlations(self, W: np.ndarray) -> np.ndarray:
        """C[t] = X_t^T (y_t - X_t w_t)."""
        if self.mode == "rows":
            R = self.Y - np.matmul(W[:, None, :], self.XT)[:, 0, :]
            return np.matmul(R[:, None, :], self.X3)[:, 0, :]
        return self.xty - np.matmul(self.G, W[:, :, None])[:, :, 0]

    def gaps(self, W: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray]:
        """(duality gap, primal value) of each task's problem 1/2 ||y - X w||^2 + rho ||w||_1.

        Dual point: the residual r scaled into the dual feasible set
        {theta : ||X^T theta||_inf <= rho}, theta = s r with s = min(1, rho / ||X^T r||_inf)
        (``L1.task_dual_scales``); the gap of the squared loss at it (``squared_gap``:
        pen + s <w, grad> + (1 - s)^2/2 ||r||^2 >= 0, = 0 exactly at the optimum).  In gram
        mode ||r||^2 = y^T y - 2 w^T X^T y + w^T G w (rounding ~1e-16 y^T y, far below the
        stopping tolerance)."""
        if self.mode == "rows":
            R = self.Y - np.matmul(W[:, None, :], self.XT)[:, 0, :]
            C = np.matmul(R[:, None, :], self.X3)[:, 0, :]
            rr = np.einsum("tn,tn->t", R, R)
        else:
            GW = np.matmul(self.G, W[:, :, None])[:, :, 0]
            C = self.xty - GW
            wy = np.einsum("td,td->t", W, self.xty)
            rr = np.maximum(self.yy - 2.0 * wy + np.einsum("td,td->t", W, GW), 0.0)
        pen = rho * np.abs(W).sum(axis=1)
        s = L1(rho).task_dual_scales(C.T)
        gap = squared_gap(pen, s, -np.einsum("td,td->t", W, C), rr)
        return np.maximum(gap, 0.0), 0.5 * rr + pen

    # -- what the path needs of the support's features
    def content(self, r: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Slot content of feature j[i] of task r[i]: x_j (rows) or G[j, :] (gram)."""
        return self.XT[r, j, :] if self.mode == "rows" else self.G[r, j, :]

    def cross(self, Z: np.ndarray, z: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(X_S^T x_j (m, K), ||x_j||^2 (m,)) from the slot contents Z (m, K, L) and the
        content z (m, L) of feature j."""
        if self.mode == "rows":
            return np.matmul(Z, z[:, :, None])[:, :, 0], np.einsum("mn,mn->m", z, z)
        i = np.arange(j.size)
        return Z[i, :, j], z[i, j]

    def support_gram(self, Z: np.ndarray, feat: np.ndarray) -> np.ndarray:
        """X_S^T X_S (m, K, K) in slot order (rows and columns of free slots are 0)."""
        if self.mode == "rows":
            return np.matmul(Z, Z.transpose(0, 2, 1))
        used = feat >= 0
        return np.take_along_axis(Z, np.where(used, feat, 0)[:, None, :], axis=2) \
            * used[:, None, :]

    def support_xty(self, Z: np.ndarray, feat: np.ndarray) -> np.ndarray:
        """X_S^T y (m, K) in slot order (0 in free slots)."""
        used = feat >= 0
        return np.take_along_axis(self.xty, np.where(used, feat, 0), axis=1) * used

    def direction(self, u: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """X^T X_S u (m, d) for slot coefficients u (m, K)."""
        uZ = np.matmul(u[:, None, :], Z)                          # (m, 1, L)
        if self.mode == "rows":
            return np.matmul(uZ, self.X3)[:, 0, :]
        return uZ[:, 0, :]


def _lasso_data(tasks: TaskSet) -> _LassoData:
    return tasks.memo(("lasso_data",), lambda: _LassoData(tasks))


# ------------------------------------------------------------------------- the path
class _PathBatch:
    """Path state of a batch of tasks, one support "slot" per active feature.

    Per task (leading axis, ``m`` tasks): ``Z`` (K, L) the slot contents of the active
    features (:class:`_LassoData`; zero in free slots), ``Ainv`` (K, K) the inverse of
    X_S^T X_S with the identity on free slots, ``ws`` / ``ss`` the active coefficients and
    their signs, ``feat`` the feature of each slot (-1 = free), ``active`` (d,) the support,
    ``blocked`` (d,) features found in the span of the support, ``C`` (d,) the correlations
    X^T (y - X w), ``lam`` the penalty at which the current point is optimal.
    """

    def __init__(self, data: _LassoData, rows: np.ndarray, W0: np.ndarray,
                 lam: np.ndarray) -> None:
        m, d = rows.size, data.d
        self.rows = rows
        self.data = data.subset(rows)
        self.lam = lam.astype(np.float64, copy=True)
        self.last = np.full(m, -1)      # the feature that changed at the last kink
        self.finished = np.zeros(m, dtype=bool)
        support = W0 != 0
        count = support.sum(axis=1)
        K = int(count.max(initial=0)) + 4
        used = np.arange(K)[None, :] < count[:, None]
        order = np.argsort(~support, axis=1, kind="stable")[:, :K]    # slot order = feature order
        if order.shape[1] < K:
            order = np.pad(order, ((0, 0), (0, K - order.shape[1])))
        self.feat = np.where(used, order, -1)
        self.ss = np.where(used, np.sign(np.take_along_axis(W0, order, axis=1)), 0.0)
        source = self.data.XT if self.data.mode == "rows" else self.data.G
        self.Z = np.take_along_axis(source, order[:, :, None], axis=1) * used[:, :, None]
        self.active = support.copy()
        self.blocked = np.zeros_like(support)
        self.refresh()
        # A task starting from W = 0 at its own rho_max: the feature of largest correlation
        # sits on the boundary and joins first.
        empty = np.flatnonzero(count == 0)
        if empty.size and d:
            c = np.abs(self.C[empty])
            j = np.argmax(c >= c.max(axis=1, keepdims=True) * (1.0 - _TIE_RTOL), axis=1)
            at = np.abs(self.C[empty, j]) >= self.lam[empty] * (1.0 - 1e-12)
            if at.any():
                self.join(empty[at], j[at])

    # -- bookkeeping
    def _grow(self) -> None:
        m, K, L = self.Z.shape
        extra = 8
        self.Z = np.concatenate([self.Z, np.zeros((m, extra, L))], axis=1)
        Ainv = np.broadcast_to(np.eye(K + extra), (m, K + extra, K + extra)).copy()
        Ainv[:, :K, :K] = self.Ainv
        self.Ainv = Ainv
        self.ws = np.concatenate([self.ws, np.zeros((m, extra))], axis=1)
        self.ss = np.concatenate([self.ss, np.zeros((m, extra))], axis=1)
        self.feat = np.concatenate([self.feat, np.full((m, extra), -1)], axis=1)

    def keep(self, sel: np.ndarray) -> None:
        self.data = self.data.subset(sel)
        for name in ("rows", "Z", "Ainv", "ws", "ss", "feat", "active", "blocked", "lam",
                     "last", "C", "finished"):
            setattr(self, name, getattr(self, name)[sel])

    def refresh(self) -> None:
        """Recompute the inverse Gram, the coefficients at ``lam`` and the correlations from
        the data (the incremental updates are exact in exact arithmetic only)."""
        free = self.feat < 0
        A = self.data.support_gram(self.Z, self.feat)
        k = np.arange(A.shape[1])
        A[:, k, k] += free
        try:
            self.Ainv = np.linalg.inv(A)
        except np.linalg.LinAlgError:  # a singular support (only from a degenerate init)
            self.Ainv = np.linalg.pinv(A)
        b = self.data.support_xty(self.Z, self.feat) - self.lam[:, None] * self.ss
        self.ws = np.matmul(self.Ainv, b[:, :, None])[:, :, 0] * ~free
        W = np.zeros((self.rows.size, self.data.d))
        r, p = np.nonzero(~free)
        W[r, self.feat[r, p]] = self.ws[r, p]
        self.C = self.data.correlations(W)

    def join(self, r: np.ndarray, j: np.ndarray) -> None:
        """Feature j[i] joins the support of task r[i] (coefficient 0, sign of its
        correlation): bordered update of the inverse Gram.  A feature in the span of the
        support is blocked instead (``_SPAN_RTOL``)."""
        if np.any((self.feat[r] >= 0).all(axis=1)):
            self._grow()
        every = r.size == self.rows.size     # every task of the batch: update in place
        z = self.data.content(r, j)                                # (m', L)
        b, xx = self.data.cross(self.Z if every else self.Z[r], z, j)   # X_S^T x_j, ||x_j||^2
        Ai = self.Ainv if every else self.Ainv[r]
        v = np.matmul(Ai, b[:, :, None])[:, :, 0]
        schur = xx - np.einsum("mk,mk->m", b, v)
        spanned = schur <= _SPAN_RTOL * xx
        if spanned.any():
            self.blocked[r[spanned], j[spanned]] = True
            keep = ~spanned
            r, j, z, Ai, v, schur = r[keep], j[keep], z[keep], Ai[keep], v[keep], schur[keep]
            every = False
            if not r.size:
                return
        p = np.argmax(self.feat[r] < 0, axis=1)
        i = np.arange(r.size)
        vs = v / schur[:, None]
        Ai += v[:, :, None] * vs[:, None, :]
        Ai[i, p, :] = -vs
        Ai[i, :, p] = -vs
        Ai[i, p, p] = 1.0 / schur
        if not every:
            self.Ainv[r] = Ai
        self.Z[r, p, :] = z
        self.ss[r, p] = np.sign(self.C[r, j])
        self.ws[r, p] = 0.0
        self.feat[r, p] = j
        self.active[r, j] = True
        self.last[r] = j

    def leave(self, r: np.ndarray, p: np.ndarray) -> None:
        """The feature in slot p[i] of task r[i] leaves the support (its coefficient reached
        0): downdate of the inverse Gram."""
        i = np.arange(r.size)
        every = r.size == self.rows.size
        Ai = self.Ainv if every else self.Ainv[r]
        col = Ai[i, :, p].copy()
        row = Ai[i, p, :] / Ai[i, p, p][:, None]
        Ai -= col[:, :, None] * row[:, None, :]
        Ai[i, p, :] = 0.0
        Ai[i, :, p] = 0.0
        Ai[i, p, p] = 1.0
        if not every:
            self.Ainv[r] = Ai
        j = self.feat[r, p]
        self.Z[r, p, :] = 0.0
        self.ss[r, p] = self.ws[r, p] = 0.0
        self.feat[r, p] = -1
        self.active[r, j] = False
        self.blocked[r] = False      # the span of the support shrank
        self.last[r] = j

    def coefficients(self) -> np.ndarray:
        """The batch's current coefficients as (m, d)."""
        W = np.zeros((self.rows.size, self.data.d))
        r, p = np.nonzero(self.feat >= 0)
        W[r, self.feat[r, p]] = self.ws[r, p]
        return W

    # -- one kink
    def step(self, rho: float) -> np.ndarray:
        """Move every task of the batch to its next kink, or to ``rho`` if that comes first;
        returns which tasks are at rho."""
        m = self.rows.size
        i = np.arange(m)
        u = np.matmul(self.Ainv, self.ss[:, :, None])[:, :, 0]      # dw_S / d(-lam)
        V = self.data.direction(u, self.Z)                          # dC / d(lam)
        sig = np.where(rho > self.lam, 1.0, -1.0)[:, None]
        lam = self.lam[:, None]
        # lam moves by t = sig * tau (tau >= 0): w_S -> w_S - t u, C -> C + t V.  An inactive
        # feature joins when C_j reaches +-(lam + t) moving outwards; an active one leaves
        # when its coefficient reaches 0.  Each event time is (distance to the boundary) /
        # (rate towards it), taken only when the rate is positive; a distance that rounding
        # made slightly negative counts as 0 (the event is due now).
        rate_up = sig * (V - 1.0)             # d/dtau of C_j - (lam + t)
        rate_down = -sig * (V + 1.0)          # d/dtau of -C_j - (lam + t)
        rate_zero = sig * self.ss * u         # d/dtau of -|w_j| (w_j of sign ss_j)
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where(rate_up > 0, np.maximum(lam - self.C, 0.0) / rate_up, np.inf)
            down = np.where(rate_down > 0, np.maximum(lam + self.C, 0.0) / rate_down, np.inf)
            out = np.where(rate_zero > 0, np.maximum(self.ss * self.ws, 0.0) / rate_zero,
                           np.inf)
        # the feature that changed at the last kink does not change back at once (it sits on
        # its boundary; in exact arithmetic it moves away from it)
        free = ~self.active & ~self.blocked
        just = self.last >= 0
        free[i[just], self.last[just]] = False
        t_in = np.where(free, np.minimum(up, down), np.inf)
        t_out = np.where((self.feat >= 0) & (self.feat != self.last[:, None]), out, np.inf)
        first_in = t_in.min(axis=1)
        j_in = np.argmax(t_in <= (first_in + _TIE_RTOL * (first_in + self.lam))[:, None], axis=1)
        p_out = t_out.argmin(axis=1)
        first_out = t_out[i, p_out]
        to_rho = np.abs(rho - self.lam)
        tau = np.minimum(np.minimum(first_in, first_out), to_rho)
        t = sig[:, 0] * tau
        self.ws -= t[:, None] * u
        self.C += t[:, None] * V
        self.lam += t
        done = tau >= to_rho
        self.lam[done] = rho
        joins = np.flatnonzero(~done & (first_in <= first_out))
        leaves = np.flatnonzero(~done & (first_in > first_out))
        if joins.size:
            self.join(joins, j_in[joins])
        if leaves.size:
            self.leave(leaves, p_out[leaves])
        return done


def lasso_path_solve(data: _LassoData, rho: float, W0: np.ndarray, lam0: np.ndarray,
                     max_steps: int, on_step=None) -> tuple[np.ndarray, int]:
    """Follow each task's LASSO path from (W0[t], lam0[t]) -- a point where the optimality
    conditions hold at penalty lam0[t] -- to rho; return (W (T, d), steps).

    The coefficients at rho are solved afresh on each task's final support and signs:
    w_S = (X_S^T X_S)^{-1} (X_S^T y - rho s_S).  ``on_step(step, current W)`` is called after
    every step (progress reports)."""
    W = W0.copy()
    rows = np.flatnonzero(lam0 != rho)
    finals: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    steps = 0
    if rows.size:
        path = _PathBatch(data, rows, W0[rows], lam0[rows])
        while path.rows.size and steps < max_steps:
            steps += 1
            new = path.step(rho) & ~path.finished
            if on_step is not None:
                W[path.rows] = path.coefficients()
                on_step(steps, W)
            if new.any():
                finals.append((path.rows[new], path.feat[new], path.ss[new]))
                path.finished |= new
                # tasks at rho stay in the batch (standing still) until a quarter has arrived
                if 4 * path.finished.sum() >= path.rows.size:
                    path.keep(~path.finished)
            if steps % _REFRESH_EVERY == 0 and path.rows.size:
                path.refresh()
        left = ~path.finished
        if left.any():  # out of steps: solve at rho on the support reached
            finals.append((path.rows[left], path.feat[left], path.ss[left]))
    if finals:
        K = max(f.shape[1] for _, f, _ in finals)
        r = np.concatenate([f[0] for f in finals])
        feat = np.concatenate([np.pad(f, ((0, 0), (0, K - f.shape[1])), constant_values=-1)
                               for _, f, _ in finals])
        ss = np.concatenate([np.pad(g, ((0, 0), (0, K - g.shape[1]))) for _, _, g in finals])
        W[r] = _solve_on_support(data.subset(r), feat, ss, rho)
    return W, steps


def _solve_on_support(data: _LassoData, feat: np.ndarray, ss: np.ndarray,
                      rho: float) -> np.ndarray:
    """W (m, d) solving X_S^T X_S w_S = X_S^T y - rho s_S on each task's support."""
    used = feat >= 0
    idx = np.where(used, feat, 0)
    source = data.XT if data.mode == "rows" else data.G
    Z = np.take_along_axis(source, idx[:, :, None], axis=1) * used[:, :, None]
    A = data.support_gram(Z, feat)
    k = np.arange(A.shape[1])
    A[:, k, k] += ~used
    b = data.support_xty(Z, feat) - rho * ss
    try:
        w = np.linalg.solve(A, b[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:  # a singular support (collinear features): least squares
        w = np.stack([np.linalg.lstsq(a, v, rcond=None)[0] for a, v in zip(A, b)])
    out = np.zeros((feat.shape[0], data.d))
    i, p = np.nonzero(used)
    out[i, feat[i, p]] = w[i, p]
    return out


def lasso_cd_finish(data: _LassoData, W: np.ndarray, rho: float, tol: float,
                    max_sweeps: int) -> tuple[np.ndarray, int]:
    """Cyclic coordinate descent from W (m, d) on the tasks of ``data``, all at once (one
    feature at a time, vectorised over the tasks), until each task's duality gap is
    <= tol ||y_t||^2 (checked every 10 sweeps) or ``max_sweeps``; returns (W, sweeps).

    Finishes the few tasks whose path the homotopy could not certify: data with exact ties
    or collinear features (integer-coded designs), where the path is not unique.  Keeps the
    correlations C = X^T (y - X w) (gram mode) or the residuals (rows mode) up to date."""
    W = W.copy()
    m, d = W.shape
    rows_mode = data.mode == "rows"
    if rows_mode:
        norms = np.einsum("mdn,mdn->md", data.XT, data.XT)
        state = data.Y - np.matmul(W[:, None, :], data.XT)[:, 0, :]    # residuals
    else:
        norms = np.einsum("mdd->md", data.G).copy()
        state = data.correlations(W)
    inv = np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)
    todo = np.arange(m)
    sweeps = 0
    while todo.size and sweeps < max_sweeps:
        sweeps += 1
        for j in range(d):
            w, h = W[todo, j], inv[todo, j]
            x = data.XT[todo, j, :] if rows_mode else data.G[todo, :, j]
            c = np.einsum("mn,mn->m", x, state[todo]) if rows_mode else state[todo, j]
            z = w + c * h
            new = np.sign(z) * np.maximum(np.abs(z) - rho * h, 0.0)
            state[todo] -= (new - w)[:, None] * x
            W[todo, j] = new
        if sweeps % 10 == 0 or sweeps == max_sweeps:
            sub = data.subset(todo)
            gaps, _ = sub.gaps(W[todo], rho)
            met = gaps <= tol * sub.yy
            # coordinate descent finds the support and signs long before the values on an
            # ill-conditioned support: solve on them exactly, keep it where certified
            polished = _solve_on_support(sub, *_support_slots(W[todo]), rho)
            pgaps, _ = sub.gaps(polished, rho)
            better = ~met & (pgaps <= tol * sub.yy)
            W[todo[better]] = polished[better]
            todo = todo[~(met | better)]
    return W, sweeps


def _support_slots(W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(feat, signs) slot arrays of the supports of W (m, d) (-1 / 0 in unused slots)."""
    support = W != 0
    K = max(int(support.sum(axis=1).max(initial=0)), 1)
    order = np.argsort(~support, axis=1, kind="stable")[:, :K]
    used = np.take_along_axis(support, order, axis=1)
    signs = np.sign(np.take_along_axis(W, order, axis=1))
    return np.where(used, order, -1), np.where(used, signs, 0.0)


def _kkt_holds(data: _LassoData, W: np.ndarray, lam: float, rtol: float = 1e-9) -> np.ndarray:
    """Per task: whether W[t] satisfies the LASSO optimality conditions at penalty ``lam``
    (|C_j| <= lam off the support, C_j = lam sign(w_j) on it, to ``rtol`` relative)."""
    C = data.correlations(W)
    on = W != 0
    slack = rtol * max(lam, 1e-300)
    off_ok = np.where(on, True, np.abs(C) <= lam + slack).all(axis=1)
    on_ok = np.where(on, np.abs(C - lam * np.sign(W)) <= slack, True).all(axis=1)
    return off_ok & on_ok


class LASSO(LinearMTLModel):
    """Per-task l1 least squares; ``rho_ratio`` in (0, 1] scales rho_max.  Solver: the
    batched LASSO homotopy (module docstring)."""

    name = "lasso"
    cost_hint = 1.8  # s per unit on the reference problem (mtlbench.runner.cost)
    paper = "Tibshirani, Regression shrinkage and selection via the lasso, JRSS-B 1996"
    search_space = {"rho_ratio": Log([0.003, 0.01, 0.03, 0.1, 0.3], low=None, high=1.0)}
    param_constraints = {"tol": Linear([1e-8], low=0.0), "max_iter": Int([10000], low=1)}
    convex = True
    target_kinds = ("binary", "real")
    supports_warm_start = True
    solver_name = "homotopy"
    #: both solvers stop at a per-task duality gap <= 1e-8 ||y_t||^2 (the homotopy near 1e-15)
    solver_agreement_rtol = 1e-8

    def __init__(self, rho_ratio: float = 0.03, tol: float = 1e-8, max_iter: int = 10000):
        self.rho_ratio = rho_ratio
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, tasks: TaskSet, init=None) -> "LASSO":
        self.check_params()
        data = _lasso_data(tasks)
        T, d = tasks.T, tasks.d
        rho = self.rho_ = float(self.rho_ratio) * float(data.rho_max.max(initial=0.0))
        listening = progress_active()

        def on_step(step: int, W: np.ndarray) -> None:
            report_progress(step, lambda: float(data.gaps(W, rho)[1].sum()),
                            lambda: float(data.gaps(W, rho)[0].sum()))

        cold_W = np.zeros((T, d))
        cold_lam = np.maximum(data.rho_max, rho)   # rho_max_t <= rho: W = 0 is the optimum
        W0, lam0 = cold_W, cold_lam
        warm = np.zeros(T, dtype=bool)
        if init is not None and getattr(init, "coef_", None) is not None \
                and init.coef_.shape == (d, T) and getattr(init, "rho_", None) is not None:
            warm = _kkt_holds(data, init.coef_.T, float(init.rho_))
            W0 = np.where(warm[:, None], init.coef_.T, cold_W)
            lam0 = np.where(warm, float(init.rho_), cold_lam)
        W, steps = lasso_path_solve(data, rho, W0, lam0, int(self.max_iter),
                                    on_step if listening else None)
        gaps, primal = data.gaps(W, rho)
        missed = np.flatnonzero(~(gaps <= float(self.tol) * data.yy))
        finished_by_cd = missed.size
        if missed.size:  # degenerate data (ties, collinear features) can derail the path
            start = np.where(np.isfinite(W[missed]).all(axis=1)[:, None], W[missed], 0.0)
            W[missed], sweeps = lasso_cd_finish(data.subset(missed), start, rho,
                                                float(self.tol), int(self.max_iter))
            steps += sweeps
            gaps, primal = data.gaps(W, rho)
        missed = ~(gaps <= float(self.tol) * data.yy)
        self._store(tasks, W.T.copy(), float(primal.sum()), steps, int(missed.sum()), gaps, warm)
        self.diagnostics_["tasks_finished_by_cd"] = int(finished_by_cd)
        if listening:
            report_progress(steps + 1, lambda: self.fitted_objective(tasks), float(gaps.sum()))
        return self

    def _store(self, tasks: TaskSet, W: np.ndarray, objective: float, n_iter: int,
               unconverged: int, gaps: np.ndarray | None,
               warm: np.ndarray | None = None) -> None:
        self.coef_ = W
        self.n_iter_ = int(n_iter)
        self.converged_ = unconverged == 0
        self.diagnostics_ = {"rho": self.rho_, "unconverged_tasks": int(unconverged),
                             "solver": self.solver_name}
        if gaps is not None:
            yy = _lasso_data(tasks).yy
            self.diagnostics_["max_relative_gap"] = float(np.max(gaps / np.maximum(yy, 1e-300)))
        if warm is not None:
            self.diagnostics_["warm_started_tasks"] = int(warm.sum())
        self.objective_history_ = [objective]

    def fitted_objective(self, tasks: TaskSet) -> float:
        """F(coef_) = sum_t 1/2 ||y_t - X_t w_t||^2 + rho ||W||_1 on ``tasks``."""
        return lasso_objective(tasks, self.coef_, self.rho_)


class LASSOSklearnCD(LASSO):
    """The same objective by scikit-learn's coordinate descent, one task at a time (the first
    release's solver); progress is reported after each task."""

    solver_name = "sklearn-cd"

    def fit(self, tasks: TaskSet, init=None) -> "LASSOSklearnCD":
        self.check_params()
        self.rho_ = float(self.rho_ratio) * float(_lasso_data(tasks).rho_max.max(initial=0.0))
        W = np.zeros((tasks.d, tasks.T))
        warm = init is not None and getattr(init, "coef_", None) is not None \
            and init.coef_.shape == W.shape
        iters = 0
        unconverged = 0
        for t in range(tasks.T):
            X, y = tasks.X(t), tasks.y(t)
            est = _SkLasso(alpha=self.rho_ / X.shape[0], fit_intercept=False, tol=self.tol,
                           max_iter=self.max_iter, warm_start=warm, selection="cyclic")
            if warm:
                est.coef_ = init.coef_[:, t].copy()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                est.fit(X, y)
            unconverged += any(issubclass(w.category, ConvergenceWarning) for w in caught)
            W[:, t] = est.coef_
            iters = max(iters, int(est.n_iter_))
            # the objective at (tasks 0..t solved, the others still at 0)
            report_progress(t + 1, lambda: lasso_objective(tasks, W, self.rho_))
        gaps = _lasso_data(tasks).gaps(W.T, self.rho_)[0] if progress_active() else None
        self._store(tasks, W, lasso_objective(tasks, W, self.rho_), iters, unconverged, gaps)
        if gaps is not None:
            report_progress(tasks.T + 1, self.objective_history_[-1], float(gaps.sum()))
        return self


LASSO.solvers = {"sklearn-cd": LASSOSklearnCD}


@hookimpl
def register_models(register):
    register(LASSO)
