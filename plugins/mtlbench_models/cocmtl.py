"""CoCMTL: multi-task learning with task-feature co-clusters.

L. Xu, A. Huang, J. Chen and E. Chen, "Exploiting Task-Feature Co-Clusters in Multi-Task
Learning", Proceedings of the Twenty-Ninth AAAI Conference on Artificial Intelligence (AAAI),
pp. 1931-1937, 2015, doi:10.1609/aaai.v29i1.9483 (not Murugesan et al., "Co-Clustering for
Multitask Learning"); a competitor of the TFCL paper (Sec. Competitors).  Decomposition
W = P + Q (W of shape d x T, column t = task t)::

    min_{P, Q}  F(P, Q) = J(P + Q) + lam1 Omega1(P) + lam2 Omega2(Q)

    J(W)       = sum_t 1/2 ||y_t - X_t w_t||^2   (the TFCL paper's instance-wise squared loss
                                                 for every competitor, Sec. Exp. Settings)
    Omega1(P)  = ||P (I_T - 11^T/T)||_F^2        (global similarity: tasks near the mean task)
    Omega2(Q)  = sum_{i > k} sigma_i(Q)^2        (co-cluster term; zero iff rank Q <= k)

Omega2 = ||Q||_F^2 - max_{F^T F = I_k} ||Q F||_F^2 is the spectral relaxation of a k-way
co-clustering of the bipartite task-feature graph; F is non-convex (a difference of convex).

Solver, three phases:
1. ``palm_sweeps`` (50) sweeps of PALM (Bolte, Sabach & Teboulle 2014), the paper's algorithm,
   from (P, Q) = 0: one proximal linearised step per block (P, then Q with the new P), both
   proxes closed forms (the mean kept, deviations shrunk by 1/(1 + 2 tau); the top-k singular
   values kept, the others divided by 1 + 2 tau).  Step constant c_b = gamma L_b, gamma = 1.1,
   L_b <= Lip(grad J) = max_t ||X_t||_2^2 by backtracking on the descent lemma along the step
   (``backtrack=False``: L_b = Lip(grad J)).  Extrapolated sweeps (``accelerate=True``) are
   accepted only under PALM's sufficient decrease measured from the extrapolated point (Li &
   Lin, NIPS 2015, Alg. 1), else the plain sweep is taken and the momentum restarts: F never
   increases and every limit point is critical (Li & Lin, Thm. 1); neither convergence of the
   whole sequence nor a rate is claimed.  The early path selects the local solution's basin.
2. the reduced problem (:class:`ReducedCoCluster`): min over (P, Q) of F equals the min over a
   mean column c and a rank-k L of Phi(c 1^T + L), a sum of per-task ridge problems in closed
   form; the d x k and T x k factors of L by preconditioned L-BFGS (Armijo, Phi decreasing),
   started at the factors of the PALM point; the recovered (P, Q) has F(P, Q) <= Phi.
3. a fallback: PALM sweeps until the stopping rule holds.

Stopping rule: the stationarity residual ||(grad_P F, grad_Q F)||_F (grad Omega2(Q) =
2 (Q - Q_k), Q_k the rank-k truncation) <= tol Lip(grad J) max(1, ||(P, Q)||_F), tol = 1e-6,
checked every 25 sweeps or L-BFGS iterations; ``converged_`` is True iff it held within
``max_iter`` (5000) iterations.  ``report_progress`` with F after every sweep or iteration, no
certificate (non-convex).  ``convex = False``: every search fit starts cold.

Search space (s = mean_t ||X_t||_F^2 / d, the average diagonal of X_t^T X_t: a ratio 1
weighs a penalty like one more observation per task): lam1 = lam1_ratio s, lam2 = lam2_ratio s
(the paper's lambda_1, lambda_2), both Log with start range [0.3, 30] and no bound (every
positive weight is another model; lam1 -> inf tends to one shared mean column for P,
lam2 -> inf to rank Q <= k, limits never reached); k (the paper's k) Int, start range [2, 10],
bounds [1, min(d, T)]: k = 0 is no co-clustering and at k = min(d, T) Omega2 is identically 0,
so every larger k is the same model.  The ranges were set on the training and validation
splits of repetitions 0 and 1 of ``simulated[seed=101]`` over lam in {0.01, ..., 100} x k in
{2, 5, 10}: validation AUC peaked at k = 5 (0.914; k = 2: 0.886, k = 10: 0.889) on a ridge
lam1_ratio >= 1 with lam2_ratio in [1, 100]; ratios <= 0.1 were worse (<= 0.85) and up to 10x
slower.  So both ratio ranges bracket the ridge by a decade on each side, and k's range is the
sweep whose interior held the optimum.

Unverified (the AAAI paper's text was not available here): its equation numbers; Omega2
agrees with the TFCL paper's description ("minimizing the truncated sum-of-squares of the
singular values of the task matrix"); the exact form of Omega1 (the mean-regularised Frobenius
term) is a reconstruction; the paper's search grid is unknown.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mtlbench import Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl, report_progress

from ._core.datafits import SquaredLoss
from ._core.representations import task_eigenrows
# The co-cluster and mean-regularisation terms are the layer's penalties (shared with TFCL-Coc).
from ._core.penalties import (cocluster_penalty, mean_reg_penalty, prox_cocluster,
                              prox_cocluster_with_value, prox_mean_reg, top_k_truncation)
from ._core.solvers import lbfgs

__all__ = ["prox_cocluster", "cocluster_penalty", "prox_mean_reg", "mean_reg_penalty",
           "CoCMTL", "stationarity_residual", "ReducedCoCluster"]

DOWN = 0.8
PATIENCE = 10
#: L-BFGS iterations between two evaluations of the stopping rule (each costs a pass over the
#: data and a top-k eigen-decomposition).
CHECK_EVERY = 25


def feature_scale(tasks: TaskSet) -> float:
    """s = mean_t ||X_t||_F^2 / d: the unit of the quadratic penalties' weights."""
    return float(np.mean([np.sum(tasks.X(t) ** 2) for t in range(tasks.T)]) / tasks.d)


def stationarity_residual(GJ: np.ndarray, P: np.ndarray, Q: np.ndarray, lam1: float,
                          lam2: float, k: int, Q_k: np.ndarray | None = None) -> float:
    """||(grad_P F, grad_Q F)||_F at (P, Q), given GJ = grad J(P + Q):

        grad_P F = GJ + 2 lam1 P (I - 11^T/T),   grad_Q F = GJ + 2 lam2 (Q - Q_k),

    Q_k the best rank-k approximation of Q (grad Omega2(Q) = 2 (Q - Q_k) where
    sigma_k(Q) > sigma_{k+1}(Q); at a tie it is an element of Omega2's Clarke subdifferential,
    Omega2 = ||.||_F^2 minus the convex squared Ky Fan k-norm).  Zero iff (P, Q) is a critical
    point of F.  ``Q_k``: the truncation, if already computed."""
    gP = GJ + 2.0 * lam1 * (P - P.mean(axis=1, keepdims=True))
    gQ = GJ + 2.0 * lam2 * (Q - (top_k_truncation(Q, k) if Q_k is None else Q_k))
    return float(np.sqrt(np.sum(gP * gP) + np.sum(gQ * gQ)))


class _PALMBlocks:
    """The block steps of :func:`palm_sweeps`: for each block its step constant c_b (last
    accepted), the sweeps it is kept after a failed decrease, and the count of data passes."""

    def __init__(self, quad, lam1: float, lam2: float, k: int, gamma: float,
                 backtrack: bool) -> None:
        self.quad, self.lam1, self.lam2, self.k, self.gamma = quad, lam1, lam2, k, gamma
        self.c_max = gamma * max(quad.lipschitz, 1e-12)
        self.down = DOWN if backtrack else 1.0
        self.steps = {"P": self.c_max, "Q": self.c_max}
        self.wait = {"P": 0, "Q": 0}
        self.passes = 2
        self.prox = {"P": lambda V, cb: (prox_mean_reg(V, lam1 / cb), None),
                     "Q": lambda V, cb: prox_cocluster_with_value(V, lam2 / cb, k)}

    def block(self, Y, AY, A_other, G, J_Y, name):
        """Prox-linear step of one block with the step constant c_b = gamma * L_b: L_b
        starts at DOWN * (last accepted) and doubles until the descent-lemma test
        J(new) <= J(Y) + <G, D> + L_b/2 ||D||^2 holds (always true at L_b = Lip(grad J),
        where c_b = c_max is accepted as in plain PALM).  After a failed decrease the
        block keeps its constant for ``PATIENCE`` sweeps (a failed trial costs a pass)."""
        quad, c_max, prox = self.quad, self.c_max, self.prox[name]
        cb = self.steps[name]
        if self.wait[name] > 0:
            self.wait[name] -= 1
        else:
            cb = max(cb * self.down, 1e-12 * c_max)
        first = True
        while True:
            Xn, pen = prox(Y - G / cb, cb)
            An = quad.forward(Xn)
            self.passes += 1
            Jn = quad.value_of(An + A_other)
            D = Xn - Y
            if cb >= c_max or Jn <= J_Y + float(np.vdot(G, D)) + 0.5 * cb / self.gamma * \
                    float(np.vdot(D, D)):
                self.steps[name] = cb
                return Xn, An, Jn, pen
            if first:
                self.wait[name] = PATIENCE
                first = False
            cb = min(2.0 * cb, c_max)

    def sweep(self, YP, YQ, AYP, AYQ):
        """One PALM sweep (P block, then Q block with the new P) from (YP, YQ); also returns
        PALM's guaranteed decrease (c_P ||P_n - YP||^2 + c_Q ||Q_n - YQ||^2) (1 - 1/gamma)/2
        below F(YP, YQ)."""
        quad, steps = self.quad, self.steps
        A = AYP + AYQ
        Pn, APn, J1, _ = self.block(YP, AYP, AYQ, quad.grad_of(A), quad.value_of(A), "P")
        G = quad.grad_of(APn + AYQ)
        Qn, AQn, Jn, omega2 = self.block(YQ, AYQ, APn, G, J1, "Q")
        Fn = Jn + self.lam1 * mean_reg_penalty(Pn) + self.lam2 * omega2
        decrease = 0.5 * (1.0 - 1.0 / self.gamma) * (
            steps["P"] * float(np.sum((Pn - YP) ** 2)) + steps["Q"] * float(np.sum((Qn - YQ) ** 2)))
        return Pn, Qn, APn, AQn, Fn, decrease


def palm_sweeps(quad, P: np.ndarray, Q: np.ndarray, lam1: float,
                lam2: float, k: int, n_sweeps: int, gamma: float = 1.1, accelerate: bool = True,
                backtrack: bool = True, stop=None, check_every: int = 1, on_sweep=None,
                stats: dict | None = None):
    """Up to ``n_sweeps`` PALM sweeps (the paper's algorithm, see the module docstring) from
    (P, Q).  After each sweep ``on_sweep(F)`` is called, and after every ``check_every``-th
    ``stop(P, Q, grad J(P + Q))``; the loop ends when it returns True.  Returns (P, Q, objective
    after each sweep, sweeps, stopped).
    ``stats`` accumulates ``data_passes``, ``restarts`` and the final ``step_ratio``."""
    stats = {} if stats is None else stats
    blocks = _PALMBlocks(quad, lam1, lam2, k, gamma, backtrack)
    palm_step = blocks.sweep
    AP, AQ = quad.forward(P), quad.forward(Q)
    F = quad.value_of(AP + AQ) + lam1 * mean_reg_penalty(P) + lam2 * cocluster_penalty(Q, k)
    hist = []
    P_old, Q_old, AP_old, AQ_old = P, Q, AP, AQ
    t_k = 1.0
    n, stopped = 0, False
    for n in range(1, n_sweeps + 1):
        t_next = (1.0 + np.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0
        beta = (t_k - 1.0) / t_next if accelerate else 0.0
        if beta > 0.0:
            out = palm_step(P + beta * (P - P_old), Q + beta * (Q - Q_old),
                            quad.combine(AP, AP_old, beta), quad.combine(AQ, AQ_old, beta))
            # sufficient decrease below F at the current point, by PALM's own margin measured
            # from the extrapolated point (Li & Lin 2015, monotone APG); otherwise the plain
            # PALM sweep from (P, Q) and the momentum restarts
            if out[4] > F - out[5]:
                stats["restarts"] = stats.get("restarts", 0) + 1
                t_next = 1.0
                out = palm_step(P, Q, AP, AQ)
        else:
            out = palm_step(P, Q, AP, AQ)
        Pn, Qn, APn, AQn, Fn, _ = out
        P_old, Q_old, AP_old, AQ_old = P, Q, AP, AQ
        P, Q, AP, AQ, t_k, F = Pn, Qn, APn, AQn, t_next, Fn
        hist.append(float(F))
        if on_sweep is not None:
            on_sweep(float(F))
        if stop is not None and (n % check_every == 0 or n == n_sweeps) \
                and stop(P, Q, quad.grad_of(AP + AQ)):
            stopped = True
            break
    stats["data_passes"] = stats.get("data_passes", 0) + blocks.passes
    stats["step_ratio"] = {b: blocks.steps[b] / blocks.c_max for b in blocks.steps}
    return P, Q, hist, n, stopped


class ReducedCoCluster:
    """CoCMTL's objective minimised in closed form over everything but a rank-(k + 1) matrix.

    With Omega1(P) = min_c sum_t ||p_t - c||^2 and Omega2(Q) = min_{rank L <= k} ||Q - L||_F^2
    (Eckart-Young), and min over p_t + q_t = w_t of lam1 ||p_t - c||^2 + lam2 ||q_t - l_t||^2
    = mu ||w_t - c - l_t||^2 with mu = lam1 lam2 / (lam1 + lam2),

        min_{P, Q} F(P, Q) = min_{c, rank L <= k}  Phi(c 1^T + L),
        Phi(M) = sum_t phi_t(m_t),   phi_t(v) = min_w 1/2 ||y_t - X_t w||^2 + mu ||w - v||^2.

    phi_t is the per-task ridge problem pulled towards v; in the eigenbasis of the task's Gram
    matrix (``task_eigenrows``: rows R_t with R_t R_t^T = diag(e_t), targets z_t, constant
    c_t) it is diagonal: phi_t(v) = 1/2 ||sqrt(omega_t) (z_t - R_t v)||^2 + c_t / 2,
    omega_t = 2 mu / (e_t + 2 mu) in (0, 1] -- a squared loss on reweighted rows, whose
    curvature is at most 2 mu whatever the data's scale.  The minimising w_t is
    v + R_t^T ((z_t - R_t v) / (e_t + 2 mu)), and grad J(W) there is -2 mu (w_t - v).

    Phi is minimised over the factors x = (c, U, B), M = c 1^T + U B^T (U: d x k, B: T x k),
    by preconditioned L-BFGS (``_core.solvers.lbfgs``).  Preconditioner (the blocks of Phi's Hessian
    in the factors, cross terms dropped): c: (sum_t R^_t^T R^_t)^{-1} (exact, R^_t the
    reweighted rows); U: Hbar^{-1} G_U (B^T B)^{-1}, Hbar = the mean of R^_t^T R^_t (the
    scaled-gradient metric of Tong, Ma & Chi, JMLR 2021, with the data's curvature); B: for
    each task (U^T R^_t^T R^_t U)^{-1} (exact per task, refreshed at every check).

    :meth:`recover` maps M to the (P, Q) that attains Phi(M) in the formula above
    (c = the column mean of M, L = M - c 1^T):  P = c 1^T + lam2/(lam1 + lam2) D,
    Q = L + lam1/(lam1 + lam2) D, D the ridge corrections w_t - m_t; then
    F(P, Q) <= Phi(M) (Omega1 and Omega2 are minima over c and L)."""

    def __init__(self, tasks: TaskSet, lam1: float, lam2: float, k: int) -> None:
        E, R, z, c = task_eigenrows(tasks)
        self.T, self.d, self.k = tasks.T, tasks.d, int(k)
        self.lam1, self.lam2 = lam1, lam2
        self.mu = lam1 * lam2 / (lam1 + lam2)
        root = np.sqrt(2.0 * self.mu / (E + 2.0 * self.mu))
        self.Rt = np.ascontiguousarray(R.transpose(0, 2, 1))          # (T, d, m)
        self.Rwt = self.Rt * root[:, None, :]                          # reweighted rows
        self.z, self.zw = z, z * root
        self.inv = 1.0 / (E + 2.0 * self.mu)
        self.half_c = 0.5 * float(c.sum())
        flat = self.Rwt.transpose(1, 0, 2).reshape(self.d, -1)
        H = flat @ flat.T                                               # sum_t R^_t^T R^_t
        H[np.diag_indices_from(H)] += 1e-12 * max(float(np.trace(H)), 1e-300) / self.d
        self.H_inv = cho_solve(cho_factor(H), np.eye(self.d))
        self.block_B = self.BB_inv = None
        self._at = None

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d, k = self.d, self.k
        return x[:d], x[d:d + d * k].reshape(d, k), x[d + d * k:].reshape(self.T, k)

    def pack(self, c: np.ndarray, U: np.ndarray, B: np.ndarray) -> np.ndarray:
        return np.concatenate([c, U.ravel(), B.ravel()])

    def matrix(self, x: np.ndarray) -> np.ndarray:
        c, U, B = self.unpack(x)
        return c[:, None] + U @ B.T

    def value_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """Phi(c 1^T + U B^T) and its gradient in (c, U, B): one pass over the data."""
        c, U, B = self.unpack(x)
        M = c[:, None] + U @ B.T
        r = np.matmul(M.T[:, None, :], self.Rwt)[:, 0, :] - self.zw      # (T, m)
        G = np.matmul(self.Rwt, r[:, :, None])[:, :, 0].T                # grad Phi(M), (d, T)
        return (0.5 * float(np.sum(r * r)) + self.half_c,
                np.concatenate([G.sum(axis=1), (G @ B).ravel(), (G.T @ U).ravel()]))

    def refresh_preconditioner(self, x: np.ndarray) -> None:
        """The per-task B blocks (U^T R^_t^T R^_t U)^{-1} at x."""
        _, U, _ = self.unpack(x)
        RU = np.matmul(self.Rwt.transpose(0, 2, 1), U)                   # (T, m, k)
        K = np.matmul(RU.transpose(0, 2, 1), RU)
        ridge = 1e-12 * np.maximum(np.trace(K, axis1=1, axis2=2), 1e-300) / self.k
        K[:, np.arange(self.k), np.arange(self.k)] += ridge[:, None]
        self.block_B = np.linalg.inv(K)

    def precondition(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        if self._at is not x:            # (B^T B)^{-1}, once per iterate
            _, _, B = self.unpack(x)
            BB = B.T @ B
            BB.flat[::self.k + 1] += 1e-12 * max(float(np.trace(BB)), 1e-300) / self.k
            self.BB_inv, self._at = np.linalg.inv(BB), x
        gc, gU, gB = self.unpack(v)
        pU = (self.T * self.H_inv) @ (gU @ self.BB_inv)
        pB = np.matmul(self.block_B, gB[:, :, None])[:, :, 0]
        return self.pack(self.H_inv @ gc, pU, pB)

    def start(self, P: np.ndarray, Q: np.ndarray) -> np.ndarray:
        """Factors of M = mean(P) 1^T + Q_k (Q_k the best rank-k approximation of Q), split
        U = U_k S^(1/2), B = V_k S^(1/2): Phi(M) <= F(P, Q)."""
        d, T, k = self.d, self.T, self.k
        Uq, s, Vt = np.linalg.svd(Q, full_matrices=False)
        r = np.sqrt(s[:k])
        U = np.zeros((d, k))
        B = np.zeros((T, k))
        U[:, :r.size] = Uq[:, :k] * r
        B[:, :r.size] = Vt[:k].T * r
        return self.pack(P.mean(axis=1), U, B)

    def recover(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(P, Q, grad J(P + Q)) attaining Phi(M) at M = matrix(x) (class docstring)."""
        M = self.matrix(x)
        r = self.z - np.matmul(M.T[:, None, :], self.Rt)[:, 0, :]
        D = np.matmul(self.Rt, (r * self.inv)[:, :, None])[:, :, 0].T
        c = M.mean(axis=1, keepdims=True)
        a = self.lam2 / (self.lam1 + self.lam2)
        return c + a * D, (M - c) + (1.0 - a) * D, -2.0 * self.mu * D


class CoCMTL(LinearMTLModel):
    """Task-feature co-clusters MTL (decomposition W = P + Q).  See module docstring."""

    name = "cocmtl"
    cost_hint = 6.8  # s per unit on the reference problem (mtlbench.runner.cost)
    paper = ("Xu, Huang, Chen, Chen, Exploiting Task-Feature Co-Clusters in Multi-Task "
             "Learning, AAAI 2015")
    search_space = {"lam1_ratio": Log([0.3, 3.0, 30.0], low=None, high=None),
                    "lam2_ratio": Log([0.3, 3.0, 30.0], low=None, high=None),
                    "k": Int([2, 10], low=1, high="min(d, T)")}
    param_constraints = {"gamma": Log([1.1], low=None), "tol": Linear([1e-6], low=0.0),
                         "palm_sweeps": Int([50], low=1), "max_iter": Int([5000], low=1)}
    # Non-convex: the protocol's refit starts cold, so the search's fits start cold too (a warm
    # start could select a local solution the refit never reaches).  fit(init=...) still works.
    convex = False
    target_kinds = ("binary", "real")
    supports_warm_start = False

    def __init__(self, lam1_ratio: float = 3.0, lam2_ratio: float = 3.0, k: int = 5,
                 gamma: float = 1.1, tol: float = 1e-6, palm_sweeps: int = 50,
                 max_iter: int = 5000, accelerate: bool = True, backtrack: bool = True):
        self.lam1_ratio = lam1_ratio
        self.lam2_ratio = lam2_ratio
        self.k = k
        self.gamma = gamma
        self.tol = tol
        self.palm_sweeps = palm_sweeps
        self.max_iter = max_iter
        self.accelerate = accelerate
        self.backtrack = backtrack

    def _validate(self, tasks: TaskSet) -> None:
        self.check_params()
        if not self.gamma > 1:
            raise ValueError(f"cocmtl: gamma must be > 1 (PALM step condition), got {self.gamma}")

    def objective(self, loss, P: np.ndarray, Q: np.ndarray) -> float:
        """J(P + Q) + lam1 Omega1(P) + lam2 Omega2(Q) with the fitted lam1_, lam2_."""
        return (loss.value(P + Q) + self.lam1_ * mean_reg_penalty(P)
                + self.lam2_ * cocluster_penalty(Q, self.k))

    def objective_from_scratch(self, tasks: TaskSet) -> float:
        """The paper's objective at the fitted (P_, Q_), Omega2 from a LAPACK SVD."""
        s = np.linalg.svd(self.Q_, compute_uv=False)
        return (SquaredLoss(tasks).value(self.coef_) + self.lam1_ * mean_reg_penalty(self.P_)
                + self.lam2_ * float(np.sum(s[int(self.k):] ** 2)))

    def fit(self, tasks: TaskSet, init=None) -> "CoCMTL":
        self._validate(tasks)
        s = tasks.memo(("cocmtl_feature_scale",), lambda: feature_scale(tasks))
        self.lam1_ = lam1 = float(self.lam1_ratio) * s
        self.lam2_ = lam2 = float(self.lam2_ratio) * s
        k = int(self.k)
        quad = SquaredLoss(tasks, "padded")
        d, T = tasks.d, tasks.T
        P = np.zeros((d, T))
        Q = np.zeros((d, T))
        if init is not None and getattr(init, "P_", None) is not None \
                and init.P_.shape == P.shape:
            P, Q = init.P_.copy(), init.Q_.copy()
        tol, max_iter = float(self.tol), int(self.max_iter)
        scale = tol * max(quad.lipschitz, 1e-12)
        F0 = quad.value(P + Q) + lam1 * mean_reg_penalty(P) \
            + lam2 * cocluster_penalty(Q, k)
        hist = [float(F0)]
        stats: dict = {"restarts": 0}
        last = {"residual": np.inf}

        def record(value):
            hist.append(float(value))
            report_progress(len(hist) - 1, float(value))

        def certified(P, Q, GJ, Q_k=None):
            res = stationarity_residual(GJ, P, Q, lam1, lam2, k, Q_k)
            last["residual"] = res / max(quad.lipschitz, 1e-12) / max(
                1.0, float(np.sqrt(np.sum(P * P) + np.sum(Q * Q))))
            return res <= scale * max(1.0, float(np.sqrt(np.sum(P * P) + np.sum(Q * Q))))

        palm_kw = dict(gamma=float(self.gamma), accelerate=self.accelerate,
                       backtrack=self.backtrack, stop=certified, check_every=CHECK_EVERY,
                       on_sweep=record, stats=stats)
        budget = lambda: max_iter - (len(hist) - 1)
        # phase 1: the paper's PALM from (P, Q); its path selects the local solution
        P, Q, _, n_palm, done = palm_sweeps(quad, P, Q, lam1, lam2, k,
                                            min(int(self.palm_sweeps), max_iter), **palm_kw)
        n_lbfgs = n_evals = n_fallback = 0
        if not done and budget() > 1:
            # phase 2: the reduced problem by preconditioned L-BFGS, certified on F itself
            red = ReducedCoCluster(tasks, lam1, lam2, k)
            x0 = red.start(P, Q)
            if np.any(red.unpack(x0)[2]):    # (Q = 0: the factors have no descent direction)
                at = {}

                def check(x):
                    red.refresh_preconditioner(x)
                    Pc, Qc, GJ = red.recover(x)
                    at["PQ"] = Pc, Qc, top_k_truncation(Qc, k)
                    return certified(Pc, Qc, GJ, at["PQ"][2])

                red.refresh_preconditioner(x0)
                x, _, n_lbfgs, n_evals, done = lbfgs(
                    red.value_grad, x0, budget() - 1, check=check, check_every=CHECK_EVERY,
                    precondition=red.precondition, progress=lambda i, f: record(f))
                P, Q, Q_k = at["PQ"]        # (the cap also ends with a check)
                # the recovery lowers F below Phi(M): recorded as one more iteration (Omega2 as
                # ||Q - Q_k||^2, without the cancellation of ||Q||^2 - sum of the top k)
                record(quad.value(P + Q) + lam1 * mean_reg_penalty(P)
                       + lam2 * float(np.sum((Q - Q_k) ** 2)))
        if not done and budget() > 0:
            # phase 3 (fallback; no measured fit needed it): PALM, whose limit points are
            # critical, until the same certificate holds
            P, Q, _, n_fallback, done = palm_sweeps(quad, P, Q, lam1, lam2, k, budget(),
                                                    **palm_kw)
        self.P_, self.Q_ = P, Q
        self.coef_ = P + Q
        self.objective_history_ = hist
        self.n_iter_ = len(hist) - 1
        self.converged_ = bool(done)
        self.diagnostics_ = {"lam1": lam1, "lam2": lam2, "k": k, "palm_sweeps": n_palm,
                             "lbfgs_iter": n_lbfgs, "lbfgs_evals": n_evals,
                             "fallback_sweeps": n_fallback, "residual": last["residual"],
                             "data_passes": stats.get("data_passes", 0) + n_evals,
                             "step_ratio": stats.get("step_ratio"), "converged": bool(done),
                             "restarts": stats.get("restarts", 0)}
        return self


@hookimpl
def register_models(register):
    register(CoCMTL)
