"""Solvers that compose a datafit J (``datafits.py``) and a penalty g (``penalties.py``):

    min_W  F(W) = J(W) + g(W),      W of shape (d, T)  (or stacked blocks, ``SumOfBlocks``).

* :class:`FISTA` -- accelerated proximal gradient (Beck & Teboulle 2009): steps
  X+ = prox_{g/L}(Y - grad J(Y) / L) from the extrapolated point Y = X_k + beta_k (X_k - X_{k-1})
  (FISTA's beta_k); L starts at the datafit's Lipschitz constant and doubles until the
  descent-lemma test J(X+) <= J(Y) + <grad J(Y), X+ - Y> + L/2 ||X+ - Y||^2 holds (relative
  slack 1e-12); monotone restart (a step that increases F is replaced by a plain
  proximal-gradient step from X_k and the momentum restarts: F never increases beyond its
  rounding, ``ROUNDING`` |F|; that step is taken even when rounding hides its decrease, so the
  relative gap reaches tolerances far below sqrt(machine epsilon)).  With
  ``gradient_restart``, the momentum also restarts when the step X+ - X_k makes an acute angle
  with Y - X+ (O'Donoghue & Candes 2015, "Adaptive restart for accelerated gradient schemes":
  the momentum then points uphill); the step is kept, the next one starts from X+ without it.
  With ``decrease`` = rho < 1, the step constant can also decrease (Scheinberg, Goldfarb & Bai
  2014, FISTA-BKTR): each iteration first tries rho x the last accepted L (after a doubling,
  L is kept ``patience`` iterations), and for every trial L the momentum
  t_{k+1} = (1 + sqrt(1 + 4 (L / L_k) t_k^2)) / 2 and the extrapolated point are recomputed,
  which keeps the O(1/k^2) rate with the step constants the descent-lemma test accepts; below
  the smooth term's ``lipschitz`` the test has no rounding slack.  g(X+) comes with the prox
  where the penalty has ``prox_with_value``.
  Certificate, checked every ``check_every`` iterations (1: every iterate) and at the cap:
  the relative duality gap (:func:`duality_gap`; for L1 also at per-task dual scales and,
  beside a mean regulariser, with its dual point corrected into the l1 ball
  (:func:`_mean_dual_gap`), every ``TASK_GAP_EVERY`` iterations) when the penalty is a norm
  (``dual_scale``)
  or has a finite conjugate, else the relative optimality residual ||E|| / (L max(1, ||X||)),
  E = grad J(X+) - grad J(Y) + L (Y - X+), an element of the subdifferential of F at X+
  (prox optimality).  Converged iff the certificate is <= ``tol`` within ``max_iter``
  iterations.
* :class:`BlockCoordinateDescent` -- cyclic proximal steps on the rows of W (features) for
  penalties that separate over rows (L1, L21, L1Inf, L1InfConvL1) and the squared loss in its
  ``gram`` representation, optionally with row-separable quadratics (a :class:`SmoothSum` with
  ``MeanRegularised`` / ``GraphLaplacian``): row i moves by prox_{g_i/L_i}(w_i - grad_i / L_i)
  with L_i = max_t (X_t^T X_t)_ii (+ the quadratics' constants), or to the row's exact
  minimiser for the mean regulariser with L1 (``penalties.MeanRegL1Rows``); the products
  H_t w_t updated in O(d T) per row, so a sweep costs one gradient evaluation; better than
  FISTA when d is small (each sweep moves every feature by its own curvature).  Sweeps visit
  the active rows only (non-zero, or a zero row whose step would move it), and every
  ``anderson`` sweeps the Anderson extrapolation of the last iterates (Bertrand & Massias
  2021) replaces the iterate when it lowers F.  Certificate: the relative duality gap of the
  whole problem after every sweep.
* :class:`SmoothSum` -- J plus smooth quadratic penalties as one smooth term (its gap adds
  the quadratics' conjugates at their gradients).
* :class:`LBFGS` -- :func:`lbfgs` on J + g for a differentiable penalty g (``grad``, or
  ``value_and_grad`` where one decomposition gives both; with Lipschitz gradient, so F is
  smooth): no proximal map and no step constant, the curvature pairs of L-BFGS instead of
  FISTA's 1/L steps, which pays where F is badly conditioned (a small strongly convex part of
  g beside a flat datafit).  Certificate: the relative duality gap with g's conjugate
  (:func:`duality_gap`), from the state of the last evaluation (no extra pass over the
  data), at the start, every ``check_every`` iterations and at the cap; converged iff it is
  <= ``tol`` within ``max_iter`` iterations.  F decreases strictly at every iteration
  (Armijo), so the last gap computed bounds F - F* until the next one.
* :func:`lbfgs` -- limited-memory BFGS with a preconditioner (smooth or piecewise smooth f):
  the two-loop recursion (Nocedal & Wright, "Numerical Optimization", 2nd ed., Alg. 7.4) over
  the last ``memory`` pairs with s^T y > 0, started from ``precondition(x, v)`` scaled by
  s^T y / y^T H0 y (Alg. 7.5's scaling in the preconditioned metric); the unit step first,
  then backtracking by safeguarded quadratic interpolation until Armijo's condition
  f(x + a p) <= f(x) + 1e-4 a g^T p and a strict decrease hold; stops when the caller's
  ``check(x)`` holds (at the start, every ``check_every`` iterations and at the cap), at
  ``max_iter`` or when no decrease is possible at machine precision.  No rate is claimed for
  non-convex f: callers certify the result with ``check``.

Every iterative solver calls ``mtlbench.report_progress(iteration, objective, certificate)``
once per iteration (the certificate an upper bound of F - F* where it is a duality gap).
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from mtlbench import report_progress

from .datafits import LeastSquares, LogisticLoss
from .penalties import (L1, GraphLaplacian, MeanRegL1Rows, MeanRegularised,
                        mean_reg_l1_dual_rows)

__all__ = ["FISTA", "BlockCoordinateDescent", "LBFGS", "RowWorkingSet", "SumOfBlocks",
           "SmoothSum", "Result", "duality_gap", "lbfgs"]


@dataclass
class Result:
    """What a solver returns: the minimiser ``W`` (the solver's variable: stacked blocks for
    ``SumOfBlocks``), F after every iteration (``history``, the start first), ``n_iter``,
    the certificate reached (``certificate``: relative duality gap or optimality residual,
    ``certificate_kind`` says which) and ``converged`` (the certificate met ``tol``)."""

    W: np.ndarray
    history: list = field(default_factory=list)
    n_iter: int = 0
    certificate: float = np.inf
    certificate_kind: str = "gap"
    converged: bool = False


class SumOfBlocks:
    """The smooth term J(sum_b X_b) of a stacked variable X (B x d x T): the decomposition
    models (W = P + Q).  The gradient in every block is grad J(W); ``inner`` and ``sqnorm`` are
    the solver's inner product <grad, D> = <grad J(W), sum_b D_b> and ||D||^2 = sum_b ||D_b||^2.
    ``lipschitz`` is the datafit's (the joint gradient's constant is at most B times it: the
    backtracking of :class:`FISTA` finds the step)."""

    def __init__(self, datafit, n_blocks: int = 2) -> None:
        self.datafit, self.n_blocks = datafit, int(n_blocks)
        self.lipschitz = datafit.lipschitz
        self.value_of, self.grad_of, self.combine = (datafit.value_of, datafit.grad_of,
                                                     datafit.combine)

    @staticmethod
    def total(X: np.ndarray) -> np.ndarray:
        """W = sum_b X_b."""
        return functools.reduce(np.add, X)

    def forward(self, X: np.ndarray):
        return self.datafit.forward(self.total(X))

    def inner(self, G: np.ndarray, D: np.ndarray) -> float:
        return np.sum(G * self.total(D))

    @staticmethod
    def sqnorm(D: np.ndarray) -> float:
        return functools.reduce(lambda a, b: a + b, (np.sum(x * x) for x in D))

    def gap(self, S, X: np.ndarray, pen: float, s: float, G: np.ndarray | None = None,
            f: float | None = None) -> float:
        return self.datafit.gap(S, self.total(X), pen, s, G, f)


class SmoothSum:
    """J(W) + sum_h h(W): a datafit plus smooth penalties h, each a homogeneous quadratic
    (h(W) = 1/2 <W, grad h(W)>: ``GraphLaplacian``, ``MeanRegularised``, ``SquaredFrobenius``),
    as the smooth term of :class:`FISTA` beside a non-smooth penalty g (SRMTL: the squared loss
    + a graph term, with an l1 g).

    State (linear in W): the datafit's state, W and Gh = sum_h grad h(W); J + h reads
    f(S) + 1/2 <W, Gh>, its gradient grad J + Gh; ``lipschitz`` is the sum of the terms'.
    Duality gap: with the dual point s grad h(W) for each quadratic (its conjugate there is
    s^2 h(W)) beside the datafit's s Theta, and s from g's dual ball at the total gradient,
    gap = (the datafit's gap with the penalty value pen + s <W, Gh> + (1 - s)^2 h(W)): the
    terms h(W) + h*(s grad h(W)) = (1 + s^2) h(W) added to the datafit's."""

    def __init__(self, datafit, *smooth) -> None:
        self.datafit, self.smooth = datafit, smooth

    @property
    def lipschitz(self) -> float:
        return self.datafit.lipschitz + sum(h.lipschitz for h in self.smooth)

    def _gh(self, W: np.ndarray) -> np.ndarray:
        return functools.reduce(np.add, (h.grad(W) for h in self.smooth))

    def forward(self, W: np.ndarray):
        return (self.datafit.forward(W), W, self._gh(W))

    def value_of(self, S) -> float:
        return self.datafit.value_of(S[0]) + 0.5 * float(np.sum(S[1] * S[2]))

    def grad_of(self, S) -> np.ndarray:
        return self.datafit.grad_of(S[0]) + S[2]

    def combine(self, S1, S0, beta: float):
        return tuple([self.datafit.combine(S1[0], S0[0], beta)]
                     + [a + beta * (a - b) for a, b in zip(S1[1:], S0[1:])])

    def value(self, W: np.ndarray) -> float:
        return self.value_of(self.forward(W))

    def grad(self, W: np.ndarray) -> np.ndarray:
        return self.grad_of(self.forward(W))

    def gap(self, S, W: np.ndarray, pen: float, s: float, G: np.ndarray | None = None,
            f: float | None = None) -> float:
        h = 0.5 * float(np.sum(S[1] * S[2]))
        wgh = 2.0 * h
        Gd = None if G is None else G - S[2]
        fd = None if f is None else f - h
        return self.datafit.gap(S[0], W, pen + s * wgh + (1.0 - s) ** 2 * h, s, Gd, fd)


def duality_gap(datafit, penalty, W: np.ndarray, state=None, pen: float | None = None) -> float:
    """P(W) - D(Theta) >= 0 at the dual point Theta = s grad F(XW) (the datafit's gradient in
    the scores; module docstring of ``datafits.py``): for a norm penalty g = lam ||.|| the
    conjugate is the indicator of {||.||_* <= lam}, and s = ``penalty.dual_scale(grad J(W))``
    puts the point inside (for L1 also one s_t per task, :func:`_task_scaled_gap`, and beside
    a mean regulariser its dual point corrected row by row, :func:`_mean_dual_gap`: the
    smallest gap is returned); for a penalty with a finite conjugate, s = 1 and g*(-grad J(W)) is
    added.  Zero exactly at the optimum, an upper bound of F(W) - F* everywhere.

    Parameters
    ----------
    datafit, penalty : the problem's J and g
    W : array of shape (d, T)
    state : ``datafit.forward(W)`` if known
    pen : ``penalty.value(W)`` if known

    Returns
    -------
    float : the gap (absolute)
    """
    S = datafit.forward(W) if state is None else state
    pen = penalty.value(W) if pen is None else pen
    if hasattr(penalty, "dual_scale") or hasattr(penalty, "conjugate"):
        return _gap_of(datafit, penalty, S, W, pen, datafit.value_of(S))
    raise ValueError(f"duality_gap: {type(penalty).__name__} has neither a dual norm nor a "
                     "conjugate (use an optimality residual)")


def _has_gap(penalty) -> bool:
    return hasattr(penalty, "dual_scale") or hasattr(penalty, "conjugate")


def _gap_of(smooth, penalty, S, X, pen: float, f: float, task_scaled: bool = True) -> float:
    """The duality gap at X (state S, J(X) = f, g(X) = pen): for a norm the smallest of the
    gaps at the dual point scaled into the ball as a whole and (``task_scaled``) task by task
    (:func:`_task_scaled_gap`) and with a mean regulariser's dual point corrected into the
    ball (:func:`_mean_dual_gap`), where they apply."""
    G = smooth.grad_of(S)
    if hasattr(penalty, "dual_scale"):
        gap = smooth.gap(S, X, pen, penalty.dual_scale(G), G, f)
        if not task_scaled:
            return gap
        return min(gap, _task_scaled_gap(smooth, penalty, S, X, pen, G, f),
                   _mean_dual_gap(smooth, penalty, S, X, pen, G, f))
    return smooth.gap(S, X, pen + penalty.conjugate(-G), 1.0, G, f)


def _task_scaled_gap(smooth, penalty, S, X, pen: float, G: np.ndarray, f: float) -> float:
    """The duality gap at the dual point scaled task by task, for a penalty whose dual ball
    constrains each task's column alone (``task_dual_scales``: L1) and a datafit of separate
    tasks that takes one scale per task (``LeastSquares``, ``LogisticLoss``); inf elsewhere.

    One task whose gradient leaves the ball then shrinks its own dual point only, not every
    task's.  In a :class:`SmoothSum` the quadratics' dual point is their gradient Gh unscaled
    (h(W) + h*(grad h(W)) = 2 h(W)) and s_t the largest <= 1 with
    |s_t G_J[:, t] + Gh[:, t]| <= lam entrywise (inf if some task has none)."""
    scales = getattr(penalty, "task_dual_scales", None)
    if scales is None:
        return np.inf
    if isinstance(smooth, SmoothSum):
        J = smooth.datafit
        if not isinstance(J, (LeastSquares, LogisticLoss)):
            return np.inf
        Gh = S[2]
        h = 0.5 * float(np.sum(S[1] * Gh))
        GJ = G - Gh
        s = scales(GJ, shift=Gh)
        if not np.all(np.isfinite(s)):
            return np.inf
        return J.gap(S[0], X, pen + 2.0 * h, s[:, None], GJ, f - h)
    if isinstance(smooth, (LeastSquares, LogisticLoss)):
        return smooth.gap(S, X, pen, scales(G)[:, None], G, f)
    return np.inf


def _mean_dual_gap(smooth, penalty, S, X, pen: float, G: np.ndarray, f: float) -> float:
    """The duality gap of J + h + g, h = ``MeanRegularised`` (lam_mean = 0) in a
    :class:`SmoothSum` and g = ``L1`` (tau), at the datafit's dual point s Theta and h's dual
    point V = grad h(W) + Delta, Delta the row-wise correction that puts s grad J(W) + V into
    the l1 ball (:func:`~penalties.mean_reg_l1_dual_rows`; V keeps zero row sums, where
    h*(V) = ||V||^2 / (4 lam)): the datafit's gap at s with h(W) + h*(V) added.  The scale
    s = min(1, T tau / max_i |sum_t grad J(W)_it|) makes every row's correction feasible
    (grad h(W) has zero row sums).  inf for other terms."""
    if not (isinstance(smooth, SmoothSum) and type(penalty) is L1 and len(smooth.smooth) == 1):
        return np.inf
    h = smooth.smooth[0]
    if not (isinstance(h, MeanRegularised) and h.lam_mean == 0 and h.lam > 0):
        return np.inf
    Gh = S[2]
    GJ = G - Gh
    T = X.shape[1]
    worst = float(np.abs(GJ.sum(axis=1)).max(initial=0.0))
    s = 1.0 if worst <= T * penalty.lam else (1.0 - 1e-12) * T * penalty.lam / worst
    Delta = mean_reg_l1_dual_rows(X, s * GJ + Gh, h.lam, penalty.lam)
    if Delta is None:
        return np.inf
    hW = 0.5 * float(np.sum(S[1] * Gh))
    V = Gh + Delta
    return smooth.datafit.gap(S[0], X, pen + hW + float(np.sum(V * V)) / (4.0 * h.lam), s,
                              GJ, f - hW)


#: FISTA adds the task-scaled gap (:func:`_task_scaled_gap`) to the certificate at the
#: iterations that are multiples of this (and at the cap): where the certificate is checked
#: every iteration it would otherwise cost about a third of a cheap iteration.
TASK_GAP_EVERY = 10

#: Relative size of the rounding of F below which the plain proximal-gradient step of a
#: monotone restart is taken although F did not decrease (the step cannot increase F in exact
#: arithmetic, and near the optimum the iterates still move towards it while F no longer
#: resolves the change: stopping there would leave the gap at about sqrt(machine epsilon)).
ROUNDING = 1e-13


class FISTA:
    """Accelerated proximal gradient with backtracking and monotone restart (module docstring).

    Parameters (the solver's options; the problem is given to :meth:`solve`):
    tol : the certificate to reach (relative duality gap, or relative optimality residual)
    max_iter : iteration cap (a fit that reaches it is not converged)
    restart : monotone restart (F never increases); False: plain FISTA
    backtracking : double L until the descent-lemma test holds; False: L stays at ``L0``
    certificate : "auto" (a duality gap where the penalty has a dual norm or a conjugate,
        else the residual), "gap" or "residual"
    slack : relative slack of the descent-lemma test (rounding of J near the optimum)
    L0 : the first step constant (default: the smooth term's ``lipschitz``)
    decrease : None (L only increases) or rho in (0, 1): FISTA-BKTR, each iteration first
        tries rho x the last accepted L (needs ``backtracking``)
    patience : with ``decrease``, the iterations L is kept after a doubling
    check_every : the certificate is computed every ``check_every`` iterations (and at the
        cap) when it costs a pass over the data; in between the last one is reported (an
        upper bound still: F does not increase beyond its rounding)
    gradient_restart : also restart the momentum when <Y - X+, X+ - X_k> > 0 (O'Donoghue &
        Candes 2015's gradient scheme), before F can increase
    """

    def __init__(self, tol: float = 1e-6, max_iter: int = 5000, restart: bool = True,
                 backtracking: bool = True, certificate: str = "auto", slack: float = 1e-12,
                 L0: float | None = None, decrease: float | None = None,
                 patience: int = 10, check_every: int = 1,
                 gradient_restart: bool = False) -> None:
        if certificate not in ("auto", "gap", "residual"):
            raise ValueError(f"FISTA: certificate must be 'auto', 'gap' or 'residual', "
                             f"got {certificate!r}")
        if decrease is not None and not (0.0 < float(decrease) < 1.0 and backtracking):
            raise ValueError(f"FISTA: decrease must be in (0, 1) and needs backtracking, "
                             f"got decrease={decrease!r}, backtracking={backtracking!r}")
        if int(check_every) < 1:
            raise ValueError(f"FISTA: check_every must be >= 1, got {check_every!r}")
        self.tol, self.max_iter = float(tol), int(max_iter)
        self.restart, self.backtracking = bool(restart), bool(backtracking)
        self.certificate, self.slack, self.L0 = certificate, float(slack), L0
        self.decrease = None if decrease is None else float(decrease)
        self.patience, self.check_every = int(patience), int(check_every)
        self.gradient_restart = bool(gradient_restart)

    def solve(self, datafit, penalty, W0: np.ndarray) -> Result:
        """Minimise J + g from ``W0`` (a warm start: any point of the variable's shape).

        Parameters
        ----------
        datafit : a datafit of ``datafits.py`` (or ``SumOfBlocks``): the smooth term
        penalty : a penalty of ``penalties.py`` with ``value`` and ``prox``
        W0 : array of shape (d, T) (stacked blocks (B, d, T) for ``SumOfBlocks``)

        Returns
        -------
        Result : the minimiser, F after every iteration, iterations, certificate, converged
        """
        prob = _Composite(self, datafit, penalty)
        X = np.array(W0, dtype=np.float64)
        S = datafit.forward(X)
        f = datafit.value_of(S)
        pen = penalty.value(X)
        F = f + pen
        hist = [float(F)]
        cert = prob.certify(X, S, f, pen)
        bound = prob.reported(cert, F)
        report_progress(0, float(F), bound)
        if cert <= self.tol:
            return Result(X, hist, 0, cert, prob.kind, True)
        Y, SY = X, S
        t_k = 1.0
        L = max(float(self.L0 if self.L0 is not None else datafit.lipschitz), 1e-12)
        bktr = self.decrease is not None
        Xp, Sp, wait = X, S, 0            # FISTA-BKTR: X_{k-1}, its state, L kept while wait
        it = 0
        for it in range(1, self.max_iter + 1):
            if bktr:
                L_try = L if wait > 0 else L * self.decrease
                wait = max(wait - 1, 0)
                Xn, Sn, fn, L_new, GY, pen_n, base, t_acc = prob.bktr_step(X, S, Xp, Sp, t_k,
                                                                           L_try, L)
                if L_new > L_try:
                    wait = self.patience
                L = L_new
            else:
                Xn, Sn, fn, L, GY, pen_n = prob.step_from(Y, SY, L)
                base = Y
            Fn = fn + pen_n
            if self.restart and Fn > F:      # a plain proximal-gradient step from X_k
                t_k = t_acc = 1.0
                Xn, Sn, fn, L, GY, pen_n = prob.step_from(X, S, L)
                base = X
                Fn = fn + pen_n
                if Fn > F + ROUNDING * abs(F):   # an increase beyond rounding: no progress
                    step = (X, datafit.grad_of(S), L) if prob.kind == "residual" else None
                    cert = prob.certify(X, S, f, pen, step)
                    break
            # gradient restart: the step X+ - X_k makes an acute angle with Y - X+ (a gradient
            # mapping): the momentum points uphill, the next step starts without it
            turned = (self.gradient_restart and base is not X
                      and np.vdot(base - Xn, Xn - X) > 0)
            if bktr:
                Xp, Sp, t_next = X, S, (1.0 if turned else t_acc)
            elif turned:
                t_next, Y, SY = 1.0, Xn, Sn
            else:
                t_next = (1.0 + np.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0
                beta = (t_k - 1.0) / t_next
                Y = Xn + beta * (Xn - X)
                SY = datafit.combine(Sn, S, beta)
            X, S, f, pen, F, t_k = Xn, Sn, fn, pen_n, Fn, t_next
            hist.append(float(F))
            if it % self.check_every == 0 or it == self.max_iter:
                cert = prob.certify(X, S, f, pen, (base, GY, L),
                                    it % TASK_GAP_EVERY == 0 or it == self.max_iter)
                bound = prob.reported(cert, F)
            report_progress(it, float(F), bound)
            if cert <= self.tol:
                break
        return Result(X, hist, it, float(cert), prob.kind, bool(cert <= self.tol))


class RowWorkingSet:
    """``inner`` (e.g. :class:`FISTA`) on the rows of W that can be non-zero, for a penalty
    that separates over the rows with a dual norm (``row_dual_ratios``: ``L21`` by rows,
    ``L1InfConvL1``) and a datafit with ``restrict_rows`` (``LogisticLoss`` and its intercept
    variant: the designs' columns of those rows; the states, the value and the gradient's
    rows are the full problem's when the other rows of W are zero).

    The working set starts as the rows that are non-zero in ``W0`` or whose
    ``row_dual_ratios`` at grad J(W0) exceed 1 (a zero row with ratio <= 1 stays zero under a
    proximal step from W0); ``inner`` solves the problem on those rows (the others zero) to
    its ``tol``; then the duality gap of the whole problem is computed at the result
    (:func:`duality_gap`: the full gradient, every row's dual norm): the result is converged
    iff that gap is <= ``tol``; else the rows outside the set whose ratio exceeds 1 join it
    (all rows when none does) and ``inner`` continues from the result, with the iterations
    left of ``max_iter`` (``inner.max_iter``).  The certificate is the whole problem's gap,
    whatever the set."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.tol, self.max_iter = inner.tol, inner.max_iter

    def solve(self, datafit, penalty, W0: np.ndarray) -> Result:
        """Minimise J + g from ``W0`` (array of shape (d, T)); returns a :class:`Result` whose
        certificate is the relative duality gap of the whole problem."""
        if getattr(penalty, "groups", "rows") != "rows" or not hasattr(penalty,
                                                                        "row_dual_ratios"):
            raise ValueError(f"RowWorkingSet: {type(penalty).__name__} does not separate over "
                             "the rows of W with a dual norm")
        W = np.array(W0, dtype=np.float64)
        S = datafit.forward(W)
        keep = np.any(W != 0.0, axis=1) | ~(penalty.row_dual_ratios(datafit.grad_of(S)) <= 1.0)
        hist: list = []
        n_iter, cert = 0, np.inf
        while True:
            inner = copy.copy(self.inner)
            inner.max_iter = self.max_iter - n_iter
            whole = bool(keep.all())
            rows = np.flatnonzero(keep)
            res = inner.solve(datafit if whole else datafit.restrict_rows(rows), penalty,
                              W[rows])
            hist += res.history if not hist else res.history[1:]
            n_iter += res.n_iter
            if whole:                     # the whole problem: the inner certificate is its own
                return Result(res.W, hist, n_iter, res.certificate, res.certificate_kind,
                              res.converged)
            W = np.zeros_like(W)
            W[rows] = res.W
            S = datafit.forward(W)
            f, pen = datafit.value_of(S), penalty.value(W)
            F = f + pen
            cert = _gap_of(datafit, penalty, S, W, pen, f) / max(abs(F), 1e-300)
            report_progress(n_iter, float(F), cert * abs(F))
            if cert <= self.tol or n_iter >= self.max_iter:
                return Result(W, hist, n_iter, float(cert), "gap", bool(cert <= self.tol))
            join = ~keep & ~(penalty.row_dual_ratios(datafit.grad_of(S)) <= 1.0)
            # no row to add (the set's problem is solved, the whole gap above tol only by
            # rounding): the whole problem from here
            keep = keep | join if join.any() else np.ones_like(keep)


class _Composite:
    """J + g as :class:`FISTA` steps on it: the proximal-gradient step with backtracking and
    the certificate of a point."""

    def __init__(self, solver: FISTA, smooth, penalty) -> None:
        kind = solver.certificate
        if kind == "auto":
            kind = "gap" if _has_gap(penalty) else "residual"
        if kind == "gap" and not _has_gap(penalty):
            raise ValueError(f"FISTA: {type(penalty).__name__} has no dual norm or conjugate "
                             "for a duality gap")
        self.kind, self.smooth, self.penalty = kind, smooth, penalty
        self.backtracking, self.slack = solver.backtracking, solver.slack
        self.exact_below = solver.decrease is not None
        self.inner = getattr(smooth, "inner", lambda G, D: np.sum(G * D))
        self.sqnorm = getattr(smooth, "sqnorm", lambda D: np.sum(D * D))
        self.prox_with_value = getattr(penalty, "prox_with_value", None)

    @functools.cached_property
    def L_lip(self) -> float:
        """The smooth term's Lipschitz constant (read at the first step: a start that is
        certified needs none)."""
        return max(float(self.smooth.lipschitz), 1e-12)

    def step_from(self, Y, SY, L):
        """Proximal-gradient step from Y (state SY), L doubled until the descent-lemma test
        holds; returns (X+, its state, J(X+), L, grad J(Y), g(X+))."""
        smooth = self.smooth
        fY, G = smooth.value_of(SY), smooth.grad_of(SY)
        while True:
            Xn, Sn, fn, pen, ok = self._trial(Y, fY, G, L)
            if ok:
                return Xn, Sn, fn, L, G, pen
            L *= 2.0

    def _trial(self, Y, fY, G, L):
        """The step from Y with constant L: (X+, its state, J(X+), g(X+), whether it passes
        the descent-lemma test (with FISTA-BKTR, exact below the stated Lipschitz
        constant))."""
        smooth = self.smooth
        if self.prox_with_value is None:
            Xn, pen = self.penalty.prox(Y - G / L, L), None
        else:
            Xn, pen = self.prox_with_value(Y - G / L, L)
        D = Xn - Y
        Sn = smooth.forward(Xn)
        fn = smooth.value_of(Sn)
        quad = fY + self.inner(G, D) + 0.5 * L * self.sqnorm(D)
        if self.exact_below and L < self.L_lip:
            ok = fn <= quad
        else:
            ok = not self.backtracking or fn <= quad + self.slack * max(abs(quad), 1.0)
        if ok and pen is None:
            pen = self.penalty.value(Xn)
        return Xn, Sn, fn, pen, ok

    def bktr_step(self, X, S, Xp, Sp, t_k, L, L_acc):
        """FISTA-BKTR's step from X_k (state S; X_{k-1}, Sp): for each trial L (doubled until
        the descent-lemma test holds) the momentum at L / L_acc and the extrapolated point
        Y are recomputed.  Returns (X+, its state, J(X+), L, grad J(Y), g(X+), Y, t_{k+1})."""
        smooth = self.smooth
        while True:
            t_next = (1.0 + np.sqrt(1.0 + 4.0 * (L / L_acc) * t_k * t_k)) / 2.0
            beta = (t_k - 1.0) / t_next
            Y, SY = (X + beta * (X - Xp), smooth.combine(S, Sp, beta)) if beta > 0 else (X, S)
            fY, G = smooth.value_of(SY), smooth.grad_of(SY)
            Xn, Sn, fn, pen, ok = self._trial(Y, fY, G, L)
            if ok:
                return Xn, Sn, fn, L, G, pen, Y, t_next
            L *= 2.0

    def certify(self, X, S, f, pen, step=None, task_scaled: bool = True) -> float:
        """The relative duality gap at X, or the relative optimality residual of the step
        ``step`` = (base point, gradient there, L) that produced X (inf without a step)."""
        F = f + pen
        if self.kind == "gap":
            return _gap_of(self.smooth, self.penalty, S, X, pen, f, task_scaled) / max(
                abs(F), 1e-300)
        if step is None:
            return np.inf
        Y, GY, L = step
        E = self.smooth.grad_of(S) - GY + L * (Y - X)
        return float(np.linalg.norm(E)) / (self.L_lip * max(1.0, float(np.linalg.norm(X))))

    def reported(self, cert: float, F: float) -> float | None:
        """The certificate given to ``report_progress``: the absolute gap (None for a
        residual: it bounds no distance to the optimum)."""
        return cert * abs(F) if self.kind == "gap" else None


class BlockCoordinateDescent:
    """Cyclic proximal coordinate descent over the rows of W (module docstring).

    Parameters: ``tol`` (relative duality gap to reach), ``max_sweeps``, ``active_set``
    (sweep only the active rows where the penalty has ``row_dual_ratios``), ``anderson``
    (K: every K sweeps the Anderson extrapolation of the last K + 1 iterates, :func:`_anderson`,
    is taken when it lowers F; 0: none).  :meth:`solve` needs a
    :class:`~datafits.LeastSquares` in the ``gram`` representation, optionally inside a
    :class:`SmoothSum` with quadratic terms that separate over the rows (``MeanRegularised``,
    ``GraphLaplacian``: their gradient at a row depends on that row only), and a penalty whose
    prox acts on each row separately (``L1``, ``L21`` with rows, ``L1Inf``, ``L1InfConvL1``).

    Row step: prox_{g_i / L_i}(w_i - grad_i / L_i) with L_i = max_t (X_t^T X_t)_ii + the
    quadratics' Lipschitz constants; for the squared loss with one ``MeanRegularised``
    (``lam_mean = 0``) and ``L1`` the row's exact minimiser instead
    (:class:`~penalties.MeanRegL1Rows`: the graph term's curvature along the row's mean
    is that of the data, which a step of 1 / L_i would take at the graph term's).

    Active rows: after every sweep (the certificate reads the full gradient G, kept exact for
    every row) the next sweep visits the rows that are non-zero or whose ``row_dual_ratios``
    at G exceed 1; a zero row with ratio <= 1 is left where its step would leave it (the
    quadratics' gradient is zero at a zero row).  A row leaves the set only by reaching zero,
    so every step is a coordinate step and F does not increase (an extrapolation is kept only
    when it lowers F); the certificate is the duality gap of the whole problem, so a fit stops
    only where every row, visited or not, is optimal to ``tol``."""

    def __init__(self, tol: float = 1e-6, max_sweeps: int = 1000,
                 active_set: bool = True, anderson: int = 5) -> None:
        if int(anderson) < 0:
            raise ValueError(f"BlockCoordinateDescent: anderson must be >= 0, got {anderson!r}")
        self.tol, self.max_sweeps = float(tol), int(max_sweeps)
        self.active_set = bool(active_set)
        self.anderson = int(anderson)

    def solve(self, datafit, penalty, W0: np.ndarray) -> Result:
        """Minimise J + g from ``W0`` (array of shape (d, T)); returns a :class:`Result`."""
        smooth = datafit
        quads = ()
        if isinstance(datafit, SmoothSum):
            datafit, quads = datafit.datafit, datafit.smooth
        if getattr(datafit, "representation", None) != "gram":
            raise ValueError("BlockCoordinateDescent: the datafit must be a least-squares "
                             "datafit in the 'gram' representation")
        if getattr(penalty, "groups", "rows") != "rows" or not hasattr(penalty, "dual_scale"):
            raise ValueError(f"BlockCoordinateDescent: {type(penalty).__name__} does not "
                             "separate over the rows of W with a dual norm")
        if not all(isinstance(h, (MeanRegularised, GraphLaplacian)) for h in quads):
            raise ValueError("BlockCoordinateDescent: the smooth terms must separate over the "
                             "rows (MeanRegularised, GraphLaplacian)")
        exact = (len(quads) == 1 and isinstance(quads[0], MeanRegularised)
                 and quads[0].lam_mean == 0 and type(penalty) is L1)
        form = datafit.form
        H, B = form.H, form.B
        d, T = B.shape
        W = np.array(W0, dtype=np.float64)
        HW = datafit.forward(W)[1].copy()
        Dg = np.einsum("tii->it", H)                                        # (d, T)
        Lrow = np.maximum(Dg.max(axis=1) + sum(h.lipschitz for h in quads), 1e-300)
        movable = Lrow > 1e-300
        Hcols = form.columns                                                 # [i] = H_t[:, i]
        buf = np.empty((d, T))
        ratios = getattr(penalty, "row_dual_ratios", None) if self.active_set else None

        def state(W, HW):
            S = np.stack([W, HW])
            return (S, W, functools.reduce(np.add, (h.grad(W) for h in quads))) if quads else S

        def objective(W, HW):
            return smooth.value_of(state(W, HW)) + penalty.value(W)

        def certificate():
            S = state(W, HW)
            pen = penalty.value(W)
            f = smooth.value_of(S)
            F = f + pen
            return F, _gap_of(smooth, penalty, S, W, pen, f) / max(abs(F), 1e-300), \
                smooth.grad_of(S)

        def rows_to_visit(G):
            if ratios is None:
                return np.flatnonzero(movable)
            # ``not <= 1``: a nan ratio (a zero weight) keeps the row
            return np.flatnonzero(movable & (np.any(W != 0.0, axis=1) | ~(ratios(G) <= 1.0)))

        if exact:
            row_min = MeanRegL1Rows(Dg, quads[0].lam, penalty.lam)

            def step(i):
                w = W[i]
                return row_min(i, HW[i] - B[i] - Dg[i] * w, np.sign(w))
        else:
            def step(i):
                g = HW[i] - B[i]
                for h in quads:
                    g = g + h.grad(W[i][None, :])[0]
                return penalty.prox((W[i] - g / Lrow[i])[None, :], Lrow[i])[0]

        F, cert, G = certificate()
        hist = [float(F)]
        report_progress(0, float(F), cert * abs(F))
        K = self.anderson
        past = [(W.copy(), HW.copy())] if K else []
        sweep = 0
        while cert > self.tol and sweep < self.max_sweeps:
            sweep += 1
            for i in rows_to_visit(G):
                new = step(i)
                delta = new - W[i]
                if np.any(delta):
                    HW += np.multiply(Hcols[i], delta, out=buf)
                    W[i] = new
            if K:
                past.append((W.copy(), HW.copy()))
                if len(past) == K + 1:
                    ext = _anderson(past)
                    past = [past[-1]]
                    if ext is not None and objective(*ext) < objective(W, HW):
                        W[...], HW[...] = ext
                        past = [(W.copy(), HW.copy())]
            F, cert, G = certificate()
            hist.append(float(F))
            report_progress(sweep, float(F), cert * abs(F))
        return Result(W, hist, sweep, float(cert), "gap", bool(cert <= self.tol))


class LBFGS:
    """L-BFGS on J + g with a differentiable penalty g (module docstring).

    Parameters (the solver's options; the problem is given to :meth:`solve`):
    tol : the relative duality gap to reach
    max_iter : iteration cap (a fit that reaches it is not converged)
    check_every : the gap is computed every this many iterations (and at the start and the cap)
    memory : the curvature pairs L-BFGS keeps
    fallback : None, or a solver with the same ``solve`` (e.g. :class:`FISTA` with the same
        ``tol``) run from L-BFGS's point when its line search stops above ``tol`` (no
        decrease of F at machine precision: tolerances near the rounding of F), with the
        iterations left; its certificate is the result's
    """

    def __init__(self, tol: float = 1e-6, max_iter: int = 5000, check_every: int = 5,
                 memory: int = 10, fallback=None) -> None:
        if int(check_every) < 1 or int(memory) < 1:
            raise ValueError(f"LBFGS: check_every and memory must be >= 1, got "
                             f"{check_every!r}, {memory!r}")
        self.tol, self.max_iter = float(tol), int(max_iter)
        self.check_every, self.memory = int(check_every), int(memory)
        self.fallback = fallback

    def solve(self, smooth, penalty, W0: np.ndarray) -> Result:
        """Minimise J + g from ``W0`` (a warm start: any point of shape (d, T)).

        Parameters
        ----------
        smooth : a datafit of ``datafits.py`` (or ``SmoothSum``): the smooth term J
        penalty : a penalty with ``value`` and ``grad`` (or ``value_and_grad``) and a finite
            ``conjugate`` (the duality gap)
        W0 : array of shape (d, T)

        Returns
        -------
        Result : the minimiser, F after every iteration, iterations, certificate, converged
        """
        if not hasattr(penalty, "conjugate") or not (hasattr(penalty, "grad")
                                                     or hasattr(penalty, "value_and_grad")):
            raise ValueError(f"LBFGS: {type(penalty).__name__} needs a gradient and a "
                             "conjugate")
        value_and_grad = getattr(penalty, "value_and_grad",
                                 lambda W: (penalty.value(W), penalty.grad(W)))
        shape = np.shape(W0)
        last: dict = {}

        def fun(x):
            W = x.reshape(shape)
            S = smooth.forward(W)
            f, G = smooth.value_of(S), smooth.grad_of(S)
            pen, Gp = value_and_grad(W)
            last.update(x=x, S=S, f=f, G=G, pen=pen)
            return f + pen, (G + Gp).ravel()

        cert: dict = {"gap": np.inf, "bound": None, "x": None}
        hist: list = []

        def check(x):
            if last.get("x") is not x:             # the solver checks its last evaluation
                fun(x)
            W, S, f, G, pen = (x.reshape(shape), last["S"], last["f"], last["G"],
                               last["pen"])
            F = f + pen
            gap = smooth.gap(S, W, pen + penalty.conjugate(-G), 1.0, G, f)
            cert.update(gap=gap / max(abs(F), 1e-300), bound=gap, x=x)
            if not hist:                            # the start
                hist.append(float(F))
                report_progress(0, float(F), gap)
            return cert["gap"] <= self.tol

        def progress(it, F):
            hist.append(float(F))
            report_progress(it, float(F), cert["bound"])

        x, _, it, _, _ = lbfgs(fun, np.array(W0, dtype=np.float64).ravel(), self.max_iter,
                               check=check, check_every=self.check_every,
                               memory=self.memory, progress=progress)
        if cert["x"] is not x:
            check(x)
        left = self.max_iter - it
        if cert["gap"] > self.tol and left > 0 and self.fallback is not None:
            fb = copy.copy(self.fallback)
            fb.max_iter = left
            res = fb.solve(smooth, penalty, x.reshape(shape))
            return Result(res.W, hist + res.history[1:], it + res.n_iter, res.certificate,
                          res.certificate_kind, res.converged)
        return Result(x.reshape(shape), hist, it, float(cert["gap"]), "gap",
                      bool(cert["gap"] <= self.tol))


def _anderson(past: list[tuple[np.ndarray, np.ndarray]]):
    """Anderson extrapolation of the last K + 1 sweeps' (W, HW) (Bertrand & Massias 2021,
    "Anderson acceleration of coordinate descent", AISTATS): the affine combination
    sum_k c_k W_k (sum_k c_k = 1) whose differences U = [W_{k+1} - W_k] have the smallest
    ||U c||, c = z / sum z with (U^T U) z = 1; HW combined alike (linear in W).  None when
    the system is singular."""
    Ws = np.stack([w for w, _ in past])
    U = (Ws[1:] - Ws[:-1]).reshape(len(past) - 1, -1)
    M = U @ U.T
    scale = float(np.trace(M))
    if not scale > 0:
        return None
    try:
        z = np.linalg.solve(M / scale + 1e-10 * np.eye(M.shape[0]), np.ones(M.shape[0]))
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(z)) or abs(z.sum()) < 1e-300:
        return None
    c = z / z.sum()
    We = np.tensordot(c, Ws[1:], axes=1)
    HWe = np.tensordot(c, np.stack([h for _, h in past[1:]]), axes=1)
    return We, HWe


# ---------------------------------------------------------------------------------- L-BFGS
ARMIJO = 1e-4


def lbfgs(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, max_iter: int,
          check: Callable[[np.ndarray], bool] | None = None, check_every: int = 25,
          precondition: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
          memory: int = 12, progress: Callable[[int, float], None] | None = None):
    """Minimise f (``fun(x) -> (f, grad)``, x a flat float64 vector) from ``x0`` (module
    docstring).  Returns (x, f, iterations, evaluations, stopped): ``stopped`` is True iff
    ``check`` returned True at the returned x (False when stopped by the cap or the line
    search).  ``progress(iteration, f)`` is called after every iteration."""
    x = np.array(x0, dtype=np.float64)
    f, g = fun(x)
    n_eval = 1
    if check is not None and check(x):
        return x, f, 0, n_eval, True
    S: list[np.ndarray] = []
    Y: list[np.ndarray] = []
    rho: list[float] = []
    it = 0
    for it in range(1, max_iter + 1):
        p = -_two_loop(g, x, S, Y, rho, precondition)
        slope = float(g @ p)
        if not slope < 0:                 # rounding broke descent: restart from steepest descent
            S, Y, rho = [], [], []
            p = -g / max(float(np.linalg.norm(g)), 1e-300)
            slope = float(g @ p)
        step = 1.0
        while True:
            x_new = x + step * p
            f_new, g_new = fun(x_new)
            n_eval += 1
            # (a strict decrease too: when ARMIJO * step * slope is below the rounding of f,
            # the Armijo test alone would accept a step that does not decrease f)
            if f_new <= f + ARMIJO * step * slope and f_new < f:
                break
            curv = 2.0 * (f_new - f - step * slope)      # quadratic model through f, f', f(step)
            trial = -slope * step * step / curv if curv > 0 else 0.5 * step
            step = min(max(trial, 0.1 * step), 0.5 * step)
            if step < 1e-20:            # no decrease at machine precision: the last check
                return x, f, it - 1, n_eval, check is not None and check(x)
        s, y = x_new - x, g_new - g
        sy = float(s @ y)
        if sy > 1e-12 * float(np.linalg.norm(s)) * float(np.linalg.norm(y)):
            S.append(s)
            Y.append(y)
            rho.append(1.0 / sy)
            if len(S) > memory:
                S.pop(0), Y.pop(0), rho.pop(0)
        x, f, g = x_new, f_new, g_new
        if progress is not None:
            progress(it, f)
        if check is not None and (it % check_every == 0 or it == max_iter) and check(x):
            return x, f, it, n_eval, True
    return x, f, it, n_eval, False


def _two_loop(g, x, S, Y, rho, precondition) -> np.ndarray:
    """The two-loop recursion: the inverse-Hessian approximation applied to g."""
    q = g.copy()
    alphas = []
    for s, y, r in zip(reversed(S), reversed(Y), reversed(rho)):
        a = r * float(s @ q)
        alphas.append(a)
        q -= a * y
    if precondition is not None:
        z = precondition(x, q)
        if S:
            z *= float(S[-1] @ Y[-1]) / float(Y[-1] @ precondition(x, Y[-1]))
    elif S:
        z = q * (float(S[-1] @ Y[-1]) / float(Y[-1] @ Y[-1]))
    else:
        z = q / max(float(np.linalg.norm(g)), 1e-300)
    for (s, y, r), a in zip(zip(S, Y, rho), reversed(alphas)):
        z += (a - r * float(y @ z)) * s
    return z
