"""GO-MTL: task grouping and overlap through a shared latent basis.

A. Kumar and H. Daume III, "Learning Task Grouping and Overlap in Multi-Task Learning",
Proceedings of the 29th International Conference on Machine Learning (ICML), 2012.  Each task
is a sparse combination of k latent basis tasks, W = L S (W of shape d x T, column t = task t;
L d x k, S k x T with column s_t for task t)::

    F(L, S) = J(L S) + mu ||S||_1 + lam ||L||_F^2                      (the paper's eq. 2)

    J(W) = sum_t 1/2 ||y_t - X_t w_t||^2                 (``gomtl``: squared loss), or
    J(W) = sum_t sum_i log(1 + exp(-y_ti x_ti^T w_t))    (``gomtl-logistic``: labels +-1)

Solver (the paper's alternating minimisation; F is convex in each block, not jointly):
* S-step (L fixed): the T LASSO problems min_s l_t(X_t L s) + mu ||s||_1 on the reduced
  designs X_t L (n_t x k), all T at once in k dimensions by proximal Newton (``_core.newton``:
  per-task k x k Hessians, coordinate descent on the quadratic model with exact solves on
  each task's orthant face, per-task backtracking); for the squared loss the model is exact
  (``_core.factored.TaskQuadratics``: the k x k Gram matrices of X_t L, every evaluation
  O(T k^2)); certified by their duality gap (relative, <= ``inner_tol``, 1e-8; one dual scale
  per task), warm-started from the current S;
* L-step (S fixed): min_L J(L S) + lam ||L||_F^2, strongly convex in L: for the squared loss
  preconditioned conjugate gradients on its normal equations (``_core.quadratic``; no dk x dk
  matrix), for the logistic loss L-BFGS; both preconditioned by the Kronecker approximation
  of the Hessian, c0 A (x) S S^T + 2 lam (A = mean_t X_t^T X_t, c0 = 1 squared, 1/4
  logistic: the sup of the loss's second derivative), certified by a duality gap
  (<= ``inner_tol``) and warm-started from the current L.
* line search (from the second iteration on, except after an iteration whose decrease met
  the stopping rule): along the iteration's move (L, S) - (L0, S0),
  F at (L, S) + b ((L, S) - (L0, S0)) for b = beta, 2 beta, 4 beta, ... while it decreases,
  the best point taken if it is below F(L, S) (the extrapolation of alternating least
  squares: R. Bro, "Multi-way analysis in the food industry", PhD thesis, 1998; A. Ang and
  N. Gillis, Neural Computation 31, 2019); beta starts at 1, is the accepted b afterwards
  and a quarter of it (at least 1/16) after a failure.  Along the slow, curved valleys of the
  alternation it takes steps the block solves would need many iterations for.
Both solvers start at the current block and never increase their objective, and a line
search point is taken only below F, so F never increases along the iterations (tested).
``objective_history_`` holds F after every block step and every accepted line search point
(two or three values per iteration).  Initialisation (the paper's): L = the top-k left singular
vectors of the single-task solutions W_stl, here the per-task ridge solutions of the squared
loss with weight c = mean_t tr(X_t^T X_t) / d (one ridge per unit, cached; used for both
losses: it seeds the subspace only); then S-step, L-step, ...  Warm-started only within one
fit: ``convex = False``, every fit of a search starts from this initialisation.

Stopping rule: the relative decrease of F over one iteration (S-step, L-step and line
search) is at most ``tol`` (1e-6), at an iteration whose line search did not move (so the
result is the L-step's, L optimal for S); ``converged_`` says whether it held within
``max_iter`` (1000) iterations with the last two block solves certified.  No certificate of
a global minimum (non-convex).

Search space.  Scale invariance: (L, S) -> (a L, S / a) leaves J unchanged and maps the
penalties of (mu, lam) to those of (mu / a, lam a^2), so the minimisers in W depend on mu and
lam only through mu^2 lam; one of them is redundant and lam is fixed (``lam_ratio`` = 1, not
searched): lam = lam_ratio mu0^2 / c, mu0 = max |L0^T grad J(0)| (L0 the initial basis).
``mu_ratio`` = mu / mu0, Log, bounds (0, 1]: at mu >= mu0 the first S-step gives S = 0 and
then L = 0 (W = 0, a fixed point); start range [0.03, 0.5].  ``k`` Int, bounds
[1, min(d, T)] (a basis of more than min(d, T) vectors adds nothing W = L S can represent);
start range [2, 16].  Design data: the selections on synthetic-attributes[seed=101]/attr0
(k = 4, mu_ratio 0.05 squared, 0.11 logistic) and simulated[seed=101] reps 0-1 (squared:
k = 10, mu_ratio 0.08 - 0.11; logistic: k = 11 and 21, mu_ratio 0.23 - 0.34, k = 21 found
by extending past the start range) have worse points on both sides: no edge, bound or
degenerate selection.

Unverified (the search tool gave the paper's abstract only, which confirms W = L S with sparse
codes and the alternating optimisation; the rest from its published description): the
equation number, the paper's per-block solvers (it cites a two-metric projection method for
the S-step and closed forms / Newton steps for L), its single-task learners for W_stl (here a
ridge for both losses), and whether its loss is averaged per task.
"""
from __future__ import annotations

import numpy as np

from mtlbench import Int, LinearMTLModel, Log, TaskSet, hookimpl, report_progress

from ._core.datafits import LogisticLoss, SquaredLoss
from ._core.factored import Factored, reduced_squared
from ._core.newton import ProxNewton
from ._core.penalties import L1, SquaredFrobenius
from ._core.quadratic import ConjugateGradient, KroneckerPreconditioner
from ._core.representations import padded_task_rows, task_grams
from ._core.solvers import Result, lbfgs

__all__ = ["GOMTL", "GOMTLLogistic", "gomtl_objective"]

_MEMO_KEY = ("gomtl.stl-basis", 1)
_GRAM_KEY = ("gomtl.mean-gram-eig", 1)


def gomtl_objective(J, L: np.ndarray, S: np.ndarray, mu: float, lam: float) -> float:
    """F(L, S) = J(L S) + mu ||S||_1 + lam ||L||_F^2 for a datafit J."""
    return J.value(L @ S) + L1(mu).value(S) + SquaredFrobenius(2.0 * lam).value(L)


def _stl_basis(tasks: TaskSet) -> tuple[np.ndarray, float]:
    """(left singular vectors of the per-task ridge solutions, descending; the ridge weight
    c = mean_t tr(X_t^T X_t) / d), once per TaskSet."""
    def compute():
        sq = SquaredLoss(tasks)
        c = max(float(sq.curvature), 1e-12)
        U = np.linalg.svd(sq.ridge(c), full_matrices=False)[0]
        return U, c
    return tasks.memo(_MEMO_KEY, compute)


def _mean_gram_eig(tasks: TaskSet) -> tuple[np.ndarray, np.ndarray]:
    """The eigenpairs of mean_t X_t^T X_t (the L-steps' preconditioner), once per TaskSet."""
    def compute():
        A = sum(tasks.X(t).T @ tasks.X(t) for t in range(tasks.T)) / max(tasks.T, 1)
        return np.linalg.eigh(A)
    return tasks.memo(_GRAM_KEY, compute)


class GOMTL(LinearMTLModel):
    """GO-MTL with the squared loss: W = L S, L a d x k basis, S sparse k x T codes."""

    name = "gomtl"
    cost_hint = 8.9  # s per unit on the reference problem (mtlbench.runner.cost)
    paper = ("Kumar, Daume III, Learning Task Grouping and Overlap in Multi-Task Learning, "
             "ICML 2012")
    search_space = {"mu_ratio": Log([0.03, 0.5], low=None, high=1.0),
                    "k": Int([2, 16], low=1, high="min(d, T)")}
    param_constraints = {"lam_ratio": Log([1.0], low=0.0), "tol": Log([1e-6], low=0.0),
                         "inner_tol": Log([1e-8], low=0.0), "max_iter": Int([1000], low=1)}
    group = "classic"          # --models classic; not in the default job
    default_run = False
    convex = False
    target_kinds = ("binary", "real")
    solver_name = "alternating"

    def __init__(self, mu_ratio: float = 0.1, k: int = 5, lam_ratio: float = 1.0,
                 tol: float = 1e-6, inner_tol: float = 1e-8, max_iter: int = 1000):
        self.mu_ratio = mu_ratio
        self.k = k
        self.lam_ratio = lam_ratio
        self.tol = tol
        self.inner_tol = inner_tol
        self.max_iter = max_iter

    def _datafit(self, tasks: TaskSet):
        return SquaredLoss(tasks, wide="padded")

    #: the L-step preconditioner's curvature per unit of the mean Gram matrix (sup of l'')
    curvature_scale = 1.0

    def _preconditioner(self, tasks: TaskSet, S: np.ndarray, lam: float):
        a, U = _mean_gram_eig(tasks)
        return KroneckerPreconditioner((self.curvature_scale * a, U), S @ S.T, 2.0 * lam)

    def _l_step(self, tasks: TaskSet, J, L: np.ndarray, S: np.ndarray, lam: float) -> Result:
        """min_L J(L S) + lam ||L||_F^2 from L: preconditioned conjugate gradients on the
        normal equations, certified by the duality gap."""
        return ConjugateGradient(tol=float(self.inner_tol), report=False).solve(
            Factored(J, right=S), SquaredFrobenius(2.0 * lam), L,
            precondition=self._preconditioner(tasks, S, lam))

    def _s_step(self, tasks: TaskSet, J, L: np.ndarray, S: np.ndarray, mu: float):
        """The T LASSO problems on the reduced designs X_t L (n_t x k), in k dimensions (their
        k x k Gram matrices): coordinate descent (one exact proximal Newton step), certified
        by the duality gap."""
        X3, y3, _ = padded_task_rows(tasks)
        Jk = reduced_squared(L, X3, y3, lambda: task_grams(tasks))
        return ProxNewton(tol=float(self.inner_tol), report=False).solve(Jk, L1(mu), S)

    def fit(self, tasks: TaskSet, init=None) -> "GOMTL":
        self.check_params()
        k = int(self.k)
        if k > min(tasks.d, tasks.T):
            raise ValueError(f"{self.name}: k = {k} exceeds min(d, T) = {min(tasks.d, tasks.T)}")
        J = self._datafit(tasks)
        U, c = _stl_basis(tasks)
        L = U[:, :k].copy()
        mu0 = L1.dual_norm(Factored(J, left=L).grad(np.zeros((k, tasks.T))))
        mu = float(self.mu_ratio) * mu0
        lam = float(self.lam_ratio) * mu0 ** 2 / c
        S = np.zeros((k, tasks.T))
        ridge = SquaredFrobenius(2.0 * lam)
        F = gomtl_objective(J, L, S, mu, lam)
        hist, ok, done, it = [float(F)], True, False, 0
        beta = 1.0
        polish = False
        for it in range(1, int(self.max_iter) + 1):
            F_start, L0, S0 = F, L, S
            rs = self._s_step(tasks, J, L, S, mu)
            S = rs.W
            hist.append(float(rs.history[-1] + ridge.value(L)))
            rl = self._l_step(tasks, J, L, S, lam)
            L = rl.W
            F = float(rl.history[-1] + L1(mu).value(S))
            hist.append(F)
            ok = rs.converged and rl.converged
            moved = False
            if it > 1 and not polish:
                L, S, F, beta, moved = self._extrapolate(J, (L0, S0), (L, S), F, beta, mu,
                                                         lam, hist)
            report_progress(it, F)
            small = F_start - F <= float(self.tol) * max(abs(F), 1e-300)
            done = small and not moved
            if done:
                break
            polish = small
        self.L_, self.S_ = L, S
        self.coef_ = L @ S
        self.mu_, self.lam_ = mu, lam
        self.objective_history_ = hist
        self.n_iter_ = it
        self.converged_ = bool(done and ok)
        self.diagnostics_ = {"mu": mu, "lam": lam, "k": k, "converged": self.converged_,
                             "active_bases": int(np.count_nonzero(np.abs(S).sum(axis=1)))}
        self.task_groups_ = (np.argmax(np.abs(S), axis=0) if S.any()
                             else np.zeros(tasks.T, dtype=int))
        return self

    @staticmethod
    def _extrapolate(J, start, end, F, beta, mu, lam, hist):
        """The line search along the iteration's move (start -> end, F at the end): F at
        end + b (end - start) for b = beta, 2 beta, 4 beta, ... while it decreases; the best
        point is taken (and appended to ``hist``) if F is below the end's, and the next
        iteration starts at its b, else at beta / 4 (at least 1/16).  Returns (L, S, F,
        beta, whether the point moved)."""
        (L0, S0), (L1, S1) = start, end
        dL, dS = L1 - L0, S1 - S0
        best, b = None, beta
        while True:
            Le, Se = L1 + b * dL, S1 + b * dS
            Fe = gomtl_objective(J, Le, Se, mu, lam)
            if not Fe < (F if best is None else best[2]):
                break
            best, b = (Le, Se, Fe, b), 2.0 * b
        if best is None:
            return L1, S1, F, max(beta / 4.0, 1.0 / 16.0), False
        hist.append(float(best[2]))
        return (*best, True)

    def fitted_objective(self, tasks: TaskSet) -> float:
        """F(L_, S_) from scratch on ``tasks``."""
        return gomtl_objective(self._datafit(tasks), self.L_, self.S_, self.mu_, self.lam_)


class GOMTLLogistic(GOMTL):
    """GO-MTL with the logistic loss (labels in {-1, +1}); no intercept (the paper's)."""

    name = "gomtl-logistic"
    cost_hint = 31.2
    target_kinds = ("binary",)

    def _datafit(self, tasks: TaskSet):
        return LogisticLoss(tasks)

    curvature_scale = 0.25

    def _l_step(self, tasks: TaskSet, J, L: np.ndarray, S: np.ndarray, lam: float) -> Result:
        """min_L J(L S) + lam ||L||_F^2 from L (smooth, strongly convex): L-BFGS preconditioned
        by the Kronecker approximation of its Hessian (mean Gram / 4 (x) S S^T + 2 lam),
        stopped when the relative duality gap is <= ``inner_tol``."""
        JL, ridge = Factored(J, right=S), SquaredFrobenius(2.0 * lam)
        M = self._preconditioner(tasks, S, lam)
        shape = L.shape
        out = {}
        last = {}

        def fun(x):
            X = x.reshape(shape)
            Z = JL.forward(X)
            f, G = JL.value_of(Z), JL.grad_of(Z)
            last.update(x=x, Z=Z, f=f, G=G)
            return f + ridge.value(X), (G + ridge.grad(X)).ravel()

        def check(x):
            # lbfgs checks the point it evaluated last: its margins, J and grad J are reused
            X = x.reshape(shape)
            if last.get("x") is x:
                Z, f, G = last["Z"], last["f"], last["G"]
            else:
                Z = JL.forward(X)
                f, G = JL.value_of(Z), JL.grad_of(Z)
            pen = ridge.value(X)
            gap = JL.gap(Z, X, pen + ridge.conjugate(-G), 1.0, G, f)
            out["cert"] = gap / max(abs(f + pen), 1e-300)
            return out["cert"] <= float(self.inner_tol)

        x, f, it, _, ok = lbfgs(fun, L.ravel(), max_iter=5000, check=check, check_every=5,
                                precondition=lambda x, v: M(v.reshape(shape)).ravel())
        return Result(x.reshape(shape), [float(f)], it, float(out.get("cert", np.inf)), "gap",
                      bool(ok))

    def _s_step(self, tasks: TaskSet, J, L: np.ndarray, S: np.ndarray, mu: float):
        """The T L1-regularised logistic regressions on the reduced designs X_t L (k-dim):
        proximal Newton, certified by the duality gap."""
        return ProxNewton(tol=float(self.inner_tol), report=False).solve(J.left_factor(L),
                                                                         L1(mu), S)


@hookimpl
def register_models(register):
    register(GOMTL)
    register(GOMTLLogistic)
