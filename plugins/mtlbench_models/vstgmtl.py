"""VSTG-MTL: variable selection and task grouping.

J.-Y. Jeong and C.-H. Jun, "Variable Selection and Task Grouping for Multi-Task Learning",
Proceedings of the 24th ACM SIGKDD International Conference on Knowledge Discovery and Data
Mining (KDD), 2018, doi:10.1145/3219819.3219992; a competitor of the TFCL paper (Sec.
Competitors).  W = U V, U d x K latent bases, V K x T task codes (column v_t for task t)::

    F(U, V) = sum_t 1/2 ||y_t - X_t U v_t||^2                (loss)
            + gamma1 ||U||_1 + gamma2 ||U||_{1,inf}          (variable selection on U's rows)
            + mu sum_t (||v_t||_k^sp)^2                      (task grouping)

||U||_{1,inf} = sum_i max_a |U_ia|; ||.||_k^sp is the k-support norm (Argyriou, Foygel & Srebro
2012).  The paper (and the authors' code, ``VSTG_MTL_regress.m``) weights each task's loss by
1/n_t; here every competitor has the TFCL paper's instance-wise squared loss (Sec.
Experimental Settings), which only rescales the weights per task.

Solver.  F is convex in U for fixed V and in V for fixed U, not jointly.  Each outer iteration
is one iteration of the paper's alternating scheme followed by ``_JOINT_STEPS`` (20)
accelerated proximal-gradient steps on (U, V) together:
* U-step (V fixed; the paper uses ADMM, here FISTA with adaptive restart in a row metric: row
  i weighted by sum_t (X_t^T X_t)_ii ||v_t||^2); the prox of gamma1 ||.||_1 + gamma2
  ||.||_{1,inf} is soft thresholding followed by the row-wise l_inf prox (exact; checked
  against cvxpy).  V-step (U fixed): separable over tasks, FISTA on all tasks at once with the
  exact prox of the squared k-support norm.  A block update is kept only if it does not
  increase F; from the second outer iteration on, the point (2U - U0, 2V - V0) replaces it if
  F is strictly smaller (Bro 1998).  Inner tolerance max(``u_tol`` / ``fista_tol``, 0.1 x the
  last outer relative change of W).
* joint steps: monotone FISTA on (U, V), both gradients from one residual, each block's prox
  applied separately, in a diagonal metric scaled by a factor that backtracking doubles until
  the joint descent condition holds; a step that would increase F restarts the momentum, so F
  never increases (tested).  Why: the loss depends on U V only (invariant under U -> U R,
  V -> R^{-1} V), and with n_t < d F has long flat valleys along which block steps move
  slowly and joint momentum fast.  Only the first outer iteration adopts its block iteration.
Initialisation (the authors' code): per-task ridge W0 (weight mean_t tr(X_t^T X_t)/d), then
its rank-K SVD W0 = P S Q^T, U = P S^{1/2}, V = S^{1/2} Q^T.

Stopping rule (non-convex problem, no certificate): the block iteration from the current point
changes F by at most ``tol`` (1e-5) relative and W by at most ``xtol`` (1e-3) relative; its
result is returned.  It certifies that one iteration of the alternating scheme no longer moves
the iterate, a weak certificate in a flat valley, and where it first holds depends on the
path.  ``converged_`` says whether it held within ``max_iter`` (500) outer iterations;
``report_progress`` with F once per outer iteration.  ``convex = False``: no warm starts.

Search space (scale-free: gamma1, gamma2 in units of c0 = mean_t ||X_t^T y_t||_inf, mu in
units of mean_t ||y_t||^2): ``gamma1`` Log([1e-2, 1]), ``gamma2`` Log([1e-3, 1e-1]), ``mu``
Log([0.1, 10]), bounds (0, inf) (each weight > 0 is a valid model, none has a value beyond
which the model stops changing); ``n_bases`` (K) Int([5, 20]), bounds [1, min(d, T)] (the fit
clips K there); ``k`` Int([1, 5]), bounds [1, n_bases] (k >= K is the l2 norm, the same model;
k = 1 is the squared l1 norm).  gamma1, mu and K from ``simulated[seed=101]``, split of
repetition 0 (K = 10, k = 3, gamma2 = 0.01 unless said; validation AUC x100): gamma1 = 1e-2:
mu = 1e-2 -> 87.7, 0.1 -> 88.0, 1 -> 88.8; gamma1 = 0.1: mu = 0.1 -> 89.6, 1 -> 90.8;
gamma1 = 1, mu = 0.1 -> 87.3; K up to 20 because K = 10 cannot represent a W of rank > 10.
gamma2 from the math (the units of gamma1, a decade on each side of 0.01, as good as 0.1
there); k's range keeps k <= K over K's range (the authors' demos use k = 3).

Unverified (the paper's text was not available here; the authors' MATLAB code was): the
paper's equation numbers; its ADMM splitting; its initial ridge weight (the code's
``||hyp(1:3)||_2 + 1`` mixes units); the authors' hyperparameter grid.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from mtlbench import Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl, report_progress
from mtlbench_models._core.representations import SVDForm
from mtlbench_models._core.penalties import (L1PlusL1Inf, SquaredKSupport, ksupport_sq,
                                             prox_ksupport_sq_with_value, prox_l1_l1inf_rows)

_INEXACT = 0.1      # inner tolerance <= this x the previous relative change of W (docstring)
_JOINT_STEPS = 20   # accelerated joint (U, V) steps between two block iterations (docstring)
#: ``tasks.memo`` key of the data pieces (``_Problem``); its version changes with _Problem's
#: arithmetic, so that a TaskSet never hands one version's pieces to another
_MEMO_KEY = ("vstgmtl.svd-problem", 6)


class _Problem(SVDForm):
    """The squared loss in its ``svd`` representation (``_core.datafits.SVDForm``: the thin
    SVD of every task, or the Gram matrices when every n_t >= d; ``image`` / ``loss_grad`` /
    ``hess`` / ``ridge``) plus what VSTG-MTL's blocks need of it: the loss of a factored W,
    the initial ridge W0 and its SVD (``ridge_svd``) and the V-step's per-task K x K blocks
    (``task_blocks``).  Built once per TaskSet object (``tasks.memo``) and shared by every fit
    of a search."""

    def loss(self, U: np.ndarray, V: np.ndarray) -> float:
        return self.loss_w(U @ V)

    @functools.cached_property
    def ridge_svd(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The thin SVD (P, s, Q^T) of the per-task ridge W0 = argmin_W sum_t 1/2 ||y_t -
        X_t w_t||^2 + lam/2 ||w_t||^2, lam = mean_t tr(X_t^T X_t) / d (the initialisation;
        data-only, so computed once and shared by every fit; read-only)."""
        lam = float(np.mean(self.diagH.sum(axis=0))) / self.d
        out = np.linalg.svd(self.ridge(np.zeros((self.d, self.T)), lam), full_matrices=False)
        for a in out:
            a.flags.writeable = False
        return tuple(out)

    def task_blocks(self, U: np.ndarray):
        """Per-task V-step pieces: U^T X_t^T X_t U (T x K x K) and U^T X_t^T y_t (K x T)."""
        if self.gram is not None:
            # H_t U for every task as ONE matrix product (T d x d times d x K), then U^T (H_t U)
            HU = (self.gram.reshape(-1, self.d) @ U).reshape(self.T, self.d, -1)
            return np.matmul(U.T, HU), U.T @ self.Xty
        M = np.matmul(U.T, self.Q) * self.s[:, None, :]            # T x K x r: U^T Q diag(s)
        A = np.matmul(M, M.transpose(0, 2, 1))
        b = np.einsum("tkr,tr->kt", M, self.c)
        return A, b


def vstg_objective(prob: _Problem, U, V, g1, g2, mu, k) -> float:
    return prob.loss(U, V) + L1PlusL1Inf(g1, g2).value(U) + SquaredKSupport(mu, k).value(V)


def _row_weights(w: np.ndarray) -> np.ndarray:
    """A positive diagonal metric from nonnegative weights: floor at 1e-12 x the largest (all
    ones if every weight is 0, e.g. V = 0, where the gradient is 0 as well)."""
    top = float(w.max()) if w.size else 0.0
    return np.maximum(w, 1e-12 * top) if top > 0 else np.ones_like(w)


class _State:
    """Solver data carried from one step to the next: the power-iteration vectors of the
    U-step (``power``, d x K) and of the V-step (``v_power``, K x T), the inner tolerances,
    and of the joint steps the metric scale (``joint_c``), the momentum (previous iterate as a
    flat vector (vec U, vec V), and FISTA's t) and the point where they ended (the flat vector,
    its U and V views, W = U V and its ``image``: ``last_joint``)."""

    def __init__(self):
        self.power = None
        self.v_power = None
        self.tol_u = self.tol_v = None
        self.joint_c = 1.0
        self.momentum = None
        self.last_joint = None


class VSTGMTL(LinearMTLModel):
    """Variable selection + task grouping by W = U V (block iterations of the paper's scheme,
    accelerated by joint proximal-gradient steps on (U, V))."""

    name = "vstgmtl"
    cost_hint = 5.8  # s per unit on the reference problem (mtlbench.runner.cost)
    paper = ("Jeong & Jun, Variable Selection and Task Grouping for Multi-Task Learning, "
             "KDD 2018")
    search_space = {"gamma1": Log([1e-2, 1e-1, 1.0], low=0.0, high=None),
                    "gamma2": Log([1e-3, 1e-2, 1e-1], low=0.0, high=None),
                    "mu": Log([1e-1, 1.0, 10.0], low=0.0, high=None),
                    "n_bases": Int([5, 20], low=1, high="min(d, T)"),
                    "k": Int([1, 5], low=1, high="n_bases")}
    param_constraints = {"tol": Linear([1e-5], low=0.0),
                         "xtol": Linear([1e-3], low=0.0), "max_iter": Int([500], low=1),
                         "u_tol": Linear([1e-4], low=0.0), "u_max_iter": Int([200], low=1),
                         "fista_tol": Linear([1e-4], low=0.0), "fista_max_iter": Int([200], low=1)}
    convex = False
    target_kinds = ("binary", "real")
    supports_warm_start = False

    def __init__(self, gamma1: float = 1e-2, gamma2: float = 1e-2, mu: float = 1e-2,
                 n_bases: int = 10, k: int = 3, tol: float = 1e-5,
                 xtol: float = 1e-3, max_iter: int = 500, u_tol: float = 1e-4,
                 u_max_iter: int = 200,
                 fista_tol: float = 1e-4, fista_max_iter: int = 200):
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.mu = mu
        self.n_bases = n_bases
        self.k = k
        self.tol = tol
        self.xtol = xtol
        self.max_iter = max_iter
        self.u_tol = u_tol
        self.u_max_iter = u_max_iter
        self.fista_tol = fista_tol
        self.fista_max_iter = fista_max_iter

    # ------------------------------------------------------------------ validation
    def _validate(self, tasks: TaskSet) -> None:
        self.check_params()
        if self.gamma1 is None or self.gamma2 is None:
            raise ValueError("vstgmtl: gamma1 and gamma2 must be numbers >= 0")

    # ------------------------------------------------------------------ fit
    def fit(self, tasks: TaskSet, init=None) -> "VSTGMTL":
        self._validate(tasks)
        prob = tasks.memo(_MEMO_KEY, lambda: _Problem(tasks))
        T, d = prob.T, prob.d
        K = int(min(self.n_bases, d, T))
        k = int(min(self.k, K))
        c0 = float(np.mean(np.abs(prob.Xty).max(axis=0)))
        ysq = float(np.mean(prob.yy))
        g1 = float(self.gamma1) * c0
        g2 = float(self.gamma2) * c0
        mu = float(self.mu) * ysq
        self.gamma1_, self.gamma2_, self.mu_ = g1, g2, mu
        hU = L1PlusL1Inf(g1, g2).value            # the penalties' values
        gV = SquaredKSupport(mu, k).value

        U, V = self._initial(prob, K, init)
        W = U @ V
        F = prob.loss_w(W) + hU(U) + gV(V)
        hist = [F]
        report_progress(0, F)
        state = _State()
        rel_dW = 1.0
        it, u_total, fista_total, joint_total, n_extra = 0, 0, 0, 0, 0
        converged = False
        for it in range(1, int(self.max_iter) + 1):
            # -- one block iteration of the paper's scheme from the current point: the stopping
            # rule is checked on it.  Inexact blocks while the iterates still move: inner
            # tolerance max(u_tol, _INEXACT x the last outer relative change of W)
            state.tol_u = max(float(self.u_tol), _INEXACT * rel_dW)
            state.tol_v = max(float(self.fista_tol), _INEXACT * rel_dW)
            U_b, n_u = self._u_step(prob, U, V, g1, g2, state)
            u_total += n_u
            if prob.loss(U_b, V) + hU(U_b) + gV(V) > F:
                U_b = U
            V_b, n_f = self._v_step(prob, U_b, V, mu, k, state.tol_v, state)
            fista_total += n_f
            W_b = U_b @ V_b
            F_b = prob.loss_w(W_b) + hU(U_b) + gV(V_b)
            if it > 1:
                # extrapolation: repeat the block step once more, kept only if F drops
                Ue, Ve = 2.0 * U_b - U, 2.0 * V_b - V
                W_e = Ue @ Ve
                F_e = prob.loss_w(W_e) + hU(Ue) + gV(Ve)
                if F_e < F_b:
                    U_b, V_b, W_b, F_b = Ue, Ve, W_e, F_e
                    n_extra += 1
            dW = float(np.linalg.norm(W_b - W))
            norm_W = float(np.linalg.norm(W_b))
            converged = bool(F - F_b <= self.tol * abs(F) and dW <= self.xtol * norm_W)
            W_outer = W
            if F_b <= F and (it == 1 or converged):
                U, V, W, F = U_b, V_b, W_b, F_b
            if not converged:
                # -- accelerated joint steps on (U, V) until the next block iteration (the
                # momentum carries over from the previous ones)
                U, V, F, n_j = self._joint_steps(prob, U, V, F, g1, g2, mu, k, state,
                                                 _JOINT_STEPS)
                joint_total += n_j
                W = U @ V
            rel_dW = float(np.linalg.norm(W - W_outer)) / max(float(np.linalg.norm(W)), 1e-300)
            hist.append(F)
            report_progress(it, F)
            if converged:
                break
        self.converged_ = converged
        self.U_, self.V_ = U, V
        self.coef_ = U @ V
        self.objective_history_ = hist
        self.n_iter_ = it
        nz_rows = np.abs(U).max(axis=1) > 0
        self.feature_groups_ = np.where(nz_rows, np.abs(U).argmax(axis=1), -1)
        self.task_groups_ = np.abs(V).argmax(axis=0)
        self.diagnostics_ = {"selected_features": int(nz_rows.sum()), "u_iters": int(u_total),
                             "fista_iters": int(fista_total), "joint_steps": int(joint_total),
                             "extrapolated": int(n_extra), "n_bases": K, "k": k,
                             "converged": converged}
        return self

    def _initial(self, prob: _Problem, K: int, init):
        if (init is not None and getattr(init, "U_", None) is not None
                and init.U_.shape == (prob.d, K) and init.V_.shape == (K, prob.T)):
            return init.U_.copy(), init.V_.copy()
        P, s, Qt = prob.ridge_svd
        r = np.sqrt(s[:K])
        return P[:, :K] * r, r[:, None] * Qt[:K]

    def _joint_steps(self, prob: _Problem, U, V, F, g1, g2, mu, k, state: _State,
                     n_steps: int):
        """``n_steps`` accelerated proximal-gradient steps on F over (U, V) jointly (docstring:
        "Joint steps").  Monotone: F never increases.  Returns (U, V, F, steps taken).

        The two blocks live in one flat vector z = (vec U, vec V) (U and V are views of it), so
        that the extrapolation, the step, the descent test and the restart test are one numpy
        call each over both blocks; the metric is stored entrywise over z (``wz``)."""
        (d, K), T = U.shape, V.shape[1]
        nU = d * K

        def blocks(x):                                # (U, V) views of a flat vector
            return x[:nU].reshape(d, K), x[nU:].reshape(K, T)

        last = state.last_joint            # (z, U, V, W = U V, image(W)) where the last call ended
        if last is not None and last[1] is U and last[2] is V:
            z, Wx, Px = last[0], last[3], last[4]
        else:
            z = np.concatenate((U.ravel(), V.ravel()))
            U, V = blocks(z)
            Wx = U @ V
            Px = prob.image(Wx)
        z_prev, tk = state.momentum if state.momentum is not None else (z, 1.0)
        c = state.joint_c
        diagH = prob.diagH
        wz = np.empty_like(z)
        wzU, wzV = blocks(wz)
        weights_at = None
        n = 0
        while n < n_steps:
            n += 1
            if weights_at is not z:                   # (a rejected step keeps the point)
                # diagonal metric: row i of U ~ sum_t (X_t^T X_t)_ii ||v_t||^2 / K, column t
                # of V ~ sum_i (X_t^T X_t)_ii ||U_i||^2 / K (the average diagonal of each
                # Hessian block)
                wU = _row_weights(diagH @ (V * V).sum(axis=0) / K)
                wV = _row_weights((U * U).sum(axis=1) @ diagH / K)
                wzU[...] = wU[:, None]
                wzV[...] = wV
                weights_at = z
            t_next = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * tk * tk))
            beta = (tk - 1.0) / t_next
            if beta > 0.0:
                y = z + beta * (z - z_prev)
                Uy, Vy = blocks(y)
                Wy = Uy @ Vy
                Py = prob.image(Wy)
            else:
                y, Uy, Vy, Wy, Py = z, U, V, Wx, Px
            fy, Bg = prob.loss_grad(Wy, Py)                              # Bg: grad_W at Y
            g = np.empty_like(z)                                         # (grad_U, grad_V) at Y
            gU, gV = blocks(g)
            np.matmul(Bg, Vy.T, out=gU)
            np.matmul(Uy.T, Bg, out=gV)
            c *= 0.8                                  # let the step grow again (local curvature)
            zn, Un, Vn, Wn, Pn, fn, wD, ksq, c = _joint_prox_step(
                prob, blocks, y, g, fy, wz, wU, wV, c, g1, g2, mu, k)
            absU = np.abs(Un)
            Fn = (fn + g1 * absU.sum() + g2 * absU.max(axis=1).sum()
                  + mu * float(ksq.sum()))
            if Fn > F:                                # not monotone: restart the momentum
                tk = 1.0
                if beta > 0.0:
                    continue                          # and retry from the current point
                break                                 # a plain step failed: stationary here
            # adaptive restart (O'Donoghue & Candes 2015) when the momentum points uphill
            uphill = float(np.vdot(wD, zn - z)) < 0.0                       # D = zn - y
            tk = 1.0 if uphill else t_next
            z_prev = z
            z, U, V, Wx, Px, F = zn, Un, Vn, Wn, Pn, Fn
        state.joint_c = c
        state.momentum = (z_prev, tk)
        state.last_joint = (z, U, V, Wx, Px)
        return U, V, F, n

    def _u_step(self, prob: _Problem, U, V, g1, g2, state: _State):
        """min_U f(U) + g1 ||U||_1 + g2 ||U||_{1,inf}, f(U) = sum_t 1/2 ||y_t - X_t U v_t||^2
        (V fixed), by FISTA (Beck & Teboulle 2009) in a row metric with the exact prox of the
        two penalties (``prox_l1_l1inf_rows``) and adaptive momentum restart (O'Donoghue &
        Candes 2015).

        grad f(U) = sum_t X_t^T (X_t U v_t - y_t) v_t^T, through the per-task SVDs: O(T d r).
        Metric: row i of U weighted by w_i = sum_t (X_t^T X_t)_ii ||v_t||^2 (the trace of the
        Hessian's diagonal block of that row), so the step is 1/(L w_i) per row: the features
        of a PCA basis differ in energy by orders of magnitude (x67 on
        synthetic-attributes[seed=101]),
        and one global step 1/L is set by the strongest.  L = 1.02 x a power-iteration estimate
        of lambda_max(D^-1/2 H D^-1/2), D = diag(w) (x) I_K, H the Hessian map (warm-started
        from the previous U-step's vector), and backtracking doubles L whenever the descent
        condition f(U+) <= f(Y) + <grad f(Y), U+ - Y> + L/2 ||U+ - Y||_D^2 fails, so every
        step is a valid majorisation step.  Stops when max |U+ - U| <= ``state.tol_u`` x
        max |U+| or after ``u_max_iter`` steps.  Returns (U, steps)."""
        w = _row_weights(prob.diagH @ np.einsum("kt,kt->t", V, V))
        sw = 1.0 / np.sqrt(w)[:, None]
        # cold start: up to 20 steps; warm start (previous U-step's vector, V moved little):
        # 3 steps -- the estimate only sets the first trial step, backtracking makes it safe
        Z = state.power if state.power is not None and state.power.shape == U.shape \
            else np.ones_like(U)
        cold = Z is not state.power
        lam = 0.0
        for _ in range(20 if cold else 3):
            Y = sw * (prob.hess((sw * Z) @ V) @ V.T)
            nz = float(np.linalg.norm(Y))
            if nz == 0.0:
                break
            lam_new = nz / float(np.linalg.norm(Z))
            Z = Y / nz
            done = abs(lam_new - lam) <= 1e-3 * lam_new
            lam = lam_new
            if done:
                break
        state.power = Z
        L = max(1.02 * lam, 1e-300)
        tol = state.tol_u
        # image(A V) is linear in A: image(Y V) = image(Uc V) + beta (image(Uc V) - image(Up V)),
        # so each step maps only the new iterate (one O(T d r) product, + one back-map without
        # ``gram``)
        Uc, Up, tk = U.copy(), U.copy(), 1.0
        Pc = prob.image(Uc @ V)
        Pp = Pc
        n = 0
        for n in range(1, int(self.u_max_iter) + 1):
            tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * tk * tk))
            beta = (tk - 1.0) / tn
            Y = Uc + beta * (Uc - Up)
            fY, GW = prob.loss_grad(Y @ V, Pc + beta * (Pc - Pp))
            G = GW @ V.T                                                  # grad f(Y)
            for _ in range(100):                  # backtracking (bounded: non-finite data)
                Lw = L * w
                Un = prox_l1_l1inf_rows(Y - G / Lw[:, None], g1 / Lw, g2 / Lw)
                Wn = Un @ V
                Pn = prob.image(Wn)
                D = Un - Y
                if (prob.loss_image(Wn, Pn)
                        <= fY + float(np.einsum("ik,ik->", G, D))
                        + 0.5 * L * float(w @ np.einsum("ik,ik->i", D, D)) + 1e-12 * abs(fY)):
                    break
                L *= 2.0
            if float(w @ np.einsum("ik,ik->i", Y - Un, Un - Uc)) > 0.0:   # restart momentum
                tn = 1.0
            Up, Uc, tk = Uc, Un, tn
            Pp, Pc = Pc, Pn
            if np.abs(Uc - Up).max() <= tol * max(np.abs(Uc).max(), 1e-300):
                break
        return Uc, n

    def _v_step(self, prob: _Problem, U, V, mu, k, tol=None, state: "_State | None" = None):
        """min_V sum_t 1/2 ||y_t - X_t U v_t||^2 + mu (||v_t||_k^sp)^2 (U fixed), separable:
        FISTA on all tasks at once, warm-started at V, with the exact prox of the squared
        k-support norm and momentum restarted per task when it points uphill (O'Donoghue &
        Candes 2015).  Per-task step 1/L_t: L_t = 1.02 x a power-iteration estimate of
        lambda_max(A_t), A_t = U^T X_t^T X_t U (warm-started from the previous V-step's
        vectors, batched over tasks), made safe by per-task backtracking on the descent
        condition (L_t doubles where it fails), so every step is a valid majorisation step.
        One batched K x K product A_t v per step (A_t Y is a combination of A_t v_k and
        A_t v_{k-1}).  A task stops when its largest change is <= ``fista_tol`` x max |V|
        (the tasks are independent, so each stops on its own).  Per-task safeguard: a task
        keeps v_t if the new one has a larger objective.  Returns (V, steps)."""
        tol = float(self.fista_tol) if tol is None else tol
        state = _State() if state is None else state
        A, b = prob.task_blocks(U)
        L = 1.02 * _power_lambda_max(A, state)

        def quad(Vm, AVm, bm):            # per task 1/2 v^T A_t v - b_t^T v, given A_t v
            return 0.5 * np.einsum("at,at->t", Vm, AVm) - np.einsum("at,at->t", bm, Vm)

        def task_obj(Vm):
            return quad(Vm, _task_matvec(A, Vm), b) + mu * ksupport_sq(Vm, k)

        Vc, Vp = V.copy(), V.copy()
        T = V.shape[1]
        tk = np.ones(T)
        act = np.arange(T)
        Aa, ba, La = A, b, L
        AVc = _task_matvec(A, V)
        AVp = AVc
        n = 0
        for n in range(1, int(self.fista_max_iter) + 1):
            vc, vp, ta = Vc[:, act], Vp[:, act], tk[act]
            tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * ta * ta))
            beta = (ta - 1.0) / tn
            Y = vc + beta * (vc - vp)
            AY = AVc + beta * (AVc - AVp)
            G = AY - ba
            fY = quad(Y, AY, ba)
            vn = prox_ksupport_sq_with_value(Y - G / La, 2.0 * mu / La, k)[0]
            Avn = _task_matvec(Aa, vn)
            for _ in range(100):                  # backtracking (bounded: non-finite data)
                D = vn - Y
                bad = (quad(vn, Avn, ba) > fY + np.einsum("at,at->t", G, D)
                       + 0.5 * La * np.einsum("at,at->t", D, D) + 1e-12 * np.abs(fY))
                if not bad.any():
                    break
                La[bad] *= 2.0
                vn[:, bad] = prox_ksupport_sq_with_value(Y[:, bad] - G[:, bad] / La[bad],
                                                    2.0 * mu / La[bad], k)[0]
                Avn[:, bad] = _task_matvec(Aa[bad], vn[:, bad])
            tn[np.einsum("at,at->t", Y - vn, vn - vc) > 0] = 1.0      # restart
            Vp[:, act], Vc[:, act], tk[act] = vc, vn, tn
            AVp, AVc = AVc, Avn
            done = np.abs(vn - vc).max(axis=0) <= tol * max(np.abs(Vc).max(), 1e-300)
            if done.all():
                break
            if done.any():
                keep = ~done
                act = act[keep]
                Aa, ba, La = Aa[keep], ba[:, keep], La[keep]
                AVc, AVp = AVc[:, keep], AVp[:, keep]
        keep = task_obj(Vc) > task_obj(V)
        Vc[:, keep] = V[:, keep]
        return Vc, n


def _joint_prox_step(prob: _Problem, blocks, y, g, fy, wz, wU, wV, c, g1, g2, mu, k):
    """The proximal step of the joint steps from y (flat (U, V)) with gradient g in the metric
    c * wz: c doubles until the joint descent condition holds (at most 100 times: non-finite
    data).  Returns (z+, its U and V views, W+ = U+ V+, image(W+), loss at W+, wz * (z+ - y),
    the squared k-support norms of V+'s columns, c)."""
    for _ in range(100):
        x = y - g / (c * wz)
        zn = np.empty_like(y)
        Un, Vn = blocks(zn)
        aU, aV = c * wU, c * wV
        xU, xV = blocks(x)
        prox_l1_l1inf_rows(xU, g1 / aU, g2 / aU, out=Un)
        ksq = prox_ksupport_sq_with_value(xV, 2.0 * mu / aV, k, out=Vn)[1]
        Wn = Un @ Vn
        Pn = prob.image(Wn)
        fn = prob.loss_image(Wn, Pn)
        D = zn - y
        wD = wz * D
        lin = float(np.vdot(g, D))
        sq = 0.5 * float(np.vdot(wD, D))
        if fn <= fy + lin + c * sq + 1e-12 * abs(fy):
            break
        c *= 2.0
    return zn, Un, Vn, Wn, Pn, fn, wD, ksq, c


def _task_matvec(A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Column t: A_t v_t (A: T x K x K, V: K x T -> K x T).  (A batched matrix product: 2-3x
    faster than the equivalent einsum at K = 20-40.)"""
    return np.matmul(A, V.T[:, :, None])[:, :, 0].T


def _power_lambda_max(A: np.ndarray, state: "_State") -> np.ndarray:
    """Estimate of lambda_max(A_t) for every t (A: T x K x K, symmetric PSD) by batched power
    iteration from ``state.v_power`` (the previous V-step's vectors; all-ones when cold): up to
    20 steps cold, 3 warm, stopping when every estimate moved by <= 1e-3 relative.  A lower
    bound of lambda_max: the caller's backtracking makes the step safe.  Floor 1e-12."""
    T, K = A.shape[0], A.shape[1]
    Z = state.v_power
    cold = Z is None or Z.shape != (K, T)
    if cold:
        Z = np.ones((K, T))
    lam = np.zeros(T)
    for _ in range(20 if cold else 3):
        Y = _task_matvec(A, Z)
        ny = np.linalg.norm(Y, axis=0)
        nz = np.linalg.norm(Z, axis=0)
        ok = ny > 0
        lam_new = np.where(ok, ny / np.where(nz > 0, nz, 1.0), 0.0)
        Z = np.where(ok, Y / np.where(ok, ny, 1.0), Z)
        done = np.all(np.abs(lam_new - lam) <= 1e-3 * lam_new)
        lam = lam_new
        if done:
            break
    state.v_power = Z
    return np.maximum(lam, 1e-12)


@hookimpl
def register_models(register):
    register(VSTGMTL)
