"""rMTFL: Gong, Ye, Zhang, "Robust Multi-Task Feature Learning", KDD 2012.

Objective (the paper's decomposition W = P + Q, W of shape d x T, column t = task t)::

    min_{P, Q}  J(P + Q) + lam1 * ||P||_{1,2} + lam2 * ||Q^T||_{1,2}

    J(W)          = sum_t 1/2 ||y_t - X_t w_t||^2   (TFCL paper, Experimental Settings: the
                                                   instance-wise squared loss used for every
                                                   competitor; ``SquaredLoss``)
    ||P||_{1,2}   = sum_i ||P[i, :]||_2             (rows = features: features shared by the
                                                   non-outlier tasks, group-sparse rows)
    ||Q^T||_{1,2} = sum_t ||Q[:, t]||_2             (columns = tasks: non-zero columns are the
                                                   outlier tasks)

This is the paper's problem (its Eq. for rMTFL: L(W) + lambda_1 ||P||_{1,2} +
lambda_2 ||Q^T||_{1,2} s.t. W = P + Q); the authors' MALSAR implementation
(``Least_rMTFL.m``) states the same objective with ||X(P+Q) - Y||_F^2 (no 1/2).  We use the
TFCL paper's 1/2 sum_t ||.||^2 (which only rescales lam1, lam2 by 2).

Solver: accelerated proximal gradient (FISTA) on the pair (P, Q) jointly, as in the paper:
both blocks get the common gradient G = grad J(P + Q); the prox separates into row-group
shrinkage of P and column-group shrinkage of Q (``_prox.prox_group_rows/cols``).  Step 1/L with
backtracking (L doubled until J(P+Q) <= J(Y) + <G, dP + dQ> + L/2 (||dP||^2 + ||dQ||^2)),
starting from L = Lip(grad J) = max_t ||X_t||_2^2 (the joint gradient's Lipschitz constant is
at most 2 Lip(grad J), so at most one doubling happens).  Momentum is restarted when the
objective increases (O'Donoghue & Candes 2015) -- a safeguard, the minimiser is the same.
Stopping: ||(P, Q) - (P, Q)_prev||_F <= tol * max(1, ||(P, Q)||_F) (default 1e-6) or max_iter.

Hyperparameters (scale-free fractions of the smallest values that make (P, Q) = 0 optimal;
G0 = grad J(0) = -[X_t^T y_t]_t):
    lam1_ratio -> lam1 = lam1_ratio * max_i ||G0[i, :]||_2   (paper's lambda_1)
    lam2_ratio -> lam2 = lam2_ratio * max_t ||G0[:, t]||_2   (paper's lambda_2)
The paper tunes lambda_1, lambda_2 by cross-validation over a grid it does not list; our grid
(3 x 3: lam1_ratio in {0.1, 0.3, 0.7}, lam2_ratio in {0.1, 0.3, 1.0}) spans dense-to-sparse
rows of P and "many outlier tasks" to "none" (lower grids selected their upper lam1 edge on the
simulated data).

Fitted attributes: ``P_`` (shared rows), ``Q_`` (outlier columns), ``coef_ = P_ + Q_``,
``task_outliers_`` (bool, non-zero columns of Q), ``objective_history_``, ``n_iter_``.
"""
from __future__ import annotations

import numpy as np

from mtlbench import LinearMTLModel, TaskSet, hookimpl

from ._losses import SquaredLoss
from ._prox import prox_group_cols, prox_group_rows


def rmtfl_lambda_max(loss: SquaredLoss) -> tuple[float, float]:
    """(max row norm, max column norm) of grad J(0): (P, Q) = 0 is optimal iff
    lam1 >= the first and lam2 >= the second."""
    G0 = loss.grad(np.zeros((loss.d, loss.T)))
    return (float(np.linalg.norm(G0, axis=1).max()), float(np.linalg.norm(G0, axis=0).max()))


def rmtfl_penalty(P: np.ndarray, Q: np.ndarray, lam1: float, lam2: float) -> float:
    return float(lam1 * np.linalg.norm(P, axis=1).sum() + lam2 * np.linalg.norm(Q, axis=0).sum())


class Residuals:
    """The affine map W -> (X_t w_t)_t of a :class:`SquaredLoss`, used by the APG solvers.

    J is quadratic, so the predictions at an extrapolated point Y = W_k + beta (W_k - W_{k-1})
    are the same combination of the predictions at W_k and W_{k-1}: each APG iteration needs
    one forward pass (predictions of the new iterate: backtracking test and objective value)
    and one backward pass (gradient), instead of recomputing J and grad J from scratch.
    At SUN scale the passes over the data (250 x 50 x 2048) dominate the cost.
    """

    def __init__(self, loss: SquaredLoss) -> None:
        self.loss = loss

    def forward(self, W: np.ndarray) -> list[np.ndarray]:
        return [X @ W[:, t] for t, X in enumerate(self.loss.Xs)]

    def value(self, A: list[np.ndarray]) -> float:
        return float(sum(0.5 * w * np.dot(a - y, a - y)
                         for w, a, y in zip(self.loss.weights, A, self.loss.ys)))

    def grad(self, A: list[np.ndarray]) -> np.ndarray:
        G = np.empty((self.loss.d, self.loss.T))
        for t, (X, a, y) in enumerate(zip(self.loss.Xs, A, self.loss.ys)):
            G[:, t] = self.loss.weights[t] * (X.T @ (a - y))
        return G

    @staticmethod
    def combine(A1: list[np.ndarray], A0: list[np.ndarray], beta: float) -> list[np.ndarray]:
        """Predictions at W1 + beta (W1 - W0)."""
        return [a1 + beta * (a1 - a0) for a1, a0 in zip(A1, A0)]


def rmtfl_solve(loss: SquaredLoss, lam1: float, lam2: float, P0: np.ndarray, Q0: np.ndarray,
                tol: float = 1e-6, max_iter: int = 5000):
    """FISTA with backtracking on (P, Q).  Returns (P, Q, objective history, iterations).

    Monotone: a step that increases the objective is replaced by a plain proximal-gradient
    step from the last iterate and the momentum is restarted.
    """
    R = Residuals(loss)

    def step_from(YP, YQ, AY, L):
        fY = R.value(AY)
        G = R.grad(AY)
        while True:
            Pn = prox_group_rows(YP - G / L, lam1 / L)
            Qn = prox_group_cols(YQ - G / L, lam2 / L)
            dP, dQ = Pn - YP, Qn - YQ
            An = R.forward(Pn + Qn)
            fn = R.value(An)
            quad = fY + np.sum(G * (dP + dQ)) + 0.5 * L * (np.sum(dP * dP) + np.sum(dQ * dQ))
            if fn <= quad + 1e-12 * max(abs(quad), 1.0):
                return Pn, Qn, An, fn, L
            L *= 2.0

    P, Q = P0.copy(), Q0.copy()
    A = R.forward(P + Q)
    F = R.value(A) + rmtfl_penalty(P, Q, lam1, lam2)
    YP, YQ, AY = P, Q, A
    t_k = 1.0
    L = max(loss.lipschitz, 1e-12)
    hist = [float(F)]
    it = 0
    for it in range(1, max_iter + 1):
        Pn, Qn, An, fn, L = step_from(YP, YQ, AY, L)
        Fn = fn + rmtfl_penalty(Pn, Qn, lam1, lam2)
        if Fn > F:  # restart: plain proximal-gradient step from the last iterate
            t_k = 1.0
            Pn, Qn, An, fn, L = step_from(P, Q, A, L)
            Fn = fn + rmtfl_penalty(Pn, Qn, lam1, lam2)
            if Fn > F:  # no progress possible at machine precision
                break
        step = np.sqrt(np.sum((Pn - P) ** 2) + np.sum((Qn - Q) ** 2))
        size = np.sqrt(np.sum(Pn * Pn) + np.sum(Qn * Qn))
        t_next = (1.0 + np.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0
        beta = (t_k - 1.0) / t_next
        YP = Pn + beta * (Pn - P)
        YQ = Qn + beta * (Qn - Q)
        AY = R.combine(An, A, beta)
        P, Q, A, F, t_k = Pn, Qn, An, Fn, t_next
        hist.append(float(F))
        if step <= tol * max(1.0, size):
            break
    return P, Q, hist, it


class RMTFL(LinearMTLModel):
    """Robust multi-task feature learning (W = P + Q; rows of P shared, columns of Q outliers)."""

    name = "rmtfl"
    paper = "Gong, Ye, Zhang, Robust Multi-Task Feature Learning, KDD 2012"
    search_space = {"lam1_ratio": [0.1, 0.3, 0.7], "lam2_ratio": [0.1, 0.3, 1.0]}
    supports_warm_start = True

    def __init__(self, lam1_ratio: float = 0.3, lam2_ratio: float = 0.3, tol: float = 1e-6,
                 max_iter: int = 5000):
        self.lam1_ratio = lam1_ratio
        self.lam2_ratio = lam2_ratio
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, tasks: TaskSet, init=None) -> "RMTFL":
        for nm in ("lam1_ratio", "lam2_ratio"):
            v = getattr(self, nm)
            if not (isinstance(v, (int, float, np.floating, np.integer)) and v >= 0):
                raise ValueError(f"rmtfl: {nm} must be a number >= 0, got {v!r}")
        if not self.tol >= 0:
            raise ValueError(f"rmtfl: tol must be >= 0, got {self.tol}")
        if not (isinstance(self.max_iter, (int, np.integer)) and self.max_iter >= 1):
            raise ValueError(f"rmtfl: max_iter must be an integer >= 1, got {self.max_iter!r}")
        loss = SquaredLoss(tasks)
        m1, m2 = rmtfl_lambda_max(loss)
        self.lam1_ = float(self.lam1_ratio) * m1
        self.lam2_ = float(self.lam2_ratio) * m2
        shape = (tasks.d, tasks.T)
        P0, Q0 = np.zeros(shape), np.zeros(shape)
        if self.lam1_ratio >= 1 and self.lam2_ratio >= 1:
            # (P, Q) = 0 satisfies the optimality conditions exactly (every row norm of G0 is
            # <= lam1 and every column norm <= lam2): return it without arithmetic, so the
            # zeros are exact on every CPU/BLAS (a prox step at the threshold leaves ~1e-17).
            P, Q = P0, Q0
            hist, it = [SquaredLoss(tasks).value(P0 + Q0)], 0
            self._store(P, Q, hist, it)
            return self
        if init is not None and getattr(init, "P_", None) is not None and init.P_.shape == shape:
            P0, Q0 = init.P_, init.Q_
        P, Q, hist, it = rmtfl_solve(loss, self.lam1_, self.lam2_, P0, Q0,
                                     tol=float(self.tol), max_iter=int(self.max_iter))
        self._store(P, Q, hist, it)
        return self

    def _store(self, P: np.ndarray, Q: np.ndarray, hist: list, it: int) -> None:
        self.P_, self.Q_ = P, Q
        self.coef_ = P + Q
        self.objective_history_ = hist
        self.n_iter_ = it
        self.shared_features_ = np.linalg.norm(P, axis=1) > 0
        self.task_outliers_ = np.linalg.norm(Q, axis=0) > 0
        self.diagnostics_ = {
            "lam1": self.lam1_, "lam2": self.lam2_,
            "n_shared_features": int(self.shared_features_.sum()),
            "outlier_tasks": np.flatnonzero(self.task_outliers_).tolist(),
            "converged": it < int(self.max_iter),
        }

    def objective(self, tasks: TaskSet) -> float:
        """The paper's objective at the fitted (P_, Q_)."""
        return SquaredLoss(tasks).value(self.coef_) + rmtfl_penalty(self.P_, self.Q_,
                                                                      self.lam1_, self.lam2_)


@hookimpl
def register_models(register):
    register(RMTFL)
