"""Model contract: what every model plugin implements.

A model is a scikit-learn style estimator over a :class:`~mtlbench.data.TaskSet`:

* hyperparameters are ``__init__`` keyword arguments stored unchanged under the same names
  (so ``get_params`` / ``set_params`` / :func:`clone` work; we reuse scikit-learn's
  ``BaseEstimator`` for exactly that);
* ``fit(tasks, init=None)`` learns from all tasks jointly and returns ``self``; ``init`` is an
  optional fitted model of the same class to warm-start from (the protocol passes the previous
  grid point's model when ``supports_warm_start`` is true);
* ``decision_function(X, task)`` returns real-valued scores of shape (n,) for task index ``task``;
* ``search_space`` (class attribute) declares the searched hyperparameters:
  ``{param: Log(grid, low=..., high=...) | Linear(...) | Int(...) | Categorical([...])}``
  (:mod:`mtlbench.search.space`; a plain list is read as Categorical);
* ``param_constraints`` (class attribute) declares allowed values of the parameters that are
  not searched (``{"tol": Log([1e-6], low=0.0), "max_iter": Int([500], low=1)}``); together
  with ``search_space`` it lets overrides be validated without fitting
  (:meth:`MTLModel.check_params`);
* ``convex`` (class attribute): whether ``fit`` minimises a convex problem.  Only convex models
  are warm-started along a search (``init``); every non-convex fit starts cold, so the model
  scored on validation is the model refitted for test;
* ``target_kinds`` (class attribute): the target kinds ``fit`` handles, of
  :data:`mtlbench.metrics.TARGET_KINDS`: ``("binary",)`` (labels in {-1, +1}; the default, the
  contract models were written against before real-valued targets existed) or
  ``("binary", "real")`` for a model whose loss takes any real target (a squared loss).  A
  model is never run on a problem of another kind: ``compare`` says so in one line, or skips
  the pair in a run of several models;
* ``shift_invariant_loss`` (class attribute, default False): the training loss does not change
  when a constant is added to a task's scores (a pairwise ranking surrogate of the AUC), so the
  sign of the scores is no decision the model learned; tables of threshold metrics (accuracy,
  error rate) flag such models;
* fitted state: ``converged_`` (bool: the solver met its stated tolerance; built-in models
  always set it), ``coef_`` (d x T), ``objective_history_`` and any other
  ``<name>_history_`` (one value per iteration; stored with the results and drawn as
  convergence curves), ``n_iter_``, ``diagnostics_`` (a JSON-able dict the results store keeps),
  ``feature_groups_`` (d,) / ``task_groups_`` (T,) (recovered groups: structure-recovery metrics
  and heat maps), ``embeddings_`` (a list of (n, c) arrays, one per early iteration: the
  embedding figure).
* precomputation shared across a unit's search: ``tasks.memo(key, compute)``
  (:meth:`mtlbench.data.TaskSet.memo`).

Optional, for the solver race (``mtlbench race``, ``docs/race.md``); none of it is needed to be
benchmarked, and none of it costs anything in a benchmark unit:

* progress: ``report_progress(iteration, objective, certificate=None)`` once per solver
  iteration (:mod:`mtlbench.progress`);
* ``fitted_objective(tasks)`` (method of a fitted model): the objective ``fit`` minimises,
  evaluated from scratch at the fitted state on the tasks it was fitted on (a float).  The race
  compares solvers at this value; without it the last ``objective_history_`` value is used;
* ``solvers`` (class attribute): alternative solvers of the same objective, ``{name: cls}``,
  each ``cls`` a subclass of the model that overrides ``fit`` only (same hyperparameters, same
  objective, same fitted attributes); read from the class itself, never inherited by a
  subclass model (an ablation has another objective); ``solver_name`` names the solver of
  the model's own ``fit``; ``solver_agreement_rtol`` is the relative tolerance within which the
  solvers' final objectives must agree at the model's default tolerances.

A minimal linear model only needs ``fit`` to set ``coef_``: :class:`LinearMTLModel` provides
``decision_function``.
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np
from sklearn.base import BaseEstimator, clone as _sk_clone

from .data import TaskSet
from .search.space import check_value

__all__ = ["MTLModel", "LinearMTLModel", "clone", "param_problems"]


class MTLModel(BaseEstimator):
    """Base class of every model plugin.

    Class attributes
    ----------------
    name : str
        Registry name users type (``--models NAME``).  Lower case, dashes allowed.
    search_space : dict[str, Param | list]
        Searched hyperparameters with their kind, starting grid and bounds
        (:mod:`mtlbench.search.space`).
    param_constraints : dict[str, Param]
        Allowed values of hyperparameters that are not searched (bounds only are used).
    convex : bool
        Whether the fitted problem is convex (only then may the search warm-start it).
    target_kinds : tuple of str
        The target kinds ``fit`` handles (``"binary"``, ``"real"``); default binary only.
    shift_invariant_loss : bool
        The loss is invariant to a shift of a task's scores (its sign threshold is arbitrary).
    supports_warm_start : bool
        Whether ``fit`` uses its ``init`` argument (ignored by the protocol unless ``convex``).
    paper : str
        Citation of the method (shown by ``mtlbench models``).
    is_baseline : bool
        The model the leaderboards count per-user wins/ties/losses against (one model of a
        table should declare it; the built-in ``stl`` does).
    ablation_of : str or None
        Registry name of the full model this model is an ablation of (it removes one part of
        that model); the reports draw each full model with its ablations side by side.
    ablation_label : str
        Short description of what the ablation removes (e.g. ``"w/o AUC loss"``), for figures.
    solver_name : str
        Name of the solver that ``fit`` implements (the race shows it beside the model).
    solvers : dict[str, type]
        Alternative solvers of the same objective raced beside ``fit`` (``mtlbench race``):
        name -> subclass of this model overriding ``fit`` only.
    solver_agreement_rtol : float
        Relative tolerance within which the final objectives of the model's solvers agree
        (at default tolerances); the race checks it before comparing their times.
    group : str or None
        A named set of models: ``--models GROUP`` (``compare``, ``race``) selects every model
        of the group (``--models all``: every discovered model).
    default_run : bool
        Whether ``compare`` and ``race`` without ``--models`` run the model (default True: a
        model that is slow on the default data says so by False, and runs when selected).
    """

    name: ClassVar[str] = ""
    search_space: ClassVar[Mapping[str, Any]] = {}
    param_constraints: ClassVar[Mapping[str, Any]] = {}
    convex: ClassVar[bool] = False
    supports_warm_start: ClassVar[bool] = False
    target_kinds: ClassVar[tuple[str, ...]] = ("binary",)
    shift_invariant_loss: ClassVar[bool] = False
    paper: ClassVar[str] = ""
    is_baseline: ClassVar[bool] = False
    ablation_of: ClassVar[str | None] = None
    ablation_label: ClassVar[str] = ""
    solver_name: ClassVar[str] = "default"
    solvers: ClassVar[Mapping[str, type]] = {}
    solver_agreement_rtol: ClassVar[float] = 1e-6
    group: ClassVar[str | None] = None
    default_run: ClassVar[bool] = True

    def check_params(self) -> None:
        """Raise ``ValueError("NAME: param ...")`` for a hyperparameter outside its declared
        kind or bounds (``search_space`` and ``param_constraints``).  Call it first in ``fit``."""
        problems = param_problems(type(self), self.get_params(deep=False))
        if problems:
            raise ValueError(f"{self.name or type(self).__name__}: " + "; ".join(problems))

    def fit(self, tasks: TaskSet, init: "MTLModel | None" = None) -> "MTLModel":  # pragma: no cover
        raise NotImplementedError

    def decision_function(self, X: np.ndarray, task: int) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError

    # Keep repr short in logs and tables.
    def __repr__(self, N_CHAR_MAX: int = 300) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(self.get_params(deep=False).items()))
        return f"{type(self).__name__}({params})"


class LinearMTLModel(MTLModel):
    """A model whose fitted state is ``coef_`` (d x T): scores are ``X @ coef_[:, task]``."""

    coef_: np.ndarray

    def decision_function(self, X: np.ndarray, task: int) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) @ self.coef_[:, task]


def param_problems(cls: type[MTLModel], params: Mapping[str, Any]) -> list[str]:
    """Sentences naming each value of ``params`` that ``cls``'s declarations reject."""
    out = []
    decls = {**dict(cls.param_constraints), **dict(cls.search_space)}
    for key, value in params.items():
        if key in decls:
            why = check_value(key, decls[key], value)
            if why:
                out.append(f"{key} {why}")
    return out


def clone(model: MTLModel, **params: Any) -> MTLModel:
    """An unfitted copy of ``model`` with the same hyperparameters, optionally overridden."""
    new = _sk_clone(model)
    if params:
        new.set_params(**params)
    return new
