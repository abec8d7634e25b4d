"""The model layer of the built-in plugins: datafits, penalties and solvers that models compose.

    min_W  J(W) + g(W),   W of shape (d, T), column t = task t

* ``datafits`` -- J: :class:`SquaredLoss` (sum_t 1/2 ||y_t - X_t w_t||^2, one class with
  selectable representations, ``representations``), :class:`SquaredAUCLoss` (the TFCL
  paper's pairwise surrogate), :class:`LogisticLoss`, :class:`InterceptLogisticLoss`
  (MALSAR's, per-task intercepts minimised out); value, gradient, Lipschitz constants,
  states for iterative solvers, and what a duality gap needs;
* ``penalties`` -- g: :class:`L1`, :class:`L21` (rows or columns), :class:`L1Inf`,
  :class:`Nuclear`, :class:`SquaredFrobenius`, :class:`SquaredKSupport`,
  :class:`GraphLaplacian`, :class:`MeanRegularised`, :class:`CoCluster`,
  :class:`L1PlusL1Inf`, :class:`BlockSum`, :class:`ClusterRelaxation`;
  value, proximal map, dual norm or conjugate;
* ``solvers`` -- :class:`FISTA`, :class:`BlockCoordinateDescent` (options are constructor
  arguments; ``solve(datafit, penalty, W0)``), :func:`duality_gap`, :class:`SumOfBlocks`
  (J of W = P + Q), :class:`SmoothSum` (J plus smooth quadratic penalties), :func:`lbfgs`;
* ``splitting`` -- :class:`ADMM` for the squared loss plus a penalty with an exact prox
  (per-task ridge solves through ``representations.TaskSpectra``, the same duality gap);
* ``conic`` -- cvxpy as a second solver (the race's): the stacked design, its size limit,
  the conic solver and its tolerances;
* ``factored``, ``newton``, ``quadratic`` -- the blocks of the factored model (GO-MTL's
  S-step by proximal Newton in k dimensions, its L-step by preconditioned CG).

A model of this form is a few lines (docs/plugins.md, "Writing a model from the layer")::

    J = LogisticLoss(tasks)
    res = FISTA(tol=1e-8).solve(J, L21(lam), np.zeros((tasks.d, tasks.T)))
"""
from .datafits import (InterceptLogisticLoss, LeastSquares, LogisticLoss, SquaredAUCLoss,
                       SquaredLoss)
from .penalties import (L1, L21, BlockSum, ClusterRelaxation, CoCluster, GraphLaplacian,
                        L1Inf, L1PlusL1Inf, MeanRegularised, Nuclear, SquaredFrobenius,
                        SquaredKSupport)
from .solvers import (FISTA, BlockCoordinateDescent, Result, SmoothSum, SumOfBlocks,
                      duality_gap, lbfgs)

__all__ = ["LeastSquares", "SquaredLoss", "SquaredAUCLoss", "LogisticLoss",
           "InterceptLogisticLoss",
           "L1", "L21", "L1Inf", "Nuclear", "SquaredFrobenius", "SquaredKSupport",
           "GraphLaplacian", "MeanRegularised", "CoCluster", "L1PlusL1Inf", "BlockSum",
           "ClusterRelaxation",
           "FISTA", "BlockCoordinateDescent", "Result", "SumOfBlocks", "SmoothSum",
           "duality_gap", "lbfgs"]
