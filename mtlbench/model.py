"""Model contract: what every model plugin implements.

A model is a scikit-learn style estimator over a :class:`~mtlbench.data.TaskSet`:

* hyperparameters are ``__init__`` keyword arguments stored unchanged under the same names
  (so ``get_params`` / ``set_params`` / :func:`clone` work; we reuse scikit-learn's
  ``BaseEstimator`` for exactly that);
* ``fit(tasks, init=None)`` learns from all tasks jointly and returns ``self``; ``init`` is an
  optional fitted model of the same class to warm-start from (the protocol passes the previous
  grid point's model when ``supports_warm_start`` is true);
* ``decision_function(X, task)`` returns real-valued scores of shape (n,) for task index ``task``;
* ``search_space`` (class attribute) is the default grid: ``{param: [values, ...]}``;
* optional fitted state: ``coef_`` (d x T), ``objective_history_`` (one value per iteration),
  ``n_iter_``, ``diagnostics_`` (a JSON-able dict the results store keeps, e.g. recovered groups).

A minimal linear model only needs ``fit`` to set ``coef_``: :class:`LinearMTLModel` provides
``decision_function``.
"""
from __future__ import annotations

from typing import Any, ClassVar, Mapping

import numpy as np
from sklearn.base import BaseEstimator, clone as _sk_clone

from .data import TaskSet

__all__ = ["MTLModel", "LinearMTLModel", "clone"]


class MTLModel(BaseEstimator):
    """Base class of every model plugin.

    Class attributes
    ----------------
    name : str
        Registry name users type (``--models NAME``).  Lower case, dashes allowed.
    search_space : dict[str, list]
        Default hyperparameter grid (Cartesian product), searched on validation AUC.
    supports_warm_start : bool
        Whether ``fit`` uses its ``init`` argument.
    paper : str
        Citation of the method (shown by ``mtlbench models``).
    """

    name: ClassVar[str] = ""
    search_space: ClassVar[Mapping[str, list]] = {}
    supports_warm_start: ClassVar[bool] = False
    paper: ClassVar[str] = ""

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


def clone(model: MTLModel, **params: Any) -> MTLModel:
    """An unfitted copy of ``model`` with the same hyperparameters, optionally overridden."""
    new = _sk_clone(model)
    if params:
        new.set_params(**params)
    return new
