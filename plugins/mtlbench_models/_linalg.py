"""Linear-algebra helpers shared by the squared-loss competitors (LASSO, STL, rMTFL, RAMUSA,
CoCMTL, and the ridge start of AMTL / VSTG-MTL).  Private to the built-in plugins.

Everything here evaluates the competitors' common loss (TFCL paper, Experimental Settings)

    J(W) = sum_t 1/2 ||y_t - X_t w_t||^2,     W of shape (d, T), column t = task t,

or solves a per-task ridge problem; nothing here changes an objective.

* :func:`ridge_solve` -- argmin_w 1/2 ||y - X w||^2 + lam/2 ||w||^2 through the smaller Gram.
* :class:`Residuals` -- J through passes over the rows (predictions X_t w_t kept per task).
* :class:`TaskQuadratic` -- J through the per-task Gram matrices H_t = X_t^T X_t and
  b_t = X_t^T y_t (cached per TaskSet with ``tasks.memo``), or through stacked rows when the
  Gram matrices would cost more than the rows (``d >= 2 n_t``); the same interface for both.
* :func:`stacked_task_rows` -- the tasks' rows zero-padded into one (T, n_max, d) array, so a
  per-task product is one batched matmul instead of a Python loop over tasks.
* :class:`BatchedTaskQuadratic` -- :class:`TaskQuadratic`'s row representation on the padded
  stack (one batched product per pass; padding rows are zeros and contribute exact zeros).
* :func:`task_eigenrows` -- each task's data rotated to the eigenbasis of its Gram matrix
  (orthogonal rows), in which per-task ridge problems are diagonal.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mtlbench.data import TaskSet

__all__ = ["ridge_solve", "Residuals", "TaskQuadratic", "BatchedTaskQuadratic", "task_grams",
           "task_xty", "gram_lipschitz", "stacked_task_rows", "stacked_task_rows_t",
           "stacked_predictions", "task_eigenrows"]


def ridge_solve(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin_w 1/2 ||y - X w||^2 + lam/2 ||w||^2 through the smaller Gram matrix."""
    n, d = X.shape
    if n <= d:
        K = X @ X.T
        K[np.diag_indices_from(K)] += lam
        return X.T @ cho_solve(cho_factor(K), y)
    G = X.T @ X
    G[np.diag_indices_from(G)] += lam
    return cho_solve(cho_factor(G), X.T @ y)


class Residuals:
    """The affine map W -> (X_t w_t)_t of a :class:`SquaredLoss`, used by the APG solvers.

    J is quadratic, so the predictions at an extrapolated point Y = W_k + beta (W_k - W_{k-1})
    are the same combination of the predictions at W_k and W_{k-1}: each APG iteration needs
    one forward pass (predictions of the new iterate: backtracking test and objective value)
    and one backward pass (gradient), instead of recomputing J and grad J from scratch.
    At SUN scale the passes over the data (250 x 50 x 2048) dominate the cost.
    """

    def __init__(self, loss) -> None:
        self.loss = loss

    def forward(self, W: np.ndarray) -> list[np.ndarray]:
        return [X @ W[:, t] for t, X in enumerate(self.loss.Xs)]

    def value(self, A: list[np.ndarray]) -> float:
        return float(sum(0.5 * w * np.dot(a - y, a - y)
                         for w, a, y in zip(self.loss.weights, A, self.loss.ys)))

    def grad(self, A: list[np.ndarray]) -> np.ndarray:
        G = np.empty((self.loss.d, self.loss.T))
        for t, (X, a, y) in enumerate(zip(self.loss.Xs, A, self.loss.ys)):
            G[:, t] = self.loss.weights[t] * (X.T @ (a - y))
        return G

    @staticmethod
    def combine(A1: list[np.ndarray], A0: list[np.ndarray], beta: float) -> list[np.ndarray]:
        """Predictions at W1 + beta (W1 - W0)."""
        return [a1 + beta * (a1 - a0) for a1, a0 in zip(A1, A0)]


def task_xty(tasks: TaskSet) -> np.ndarray:
    """B[:, t] = X_t^T y_t (d, T) = -grad J(0), cached on ``tasks``."""
    def compute():
        B = np.empty((tasks.d, tasks.T))
        for t in range(tasks.T):
            B[:, t] = tasks.X(t).T @ tasks.y(t)
        return B
    return tasks.memo(("sq_task_xty",), compute)


def task_grams(tasks: TaskSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(H, B, c): H[t] = X_t^T X_t (T, d, d), B[:, t] = X_t^T y_t (d, T), c[t] = y_t^T y_t.

    Cached on ``tasks`` (``tasks.memo(("sq_task_grams",), ...)``): a search fits every point on
    the same training TaskSet, so the Gram matrices are formed once per unit."""
    def compute():
        d, T = tasks.d, tasks.T
        H = np.empty((T, d, d))
        c = np.empty(T)
        for t in range(T):
            X, y = tasks.X(t), tasks.y(t)
            G = X.T @ X
            H[t] = 0.5 * (G + G.T)          # exactly symmetric (forward relies on it)
            c[t] = y @ y
        return H, task_xty(tasks), c
    return tasks.memo(("sq_task_grams",), compute)


def gram_lipschitz(tasks: TaskSet) -> np.ndarray:
    """Per-task ||X_t||_2^2 (largest eigenvalue of the smaller Gram side), cached on ``tasks``."""
    def compute():
        out = np.empty(tasks.T)
        for t in range(tasks.T):
            X = tasks.X(t)
            n, d = X.shape
            G = X @ X.T if n <= d else X.T @ X
            out[t] = float(np.linalg.eigvalsh(G)[-1]) if G.shape[0] else 0.0
        return out
    return tasks.memo(("sq_task_lipschitz",), compute)


class TaskQuadratic:
    """J(W) = sum_t 1/2 ||y_t - X_t w_t||^2 with an APG-friendly "state" per iterate.

    ``forward(W)`` returns a state from which ``value`` and ``grad`` are read without another
    pass over the data; states are numpy arrays, linear in W (so ``combine`` and ``a + b``
    give the state of the combined point: J is quadratic).

    Two representations, chosen by cost (both exact, float64):

    * Gram (when ``d < 2 n_t`` on average and T d^2 stays below ~ 50 M entries): the state is
      ``[W, HW]`` of shape (2, d, T) with HW[:, t] = H_t w_t; one batched matrix-vector product
      per iterate (T d^2 flops instead of 2 sum_t n_t d);
      J = 1/2 <W, HW> - <B, W> + 1/2 sum_t c_t,  grad J = HW - B.
    * rows: the state is the stacked predictions a = (X_t w_t)_t followed by X_t^T a_t for
      every task (length sum_t n_t + d T); ``forward`` computes both in one sweep per task,
      while X_t is still in cache, so an iteration reads the data from memory once (not twice:
      measured at SUN scale the passes were memory-bound);
      J = 1/2 ||a - y||^2,  grad J = [X_t^T a_t]_t - B.

    ``lipschitz`` = max_t ||X_t||_2^2 (Lipschitz constant of grad J), as in ``SquaredLoss``.
    """

    def __init__(self, tasks: TaskSet, mode: str | None = None) -> None:
        self.tasks = tasks
        self.d, self.T = tasks.d, tasks.T
        n = np.array([tasks.X(t).shape[0] for t in range(self.T)])
        if mode is None:
            mode = "gram" if (self.d < 2 * n.mean() and self.T * self.d ** 2 <= 5e7) else "rows"
        self.mode = mode
        self.lipschitz = float(gram_lipschitz(tasks).max()) if self.T else 0.0
        if mode == "gram":
            self.H, self.B, c = task_grams(tasks)
            self.half_cc = 0.5 * float(c.sum())
        else:
            self.Xs = [tasks.X(t) for t in range(self.T)]
            self.y = np.concatenate([tasks.y(t) for t in range(self.T)]) if self.T else np.zeros(0)
            self.start = np.concatenate([[0], np.cumsum(n)])
            self.B = task_xty(tasks)

    # ---- states
    def forward(self, W: np.ndarray) -> np.ndarray:
        if self.mode == "gram":
            # H_t is symmetric, so (H_t w_t)^T = w_t^T H_t: the row-vector batched product
            # is the faster layout (measured 2x against H @ w_t[:, None])
            HW = np.matmul(W.T[:, None, :], self.H)[:, 0, :].T
            return np.stack([W, HW])
        N = int(self.start[-1])
        out = np.empty(N + self.d * self.T)
        g = out[N:].reshape(self.T, self.d)
        for t, X in enumerate(self.Xs):
            a = X @ W[:, t]
            out[self.start[t]:self.start[t + 1]] = a
            g[t] = X.T @ a
        return out

    def value(self, A: np.ndarray) -> float:
        if self.mode == "gram":
            W, HW = A
            return float(0.5 * np.sum(W * HW) - np.sum(self.B * W) + self.half_cc)
        r = A[:self.start[-1]] - self.y
        return float(0.5 * (r @ r))

    def grad(self, A: np.ndarray) -> np.ndarray:
        if self.mode == "gram":
            return A[1] - self.B
        return A[self.start[-1]:].reshape(self.T, self.d).T - self.B

    def value_grad(self, A: np.ndarray) -> tuple[float, np.ndarray]:
        return self.value(A), self.grad(A)

    @staticmethod
    def combine(A1: np.ndarray, A0: np.ndarray, beta: float) -> np.ndarray:
        """State of W1 + beta (W1 - W0)."""
        return A1 + beta * (A1 - A0)


def stacked_task_rows(tasks: TaskSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X3, y3, n): X3[t, :n_t] = X_t, y3[t, :n_t] = y_t, zeros below (T, n_max, d) / (T, n_max).

    Cached on ``tasks``.  Zero rows (with zero labels) change no product X_t w, X_t^T r, no
    residual norm and no Gram matrix, so batched products over the stack give each task's
    exact quantities; the padding costs T (n_max - n_t) d extra entries (nothing when the tasks
    have equal sizes, as in the personalized-attribute data: every user labels 50 items)."""
    def compute():
        n = np.array([tasks.X(t).shape[0] for t in range(tasks.T)], dtype=int)
        n_max = int(n.max()) if tasks.T else 0
        X3 = np.zeros((tasks.T, n_max, tasks.d))
        y3 = np.zeros((tasks.T, n_max))
        for t in range(tasks.T):
            X3[t, :n[t]] = tasks.X(t)
            y3[t, :n[t]] = tasks.y(t)
        return X3, y3, n
    return tasks.memo(("stacked_task_rows",), compute)


def stacked_task_rows_t(tasks: TaskSet) -> np.ndarray:
    """The (T, d, n_max) transpose of :func:`stacked_task_rows`'s X3, contiguous and cached:
    predictions X_t w_t for all tasks are then the row-vector product
    ``np.matmul(W.T[:, None, :], X3t)[:, 0, :]`` (measured ~3x faster than X3 @ w_t)."""
    return tasks.memo(("stacked_task_rows_t",), lambda: np.ascontiguousarray(
        stacked_task_rows(tasks)[0].transpose(0, 2, 1)))


def stacked_predictions(tasks: TaskSet, W: np.ndarray) -> np.ndarray:
    """A[t, :n_t] = X_t w_t (zeros at the padding), shape (T, n_max), one batched product."""
    return np.matmul(W.T[:, None, :], stacked_task_rows_t(tasks))[:, 0, :]


class BatchedTaskQuadratic:
    """J(W) = sum_t 1/2 ||y_t - X_t w_t||^2 with the interface of :class:`TaskQuadratic`
    (``forward``, ``value``, ``grad``, ``combine``, ``lipschitz``), computed on the zero-padded
    stack of :func:`stacked_task_rows`: the state of W is the flat concatenation of the
    predictions A[t] = X_t w_t (T x n_max, zero at the padding) and the back-projections
    X_t^T A[t] (T x d), each one batched product over all tasks (no Python loop over tasks).
    Exact (float64) like the other representations; the order of the floating-point sums
    inside the products may differ from theirs (last-bit differences)."""

    def __init__(self, tasks: TaskSet) -> None:
        self.d, self.T = tasks.d, tasks.T
        _, self.y3, self.n = stacked_task_rows(tasks)
        self.X3t = stacked_task_rows_t(tasks)
        self.split = self.y3.size
        self.lipschitz = float(gram_lipschitz(tasks).max()) if self.T else 0.0
        self.B = task_xty(tasks)

    def forward(self, W: np.ndarray) -> np.ndarray:
        A = np.matmul(W.T[:, None, :], self.X3t)[:, 0, :]      # X_t w_t, (T, n_max)
        # X_t^T a_t, (T, d): the column form over X3t (measured 2.5x faster than a_t^T X_t)
        G = np.matmul(self.X3t, A[:, :, None])[:, :, 0]
        return np.concatenate([A.ravel(), G.ravel()])

    def value(self, S: np.ndarray) -> float:
        r = S[:self.split] - self.y3.ravel()
        return float(0.5 * (r @ r))

    def grad(self, S: np.ndarray) -> np.ndarray:
        return S[self.split:].reshape(self.T, self.d).T - self.B

    @staticmethod
    def combine(A1: np.ndarray, A0: np.ndarray, beta: float) -> np.ndarray:
        """State of W1 + beta (W1 - W0)."""
        return A1 + beta * (A1 - A0)


def task_eigenrows(tasks: TaskSet) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each task's data in the eigenbasis of its Gram matrix: (E, R, z, c), cached on ``tasks``.

    For task t with m_t = min(n_t, d) (zero-padded to m = max_t m_t): R[t] (m x d) has
    orthogonal rows with squared norms E[t] (the nonzero spectrum of X_t^T X_t, zeros at the
    padding), z[t] (m) and c[t] >= 0 such that for every w

        ||y_t - X_t w||^2 = ||z_t - R_t w||^2 + c_t     and     R_t^T R_t = X_t^T X_t.

    n_t <= d: R_t = V^T X_t, z_t = V^T y_t, c_t = 0 with X_t X_t^T = V diag(E) V^T (n_t x n_t);
    n_t > d: R_t = diag(sqrt(E)) V^T, z_t = diag(1/sqrt(E)) V^T X_t^T y_t over the eigenvalues
    above 1e-12 max(E) (the others: zero rows), c_t = ||y_t||^2 - ||z_t||^2 (the part of y_t
    outside the column space of X_t), with X_t^T X_t = V diag(E) V^T (d x d).  In this basis the
    per-task ridge problem min_w 1/2 ||y_t - X_t w||^2 + mu ||w - v||^2 is diagonal (used by
    CoCMTL's reduced problem).  Cost: one eigen-decomposition of the smaller Gram side per task,
    once per TaskSet."""
    def compute():
        T, d = tasks.T, tasks.d
        sizes = [min(tasks.X(t).shape[0], d) for t in range(T)]
        m = max(sizes) if T else 0
        E = np.zeros((T, m))
        R = np.zeros((T, m, d))
        z = np.zeros((T, m))
        c = np.zeros(T)
        for t in range(T):
            X, y = tasks.X(t), tasks.y(t)
            n = X.shape[0]
            if n <= d:
                e, V = np.linalg.eigh(X @ X.T)
                E[t, :n] = np.maximum(e, 0.0)
                R[t, :n] = V.T @ X
                z[t, :n] = V.T @ y
            else:
                e, V = np.linalg.eigh(X.T @ X)
                keep = e > 1e-12 * max(float(e[-1]), 1e-300)
                r = np.sqrt(e[keep])
                E[t, :keep.sum()] = e[keep]
                R[t, :keep.sum()] = (V[:, keep] * r).T
                z[t, :keep.sum()] = (V[:, keep].T @ (X.T @ y)) / r
                c[t] = max(float(y @ y) - float(z[t] @ z[t]), 0.0)
        return E, R, z, c
    return tasks.memo(("task_eigenrows",), compute)
