"""Hyperparameter search: which parameter points a unit fits on validation, in which order.

* :mod:`.space` — search-space declarations (``Log``, ``Linear``, ``Int``, ``Categorical``) and
  bound expressions over the problem's dimensions;
* :mod:`.design` — the space-filling starting design;
* :mod:`.base` — :class:`Searcher`, the contract a search strategy implements;
* :mod:`.searchers` — the built-in searchers (``grid``, ``adaptive``) and the trace helpers
  (:func:`best_index`, :func:`edge_report`);
* :mod:`.loop` — one unit's fit loop (:func:`mtlbench.search.loop.search`).

Write your own: subclass :class:`Searcher`, implement :meth:`Searcher.propose`, and register
it from a plugin::

    @hookimpl
    def register_searchers(register):
        register(MySearcher)

Names are imported on first use (PEP 562), so that :mod:`.space` and :mod:`.base` load without
the searchers and the plugin registry they read.
"""
from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl

#: public name -> submodule that defines it
_LAZY = {
    "Searcher": ".base", "START_DESIGN_SIZE": ".design",
    "space_from_json": ".space", "space_json": ".space",
    "GridSearcher": ".searchers", "AdaptiveSearcher": ".searchers",
    "DEFAULT_SEARCH": ".searchers", "DEFAULT_BUDGET": ".searchers",
    "BUILTIN_SEARCHERS": ".searchers", "best_index": ".searchers", "edge_report": ".searchers",
    "resolved_bounds": ".searchers", "problem_context": ".searchers",
    "get_searcher_class": ".searchers", "searcher_version": ".searchers",
}

if TYPE_CHECKING:  # for type checkers and IDEs
    from .base import Searcher
    from .design import START_DESIGN_SIZE
    from .searchers import (BUILTIN_SEARCHERS, DEFAULT_BUDGET, DEFAULT_SEARCH, AdaptiveSearcher,
                            GridSearcher, best_index, edge_report, get_searcher_class,
                            problem_context, resolved_bounds, searcher_version)
    from .space import space_from_json, space_json


@hookimpl
def register_searchers(register):
    """The built-in searchers register through the same hook as third-party ones."""
    from .searchers import BUILTIN_SEARCHERS

    for cls in BUILTIN_SEARCHERS.values():
        register(cls)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mtlbench.search' has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Searcher", "GridSearcher", "AdaptiveSearcher", "DEFAULT_SEARCH", "DEFAULT_BUDGET",
           "BUILTIN_SEARCHERS", "START_DESIGN_SIZE", "space_from_json", "space_json",
           "best_index", "edge_report", "resolved_bounds", "problem_context",
           "get_searcher_class", "searcher_version", "register_searchers"]
