"""SRMTL: sparse graph-regularised multi-task learning, with the squared and the logistic loss.

J. Zhou, J. Chen and J. Ye, "MALSAR: Multi-tAsk Learning via StructurAl Regularization",
Arizona State University, 2012 (the MALSAR manual; functions ``Least_SRMTL`` and
``Logistic_SRMTL``, the reference implementation this module follows).  With a task graph of
Laplacian L (T x T) -- MALSAR's structure matrix R enters as L = R R^T, since
||W R||_F^2 = tr(W R R^T W^T) -- the problem is

    min_W  J(W) + rho1 tr(W L W^T) + rho2 ||W||_1
         = J(W) + rho1/2 sum_{s,t} A_st ||w_s - w_t||^2 + rho2 sum_ij |W_ij|

(MALSAR's optional ridge opts.rho_L2 is 0 here, its default).  J is the squared loss
sum_t 1/2 ||y_t - X_t w_t||^2 (``srmtl``, MALSAR's ``Least_SRMTL``) or MALSAR's logistic loss
sum_t (1/n_t) sum_i log(1 + exp(-y_ti (x_ti^T w_t + c_t))) with an unpenalised intercept c_t
per task, minimised out (``_core.datafits.InterceptLogisticLoss``; ``srmtl-logistic``,
``Logistic_SRMTL``; ``decision_function`` adds c_t).

The graph: ``tasks.meta["task_graph"]`` (a symmetric T x T adjacency A >= 0, L = diag(A 1) -
A) when the data set provides one; else the complete graph with edge weights 1/T,
L = I - 11^T / T (MALSAR's "all tasks related" R), for which the graph term is
rho1 sum_t ||w_t - wbar||^2: mean-regularised MTL plus an l1 penalty.  (The protocol's
training subsets carry no meta, so a benchmark run uses the complete graph.)

Solver (``_core.classic.PenalisedModel``): both terms separate over the rows of W
(tr(W L W^T) = sum_i W[i, :] L W[i, :]^T), so ``srmtl`` runs block coordinate descent over
the rows where the median task is under-determined, n_t < d (``row_solver = "auto"``;
``_core.solvers.BlockCoordinateDescent`` on the Gram matrices; for the complete graph each
row moves to its exact minimiser, ``_core.penalties.MeanRegL1Rows``, for a graph of the data
a proximal row step), else, as ``srmtl-logistic`` always, FISTA-BKTR (``_core.solvers.FISTA``)
on the smooth part J + rho1 tr(W L W^T) (``_core.solvers.SmoothSum``) with the l1 prox (soft
thresholding).  Stopping rule and certificate: a relative duality gap <= ``tol`` (1e-6; the
graph term's conjugate enters the gap at its gradient; the smallest of the gaps with the
datafit's dual point scaled as a whole and task by task, ``_core.solvers._task_scaled_gap``,
and, for the complete graph, with the graph term's dual point corrected row by row into the
l1 ball, ``_core.solvers._mean_dual_gap``: second order in the distance to the optimum
where the rows have zero entries; with the intercepts minimised out the logistic dual point
keeps their zero-sum constraint).
``converged_`` says whether it held within ``max_iter``.

Search space (scale-free): ``rho_ratio`` = rho2 / max_ij |grad J(0)| (with the intercepts at
their optimum at W = 0): the graph term has zero gradient at W = 0, so W = 0 is optimal iff
rho_ratio >= 1 -- the bound high = 1 (math).  ``graph_ratio`` = rho1 / curvature,
curvature = mean_t tr(H_t) / d (H_t = X_t^T X_t, or X_t^T X_t / (4 n_t) for the averaged
logistic loss): Log, low 0, no upper bound (rho1 -> inf ties all tasks of a connected graph
together, never reached at a finite value).  Start ranges designed on ``simulated[seed=101]``
(2 repetitions) and ``synthetic-attributes[seed=101]`` (attr0, attr1; no edge and no
degenerate selection there): rho_ratio [3e-3, 0.3] (selected 0.09 - 0.14 and 0.003);
graph_ratio [0.01, 10] for ``srmtl`` (selected 0.43 - 0.59 and 3.9 - 6.2) and [1e-5, 10]
for ``srmtl-logistic`` (selected 1e-6 - 2.3e-5, 1.9e-6 and 10: its validation AUC barely
depends on the graph weight).

Unverified: the manual's equation numbers (the objective is read from the M-code).
"""
from __future__ import annotations

import numpy as np

from mtlbench import Log, TaskSet, hookimpl

from ._core.classic import PenalisedModel
from ._core.penalties import L1, GraphLaplacian, MeanRegularised
from ._core.solvers import SmoothSum


def task_laplacian(tasks: TaskSet) -> np.ndarray:
    """The Laplacian of ``tasks.meta["task_graph"]`` (checked: symmetric T x T, >= 0), else of
    the complete graph with weights 1/T: I - 11^T / T."""
    T = tasks.T
    A = tasks.meta.get("task_graph")
    if A is None:
        return np.eye(T) - np.full((T, T), 1.0 / T)
    A = np.asarray(A, dtype=np.float64)
    if A.shape != (T, T) or not np.allclose(A, A.T) or np.any(A < 0):
        raise ValueError(f"srmtl: meta['task_graph'] of {tasks.name!r} must be a symmetric "
                         f"{T} x {T} matrix of weights >= 0, got shape {A.shape}")
    return np.diag(A.sum(axis=1)) - A


class SRMTL(PenalisedModel):
    """MALSAR's sparse graph-regularised MTL (Least_SRMTL), squared loss."""

    name = "srmtl"
    paper = ("Zhou, Chen & Ye, MALSAR: Multi-tAsk Learning via StructurAl Regularization, "
             "Arizona State University 2012 (Least_SRMTL: graph Laplacian + l1)")
    search_space = {"graph_ratio": Log([1e-2, 0.1, 1.0, 10.0], low=0.0, high=None),
                    "rho_ratio": Log([3e-3, 0.03, 0.3], low=0.0, high=1.0)}
    target_kinds = ("binary", "real")
    row_separable = True   # tr(W L W^T) = sum_i W[i, :] L W[i, :]^T and the l1 norm
    row_solver = "auto"    # coordinate descent where the median task has n_t < d
    cost_hint = 3.7  # s per unit on the reference problem (mtlbench.runner.cost)

    def __init__(self, graph_ratio: float = 0.1, rho_ratio: float = 0.1, tol: float = 1e-6,
                 max_iter: int = 5000):
        self.graph_ratio = graph_ratio
        self.rho_ratio = rho_ratio
        self.tol = tol
        self.max_iter = max_iter

    def penalty(self, G0: np.ndarray, tasks: TaskSet) -> L1:
        self.rho2_ = float(self.rho_ratio) * L1(1.0).dual_norm(G0)
        return L1(self.rho2_)

    def smooth(self, J, tasks: TaskSet) -> SmoothSum:
        """J + rho1 tr(W L W^T); for the complete graph as rho1 sum_t ||w_t - wbar||^2
        (``MeanRegularised``: O(d T) per gradient instead of the product with L)."""
        self.rho1_ = float(self.graph_ratio) * self.curvature(tasks)
        if tasks.meta.get("task_graph") is None:
            return SmoothSum(J, MeanRegularised(self.rho1_))
        return SmoothSum(J, GraphLaplacian(self.rho1_, task_laplacian(tasks)))

    def diagnostics(self) -> dict:
        return {"rho1": self.rho1_, "rho2": self.rho2_,
                "n_nonzero": int(np.count_nonzero(self.coef_))}


class SRMTLLogistic(SRMTL):
    """MALSAR's sparse graph-regularised MTL (Logistic_SRMTL): averaged logistic loss with an
    unpenalised intercept per task."""

    name = "srmtl-logistic"
    paper = ("Zhou, Chen & Ye, MALSAR: Multi-tAsk Learning via StructurAl Regularization, "
             "Arizona State University 2012 (Logistic_SRMTL: graph Laplacian + l1)")
    search_space = {"graph_ratio": Log([1e-5, 1e-3, 0.1, 10.0], low=0.0, high=None),
                    "rho_ratio": Log([3e-3, 0.03, 0.3], low=0.0, high=1.0)}
    target_kinds = ("binary",)
    cost_hint = 12.1
    loss = "logistic"


@hookimpl
def register_models(register):
    register(SRMTL)
    register(SRMTLLogistic)
