"""AMTL's solver: block-coordinate descent on (B, W) with a guarded extrapolation, a
Levenberg-Marquardt phase where F falls towards 0, the stopping rule, and a second start where
the descent ends at B = 0 (see the package docstring).  ``AMTLSolver`` holds the options
(constructor arguments); ``solve`` runs one fit.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mtlbench import TaskSet, report_progress
from mtlbench_models._core.representations import TaskSpectra

from .bstep import b_descent, b_kkt_residual, b_setup, b_step
from .lm import LevenbergMarquardt, LMPhase
from .objective import (LossResiduals, LowPrecisionSpectra, gram_objective, interpolating,
                        residual_objective)
from .wstep import orthonormal_spectra, w_step


class Settings(NamedTuple):
    """The model's tolerances and budgets (its hyperparameters), as the solver reads them."""
    tol: float
    xtol: float
    max_iter: int
    cg_tol: float
    cg_max_iter: int
    b_passes: int
    extrapolate: bool


class Fit(NamedTuple):
    """What a solve returns."""
    W: np.ndarray
    B: np.ndarray
    history: list
    n_iter: int
    converged: bool
    converged_by: str | None
    diagnostics: dict


def certificate(F: float, level: float) -> float | None:
    """F as the certificate of F - inf F (valid since inf F >= 0), reported only where it
    meets the stopping rule's objective tolerance ``level``."""
    return F if F <= level else None


class TransferStart:
    """The second start of a fit whose descent from the common start ended at B = 0 (a
    stationary point that is a strict local minimum when mu > mu_max, so no local test can
    leave it): W = the per-task ridge with weight ``ridge`` x s_X, less regularised than the
    common start's s_X, so that the tasks nearly fit their data and the loss-weighted price of a
    transfer is small, and B = the non-negative reconstruction of that W by the other tasks (the
    B-step at mu = 0, ``b_step``'s tolerances).  ``ridge`` = 0.01: on the design data
    (simulated[seed=101], synthetic-attributes[seed=101] attr0, training splits of rep 0) the
    weights 0.3, 0.1, 0.03 and 0.01 reached objectives within 1 % of one another at (lam, mu) =
    (0.3, 1), (0.3, 1.5), (1, 3) (at 1 the descent slides back to B = 0), so small random
    interpolating problems decided (T = 12, d = 8, n_t = 5, 43 fits ending at B = 0): with 0.01
    the fit ended at or below the descent from the fit at mu = 0.3 mu_max in 40 cases, with 0.1
    in 26.  Data only: cached per TaskSet."""

    def __init__(self, ridge: float = 0.01):
        self.ridge = float(ridge)

    def point(self, tasks: TaskSet, spec: TaskSpectra):
        """(W, B) of the second start (shared, do not modify)."""
        return tasks.memo(("amtl.transfer_start", self.ridge), lambda: self._point(spec))

    def _point(self, spec: TaskSpectra):
        T = spec.T
        W = spec.shifted_solve(spec.Xty, np.ones(T), np.full(T, self.ridge * spec.energy))
        B, _ = b_step(W, spec.losses(W), 1.0, 0.0)
        return W, B


class AMTLSolver:
    """Block-coordinate descent with extrapolation and a Levenberg-Marquardt phase.  Options:

    * ``lm``: the Levenberg-Marquardt phase (``LevenbergMarquardt``; None: block iterations
      only);
    * ``block_precision``: precision of the block iterations' search-direction products (the
      B-step's C D, the W-step's coupling products) on interpolating problems, where the W-step
      asks for no more than it supports (``cg_tol`` >= 1e-6); None: float64;
    * ``extrapolation`` = (start, growth on success, shrink on failure, cap) of beta;
    * ``finish_cg``: a finishing W-step runs at most this many times ``cg_max_iter``;
    * ``second_start`` (``TransferStart``; None: one start only): where the descent ends at
      B = 0, a second descent from a start with transfers, within the same iteration budget
      and tolerances; the lower of the two answers is returned."""

    def __init__(self, lm: LevenbergMarquardt | None = LevenbergMarquardt(),
                 block_precision=np.float32, extrapolation=(0.5, 1.1, 1.5, 3.0),
                 finish_cg: int = 10, second_start: TransferStart | None = None):
        self.lm = lm
        self.block_precision = block_precision
        self.extrapolation = tuple(extrapolation)
        self.finish_cg = int(finish_cg)
        self.second_start = second_start

    def solve(self, tasks: TaskSet, spec: TaskSpectra, W, lam: float, mu: float,
              settings: Settings, B=None, F0=None) -> Fit:
        """Minimise F from (W, B) (default B = 0) at the paper's lambda = ``lam``, mu = ``mu``;
        the tolerances are relative to ``F0`` (default: F at the start)."""
        B = np.zeros((spec.T, spec.T)) if B is None else np.array(B, dtype=np.float64)
        first = _Run(self, tasks, spec, W, B, lam, mu, settings, F0)
        first.run()
        fit = first.result()
        if self.second_start is None or fit.B.any() or fit.n_iter >= int(settings.max_iter):
            fit.diagnostics.update(second_start_objective=None, second_start_taken=False,
                                   second_start_iters=0)
            return fit
        W2, B2 = self.second_start.point(tasks, spec)
        second = _Run(self, tasks, spec, W2.copy(), B2.copy(), lam, mu,
                      settings._replace(max_iter=int(settings.max_iter) - fit.n_iter),
                      first.F0, it0=fit.n_iter, best=fit.history[-1])
        second.run()
        return _better(fit, second.result())


def _better(first: Fit, second: Fit) -> Fit:
    """The second start's answer if its objective is lower, else the first's; the history
    continues with the objective of the better answer so far, the counters add up."""
    best = first.history[-1]
    taken = second.history[-1] < best
    out = second if taken else first
    diagnostics = {k: (max(v, second.diagnostics[k]) if k.endswith("_max") else
                       v + second.diagnostics[k])
                   for k, v in first.diagnostics.items() if k != "w_step_residual"}
    diagnostics.update(second_start_objective=float(second.history[-1]),
                       second_start_taken=bool(taken), second_start_iters=int(second.n_iter),
                       w_step_residual=out.diagnostics["w_step_residual"])
    history = first.history + [min(f, best) for f in second.history[1:]]
    return Fit(out.W, out.B, history, first.n_iter + second.n_iter, out.converged,
               out.converged_by, diagnostics)


class _Run:
    """One fit's iterates, phase and counters."""

    def __init__(self, solver: AMTLSolver, tasks, spec, W, B, lam, mu, st: Settings, F0=None,
                 it0: int = 0, best: float = np.inf):
        self.solver, self.spec, self.lam, self.mu, self.st = solver, spec, lam, mu, st
        self.GW = spec.gram_apply(W)       # kept in step with W through the CG updates
        self.fused = tasks.memo(("amtl.orthonormal_spectra", 1), lambda: orthonormal_spectra(spec))
        self.res = tasks.memo(("compa.amtl.residuals", 1), lambda: LossResiduals(spec))
        guard = interpolating(spec, self.res)
        self.block_low = (solver.block_precision if guard and float(st.cg_tol) >= 1e-6
                          else None)
        lm, low = solver.lm, None
        if lm is not None and lm.precision is not None and guard:
            view = tasks.memo(("amtl.low_spectra", np.dtype(lm.precision).name),
                              lambda: LowPrecisionSpectra(spec, self.res, lm.precision))
            low = (view, view)
        self.phase = (LMPhase(lm, spec, self.res, lam, mu, self.fused, guard, low)
                      if lm is not None else None)
        self.W, self.B, self.E = W, B, None
        self.F, self.L, self.R = gram_objective(spec, W, self.GW, B, lam, mu)
        self.hist = [self.F]
        # F >= 0, so F itself bounds F - inf F: at or below this level the fit is a certified
        # global optimum to the stopping rule's absolute objective tolerance
        self.F0 = self.F if F0 is None else F0
        self.level = float(st.tol) * 1e-3 * self.F0
        self.gn, self.near = False, False
        self.gn_entry = lm.switch * self.F0 if lm is not None else -np.inf
        self.beta = solver.extrapolation[0]
        self.n_extrap = self.cg_iters = self.b_sweeps = self.n_iter = 0
        self.w_residual = np.inf
        self.converged, self.converged_by = False, None
        # a second start's iterations continue the fit's count and report the objective of the
        # better answer so far (``best``: the first start's)
        self.it0, self.best = it0, best

    def _report(self, it: int, F: float) -> None:
        shown = min(F, self.best)
        report_progress(self.it0 + it, shown, certificate(shown, self.level))

    def run(self) -> None:
        if self.it0 == 0:
            report_progress(0, self.F)
        for it in range(1, int(self.st.max_iter) + 1):
            self.n_iter = it
            if self.phase is not None and not self.gn and self.F <= self.gn_entry:
                # near-interpolation regime: Levenberg-Marquardt from here on
                self.gn = True
                self.F, self.E, self.R, self.L = residual_objective(
                    self.spec, self.res, self.W, self.B, self.lam, self.mu)
                self.hist[-1] = min(self.hist[-1], self.F)
                self.phase.enter(self.W, self.B, self.F)
            W_old, B_old = self.W, self.B
            if self.gn and self.phase.should_hand_back(self.F):
                # block-coordinate iterations until F has fallen by the factor ``resume``
                self._hand_back()
                self.GW = self.spec.gram_apply(self.W)
            done = (self._lm_iteration(it, W_old, B_old) if self.gn
                    else self._block_iteration(it, W_old, B_old))
            if done:
                break

    def _hand_back(self) -> None:
        self.gn, self.gn_entry = False, self.solver.lm.resume * self.F
        self.phase.count["exits"] += 1

    def _small_change(self, W_old, B_old) -> bool:
        """The stopping rule's decrease and iterate-change parts for the last iteration."""
        st, h = self.st, self.hist
        return (h[-2] - h[-1] <= st.tol * max(abs(h[-2]), 1e-3 * self.F0)
                and float(np.linalg.norm(self.W - W_old)) <= st.xtol * float(np.linalg.norm(self.W))
                and float(np.linalg.norm(self.B - B_old))
                <= st.xtol * max(1.0, float(np.linalg.norm(self.B))))

    def _stationary(self) -> bool:
        """First-order stationarity to ``xtol``: ||grad_W F|| <= xtol ||c o X^T y||_F (the
        W-step's relative residual) and the B-step's KKT residual <= xtol max(1, max B)."""
        spec, W, B, R, lam, mu, xtol = (self.spec, self.W, self.B, self.R, self.lam, self.mu,
                                        self.st.xtol)
        c = 1.0 + mu * B.sum(axis=1)
        gW = c * (self.GW - spec.Xty) + (2.0 * lam) * (R - R @ B.T)
        if float(np.linalg.norm(gW)) > xtol * float(np.linalg.norm(spec.Xty * c)):
            return False
        return b_kkt_residual(W, R, B, self.L, lam, mu) <= xtol * max(1.0,
                                                                      float(B.max(initial=0.0)))

    def _converge(self, by: str) -> bool:
        self.converged, self.converged_by = True, by
        return True

    def _lm_iteration(self, it, W_old, B_old) -> bool:
        """One Levenberg-Marquardt step; True when the fit has converged."""
        accepted, *point = self.phase.iterate(self.W, self.B, self.E, self.R, self.F)
        if accepted:
            self.W, self.B, self.F, self.E, self.R, self.L = point
        self.hist.append(self.F)
        self._report(it, self.F)
        if not accepted:
            return False
        if self.F <= self.level:
            return self._converge("objective")
        self.GW = self.spec.gram_apply(self.W)
        if self._small_change(W_old, B_old) and self._stationary():
            # a damped step can be small far from a minimum: only a block-coordinate step
            # certifies convergence, so hand back with a finishing W-step
            self._hand_back()
            self.near = True
        return False

    def _block_iteration(self, it, W_old, B_old) -> bool:
        """One B-step, one W-step and the extrapolation; True when the fit has converged."""
        spec, lam, mu, st, low = self.spec, self.lam, self.mu, self.st, self.block_low
        B = self.B.copy()
        C, diagC, G, pen = b_setup(self.W, B, self.L, lam, mu, self.R, low)
        p, _ = b_descent(B, G, self.W, C, diagC, pen, int(st.b_passes), 0.0, low)
        self.b_sweeps += p
        GW_old = self.GW
        W, GW, n_cg, self.w_residual = w_step(
            spec, self.W, self.GW, B, lam, mu, st.cg_tol, st.cg_max_iter, st.xtol, self.fused,
            finish=self.near, low=low, finish_cg=self.solver.finish_cg)
        self.cg_iters += n_cg
        F_new, L, R = gram_objective(spec, W, GW, B, lam, mu)
        self.W, self.GW, self.B, self.F, self.L, self.R = W, GW, B, F_new, L, R
        self.hist.append(F_new)
        # the block step's F; an accepted extrapolation lowers it
        self._report(it, F_new)
        self.near = self._small_change(W_old, B_old)
        if self.near and self.w_residual <= st.xtol:
            return self._converge("stationarity")
        if st.extrapolate:
            self._extrapolate(W_old, B_old, GW_old)
        if self.F <= self.level:
            # the quadratic form cancels as L_t -> 0: confirm with the residual form
            F_exact = residual_objective(spec, self.res, self.W, self.B, lam, mu)[0]
            if F_exact <= self.level:
                self.hist[-1] = F_exact
                return self._converge("objective")
        return False

    def _extrapolate(self, W_old, B_old, GW_old) -> None:
        """(W + beta (W - W_old), max(0, B + beta (B - B_old))) replaces the iterate iff its
        objective is strictly lower (X_t^T X_t W is linear in W: no pass over the data)."""
        _, grow, shrink, cap = self.solver.extrapolation
        beta = self.beta
        We = self.W + beta * (self.W - W_old)
        GWe = self.GW + beta * (self.GW - GW_old)
        Be = np.maximum(self.B + beta * (self.B - B_old), 0.0)
        np.fill_diagonal(Be, 0.0)
        Fe, Le, Re = gram_objective(self.spec, We, GWe, Be, self.lam, self.mu)
        if Fe < self.F:
            self.W, self.GW, self.B, self.L, self.R, self.F = We, GWe, Be, Le, Re, Fe
            self.hist[-1] = Fe
            self.n_extrap += 1
            self.beta = min(beta * grow, cap)
        else:
            self.beta = beta / shrink

    def result(self) -> Fit:
        count = self.phase.count if self.phase is not None else dict.fromkeys(LMPhase.COUNTERS, 0)
        diagnostics = {"b_sweeps": int(self.b_sweeps), "cg_iters": int(self.cg_iters),
                       "extrapolations": int(self.n_extrap),
                       **{f"gauss_newton_{k}": int(v) for k, v in count.items()},
                       "w_step_residual": self.w_residual}
        return Fit(self.W, self.B, self.hist, self.n_iter, self.converged, self.converged_by,
                   diagnostics)
