"""L2,1 joint feature selection: multi-task feature learning with the l_{2,1} norm.

J. Liu, S. Ji and J. Ye, "Multi-Task Feature Learning via Efficient l2,1-Norm Minimization",
UAI 2009 (the penalty: A. Argyriou, T. Evgeniou and M. Pontil, "Convex multi-task feature
learning", Machine Learning 73(3), 2008; MALSAR ``Least_L21`` / ``Logistic_L21``)::

    min_W  J(W) + lam ||W||_{2,1},     ||W||_{2,1} = sum_i ||W[i, :]||_2   (rows = features)

    l21:           J(W) = sum_t 1/2 ||y_t - X_t w_t||^2
    l21-logistic:  J(W) = min_c sum_t (1/n_t) sum_i log(1 + exp(-y_ti (x_ti^T w_t + c_t)))

This is Liu, Ji & Ye's problem (their eq. 1 with the l_{2,1} penalty; the squared loss in the
form of MALSAR's ``Least_L21``, which keeps the 1/2).  The logistic variant follows MALSAR's
``Logistic_L21`` exactly -- an unpenalised intercept c_t per task and each task's loss averaged
over its n_t rows -- so that the benchmark against MALSAR compares one objective; the
intercept is minimised out (``_core.datafits.InterceptLogisticLoss``) and ``decision_function``
adds it.  MALSAR's optional ridge ``opts.rho_L2 ||W||_F^2`` (default 0) is left out.

Solver (``_core.classic.PenalisedModel``): ``l21`` by cyclic block coordinate descent over the
rows of W on the Gram matrices X_t^T X_t (each row a group-shrinkage step with its own
curvature), ``l21-logistic`` by FISTA-BKTR (backtracking that may also decrease the step
constant) with monotone and gradient restart, the prox a row-group shrinkage, on the working
set of rows that can be non-zero (``_core.solvers.RowWorkingSet``: the designs' columns of
those rows only, rows joining while the whole problem's gap says so); both stopped at a
relative duality gap <= tol = 1e-6 of the whole problem (the dual norm of the l_{2,1} norm:
the largest row l2 norm), ``converged_`` iff reached within ``max_iter`` (5000 iterations or
sweeps).  A second
solver, ``cvxpy`` (Clarabel), solves the same problem for ``mtlbench race``.

Search space (scale-free): lam = lam_ratio * max_i ||G0[i, :]||_2, G0 = grad J(0) (for the
logistic loss with the intercepts at their optimum at W = 0): W = 0 is optimal iff
lam_ratio >= 1, so the bound is (0, 1] (the unpenalised fit is the limit at 0).  Start range
[0.03, 0.3] (points 0.03, 0.1, 0.3) from the math only: a decade either side of 0.1 lam_max,
between the empty model at 1 and the nearly unpenalised fits below 0.01.

On the design data (``simulated[seed=101]`` repetitions 0 and 1,
``synthetic-attributes[seed=101]`` attr1) the selections lie in 0.07-0.27 for both losses,
with no edge, bound or degenerate selection.

Unverified: Liu, Ji & Ye's equation numbers (the paper's text was not available here; the
objective is MALSAR's, whose manual cites the paper for it).
"""
from __future__ import annotations

import numpy as np

from mtlbench import Log, TaskSet, hookimpl

from ._core.classic import CvxpyFit, PenalisedModel
from ._core.penalties import L21 as L21Norm


class L21(PenalisedModel):
    """Joint feature selection with the squared loss."""

    name = "l21"
    paper = ("J. Liu, S. Ji, J. Ye, Multi-Task Feature Learning via Efficient l2,1-Norm "
             "Minimization, UAI 2009 (MALSAR Least_L21)")
    search_space = {"lam_ratio": Log([0.03, 0.1, 0.3], low=None, high=1.0)}
    target_kinds = ("binary", "real")
    row_separable = True
    solver_name = "cd"   # block coordinate descent (``_core.classic``)
    cost_hint = 1.0  # s per unit on the reference problem (mtlbench.runner.cost)

    def __init__(self, lam_ratio: float = 0.1, tol: float = 1e-6, max_iter: int = 5000):
        self.lam_ratio = lam_ratio
        self.tol = tol
        self.max_iter = max_iter

    def ratios(self) -> tuple[float, ...]:
        return (float(self.lam_ratio),)

    def penalty(self, G0: np.ndarray, tasks: TaskSet) -> L21Norm:
        return L21Norm(float(self.lam_ratio) * L21Norm(1.0).dual_norm(G0))

    def cvx_penalty(self, cp, W):
        return self.penalty_.lam * cp.sum(cp.norm(W, 2, axis=1))


class L21Logistic(L21):
    """Joint feature selection with MALSAR's logistic loss (per-task intercepts)."""

    name = "l21-logistic"
    paper = ("J. Liu, S. Ji, J. Ye, Multi-Task Feature Learning via Efficient l2,1-Norm "
             "Minimization, UAI 2009 (MALSAR Logistic_L21)")
    loss = "logistic"
    target_kinds = ("binary",)
    solver_name = "fista"
    logistic_solver = "rows"     # FISTA on the rows that can be non-zero (RowWorkingSet)
    cost_hint = 5.0  # s per unit on the reference problem (mtlbench.runner.cost)


class L21Cvxpy(CvxpyFit, L21):
    """``l21`` solved by cvxpy."""


class L21LogisticCvxpy(CvxpyFit, L21Logistic):
    """``l21-logistic`` solved by cvxpy."""


L21.solvers = {"cvxpy": L21Cvxpy}
L21Logistic.solvers = {"cvxpy": L21LogisticCvxpy}


@hookimpl
def register_models(register):
    register(L21)
    register(L21Logistic)
