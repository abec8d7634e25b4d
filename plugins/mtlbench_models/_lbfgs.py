"""Limited-memory BFGS with a (variable) preconditioner, shared by the factored solvers of CoCMTL
and RAMUSA.  Private to the built-in plugins.

:func:`lbfgs` minimises a smooth (or piecewise smooth) function f(x), x a flat float64 vector,
given ``fun(x) -> (f, grad)``:

* direction: the two-loop recursion (Nocedal & Wright, "Numerical Optimization", 2nd ed.,
  Alg. 7.4) over the last ``memory`` pairs (s, y) with s^T y > 0 (other pairs are skipped, so
  the implicit inverse-Hessian approximation stays positive definite and the direction is a
  descent direction), started from ``precondition(x, v)`` -- an approximation of the inverse
  Hessian applied to v, positive definite -- scaled by s^T y / y^T H0 y (Alg. 7.5's scaling in
  the preconditioned metric; without a preconditioner, H0 = the usual s^T y / y^T y);
* step: the unit step first, then backtracking by safeguarded quadratic interpolation until
  Armijo's sufficient decrease f(x + a p) <= f(x) + 1e-4 a g^T p holds; so f is strictly
  decreasing along the iterates;
* stop: ``check(x)`` (the caller's own test, typically an optimality certificate; called at
  the start, every ``check_every`` iterations and at the cap) returns True; or ``max_iter``
  iterations; or the line search cannot decrease f any more at machine precision (the step
  shrinks below 1e-20; ``check`` is then called at the returned x once more).

No convergence rate is claimed for non-convex f: callers certify the result with ``check``
and fall back to a method with guarantees when it fails.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

ARMIJO = 1e-4


def lbfgs(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x0: np.ndarray, max_iter: int,
          check: Callable[[np.ndarray], bool] | None = None, check_every: int = 25,
          precondition: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
          memory: int = 12, progress: Callable[[int, float], None] | None = None):
    """Returns (x, f, iterations, evaluations, stopped): ``stopped`` is True iff ``check``
    returned True at the returned x (False when stopped by the cap or the line search)."""
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
        p = -z
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
