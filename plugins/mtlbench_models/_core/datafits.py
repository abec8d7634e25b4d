"""Multi-task datafits: J(W) = sum_t l_t(w_t), W of shape (d, T), column t = task t.

* :class:`SquaredLoss`: l_t(w) = 1/2 ||y_t - X_t w||^2 (the instance-wise squared loss of every
  competitor in the TFCL paper's Experimental Settings);
* :class:`SquaredAUCLoss`: l_t(w) = 1/(2 n+ n-) sum_{p in S+, q in S-} (1 - (x_p - x_q)^T w)^2,
  the TFCL paper's squared pairwise AUC surrogate (eqs. loss_eve / grad_eve), written as the
  least-squares function 1/2 ||Z_t w - e||^2 of (n_t + 1) rows (class docstring);
* :class:`LogisticLoss`: l_t(w) = sum_i log(1 + exp(-y_ti x_ti^T w)), labels in {-1, +1};
* :class:`InterceptLogisticLoss`: MALSAR's l_t(w) = min_c (1/n_t) sum_i log(1 + exp(-y_ti
  (x_ti^T w + c))), the unpenalised intercept minimised out (the average optional).

The two squared losses are one least-squares implementation (:class:`LeastSquares`,
J(W) = sum_t 1/2 ||Z_t w_t - c_t||^2) on different rows.  Its value and gradient are evaluated
through one of several exact representations (``representations.py``), chosen by the
constructor argument ``representation`` (each a float64 evaluation of the same function; they
differ in cost and in the order of the floating-point sums):

==========  ==================================================================================
``gram``    H_t = Z_t^T Z_t (T x d x d, cached per TaskSet), b_t = Z_t^T c_t: one batched
            matrix-vector product per evaluation; pays when d < 2 n_t.
``rows``    passes over each task's rows (predictions and back-projections in one sweep).
``padded``  every task's rows zero-padded into one (T, n_max, d) stack: one batched product
            per pass, no Python loop over tasks (padding rows add exact zeros).
``buckets`` tasks sorted by size and cut into zero-padded buckets whose padded size exceeds
            their real rows by at most ``pad_ratio``; residual states (``shift``).
``svd``     the thin SVD of each task, X_t = P_t diag(s_t) Q_t^T (or the Gram matrices when
            every n_t >= d): the loss as 1/2 ||s_t * (Q_t^T w) - P_t^T y_t||^2 + const and ridge
            solves for any weight (``representations.SVDForm``).
==========  ==================================================================================

``auto`` takes ``gram`` when d < 2 mean_t n_t and T d^2 <= 5e7, else ``wide`` (default
``rows``).  Two more exact forms of the squared loss serve solvers that work in eigenbases
(``representations.task_eigenrows``, ``representations.TaskSpectra``).  Data-only pieces are
computed once per TaskSet object (``TaskSet.memo``) and shared by every fit of a search.

The interface every datafit offers (what the solvers of ``solvers.py`` use):

* ``d``, ``T``; ``task_lipschitz`` (T,): the Lipschitz constant of grad l_t; ``lipschitz``: of
  grad J (their maximum, the tasks being separate);
* ``value(W)``, ``grad(W)`` (d x T), ``value_and_grad(W)``;
* a state interface for iterative solvers: ``forward(W)`` returns a state from which
  ``value_of(S)`` and ``grad_of(S)`` read J and grad J without another pass over the data;
  for the least-squares datafits states are linear in W, so ``combine(S1, S0, beta)`` is the
  state of W1 + beta (W1 - W0) (an extrapolated point at no cost);
* duality: ``gap(S, W, pen, s)`` = P(W) - D(s Theta) for a penalty of value ``pen`` whose
  conjugate is zero at the scaled dual point, Theta_t = grad F_t(X_t w_t) the gradient of the
  datafit in the scores (the residuals for the squared loss); ``s`` in [0, 1] scales Theta
  into the penalty's dual ball (``solvers.duality_gap``).  For the squared loss,
  gap = pen + s <W, grad J(W)> + (1 - s)^2/2 ||r||^2 (no cancellation of primal minus dual);
  for the logistic loss, gap = pen + J(W) + sum a log a + (1 - a) log(1 - a), a = s sigma(-y z).
"""
from __future__ import annotations

import copy
import functools

import numpy as np
from scipy.special import expit, xlogy

from mtlbench import TaskSet

from .representations import (PAD_RATIO, SVDForm, _BucketForm, _FORMS, _instance_rows,
                              _lipschitz, _Rows, _xty, padded_task_rows, padded_task_rows_t,
                              ridge_solve, task_lipschitz)

__all__ = ["LeastSquares", "SquaredLoss", "SquaredAUCLoss", "LogisticLoss",
           "InterceptLogisticLoss", "squared_auc_bruteforce", "squared_gap", "REPRESENTATIONS"]

#: the representations of :class:`LeastSquares` (module docstring; ``representations.py``)
REPRESENTATIONS = ("auto", "gram", "rows", "padded", "buckets", "svd")


# ------------------------------------------------------------------------- least squares
class LeastSquares:
    """J(W) = sum_t 1/2 ||Z_t w_t - c_t||^2 on per-task rows Z_t (m_t x d), c_t (m_t).

    Use :class:`SquaredLoss` (Z_t = X_t, c_t = y_t) or :class:`SquaredAUCLoss` (the AUC rows);
    :meth:`from_arrays` builds one from given rows.  ``representation`` selects how J and
    grad J are evaluated (module docstring); ``wide`` is what ``auto`` takes when the Gram
    matrices would cost more than the rows; ``pad_ratio`` bounds the padding of ``buckets``.

    Attributes: ``d``, ``T``, ``representation``, ``task_lipschitz`` (||Z_t||_2^2, the largest
    eigenvalue of task t's Hessian Z_t^T Z_t), ``lipschitz`` (their maximum: the Lipschitz
    constant of grad J), ``xty`` (Z_t^T c_t as columns, d x T: -grad J(0)), ``free_columns``
    (features i with Z_t[:, i] = 0 for every task: J does not depend on row i of W),
    ``curvature`` (mean_t tr(Z_t^T Z_t) / d_used, d_used the features J depends on), and for
    the ``buckets`` representation ``buckets`` and ``shift(R, v)`` (residuals at W + v 1^T)."""

    def __init__(self, rows: _Rows, representation: str = "auto", wide: str = "rows",
                 pad_ratio: float = PAD_RATIO) -> None:
        if representation not in REPRESENTATIONS:
            raise ValueError(f"datafit: representation must be one of "
                             f"{', '.join(REPRESENTATIONS)}, got {representation!r}")
        if representation == "svd" and rows.kind != "sq":
            raise ValueError("datafit: the 'svd' representation is the squared loss's "
                             "(SquaredLoss) only")
        self._rows = rows
        self.d, self.T = rows.d, rows.T
        if representation == "auto":
            n = rows.sizes()
            cheap = self.d < 2 * n.mean() and self.T * self.d ** 2 <= 5e7
            representation = "gram" if cheap else wide
        self.representation = representation
        if representation == "buckets":
            form = _BucketForm(rows, pad_ratio)
            self.buckets, self.shift = form.buckets, form.shift
        elif representation == "svd":
            form = SVDForm(self._tasks)
        else:
            form = _FORMS[representation](rows)
        self.form = form
        self.forward, self.value_of, self.grad_of = form.forward, form.value_of, form.grad_of
        self.combine = getattr(form, "combine", _combine)

    @classmethod
    def from_arrays(cls, Zs: list[np.ndarray], cs: list[np.ndarray], d: int,
                    representation: str = "buckets", pad_ratio: float = PAD_RATIO,
                    wide: str = "rows") -> "LeastSquares":
        """sum_t 1/2 ||Z_t w_t - c_t||^2 on the given rows (cached on the object itself)."""
        rows = _Rows(d, len(Zs), "arrays", Zs.__getitem__, cs.__getitem__)
        return cls(rows, representation=representation, wide=wide, pad_ratio=pad_ratio)

    # -- value and gradient at W
    def value(self, W: np.ndarray) -> float:
        """J(W) for W of shape (d, T) (from the representation's predictions alone where it
        offers that, e.g. ``padded``)."""
        value = getattr(self.form, "value", None)
        return value(W) if value is not None else self.value_of(self.forward(W))

    def grad_at_zero(self) -> np.ndarray:
        """grad J(0) = -(Z_t^T c_t)_t, shape (d, T), without a pass over the data."""
        return 0.0 - self.xty

    def grad(self, W: np.ndarray) -> np.ndarray:
        """grad J(W), shape (d, T): column t is Z_t^T (Z_t w_t - c_t)."""
        return self.grad_of(self.forward(W))

    def value_and_grad(self, W: np.ndarray) -> tuple[float, np.ndarray]:
        """(J(W), grad J(W)) from one state."""
        S = self.forward(W)
        return self.value_of(S), self.grad_of(S)

    # -- data-derived constants (computed when first read: a closed-form fit certified at
    # its start reads no step constant)
    @functools.cached_property
    def task_lipschitz(self) -> np.ndarray:
        return _lipschitz(self._rows)

    @functools.cached_property
    def lipschitz(self) -> float:
        return float(self.task_lipschitz.max()) if self.T else 0.0

    @property
    def xty(self) -> np.ndarray:
        return _xty(self._rows)

    @functools.cached_property
    def free_columns(self) -> np.ndarray:
        return self._column_stats()[0]

    @functools.cached_property
    def curvature(self) -> float:
        return self._column_stats()[1]

    def _column_stats(self) -> tuple[np.ndarray, float]:
        def compute():
            rows = self._rows
            used = np.zeros(rows.d, dtype=bool)
            for t in range(rows.T):
                used |= np.any(rows.Z(t) != 0.0, axis=0)
            n_used = int(used.sum())
            curv = (float(np.mean([np.sum(rows.Z(t) * rows.Z(t)) for t in range(rows.T)]))
                    / n_used) if n_used else 0.0
            return np.flatnonzero(~used), curv
        return self._rows.memo("columns", compute)

    def residual_norms_sq(self, S) -> np.ndarray:
        """||Z_t w_t - c_t||^2 per task from a state (T,)."""
        return self.form.residual_norms_sq(S)

    # -- duality
    def gap(self, S, W: np.ndarray, pen: float, s: float, G: np.ndarray | None = None,
            f: float | None = None) -> float:
        """Duality gap at the dual point s r (r the residuals; module docstring), from the
        state S of W: :func:`squared_gap` with <W, grad J(W)> and ||r||^2 = 2 J(W) (``G``,
        ``f``: grad J(W) and J(W) if known); ``s`` a scalar or one scale per task, shape
        (T, 1) (the tasks' terms summed, ||r_t||^2 from ``residual_norms_sq``)."""
        G = self.grad_of(S) if G is None else G
        if np.ndim(s):                   # one scale per task: s of shape (T, 1)
            s = np.ravel(s)
            return float(pen + np.sum(squared_gap(0.0, s, np.einsum("it,it->t", W, G),
                                                  self.residual_norms_sq(S))))
        rr = 2.0 * (self.value_of(S) if f is None else f)
        return float(squared_gap(pen, s, np.sum(W * G), rr))


def squared_gap(pen, s, wg, rr):
    """The duality gap of a squared loss plus a penalty of value ``pen`` at the dual point
    s r: pen + s <W, grad J(W)> + (1 - s)^2/2 ||r||^2 (``wg`` = <W, grad J(W)>, ``rr`` =
    ||r||^2; scalars, or arrays for one gap per task of a separable problem).  It equals
    P(W) - D(s r) with D(theta) = -<theta, c> - 1/2 ||theta||^2 (the conjugate of the loss in
    the scores), without the cancellation of primal minus dual."""
    return pen + s * wg + 0.5 * (1.0 - s) ** 2 * rr


def _combine(A1, A0, beta: float):
    """State of W1 + beta (W1 - W0) (states are linear in W)."""
    return A1 + beta * (A1 - A0)


class SquaredLoss(LeastSquares):
    """The instance-wise squared loss J(W) = sum_t 1/2 ||y_t - X_t w_t||^2 over ``tasks``.

    Parameters
    ----------
    tasks : TaskSet
        T tasks over d features, X_t of shape (n_t, d), y_t of shape (n_t,).
    representation : {"auto", "gram", "rows", "padded", "buckets", "svd"}
        How J and grad J are evaluated (module docstring); the data-only pieces are cached
        on ``tasks``.
    wide : str
        What ``auto`` takes when the Gram matrices would cost more than the rows.
    pad_ratio : float
        The padding bound of ``buckets``.

    Also ``ridge(lam)``: the per-task ridge solutions (d x T)."""

    def __init__(self, tasks: TaskSet, representation: str = "auto", wide: str = "rows",
                 pad_ratio: float = PAD_RATIO) -> None:
        self._tasks = tasks
        super().__init__(_instance_rows(tasks), representation, wide, pad_ratio)

    def ridge(self, lam: float) -> np.ndarray:
        """Column t of the (d, T) result: argmin_w 1/2 ||y_t - X_t w||^2 + lam/2 ||w||^2
        (``representations.ridge_solve``)."""
        tasks = self._tasks
        return np.column_stack([ridge_solve(tasks.X(t), tasks.y(t), lam) for t in range(tasks.T)])


class SquaredAUCLoss(LeastSquares):
    """The TFCL paper's squared pairwise AUC surrogate (Sec. "Personalized Attribute
    Prediction", eqs. loss_eve / grad_eve), summed over tasks:

        J(W) = sum_t l_t(w_t),  l_t(w) = 1/2 r^T L_AUC r,  r = X_t w - ytil,  ytil = (1 + y)/2,
             = 1/(2 n+ n-) sum_{p in S+, q in S-} (1 - (x_p^T w - x_q^T w))^2,

    with L_AUC the Laplacian of the complete bipartite (positive x negative) graph with edge
    weights 1/(n+ n-).  The factor 1/2 follows eq. loss_eve and makes grad_eve
    (X^T L_AUC r) the exact gradient; the paper's defining double sum omits it (a constant
    rescaling of the alphas).

    Evaluated in O(n_t d) per task without pairs or d x d matrices through the identity
    (eq. loss_eve) r^T L_AUC r = var_+(r) + var_-(r) + (R+ - R-)^2 (R+- = class means of r),
    i.e. l_t(w) = 1/2 ||Z_t w - e||^2 exactly, with the (n_t + 1) x d matrix

        Z_t = [(X+ - 1 mu+^T)/sqrt(n+); (X- - 1 mu-^T)/sqrt(n-); (mu+ - mu-)^T],
        e = (0, ..., 0, 1)  (mu+- = class means of X_t; X^T L_AUC X = Z^T Z),

    a :class:`LeastSquares` on those rows (default representation ``buckets``); the gradient
    Z^T (Z w - e) is grad_eve.  A feature constant within a task gives an exactly zero
    column of Z_t (the class means of a constant column are set to the constant itself, not
    to a rounded average), so a column constant within every task is in ``free_columns``.
    The rows are cached on ``tasks``."""

    def __init__(self, tasks: TaskSet, representation: str = "buckets",
                 pad_ratio: float = PAD_RATIO) -> None:
        Zs, cs = tasks.memo(("auc", "rows"), lambda: _auc_rows(tasks))
        rows = _Rows(tasks.d, tasks.T, "auc", Zs.__getitem__, cs.__getitem__, tasks.memo)
        super().__init__(rows, representation, "rows", pad_ratio)


def _auc_rows(tasks: TaskSet) -> tuple[list[np.ndarray], list[np.ndarray]]:
    Zs, cs = [], []
    for t in range(tasks.T):
        X, y = tasks.X(t), tasks.y(t)
        pos = y > 0
        npos, nneg = int(pos.sum()), int((~pos).sum())
        if npos == 0 or nneg == 0:
            raise ValueError(f"SquaredAUCLoss: task {tasks.task_names[t]!r} needs both classes")
        blocks = []
        mus = []
        for rows, n in ((X[pos], npos), (X[~pos], nneg)):
            mu = rows.mean(0)
            const = np.all(rows == rows[:1], axis=0)
            mu[const] = rows[0, const]
            blocks.append((rows - mu) / np.sqrt(n))
            mus.append(mu)
        Z = np.vstack(blocks + [(mus[0] - mus[1])[None, :]])
        c = np.zeros(Z.shape[0])
        c[-1] = 1.0
        Zs.append(Z)
        cs.append(c)
    return Zs, cs


def squared_auc_bruteforce(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
    """Reference: 1/(2 n+ n-) sum over all (positive, negative) pairs of (1 - (s_p - s_q))^2 and
    its gradient, O(n+ n- d).  For tests and benchmarks only."""
    s = X @ w
    pos = y > 0
    P, Q = np.flatnonzero(pos), np.flatnonzero(~pos)
    m = 1.0 - (s[P][:, None] - s[Q][None, :])          # (n+, n-)
    scale = 1.0 / (len(P) * len(Q))
    val = 0.5 * scale * float(np.sum(m * m))
    Dx = X[P][:, None, :] - X[Q][None, :, :]            # (n+, n-, d)
    g = -scale * np.einsum("pq,pqd->d", m, Dx)
    return val, g


# ------------------------------------------------------------------------- logistic loss
class LogisticLoss:
    """J(W) = sum_t sum_i log(1 + exp(-y_ti x_ti^T w_t)), labels y in {-1, +1}.

    Evaluated on the zero-padded task stack (:func:`padded_task_rows`; padding rows are masked
    out of the value and contribute exact zeros to the gradient), log(1 + exp(-z)) as
    max(-z, 0) + log1p(exp(-|z|)) (:func:`_log1p_exp`, as the intercept loss: ``logaddexp``'s
    value to rounding, in fewer passes) and the weights sigma(-z) by ``expit``: finite for
    every margin.
    State: the margins z = y * (X_t w_t) (T x n_max).  grad J[:, t] = -X_t^T (y_t sigma(-z_t));
    task_lipschitz[t] = ||X_t||_2^2 / 4 (sigma' <= 1/4).  Duality: the conjugate of
    l(z) = log(1 + exp(-y z)) at -y a is a log a + (1 - a) log(1 - a) for a in [0, 1], so the
    dual point s sigma(-z) stays feasible for s in [0, 1] (``gap``)."""

    def __init__(self, tasks: TaskSet) -> None:
        """``tasks``: T tasks, X_t of shape (n_t, d), labels y_t in {-1, +1} of shape (n_t,)."""
        self.d, self.T = tasks.d, tasks.T
        _, self.y3, self.n = padded_task_rows(tasks)
        self.X3t = padded_task_rows_t(tasks)
        self.mask = np.arange(self.y3.shape[1])[None, :] < self.n[:, None]
        self.task_lipschitz = 0.25 * task_lipschitz(tasks)
        self.lipschitz = float(self.task_lipschitz.max()) if self.T else 0.0

    @classmethod
    def from_padded(cls, X3t: np.ndarray, y3: np.ndarray, n: np.ndarray) -> "LogisticLoss":
        """The loss on given zero-padded designs ``X3t`` (T, d, n_max), labels ``y3`` (T, n_max)
        (zero at the padding) and task sizes ``n`` (T,), without a TaskSet (e.g. the reduced
        designs L^T X_t^T of a factored model)."""
        self = cls.__new__(cls)
        self.T, self.d = X3t.shape[0], X3t.shape[1]
        self.X3t, self.y3, self.n = X3t, y3, n
        self.mask = np.arange(y3.shape[1])[None, :] < n[:, None]
        return self                     # task_lipschitz, lipschitz: computed when first read

    @functools.cached_property
    def task_lipschitz(self) -> np.ndarray:
        """||X_t||_2^2 / 4 per task (set by the constructor; for :meth:`from_padded`, computed
        on first use: from the (d, d) Gram matrices when d < n_max, the reduced designs)."""
        X3t = self.X3t
        if not X3t.size:
            return np.zeros(self.T)
        if X3t.shape[1] < X3t.shape[2]:
            return 0.25 * np.linalg.eigvalsh(np.matmul(X3t, X3t.transpose(0, 2, 1)))[:, -1]
        return 0.25 * np.linalg.norm(X3t, 2, axis=(1, 2)) ** 2

    @functools.cached_property
    def lipschitz(self) -> float:
        """The Lipschitz constant of grad J: max_t ``task_lipschitz``."""
        return float(self.task_lipschitz.max()) if self.T else 0.0

    def restrict_rows(self, rows: np.ndarray) -> "LogisticLoss":
        """The loss of W[rows] alone (the other rows of W zero): the designs' columns ``rows``
        (a copy), the same labels, weights and states (the margins of W with zeros off
        ``rows``); ``task_lipschitz`` and ``lipschitz`` are the full loss's (upper bounds)."""
        out = copy.copy(self)
        out.X3t = np.ascontiguousarray(self.X3t[:, rows, :])
        out.d = int(out.X3t.shape[1])
        out.task_lipschitz, out.lipschitz = self.task_lipschitz, self.lipschitz
        return out

    def left_factor(self, A: np.ndarray) -> "LogisticLoss":
        """The loss of s_t on the designs X_t A (A of shape (d, k)): J(A S) as a datafit of S."""
        return LogisticLoss.from_padded(np.matmul(A.T, self.X3t), self.y3, self.n)

    def forward(self, W: np.ndarray) -> np.ndarray:
        return self.y3 * np.matmul(W.T[:, None, :], self.X3t)[:, 0, :]

    def value_of(self, Z: np.ndarray) -> float:
        return float(np.sum(_log1p_exp(-Z), where=self.mask))

    def task_values_of(self, Z: np.ndarray) -> np.ndarray:
        """l_t(w_t) per task (T,) from the margins."""
        v = _log1p_exp(-Z)
        return v.sum(axis=1) if self.mask.all() else np.where(self.mask, v, 0.0).sum(axis=1)

    def task_hessians(self, Z: np.ndarray) -> np.ndarray:
        """The Hessians of l_t, X_t^T diag(sigma(z) sigma(-z)) X_t, shape (T, d, d)."""
        w = np.where(self.mask, expit(Z) * expit(-Z), 0.0)
        return np.matmul(self.X3t * w[:, None, :], self.X3t.transpose(0, 2, 1))

    def grad_of(self, Z: np.ndarray) -> np.ndarray:
        coef = -self.y3 * expit(-Z)                           # zero at the padding (y = 0)
        return np.matmul(self.X3t, coef[:, :, None])[:, :, 0].T

    def value(self, W: np.ndarray) -> float:
        return self.value_of(self.forward(W))

    def grad(self, W: np.ndarray) -> np.ndarray:
        return self.grad_of(self.forward(W))

    def value_and_grad(self, W: np.ndarray) -> tuple[float, np.ndarray]:
        Z = self.forward(W)
        return self.value_of(Z), self.grad_of(Z)

    @staticmethod
    def combine(Z1: np.ndarray, Z0: np.ndarray, beta: float) -> np.ndarray:
        """Margins of W1 + beta (W1 - W0) (linear in W)."""
        return Z1 + beta * (Z1 - Z0)

    def gap(self, Z: np.ndarray, W: np.ndarray, pen: float, s: float,
            G: np.ndarray | None = None, f: float | None = None) -> float:
        """pen + J(W) + sum_ti [a log a + (1 - a) log(1 - a)], a = s sigma(-z) (the datafit's
        conjugate at the dual point s Theta; module docstring)."""
        a = s * expit(-Z)
        ent = xlogy(a, a) + xlogy(1.0 - a, 1.0 - a)
        f = self.value_of(Z) if f is None else f
        return float(pen + f + np.sum(ent, where=self.mask))


# ------------------------------------------------- logistic loss with per-task intercepts
#: The intercepts' accuracy: the solve stops after a step whose error is certified to be at
#: most this times (1 + |c_t|)^2 for every task (below the rounding of c_t).
INTERCEPT_ERROR = 1e-16

#: The largest Newton step the final (Chebyshev) step is taken from: below it the error bound
#: |step|^3 of :meth:`InterceptLogisticLoss._solve` holds (with room for the exponentials).
CHEBYSHEV_RADIUS = 1e-3


def _sigmoid_neg(z: np.ndarray) -> np.ndarray:
    """sigma(-z) = 1 / (1 + exp(z)) elementwise (``scipy.special.expit``'s formula, in numpy's
    vectorised exp; an overflow of exp gives exactly 0)."""
    with np.errstate(over="ignore"):
        e = np.exp(z)
    e += 1.0
    return np.divide(1.0, e, out=e)


def _log1p_exp(u: np.ndarray) -> np.ndarray:
    """log(1 + exp(u)) elementwise, finite for every u: max(u, 0) + log1p(exp(-|u|)) (the same
    value as ``logaddexp(0, u)`` to rounding, in fewer passes)."""
    return np.log1p(np.exp(-np.abs(u))) + np.maximum(u, 0.0)


class InterceptLogisticLoss(LogisticLoss):
    """MALSAR's logistic datafit (``Logistic_L21``, ``Logistic_Trace``, ``Logistic_Dirty``, ...)
    with its unpenalised per-task intercepts c_t minimised out:

        J(W) = min_c sum_t omega_t sum_i log(1 + exp(-y_ti (x_ti^T w_t + c_t))),

    omega_t = 1 / n_t (``average=True``, MALSAR's per-task mean) or 1. Each task's c_t(W) is the
    unique root of the derivative in c_t (it exists: every task of a TaskSet has both classes,
    also after ``subset``), found by safeguarded Newton iterations vectorised over the tasks
    (the step clipped to 4 and kept inside the bracket of signs found so far), started from
    the tangent prediction off the last solved state and ended by one Chebyshev step whose
    error is certified to be at most ``INTERCEPT_ERROR`` (1 + |c_t|)^2 (:meth:`_solve`). By
    Danskin's theorem grad
    J(W) is the gradient of the loss at (W, c(W)); J is convex, and its Hessian is at most that
    of the loss in W for fixed c, so task_lipschitz[t] = omega_t ||X_t||_2^2 / 4. States are the
    margins without the intercepts, y * (X_t w_t), linear in W (``combine``); the intercepts,
    margins, sigma(-z) and the derivatives the next start reads of the last three states are
    kept. Duality: at c(W) the dual point
    Theta_t = omega_t (-y sigma(-z)) sums to zero over each task's rows (the intercept's
    optimality), which is the dual constraint of an unpenalised intercept, and s Theta keeps
    it; ``gap`` is the inherited one
    with the weights: pen + J(W) + sum_ti omega_t [a log a + (1 - a) log(1 - a)], a = s
    sigma(-z)."""

    def __init__(self, tasks: TaskSet, average: bool = True) -> None:
        super().__init__(tasks)
        self.omega = 1.0 / self.n if average else np.ones(self.T)
        self.w3 = np.where(self.mask, self.omega[:, None], 0.0)
        self.task_lipschitz = self.task_lipschitz * self.omega
        self.lipschitz = float(self.task_lipschitz.max()) if self.T else 0.0
        self.wy = self.w3 * self.y3
        #: the last solved states: (S, c, z, sigma(-z), dg/dS, h) (:meth:`_solve`)
        self._recent: list[tuple] = []

    @staticmethod
    def combine(S1: np.ndarray, S0: np.ndarray, beta: float) -> np.ndarray:
        """Margins of W1 + beta (W1 - W0) (linear in W)."""
        return S1 + beta * (S1 - S0)

    def _known(self, S: np.ndarray) -> tuple | None:
        return next((r[1:4] for r in self._recent if r[0] is S), None)

    def restrict_rows(self, rows: np.ndarray) -> "InterceptLogisticLoss":
        """:meth:`LogisticLoss.restrict_rows`, with an empty cache of solved states (its
        derivatives in the states have the full loss's shape)."""
        out = super().restrict_rows(rows)
        out._recent = []
        return out

    def _start(self, S: np.ndarray) -> np.ndarray:
        """The Newton start for the state S: the tangent prediction from the last solved state
        S0, c0 - (dg/dS . (S - S0)) / h0 (g the derivative in c, h its derivative in c, both
        at (S0, c0)), its change clipped to 1 per task; zeros before the first solve."""
        if not self._recent:
            return np.zeros(self.T)
        S0, c0, _, _, q0, h0 = self._recent[-1]
        move = np.einsum("tn,tn->t", q0, S - S0) / np.maximum(h0, 1e-300)
        return c0 - np.clip(move, -1.0, 1.0)

    def _solve(self, S: np.ndarray) -> tuple:
        """(c(W), margins z = S + y c, sigma(-z)) for the state S of W (the last three cached).

        Per task, g(c) = -sum_i omega y_i sigma(-z_i) (the derivative in c) has g' = h =
        sum_i omega a_i (1 - a_i) > 0 and |h'| <= h (|1 - 2a| <= 1), so h(c + s) lies within
        h(c) e^(+-|s|).  Newton steps from :meth:`_start` (clipped to 4, kept inside the bracket
        of signs found so far) until every task's Newton step d = -g/h is at most
        ``CHEBYSHEV_RADIUS`` and |d|^3 <= ``INTERCEPT_ERROR`` (1 + |c|)^2; then the last step
        is Chebyshev's, d (1 - d h' / (2h)), which leaves g = h O(|d|^3) (its Taylor terms up to
        the second cancel; the third derivative is at most h e^|s| in modulus), hence an error
        <= |d|^3 in c: the margins and sigma(-z) are then evaluated once more at the result."""
        known = self._known(S)
        if known is not None:
            return known
        c = self._start(S)
        lo = hi = None
        y3 = self.y3
        for _ in range(200):
            z = y3 * c[:, None]
            z += S
            a = _sigmoid_neg(z)
            g = -np.einsum("tn,tn->t", self.wy, a)             # d/dc_t, increasing in c_t
            q = a * (1.0 - a)
            q *= self.wy                                        # dg/dS = omega y a (1 - a)
            h = np.einsum("tn,tn->t", q, y3)                    # dg/dc = sum omega a (1 - a)
            step = -g / np.maximum(h, 1e-300)
            size = np.abs(step)
            if np.all(size <= np.minimum(CHEBYSHEV_RADIUS, np.cbrt(
                    INTERCEPT_ERROR * (1.0 + np.abs(c)) ** 2))):
                if np.any(step):
                    dh = -np.einsum("tn,tn->t", q, 1.0 - 2.0 * a)   # h'
                    c = c + step * (1.0 - 0.5 * step * dh / np.maximum(h, 1e-300))
                    z = y3 * c[:, None]
                    z += S
                    a = _sigmoid_neg(z)
                break
            step = np.clip(step, -4.0, 4.0)
            if lo is None:
                lo, hi = np.full(self.T, -np.inf), np.full(self.T, np.inf)
            lo, hi = np.where(g < 0, c, lo), np.where(g > 0, c, hi)
            new = c + step
            out = (new < lo) | (new > hi)
            if out.any():
                both = np.isfinite(lo) & np.isfinite(hi)
                mid = 0.5 * (np.where(both, lo, 0.0) + np.where(both, hi, 0.0))
                new = np.where(out & both, mid, new)
            c = new
        self._recent = self._recent[-2:] + [(S, c, z, a, q, h)]
        return c, z, a

    def intercepts_of(self, S: np.ndarray) -> np.ndarray:
        """c(W) (T,) for the state S of W."""
        return self._solve(S)[0]

    def value_of(self, S: np.ndarray) -> float:
        return float(np.vdot(self.w3, _log1p_exp(-self._solve(S)[1])))

    def grad_of(self, S: np.ndarray) -> np.ndarray:
        coef = -self.wy * self._solve(S)[2]
        return np.matmul(self.X3t, coef[:, :, None])[:, :, 0].T

    def intercepts(self, W: np.ndarray) -> np.ndarray:
        """c(W), shape (T,)."""
        return self.intercepts_of(self.forward(W))

    def gap(self, S: np.ndarray, W: np.ndarray, pen: float, s: float,
            G: np.ndarray | None = None, f: float | None = None) -> float:
        a = s * self._solve(S)[2]
        ent = xlogy(a, a) + xlogy(1.0 - a, 1.0 - a)
        f = self.value_of(S) if f is None else f
        return float(pen + f + np.sum(self.w3 * ent))
