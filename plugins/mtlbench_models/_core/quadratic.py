"""Conjugate gradients for a quadratic datafit plus a quadratic penalty (a ridge).

    min_W  q(W) = J(W) + g(W),  J least squares (``datafits.LeastSquares``, or a ``Factored``
                                one), g smooth and quadratic (``penalties.SquaredFrobenius``)

:class:`ConjugateGradient` runs CG (Hestenes & Stiefel 1952) on the normal equations
grad q(W) = 0 from ``W0``, with the Hessian applied as H P = grad J(P) - grad J(0) + grad g(P)
(grad J is affine in W): one pass over the data per iteration and no matrix of the size of
the system (for J(X B) of a d x k factor X: never the dk x dk matrix).  Each CG iterate
minimises q over the Krylov space it spans, so q never increases along the iterations.
Certificate: the relative duality gap (``solvers.duality_gap``: g has a finite conjugate) at
the current iterate, from the recurred residual; when it holds, the gap is recomputed from a
fresh evaluation of grad J and the recursion restarted from it if that one does not hold
(rounding drift of the recurrence).  Converged iff the gap is <= ``tol`` within ``max_iter``.
With ``precondition`` (a symmetric positive definite M^{-1} applied to a residual) the
iteration is preconditioned CG (the same certificate; q still decreases monotonically).

:class:`KroneckerPreconditioner` is such an M^{-1} for the factored ridge in L (d x k)
min_L J(L S) + lam ||L||_F^2 whose Hessian is P -> sum_t H_t P s_t s_t^T + 2 lam P: it
replaces every H_t by a common A (e.g. the mean Gram matrix) and applies the inverse of
P -> A P B + shift P, B = S S^T, in the eigenbases of A and B (exact when the H_t are equal).
"""
from __future__ import annotations

import numpy as np

from mtlbench import report_progress

from .newton import _silent
from .solvers import Result

__all__ = ["ConjugateGradient", "KroneckerPreconditioner"]


class ConjugateGradient:
    """CG on a least-squares datafit plus a quadratic penalty with a conjugate (module
    docstring).  Options: ``tol`` (relative duality gap), ``max_iter`` (default: the number
    of unknowns, plus restarts), ``report`` (False: no ``report_progress`` calls, for a solver
    run inside another model's iterations)."""

    def __init__(self, tol: float = 1e-8, max_iter: int | None = None,
                 report: bool = True) -> None:
        self.tol = float(tol)
        self.max_iter = None if max_iter is None else int(max_iter)
        self.report = bool(report)

    def solve(self, datafit, penalty, W0: np.ndarray, precondition=None) -> Result:
        """Minimise J + g from ``W0`` (array of the variable's shape); ``precondition``: an
        optional callable R -> M^{-1} R (symmetric positive definite).  Returns a ``Result``."""
        M = (lambda R: R.copy()) if precondition is None else precondition
        from .datafits import LeastSquares
        if not (isinstance(datafit, LeastSquares) or getattr(datafit, "quadratic", False)):
            raise ValueError(f"ConjugateGradient: {type(datafit).__name__} is not a "
                             "least-squares datafit")
        if not (hasattr(penalty, "grad") and hasattr(penalty, "conjugate")):
            raise ValueError(f"ConjugateGradient: {type(penalty).__name__} is not a smooth "
                             "quadratic penalty with a conjugate")
        X = np.array(W0, dtype=np.float64)
        max_iter = self.max_iter if self.max_iter is not None else 2 * X.size + 10
        at_zero = getattr(datafit, "grad_at_zero", None)           # grad J(0) = -b
        G0 = at_zero() if at_zero is not None else datafit.grad(np.zeros_like(X))
        hess = lambda P: datafit.grad(P) - G0 + penalty.grad(P)

        def fresh(X):
            f, G = datafit.value_and_grad(X)
            return f, G, -(G + penalty.grad(X))

        def cert_of(X, f, G):
            pen = penalty.value(X)
            F = f + pen
            gap = datafit.gap(None, X, pen + penalty.conjugate(-G), 1.0, G, f)
            return F, gap / max(abs(F), 1e-300)

        f, G, R = fresh(X)
        F, cert = cert_of(X, f, G)
        hist = [float(F)]
        progress = report_progress if self.report else _silent
        progress(0, float(F), cert * abs(F))
        it = 0
        P = M(R)
        rr = float(np.sum(R * P))
        fresh_at_x = True                          # f, G, R, cert from a fresh evaluation
        while cert > self.tol and it < max_iter and rr > 0:
            it += 1
            AP = hess(P)
            pAp = float(np.sum(P * AP))
            if not pAp > 0:
                break
            alpha = rr / pAp
            X = X + alpha * P
            F = F - alpha * float(np.sum(R * P)) + 0.5 * alpha * alpha * pAp
            R = R - alpha * AP
            G = -R - penalty.grad(X)
            pen = penalty.value(X)
            f = F - pen
            gap = datafit.gap(None, X, pen + penalty.conjugate(-G), 1.0, G, f)
            cert = gap / max(abs(F), 1e-300)
            fresh_at_x = cert <= self.tol
            if fresh_at_x:                         # confirm with a fresh gradient
                f, G, R = fresh(X)
                F, cert = cert_of(X, f, G)
                P = M(R)
                rr_new = float(np.sum(R * P))
            else:
                Zr = M(R)
                rr_new = float(np.sum(R * Zr))
                P = Zr + (rr_new / rr) * P
            rr = rr_new
            hist.append(float(F))
            progress(it, float(F), cert * abs(F))
        if it and not fresh_at_x:
            f, G, _ = fresh(X)
            F, cert = cert_of(X, f, G)
            hist[-1] = float(F)
        return Result(X, hist, it, float(cert), "gap", bool(cert <= self.tol))


class KroneckerPreconditioner:
    """M^{-1} for M(P) = A P B + shift P, A (d x d) and B (k x k) symmetric positive
    semi-definite, shift > 0: with A = U diag(a) U^T and B = V diag(b) V^T,
    M^{-1}(R) = U [(U^T R V) / (a b^T + shift)] V^T (module docstring).  ``A_eig``: the pair
    (a, U) of A, computed once by the caller (e.g. cached per data set)."""

    def __init__(self, A_eig: tuple[np.ndarray, np.ndarray], B: np.ndarray,
                 shift: float) -> None:
        a, self.U = A_eig
        b, self.V = np.linalg.eigh(np.asarray(B, dtype=np.float64))
        if not shift > 0:
            raise ValueError(f"KroneckerPreconditioner: shift must be > 0, got {shift}")
        self.denom = np.outer(np.maximum(a, 0.0), np.maximum(b, 0.0)) + float(shift)

    def __call__(self, R: np.ndarray) -> np.ndarray:
        return self.U @ ((self.U.T @ R @ self.V) / self.denom) @ self.V.T
