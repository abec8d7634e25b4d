"""AMTL: Asymmetric Multi-task Learning (Lee, Yang & Hwang, ICML 2016), the paper's model.

Objective (W d x T; B T x T, B_st = transfer from task s to task t; column b_t = what task t
receives, row b_s^o = what task s sends)::

    F(W, B) = sum_t (1 + mu ||b_t^o||_1) L_t(w_t) + lam ||W - W B||_F^2
    s.t.  B >= 0,  diag(B) = 0,

i.e. every task is reconstructed as a sparse non-negative combination of the others,
w_t ~ W b_t, and a task with a large loss L_t pays mu L_t for every unit it transfers out, so
easy (low-loss) tasks transfer more.  L_t is the TFCL paper's competitor loss
1/2 ||y_t - X_t w_t||^2 (TFCL, Sec. Experimental Settings; the AMTL paper uses a generic
per-task loss).

Solver: alternating minimisation, as in the paper ("alternative optimization"):

* B-step (W fixed; separable over columns t): with C = W^T W and l_s = L_s(w_s),
  min_{b_t >= 0, b_tt = 0}  lam ||w_t - W b_t||^2 + mu sum_s l_s B_st,
  a non-negative weighted lasso per column.  Solved exactly (to ``b_tol``) by cyclic
  coordinate descent over the rows s, vectorised over all columns t at once:
  B_st <- max(0, B_st - (2 lam (C b_t - C e_t)_s + mu l_s) / (2 lam C_ss)), B_tt fixed at 0.
  (The paper states the same minimisation with a proximal step max(0, v - eta mu l_s); coordinate
  descent reaches the same unique-per-coordinate fixed point and needs no step size.)
* W-step (B fixed): the smooth convex quadratic
  min_W sum_t c_t L_t(w_t) + lam ||W (I - B)||_F^2,   c_t = 1 + mu sum_s B_ts,
  solved by conjugate gradients warm-started at the current W (each CG iterate does not increase
  a convex quadratic); Hessian products cost O(N d + d T^2), no d T x d T matrix is built.

Each block update is kept only if it does not increase F, so the alternating objective never
increases (tested).  Stopping: relative decrease of F below ``tol`` or ``max_iter`` alternations.
Initialisation: per-task ridge W (weight: the mean feature energy mean_t tr(X_t^T X_t)/d) and B = 0.

Hyperparameters -> paper symbols: ``lam`` -> lambda, in units of the mean feature energy
s_X = mean_t ||X_t||_F^2 / d (the loss curvature per coordinate), so it is scale-free;
``mu`` -> mu (dimensionless: it multiplies B).  The grid lam in {0.1, 1, 10} x mu in {0.01, 0.1, 1} is ours.
Fitted: ``coef_`` = W, ``B_`` (T x T), ``task_groups_`` (the task each task receives most from;
itself if it receives nothing), diagnostics (number of transfers, per-task out-degree).

Not the authors' code: BlasterL/AMTL (MATLAB) penalises B quadratically and its regression
W-step treats samples individually; we implement the paper's objective (models.md item 9).
Could not verify from the paper's text (not reachable here): the equation numbers; whether the
paper's B-penalty uses the loss at the current W (we use L_s(w_s) at the current W, which is the
objective itself, not an approximation); the paper's hyperparameter grid.
"""
from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator, cg

from mtlbench import LinearMTLModel, TaskSet, hookimpl
from mtlbench_models.stl import ridge_solve


def task_losses(Xs, ys, W) -> np.ndarray:
    return np.array([0.5 * float(np.sum((y - X @ W[:, t]) ** 2)) for t, (X, y) in enumerate(zip(Xs, ys))])


def amtl_objective(Xs, ys, W, B, lam, mu) -> float:
    L = task_losses(Xs, ys, W)
    R = W - W @ B
    return float(((1.0 + mu * B.sum(axis=1)) * L).sum() + lam * np.sum(R * R))


def b_step(W: np.ndarray, losses: np.ndarray, lam: float, mu: float, B0: np.ndarray | None = None,
           tol: float = 1e-6, max_pass: int = 100) -> tuple[np.ndarray, int]:
    """All columns of argmin_{B >= 0, diag B = 0} lam ||W - W B||_F^2 + mu sum_{s,t} losses_s B_st.

    Cyclic coordinate descent over rows, vectorised over columns.  Stops when a full pass
    changes no entry by more than ``tol`` x max(1, max B).  Returns (B, passes)."""
    T = W.shape[1]
    C = W.T @ W
    B = np.zeros((T, T)) if B0 is None else B0.copy()
    np.fill_diagonal(B, 0.0)
    G = C @ B - C                      # (1/(2 lam)) x gradient of the smooth part
    pen = mu * losses / (2.0 * lam)
    diagC = np.diag(C).copy()
    p = 0
    for p in range(1, max_pass + 1):
        biggest = 0.0
        for s in range(T):
            old = B[s].copy()
            if diagC[s] <= 0:          # w_s = 0: row s cannot help any task; zero is optimal
                new = np.zeros(T)
            else:
                new = np.maximum(old - (G[s] + pen[s]) / diagC[s], 0.0)
                new[s] = 0.0
            delta = new - old
            if np.any(delta):
                B[s] = new
                G += np.outer(C[:, s], delta)
                biggest = max(biggest, float(np.abs(delta).max()))
        if biggest <= tol * max(1.0, float(B.max(initial=0.0))):
            break
    return B, p


class AMTL(LinearMTLModel):
    """Asymmetric MTL with a sparse non-negative transfer graph B; see the module docstring."""

    name = "amtl"
    paper = "Lee, Yang & Hwang, Asymmetric Multi-task Learning Based on Task Relatedness and Loss, ICML 2016"
    search_space = {"lam": [0.1, 1.0, 10.0], "mu": [0.01, 0.1, 1.0]}
    supports_warm_start = True

    def __init__(self, lam: float = 1.0, mu: float = 0.1, tol: float = 1e-4, max_iter: int = 30,
                 cg_max_iter: int = 50, b_tol: float = 1e-6, b_max_pass: int = 20):
        self.lam = lam
        self.mu = mu
        self.tol = tol
        self.max_iter = max_iter
        self.cg_max_iter = cg_max_iter
        self.b_tol = b_tol
        self.b_max_pass = b_max_pass

    def _validate(self):
        if not self.lam > 0:
            raise ValueError(f"amtl: lam must be > 0, got {self.lam}")
        if not self.mu >= 0:
            raise ValueError(f"amtl: mu must be >= 0, got {self.mu}")
        for p in ("max_iter", "cg_max_iter"):
            if int(getattr(self, p)) < 1:
                raise ValueError(f"amtl: {p} must be >= 1, got {getattr(self, p)}")

    def fit(self, tasks: TaskSet, init=None) -> "AMTL":
        self._validate()
        T, d = tasks.T, tasks.d
        Xs = [tasks.X(t) for t in range(T)]
        ys = [tasks.y(t) for t in range(T)]
        energy = float(np.mean([np.einsum("ij,ij->", X, X) for X in Xs])) / d
        lam = float(self.lam) * energy
        mu = float(self.mu)
        self.lam_ = lam
        if init is not None and getattr(init, "coef_", None) is not None \
                and init.coef_.shape == (d, T) and getattr(init, "B_", None) is not None:
            W, B = init.coef_.copy(), init.B_.copy()
        else:
            W = np.column_stack([ridge_solve(X, y, energy) for X, y in zip(Xs, ys)])
            B = np.zeros((T, T))
        Xty = np.column_stack([X.T @ y for X, y in zip(Xs, ys)])
        F = lambda W_, B_: amtl_objective(Xs, ys, W_, B_, lam, mu)
        hist = [F(W, B)]
        it, b_passes, cg_iters = 0, 0, 0
        for it in range(1, int(self.max_iter) + 1):
            # B-step
            B_new, p = b_step(W, task_losses(Xs, ys, W), lam, mu, B, tol=self.b_tol, max_pass=int(self.b_max_pass))
            b_passes += p
            if F(W, B_new) <= F(W, B):
                B = B_new
            # W-step
            W_new, n_cg = self._w_step(Xs, Xty, W, B, lam, mu)
            cg_iters += n_cg
            if F(W_new, B) <= F(W, B):
                W = W_new
            hist.append(F(W, B))
            if hist[-2] - hist[-1] <= self.tol * abs(hist[-2]):
                break
        self.coef_ = W
        self.B_ = B
        self.objective_history_ = hist
        self.n_iter_ = it
        recv = B.max(axis=0) > 0
        self.task_groups_ = np.where(recv, B.argmax(axis=0), np.arange(T))
        self.diagnostics_ = {"transfers": int(np.count_nonzero(B)),
                             "out_degree": np.count_nonzero(B, axis=1).tolist(),
                             "b_passes": int(b_passes), "cg_iters": int(cg_iters)}
        return self

    def _w_step(self, Xs, Xty, W, B, lam, mu):
        d, T = W.shape
        c = 1.0 + mu * B.sum(axis=1)
        IB = np.eye(T) - B
        M = IB @ IB.T

        def hess(p):
            P = p.reshape(d, T, order="F")
            out = 2.0 * lam * (P @ M)
            for t, X in enumerate(Xs):
                out[:, t] += c[t] * (X.T @ (X @ P[:, t]))
            return out.ravel(order="F")

        op = LinearOperator((d * T, d * T), matvec=hess, dtype=np.float64)
        rhs = (Xty * c).ravel(order="F")
        count = [0]
        x, _ = cg(op, rhs, x0=W.ravel(order="F"), rtol=1e-8, atol=0.0,
                  maxiter=int(self.cg_max_iter), callback=lambda _: count.__setitem__(0, count[0] + 1))
        return x.reshape(d, T, order="F"), count[0]


@hookimpl
def register_models(register):
    register(AMTL)
