"""The classic convex baselines' base (``l21``, ``trace-norm``, ``dirty``, ``meanreg``, ``srmtl``,
``cmtl`` and their ``-logistic`` variants): one fit of

    min_W  h(W) + g(W),     h = J + (smooth quadratic penalties),  W (d x T),

J :class:`~datafits.SquaredLoss` (``loss = "squared"``: sum_t 1/2 ||y_t - X_t w_t||^2) or, with
``loss = "logistic"``, :class:`~datafits.InterceptLogisticLoss` (MALSAR's sum_t omega_t
sum_i log(1 + exp(-y_ti (x_ti^T w_t + c_t))), omega_t = 1/n_t (``average``), the
unpenalised intercepts c_t minimised out; ``intercept_`` holds c(W) and
``decision_function`` adds it), or :class:`~datafits.LogisticLoss` without intercepts
(``intercept = False``).  A subclass gives the penalty g from G0 = grad J(0) and the tasks
(:meth:`PenalisedModel.penalty`: a norm's weight a searched fraction of the smallest at which
it is zero at W = 0, lam^max = ||G0||^*, the dual norm; or weights in units of the data's
:meth:`PenalisedModel.curvature`), optionally smooth quadratic terms
(:meth:`PenalisedModel.smooth`, summed with J by :class:`~solvers.SmoothSum`), a closed-form
optimum (:meth:`PenalisedModel.closed_form`), and the penalty's cvxpy expression
(:meth:`PenalisedModel.cvx_penalty`) for :class:`CvxpyFit`.

Solver: for the squared loss and a penalty (with the smooth terms) separating over the rows of
W (``row_separable``) :class:`~solvers.BlockCoordinateDescent` (cyclic proximal steps on the
active rows with Anderson extrapolation, the Gram matrices H_t = X_t^T X_t; while
T d^2 <= ``GRAM_MAX``; with ``row_solver = "auto"`` only when the median task has n_t < d),
else :class:`~solvers.FISTA` (backtracking with
FISTA-BKTR's decreasing step constant, ``FISTA_DECREASE``; monotone and gradient restart;
the logistic certificate every ``LOGISTIC_CHECK_EVERY`` iterations, as it costs a pass over
the data, the squared one every ``squared_check_every``), or, for the squared loss where
``squared_solver`` says so, :class:`~splitting.ADMM` (the tasks' ridge solves exactly, the
penalty's prox), or, for the logistic loss where ``logistic_solver`` says so and the penalty
is differentiable, :class:`~solvers.LBFGS` (its certificate every ``LBFGS_CHECK_EVERY``
iterations; FISTA from its point if its line search stops above ``tol``, at tolerances near
the rounding of F);
all stopped at a relative duality gap <= ``tol`` (``max_iter``: iterations or sweeps)
(``converged_`` iff reached within ``max_iter``; ``gap_`` the gap reached).  The duality gap
stays valid with the intercepts: at c(W) the dual point sums to zero over each task's rows.
Convex: warm starts from ``init``'s ``coef_``, except when every ratio is >= 1 (then W = 0 is
optimal and the fit starts there: zero iterations, exact zeros) or the model has a closed
form (FISTA then only certifies it, or refines it if rounding left its gap above ``tol``).
:class:`CvxpyFit` solves the same problem with cvxpy (Clarabel, tolerances 1e-9) as a second
solver for ``mtlbench race`` and as the tests' oracle.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from mtlbench import Int, LinearMTLModel, Log, TaskSet, report_progress

from .datafits import InterceptLogisticLoss, LogisticLoss, SquaredLoss
from .conic import solve_conic, stacked_design
from .representations import TaskSpectra
from .solvers import FISTA, LBFGS, BlockCoordinateDescent, RowWorkingSet, duality_gap
from .splitting import ADMM, prefers_admm

__all__ = ["PenalisedModel", "CvxpyFit"]

#: FISTA-BKTR's trial factor of the step constant (``solvers.FISTA``'s ``decrease``).
FISTA_DECREASE = 0.8

#: FISTA's certificate for the logistic loss (a pass over the data) every this many iterations.
LOGISTIC_CHECK_EVERY = 10

#: :class:`~solvers.LBFGS`'s certificate every this many iterations (from the last evaluation's
#: state: no pass over the data).
LBFGS_CHECK_EVERY = 5

#: Largest T d^2 (entries of the per-task Gram matrices) for block coordinate descent.
GRAM_MAX = 5e7


class PenalisedModel(LinearMTLModel):
    """Base of a classic convex model (module docstring).  Subclasses set ``name``, ``paper``,
    ``search_space``, ``loss``, ``target_kinds`` and define :meth:`penalty` (and, where they
    apply, :meth:`ratios`, :meth:`smooth`, :meth:`closed_form`, :meth:`cvx_penalty`)."""

    loss: ClassVar[str] = "squared"
    #: the logistic loss: per-task intercepts minimised out (MALSAR's); False: none
    intercept: ClassVar[bool] = True
    #: the logistic loss with intercepts: each task's loss averaged over its rows (MALSAR's)
    average: ClassVar[bool] = True
    #: the penalty separates over the rows of W with a row-wise prox (block coordinate descent)
    row_separable: ClassVar[bool] = False
    #: where ``row_separable``: "always" coordinate descent for the squared loss, or "auto"
    #: (only when the median task is under-determined, n_t < d: FISTA's steps are slow along
    #: J's flat directions there, while with n_t >= d its vectorised iterations are cheaper
    #: than a sweep's loop over the rows)
    row_solver: ClassVar[str] = "always"
    #: FISTA's certificate for the squared loss every this many iterations (more than 1 where
    #: the dual norm costs a decomposition: the trace norm's spectral norm)
    squared_check_every: ClassVar[int] = 1
    #: the squared loss's solver: "fista" (FISTA, or coordinate descent where row-separable),
    #: "admm" (:class:`~splitting.ADMM` from :meth:`admm_rho`, its certificate every
    #: ``admm_check_every`` iterations) or "auto" (ADMM when the median task is
    #: under-determined, n_t < d: J is flat along most directions, where FISTA's steps are
    #: slow; else FISTA)
    squared_solver: ClassVar[str] = "fista"
    admm_check_every: ClassVar[int] = 1
    #: the logistic loss's solver: "fista", "lbfgs" (:class:`~solvers.LBFGS`, for a
    #: differentiable penalty with a conjugate, its certificate every ``LBFGS_CHECK_EVERY``
    #: iterations) or "rows" (FISTA on the rows that can be non-zero,
    #: :class:`~solvers.RowWorkingSet`, for a penalty separating over the rows)
    logistic_solver: ClassVar[str] = "fista"
    convex = True
    supports_warm_start = True
    monotone_objective = True            # FISTA with monotone restart, coordinate descent
    solver_name = "fista"
    #: ``--models classic`` runs every classic baseline; they run when selected, not in the
    #: default job (the paper's comparison), whose time they would more than double
    group = "classic"
    default_run = False
    param_constraints = {"tol": Log([1e-6], low=0.0), "max_iter": Int([5000], low=1)}

    # -- what a subclass defines
    def penalty(self, G0: np.ndarray, tasks: TaskSet):
        """The penalty object (of ``_core.penalties``) from G0 = grad J(0) and the tasks."""
        raise NotImplementedError

    def ratios(self) -> tuple[float, ...]:
        """The searched fractions of lambda_max (all >= 1: X = 0 is optimal); none when the
        weights are not such fractions."""
        return ()

    def smooth(self, J, tasks: TaskSet):
        """The smooth term h: J, or J plus smooth quadratic penalties (``SmoothSum``)."""
        return J

    def closed_form(self, tasks: TaskSet) -> np.ndarray | None:
        """The optimum in closed form where the problem has one (after :meth:`penalty`);
        None: iterate."""
        return None

    def cvx_penalty(self, cp, W):
        """The penalty (with the smooth terms beyond J) as a cvxpy expression of W."""
        raise NotImplementedError

    def lams(self) -> list[float]:
        """The penalty's weights (after :meth:`fit`)."""
        return [float(g.lam) for g in getattr(self.penalty_, "blocks", (self.penalty_,))]

    def diagnostics(self) -> dict:
        """What the fit reports besides convergence (after :meth:`fit`)."""
        return {"lam": [float(lam) for lam in self.lams()]}

    # -- the data term
    def datafit(self, tasks: TaskSet):
        """J on ``tasks``: the squared loss, or the logistic loss with or without intercepts."""
        if self.loss == "squared":
            return SquaredLoss(tasks)
        if self.intercept:
            return InterceptLogisticLoss(tasks, average=self.average)
        return LogisticLoss(tasks)

    def curvature(self, tasks: TaskSet) -> float:
        """J's curvature per feature, mean_t tr(H_t) / d, H_t = X_t^T X_t for the squared
        loss, its bound omega_t X_t^T X_t / 4 for the logistic one: the unit of the weights
        that are not fractions of a lambda_max (a weight of 1 x curvature is as strong as
        the data)."""
        c = float(SquaredLoss(tasks).curvature)
        if self.loss == "squared":
            return c
        if not (self.intercept and self.average):
            return 0.25 * c

        def compute():
            per = [float(np.sum(tasks.X(t) ** 2)) / tasks.X(t).shape[0] for t in range(tasks.T)]
            return 0.25 * float(np.mean(per)) / tasks.d
        return tasks.memo(("classic", "logistic-mean-curvature"), compute)

    # -- the fit
    def admm_rho(self, spectra: TaskSpectra) -> float:
        """ADMM's first penalty parameter (after :meth:`penalty`; ``spectra``: the tasks'
        :class:`~representations.TaskSpectra`), for a model whose ``squared_solver`` may be
        ADMM."""
        raise NotImplementedError

    def _admm(self, tasks: TaskSet) -> bool:
        """Whether the squared loss runs on ADMM (``squared_solver``)."""
        if self.loss != "squared" or self.squared_solver == "fista":
            return False
        if self.squared_solver == "admm":
            return True
        return prefers_admm(tasks)

    def _coordinate_descent(self, tasks: TaskSet) -> bool:
        """Whether the squared loss runs on block coordinate descent (``row_separable``,
        ``row_solver``, T d^2 <= ``GRAM_MAX``)."""
        return bool(self.loss == "squared" and self.row_separable
                    and tasks.T * tasks.d ** 2 <= GRAM_MAX
                    and (self.row_solver == "always" or prefers_admm(tasks)))

    def _solver(self, tasks: TaskSet):
        """(solver, datafit it runs on): for the squared loss ADMM where ``squared_solver``
        says so, block coordinate descent on the Gram matrices with a row-separable penalty
        (while T d^2 <= ``GRAM_MAX``), else FISTA (the squared loss on the padded task stack,
        whose states hold the gradient)."""
        tol, cap = float(self.tol), int(self.max_iter)
        if self._admm(tasks):
            spectra = TaskSpectra.of(tasks)
            return (ADMM(spectra, self.admm_rho(spectra), tol=tol, max_iter=cap,
                         check_every=self.admm_check_every),
                    SquaredLoss(tasks, wide="padded"))
        if self.loss == "squared":
            if self._coordinate_descent(tasks):
                return (BlockCoordinateDescent(tol=tol, max_sweeps=cap),
                        SquaredLoss(tasks, representation="gram"))
            return (FISTA(tol=tol, max_iter=cap, decrease=FISTA_DECREASE, gradient_restart=True,
                          check_every=self.squared_check_every),
                    SquaredLoss(tasks, wide="padded"))
        fista = FISTA(tol=tol, max_iter=cap, decrease=FISTA_DECREASE, gradient_restart=True,
                      check_every=LOGISTIC_CHECK_EVERY)
        if self.logistic_solver == "lbfgs":
            return (LBFGS(tol=tol, max_iter=cap, check_every=LBFGS_CHECK_EVERY, fallback=fista),
                    self.datafit(tasks))
        if self.logistic_solver == "rows":
            return RowWorkingSet(fista), self.datafit(tasks)
        return fista, self.datafit(tasks)

    def _setup(self, tasks: TaskSet):
        self.check_params()
        J = self.datafit(tasks)
        self.penalty_ = self.penalty(J.grad(np.zeros((tasks.d, tasks.T))), tasks)
        return J

    def fit(self, tasks: TaskSet, init=None) -> "PenalisedModel":
        self._setup(tasks)
        shape = (tasks.d, tasks.T)
        X0 = self.closed_form(tasks)
        if X0 is None:
            X0 = np.zeros(shape)
            warm = getattr(init, "coef_", None)
            ratios = self.ratios()
            if warm is not None and warm.shape == shape and not (ratios and min(ratios) >= 1):
                X0 = warm                  # convex: a warm start changes only the speed
        solver, J = self._solver(tasks)
        res = solver.solve(self.smooth(J, tasks), self.penalty_, X0)
        self._store(J, res.W, res.history, res.n_iter, res.certificate)
        return self

    def _store(self, J, X: np.ndarray, hist: list, n_iter: int, gap: float) -> None:
        self.coef_ = X
        self.intercept_ = (J.intercepts(self.coef_) if isinstance(J, InterceptLogisticLoss)
                           else None)
        self.objective_history_ = hist
        self.n_iter_ = int(n_iter)
        self.gap_ = float(gap)
        self.converged_ = bool(gap <= float(self.tol))
        self.diagnostics_ = {**self.diagnostics(), "converged": self.converged_,
                             "relative_gap": self.gap_}

    def decision_function(self, X: np.ndarray, task: int) -> np.ndarray:
        s = super().decision_function(X, task)
        return s if self.intercept_ is None else s + self.intercept_[task]

    def fitted_objective(self, tasks: TaskSet) -> float:
        """h + g at ``coef_``, from scratch on ``tasks`` (the logistic J with intercepts
        minimises over them)."""
        h = self.smooth(self.datafit(tasks), tasks)
        return float(h.value(self.coef_) + self.penalty_.value(self.coef_))


class CvxpyFit:
    """Mixin: ``fit`` by cvxpy (``conic.solve_conic``: the first installed of Clarabel, ECOS,
    SCS; tolerances 1e-9) for a :class:`PenalisedModel` subclass; the relative duality gap of
    the layer at the conic solution is ``gap_``.  Refuses instances above
    :data:`~conic.CVXPY_MAX_ENTRIES`."""

    solver_name = "cvxpy"

    def fit(self, tasks: TaskSet, init=None):
        import cvxpy as cp
        from scipy import sparse

        J = self._setup(tasks)
        if self.loss != "squared" and not self.intercept:
            raise ValueError(f"{self.name} (cvxpy): only the squared loss and the logistic "
                             "loss with intercepts are stated")
        d, T = tasks.d, tasks.T
        sizes = [tasks.X(t).shape[0] for t in range(T)]
        Xbd, y = stacked_design(self.name, [tasks.X(t) for t in range(T)],
                                [tasks.y(t) for t in range(T)])
        W = cp.Variable((d, T))
        scores = Xbd @ cp.vec(W, order="F")     # (w_1; ...; w_T): block order
        if self.loss == "squared":
            data = 0.5 * cp.sum_squares(scores - y)
        else:
            c = cp.Variable(T)
            task_of = np.repeat(np.arange(T), sizes)
            E = sparse.csr_matrix((np.ones(y.size), (np.arange(y.size), task_of)),
                                  shape=(y.size, T))
            omega = (1.0 / np.asarray(sizes, dtype=np.float64)[task_of] if self.average
                     else np.ones(y.size))
            data = cp.sum(cp.multiply(omega, cp.logistic(-cp.multiply(y, scores + E @ c))))
        problem = cp.Problem(cp.Minimize(data + self.cvx_penalty(cp, W)))
        solver = solve_conic(problem, self.name)
        if W.value is None:
            raise RuntimeError(f"{self.name} (cvxpy): {solver} returned no solution "
                               f"(status {problem.status})")
        X = np.asarray(W.value)
        h = self.smooth(J, tasks)
        F = h.value(X) + self.penalty_.value(X)
        gap = max(duality_gap(h, self.penalty_, X), 0.0)
        report_progress(1, float(F), gap)
        iters = int(problem.solver_stats.num_iters or 0) if problem.solver_stats else 0
        self._store(J, X, [float(F)], iters, gap / max(abs(F), 1e-300))
        self.diagnostics_["conic_solver"] = solver
        self.diagnostics_["conic_status"] = str(problem.status)
        return self
