"""Smooth multi-task losses shared by the model plugins.

All losses act on W of shape (d, T) (column t = task t) and return float64 values.
"""
from __future__ import annotations

import numpy as np

from mtlbench.data import TaskSet


class SquaredLoss:
    """Instance-wise squared loss of the paper's competitors (Sec. Experimental Settings):

        J(W) = sum_t 1/2 ||y_t - X_t w_t||^2.

    Per-task Gram matrices are never formed when d is large: value and gradient cost
    O(n_t d) per task.  ``task_weights`` (length T) scale each task's term (e.g. 1/n_t).

    Attributes
    ----------
    Xs, ys : per-task arrays, shapes (n_t, d) and (n_t,)
    lipschitz : float
        Lipschitz constant of grad J: max_t weight_t * ||X_t||_2^2.
    """

    def __init__(self, tasks: TaskSet, task_weights: np.ndarray | None = None) -> None:
        self.Xs = [tasks.X(t) for t in range(tasks.T)]
        self.ys = [tasks.y(t) for t in range(tasks.T)]
        self.T = tasks.T
        self.d = tasks.d
        self.weights = (np.ones(self.T) if task_weights is None
                        else np.asarray(task_weights, dtype=np.float64))
        self.task_lipschitz = np.array(
            [w * spectral_norm_sq(X) for w, X in zip(self.weights, self.Xs)])
        self.lipschitz = float(self.task_lipschitz.max())

    def residuals(self, W: np.ndarray) -> list[np.ndarray]:
        return [X @ W[:, t] - y for t, (X, y) in enumerate(zip(self.Xs, self.ys))]

    def value(self, W: np.ndarray) -> float:
        return float(sum(0.5 * w * r @ r for w, r in zip(self.weights, self.residuals(W))))

    def grad(self, W: np.ndarray) -> np.ndarray:
        G = np.empty((self.d, self.T))
        for t, (X, y) in enumerate(zip(self.Xs, self.ys)):
            G[:, t] = self.weights[t] * (X.T @ (X @ W[:, t] - y))
        return G

    def value_and_grad(self, W: np.ndarray) -> tuple[float, np.ndarray]:
        G = np.empty((self.d, self.T))
        val = 0.0
        for t, (X, y) in enumerate(zip(self.Xs, self.ys)):
            r = X @ W[:, t] - y
            val += 0.5 * self.weights[t] * (r @ r)
            G[:, t] = self.weights[t] * (X.T @ r)
        return float(val), G


def spectral_norm_sq(X: np.ndarray) -> float:
    """||X||_2^2, the largest eigenvalue of X^T X, from the smaller Gram side."""
    n, d = X.shape
    G = X @ X.T if n <= d else X.T @ X
    return float(np.linalg.eigvalsh(G)[-1]) if G.shape[0] else 0.0


# Tasks are zero-padded to the longest task of their bucket; a bucket grows (tasks sorted by
# row count) while its padded size stays within this factor of its real rows.
_PAD_RATIO = 1.25


class StackedLeastSquares:
    """J(W) = sum_t 1/2 ||Z_t w_t - c_t||^2, every task at once (Z_t: m_t x d, c_t: m_t).

    The squared AUC surrogate and the instance-wise squared loss are both of this form
    (``SquaredAUCLoss``, ``StackedLeastSquares.squared``), with J's value exact, not up to a
    constant.  Tasks are sorted by m_t and cut into buckets whose zero-padded (T_b, m_b, d)
    arrays exceed their real rows by at most ``_PAD_RATIO`` (one bucket when the tasks have
    equal sizes); residuals and gradients are then two batched matrix products per bucket,
    O(sum_t m_t d), with no per-task Python loop, no pairs and no d x d matrix.  Padded rows
    are zero in Z and c, so they add nothing.

    ``forward(W)`` returns the residuals R (one (T_b, m_b) array per bucket); ``value_of(R)``,
    ``grad_of(R)`` read J and grad J from them, and residuals are linear in W, so a solver that
    changes W by a vector shared by all tasks updates them with ``shift(R, v)`` (one
    matrix-vector product) instead of a full pass.

    Attributes: ``task_lipschitz`` (||Z_t||_2^2, the largest eigenvalue of the task's Hessian
    Z_t^T Z_t), ``lipschitz`` (their maximum: the Lipschitz constant of grad J),
    ``curvature`` (mean_t tr(Z_t^T Z_t) / d_used: the mean per-feature curvature of the loss,
    d_used = the number of columns J depends on),
    ``free_columns`` (features i with Z_t[:, i] = 0 for every task: J does not depend on
    row i of W).
    """

    def __init__(self, Zs: list[np.ndarray], cs: list[np.ndarray], d: int) -> None:
        T = len(Zs)
        self.T, self.d = T, d
        m = np.array([Z.shape[0] for Z in Zs], dtype=np.intp)
        self.task_lipschitz = np.array([spectral_norm_sq(Z) for Z in Zs])
        self.lipschitz = float(self.task_lipschitz.max()) if T else 0.0
        used = np.zeros(d, dtype=bool)
        for Z in Zs:
            used |= np.any(Z != 0.0, axis=0)
        self.free_columns = np.flatnonzero(~used)
        n_used = int(used.sum())
        self.curvature = (float(np.mean([np.sum(Z * Z) for Z in Zs])) / n_used) if n_used else 0.0
        order = np.argsort(m, kind="stable")
        self.buckets = []
        i = 0
        while i < T:
            j, rows = i + 1, int(m[order[i]])
            while j < T and (j + 1 - i) * int(m[order[j]]) <= _PAD_RATIO * (rows + m[order[j]]):
                rows += int(m[order[j]])
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

    @classmethod
    def squared(cls, tasks: TaskSet) -> "StackedLeastSquares":
        """The instance-wise squared loss sum_t 1/2 ||X_t w_t - y_t||^2 (Z_t = X_t, c_t = y_t);
        the same function as :class:`SquaredLoss`, evaluated batched over tasks."""
        return cls([tasks.X(t) for t in range(tasks.T)], [tasks.y(t) for t in range(tasks.T)],
                   tasks.d)

    def forward(self, W: np.ndarray) -> list[np.ndarray]:
        """Residuals Z_t w_t - c_t of every task, one (T_b, m_b) array per bucket."""
        out = []
        for idx, Z3, c2 in self.buckets:
            Wb = W.T if idx is None else W.T[idx]
            out.append(np.matmul(Z3, Wb[:, :, None])[:, :, 0] - c2)
        return out

    def shift(self, R: list[np.ndarray], v: np.ndarray) -> list[np.ndarray]:
        """Residuals at W + v 1^T (v added to every task's weights) from those at W."""
        return [r + (Z3.reshape(-1, self.d) @ v).reshape(r.shape)
                for r, (_, Z3, _) in zip(R, self.buckets)]

    @staticmethod
    def value_of(R: list[np.ndarray]) -> float:
        """J from the residuals."""
        return 0.5 * float(sum(np.einsum("tm,tm->", r, r) for r in R))

    def grad_of(self, R: list[np.ndarray]) -> np.ndarray:
        """grad J = [Z_t^T r_t]_t (d x T) from the residuals."""
        G = np.empty((self.d, self.T))
        for r, (idx, Z3, _) in zip(R, self.buckets):
            Gb = np.matmul(r[:, None, :], Z3)[:, 0, :].T
            if idx is None:
                G[:] = Gb
            else:
                G[:, idx] = Gb
        return G

    def value(self, W: np.ndarray) -> float:
        return self.value_of(self.forward(W))

    def grad(self, W: np.ndarray) -> np.ndarray:
        return self.grad_of(self.forward(W))

    def value_and_grad(self, W: np.ndarray) -> tuple[float, np.ndarray]:
        R = self.forward(W)
        return self.value_of(R), self.grad_of(R)


class SquaredAUCLoss(StackedLeastSquares):
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

    evaluated for all tasks at once by :class:`StackedLeastSquares`; the gradient
    Z^T (Z w - e) is grad_eve.  A feature constant within a task gives an exactly zero
    column of Z_t (the class means of a constant column are set to the constant itself, not
    to a rounded average), so a column constant within every task is in ``free_columns``.
    ``lipschitz`` = max_t ||Z_t||_2^2.
    """

    def __init__(self, tasks: TaskSet) -> None:
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
        super().__init__(Zs, cs, tasks.d)


def squared_auc_bruteforce(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
    """Reference: 1/(2 n+ n-) sum over all (positive, negative) pairs of (1 - (s_p - s_q))^2 and
    its gradient, O(n+ n- d).  For tests and benchmarks only."""
    s = X @ w
    pos = y > 0
    P, Q = np.flatnonzero(pos), np.flatnonzero(~pos)
    m = 1.0 - (s[P][:, None] - s[Q][None, :])          # (n+, n-)
    scale = 1.0 / (len(P) * len(Q))
    val = 0.5 * scale * float(np.sum(m * m))
    # d/dw of 1/2 (1 - (x_p - x_q)^T w)^2 = -(1 - ...) (x_p - x_q)
    Dx = X[P][:, None, :] - X[Q][None, :, :]            # (n+, n-, d)
    g = -scale * np.einsum("pq,pqd->d", m, Dx)
    return val, g
