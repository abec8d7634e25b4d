"""TFCL-Q: the personalised TFCL model (problem (Q), Alg. 2) and its ablations.

Z. Yang, Q. Xu, X. Cao and Q. Huang, "Task-Feature Collaborative Learning with Application to
Personalized Attribute Prediction", IEEE TPAMI 43(11):4094-4110, 2021, Sec. "Personalized
Attribute Prediction".  W_t = theta_c + theta_g[:, t] + theta_p[:, t] (eq. (14))::

    (Q)  min_{Theta, U in Gamma}  J(W) + alpha_1/2 ||theta_c||^2 + alpha_2 <L(theta_g), U>
                                  + alpha_3/2 ||theta_g||_F^2 + alpha_4 ||theta_p||_{1,2}

J: the squared pairwise AUC surrogate per user, in O(n_t d) (eqs. (15)-(17)), or the
instance-wise squared loss; ||theta_p||_{1,2} = sum_t ||theta_p[:, t]||_2 (zero for all but
the hard users); L(theta_g) the feature-task Laplacian of |theta_g| (``tfcl.py``).  Names
(the paper's alphas are shuffled between its statements):

    ours          (Q)        Thm. 7 / eqs. (18)-(20) / Alg. 2 input
    lam_common    alpha_1    alpha_3        ridge on theta_c
    lam_group     alpha_2    alpha_1        weight of <L(theta_g), U>
    lam_ridge     alpha_3    alpha_2        ridge on theta_g
    lam_personal  alpha_4    alpha_4        column-wise l_{1,2} on theta_p

Solver (Alg. 2, from Theta = 0): per iteration the proximal steps (Prox_c) theta_c = theta~_c
/ (1 + alpha_1/C_c), (Prox_p) column-group shrinkage of theta~_p, (Prox_g) one iteration of
Alg. 1 on theta_g (U-step of Thm. 3, W-step of Prop. 1).  ``schedule="gauss-seidel"``
(default): blocks in the order c, p, g, each from the gradient at the latest iterate with its
own constant c_factor x its block Lipschitz constant (lambda_max(sum_t H_t) for theta_c,
max_t ||H_t|| for theta_g, theta_p), a PALM variant with the same subproblems;
``schedule="jacobi"``: Alg. 2 to the letter, all gradients at Theta^{t-1} and one C =
c_factor (T + 2) max_t ||H_t|| (a Lipschitz constant of the joint gradient, below the paper's
rho_Theta).  ``accelerate`` and ``polish`` as in ``tfcl.py``: extrapolated sweeps kept only if
F does not increase; polishing solves the fixed-U subproblem exactly on a fixed structure
(theta_g's support and signs, the set of personal users; ``PersonalStructure``: per user in
the n_t-dimensional row space, theta_c by Newton) and keeps it only at a fixed point of Alg. 2.
TFCL(Coc) is not polished; once a sweep changes F by <= 1e-4 max(1, |F|), where 2 alpha_2 +
alpha_3 <= C_g / 4, each sweep also sets the parts of theta_g's columns outside their tasks'
row spaces (unseen by the loss) to the minimiser of a majoriser of the penalty
(:func:`nullspace_mm_step`).  Stopping rule: ``tfcl.stop_rule`` (tol 1e-6); ``converged_`` is
False at the safety cap ``max_iter`` (2000); ``report_progress(t, F^t)`` every iteration, no
certificate; ``convex = False``, every fit starts at 0.

Hyperparameter scales (``lam_scale="data"``), r = mean_t tr(H_t) / d_g as in ``tfcl.py``:
alpha_common = lam_common T r (the curvature of J along theta_c), alpha_group = lam_group N
||grad J(0)||_inf / 2 (tfcl-coc: lam_group r, its sigma_i^2 penalty being ridge-type),
alpha_ridge = lam_ridge r, alpha_personal = lam_personal max_t ||grad_t J(0)||_2.  With
lam_personal >= 1 the first personal step from 0 is empty (Jacobi; about so for Gauss-Seidel);
no threshold is exact for (Q) beyond the first step, so no weight has an upper bound (even
lam_group >= 1/k leaves W = theta_c + theta_p a model).

Search spaces: tfcl-q, tfcl-q-noauc: lam_group Log([0.004, 0.1]) and k Int([2, 8]) (bounds
[2, d + T]) as in ``tfcl.py``, lam_common Log([0.01, 100]), lam_personal Log([0.03, 1]),
lam_ridge Log([1e-3, 1]); tfcl-q-nog: lam_common Log([1e-3, 3]), lam_personal
Log([0.03, 0.3]); tfcl-coc: lam_group Log([0.01, 100]), k Int([2, 8]) with bounds [1, min(d,
T)] (at min(d, T) the co-cluster term is 0; ``fit`` refuses more), the others as tfcl-q.
From the math: lam_group (as in ``tfcl.py``), lam_personal's top 1 (above), lam_ridge.  From
``simulated[seed=101]`` (split of repetition 0, validation AUC): k, lam_common, tfcl-q-nog's
ranges and tfcl-coc's lam_group, by sweeps around each label's optimum (tfcl-q 97.4 at
lam_group 0.05, k 5; tfcl-q-nog lam_personal 0.1, 88.8; tfcl-coc 93.8 at k 4), checked by a
2-repetition search in these units: no selection at an edge or bound, every fit converged
(tfcl-q lam_common 43, 8.1; tfcl-coc lam_group 43; tfcl-q-nog lam_common 1e-4, 0.013).

Ablations: ``tfcl-q-noauc`` (instance-wise squared loss), ``tfcl-q-nog`` (theta_g = 0, no
U-step), ``tfcl-coc`` (alpha_2 <L(theta_g), U> replaced by CoCMTL's alpha_2 sum_{i>k}
sigma_i(theta_g)^2, the ridge kept).  Unverified (not in the paper, as for ``tfcl.py``): the
initialisation, C, the stopping rule and the grid.
"""
from __future__ import annotations

import time

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh
from threadpoolctl import threadpool_limits

from mtlbench import Int, LinearMTLModel, Log, TaskSet, hookimpl, report_progress

from ._core.penalties import (SquaredFrobenius, cocluster_penalty, prox_cocluster_with_truncation,
                              prox_cocluster_with_value, prox_group_cols)
from ._tfcl.core import (COMMON_CONSTRAINTS, _N_EMBED_ITERS, GraphView, SpectralGroups,
                         check_common,
                         check_lam_scale, graph_columns, group_scale, loss_at_zero, make_loss,
                         momentum_next, ridge_scale, stop_rule, validate_declared, tfcl_wstep)
from ._tfcl.polish import (FixedStructure, PersonalStructure, compact_loss, kkt_ok,
                           kkt_shared_personal_ok, row_space_spectra)
from ._tfcl.ustep import DEFAULT_EIG_RTOL, UStepper, same_components_only, ustep_diff_norm

# Polish (``_tfcl.polish``, as in ``tfcl.py``) once the structure has not changed for this many
# iterations; after a rejected try wait twice as long; sign updates per try.
_POLISH_AFTER = 5
_POLISH_ROUNDS = 6

# TFCL(Coc): the null-space majorise-minimise step (``nullspace_mm_step``) joins the sweeps once
# |F^t - F^{t-1}| <= _MM_START max(1, |F^t|), where its curvature 2 a2 + a3 is at most
# _MM_STEP_RATIO times the sweeps' C_g (elsewhere it is no longer step than the sweep's).
_MM_START = 1e-4
_MM_STEP_RATIO = 0.25

# Declared search spaces (lam_scale="data"; bounds and sources of the start ranges: module
# docstring, "Search spaces").
SPACE_Q = {
    "lam_group": Log([0.004, 0.02, 0.1], low=0.0),
    "k": Int([2, 8], low=2, high="d + T"),
    "lam_personal": Log([0.03, 0.1, 0.3, 1.0], low=0.0),
    "lam_common": Log([0.01, 0.1, 1.0, 10.0, 100.0], low=0.0),
    "lam_ridge": Log([1e-3, 1e-2, 1e-1, 1.0], low=0.0),
}
# The same ranges for the squared loss (the scales of every weight are the loss's own).
SPACE_Q_NOAUC = dict(SPACE_Q)
SPACE_Q_NOG = {
    "lam_common": Log([1e-3, 1e-2, 1e-1, 1.0, 3.0], low=0.0),
    "lam_personal": Log([0.03, 0.1, 0.3], low=0.0),
}
SPACE_COC = {
    **SPACE_Q,
    "lam_group": Log([0.01, 0.1, 1.0, 10.0, 100.0], low=0.0),
    "k": Int([2, 8], low=1, high="min(d, T)"),
}


def common_lipschitz(J, d: int, T: int) -> float:
    """lambda_max of the Hessian of theta_c -> J(theta_c 1^T): sum_t H_t (Lanczos on
    Hessian-vector products; J is quadratic so H v = grad(v) - grad(0))."""
    g0 = J.grad(np.zeros((d, T))).sum(1)

    def hv(v):
        return J.grad(np.repeat(v[:, None], T, axis=1)).sum(1) - g0

    op = LinearOperator((d, d), matvec=hv, dtype=np.float64)
    if d <= 2:
        H = np.column_stack([hv(e) for e in np.eye(d)])
        return float(np.linalg.eigvalsh((H + H.T) / 2)[-1])
    val = eigsh(op, k=1, which="LA", tol=1e-8, v0=np.ones(d))[0][0]
    return float(val) * (1 + 1e-6)


def row_space_bases(J) -> list[tuple[object, np.ndarray]]:
    """Per bucket of J, an orthonormal basis of every task's row space (Z_t's right singular
    vectors of nonzero singular value; the others, and padded rows, set to 0): (sel, (T_b, m_b,
    d)).  Data only: once per training set."""
    out = []
    for idx, Z3, _ in J.buckets:
        _, S, Vh = np.linalg.svd(Z3, full_matrices=False)
        keep = S > S[:, :1] * (max(Z3.shape[1:]) * np.finfo(float).eps)
        out.append((slice(None) if idx is None else idx, Vh * keep[:, :, None]))
    return out


def nullspace_mm_step(X: np.ndarray, top: np.ndarray, bases, a2: float,
                      a3: float) -> np.ndarray:
    """TFCL(Coc): the exact minimiser of the majoriser a2 ||g - top||_F^2 + a3/2 ||g||_F^2 of
    a2 sum_{i>k} sigma_i(g)^2 + a3/2 ||g||_F^2 (top = the rank-k truncation of X; Eckart-Young)
    over the parts of g's columns outside their tasks' row spaces, the row-space parts kept:
    g_t = P_t X_t + c (I - P_t) top_t, c = 2 a2 / (2 a2 + a3).  The loss does not see these
    parts, so F(g) <= F(X) (majorise-minimise) at no loss evaluation."""
    c = 2.0 * a2 / (2.0 * a2 + a3)
    D = X - c * top
    out = c * top
    for sel, Vh in bases:
        coef = np.matmul(Vh, D.T[sel][:, :, None])                      # (T_b, m_b, 1)
        out[:, sel] += np.matmul(coef.transpose(0, 2, 1), Vh)[:, 0, :].T
    return out


class TFCLQ(SpectralGroups, LinearMTLModel):
    """TFCL-Q, problem (Q) by Alg. 2 (see the module docstring for names and solver)."""

    name = "tfcl-q"
    cost_hint = 4.2  # s per unit on the reference problem (mtlbench.runner.cost)
    paper = ("Yang et al., Task-Feature Collaborative Learning with Application to "
             "Personalized Attribute Prediction, IEEE TPAMI (model Q, Alg. 2)")
    search_space = SPACE_Q
    param_constraints = COMMON_CONSTRAINTS
    convex = False
    target_kinds, shift_invariant_loss = ("binary",), True  # the pairwise AUC loss
    supports_warm_start = False
    use_group = True
    group_reg = "tfcl"

    def __init__(self, lam_common: float = 10.0, lam_group: float = 0.05, lam_ridge: float = 1e-3,
                 lam_personal: float = 1.0, k: int = 4, loss: str = "auc",
                 lam_scale: str = "data", schedule: str = "gauss-seidel",
                 accelerate: bool = True, polish: bool = True, max_iter: int = 2000,
                 tol: float = 1e-6, c_factor: float = 1.01,
                 eig_rtol: float = DEFAULT_EIG_RTOL):
        self.lam_common = lam_common
        self.lam_group = lam_group
        self.lam_ridge = lam_ridge
        self.lam_personal = lam_personal
        self.k = k
        self.loss = loss
        self.lam_scale = lam_scale
        self.schedule = schedule
        self.accelerate = accelerate
        self.polish = polish
        self.max_iter = max_iter
        self.tol = tol
        self.c_factor = c_factor
        self.eig_rtol = eig_rtol

    # ------------------------------------------------------------------ helpers
    def _validate(self) -> None:
        validate_declared(self)
        check_common(self.name, self.k, self.max_iter, self.tol, self.c_factor, self.eig_rtol,
                     lam_common=self.lam_common, lam_group=self.lam_group,
                     lam_ridge=self.lam_ridge, lam_personal=self.lam_personal)
        check_lam_scale(self.name, self.lam_scale)
        if self.schedule not in ("gauss-seidel", "jacobi"):
            raise ValueError(f"{self.name}: schedule must be 'gauss-seidel' or 'jacobi', "
                             f"got {self.schedule!r}")

    def _group_penalty(self, tg: np.ndarray, D) -> float:
        if not self.use_group:
            return 0.0
        if self.group_reg == "cocmtl":
            return float(self.alpha_["group"] * cocluster_penalty(tg, int(self.k)))
        return float(self.alpha_["group"] * np.sum(np.abs(tg) * D))

    def _objective(self, Jv, tc, tg, tp, D, group_penalty: float | None = None) -> float:
        """(Q) at (Theta, U); ``group_penalty`` when already known (TFCL(Coc): the value of the
        co-cluster term at a prox output comes with the prox)."""
        a = self.alpha_
        if group_penalty is None:
            group_penalty = self._group_penalty(tg, D)
        return float(Jv + 0.5 * a["common"] * tc @ tc + group_penalty
                     + 0.5 * a["ridge"] * np.sum(tg * tg)
                     + a["personal"] * np.sum(np.linalg.norm(tp, axis=0)))

    def _alphas(self, J, G0: np.ndarray, n_graph: int, T: int) -> dict:
        """The (Q) weights actually used (see "Hyperparameter scales" in the module docstring)."""
        lam = {"common": float(self.lam_common), "group": float(self.lam_group),
               "ridge": float(self.lam_ridge), "personal": float(self.lam_personal)}
        if self.lam_scale == "absolute":
            return lam
        rscale = ridge_scale(J)
        if self.group_reg == "cocmtl":
            gscale = rscale                    # sigma_i^2 penalty: a ridge on the tail
        else:
            gscale = group_scale(G0, n_graph)
        pscale = float(np.max(np.linalg.norm(G0, axis=0))) if G0.size else 1.0
        return {"common": lam["common"] * T * rscale, "group": lam["group"] * gscale,
                "ridge": lam["ridge"] * rscale, "personal": lam["personal"] * pscale}

    def _prox_g(self, V: np.ndarray, C: float, D) -> tuple[np.ndarray, float | None]:
        """(Prox_g) and, for TFCL(Coc), the co-cluster penalty alpha_2 Omega of its output."""
        a2, a3 = self.alpha_["group"], self.alpha_["ridge"]
        if self.group_reg == "cocmtl":
            sc = 1.0 + a3 / C
            basis = self.__dict__.get("_row_basis")
            if basis is None:
                X, omega = prox_cocluster_with_value(V / sc, (a2 / C) / sc, int(self.k))
                return X, a2 * omega
            X, _, top = prox_cocluster_with_truncation(V / sc, (a2 / C) / sc, int(self.k))
            X = nullspace_mm_step(X, top, basis, a2, a3)
            return X, a2 * cocluster_penalty(X, int(self.k))
        return tfcl_wstep(V, D, a2, a3, C), None

    def _sweep(self, J, tc, tg, tp, R, G, D, timings):
        """One pass of Alg. 2's proximal steps (c, p, g) from (tc, tg, tp), where J has
        residuals R and gradient G; returns the new blocks, W, J, its residuals and gradient
        at the new W, and the group penalty if the prox gave it."""
        gs = self.schedule == "gauss-seidel"
        Cc, Cg, Cp = self.C_["common"], self.C_["group"], self.C_["personal"]
        t0 = time.perf_counter()
        tc_new = SquaredFrobenius(self.alpha_["common"]).prox(tc - G.sum(1) / Cc, Cc)  # (Prox_c)
        t1 = time.perf_counter()
        timings["prox"] += t1 - t0
        if gs:
            # the residuals are linear in W: a shared shift of every task's weights costs one
            # matrix-vector product, not a pass
            R = J.shift(R, tc_new - tc)
            G = J.grad_of(R)
            timings["gradient"] += time.perf_counter() - t1
        tc = tc_new
        t1 = time.perf_counter()
        tp_new = prox_group_cols(tp - G / Cp, self.alpha_["personal"] / Cp)     # (Prox_p)
        # theta_p often stays exactly 0 (no personal user): then W and the gradient are
        # unchanged and the Gauss-Seidel re-evaluation is skipped (same iterate, exactly).
        tp_moved = not (np.array_equal(tp_new, tp))
        tp = tp_new
        t2 = time.perf_counter()
        timings["prox"] += t2 - t1
        penalty = None
        if self.use_group:
            if gs and tp_moved:
                G = J.grad(tc[:, None] + tg + tp)
                timings["gradient"] += time.perf_counter() - t2
            t2 = time.perf_counter()
            tg, penalty = self._prox_g(tg - G / Cg, Cg, D)                      # (Prox_g)
            timings["prox"] += time.perf_counter() - t2
        t3 = time.perf_counter()
        W = tc[:, None] + tg + tp
        R = J.forward(W)
        Jv, G = J.value_of(R), J.grad_of(R)
        timings["gradient"] += time.perf_counter() - t3
        return tc, tg, tp, W, Jv, R, G, penalty

    # ------------------------------------------------------------------ fit
    def fit(self, tasks: TaskSet, init=None) -> "TFCLQ":
        with threadpool_limits(limits=1 if tasks.d + tasks.T <= 1000 else None):
            return self._fit(tasks)

    def _fit(self, tasks: TaskSet) -> "TFCLQ":
        J, use_tfcl, graph, stepper, mm_bases = self._prepare(tasks)
        d, T, k = tasks.d, tasks.T, int(self.k)
        tc, tg, tp = np.zeros(d), np.zeros((d, T)), np.zeros((d, T))
        prev = (tc, tg, tp)
        W = tc[:, None] + tg + tp
        R = J.forward(W)
        Jv, G = J.value_of(R), J.grad_of(R)
        R_prev, G_prev = R, G
        obj_hist, dw_hist, du_hist, embeds = [], [], [], []
        timings = {"ustep": 0.0, "gradient": 0.0, "prox": 0.0, "polish": 0.0}
        u = u_prev = D = None
        counts = {"extrapolated": 0, "restart": 0, "plain": 0, "polished": 0, "rejected": 0}
        stable, next_polish = 0, 0
        f_last = self._objective(Jv, tc, tg, tp, np.zeros((d, T)))
        t_k, converged, it = 1.0, False, 0
        for it in range(1, self.max_iter + 1):
            W_old = W
            if use_tfcl:
                # U^t minimises F(Theta^{t-1}, .): Thm. eigsol on L(theta_g^{t-1}) (graph
                # columns only; UStepper skips the eigensolver where the last one proves it).
                t0 = time.perf_counter()
                u = stepper(graph.rows(tg))
                D = graph.distances(u)
                timings["ustep"] += time.perf_counter() - t0
                f_ref = self._objective(Jv, tc, tg, tp, D)     # F(Theta^{t-1}, U^t)
            else:
                f_ref = f_last
            new = None
            # polishing applies while theta_p = 0 and U and the support of theta_g are unchanged
            # (not to TFCL(Coc): its co-cluster term is not piecewise quadratic; majorise-
            # minimise steps on it ended at 0.04-2 % higher objectives than Alg. 2's path)
            stable = stable + 1 if (self.group_reg != "cocmtl"
                                    and (not use_tfcl or (u_prev is not None
                                                          and same_components_only(u, u_prev)))
                                    and np.array_equal(tg != 0, prev[1] != 0)
                                    and np.array_equal(tp.any(0), prev[2].any(0))) else 0
            if self.polish and stable >= _POLISH_AFTER and it >= next_polish:
                t1 = time.perf_counter()
                new = self._polish(tasks, J, tc, tg, tp, D, f_ref, u, stepper, graph)
                timings["polish"] += time.perf_counter() - t1
                if new is None:
                    counts["rejected"] += 1
                    next_polish = it + _POLISH_AFTER * 2 ** counts["rejected"]
                else:
                    f_new, t_k = new[-1], 1.0     # the next sweep is Alg. 2's plain sweep
                    new = new[:-1]
                    counts["polished"] += 1
                    next_polish = it + _POLISH_AFTER     # the plain sweep certifies it
            if new is None:
                new, f_new, t_k, outcome = self._theta_step(J, (tc, tg, tp), prev, R, R_prev, G,
                                                            G_prev, D, f_ref, t_k, timings)
                counts[outcome] += 1
            prev, R_prev, G_prev = (tc, tg, tp), R, G
            tc, tg, tp, W, Jv, R, G, _ = new
            obj_hist.append(f_new)
            report_progress(it, f_new)
            f_last = f_new
            dw = float(np.linalg.norm(W - W_old))
            dw_hist.append(dw)
            if use_tfcl:
                du_hist.append(ustep_diff_norm(u, u_prev) if u_prev is not None else float("nan"))
                if it <= _N_EMBED_ITERS:
                    embeds.append(graph.embedding(u, k))
                u_prev = u
            if (mm_bases is not None and it > 1 and "_row_basis" not in self.__dict__
                    and abs(obj_hist[-2] - obj_hist[-1]) <= _MM_START * max(1.0, abs(f_new))):
                self._row_basis = mm_bases
            if it > 1 and stop_rule(obj_hist[-2], obj_hist[-1], dw, float(np.linalg.norm(W)),
                                    self.tol):
                converged = True
                break
        self.theta_c_, self.theta_g_, self.theta_p_ = tc, tg, tp
        self.coef_ = W
        self.n_iter_ = it
        self.converged_ = converged
        self.objective_history_ = obj_hist
        self.w_change_history_ = dw_hist
        self._finish(tasks, use_tfcl, stepper, graph, du_hist, embeds, timings, counts)
        return self

    def _prepare(self, tasks: TaskSet):
        """The loss, whether the TFCL co-grouping block is used, the graph of its columns, the
        U-stepper and TFCL(Coc)'s row-space bases (None unless its majorise-minimise step
        applies); stores the block constants ``C_``, the alphas ``alpha_`` and
        ``graph_columns_``."""
        self._validate()
        d, T, k = tasks.d, tasks.T, int(self.k)
        J = make_loss(tasks, self.loss, self.name)
        use_tfcl = self.use_group and self.group_reg == "tfcl"
        cols = graph_columns(J) if use_tfcl else None
        n_graph = (d if cols is None else cols.size) + T
        if use_tfcl and k > n_graph:
            raise ValueError(f"{self.name}: k must be <= the number of graph nodes (features "
                             f"the loss depends on + tasks) = {n_graph}, got {k}")
        if self.use_group and self.group_reg == "cocmtl" and k > min(d, T):
            raise ValueError(f"{self.name}: k must be <= min(d, T) = {min(d, T)}, got {k}")
        Lmax = float(J.lipschitz)
        Lc = tasks.memo(("tfcl", "common_lipschitz", self.loss, 2),
                        lambda: common_lipschitz(J, d, T))
        if self.schedule == "jacobi":
            Cc = Cg = Cp = self.c_factor * (T + 2) * Lmax
        else:
            Cc = self.c_factor * Lc
            Cg = Cp = self.c_factor * Lmax
        self.C_ = {"common": Cc, "group": Cg, "personal": Cp}
        self.alpha_ = self._alphas(J, loss_at_zero(tasks, J, self.loss), n_graph, T)
        self.graph_columns_ = np.arange(d) if cols is None else cols
        stepper = UStepper(k, self.eig_rtol) if use_tfcl else None
        mm_bases = None
        if (self.polish and self.use_group and self.group_reg == "cocmtl" and 1 <= k < min(d, T)
                and 2 * self.alpha_["group"] + self.alpha_["ridge"] <= _MM_STEP_RATIO * Cg):
            mm_bases = tasks.memo(("tfcl", "row_space_bases", self.loss, 1),
                                  lambda: row_space_bases(J))
            if all(np.all(Vh.any(axis=2).sum(axis=1) == d) for _, Vh in mm_bases):
                mm_bases = None           # every row space is R^d: no part the loss misses
        return J, use_tfcl, GraphView(d, cols), stepper, mm_bases

    def _theta_step(self, J, blocks, prev, R, R_prev, G, G_prev, D, f_ref, t_k, timings):
        """The sweep of one iteration: the accelerated try from the extrapolated point,
        accepted if F(., U^t) does not exceed ``f_ref``, else Alg. 2's plain sweep.  Returns
        (the sweep's output, F, t_k, "extrapolated" / "restart" / "plain")."""
        outcome = "plain"
        if self.accelerate and t_k > 1.0:
            t_next, beta = momentum_next(t_k)
            Y = [b + beta * (b - q) for b, q in zip(blocks, prev)]
            # J is quadratic: its residuals and gradient at the extrapolated point are
            # exact by linearity.
            R_Y = J.combine(R, R_prev, beta)
            cand = self._sweep(J, *Y, R_Y, G + beta * (G - G_prev), D, timings)
            f_try = self._objective(cand[4], cand[0], cand[1], cand[2], D, cand[7])
            if f_try <= f_ref:
                return cand, f_try, t_next, "extrapolated"
            outcome = "restart"
        # Alg. 2's sweep from Theta^{t-1}: each block step is majorise-minimise.
        new = self._sweep(J, *blocks, R, G, D, timings)
        f_new = self._objective(new[4], new[0], new[1], new[2], D, new[7])
        t_k = momentum_next(1.0)[0] if self.accelerate else 1.0
        return new, f_new, t_k, outcome

    def _finish(self, tasks, use_tfcl, stepper, graph, du_hist, embeds, timings, counts) -> None:
        """The fitted attributes beyond Theta and the histories: the final U-step (groups,
        lazily), the personal users and the diagnostics."""
        self.__dict__.pop("_group_cache", None)
        self.__dict__.pop("_row_basis", None)
        self.__dict__.pop("_group_state", None)
        if use_tfcl:
            self.u_change_history_ = du_hist
            self.embeddings_ = embeds
            u_final = stepper(graph.rows(self.theta_g_))
            self.ustep_ = u_final
            self._group_state = (u_final, int(self.k), graph)    # groups: lazy
        outliers = np.flatnonzero(np.linalg.norm(self.theta_p_, axis=0) > 0)
        self.diagnostics_ = {
            "timings": timings, "iterations": self.n_iter_, "converged": self.converged_,
            "extrapolated_steps": counts["extrapolated"], "momentum_restarts": counts["restart"],
            "C": dict(self.C_), "alpha": dict(self.alpha_),
            "personal_users": [tasks.task_names[i] for i in outliers[:50]],
            "n_personal_users": int(outliers.size),
            "final_ustep_case": self.ustep_.case if use_tfcl else None,
            "graph_features": int(self.graph_columns_.size) if use_tfcl else None,
            "eigensolver_calls": stepper.calls["eigensolver"] if use_tfcl else None,
            "polished": counts["polished"], "polish_rejected": counts["rejected"],
        }

    def _polish(self, tasks, J, tc, tg, tp, D, f_ref, u, stepper, graph):
        """The minimiser of F(., U^t) with theta_g on its current support and signs, theta_c
        and theta_p free (``_tfcl.polish.PersonalStructure``, Newton's method on theta_c from
        the current one; while no user is personal, the quadratic problem with theta_p = 0,
        ``FixedStructure``), if it minimises the whole convex subproblem in Theta (signs kept,
        zero entries of theta_g optimal, every user's theta_p optimal, theta_c stationary),
        does not increase F and gives back the same U (a fixed point of Alg. 2); else None.
        The signs of theta_g are those of the current iterate, then (up to
        ``_POLISH_ROUNDS`` times) those of the last solve.  Returns the blocks, W, J, its
        residuals, gradient, None and F."""
        a = self.alpha_
        mask = signs = threshold = None
        if self.use_group:
            mask = tg != 0
            signs = np.sign(tg)
            threshold = a["group"] * D
        d, T = tasks.d, tasks.T
        # (tasks with more rows than features: the same problem on d rows, ``compact_loss``)
        Jc = tasks.memo(("tfcl", "compact_loss", self.loss, 1), lambda: compact_loss(J))
        if tp.any():
            spectra = tasks.memo(("tfcl", "row_space_spectra", self.loss, 2),
                                 lambda: row_space_spectra(Jc))
            solve = PersonalStructure(Jc, mask, a["ridge"], a["common"], a["personal"],
                                      spectra).solve
        else:
            # no personal user: the quadratic problem, one linear solve (``FixedStructure``);
            # if a user's theta_p = 0 is not optimal there, kkt_ok rejects it
            fixed = FixedStructure(Jc, mask, a["ridge"], a["common"])

            def solve(lin, c0):
                return (*fixed.solve(lin), np.zeros((d, T)))
        c0 = tc
        for _ in range(_POLISH_ROUNDS):
            sol = solve(None if mask is None else threshold * signs, c0)
            if sol is None:
                return None
            tc_c, tg_c, tp_c = sol
            if tg_c is None:
                tg_c = np.zeros((d, T))
            W = tc_c[:, None] + tg_c + tp_c
            R = J.forward(W)
            Jv, G = J.value_of(R), J.grad_of(R)
            if (kkt_ok(G, tg_c, mask, signs, threshold, a["personal"])
                    and kkt_shared_personal_ok(G, tc_c, a["common"], tp_c, a["personal"])):
                break
            if mask is None:
                return None
            signs = np.where(mask, np.sign(tg_c), 0.0)
            c0 = tc_c
        else:
            return None
        f_c = self._objective(Jv, tc_c, tg_c, tp_c, D)
        if not f_c <= f_ref:
            return None
        if u is not None and not same_components_only(stepper(graph.rows(tg_c)), u):
            return None
        return tc_c, tg_c, tp_c, W, Jv, R, G, None, f_c


class TFCLQNoAUC(TFCLQ):
    """TFCL-Q with the instance-wise squared loss (ablation "w/o AUC")."""

    name = "tfcl-q-noauc"
    cost_hint = 3.6  # s per unit on the reference problem (mtlbench.runner.cost)
    ablation_of = "tfcl-q"
    target_kinds, shift_invariant_loss = ("binary", "real"), False
    ablation_label = "w/o AUC loss"
    paper = TFCLQ.paper + "; ablation without the AUC loss"
    search_space = SPACE_Q_NOAUC

    def __init__(self, lam_common: float = 10.0, lam_group: float = 0.08, lam_ridge: float = 1e-3,
                 lam_personal: float = 1.0, k: int = 4, loss: str = "squared",
                 lam_scale: str = "data", schedule: str = "gauss-seidel",
                 accelerate: bool = True, polish: bool = True, max_iter: int = 2000,
                 tol: float = 1e-6, c_factor: float = 1.01,
                 eig_rtol: float = DEFAULT_EIG_RTOL):
        super().__init__(lam_common=lam_common, lam_group=lam_group, lam_ridge=lam_ridge,
                         lam_personal=lam_personal, k=k, loss=loss, lam_scale=lam_scale,
                         schedule=schedule, accelerate=accelerate, polish=polish,
                         max_iter=max_iter, tol=tol, c_factor=c_factor, eig_rtol=eig_rtol)


class TFCLQNoG(TFCLQ):
    """TFCL-Q without theta_g (ablation "w/o G"): W_t = theta_c + theta_p[:, t]; ``k`` is
    unused."""

    name = "tfcl-q-nog"
    cost_hint = 1.9  # s per unit on the reference problem (mtlbench.runner.cost)
    ablation_of = "tfcl-q"
    ablation_label = "w/o theta_g"
    paper = TFCLQ.paper + "; ablation without the co-grouping component theta_g"
    search_space = SPACE_Q_NOG
    use_group = False

    def __init__(self, lam_common: float = 0.03, lam_group: float = 0.05, lam_ridge: float = 1e-3,
                 lam_personal: float = 0.1, k: int = 4, loss: str = "auc",
                 lam_scale: str = "data", schedule: str = "gauss-seidel",
                 accelerate: bool = True, polish: bool = True, max_iter: int = 2000,
                 tol: float = 1e-6, c_factor: float = 1.01,
                 eig_rtol: float = DEFAULT_EIG_RTOL):
        super().__init__(lam_common=lam_common, lam_group=lam_group, lam_ridge=lam_ridge,
                         lam_personal=lam_personal, k=k, loss=loss, lam_scale=lam_scale,
                         schedule=schedule, accelerate=accelerate, polish=polish,
                         max_iter=max_iter, tol=tol, c_factor=c_factor, eig_rtol=eig_rtol)


class TFCLCoc(TFCLQ):
    """TFCL-Q with the co-grouping regulariser replaced by CoCMTL's (ablation "TFCL(Coc)")."""

    name = "tfcl-coc"
    cost_hint = 24.3  # s per unit on the reference problem (mtlbench.runner.cost)
    ablation_of = "tfcl-q"
    ablation_label = "with CoCMTL's co-grouping term"
    paper = TFCLQ.paper + "; ablation with CoCMTL's co-cluster regulariser (TFCL(Coc))"
    search_space = SPACE_COC
    group_reg = "cocmtl"

    def __init__(self, lam_common: float = 0.1, lam_group: float = 0.1, lam_ridge: float = 1e-3,
                 lam_personal: float = 0.3, k: int = 4, loss: str = "auc",
                 lam_scale: str = "data", schedule: str = "gauss-seidel",
                 accelerate: bool = True, polish: bool = True, max_iter: int = 2000,
                 tol: float = 1e-6, c_factor: float = 1.01,
                 eig_rtol: float = DEFAULT_EIG_RTOL):
        super().__init__(lam_common=lam_common, lam_group=lam_group, lam_ridge=lam_ridge,
                         lam_personal=lam_personal, k=k, loss=loss, lam_scale=lam_scale,
                         schedule=schedule, accelerate=accelerate, polish=polish,
                         max_iter=max_iter, tol=tol, c_factor=c_factor, eig_rtol=eig_rtol)


@hookimpl
def register_models(register):
    for cls in (TFCLQ, TFCLQNoAUC, TFCLQNoG, TFCLCoc):
        register(cls)
