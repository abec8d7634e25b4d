"""What the classic convex baselines (``meanreg``, ``srmtl``, ``cmtl`` and their ``-logistic``
variants) share: one FISTA fit of J + g from the layer, the scales their hyperparameters are
expressed in, warm starts and the fitted state.

A model subclasses :class:`FistaModel` and defines ``_problem(tasks)`` -> (smooth term,
penalty): the smooth term a datafit of ``_core.datafits`` (or ``_core.solvers.SmoothSum``),
the penalty one of ``_core.penalties``.  With ``intercept = True`` (the logistic variants that
follow MALSAR's ``Logistic_*`` functions) the variable has one more row, the unpenalised
per-task intercepts, and ``decision_function`` adds them.
"""
from __future__ import annotations

import numpy as np

from mtlbench import LinearMTLModel, TaskSet

from ._core.datafits import LogisticLoss, SquaredLoss
from ._core.penalties import FirstRows
from ._core.solvers import FISTA

#: FISTA's L is divided by this before every step (the backtracking doubles it back when the
#: descent-lemma test fails): the logistic bound ||X_t||^2 / 4 and the squared loss's largest
#: task curvature are far above the curvature along the iterates, and a step that never grows
#: back after one backtrack keeps the smallest step ever needed.
STEP_GROWTH = 1.25
#: the logistic certificates cost a pass over the data (the gradient at the iterate): every
#: tenth iteration; the squared loss's gap is checked at every iterate.
LOGISTIC_CHECK_EVERY = 10


def squared_loss(tasks: TaskSet) -> SquaredLoss:
    """sum_t 1/2 ||y_t - X_t w_t||^2 (MALSAR's ``Least_*`` data term)."""
    return SquaredLoss(tasks)


def malsar_logistic(tasks: TaskSet) -> LogisticLoss:
    """sum_t (1/n_t) sum_i log(1 + exp(-y_ti (x_ti^T w_t + c_t))), c_t an unpenalised
    intercept (the variable's last row): MALSAR's ``Logistic_*`` data term."""
    return LogisticLoss(tasks, task_weights="mean", intercept=True)


def curvature(tasks: TaskSet, loss: str) -> float:
    """The data term's curvature per feature, mean_t tr(H_t) / d with H_t = X_t^T X_t
    (``"squared"``), X_t^T X_t / 4 (``"logistic"``, summed over rows) or X_t^T X_t / (4 n_t)
    (``"logistic-mean"``, MALSAR's averaged loss): the Hessian or its bound.  The unit of the
    quadratic penalties' weights: a weight of 1 x curvature is as strong as the data."""
    if loss == "squared":
        return float(SquaredLoss(tasks).curvature)
    if loss == "logistic":
        return 0.25 * float(SquaredLoss(tasks).curvature)

    def compute():
        per = [float(np.sum(tasks.X(t) ** 2)) / tasks.X(t).shape[0] for t in range(tasks.T)]
        return 0.25 * float(np.mean(per)) / tasks.d
    return tasks.memo(("classic", "logistic-mean-curvature"), compute)


def start_point(tasks: TaskSet, intercept: bool) -> np.ndarray:
    """W = 0, with the intercepts at their optimum there (c_t = log(n+_t / n-_t)) when the
    variable has them."""
    W0 = np.zeros((tasks.d + int(intercept), tasks.T))
    if intercept:
        for t in range(tasks.T):
            y = tasks.y(t)
            W0[-1, t] = np.log(np.count_nonzero(y > 0) / np.count_nonzero(y < 0))
    return W0


def l1_lambda_max(datafit, W0: np.ndarray, d: int) -> float:
    """max_ij |grad J(W0)[:d]|: the smallest l1 weight that makes W[:d] = 0 optimal (W0 = 0 with
    the intercepts at their optimum; a smooth quadratic penalty has zero gradient there)."""
    G = datafit.grad(W0)[:d]
    return float(np.abs(G).max()) if G.size else 0.0


def penalised_rows(penalty, tasks: TaskSet, intercept: bool):
    """``penalty`` on W[:d] when the variable has an intercept row (``FirstRows``), else
    ``penalty`` itself (keeping its dual norm or conjugate for a duality gap)."""
    return FirstRows(penalty, tasks.d) if intercept else penalty


class FistaModel(LinearMTLModel):
    """A convex model min_W J(W) + g(W) solved by the layer's FISTA (module docstring).

    Subclasses set ``name``, ``paper``, ``search_space``, ``intercept`` and ``_problem``; the
    hyperparameters ``tol`` (the certificate to reach: the relative duality gap, or the
    relative optimality residual with an intercept) and ``max_iter`` are common."""

    convex = True
    supports_warm_start = True
    monotone_objective = True            # FISTA with monotone restart
    solver_name = "fista"
    intercept = False
    loss = "squared"                     # or "logistic" / "logistic-mean" (``curvature``)

    def _problem(self, tasks: TaskSet):  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _closed_form(self, tasks: TaskSet) -> np.ndarray | None:
        """The optimum in closed form where the problem has one (FISTA then only certifies
        it, or refines it if rounding left its certificate above ``tol``); None: iterate."""
        return None

    def fit(self, tasks: TaskSet, init=None):
        self.check_params()
        smooth, penalty = self._problem(tasks)
        W0 = self._closed_form(tasks)
        if W0 is None:
            W0 = start_point(tasks, self.intercept)
            prev = getattr(init, "variable_", None)
            if prev is not None and prev.shape == W0.shape:
                W0 = prev                # convex: a warm start changes only the speed
        check_every = 1 if self.loss == "squared" else LOGISTIC_CHECK_EVERY
        res = FISTA(tol=float(self.tol), max_iter=int(self.max_iter), step_growth=STEP_GROWTH,
                    check_every=check_every).solve(smooth, penalty, W0)
        self.variable_ = res.W
        self.coef_ = res.W[:tasks.d]
        self.intercept_ = res.W[tasks.d] if self.intercept else None
        self.objective_history_ = res.history
        self.n_iter_ = res.n_iter
        self.certificate_ = float(res.certificate)
        self.converged_ = bool(res.converged)
        self.diagnostics_ = {**self._diagnostics(), "converged": self.converged_,
                             "certificate": self.certificate_,
                             "certificate_kind": res.certificate_kind}
        return self

    def _diagnostics(self) -> dict:
        return {}

    def decision_function(self, X: np.ndarray, task: int) -> np.ndarray:
        scores = np.asarray(X, dtype=np.float64) @ self.coef_[:, task]
        return scores if self.intercept_ is None else scores + self.intercept_[task]

    def fitted_objective(self, tasks: TaskSet) -> float:
        """J + g at the fitted variable, from scratch on ``tasks``."""
        smooth, penalty = self._problem(tasks)
        return float(smooth.value(self.variable_) + penalty.value(self.variable_))
