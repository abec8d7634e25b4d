"""Hyperparameter searchers: which parameter points a unit fits on validation, in which order.

A searcher is a deterministic strategy over a declared search space (:mod:`mtlbench.space`).
The protocol asks it for the next batch of points given the *trace* so far (every fitted
point with its validation AUC, in fit order), fits the batch in order, appends to the trace
and asks again, until the searcher proposes nothing or the budget (number of fits per unit,
the final refit not counted) is used.  A searcher is a pure function of the trace, so a unit
gives the same trace serially, in a ``--jobs`` worker and on a Dask worker.

Built-in searchers (registered through the ``register_searchers`` hook like any plugin):

``grid``
    Exactly the Cartesian product of the declared starting grids, in sorted-key order (the
    first release's search; with list-style spaces it reproduces the old tables bit for bit).
    The budget is ignored: the whole grid is fitted.

``adaptive`` (default)
    1. *start*: the Cartesian product of the starting grids;
    2. *extend*: while the best point so far (ties: the earlier point) sits, for an ordered
       parameter with at least two values tried, at the lowest or highest value tried and that
       value is not a declared bound, step out (``Param.step_out``) from the best point in
       that direction, one coordinate at a time; repeated after every batch;
    3. *refine*: around the best point, coordinate-wise midpoints (``Param.between``) with the
       nearest tried value below and above, and for a parameter with a single value tried,
       one step out each way; until the budget is used or nothing new is left.
    Extension always has priority over refinement: after every batch the rule is re-read.

Write your own: subclass :class:`Searcher`, implement :meth:`Searcher.propose`, and register
it from a plugin::

    @hookimpl
    def register_searchers(register):
        register(MySearcher)
"""
from __future__ import annotations

import itertools
import math
from typing import Any, ClassVar, Mapping, Sequence

from .errors import ConfigError
from .hookspecs import hookimpl
from .space import Categorical, Int, Linear, Log, Param, as_param

__all__ = ["Searcher", "GridSearcher", "AdaptiveSearcher", "DEFAULT_SEARCH", "DEFAULT_BUDGET",
           "BUILTIN_SEARCHERS", "space_from_json", "space_json", "best_index", "edge_report",
           "get_searcher_class"]

DEFAULT_SEARCH = "adaptive"
DEFAULT_BUDGET = 20
#: Significant digits kept for a real value proposed by a search (so that 0.1 * 10 ** k does
#: not become 0.0010000000000000002 and a point is recognised as already tried).
_DIGITS = 12


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
    """

    name: ClassVar[str] = ""
    uses_budget: ClassVar[bool] = True
    description: ClassVar[str] = ""

    def __init__(self, space: Mapping[str, Any]) -> None:
        self.space: dict[str, Param] = {k: as_param(space[k], k) for k in sorted(space)}

    def start(self) -> list[dict[str, Any]]:
        """The starting design: the Cartesian product of the starting grids (sorted keys)."""
        keys = list(self.space)
        return [dict(zip(keys, vals))
                for vals in itertools.product(*(self.space[k].grid for k in keys))]

    def propose(self, trace: Sequence[Mapping[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """``(phase, points)``: the next points to fit given ``trace`` (a list of dicts with
        ``params`` and ``val_auc`` -- None for a failed fit --, in fit order).  An empty list
        ends the search.  Must be deterministic: a pure function of ``trace``."""
        raise NotImplementedError


class GridSearcher(Searcher):
    """Every point of the Cartesian product of the starting grids, nothing else."""

    name = "grid"
    uses_budget = False
    description = "the Cartesian product of the declared starting grids (budget ignored)"

    def propose(self, trace):
        design = self.start()
        return "start", design[len(trace):]


class AdaptiveSearcher(Searcher):
    """Start grid, extension past every non-bound edge, coordinate-wise refinement."""

    name = "adaptive"
    uses_budget = True
    description = ("starting grid, then geometric extension past any best-at-edge value that "
                   "is not a declared bound, then coordinate refinement; stops at the budget")

    def propose(self, trace):
        design = self.start()
        if len(trace) < len(design):
            return "start", design[len(trace):]
        b = best_index(trace)
        if b is None:
            return "start", []  # every starting point failed: nothing to move from
        best = dict(trace[b]["params"])
        tried = [t["params"] for t in trace]
        ext = [p for p in self._extend(best, tried) if not _seen(p, tried)]
        if ext:
            return "extend", _unique(ext)
        ref = [p for p in self._refine(best, tried) if not _seen(p, tried)]
        return "refine", _unique(ref)

    def _values(self, key: str, tried: Sequence[Mapping[str, Any]]) -> list:
        return sorted({_clean(t[key]) for t in tried if key in t and _is_num(t[key])})

    def _extend(self, best: dict, tried) -> list[dict]:
        out = []
        for key, par in self.space.items():
            if not par.ordered or not _is_num(best.get(key)):
                continue
            vals = self._values(key, tried)
            if len(vals) < 2:
                continue
            v = _clean(best[key])
            if v <= vals[0] and not par.at_low(v):
                new = par.step_out(v, -1)
                if new is not None:
                    out.append({**best, key: _snap(par, new)})
            if v >= vals[-1] and not par.at_high(v):
                new = par.step_out(v, +1)
                if new is not None:
                    out.append({**best, key: _snap(par, new)})
        return out

    def _refine(self, best: dict, tried) -> list[dict]:
        out = []
        for key, par in self.space.items():
            if not par.ordered or not _is_num(best.get(key)):
                continue
            vals = self._values(key, tried)
            v = _clean(best[key])
            if len(vals) < 2:
                for direction in (-1, +1):
                    new = par.step_out(v, direction)
                    if new is not None:
                        out.append({**best, key: _snap(par, new)})
                continue
            below = [x for x in vals if x < v]
            above = [x for x in vals if x > v]
            for other in ([below[-1]] if below else []) + ([above[0]] if above else []):
                mid = par.between(v, other)
                if mid is not None:
                    out.append({**best, key: _snap(par, mid)})
        return out


BUILTIN_SEARCHERS: dict[str, type[Searcher]] = {"grid": GridSearcher, "adaptive": AdaptiveSearcher}


@hookimpl
def register_searchers(register):
    """The built-in searchers register through the same hook as third-party ones."""
    for cls in BUILTIN_SEARCHERS.values():
        register(cls)


def get_searcher_class(name: str) -> type[Searcher]:
    """The searcher class named ``name`` (from the plugin registry; built-ins as fallback)."""
    from .plugins import get_registry

    reg = get_registry()
    if name in reg.searcher_names:
        return reg.searcher_class(name)
    if name in BUILTIN_SEARCHERS:
        return BUILTIN_SEARCHERS[name]
    return reg.searcher_class(name)  # raises UnknownNameError with the known names


# ------------------------------------------------------------------ trace helpers
def best_index(trace: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the best fit of ``trace`` by validation AUC; ties go to the earlier fit."""
    best, idx = -math.inf, None
    for i, t in enumerate(trace):
        s = t.get("val_auc")
        if s is not None and s > best:
            best, idx = s, i
    return idx


def edge_report(space: Mapping[str, Any], trace: Sequence[Mapping[str, Any]],
                selected: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(at_bound, at_edge)`` of the selected point: parameters whose selected value equals a
    declared bound, and ordered parameters whose selected value is the lowest or highest value
    tried (with >= 2 values tried) without being a declared bound."""
    at_bound, at_edge = [], []
    params = {k: as_param(space[k], k) for k in sorted(space)}
    for key, par in params.items():
        v = selected.get(key)
        if not par.ordered or not _is_num(v):
            continue
        if par.at_low(v) or par.at_high(v):
            at_bound.append(key)
            continue
        vals = sorted({_clean(t["params"][key]) for t in trace
                       if _is_num(t["params"].get(key))})
        if len(vals) >= 2 and _clean(v) in (vals[0], vals[-1]):
            at_edge.append(key)
    return at_bound, at_edge


# ------------------------------------------------------------------ spaces as JSON
_KINDS = {"log": Log, "linear": Linear, "int": Int, "categorical": Categorical}


def space_json(space: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-able form of a search space (``{name: {"kind", "grid", "low", "high"}}``)."""
    return {k: as_param(space[k], k).to_json() for k in sorted(space)}


def space_from_json(space: Mapping[str, Any]) -> dict[str, Param]:
    """Declared search space from :func:`space_json` output, Param objects or plain lists."""
    out: dict[str, Param] = {}
    for k in sorted(space):
        d = space[k]
        if isinstance(d, Mapping):
            kind = d.get("kind")
            if kind not in _KINDS:
                raise ConfigError(f"search space entry {k!r}: unknown kind {kind!r}")
            cls = _KINDS[kind]
            if cls is Categorical:
                out[k] = Categorical(tuple(d["grid"]))
            else:
                out[k] = cls(tuple(d["grid"]), low=d.get("low"), high=d.get("high"))
        else:
            out[k] = as_param(d, k)
    return out


# ------------------------------------------------------------------ small helpers
def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _clean(v: Any) -> Any:
    """Round a real to 12 significant digits (ints and other values unchanged)."""
    if isinstance(v, float) and math.isfinite(v) and v != 0.0:
        return float(f"{v:.{_DIGITS}g}")
    return v


def _snap(par: Param, v: Any) -> Any:
    """``_clean(v)``, but a declared bound stays exactly the bound (rounding never moves a
    value across or off a bound)."""
    c = _clean(v)
    if par.high is not None and (v >= par.high or c >= par.high):
        return par.high
    if par.low is not None and (v <= par.low or c <= par.low) and not (
            isinstance(par, Log) and par.low <= 0):
        return par.low
    return c


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if _is_num(x) and _is_num(y):
            if not math.isclose(x, y, rel_tol=1e-9, abs_tol=0.0) and x != y:
                return False
        elif x != y:
            return False
    return True


def _seen(p: Mapping[str, Any], tried: Sequence[Mapping[str, Any]]) -> bool:
    return any(_same(p, t) for t in tried)


def _unique(points: list[dict]) -> list[dict]:
    out: list[dict] = []
    for p in points:
        if not _seen(p, out):
            out.append(p)
    return out
