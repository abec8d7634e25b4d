"""RAMUSA: multi-task learning with a capped trace norm.

L. Han and Y. Zhang, "Multi-Stage Multi-Task Learning with Reduced Rank", Proceedings of the
Thirtieth AAAI Conference on Artificial Intelligence (AAAI), 2016; a competitor of the TFCL
paper (Sec. Competitors: "a capped trace norm regularizer to minimize only the singular values
smaller than an adaptively tuned threshold")::

    min_W  F(W) = J(W) + lam sum_i min(sigma_i(W), theta),  J(W) = sum_t 1/2 ||y_t - X_t w_t||^2

J is the TFCL paper's instance-wise squared loss for every competitor (Sec. Experimental
Settings); RAMUSA's paper averages each task's loss over its n_t samples, which would only
reweigh tasks of different sizes.  The capped trace norm is ||W||_* - h(W), h(W) = sum_i
max(sigma_i(W) - theta, 0) convex: F is a difference of convex functions.

Solver, three phases, each a DC algorithm for F with the same fixed points (W with 0 in
grad J(W) + lam d||W||_* - lam dh(W)) and F never increasing:
1. stage 1 of the paper's multi-stage relaxation, plain trace-norm MTL (MALSAR
   ``Least_Trace``; :func:`stage_solve`): accelerated proximal gradient, prox = singular value
   thresholding (from the eigen-decomposition of the smaller Gram matrix), with the
   backtracking of Scheinberg, Goldfarb & Bai (FoCM 2014): L adaptive, never above
   Lip(grad J) = max_t ||X_t||_2^2, the momentum recomputed for every trial L, restart on
   increase.  theta is defined from its solution W^(1) (below).  A cold stage 1 depends on
   the data, lam, tol and max_iter only: the fits of one search sharing lam reuse it.
2. a factored phase (:func:`factored_dc_solve`): at the rank r of W, W = A B^T with balanced
   factors, Phi(A, B) = J(A B^T) + lam/2 (||A||^2 + ||B||^2) - lam h(A B^T) >= F(A B^T) with
   equality at balanced factors, minimised by preconditioned L-BFGS (Armijo); every 25
   iterations one pDCA step from A B^T tests the DC rule below (met: returned; rank above r:
   a new round from it), at most 10 rounds.
3. if the rule is not met yet, the proximal DC algorithm with extrapolation (:func:`pdca_solve`;
   Wen, Chen & Pong, Comput. Optim. Appl. 2018): the linearisation of h refreshed at every
   accelerated proximal-gradient step, for the remaining budget; every limit point is
   DC-critical (their Thm. 4.1).

Stopping rules: stage 1 (convex) stops when its optimality residual, an element E of the stage
objective's subdifferential from prox optimality, has ||E||_F <= tol Lip(grad J) max(1,
||W||_F), tol = 1e-6; the DC phases when a DC-criticality residual R (an element of
grad J(W) + lam d||W||_* - lam dh(W)) satisfies the same bound.  ``max_iter`` (2000) caps the
APG iterations of each; ``converged_`` is True iff stage 1 and the DC phases met their rule (a
fit with no singular value of W^(1) above theta returns W^(1), then DC-critical).
``report_progress(i, F)`` after every iteration, with J + lam ||W||_* during stage 1 (theta is
not defined yet); no certificate (non-convex).  ``convex = False``: a search fits every point
cold; ``init`` starts stage 1 (convex) only.

Search space (scale-free): lam = lam_ratio ||grad J(0)||_2 (spectral norm: the smallest lam
for which W = 0 solves stage 1; the paper's lambda) and theta = theta_ratio sigma_1(W^(1))
(the paper's theta), both Log with bounds (0, 1].  lam_ratio = 1 gives W = 0; at
theta_ratio = 1 no singular value of W^(1) exceeds theta, so the fit is the trace-norm
solution W^(1), and every larger value is the same model.  Start ranges lam_ratio [0.1, 0.4],
theta_ratio [0.25, 1.0], set on the training and validation splits of repetitions 0 and 1 of
``simulated[seed=101]``: validation AUC peaked at (0.2, 0.6) (0.909), interior in lam_ratio;
lam_ratio <= 0.03 was worse (<= 0.83) and slow, theta_ratio <= 0.1 worse and slow.

Unverified (the AAAI paper's text was not available here): its equation numbers; the capped
trace norm, the DC linearisation at the singular vectors above theta and the trace-norm first
stage follow the TFCL paper's description; "adaptively tuned threshold" is read as theta
chosen by validation; the paper's own grids are unknown.
"""
from __future__ import annotations

import numpy as np

from mtlbench import Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl, report_progress

from ._core.datafits import SquaredLoss
from ._core.representations import padded_task_rows_t, task_xty
from ._core.penalties import prox_trace
from ._core.solvers import lbfgs

DOWN = 0.8
PATIENCE = 10


def capped_penalty(s: np.ndarray, theta: float) -> float:
    return float(np.minimum(s, theta).sum())


def trace_lambda_max(loss) -> float:
    """||grad J(0)||_2: W = 0 solves min J + lam ||W||_* iff lam >= this."""
    G0 = loss.grad(np.zeros((loss.d, loss.T)))
    return float(np.linalg.norm(G0, 2))


class _StageSteps:
    """The steps of :func:`stage_solve` on min J(W) - lam <M, W> + lam ||W||_*: the trial step
    of one step constant (singular value thresholding with the eigenpair subset when the last
    accepted step kept few singular values), the plain proximal-gradient step with doubling,
    and FISTA-BKTR's accelerated trials; ``wait`` counts the iterations a failed decrease keeps
    L fixed."""

    def __init__(self, loss, lam: float, M: np.ndarray | None, shape: tuple,
                 stats: dict | None) -> None:
        self.R, self.lam, self.M, self.stats = loss, lam, M, stats
        self.lin = (lambda W: 0.0) if M is None else (lambda W: -lam * float(np.sum(M * W)))
        self.L_max = max(loss.lipschitz, 1e-12)
        # the eigenpair subset pays off when few singular values exceed the threshold: judged
        # from the last accepted step's count (the first step computes all of them)
        self.few_max = min(shape) // 8
        self.rank = min(shape)
        self.wait = 0

    def grad_of(self, A):
        G = self.R.grad_of(A)
        return G if self.M is None else G - self.lam * self.M

    def trial(self, Y, G, fY, L):
        """The step from Y with constant L and whether it passes the descent-lemma test."""
        Xn, s = prox_trace(Y - G / L, self.lam / L, few=self.rank <= self.few_max)
        D = Xn - Y
        An = self.R.forward(Xn)
        if self.stats is not None:
            self.stats["data_passes"] = self.stats.get("data_passes", 0) + 1
        fn = self.R.value_of(An) + self.lin(Xn)
        quad = fY + float(np.vdot(G, D)) + 0.5 * L * float(np.vdot(D, D))
        # (no rounding slack below Lip(grad J): a slack let L drift down and the iterates
        # wander at the stopping scale)
        ok = L >= self.L_max or fn <= quad
        if ok:
            self.rank = int(np.count_nonzero(s))
        return Xn, s, An, fn, ok

    def prox_step(self, Y, AY, L):
        """Prox-gradient step from Y with constant L; doubles L until the descent lemma holds."""
        fY = self.R.value_of(AY) + self.lin(Y)
        G = self.grad_of(AY)
        while True:
            Xn, s, An, fn, ok = self.trial(Y, G, fY, L)
            if ok:
                return Xn, s, An, fn, L, G
            self.wait = PATIENCE           # a failed decrease: keep L for PATIENCE iterations
            L = min(2.0 * L, self.L_max)

    def accelerated(self, W, W_prev, A, A_prev, L, L_acc, t_k):
        """FISTA-BKTR: the momentum and Y depend on the trial L (recomputed after each failed
        trial).  Returns (Y, grad at Y, W+, its singular values, state, value, L, t_next)."""
        while True:
            t_next = (1.0 + np.sqrt(1.0 + 4.0 * (L / L_acc) * t_k * t_k)) / 2.0
            beta = (t_k - 1.0) / t_next
            Y = W + beta * (W - W_prev) if beta > 0 else W
            AY = self.R.combine(A, A_prev, beta) if beta > 0 else A
            fY = self.R.value_of(AY) + self.lin(Y)
            GY = self.grad_of(AY)
            Wn, s, An, fn, ok = self.trial(Y, GY, fY, L)
            if ok:
                return Y, GY, Wn, s, An, fn, L, t_next
            self.wait = PATIENCE
            L = min(2.0 * L, self.L_max)


def stage_solve(loss, lam: float, M: np.ndarray | None, W0: np.ndarray,
                tol: float = 1e-6, max_iter: int = 2000, theta: float | None = None,
                down: float = DOWN, stats: dict | None = None, sv0: np.ndarray | None = None,
                progress=None):
    """APG for one stage: argmin_W J(W) - lam <M, W> + lam ||W||_*  (M = None: no linear term).

    ``loss``: a least-squares datafit with the state interface (``_core.datafits``).
    FISTA with the backtracking of Scheinberg, Goldfarb & Bai (2014, FISTA-BKTR): each
    iteration tries L = ``down`` x the last accepted L (never above Lip(grad J)), and for every
    trial L the momentum t_k = (1 + sqrt(1 + 4 (L/L_prev) t_{k-1}^2))/2 and the extrapolated
    point are recomputed, so the O(1/k^2) bound
    F(W_k) - F* <= 2 L_max ||W0 - W*||^2 / (sum_i sqrt(L_max / L_i))^2 of that paper holds with a
    step constant that may shrink.  Restart on increase: if the step from the extrapolated
    point increases the stage objective, the momentum is reset and a proximal-gradient step
    from the last iterate is taken (it never increases F by the descent lemma), so the stage
    objective is non-increasing; the rate bound holds on each restart-free segment.
    Stopping rule (an optimality residual, not the iterate change): the step from Y with
    constant L gives the subgradient E = grad(W_k) - grad(Y) + L (Y - W_k) in dF_stage(W_k); stop
    when ||E||_F <= tol * Lip(grad J) * max(1, ||W_k||_F), i.e. dist(0, dF_stage(W_k)) is at most
    that.  Returns (W, stage objective history, capped objective history (if theta given),
    iterations, converged) -- ``converged`` is False only when ``max_iter`` was reached.
    ``progress(F)``: called once per iteration with the stage objective (see ``fit``).
    """
    st = _StageSteps(loss, lam, M, W0.shape, stats)
    R, lin = loss, st.lin
    W = W0.copy()
    A = R.forward(W)
    s_W = np.linalg.svd(W, compute_uv=False) if sv0 is None else sv0   # sv0: W0's, if known
    J = R.value_of(A)
    F = J + lin(W) + lam * s_W.sum()
    hist = [float(F)]
    capped = [] if theta is None else [J + lam * capped_penalty(s_W, theta)]
    L_max = st.L_max
    L = L_acc = L_max                   # trial / last accepted step constant
    W_prev, A_prev = W, A
    t_k = 1.0
    it = 0
    converged = False
    for it in range(1, max_iter + 1):
        if st.wait > 0:
            st.wait -= 1
        else:
            L = max(L * down, 1e-12 * L_max)
        Y, GY, Wn, s, An, fn, L, t_next = st.accelerated(W, W_prev, A, A_prev, L, L_acc, t_k)
        Fn = fn + lam * s.sum()
        if Fn > F:  # restart from the last accepted point
            t_next = 1.0
            Y = W
            Wn, s, An, fn, L, GY = st.prox_step(W, A, L)
            Fn = fn + lam * s.sum()
            if Fn > F:  # no progress possible at machine precision: W is optimal to rounding
                if progress is not None:
                    progress(capped[-1] if theta is not None else float(F))
                converged = True
                break
        L_acc = L
        # an element of the stage objective's subdifferential at Wn (prox optimality at Y)
        E = st.grad_of(An) - GY + L * (Y - Wn)
        W_prev, A_prev = W, A
        W, A, F, t_k = Wn, An, Fn, t_next
        hist.append(float(F))
        if theta is not None:
            capped.append(float(fn - lin(Wn) + lam * capped_penalty(s, theta)))
        if progress is not None:
            progress(capped[-1] if theta is not None else float(F))
        if np.linalg.norm(E) <= tol * L_max * max(1.0, np.linalg.norm(W)):
            converged = True
            break
    return W, hist, capped, it, converged


RESTART_EVERY = 200


def _pdca_trials(R, lam, theta, M, W, W_prev, A, A_prev, F, t_k, L, L_acc, L_max, few,
                 stats):
    """The trials of one pDCAe iteration: the extrapolated step (FISTA-BKTR momentum at the
    trial L), the step constant doubled until the descent-lemma test holds; if the accepted
    extrapolated step increases F, the plain pDCA step from W_k instead.  Returns
    (Y, G, W+, its singular values, U1 V1^T of W+, state, F(W+), t_next, momentum kept, L,
    whether a trial failed)."""
    momentum, failed = True, False
    while True:
        if momentum:
            t_next = (1.0 + np.sqrt(1.0 + 4.0 * (L / L_acc) * t_k * t_k)) / 2.0
            beta = (t_k - 1.0) / t_next
        else:
            t_next, beta = 1.0, 0.0
        Y = W + beta * (W - W_prev) if beta > 0 else W
        AY = R.combine(A, A_prev, beta) if beta > 0 else A
        GJ = R.grad_of(AY)
        G = GJ - lam * M
        fY = R.value_of(AY)
        Wn, sn, Mn = prox_trace(Y - G / L, lam / L, few=few, above=theta)
        D = Wn - Y
        An = R.forward(Wn)
        if stats is not None:
            stats["data_passes"] = stats.get("data_passes", 0) + 1
        Jn = R.value_of(An)
        if L >= L_max or Jn <= fY + float(np.vdot(GJ, D)) + 0.5 * L * float(np.vdot(D, D)):
            Fn = Jn + lam * capped_penalty(sn, theta)
            if Fn <= F or not momentum:
                return Y, G, Wn, sn, Mn, An, Fn, t_next, momentum, L, failed
            momentum = False           # restart: the plain pDCA step from W_k
            continue
        failed = True                  # a failed decrease: keep L for PATIENCE iterations
        L = min(2.0 * L, L_max)


def pdca_solve(loss, lam: float, theta: float, W0: np.ndarray, tol: float = 1e-6,
               max_iter: int = 2000, down: float = DOWN, stats: dict | None = None,
               progress=None, svd0: tuple | None = None):
    """Proximal DC algorithm with extrapolation (pDCAe; Wen, Chen & Pong, Comput. Optim. Appl.
    2018) for the capped problem F(W) = J(W) + lam ||W||_* - lam h(W),
    h(W) = sum_i max(sigma_i(W) - theta, 0), started at ``W0``.

    Each iteration linearises h at the current iterate W_k (subgradient lam U1 V1^T, U1, V1 the
    singular vectors of W_k with sigma > theta) and takes one accelerated proximal-gradient
    step on the convex stage objective of that linearisation -- the multi-stage relaxation
    with the linear term refreshed at every step instead of once per solved stage:

        W_{k+1} = SVT(Y_k - (grad J(Y_k) - lam U1 V1^T) / L, lam / L),
        Y_k = W_k + beta_k (W_k - W_{k-1}).

    Step constant and momentum as in :func:`stage_solve` (Scheinberg-Goldfarb-Bai
    backtracking, L <= Lip(grad J)); the momentum is reset every ``RESTART_EVERY`` iterations
    (pDCAe's fixed restart, so sup beta_k < 1) and whenever the extrapolated step would
    increase F, in which case the plain pDCA step from W_k is taken: it does not increase F
    (descent lemma on J, convexity of h).  So F is non-increasing, and every limit point is a
    critical point of the DC decomposition (Wen, Chen & Pong 2018, Thm. 4.1).
    Stopping rule (DC-criticality residual): with E = grad(W_{k+1}) - grad(Y_k) + L (Y_k -
    W_{k+1}) (prox optimality), R = E + lam (U1V1^T(W_k) - U1V1^T(W_{k+1})) is an element of
    grad J(W_{k+1}) + lam d||W_{k+1}||_* - lam dh(W_{k+1}); stop when ||R||_F <= tol *
    Lip(grad J) * max(1, ||W_{k+1}||_F).  Returns (W, F history, iterations, converged).
    ``svd0`` = (U, s, Vt), a thin SVD of ``W0`` if known (s descending; columns with s = 0 may
    be left out).
    """
    R = loss
    L_max = max(R.lipschitz, 1e-12)
    W = W0.copy()
    A = R.forward(W)
    U, sv, Vt = np.linalg.svd(W, full_matrices=False) if svd0 is None else svd0
    big = sv > theta
    M = U[:, big] @ Vt[big]
    F = R.value_of(A) + lam * capped_penalty(sv, theta)
    hist = [float(F)]
    few_max = min(W0.shape) // 8
    rank = int(np.count_nonzero(sv > 1e-12 * max(sv[0] if sv.size else 0.0, 1e-300)))
    wait = 0
    L = L_acc = L_max
    W_prev, A_prev = W, A
    t_k, since_restart = 1.0, 0
    it, converged = 0, False
    for it in range(1, max_iter + 1):
        if wait > 0:
            wait -= 1
        else:
            L = max(L * down, 1e-12 * L_max)
        if since_restart >= RESTART_EVERY:
            t_k, since_restart = 1.0, 0
        Y, G, Wn, sn, Mn, An, Fn, t_next, momentum, L, failed = _pdca_trials(
            R, lam, theta, M, W, W_prev, A, A_prev, F, t_k, L, L_acc, L_max,
            rank <= few_max, stats)
        if failed:
            wait = PATIENCE
        if Fn > F:        # the plain step cannot decrease F at machine precision: W is critical
            if progress is not None:
                progress(float(F))
            converged = True
            break
        rank = int(np.count_nonzero(sn))
        if stats is not None:
            stats["rank"] = rank
        residual = (R.grad_of(An) - lam * M) - G + L * (Y - Wn) + lam * (M - Mn)
        W_prev, A_prev = W, A
        W, A, F, M, L_acc = Wn, An, Fn, Mn, L
        t_k = t_next
        since_restart = since_restart + 1 if momentum else 0
        hist.append(float(F))
        if progress is not None:
            progress(float(F))
        if np.linalg.norm(residual) <= tol * L_max * max(1.0, np.linalg.norm(W)):
            converged = True
            break
    return W, hist, it, converged


def factor_svd(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thin SVD (U, s, Vt) of A B^T from QR factorisations of the factors (r x r SVD only)."""
    Qa, Ra = np.linalg.qr(A)
    Qb, Rb = np.linalg.qr(B)
    u, s, vt = np.linalg.svd(Ra @ Rb.T)
    return Qa @ u, s, (Qb @ vt.T).T


def mean_gram_eig(tasks: TaskSet) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition (values, vectors) of Hbar = mean_t X_t^T X_t, cached on ``tasks``."""
    def compute():
        X3t = padded_task_rows_t(tasks)
        flat = X3t.transpose(1, 0, 2).reshape(tasks.d, -1)
        eta, V = np.linalg.eigh(flat @ flat.T / max(tasks.T, 1))
        return np.maximum(eta, 0.0), V
    return tasks.memo(("ramusa_mean_gram_eig",), compute)


class FactoredCapped:
    """The capped objective in factors W = A B^T (A: d x r, B: T x r), the Burer-Monteiro form:

        Phi(A, B) = J(A B^T) + lam/2 (||A||_F^2 + ||B||_F^2) - lam h(A B^T),
        h(W) = sum_i max(sigma_i(W) - theta, 0),

    so that Phi(A, B) >= F(A B^T) for every (A, B) (||W||_* = min over W = A B^T of
    (||A||^2 + ||B||^2)/2, Srebro, Rennie & Jaakkola 2005), with equality at balanced factors
    A = U S^(1/2), B = V S^(1/2).  Phi is smooth where no singular value of A B^T equals theta
    (a concave kink there), with gradient (G B + lam A, G^T A + lam B), G = grad J(A B^T) -
    lam U1 V1^T.  Preconditioner for L-BFGS (the blocks of the Hessian without the cross and
    concave terms): A: (B^T B kron Hbar + lam I)^{-1}, Hbar = mean_t X_t^T X_t (applied in the
    eigenbases of both factors); B: per task (A^T X_t^T X_t A + lam I)^{-1}, refreshed by
    :meth:`refresh`."""

    def __init__(self, tasks: TaskSet, quad, lam: float, theta: float, r: int) -> None:
        self.quad, self.lam, self.theta = quad, lam, theta
        self.d, self.T, self.r = tasks.d, tasks.T, r
        self.X3t = padded_task_rows_t(tasks)
        self.eta, self.Vh = mean_gram_eig(tasks)
        self.block_B = None
        self._at = None

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.d * self.r
        return x[:n].reshape(self.d, self.r), x[n:].reshape(self.T, self.r)

    def value_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        A, B = self.unpack(x)
        S = self.quad.forward(A @ B.T)
        U, s, Vt = factor_svd(A, B)
        big = s > self.theta
        G = self.quad.grad_of(S) - self.lam * (U[:, big] @ Vt[big])
        f = self.quad.value_of(S) + 0.5 * self.lam * float(x @ x) \
            - self.lam * float(np.sum(s[big] - self.theta))
        return f, np.concatenate([(G @ B + self.lam * A).ravel(),
                                  (G.T @ A + self.lam * B).ravel()])

    def refresh(self, x: np.ndarray) -> None:
        """The per-task B blocks (A^T X_t^T X_t A + lam I)^{-1} at x."""
        A, _ = self.unpack(x)
        XA = np.matmul(self.X3t.transpose(0, 2, 1), A)                  # (T, n, r)
        K = np.matmul(XA.transpose(0, 2, 1), XA)
        K[:, np.arange(self.r), np.arange(self.r)] += self.lam
        self.block_B = np.linalg.inv(K)

    def precondition(self, x: np.ndarray, v: np.ndarray) -> np.ndarray:
        if self._at is not x:             # eigen-decomposition of B^T B, once per iterate
            _, B = self.unpack(x)
            beta, Vb = np.linalg.eigh(B.T @ B)
            self._scale = 1.0 / (np.outer(self.eta, np.maximum(beta, 0.0)) + self.lam)
            self._Vb, self._at = Vb, x
        gA, gB = self.unpack(v)
        pA = self.Vh @ (((self.Vh.T @ gA) @ self._Vb) * self._scale) @ self._Vb.T
        pB = np.matmul(self.block_B, gB[:, :, None])[:, :, 0]
        return np.concatenate([pA.ravel(), pB.ravel()])


#: L-BFGS iterations between two verifications (a pDCA step from the current A B^T).
CHECK_EVERY = 25
#: Rounds of the factored phase (each from the last verified pDCA point, at its rank) before
#: the remaining budget goes to pDCAe.
FACTORED_ROUNDS = 10


def factored_dc_solve(tasks: TaskSet, quad, lam: float, theta: float, W0: np.ndarray,
                      tol: float = 1e-6, max_iter: int = 2000, progress=None):
    """The capped problem from W0 (the stage-1 solution) in factored form, certified in the full
    space; returns (W, F history, iterations, converged, rounds).

    Round: factors A = U S^(1/2), B = V S^(1/2) of the current W at its rank r (so Phi = F(W)),
    preconditioned L-BFGS on :class:`FactoredCapped`'s Phi, and every ``CHECK_EVERY``
    iterations one pDCA step (:func:`pdca_solve` with ``max_iter=1``) from A B^T: if its
    DC-criticality residual meets the rule (``tol``), the step's result is returned
    (converged); if the step's result has rank above r (the factors are too narrow) the round
    ends and the next starts from it.  F never increases: L-BFGS decreases Phi >= F(A B^T), a
    pDCA step does not increase F, and a new round starts at Phi = F.  After
    ``FACTORED_ROUNDS`` rounds, or when L-BFGS cannot decrease Phi, :func:`pdca_solve`
    (pDCAe, whose limit points are DC-critical) continues with the remaining budget."""
    d, T = W0.shape
    U, s, Vt = np.linalg.svd(W0, full_matrices=False)
    hist = [float(quad.value(W0) + lam * capped_penalty(s, theta))]
    used, W, converged = 0, W0, False
    count = [0]

    def tick(value):
        count[0] += 1
        hist.append(float(value))
        if progress is not None:
            progress(value)

    rounds = 0
    for rounds in range(1, FACTORED_ROUNDS + 1):
        r = int(np.count_nonzero(s > 1e-12 * max(float(s[0]) if s.size else 0.0, 1e-300)))
        if r == 0 or used >= max_iter:
            break
        root = np.sqrt(s[:r])
        fac = FactoredCapped(tasks, quad, lam, theta, r)
        x0 = np.concatenate([(U[:, :r] * root).ravel(), (Vt[:r].T * root).ravel()])
        out = {}

        def check(x):
            fac.refresh(x)
            A, B = fac.unpack(x)
            step = {"rank": r}
            Wn, h, _, ok = pdca_solve(quad, lam, theta, A @ B.T, tol=tol, max_iter=1,
                                      stats=step, svd0=factor_svd(A, B))
            out["W"], out["F"], out["ok"] = Wn, h[-1], ok
            return ok or step["rank"] > r

        fac.refresh(x0)
        x, _, it, _, stopped = lbfgs(fac.value_grad, x0, max_iter - used - 1, check=check,
                                     check_every=CHECK_EVERY, precondition=fac.precondition,
                                     progress=lambda i, f: tick(f))
        used += it + 1
        W = out["W"]
        tick(out["F"])                  # the verifying pDCA step
        if out["ok"]:
            converged = True
            break
        U, s, Vt = np.linalg.svd(W, full_matrices=False)
        if not stopped:                 # L-BFGS stalled or hit the cap: pDCAe takes over
            break
    if not converged and used < max_iter:
        W, h, it, converged = pdca_solve(quad, lam, theta, W, tol=tol, max_iter=max_iter - used,
                                         progress=lambda f: tick(f))
        used += it
    return W, hist, used, converged, rounds


class RAMUSA(LinearMTLModel):
    """Capped-trace-norm MTL: trace-norm stage 1, then the proximal DC algorithm (pDCAe)."""

    name = "ramusa"
    cost_hint = 5.6  # s per unit on the reference problem (mtlbench.runner.cost)
    paper = "Han & Zhang, Multi-Stage Multi-Task Learning with Reduced Rank, AAAI 2016"
    search_space = {"lam_ratio": Log([0.1, 0.2, 0.4], low=None, high=1.0),
                    "theta_ratio": Log([0.25, 0.5, 1.0], low=None, high=1.0)}
    param_constraints = {"tol": Linear([1e-6], low=0.0), "max_iter": Int([2000], low=1)}
    convex = False
    target_kinds = ("binary", "real")
    supports_warm_start = False

    def __init__(self, lam_ratio: float = 0.2, theta_ratio: float = 0.5, tol: float = 1e-6,
                 max_iter: int = 2000):
        self.lam_ratio = lam_ratio
        self.theta_ratio = theta_ratio
        self.tol = tol
        self.max_iter = max_iter

    def capped_objective(self, tasks: TaskSet, W: np.ndarray | None = None) -> float:
        """F(W) = J(W) + lam sum_i min(sigma_i(W), theta) (LAPACK singular values)."""
        W = self.coef_ if W is None else W
        s = np.linalg.svd(W, compute_uv=False)
        return SquaredLoss(tasks).value(W) + self.lam_ * capped_penalty(s, self.theta_)

    def fit(self, tasks: TaskSet, init=None) -> "RAMUSA":
        self.check_params()
        # Gram matrices when d < 2 n_t, else one batched pass over the padded rows
        quad = SquaredLoss(tasks, wide="padded")
        lam = float(self.lam_ratio) * tasks.memo(
            ("trace_lambda_max",), lambda: float(np.linalg.norm(task_xty(tasks), 2)))
        self.lam_ = lam
        tol, max_iter = float(self.tol), int(self.max_iter)
        W0 = None
        if init is not None and getattr(init, "stage1_coef_", None) is not None \
                and init.stage1_coef_.shape == (tasks.d, tasks.T):
            W0 = init.stage1_coef_
        # stage 1: trace-norm MTL; theta is defined from its solution
        stats = {"data_passes": 0}
        counter = [0]

        def progress(value):
            counter[0] += 1
            report_progress(counter[0], value)

        def solve_stage1():
            start = np.zeros((tasks.d, tasks.T)) if W0 is None else W0
            W, _, _, it, conv = stage_solve(quad, lam, None, start, tol=tol, max_iter=max_iter,
                                            stats=stats, progress=progress)
            return W, it, conv, stats["data_passes"]

        if W0 is None:
            # a cold stage 1 depends on the data, lam, tol and max_iter only: the fits of a
            # search that share lam reuse it (the same result as solving it again)
            W, it, conv, passes = tasks.memo(("ramusa_stage1", lam, tol, max_iter), solve_stage1)
        else:
            W, it, conv, passes = solve_stage1()
        stats["data_passes"] = passes
        counter[0] = it
        self.stage1_coef_ = W.copy()
        s1 = np.linalg.svd(W, compute_uv=False)
        theta = float(self.theta_ratio) * (float(s1[0]) if s1.size else 0.0)
        self.theta_ = theta
        stage1_iter = it
        rounds = 0
        if np.any(s1 > theta):
            W, hist, dc_iter, dc_conv, rounds = factored_dc_solve(
                tasks, quad, lam, theta, W, tol=tol, max_iter=max_iter, progress=progress)
        else:
            # no singular value above theta: W^(1) (the trace-norm optimum) is DC-critical,
            # the convex special case (theta_ratio = 1 and above)
            hist = [quad.value(W) + lam * capped_penalty(s1, theta)]
            dc_iter, dc_conv = 0, True
        self.coef_ = W
        self.objective_history_ = [float(v) for v in hist]
        self.n_iter_ = stage1_iter + dc_iter
        self.converged_ = bool(conv and dc_conv)
        s = np.linalg.svd(W, compute_uv=False)
        self.rank_ = int(np.sum(s > 1e-8 * max(s[0] if s.size else 0.0, 1e-300)))
        self.diagnostics_ = {"lam": lam, "theta": theta, "stage1_iter": stage1_iter,
                             "dc_iter": dc_iter, "dc_rounds": rounds, "rank": self.rank_,
                             "n_above_theta": int(np.sum(s > theta)),
                             "data_passes": stats["data_passes"],
                             "converged": self.converged_}
        return self

    def capped_value(self, loss, W: np.ndarray) -> float:
        s = np.linalg.svd(W, compute_uv=False)
        return loss.value(W) + self.lam_ * capped_penalty(s, self.theta_)


@hookimpl
def register_models(register):
    register(RAMUSA)
