"""The dirty model: block-sparse plus elementwise-sparse multi-task learning.

A. Jalali, P. Ravikumar, S. Sanghavi and C. Ruan, "A Dirty Model for Multi-task Learning",
NIPS 2010 (MALSAR ``Least_Dirty`` / ``Logistic_Dirty``).  W = P + Q (d x T)::

    min_{P, Q}  J(P + Q) + lam1 ||P||_{1,inf} + lam2 ||Q||_1

    ||P||_{1,inf} = sum_i max_t |P_it|   (rows = features shared by the tasks, block sparsity)
    ||Q||_1       = sum_it |Q_it|        (task-specific entries)

    dirty:           J(W) = sum_t 1/2 ||y_t - X_t w_t||^2
    dirty-logistic:  J(W) = min_c sum_t (1/n_t) sum_i log(1 + exp(-y_ti (x_ti^T w_t + c_t)))

The block part is l_1/l_inf in the paper (its lambda_b ||B||_{1,inf}, lambda_s ||S||_{1,1})
and in MALSAR (``L1infnorm``: sum of the rows' max moduli): both are followed.  MALSAR's
``Least_Dirty`` writes ||X(P + Q) - Y||_F^2 without the 1/2 (lam = MALSAR's lambda / 2); the
logistic variant follows ``Logistic_Dirty`` exactly (an unpenalised intercept per task, each
task's loss averaged over its rows), so that the benchmark against MALSAR compares one
objective; the intercept is minimised out (``_core.datafits.InterceptLogisticLoss``) and
``decision_function`` adds it.

Solver (``_core.classic.PenalisedModel``): the problem in W alone, min_W J(W) + h(W) with
h(W) = min_{P + Q = W} lam1 ||P||_{1,inf} + lam2 ||Q||_1, the infimal convolution of the two
norms (``_core.penalties.L1InfConvL1``): a norm separating over the rows whose inner minimum
has a closed form (row i: P clips w_i at c_i, the k-th largest |w_it|, k = ceil(lam1 / lam2);
``P_``, ``Q_`` are that split), whose conjugate is the indicator of the intersection of the
dual balls {max_i ||G[i, :]||_1 <= lam1} and {max |G| <= lam2}, and whose prox is V minus the
projection onto that set (an l1 ball and a box per row).  The optimal values and W are those
of the problem in (P, Q) that MALSAR solves.  ``dirty``: cyclic block coordinate descent over
the rows of W on the Gram matrices X_t^T X_t; ``dirty-logistic``: FISTA with backtracking
(FISTA-BKTR), monotone and gradient restart, on the working set of rows that can be non-zero
(``_core.solvers.RowWorkingSet``: the designs' columns of those rows only, rows joining while
the whole problem's gap says so); both stopped at a relative duality gap <= tol = 1e-6 of the
whole problem, ``converged_`` iff reached within ``max_iter`` (5000 iterations or sweeps).  A
second solver, ``cvxpy`` (Clarabel), solves the (P, Q) form for ``mtlbench race``.

Search space (scale-free, G0 = grad J(0), for the logistic loss with the intercepts at their
optimum at W = 0): lam1 = lam1_ratio * max_i ||G0[i, :]||_1, lam2 = lam2_ratio * max |G0|;
(P, Q) = 0 is optimal iff both ratios are >= 1 (each one >= 1 alone switches its block off at
W = 0), so both bounds are (0, 1].  By the split, Q = 0 iff lam1 <= lam2 and P = 0 iff
lam1 > T lam2 (k > T); so lam1_ratio = 1 with lam2_ratio < 1 is a legitimate optimum (the
block part vanishes there only when lam1 > T lam2), not a degenerate corner, and the ratios
reach both pure ends.  Start ranges lam1_ratio [0.05, 0.8] and lam2_ratio [0.1, 0.9] (three
points each) from the design data (``simulated[seed=101]`` repetitions 0 and 1,
``synthetic-attributes[seed=101]`` attr1): the selections lie inside lam1_ratio 0.13-0.62 and
lam2_ratio 0.03-0.9, with no edge, bound or degenerate selection for either loss.

Unverified: the paper's equation numbers (its text was not available here).
"""
from __future__ import annotations

import numpy as np

from mtlbench import Log, TaskSet, hookimpl

from ._core.classic import CvxpyFit, PenalisedModel
from ._core.penalties import L1, L1Inf, L1InfConvL1


class Dirty(PenalisedModel):
    """The dirty model with the squared loss (``P_``, ``Q_``: the split of ``coef_``)."""

    name = "dirty"
    paper = ("A. Jalali, P. Ravikumar, S. Sanghavi, C. Ruan, A Dirty Model for Multi-task "
             "Learning, NIPS 2010 (MALSAR Least_Dirty)")
    search_space = {"lam1_ratio": Log([0.05, 0.2, 0.8], low=None, high=1.0),
                    "lam2_ratio": Log([0.1, 0.3, 0.9], low=None, high=1.0)}
    target_kinds = ("binary", "real")
    row_separable = True
    solver_name = "cd"   # block coordinate descent (``_core.classic``)
    cost_hint = 4.2  # s per unit on the reference problem (mtlbench.runner.cost)

    def __init__(self, lam1_ratio: float = 0.2, lam2_ratio: float = 0.6, tol: float = 1e-6,
                 max_iter: int = 5000):
        self.lam1_ratio = lam1_ratio
        self.lam2_ratio = lam2_ratio
        self.tol = tol
        self.max_iter = max_iter

    def ratios(self) -> tuple[float, ...]:
        return (float(self.lam1_ratio), float(self.lam2_ratio))

    def penalty(self, G0: np.ndarray, tasks: TaskSet) -> L1InfConvL1:
        return L1InfConvL1(float(self.lam1_ratio) * L1Inf.dual_norm(G0),
                           float(self.lam2_ratio) * L1.dual_norm(G0))

    def lams(self) -> list[float]:
        return [self.penalty_.lam1, self.penalty_.lam2]

    def cvx_penalty(self, cp, W):
        P = cp.Variable(W.shape)
        lam1, lam2 = self.lams()
        return lam1 * cp.sum(cp.max(cp.abs(P), axis=1)) + lam2 * cp.sum(cp.abs(W - P))

    def _store(self, J, X, hist, n_iter, gap) -> None:
        super()._store(J, X, hist, n_iter, gap)
        self.P_, self.Q_ = self.penalty_.split(X)
        self.diagnostics_["n_shared_features"] = int(np.count_nonzero(np.abs(self.P_).max(1)))
        self.diagnostics_["n_specific_entries"] = int(np.count_nonzero(self.Q_))


class DirtyLogistic(Dirty):
    """The dirty model with MALSAR's logistic loss (per-task intercepts)."""

    name = "dirty-logistic"
    paper = ("A. Jalali, P. Ravikumar, S. Sanghavi, C. Ruan, A Dirty Model for Multi-task "
             "Learning, NIPS 2010 (MALSAR Logistic_Dirty)")
    loss = "logistic"
    target_kinds = ("binary",)
    solver_name = "fista"
    logistic_solver = "rows"     # FISTA on the rows that can be non-zero (RowWorkingSet)
    cost_hint = 8.3  # s per unit on the reference problem (mtlbench.runner.cost)


class DirtyCvxpy(CvxpyFit, Dirty):
    """``dirty`` solved by cvxpy."""


class DirtyLogisticCvxpy(CvxpyFit, DirtyLogistic):
    """``dirty-logistic`` solved by cvxpy."""


Dirty.solvers = {"cvxpy": DirtyCvxpy}
DirtyLogistic.solvers = {"cvxpy": DirtyLogisticCvxpy}


@hookimpl
def register_models(register):
    register(Dirty)
    register(DirtyLogistic)
