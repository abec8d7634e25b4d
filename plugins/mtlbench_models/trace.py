"""Trace-norm (low-rank) multi-task learning.

S. Ji and J. Ye, "An Accelerated Gradient Method for Trace Norm Minimization", ICML 2009
(MALSAR ``Least_Trace`` / ``Logistic_Trace``)::

    min_W  J(W) + lam ||W||_*,     ||W||_* = sum_i sigma_i(W)   (the trace norm)

    trace-norm:          J(W) = sum_t 1/2 ||y_t - X_t w_t||^2
    trace-norm-logistic: J(W) = min_c sum_t (1/n_t) sum_i log(1 + exp(-y_ti (x_ti^T w_t + c_t)))

Ji & Ye's problem (their eq. 1: a smooth loss plus lam ||W||_*; multi-task learning is their
first application), with the squared loss as MALSAR's ``Least_Trace`` writes it (with the
1/2).  The logistic variant follows MALSAR's ``Logistic_Trace`` exactly -- an unpenalised
intercept c_t per task and each task's loss averaged over its n_t rows -- so that the
benchmark against MALSAR compares one objective; the intercept is minimised out
(``_core.datafits.InterceptLogisticLoss``) and ``decision_function`` adds it.  MALSAR's optional
ridge ``opts.rho_L2 ||W||_F^2`` (default 0) is left out.  RAMUSA's first stage is ``trace-norm``.

Solver (``_core.classic.PenalisedModel``), the prox singular value thresholding
(``_core.penalties.prox_trace``, from the eigen-decomposition of the smaller Gram matrix) in
both: for the squared loss with the median task under-determined (n_t < d;
``_core.splitting.prefers_admm``) ADMM (``_core.splitting.ADMM``: the W step every task's
ridge solve through the stacked Gram spectra, the Z step the prox; rho starting at the mean
nonzero eigenvalue of the tasks' Gram matrices, the loss's curvature on the data's span, and
adapted by residual balancing); otherwise, and for the logistic loss, FISTA with backtracking
(FISTA-BKTR: the step constant may also decrease), monotone and gradient restart (Ji & Ye's
accelerated gradient method is the same scheme with an increasing step constant).  Stopped
at a relative duality gap <= tol = 1e-6 (the dual norm of the trace norm: the spectral norm;
checked every 5 iterations for the squared loss, every 10 for the logistic one),
``converged_`` iff reached within ``max_iter`` (5000).  Other solvers of the same problem for
``mtlbench race``: ``cvxpy`` (Clarabel, an SDP), and ``admm`` / ``fista`` (the squared loss
always by one of the two).

Search space (scale-free): lam = lam_ratio * ||G0||_2, G0 = grad J(0) (for the logistic loss
with the intercepts at their optimum at W = 0): W = 0 is optimal iff lam_ratio >= 1, so the
bound is (0, 1] (the unpenalised fit is the limit at 0).  Start range [0.03, 0.3] (points
0.03, 0.1, 0.3) from the math only: a decade either side of 0.1 lam_max, between the empty
model at 1 and the nearly unpenalised fits below 0.01.

On the design data (``simulated[seed=101]`` repetitions 0 and 1,
``synthetic-attributes[seed=101]`` attr1) the selections lie in 0.08-0.3 for both losses, with
no edge, bound or degenerate selection.

Unverified: Ji & Ye's equation numbers (the paper's text was not available here).
"""
from __future__ import annotations

import numpy as np

from mtlbench import Log, TaskSet, hookimpl

from ._core.classic import CvxpyFit, PenalisedModel
from ._core.penalties import Nuclear


class Trace(PenalisedModel):
    """Trace-norm multi-task learning with the squared loss."""

    name = "trace-norm"
    paper = ("S. Ji, J. Ye, An Accelerated Gradient Method for Trace Norm Minimization, "
             "ICML 2009 (MALSAR Least_Trace)")
    search_space = {"lam_ratio": Log([0.03, 0.1, 0.3], low=None, high=1.0)}
    target_kinds = ("binary", "real")
    squared_check_every = 5   # the gap's spectral norm costs an eigen-decomposition
    admm_check_every = 5
    #: ADMM where the median task is under-determined, else FISTA (``PenalisedModel``)
    squared_solver = "auto"
    solver_name = "auto"
    monotone_objective = False           # ADMM: F(Z) is not monotone along the iterations
    cost_hint = 2.5  # s per unit on the reference problem (mtlbench.runner.cost)

    def __init__(self, lam_ratio: float = 0.1, tol: float = 1e-6, max_iter: int = 5000):
        self.lam_ratio = lam_ratio
        self.tol = tol
        self.max_iter = max_iter

    def ratios(self) -> tuple[float, ...]:
        return (float(self.lam_ratio),)

    def penalty(self, G0: np.ndarray, tasks: TaskSet) -> Nuclear:
        return Nuclear(float(self.lam_ratio) * Nuclear.dual_norm(G0))

    def cvx_penalty(self, cp, W):
        return self.penalty_.lam * cp.normNuc(W)

    def admm_rho(self, spectra) -> float:
        """The mean nonzero eigenvalue of the tasks' Gram matrices (the trace norm has no
        curvature of its own to balance against)."""
        return spectra.mean_eigenvalue


class TraceLogistic(Trace):
    """Trace-norm multi-task learning with MALSAR's logistic loss (per-task intercepts)."""

    name = "trace-norm-logistic"
    paper = ("S. Ji, J. Ye, An Accelerated Gradient Method for Trace Norm Minimization, "
             "ICML 2009 (MALSAR Logistic_Trace)")
    loss = "logistic"
    target_kinds = ("binary",)
    solver_name = "fista"
    monotone_objective = True
    cost_hint = 8.9  # s per unit on the reference problem (mtlbench.runner.cost)


class TraceCvxpy(CvxpyFit, Trace):
    """``trace-norm`` solved by cvxpy."""


class TraceAdmm(Trace):
    """``trace-norm`` always fitted by ADMM (a solver of the same objective for ``race``)."""

    solver_name = "admm"
    squared_solver = "admm"


class TraceFista(Trace):
    """``trace-norm`` always fitted by FISTA (a solver of the same objective for ``race``)."""

    solver_name = "fista"
    squared_solver = "fista"
    monotone_objective = True


class TraceLogisticCvxpy(CvxpyFit, TraceLogistic):
    """``trace-norm-logistic`` solved by cvxpy."""


Trace.solvers = {"cvxpy": TraceCvxpy, "admm": TraceAdmm, "fista": TraceFista}
TraceLogistic.solvers = {"cvxpy": TraceLogisticCvxpy}


@hookimpl
def register_models(register):
    register(Trace)
    register(TraceLogistic)
