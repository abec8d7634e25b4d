"""L2,1-regularised multi-task logistic regression, composed from the model layer.

    min_W  sum_t sum_i log(1 + exp(-y_ti x_ti^T w_t)) + lam sum_i ||W[i, :]||_2

(joint feature selection: Obozinski, Taskar & Jordan, Statistics and Computing 2010; MALSAR's
``Logistic_L21`` without its intercept).  lam = lam_ratio * lam_max, lam_max = the largest
row norm of grad J(0): W = 0 is optimal iff lam_ratio >= 1, the bound of the search.  Solver:
the layer's FISTA, stopped at a relative duality gap <= tol.  Convex: warm-started.  The
maintained model is the built-in ``l21-logistic`` (MALSAR's objective, with intercepts).
"""
import numpy as np

from mtlbench import Int, LinearMTLModel, Log, hookimpl
from mtlbench_models._core import FISTA, L21, LogisticLoss


class L21Logistic(LinearMTLModel):
    name = "l21-logistic-example"
    paper = "Obozinski, Taskar & Jordan, Joint covariate selection, Stat. Comput. 2010"
    search_space = {"lam_ratio": Log([0.01, 0.1, 0.5], low=0.0, high=1.0)}
    param_constraints = {"tol": Log([1e-6], low=0.0), "max_iter": Int([5000], low=1)}
    convex = True
    supports_warm_start = True
    monotone_objective = True

    def __init__(self, lam_ratio=0.1, tol=1e-6, max_iter=5000):
        self.lam_ratio = lam_ratio
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, tasks, init=None):
        self.check_params()
        J = LogisticLoss(tasks)
        W0 = np.zeros((tasks.d, tasks.T))
        # lam_max = the largest row norm of grad J(0): W = 0 is optimal iff lam_ratio >= 1
        self.penalty_ = L21(self.lam_ratio * L21(1.0).dual_norm(J.grad(W0)))
        if getattr(init, "coef_", None) is not None and init.coef_.shape == W0.shape:
            W0 = init.coef_                       # convex: a warm start changes only the speed
        res = FISTA(tol=self.tol, max_iter=self.max_iter).solve(J, self.penalty_, W0)
        self.coef_, self.n_iter_, self.converged_ = res.W, res.n_iter, res.converged
        self.objective_history_, self.gap_ = res.history, res.certificate
        return self

    def fitted_objective(self, tasks):
        return LogisticLoss(tasks).value(self.coef_) + self.penalty_.value(self.coef_)


@hookimpl
def register_models(register):
    register(L21Logistic)
