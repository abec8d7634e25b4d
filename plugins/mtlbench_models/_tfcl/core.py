"""Numerics shared by every TFCL-family fit (``tfcl.py``: problem (P); ``tfcl_q.py``: (Q)).

The W-step of Prop. sol (``tfcl_wstep``), the loss objects and the data scale of the
co-grouping weight (``make_loss``, ``loss_at_zero``, ``group_scale``), the parameter checks
(``validate_declared``, ``check_common``, ``check_lam_scale``, ``COMMON_CONSTRAINTS``), the
stopping rule (``stop_rule``) and FISTA's momentum sequence (``momentum_next``).
"""
from __future__ import annotations

import numpy as np

from mtlbench import Int, Linear, Log, TaskSet
from mtlbench.model import param_problems

from .._core.datafits import LeastSquares, SquaredAUCLoss, SquaredLoss
from .._core.penalties import prox_l1
from .ustep import DEFAULT_EIG_RTOL, UStep, groups_from_embedding

_N_EMBED_ITERS = 5


# ----------------------------------------------------------------------------- W-step
def tfcl_wstep(W_tilde: np.ndarray, D: np.ndarray, lam_group: float, lam_ridge: float,
               C: float) -> np.ndarray:
    """Prop. sol: argmin_W 1/2||W - W~||^2 + (a1/C) sum |W_ij| D_ij + a2/(2C) ||W||^2
    = sign(W~) max(|W~|/(1 + a2/C) - a1/(C + a2) D, 0): the ridge's shrinkage followed by the
    weighted soft threshold (``_core.penalties.prox_l1``)."""
    return prox_l1(W_tilde / (1.0 + lam_ridge / C), lam_group / (C + lam_ridge) * D)


# ------------------------------------------------------------------ losses, checks, stopping
def make_loss(tasks: TaskSet, loss: str, model_name: str) -> LeastSquares:
    """The loss of ``tasks`` as sum_t 1/2 ||Z_t w_t - c_t||^2 (``_core.datafits``, the
    ``buckets`` representation; built once per TaskSet object: ``tasks.memo``; it holds only
    data-derived, read-only arrays: the stacked Z_t, c_t, Lipschitz constants, the curvature
    scale, free columns)."""
    if loss == "auc":
        return tasks.memo(("tfcl", "SquaredAUCLoss", 3), lambda: SquaredAUCLoss(tasks))
    if loss == "squared":
        return tasks.memo(("tfcl", "squared", 3), lambda: SquaredLoss(tasks, "buckets"))
    raise ValueError(f"{model_name}: loss must be 'auc' or 'squared', got {loss!r}")


def graph_columns(J: LeastSquares) -> np.ndarray | None:
    """The features that are nodes of the task-feature graph: every column the loss depends
    on (None: all of them).  A column with Z_t[:, i] = 0 in every task (under the AUC loss: a
    feature constant within every task, such as a bias; under the squared loss: a column of
    zeros) has an exactly zero gradient row for every W; from W^0 = 0 its row of W stays 0
    (and it is 0 at every critical point, the ridge alpha_2 > 0 being its only term), so its
    node is isolated for ever.  Such nodes are left out of the graph: kept, each would be one
    more connected component, one more zero eigenvalue of L for every W, so that k <= c + 1
    (c = their number) would make the regulariser identically 0 and k would act as k - c."""
    if J.free_columns.size == 0:
        return None
    return np.setdiff1d(np.arange(J.d), J.free_columns)


def ridge_scale(J: LeastSquares) -> float:
    """The data scale of every ridge-type weight: the mean per-feature curvature of the loss,
    mean_t tr(H_t) / d_used (H_t = Z_t^T Z_t the Hessian of task t's loss, d_used the features
    the loss depends on; ``LeastSquares.curvature``).

    alpha = lam * ridge_scale: lam = 1 is a ridge as strong as the loss's average curvature per
    coordinate, whatever n_t / d is.  Why not the Lipschitz constant max_t ||H_t||_2: the
    largest eigenvalue of a task's Hessian measures its single stiffest direction, and its
    ratio to the average curvature grows as n_t approaches d (for isotropic rows
    ~ (1 + sqrt(d / n_t))^2: ~2.3 at n_t = 136, d = 80; ~4 at n_t = d), and the maximum over
    tasks is set by the one most extreme (smallest, or for the squared loss largest) task, so
    the same lam_ridge would mean a different ridge on every data set.  The
    trace is a sum over all directions, the mean over tasks weighs every task alike, and both
    scale exactly like the loss: multiplying all features by c multiplies the scale by c^2, so
    the fit at a given lam_ridge becomes W / c (same groups, same scores).  Computed once per
    training set (the loss object is ``TaskSet.memo``-ised)."""
    return float(J.curvature) if J.curvature > 0 else 1.0


class GraphView:
    """The task-feature graph of a fit: its feature nodes are the ``cols`` of W the loss depends
    on (``graph_columns``; None = every column).  Maps between W (d x T, all features) and the
    graph (the U-step sees rows ``cols`` only); free rows get D = 0, group -1 and a zero row of
    the spectral embedding (they have no node)."""

    def __init__(self, d: int, cols: np.ndarray | None) -> None:
        self.d, self.cols = d, cols

    def rows(self, W: np.ndarray) -> np.ndarray:
        return W if self.cols is None else W[self.cols]

    def _full_rows(self, A: np.ndarray, fill: float) -> np.ndarray:
        if self.cols is None:
            return A
        out = np.full((self.d,) + A.shape[1:], fill, dtype=A.dtype)
        out[self.cols] = A
        return out

    def distances(self, u: UStep) -> np.ndarray:
        """D (d x T) of Prop. sol."""
        return self._full_rows(u.distances(), 0.0)

    def embedding(self, u: UStep, k: int) -> np.ndarray:
        """Spectral embedding rows f_1..f_{d+T} (features first)."""
        E = u.embedding(k)
        if self.cols is None:
            return E
        return np.vstack([self._full_rows(E[:u.d], 0.0), E[u.d:]])

    def groups(self, u: UStep, k: int) -> tuple[np.ndarray, np.ndarray]:
        fg, tg = groups_from_embedding(u, k)
        return self._full_rows(fg, -1), tg


class SpectralGroups:
    """``feature_groups_`` / ``task_groups_`` of a fitted TFCL-family model, computed on first
    access (k-means on the final spectral embedding, ``GraphView.groups``): a search fits ~20
    points and reads the groups of none of them, so the k-means runs only for the fits whose
    groups are asked for.  ``fit`` stores ``_group_state = (final UStep, k, GraphView)``;
    without it (unfitted, or no co-grouping block) the attributes do not exist."""

    def _spectral_groups(self) -> tuple[np.ndarray, np.ndarray]:
        state = self.__dict__.get("_group_state")
        if state is None:
            raise AttributeError("no spectral groups: not fitted, or no co-grouping block")
        if "_group_cache" not in self.__dict__:
            u, k, graph = state
            self._group_cache = graph.groups(u, k)
        return self._group_cache

    @property
    def feature_groups_(self) -> np.ndarray:
        return self._spectral_groups()[0]

    @property
    def task_groups_(self) -> np.ndarray:
        return self._spectral_groups()[1]


def loss_at_zero(tasks: TaskSet, J, loss: str) -> np.ndarray:
    """grad J(0) (d x T), once per TaskSet object."""
    return tasks.memo(("tfcl", "grad0", loss), lambda: J.grad(np.zeros((tasks.d, tasks.T))))


def group_scale(G0: np.ndarray, n_nodes: int) -> float:
    """The data scale of the co-grouping weight: s = N ||grad J(0)||_inf / 2, N = the number
    of graph nodes (graph features + tasks).

    From W = 0 (where U = (k/N) I and D_ij = 2k/N) the W-step of Prop. sol returns W = 0
    exactly when alpha_1 2k/N >= ||grad J(0)||_inf, i.e. when alpha_1 >= s / k: with
    alpha_1 = lam_group * s, every lam_group >= 1/k gives W = 0 (a fixed point of Alg. 1).
    The scale does not depend on k, so k keeps its own effect (module docstring, "What k
    does")."""
    return float(n_nodes * np.max(np.abs(G0)) / 2.0) if G0.size else 1.0


def validate_declared(model) -> None:
    """``check_params`` (declared kinds and bounds); with lam_scale="absolute" the lam_*
    values are the paper's raw alphas, so only their sign is checked (``check_common``)."""
    params = model.get_params(deep=False)
    if getattr(model, "lam_scale", "data") == "absolute":
        params = {k: v for k, v in params.items() if not k.startswith("lam_")}
    problems = param_problems(type(model), params)
    if problems:
        raise ValueError(f"{model.name}: " + "; ".join(problems))


def check_lam_scale(name: str, lam_scale) -> None:
    if lam_scale not in ("data", "absolute"):
        raise ValueError(f"{name}: lam_scale must be 'data' or 'absolute', got {lam_scale!r}")


def check_common(name: str, k, max_iter, tol, c_factor, eig_rtol, **lams) -> None:
    """Checks beyond the declared bounds (``check_params``): types and strict inequalities."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{name}: k must be an integer >= 1, got {k!r}")
    for key, v in lams.items():
        if not (np.isfinite(v) and v >= 0):
            raise ValueError(f"{name}: {key} must be >= 0, got {v!r}")
    if not (isinstance(max_iter, (int, np.integer)) and max_iter >= 1):
        raise ValueError(f"{name}: max_iter must be an integer >= 1, got {max_iter!r}")
    if not tol > 0:
        raise ValueError(f"{name}: tol must be > 0, got {tol!r}")
    if not c_factor > 1:
        raise ValueError(f"{name}: c_factor must be > 1 (C above the Lipschitz constant), "
                         f"got {c_factor!r}")
    if not 0 < eig_rtol < 1e-2:
        raise ValueError(f"{name}: eig_rtol must be in (0, 1e-2), got {eig_rtol!r}")


def stop_rule(f_prev: float, f_new: float, dw: float, w_norm: float, tol: float) -> bool:
    """The stopping rule of every TFCL-family fit (non-convex: objective and iterate change):
    |F^t - F^{t-1}| <= tol max(1, |F^t|)  and  ||W^t - W^{t-1}||_F <= sqrt(tol) max(1, ||W^t||_F).
    """
    return (abs(f_prev - f_new) <= tol * max(1.0, abs(f_new))
            and dw <= np.sqrt(tol) * max(1.0, w_norm))


def momentum_next(t_k: float) -> tuple[float, float]:
    """FISTA's sequence: t_{k+1} = (1 + sqrt(1 + 4 t_k^2)) / 2, beta = (t_k - 1) / t_{k+1}."""
    t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t_k * t_k))
    return t_next, (t_k - 1.0) / t_next


COMMON_CONSTRAINTS = {
    "max_iter": Int([2000], low=1),
    "tol": Log([1e-6], low=0.0),
    "c_factor": Linear([1.01], low=1.0),
    "eig_rtol": Log([DEFAULT_EIG_RTOL], low=0.0, high=1e-2),
}

