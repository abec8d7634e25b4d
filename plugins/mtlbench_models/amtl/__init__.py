"""AMTL: Asymmetric Multi-task Learning (Lee, Yang & Hwang, ICML 2016).

Objective (W d x T; B T x T, B_st = transfer from task s to task t; row b_s^o = what s sends)::

    F(W, B) = sum_t (1 + mu ||b_t^o||_1) L_t(w_t) + lam ||W - W B||_F^2,  B >= 0, diag(B) = 0,

the paper's AMTL problem (Eq. 1), with L_t(w) = 1/2 ||y_t - X_t w||^2: every task is a sparse
non-negative combination of the others, and a task with a large loss pays mu L_t for each unit
it sends, so easy tasks transfer more.
Hyperparameters: lambda = ``lam`` x s_X, s_X = mean_t ||X_t||_F^2 / d (scale-free ``lam``);
mu = ``mu`` x mu_max, mu_max = (1 + 1e-9) max_{s != t} 2 lambda w0_s^T w0_t / L_s(w0_s) at the
per-task ridge W0 = argmin_W F(W, 0): the smallest mu at which B = 0 meets the B-step's KKT
conditions there (``model.amtl_scales``; the margin keeps rounding from leaving one transfer).
Search space: ``lam`` Log, start [0.3, 1], bounds (0, inf): every lambda > 0 is a model
(lambda -> 0 decouples the tasks, lambda -> inf forces W = W B); the start range was designed
on ``simulated[seed=101]`` (validation AUC peaks inside it).  ``mu`` Log, start [0.3, 3],
bounds (0, inf): half a decade either side of the scale's reference point 1, which is no limit
of the model: above it (W0, 0) is a strict local minimum, not necessarily the lowest.

Solver (``solver.AMTLSolver``; its options are constructor arguments), from B = 0 and the
per-task ridge with weight s_X, the same start for every (lam, mu):
* block-coordinate descent, as the paper's alternating optimisation: a B-step (``bstep``:
  b_passes scaled projected-gradient steps with exact line search on the column-wise
  non-negative weighted lasso) and a W-step (``wstep``: at most cg_max_iter PCG iterations on
  the convex quadratic in W), each non-increasing in F; then an extrapolation of both blocks,
  kept only if F strictly falls (Ang & Gillis-style, our own implementation);
* a Levenberg-Marquardt phase (``lm``, our own scheme) once F <= 0.1 F_0: where every task can
  interpolate its data (n_t < d), inf F = 0 and block descent converges only linearly, while
  Gauss-Newton converges fast as the residual -> 0.  Steps are accepted only if F falls
  (backtracking along the projected step); the phase hands back to block iterations when it
  stops paying and resumes once they have halved F;
* on interpolating problems the products that only steer a search direction are float32;
  everything that decides what is reported or accepted is float64;
* B = 0 where the descent ends there is verified, not assumed: for mu > mu_max the KKT
  multipliers mu L_s - 2 lam w0_s^T w0_t are all positive, so (W0, 0) is a strict local minimum
  (tested).  Lower minima with transfers exist where tasks interpolate their data (n_t < d:
  inf F = 0, reached by fits that reproduce their training labels); ``second_start=True``
  (``solver.TransferStart``) looks for them: a descent from a less regularised ridge with its
  non-negative reconstruction B, within the same budget and tolerances, the lower answer
  returned.  The default is the paper's single alternating descent from the common start: on
  ``synthetic-attributes[seed=101]`` attr0 the second start reaches F ~ 1e-7 where B = 0 has
  F ~ 800, at 2.4 x the unit time and 15 points lower test AUC (the interpolating minimisers
  predict worse than the local one), so it is a documented option, not the benchmark's AMTL.
F never increases along the history, which reports the better answer so far (tested).
Stopping rule (non-convex: a stationary point): the decrease of F is at most tol x
max(F_{k-1}, 1e-3 F_0), ||W_k - W_{k-1}|| <= xtol ||W_k||, ||B_k - B_{k-1}|| <= xtol max(1, ||B_k||)
and the W-gradient's relative residual <= xtol, all at a block step (a damped LM step is small
far from a minimum too); or the certificate F_k <= tol x 1e-3 x F_0: F >= 0, so the iterate is a
global minimiser to that absolute tolerance (reached only where tasks interpolate), reported
as the progress certificate.  ``diagnostics_["converged_by"]`` names the rule; ``converged_``
says whether one was met within max_iter (a safety cap, not a tuning knob).

Fitted: ``coef_`` = W, ``B_``, ``lam_``, ``mu_`` (the paper's lambda, mu), ``mu_max_``,
``task_groups_`` (the task each task receives most from; itself if none), ``converged_``,
``n_iter_``, ``objective_history_``, ``diagnostics_`` (transfers, step counts, second start).
Not the authors' code: BlasterL/AMTL (MATLAB) penalises B quadratically; we implement the
paper's objective.  Where every task interpolates, every (lam, mu) has the same minimisers
(F = 0: L_t = 0, W = W B), so which one a fit returns depends on the path.  Unverified (the
paper's text was not available): the equation number (from the paper's public reviews),
whether the B-penalty's loss is taken at the current W (we do), the paper's grid.
"""
from __future__ import annotations

from mtlbench import hookimpl

from .bstep import b_step
from .lm import LevenbergMarquardt
from .model import AMTL, AMTLBlockOnly, AMTLFloat64, amtl_scales
from .objective import amtl_objective, task_losses
from .solver import AMTLSolver, TransferStart

__all__ = ["AMTL", "AMTLBlockOnly", "AMTLFloat64", "AMTLSolver",
           "LevenbergMarquardt", "TransferStart",
           "amtl_objective", "amtl_scales", "b_step", "task_losses", "register_models"]


@hookimpl
def register_models(register):
    register(AMTL)
