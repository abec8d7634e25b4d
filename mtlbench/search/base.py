"""The searcher contract: what a hyperparameter search strategy implements.

Like :class:`~mtlbench.model.MTLModel` for models and :class:`~mtlbench.dataset.Dataset` for
datasets, :class:`Searcher` is the base class plugins subclass and the registry checks
against; the built-in strategies (``grid``, ``adaptive``) are in
:mod:`mtlbench.search.searchers` and the fit loop that asks them for points in
:mod:`mtlbench.search.loop`.
"""
from __future__ import annotations

import itertools
from typing import Any, ClassVar, Mapping, Sequence

from .space import Param, clip_point, normalise_space, resolve

__all__ = ["Searcher"]


class Searcher:
    """Base class of search strategies.

    Class attributes
    ----------------
    name : str
        The name users type (``--search NAME``).
    uses_budget : bool
        Whether the strategy stops at the budget (``grid`` does not: it fits its whole grid).
    description : str
        One line for ``mtlbench plugins`` / the docs.
    version : str
        Bump it when the rule changes: it is part of every unit's key, so stored results of
        the old rule are recomputed rather than shown as current.
    extends_past_budget : bool
        Whether the search goes on past the budget while :meth:`propose` asks to *extend*
        (its best point sits at a non-bound edge of what was tried), up to the budget again
        in extra fits; a selection at such an edge is a defect of the search, not a result.

    Instance attribute ``select_by``: the name of the metric that scores the fits (``"auc"``,
    ``"rmse"``, ...), set by the protocol before the first :meth:`propose`; a trace entry
    holds the fit's validation value under ``"val_" + select_by``, and
    ``mtlbench.search.best_index(trace, self.select_by)`` finds the best fit in the metric's
    direction (ties: the earliest).

    A searcher is built for one unit: ``Searcher(space, context)``, ``space`` the declared
    search space, ``context`` what its bound expressions may read besides the searched
    parameters: the training problem's dimensions ``d``, ``T``, ``n_min``, ``n_max``
    (:data:`mtlbench.search.space.PROBLEM_NAMES`) and the model's fixed hyperparameters.
    :meth:`bounded` and :meth:`clip` evaluate the bounds at a point.
    """

    name: ClassVar[str] = ""
    uses_budget: ClassVar[bool] = True
    description: ClassVar[str] = ""
    version: ClassVar[str] = "1"
    extends_past_budget: ClassVar[bool] = False
    select_by: str = "auc"

    def __init__(self, space: Mapping[str, Any],
                 context: Mapping[str, Any] | None = None) -> None:
        self.space: dict[str, Param] = normalise_space(space)
        self.context: dict[str, Any] = dict(context or {})

    def start(self) -> list[dict[str, Any]]:
        """The starting design: the Cartesian product of the starting grids (sorted keys)."""
        keys = list(self.space)
        return [dict(zip(keys, vals))
                for vals in itertools.product(*(self.space[k].grid for k in keys))]

    def bounded(self, key: str, point: Mapping[str, Any]) -> Param:
        """The declaration of ``key`` with its bounds evaluated at ``point`` (numbers)."""
        return resolve(self.space[key], point, self.context)

    def clip(self, point: Mapping[str, Any]) -> dict[str, Any]:
        """``point`` with every ordered coordinate moved into its bounds at that point."""
        return clip_point(self.space, point, self.context)

    def propose(self, trace: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """``(phase, points)``: the next points to fit given ``trace`` (a list of dicts with
        ``params`` and ``val_<select_by>`` -- absent for a failed fit --, in fit order).  An
        empty list ends the search.  Must be deterministic: a pure function of ``trace``."""
        raise NotImplementedError
