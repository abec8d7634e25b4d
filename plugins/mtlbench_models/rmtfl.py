"""rMTFL: robust multi-task feature learning.

P. Gong, J. Ye and C. Zhang, "Robust Multi-Task Feature Learning", Proceedings of the 18th ACM
SIGKDD International Conference on Knowledge Discovery and Data Mining (KDD), 2012; a
competitor of the TFCL paper (Sec. Competitors).  The paper's decomposition W = P + Q (W of
shape d x T, column t = task t)::

    min_{P, Q}  J(P + Q) + lam1 ||P||_{1,2} + lam2 ||Q^T||_{1,2}

    J(W)          = sum_t 1/2 ||y_t - X_t w_t||^2   (the TFCL paper's instance-wise squared
                                                   loss for every competitor, Sec.
                                                   Experimental Settings)
    ||P||_{1,2}   = sum_i ||P[i, :]||_2             (rows = features shared by the
                                                   non-outlier tasks)
    ||Q^T||_{1,2} = sum_t ||Q[:, t]||_2             (non-zero columns = outlier tasks)

The authors' MALSAR implementation (``Least_rMTFL.m``) writes the loss ||X(P+Q) - Y||_F^2
without the 1/2, which only rescales lam1 and lam2 by 2.

Solver: accelerated proximal gradient (FISTA) on the pair (P, Q) jointly, as in the paper:
both blocks get the common gradient G = grad J(P + Q); the prox separates into row-group
shrinkage of P and column-group shrinkage of Q.  Step 1/L with backtracking (L doubled until
J(P+Q) <= J(Y) + <G, dP + dQ> + L/2 (||dP||^2 + ||dQ||^2)), starting from
L = Lip(grad J) = max_t ||X_t||_2^2 (the joint gradient's Lipschitz constant is at most
2 Lip(grad J), so at most one doubling happens).  Momentum restarts when the objective
increases (O'Donoghue & Candes 2015), a safeguard that leaves the minimiser alone.  A second
solver, :class:`RMTFLCvxpy` (``cvxpy``), solves the same problem as a second-order cone
program with an interior-point method, an independent check of the optimum for
``mtlbench race`` (agreement within ``solver_agreement_rtol`` = 2e-6: the gap tolerance 1e-6
plus the conic solver's accuracy, about 1e-8).

Stopping rule and certificate (convex problem): the duality gap (:func:`rmtfl_gap`),
gap(P, Q) <= tol * F(P, Q) with tol = 1e-6 (F - F* <= gap), reported as the certificate of
every iterate; ``converged_`` is True iff that held within ``max_iter`` (5000) iterations and
``gap_`` is the relative gap reached.  Warm starts along a search reach the same optimum (to
the gap tolerance).

Search space (scale-free fractions of the smallest weights that make (P, Q) = 0 optimal,
G0 = grad J(0) = -[X_t^T y_t]_t): lam1 = lam1_ratio * max_i ||G0[i, :]||_2 (the paper's
lambda_1), lam2 = lam2_ratio * max_t ||G0[:, t]||_2 (lambda_2); both Log with bounds (0, 1].
With both ratios at 1, (P, Q) = 0 is optimal exactly (the KKT conditions hold at 0); one ratio
at 1 switches its block off at W = 0, and the search does not go beyond the value that does
so.  Start ranges lam1_ratio [0.15, 0.6], lam2_ratio [0.25, 1.0], set on the training and
validation splits of repetitions 0 and 1 of ``simulated[seed=101]``: validation AUC peaked at
lam1_ratio = 0.3 (0.8375, interior) and rose with lam2_ratio up to its bound 1 (flat from
0.6); lam2_ratio <= 0.1 was worse (<= 0.82) and 3-10x slower.

Unverified: the paper's equation numbers and its tuning grid (it tunes lambda_1, lambda_2 by
cross-validation over a grid it does not list).
"""
from __future__ import annotations


import numpy as np

from mtlbench import Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl, report_progress

from ._core.conic import solve_conic, stacked_design
from ._core.datafits import SquaredLoss, squared_gap
from ._core.representations import task_xty
from ._core.penalties import L21, BlockSum
from ._core.solvers import FISTA, SumOfBlocks


def rmtfl_lambda_max(loss: SquaredLoss) -> tuple[float, float]:
    """(max row norm, max column norm) of grad J(0): (P, Q) = 0 is optimal iff
    lam1 >= the first and lam2 >= the second."""
    G0 = loss.grad(np.zeros((loss.d, loss.T)))
    return (float(np.linalg.norm(G0, axis=1).max()), float(np.linalg.norm(G0, axis=0).max()))


def rmtfl_penalties(lam1: float, lam2: float) -> BlockSum:
    """lam1 ||P||_{1,2} + lam2 ||Q^T||_{1,2} on the stacked blocks (P, Q) (2 x d x T)."""
    return BlockSum(L21(lam1, "rows"), L21(lam2, "columns"))


def rmtfl_penalty(P: np.ndarray, Q: np.ndarray, lam1: float, lam2: float) -> float:
    return rmtfl_penalties(lam1, lam2).value(np.stack([P, Q]))


def rmtfl_gap(W: np.ndarray, G: np.ndarray, rr: float, pen: float, lam1: float,
              lam2: float) -> float:
    """Duality gap of the rMTFL problem at (P, Q) with W = P + Q.

    Fenchel dual (residuals r_t = X_t w_t - y_t, dual variable s r with s in [0, 1]):
    the conjugate of the penalty, as an infimal convolution over W = P + Q, is the indicator of
    {Theta : every row norm <= lam1 and every column norm <= lam2}; the largest s for which
    Theta = s G (G = grad J(W) = [X_t^T r_t]_t) is feasible is
    s = min(1, lam1 / max_i ||G[i, :]||, lam2 / max_t ||G[:, t]||) (``BlockSum.dual_scale``),
    and the gap (``squared_gap``) is

        gap = pen(P, Q) + s <W, G> + (1 - s)^2 / 2 ||r||^2        (>= 0, = 0 at the optimum)

    (``rr`` = ||r||^2 = 2 J(W))."""
    s = rmtfl_penalties(lam1, lam2).dual_scale(G)
    return float(squared_gap(pen, s, np.sum(W * G), rr))


def rmtfl_solve(loss: SquaredLoss, lam1: float, lam2: float, P0: np.ndarray, Q0: np.ndarray,
                tol: float = 1e-6, max_iter: int = 5000):
    """FISTA (``_core.solvers.FISTA``: backtracking, monotone restart) on the stacked blocks
    (P, Q) with the common gradient grad J(P + Q) (``SumOfBlocks``), stopped at a relative
    duality gap <= ``tol``.  Returns (P, Q, objective history, iterations, relative gap)."""
    res = FISTA(tol=tol, max_iter=max_iter).solve(SumOfBlocks(loss),
                                                  rmtfl_penalties(lam1, lam2),
                                                  np.stack([P0, Q0]))
    return res.W[0], res.W[1], res.history, res.n_iter, res.certificate


class RMTFL(LinearMTLModel):
    """Robust multi-task feature learning (W = P + Q; rows of P shared, columns of Q outliers)."""

    name = "rmtfl"
    cost_hint = 6.0  # s per unit on the reference problem (mtlbench.runner.cost)
    paper = "Gong, Ye, Zhang, Robust Multi-Task Feature Learning, KDD 2012"
    search_space = {"lam1_ratio": Log([0.15, 0.3, 0.6], low=None, high=1.0),
                    "lam2_ratio": Log([0.25, 0.5, 1.0], low=None, high=1.0)}
    param_constraints = {"tol": Linear([1e-6], low=0.0), "max_iter": Int([5000], low=1)}
    convex = True
    target_kinds = ("binary", "real")
    supports_warm_start = True
    solver_name = "fista"
    solver_agreement_rtol = 2e-6

    def __init__(self, lam1_ratio: float = 0.3, lam2_ratio: float = 0.5, tol: float = 1e-6,
                 max_iter: int = 5000):
        self.lam1_ratio = lam1_ratio
        self.lam2_ratio = lam2_ratio
        self.tol = tol
        self.max_iter = max_iter

    def _set_lambdas(self, tasks: TaskSet) -> None:
        B = task_xty(tasks)                      # -grad J(0)
        m1 = float(np.sqrt((B * B).sum(axis=1).max())) if B.size else 0.0
        m2 = float(np.sqrt((B * B).sum(axis=0).max())) if B.size else 0.0
        self.lam1_ = float(self.lam1_ratio) * m1
        self.lam2_ = float(self.lam2_ratio) * m2

    def fit(self, tasks: TaskSet, init=None) -> "RMTFL":
        self.check_params()
        self._set_lambdas(tasks)
        shape = (tasks.d, tasks.T)
        P0, Q0 = np.zeros(shape), np.zeros(shape)
        if self.lam1_ratio >= 1 and self.lam2_ratio >= 1:
            # (P, Q) = 0 satisfies the optimality conditions exactly (every row norm of G0 is
            # <= lam1 and every column norm <= lam2): return it without arithmetic, so the
            # zeros are exact on every CPU/BLAS (a prox step at the threshold leaves ~1e-17).
            hist = [0.5 * float(sum(tasks.y(t) @ tasks.y(t) for t in range(tasks.T)))]
            self._store(P0, Q0, hist, 0, 0.0)
            return self
        if init is not None and getattr(init, "P_", None) is not None and init.P_.shape == shape:
            P0, Q0 = init.P_, init.Q_
        P, Q, hist, it, gap = rmtfl_solve(SquaredLoss(tasks), self.lam1_, self.lam2_, P0, Q0,
                                          tol=float(self.tol), max_iter=int(self.max_iter))
        self._store(P, Q, hist, it, gap)
        return self

    def _store(self, P: np.ndarray, Q: np.ndarray, hist: list, it: int, gap: float) -> None:
        self.P_, self.Q_ = P, Q
        self.coef_ = P + Q
        self.objective_history_ = hist
        self.n_iter_ = it
        self.gap_ = float(gap)
        self.converged_ = bool(gap <= float(self.tol))
        self.shared_features_ = np.linalg.norm(P, axis=1) > 0
        self.task_outliers_ = np.linalg.norm(Q, axis=0) > 0
        self.diagnostics_ = {
            "lam1": self.lam1_, "lam2": self.lam2_,
            "n_shared_features": int(self.shared_features_.sum()),
            "outlier_tasks": np.flatnonzero(self.task_outliers_).tolist(),
            "converged": self.converged_, "relative_gap": self.gap_,
        }

    def fitted_objective(self, tasks: TaskSet) -> float:
        """The paper's objective at the fitted (P_, Q_), from scratch on ``tasks``."""
        return SquaredLoss(tasks).value(self.coef_) + rmtfl_penalty(self.P_, self.Q_,
                                                                      self.lam1_, self.lam2_)


class RMTFLCvxpy(RMTFL):
    """rMTFL's objective as a second-order cone program, solved by cvxpy
    (``_core.conic.solve_conic``: the first installed of Clarabel, ECOS, SCS; tolerances
    1e-9).  Refuses instances above ``_core.conic.CVXPY_MAX_ENTRIES`` with a ValueError saying
    so."""

    solver_name = "cvxpy"

    def fit(self, tasks: TaskSet, init=None) -> "RMTFLCvxpy":
        self.check_params()
        import cvxpy as cp

        self._set_lambdas(tasks)
        d, T = tasks.d, tasks.T
        X, y = stacked_design("rmtfl", [tasks.X(t) for t in range(T)],
                              [tasks.y(t) for t in range(T)])
        P, Q = cp.Variable((d, T)), cp.Variable((d, T))
        w = cp.vec(P + Q, order="F")            # (w_1; ...; w_T), the block-diagonal order
        objective = (0.5 * cp.sum_squares(X @ w - y)
                     + self.lam1_ * cp.sum(cp.norm(P, 2, axis=1))
                     + self.lam2_ * cp.sum(cp.norm(Q, 2, axis=0)))
        problem = cp.Problem(cp.Minimize(objective))
        solver = solve_conic(problem, "rmtfl")
        if P.value is None:
            raise RuntimeError(f"rmtfl (cvxpy): {solver} returned no solution "
                               f"(status {problem.status})")
        Pv, Qv = np.asarray(P.value), np.asarray(Q.value)
        quad = SquaredLoss(tasks)
        A = quad.forward(Pv + Qv)
        f, pen = quad.value_of(A), rmtfl_penalty(Pv, Qv, self.lam1_, self.lam2_)
        gap = rmtfl_gap(Pv + Qv, quad.grad_of(A), 2.0 * f, pen, self.lam1_, self.lam2_)
        F = f + pen
        report_progress(1, float(F), gap)
        iters = int(problem.solver_stats.num_iters or 0) if problem.solver_stats else 0
        self._store(Pv, Qv, [float(F)], iters, gap / max(abs(F), 1e-300))
        self.diagnostics_["conic_solver"] = solver
        self.diagnostics_["conic_status"] = str(problem.status)
        return self


RMTFL.solvers = {"cvxpy": RMTFLCvxpy}


@hookimpl
def register_models(register):
    register(RMTFL)
