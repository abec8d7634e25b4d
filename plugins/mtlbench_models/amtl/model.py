"""The AMTL model: hyperparameters, their scales, the declared search space, the start, and the
fitted attributes; the fit itself is ``solver.AMTLSolver`` (alternatives in ``AMTL.solvers``).
"""
from __future__ import annotations

import numpy as np

from mtlbench import Categorical, Int, Linear, LinearMTLModel, Log, TaskSet
from mtlbench_models._core.representations import TaskSpectra

from .bstep import transfer_threshold
from .lm import LevenbergMarquardt
from .objective import loss_floor
from .solver import AMTLSolver, Settings, TransferStart


def amtl_scales(spec: TaskSpectra, lam_ratio: float) -> tuple[float, float, np.ndarray]:
    """(lambda, mu_max, W0) for ``lam`` = lam_ratio: lambda = lam_ratio x s_X; W0 = the per-task
    ridge with weight 2 lambda (argmin_W F(W, 0)); mu_max = (1 + 1e-9) x the smallest mu at
    which B = 0 meets the B-step's KKT conditions at W0 (package docstring)."""
    lam = float(lam_ratio) * spec.energy
    two = np.full(spec.T, 2.0 * lam)
    W0 = spec.shifted_solve(spec.Xty, np.ones(spec.T), two)
    L0 = spec.losses(W0)
    floor = loss_floor(spec)
    mu_max = transfer_threshold(W0, L0, lam, floor)
    if not mu_max > 0:                 # no positively aligned pair: B = 0 for every mu
        mu_max = 2.0 * lam * float(np.diag(W0.T @ W0).max()) / max(float(L0.max()), floor)
    # a relative margin of 1e-9 so that at mu = mu_max rounding cannot leave a single transfer
    return lam, max(mu_max, 1e-300) * (1.0 + 1e-9), W0


class AMTL(LinearMTLModel):
    """Asymmetric MTL with a sparse non-negative transfer graph B; see the package docstring."""

    name = "amtl"
    paper = ("Lee, Yang & Hwang, Asymmetric Multi-task Learning Based on Task Relatedness and "
             "Loss, ICML 2016")
    search_space = {"lam": Log([0.3, 1.0], low=0.0, high=None),
                    "mu": Log([0.3, 1.0, 3.0], low=0.0, high=None)}
    param_constraints = {"tol": Linear([1e-6], low=0.0), "xtol": Linear([1e-3], low=0.0),
                         "max_iter": Int([2000], low=1), "cg_tol": Linear([1e-6], low=0.0),
                         "cg_max_iter": Int([2], low=1), "b_passes": Int([2], low=1),
                         "extrapolate": Categorical([True, False]),
                         "second_start": Categorical([False, True])}
    convex = False
    target_kinds = ("binary", "real")
    supports_warm_start = False
    solver_name = "bcd-lm"
    # s per unit on the reference problem (mtlbench.runner.cost)
    cost_hint = 16.4
    # the unit time follows the task count, not the data size: the T x T transfer matrix costs
    # O(d T^2) per iteration (B-step, LM products) against O(N d) for the loss (measured
    # log-time slopes: 2.26 on log T, 0.05 on log size, T = 139 .. 587)
    cost_scaling = {"size": 0.0, "tasks": 2.0}

    def __init__(self, lam: float = 1.0, mu: float = 0.1, tol: float = 1e-6, xtol: float = 1e-3,
                 max_iter: int = 2000, cg_tol: float = 1e-6, cg_max_iter: int = 2,
                 b_passes: int = 2, extrapolate: bool = True, second_start: bool = False):
        self.lam = lam
        self.mu = mu
        self.tol = tol
        self.xtol = xtol
        self.max_iter = max_iter
        self.cg_tol = cg_tol
        self.cg_max_iter = cg_max_iter
        self.b_passes = b_passes
        self.extrapolate = extrapolate
        self.second_start = second_start

    def fit(self, tasks: TaskSet, init=None) -> "AMTL":
        """Cold fit by the default solver (``init`` is ignored: the problem is non-convex)."""
        return self.fit_with(tasks, AMTLSolver(second_start=self._second_start()))

    def _second_start(self) -> TransferStart | None:
        """The second start the ``second_start`` hyperparameter asks for (None: one start)."""
        return TransferStart() if self.second_start else None

    def fit_with(self, tasks: TaskSet, solver: AMTLSolver) -> "AMTL":
        """Fit by ``solver`` (an ``AMTLSolver`` with any options) from the common start."""
        self.check_params()
        spec = TaskSpectra.of(tasks)
        T = spec.T
        lam, mu_max, _ = tasks.memo(("compa.amtl.scales", float(self.lam)),
                                     lambda: amtl_scales(spec, float(self.lam)))
        mu = float(self.mu) * mu_max
        self.lam_, self.mu_, self.mu_max_ = lam, mu, mu_max
        # one start for every (lam, mu): B = 0 and the per-task ridge with weight s_X
        W = tasks.memo(("compa.amtl.init", 1), lambda: spec.shifted_solve(
            spec.Xty, np.ones(T), np.full(T, spec.energy))).copy()
        fit = solver.solve(tasks, spec, W, lam, mu, Settings(
            self.tol, self.xtol, self.max_iter, self.cg_tol, self.cg_max_iter, self.b_passes,
            self.extrapolate))
        W, B = fit.W, fit.B
        self.coef_ = W
        self.B_ = B
        self.objective_history_ = fit.history
        self.n_iter_ = fit.n_iter
        self.converged_ = fit.converged
        recv = B.max(axis=0) > 0
        self.task_groups_ = np.where(recv, B.argmax(axis=0), np.arange(T))
        diag = dict(fit.diagnostics)
        w_residual = diag.pop("w_step_residual")
        self.diagnostics_ = {"transfers": int(np.count_nonzero(B)),
                             "out_degree": np.count_nonzero(B, axis=1).tolist(),
                             **diag, "mu_max": mu_max, "converged": fit.converged,
                             "converged_by": fit.converged_by, "w_step_residual": w_residual}
        return self


class AMTLFloat64(AMTL):
    """The same solver with every product in float64 (no float32 search directions)."""

    solver_name = "float64"

    def fit(self, tasks: TaskSet, init=None) -> "AMTLFloat64":
        return self.fit_with(tasks, AMTLSolver(lm=LevenbergMarquardt(precision=None),
                                               block_precision=None,
                                               second_start=self._second_start()))


class AMTLBlockOnly(AMTL):
    """Block-coordinate descent with extrapolation alone (no Levenberg-Marquardt phase)."""

    solver_name = "bcd"

    def fit(self, tasks: TaskSet, init=None) -> "AMTLBlockOnly":
        return self.fit_with(tasks, AMTLSolver(lm=None, second_start=self._second_start()))



AMTL.solvers = {"float64": AMTLFloat64, "bcd": AMTLBlockOnly}
