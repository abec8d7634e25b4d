"""The representations of the least-squares datafit J(W) = sum_t 1/2 ||Z_t w_t - c_t||^2
(``datafits.LeastSquares``): exact float64 evaluations of the same function that differ in cost
and in the order of the floating-point sums, and the data-only pieces they read, computed once
per TaskSet object (``TaskSet.memo``) and shared by every fit of a search (read-only).

Each representation keeps a *state* per point W from which J and grad J are read without
another pass over the data, states linear in W (the state of W1 + beta (W1 - W0) is
S1 + beta (S1 - S0)):

* ``_GramForm`` (``gram``): H_t = Z_t^T Z_t, b_t = Z_t^T c_t; state [W, HW],
  J = 1/2 <W, HW> - <B, W> + 1/2 sum_t ||c_t||^2, grad J = HW - B (T d^2 flops per state);
* ``_RowForm`` (``rows``): predictions a_t = Z_t w_t and Z_t^T a_t in one sweep per task;
  J = 1/2 ||a - c||^2, grad J = [Z_t^T a_t]_t - B;
* ``_PaddedForm`` (``padded``): the same on the tasks' rows zero-padded into one
  (T, m_max, d) stack, one batched product per pass (padding rows add exact zeros);
* ``_BucketForm`` (``buckets``): tasks sorted by m_t in zero-padded buckets that exceed their
  real rows by at most ``pad_ratio``; state: the residuals (``shift`` moves them to
  W + v 1^T with one matrix-vector product);
* :class:`SVDForm` (``svd``, the squared loss only): the thin SVD of every task, or the Gram
  matrices when every n_t >= d; ridge solves for any weight.

Two eigen forms of the squared loss serve solvers that work in eigenbases: :func:`task_eigenrows`
(each task rotated to the eigenbasis of its Gram matrix; per-task ridge problems are diagonal
there) and :class:`TaskSpectra` (the stacked per-task Gram spectra).
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mtlbench import TaskSet

__all__ = ["SVDForm", "TaskSpectra", "spectral_norm_sq", "ridge_solve", "task_xty",
           "task_grams", "task_lipschitz", "padded_task_rows", "padded_task_rows_t",
           "padded_predictions", "task_eigenrows", "PAD_RATIO"]

#: default bucket growth limit of the ``buckets`` representation: a bucket grows (tasks sorted
#: by row count) while its padded size stays within this factor of its real rows
PAD_RATIO = 1.25

#: bytes of padded rows per block of tasks when a pass needs the predictions and the
#: back-projections: each block's rows are read twice while they are in cache (a fraction
#: of a core's L2 cache; the blocks' products are the same numbers as one batched product's)
BLOCK_BYTES = 1 << 19


def task_blocks(T: int, bytes_per_task: int) -> list[slice]:
    """Consecutive slices of the T tasks of about ``BLOCK_BYTES`` each (at least one task)."""
    step = max(1, BLOCK_BYTES // max(int(bytes_per_task), 1))
    return [slice(i, min(i + step, T)) for i in range(0, T, step)]


# ------------------------------------------------------------------------- small helpers
def spectral_norm_sq(X: np.ndarray) -> float:
    """||X||_2^2, the largest eigenvalue of X^T X, from the smaller Gram side."""
    n, d = X.shape
    G = X @ X.T if n <= d else X.T @ X
    return float(np.linalg.eigvalsh(G)[-1]) if G.shape[0] else 0.0


def ridge_solve(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin_w 1/2 ||y - X w||^2 + lam/2 ||w||^2 (X: n x d, y: n) through the smaller Gram
    matrix (a Cholesky solve of size min(n, d))."""
    n, d = X.shape
    if n <= d:
        K = X @ X.T
        K[np.diag_indices_from(K)] += lam
        return X.T @ cho_solve(cho_factor(K), y)
    G = X.T @ X
    G[np.diag_indices_from(G)] += lam
    return cho_solve(cho_factor(G), X.T @ y)


# ------------------------------------------------------------------------- per-task rows
class _Rows:
    """The rows (Z_t, c_t) of a least-squares datafit and a per-data cache for what is derived
    from them (``memo(name, compute)``, keyed by the kind of rows)."""

    def __init__(self, d: int, T: int, kind: str, Z: Callable[[int], np.ndarray],
                 c: Callable[[int], np.ndarray], memo: Callable | None = None) -> None:
        self.d, self.T, self.kind = d, T, kind
        self.Z, self.c = Z, c
        self._memo = memo
        self._local: dict = {}

    def memo(self, name: str, compute: Callable):
        key = (self.kind, name)
        if self._memo is not None:
            return self._memo(key, compute)
        if key not in self._local:
            self._local[key] = compute()
        return self._local[key]

    def sizes(self) -> np.ndarray:
        """m_t per task (from c_t: no rows gathered)."""
        return np.array([self.c(t).shape[0] for t in range(self.T)])


def _instance_rows(tasks: TaskSet) -> _Rows:
    return _Rows(tasks.d, tasks.T, "sq", tasks.X, tasks.y, tasks.memo)


def task_xty(tasks: TaskSet) -> np.ndarray:
    """B[:, t] = X_t^T y_t (d, T) = -grad J(0) of the squared loss, cached on ``tasks``."""
    return _xty(_instance_rows(tasks))


def task_grams(tasks: TaskSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(H, B, c): H[t] = X_t^T X_t (T, d, d), B[:, t] = X_t^T y_t (d, T), c[t] = y_t^T y_t;
    cached on ``tasks`` (a search fits every point on the same training TaskSet)."""
    return _grams(_instance_rows(tasks))


def task_lipschitz(tasks: TaskSet) -> np.ndarray:
    """Per-task ||X_t||_2^2 (largest eigenvalue of the smaller Gram side), cached on ``tasks``."""
    return _lipschitz(_instance_rows(tasks))


def padded_task_rows(tasks: TaskSet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X3, y3, n): X3[t, :n_t] = X_t, y3[t, :n_t] = y_t, zeros below, shapes (T, n_max, d) and
    (T, n_max); cached on ``tasks``.  Zero rows (with zero labels) change no product X_t w,
    X_t^T r, no residual norm and no Gram matrix, so batched products over the stack give each
    task's exact quantities; the padding costs T (n_max - n_t) d entries (none when the tasks
    have equal sizes)."""
    return _padded(_instance_rows(tasks))


def padded_task_rows_t(tasks: TaskSet) -> np.ndarray:
    """The (T, d, n_max) transpose of :func:`padded_task_rows`'s X3, contiguous and cached:
    predictions X_t w_t of all tasks are the row-vector product
    ``np.matmul(W.T[:, None, :], X3t)[:, 0, :]``."""
    return _padded_t(_instance_rows(tasks))


def padded_predictions(tasks: TaskSet, W: np.ndarray) -> np.ndarray:
    """A[t, :n_t] = X_t w_t (zeros at the padding), shape (T, n_max), one batched product."""
    return np.matmul(W.T[:, None, :], padded_task_rows_t(tasks))[:, 0, :]


def _xty(rows: _Rows) -> np.ndarray:
    def compute():
        B = np.empty((rows.d, rows.T))
        for t in range(rows.T):
            B[:, t] = rows.Z(t).T @ rows.c(t)
        return B
    return rows.memo("xty", compute)


def _grams(rows: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    def compute():
        d, T = rows.d, rows.T
        H = np.empty((T, d, d))
        c = np.empty(T)
        for t in range(T):
            X, y = rows.Z(t), rows.c(t)
            G = X.T @ X
            H[t] = 0.5 * (G + G.T)          # exactly symmetric (the row-vector product needs it)
            c[t] = y @ y
        return H, _xty(rows), c
    return rows.memo("grams", compute)


def _lipschitz(rows: _Rows) -> np.ndarray:
    def compute():
        out = np.empty(rows.T)
        for t in range(rows.T):
            out[t] = spectral_norm_sq(rows.Z(t))
        return out
    return rows.memo("lipschitz", compute)


def _padded(rows: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    def compute():
        n = np.array([rows.Z(t).shape[0] for t in range(rows.T)], dtype=int)
        n_max = int(n.max()) if rows.T else 0
        X3 = np.zeros((rows.T, n_max, rows.d))
        y3 = np.zeros((rows.T, n_max))
        for t in range(rows.T):
            X3[t, :n[t]] = rows.Z(t)
            y3[t, :n[t]] = rows.c(t)
        return X3, y3, n
    return rows.memo("padded", compute)


def _padded_t(rows: _Rows) -> np.ndarray:
    return rows.memo("padded_t", lambda: np.ascontiguousarray(
        _padded(rows)[0].transpose(0, 2, 1)))


# ------------------------------------------------------------------------- representations
class _GramForm:
    """State [W, HW] (2, d, T), HW[:, t] = H_t w_t:  J = 1/2 <W, HW> - <B, W> + 1/2 sum_t c_t,
    grad J = HW - B.  One batched matrix-vector product per state (T d^2 flops)."""

    def __init__(self, rows: _Rows) -> None:
        self._rows = rows
        self.H, self.B, self.c = _grams(rows)
        self.half_cc = 0.5 * float(self.c.sum())

    @property
    def columns(self) -> np.ndarray:
        """H as (d, d, T): [i] holds every task's column H_t[:, i] side by side (coordinate
        descent's update of HW after row i moves), computed once per TaskSet."""
        return self._rows.memo("gram_columns", lambda: np.ascontiguousarray(
            self.H.transpose(2, 1, 0)))

    def forward(self, W: np.ndarray) -> np.ndarray:
        # H_t is symmetric, so (H_t w_t)^T = w_t^T H_t: the row-vector batched product
        HW = np.matmul(W.T[:, None, :], self.H)[:, 0, :].T
        return np.stack([W, HW])

    def value_of(self, A: np.ndarray) -> float:
        W, HW = A
        return float(0.5 * np.sum(W * HW) - np.sum(self.B * W) + self.half_cc)

    def grad_of(self, A: np.ndarray) -> np.ndarray:
        return A[1] - self.B

    def residual_norms_sq(self, A: np.ndarray) -> np.ndarray:
        """||Z_t w_t - c_t||^2 per task (clipped at 0: rounding of the expanded square)."""
        W, HW = A
        return np.maximum(np.einsum("it,it->t", W, HW) - 2.0 * np.einsum("it,it->t", self.B, W)
                          + self.c, 0.0)


class _RowForm:
    """State: the stacked predictions a = (Z_t w_t)_t followed by Z_t^T a_t for every task
    (length sum_t m_t + d T), both computed in one sweep per task while Z_t is in cache:
    J = 1/2 ||a - c||^2, grad J = [Z_t^T a_t]_t - B."""

    def __init__(self, rows: _Rows) -> None:
        n = rows.sizes()
        self.d, self.T = rows.d, rows.T
        self.Xs = [rows.Z(t) for t in range(self.T)]
        self.y = np.concatenate([rows.c(t) for t in range(self.T)]) if self.T else np.zeros(0)
        self.start = np.concatenate([[0], np.cumsum(n)])
        self.B = _xty(rows)

    def forward(self, W: np.ndarray) -> np.ndarray:
        N = int(self.start[-1])
        out = np.empty(N + self.d * self.T)
        g = out[N:].reshape(self.T, self.d)
        for t, X in enumerate(self.Xs):
            a = X @ W[:, t]
            out[self.start[t]:self.start[t + 1]] = a
            g[t] = X.T @ a
        return out

    def value_of(self, A: np.ndarray) -> float:
        r = A[:self.start[-1]] - self.y
        return float(0.5 * (r @ r))

    def grad_of(self, A: np.ndarray) -> np.ndarray:
        return A[self.start[-1]:].reshape(self.T, self.d).T - self.B

    def residual_norms_sq(self, A: np.ndarray) -> np.ndarray:
        r = A[:self.start[-1]] - self.y
        return np.add.reduceat(r * r, self.start[:-1]) if r.size else np.zeros(self.T)


class _PaddedForm:
    """State: the flat concatenation of the predictions A[t] = Z_t w_t (T x n_max, zero at the
    padding) and the back-projections Z_t^T A[t] (T x d), each one batched product over all
    tasks: J = 1/2 ||A - c||^2, grad J = back-projections - B."""

    def __init__(self, rows: _Rows) -> None:
        self.d, self.T = rows.d, rows.T
        _, self.y3, self.n = _padded(rows)
        self.X3t = _padded_t(rows)
        self.split = self.y3.size
        self.B = _xty(rows)
        self.blocks = task_blocks(self.T, self.X3t[0].nbytes if self.T else 0)

    def forward(self, W: np.ndarray) -> np.ndarray:
        out = np.empty(self.split + self.T * self.d)
        A = out[:self.split].reshape(self.y3.shape)               # Z_t w_t, (T, n_max)
        G = out[self.split:].reshape(self.T, self.d)              # Z_t^T a_t, (T, d)
        Wt = W.T
        for b in self.blocks:                                     # each block read in cache
            X = self.X3t[b]
            A[b] = np.matmul(Wt[b, None, :], X)[:, 0, :]
            # the column form over X3t (faster than a_t^T Z_t here)
            G[b] = np.matmul(X, A[b][:, :, None])[:, :, 0]
        return out

    def value_of(self, S: np.ndarray) -> float:
        r = S[:self.split] - self.y3.ravel()
        return float(0.5 * (r @ r))

    def value(self, W: np.ndarray) -> float:
        """J(W) from the predictions alone (one batched product, no back-projection; the
        same number as ``value_of(forward(W))``)."""
        r = np.matmul(W.T[:, None, :], self.X3t)[:, 0, :].ravel() - self.y3.ravel()
        return float(0.5 * (r @ r))

    def grad_of(self, S: np.ndarray) -> np.ndarray:
        return S[self.split:].reshape(self.T, self.d).T - self.B

    def residual_norms_sq(self, S: np.ndarray) -> np.ndarray:
        r = S[:self.split].reshape(self.y3.shape) - self.y3
        return np.einsum("tn,tn->t", r, r)


class _BucketForm:
    """Tasks sorted by m_t and cut into buckets whose zero-padded (T_b, m_b, d) arrays exceed
    their real rows by at most ``pad_ratio`` (one bucket when the tasks have equal sizes);
    state: the residuals R (one (T_b, m_b) array per bucket), two batched products per bucket
    for residuals and gradients, O(sum_t m_t d).  Residuals are linear in W: ``shift(R, v)``
    gives those at W + v 1^T (v added to every task) with one matrix-vector product."""

    def __init__(self, rows: _Rows, pad_ratio: float) -> None:
        T, d = rows.T, rows.d
        self.T, self.d = T, d
        Zs = [rows.Z(t) for t in range(T)]
        cs = [rows.c(t) for t in range(T)]
        m = np.array([Z.shape[0] for Z in Zs], dtype=np.intp)
        order = np.argsort(m, kind="stable")
        self.buckets = []
        i = 0
        while i < T:
            j, n_rows = i + 1, int(m[order[i]])
            while j < T and (j + 1 - i) * int(m[order[j]]) <= pad_ratio * (n_rows + m[order[j]]):
                n_rows += int(m[order[j]])
                j += 1
            idx = order[i:j]
            mb = int(m[idx].max())
            Z3 = np.zeros((idx.size, mb, d))
            c2 = np.zeros((idx.size, mb))
            for b, t in enumerate(idx):
                Z3[b, :m[t]] = Zs[t]
                c2[b, :m[t]] = cs[t]
            whole = idx.size == T and np.array_equal(idx, np.arange(T))
            self.buckets.append((None if whole else idx, Z3, c2))
            i = j

    def forward(self, W: np.ndarray) -> list[np.ndarray]:
        out = []
        for idx, Z3, c2 in self.buckets:
            Wb = W.T if idx is None else W.T[idx]
            out.append(np.matmul(Z3, Wb[:, :, None])[:, :, 0] - c2)
        return out

    def shift(self, R: list[np.ndarray], v: np.ndarray) -> list[np.ndarray]:
        return [r + (Z3.reshape(-1, self.d) @ v).reshape(r.shape)
                for r, (_, Z3, _) in zip(R, self.buckets)]

    @staticmethod
    def value_of(R: list[np.ndarray]) -> float:
        return 0.5 * float(sum(np.einsum("tm,tm->", r, r) for r in R))

    def grad_of(self, R: list[np.ndarray]) -> np.ndarray:
        G = np.empty((self.d, self.T))
        for r, (idx, Z3, _) in zip(R, self.buckets):
            Gb = np.matmul(r[:, None, :], Z3)[:, 0, :].T
            if idx is None:
                G[:] = Gb
            else:
                G[:, idx] = Gb
        return G

    @staticmethod
    def combine(R1: list[np.ndarray], R0: list[np.ndarray], beta: float) -> list[np.ndarray]:
        return [r + beta * (r - q) for r, q in zip(R1, R0)]

    def residual_norms_sq(self, R: list[np.ndarray]) -> np.ndarray:
        out = np.empty(self.T)
        for r, (idx, _, _) in zip(R, self.buckets):
            out[slice(None) if idx is None else idx] = np.einsum("tm,tm->t", r, r)
        return out


class SVDForm:
    """The squared loss from the thin SVD of every task's design matrix.

    X_t = P_t diag(s_t) Q_t^T (n_t x d, r_t = min(n_t, d)), stacked over tasks with zero padding
    to r = max_t r_t (a padded column has s = 0, Q = 0 and contributes nothing):

    * ``Q``  T x d x r (Q_t: the right singular vectors as columns), ``s`` T x r, ``c`` T x r
      with c_t = P_t^T y_t;
    * ``res`` T, res_t = ||y_t||^2 - ||c_t||^2 (the part of y_t outside the range of X_t);
    * ``Xty`` d x T, X_t^T y_t = Q_t (s_t * c_t);
    * ``diagH`` d x T, the diagonal of X_t^T X_t.

    Then 1/2 ||y_t - X_t w||^2 = 1/2 ||s_t * (Q_t^T w) - c_t||^2 + res_t / 2, and the ridge solve
    (X_t^T X_t + rho I)^{-1} is applied in O(d r) for any rho (no factorisation per rho).
    Storage T r d numbers, at most the size of the data (Q_t is stored d x r, so both batched
    products run as vector-matrix products over contiguous rows).

    ``gram`` T x d x d, X_t^T X_t, only when r = d (every task has n_t >= d): then it has the
    size of ``Q``, and the loss and gradient at a point need one batched product H_t w_t
    instead of two; ``image`` / ``loss_grad`` pick the representation.  With ``gram``,
    ``Xty`` and ``diagH`` come from the data directly, ``ridge`` is a batched solve, and the
    SVD pieces (``Q``, ``s``, ``c``, ``res``, ``s2``, ``sc``) are computed only if asked for.
    """

    def __init__(self, tasks: TaskSet):
        self.T, self.d = T, d = tasks.T, tasks.d
        Xs = [np.asarray(tasks.X(t), dtype=np.float64) for t in range(T)]
        ys = [np.asarray(tasks.y(t), dtype=np.float64) for t in range(T)]
        self.r = r = int(max(min(X.shape) for X in Xs))
        self.yy = np.array([float(y @ y) for y in ys])
        if r == d:
            self.gram = np.stack([X.T @ X for X in Xs])
            self.Xty = np.stack([X.T @ y for X, y in zip(Xs, ys)], axis=1)     # d x T
            self.diagH = np.diagonal(self.gram, axis1=1, axis2=2).T.copy()      # d x T
            self._data = (Xs, ys)           # the SVD pieces: computed only if asked for
        else:
            self.gram = None
            self._factor(Xs, ys)
            self.Xty = self.back(self.sc)                                       # d x T
            self.diagH = np.einsum("tdr,tr->dt", self.Q ** 2, self.s2)          # d x T
        self.XtyT2 = np.ascontiguousarray(-2.0 * self.Xty.T)                    # T x d
        self.loss_const = 0.5 * float(self.yy.sum())

    def _factor(self, Xs, ys) -> None:
        """The SVD pieces ``Q``, ``s``, ``c``, ``res`` (and ``s2`` = s^2, ``sc`` = s c)."""
        T, d, r = self.T, self.d, self.r
        self.Q = np.zeros((T, d, r))
        self.s = np.zeros((T, r))
        self.c = np.zeros((T, r))
        self.res = np.zeros(T)
        for t, (X, y) in enumerate(zip(Xs, ys)):
            P, sv, Qt = np.linalg.svd(X, full_matrices=False)
            m = sv.size
            self.Q[t, :, :m] = Qt.T
            self.s[t, :m] = sv
            self.c[t, :m] = P.T @ y
            self.res[t] = max(float(y @ y) - float(self.c[t] @ self.c[t]), 0.0)
        self.s2 = self.s ** 2
        self.sc = self.s * self.c

    def __getattr__(self, name):
        # with ``gram`` a fit needs no SVD piece: they are computed at the first use
        if name in ("Q", "s", "c", "res", "s2", "sc") and "_data" in self.__dict__:
            self._factor(*self.__dict__.pop("_data"))
            return self.__dict__[name]
        raise AttributeError(name)

    def proj(self, W: np.ndarray) -> np.ndarray:
        """Q_t^T w_t for every task: d x T -> T x r."""
        return np.matmul(np.ascontiguousarray(W.T)[:, None, :], self.Q)[:, 0, :]

    def back(self, B: np.ndarray) -> np.ndarray:
        """Q_t b_t for every task: T x r -> d x T."""
        return np.matmul(self.Q, B[:, :, None])[:, :, 0].T

    def loss_proj(self, P: np.ndarray) -> float:
        """sum_t 1/2 ||y_t - X_t w_t||^2 from P = ``proj(W)``."""
        R = self.s * P - self.c
        return 0.5 * (float(np.einsum("tr,tr->", R, R)) + float(self.res.sum()))

    def image(self, W: np.ndarray) -> np.ndarray:
        """What the loss and its gradient at W need from the data: H_t w_t (T x d) with
        ``gram``, else ``proj(W)``."""
        if self.gram is None:
            return self.proj(W)
        # w_t^T H_t (H_t symmetric): the row-vector form streams H_t row by row
        return np.matmul(W.T[:, None, :], self.gram)[:, 0, :]

    def loss_image(self, W: np.ndarray, Im: np.ndarray) -> float:
        """sum_t 1/2 ||y_t - X_t w_t||^2 from Im = ``image(W)``; with ``gram``,
        sum_t 1/2 w_t^T H_t w_t - (X_t^T y_t)^T w_t + 1/2 ||y_t||^2."""
        if self.gram is None:
            return self.loss_proj(Im)
        return 0.5 * float(np.vdot(W.T, Im + self.XtyT2)) + self.loss_const

    def loss_grad(self, W: np.ndarray, Im: np.ndarray) -> tuple[float, np.ndarray]:
        """(loss, its gradient d x T: X_t^T (X_t w_t - y_t) in column t) from Im = ``image(W)``."""
        if self.gram is None:
            R = self.s * Im - self.c
            return (0.5 * (float(np.einsum("tr,tr->", R, R)) + float(self.res.sum())),
                    self.back(self.s * R))
        G = Im + 0.5 * self.XtyT2
        return (0.5 * float(np.vdot(W.T, G + 0.5 * self.XtyT2)) + self.loss_const,
                G.T)

    def hess(self, W: np.ndarray) -> np.ndarray:
        """X_t^T X_t w_t for every task (d x T)."""
        if self.gram is None:
            return self.back(self.s2 * self.proj(W))
        return self.image(W).T

    def loss_w(self, W: np.ndarray) -> float:
        """sum_t 1/2 ||y_t - X_t w_t||^2."""
        return self.loss_image(W, self.image(W))

    def ridge(self, A: np.ndarray, rho: float) -> np.ndarray:
        """Column t: argmin_w 1/2 ||y_t - X_t w||^2 + rho/2 ||w - a_t||^2, i.e.
        (X_t^T X_t + rho I)^{-1} (X_t^T y_t + rho a_t)
            = a_t + Q_t (s (c - s Q_t^T a_t) / (s^2 + rho));
        with ``gram`` by one batched linear solve (T systems of size d)."""
        if self.gram is not None:
            H = self.gram + rho * np.eye(self.d)
            return np.linalg.solve(H, (self.Xty + rho * A).T[:, :, None])[:, :, 0].T
        alpha = self.proj(A)
        return A + self.back(self.s * (self.c - self.s * alpha) / (self.s2 + rho))

    # -- the state interface (a state is the pair (W, image(W)))
    def forward(self, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return W, self.image(W)

    def value_of(self, S) -> float:
        return self.loss_image(*S)

    def grad_of(self, S) -> np.ndarray:
        return self.loss_grad(*S)[1]

    @staticmethod
    def combine(S1, S0, beta: float):
        return tuple(a + beta * (a - b) for a, b in zip(S1, S0))


_FORMS = {"gram": _GramForm, "rows": _RowForm, "padded": _PaddedForm}



# ------------------------------------------------------------------------- eigen forms
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
    per-task ridge problem min_w 1/2 ||y_t - X_t w||^2 + mu ||w - v||^2 is diagonal.  Cost: one
    eigen-decomposition of the smaller Gram side per task, once per TaskSet."""
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
    return tasks.memo(("sq", "eigenrows"), compute)


class TaskSpectra:
    """Per-task Gram spectra of the squared loss, stacked.

    For each task t the Gram matrix G_t = X_t^T X_t (d x d) is kept as its eigen-decomposition
    on the smaller side, G_t = V_t diag(e_t) V_t^T with V_t (d x r_t) orthonormal and
    r_t = min(n_t, d): n_t >= d: eigh of the d x d Gram matrix; n_t < d: eigh of the n_t x n_t
    kernel X_t X_t^T = U diag(e) U^T, then V_t = X_t^T U diag(e)^{-1/2} (directions with
    e <= 1e-12 max(e) are dropped: they carry no data); no d x d matrix is built.  All tasks
    are zero-padded to r = max_t r_t and stacked, ``V`` (T x d x r) and ``e`` (T x r), so that
    G_t p_t, (c_t G_t + a_t I)^{-1} p_t and w_t^T G_t w_t are batched matrix products over all
    tasks (padding columns are zero with e = 0).  Also ``Xty`` (d x T), ``yy`` (T), ``sizes``,
    ``energy`` (mean_t tr(G_t) / d) and, when d <= r, the Gram matrices ``G`` themselves.
    Cost: one O(T min(n, d)^2 max(n, d)) decomposition per TaskSet (``of``); memory T d r."""

    def __init__(self, tasks: TaskSet):
        T, d = tasks.T, tasks.d
        Xs = [tasks.X(t) for t in range(T)]
        ys = [tasks.y(t) for t in range(T)]
        self.T, self.d = T, d
        self.sizes = np.array([y.shape[0] for y in ys])
        r = int(min(max(self.sizes.max(), 1), d))
        self.r = r
        self.V = np.zeros((T, d, r))
        self.e = np.zeros((T, r))
        # one batched eigendecomposition per matrix size (tasks of one size share a LAPACK call)
        by_size: dict[int, list[int]] = {}
        feature_grams: dict[int, np.ndarray] = {}         # X_t^T X_t of the tasks with n_t >= d
        for t, X in enumerate(Xs):
            by_size.setdefault(min(X.shape[0], d), []).append(t)
        for size, ts in by_size.items():
            wide = size < d                                   # n_t < d: the kernel matrix
            grams = np.stack([Xs[t] @ Xs[t].T if wide else Xs[t].T @ Xs[t] for t in ts])
            evs, vecs = np.linalg.eigh(grams)
            if not wide:
                feature_grams.update(zip(ts, grams))
            for t, ev, vec in zip(ts, evs, vecs):
                if not wide:
                    self.V[t, :, :d] = vec
                    self.e[t, :d] = np.maximum(ev, 0.0)
                    continue
                keep = ev > 1e-12 * max(float(ev.max(initial=0.0)), 1e-300)
                ev, U = ev[keep], vec[:, keep]
                self.V[t, :, :ev.size] = (Xs[t].T @ U) / np.sqrt(ev)
                self.e[t, :ev.size] = ev
        # the Gram matrices themselves when that is no bigger than the spectra (d <= r): a Gram
        # product is then one pass over T d^2 numbers instead of two over T d r
        self.G = None
        if d <= r:
            self.G = np.stack([feature_grams[t] if t in feature_grams else X.T @ X
                               for t, X in enumerate(Xs)])                      # T x d x d
        self.Xty = np.column_stack([X.T @ y for X, y in zip(Xs, ys)])     # d x T
        self.yy = np.array([float(y @ y) for y in ys])                      # T
        self.energy = float(self.e.sum(axis=1).mean()) / d

    @classmethod
    def from_arrays(cls, Xs: list[np.ndarray], ys: list[np.ndarray], d: int) -> "TaskSpectra":
        """The spectra of the tasks (X_t, y_t) given as arrays (X_t of shape (n_t, d))."""
        rows = SimpleNamespace(T=len(Xs), d=int(d), X=Xs.__getitem__, y=ys.__getitem__)
        return cls(rows)

    @property
    def mean_eigenvalue(self) -> float:
        """The mean of the tasks' nonzero Gram eigenvalues: the scale of J's curvature on the
        data's span."""
        pos = self.e > 0
        return float(self.e[pos].sum() / max(int(pos.sum()), 1))

    @classmethod
    def of(cls, tasks: TaskSet) -> "TaskSpectra":
        """The spectra of ``tasks``, computed once per TaskSet object (``tasks.memo``)."""
        return tasks.memo(("compa.TaskSpectra", 1), lambda: cls(tasks))

    # ---- batched products over tasks; P is d x T (column t belongs to task t)
    def project(self, P: np.ndarray) -> np.ndarray:
        """V_t^T p_t for every t, as a T x r array."""
        return np.matmul(self.V.transpose(0, 2, 1), P.T[:, :, None])[:, :, 0]

    def lift(self, Q: np.ndarray) -> np.ndarray:
        """V_t q_t for every t (Q: T x r), as a d x T array."""
        return np.matmul(self.V, Q[:, :, None])[:, :, 0].T

    def gram_apply(self, P: np.ndarray) -> np.ndarray:
        """[G_t p_t]_t (d x T)."""
        if self.G is not None:
            return np.matmul(self.G, P.T[:, :, None])[:, :, 0].T
        return self.lift(self.e * self.project(P))

    def quad(self, P: np.ndarray) -> np.ndarray:
        """[p_t^T G_t p_t]_t (T,)."""
        Q = self.project(P)
        return np.einsum("tr,tr->t", self.e, Q * Q)

    def shifted_solve(self, P: np.ndarray, c: np.ndarray, a: np.ndarray) -> np.ndarray:
        """[(c_t G_t + a_t I)^{-1} p_t]_t (d x T) for c_t >= 0, a_t > 0 (exact)."""
        Q = self.project(P)
        coef = 1.0 / (c[:, None] * self.e + a[:, None]) - 1.0 / a[:, None]
        return P / a[None, :] + self.lift(coef * Q)

    def losses(self, W: np.ndarray) -> np.ndarray:
        """[1/2 ||y_t - X_t w_t||^2]_t from the spectra (no pass over the data)."""
        fit = self.quad(W) - 2.0 * np.einsum("it,it->t", W, self.Xty) + self.yy
        return 0.5 * np.maximum(fit, 0.0)
