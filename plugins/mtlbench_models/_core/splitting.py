"""ADMM for the squared loss plus a penalty with an exact proximal map.

    min_W  J(W) + g(W),     J(W) = sum_t 1/2 ||y_t - X_t w_t||^2,  W of shape (d, T),

split as min J(W) + g(Z) subject to W = Z and solved by the alternating direction method of
multipliers in its scaled form (Boyd, Parikh, Chu, Peleato & Eckstein, "Distributed
optimization and statistical learning via the alternating direction method of multipliers",
Foundations and Trends in Machine Learning 3(1), 2011, Sec. 3.1.1):

    W+ = argmin_W J(W) + rho/2 ||W - Z + U||^2
       = [(X_t^T X_t + rho I)^{-1} (X_t^T y_t + rho (z_t - u_t))]_t
    Z+ = prox_{g / rho}(W+ + U)
    U+ = U + W+ - Z+.

The W step is exact for every task at once through the tasks' stacked Gram spectra
(``representations.TaskSpectra.shifted_solve``: O(d r_t) per task, r_t = min(n_t, d), for any
rho at no extra cost), which is what makes the method pay where the squared loss is badly
conditioned (every task under-determined, n_t < d) and g is strongly convex: the W step takes
J exactly, the Z step g exactly, and no step size depends on J's Lipschitz constant.  rho
adapts by residual balancing (Boyd et al., Sec. 3.4.1), looked at every ``adapt_every``
iterations: it doubles when the primal residual ||W+ - Z+|| exceeds ``balance`` times the dual
residual rho ||Z+ - Z|| and halves in the opposite case (U rescaled with it), at most
``max_changes`` times, after which rho stays fixed and the convergence of ADMM with a fixed
penalty applies.  (The two residuals oscillate from one iteration to the next, most of all
from a warm start, where both are small; looked at every iteration, the balancing follows
that oscillation and every change of rho starts a new transient.)

Warm start from W0: Z = W0 and U = -grad J(W0) / rho (the scaled multiplier, optimal when W0
is).  Certificate: the relative duality gap at Z (``solvers.duality_gap``, an upper bound of
F(Z) - F* at any point) every ``check_every`` iterations and at the cap; F(Z) is reported
every iteration (``mtlbench.report_progress``; the spectra's expanded squares between the
checks, the datafit's residuals at them), the gap where it was computed.  Converged iff the
gap is <= ``tol`` within ``max_iter`` iterations.
"""
from __future__ import annotations

import numpy as np

from mtlbench import report_progress

from .solvers import Result, duality_gap

__all__ = ["ADMM", "prefers_admm"]


def prefers_admm(tasks) -> bool:
    """Whether the squared loss of ``tasks`` (a TaskSet) is ADMM's case: the median task
    under-determined (n_t < d), so J is flat along most directions and a proximal-gradient
    step, bounded by J's largest curvature, moves slowly along them, while ADMM's W step solves
    every task's ridge problem exactly (the same rule chooses coordinate descent for a row
    solver 'auto': ``classic.PenalisedModel``)."""
    return bool(np.median([tasks.X(t).shape[0] for t in range(tasks.T)]) < tasks.d)


class ADMM:
    """ADMM on a squared loss and a penalty with a proximal map (module docstring).

    Parameters (the solver's options; the problem is given to :meth:`solve`):
    spectra : the ``representations.TaskSpectra`` of the squared loss's tasks (the W step)
    rho : the first penalty parameter (> 0)
    tol : the relative duality gap to reach
    max_iter : iteration cap (a fit that reaches it is not converged)
    check_every : the gap is computed every this many iterations (and at the cap)
    balance, max_changes : residual balancing of rho (``balance`` > 1; 0 changes: rho fixed)
    adapt_every : the balancing looks at the residuals every this many iterations
    """

    def __init__(self, spectra, rho: float, tol: float = 1e-6, max_iter: int = 5000,
                 check_every: int = 1, balance: float = 10.0, max_changes: int = 50,
                 adapt_every: int = 10) -> None:
        if not float(rho) > 0:
            raise ValueError(f"ADMM: rho must be > 0, got {rho!r}")
        if (int(check_every) < 1 or not float(balance) > 1 or int(max_changes) < 0
                or int(adapt_every) < 1):
            raise ValueError(f"ADMM: check_every >= 1, balance > 1, max_changes >= 0 and "
                             f"adapt_every >= 1 are needed, got {check_every!r}, {balance!r}, "
                             f"{max_changes!r}, {adapt_every!r}")
        self.spectra, self.rho = spectra, float(rho)
        self.tol, self.max_iter, self.check_every = float(tol), int(max_iter), int(check_every)
        self.balance, self.max_changes = float(balance), int(max_changes)
        self.adapt_every = int(adapt_every)

    def solve(self, datafit, penalty, W0: np.ndarray) -> Result:
        """Minimise J + g from ``W0`` (array of shape (d, T)).

        Parameters
        ----------
        datafit : the squared loss of ``spectra``'s tasks (``datafits.SquaredLoss``): its
            states give J and grad J at Z for the certificate
        penalty : a penalty of ``penalties.py`` with ``value``, ``prox`` and a dual norm or a
            finite conjugate
        W0 : array of shape (d, T)

        Returns
        -------
        Result : Z at the end, F after every iteration, iterations, certificate, converged
        """
        sp = self.spectra
        if (sp.d, sp.T) != (datafit.d, datafit.T) or np.shape(W0) != (sp.d, sp.T):
            raise ValueError(f"ADMM: the spectra ({sp.d} x {sp.T}), the datafit "
                             f"({datafit.d} x {datafit.T}) and W0 {np.shape(W0)} disagree")
        prox = getattr(penalty, "prox_with_value", None)
        if prox is None:
            prox = lambda V, L: (lambda X: (X, penalty.value(X)))(penalty.prox(V, L))
        Z = np.array(W0, dtype=np.float64)
        S = datafit.forward(Z)
        pen = penalty.value(Z)

        def certify(Z, S, pen):
            F = datafit.value_of(S) + pen
            return F, duality_gap(datafit, penalty, Z, state=S, pen=pen) / max(abs(F), 1e-300)

        F, cert = certify(Z, S, pen)
        hist = [float(F)]
        report_progress(0, float(F), cert * abs(F))
        if cert <= self.tol:
            return Result(Z, hist, 0, cert, "gap", True)
        rho, changes = self.rho, 0
        U = -datafit.grad_of(S) / rho
        # the tasks' coordinates V_t^T p_t of Xty, Z and U, kept alongside (``project`` is
        # linear and V_t^T V_t = I on each task's span): one projection per iteration
        QX, QZ, QU = sp.project(sp.Xty), sp.project(Z), sp.project(U)
        it = 0
        for it in range(1, self.max_iter + 1):
            QP = QX + rho * (QZ - QU)
            W = (sp.Xty + rho * (Z - U)) / rho + sp.lift((1.0 / (sp.e + rho) - 1.0 / rho) * QP)
            Zn, pen = prox(W + U, rho)
            QZn = sp.project(Zn)
            R = W - Zn
            U += R
            QU += QP / (sp.e + rho) - QZn
            primal = float(np.linalg.norm(R))
            dual = rho * float(np.linalg.norm(Zn - Z))
            Z, QZ = Zn, QZn
            if it % self.check_every == 0 or it == self.max_iter:
                S = datafit.forward(Z)
                F, cert = certify(Z, S, pen)
                bound = cert * abs(F)
            else:        # F from the spectra; F(Z) is not monotone: no bound between checks
                fit = np.einsum("tr,tr->t", sp.e, QZ * QZ) - 2.0 * np.einsum(
                    "it,it->t", Z, sp.Xty) + sp.yy
                F, bound = 0.5 * float(np.maximum(fit, 0.0).sum()) + pen, None
            hist.append(float(F))
            report_progress(it, float(F), bound)
            if cert <= self.tol:
                break
            if changes < self.max_changes and it % self.adapt_every == 0:
                if primal > self.balance * dual:
                    rho, U, QU, changes = 2.0 * rho, U / 2.0, QU / 2.0, changes + 1
                elif dual > self.balance * primal:
                    rho, U, QU, changes = rho / 2.0, U * 2.0, QU * 2.0, changes + 1
        return Result(Z, hist, it, float(cert), "gap", bool(cert <= self.tol))
