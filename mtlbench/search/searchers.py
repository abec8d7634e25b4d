"""Hyperparameter searchers: which parameter points a unit fits on validation, in which order.

A searcher is a deterministic strategy over a declared search space
(:mod:`mtlbench.search.space`).  The fit loop (:func:`mtlbench.search.loop.search`) asks it for
the next batch of points given the *trace* so far (every fitted point with its validation
score, in fit order), fits the batch in order, appends to the trace and asks again, until
the searcher proposes nothing or the budget (number of fits per unit, the final refit not
counted) is used.  A searcher is a pure function of the trace, so a unit
gives the same trace serially, in a ``--jobs`` worker and on a Dask worker.

Built-in searchers (registered through the ``register_searchers`` hook like any plugin):

``grid``
    Exactly the Cartesian product of the declared starting grids, in sorted-key order (the
    first release's search; with list-style spaces it reproduces the old tables bit for bit).
    The budget is ignored: the whole grid is fitted.

``adaptive`` (default; the rule of ``docs/tuning.md``, version 4)
    1. *start*: the space-filling starting design over the declared start ranges, 12 points
       for every model (:mod:`mtlbench.search.design`);
    2. *extend*: while the best point so far (:func:`best_index`: ties within
       :data:`~mtlbench.metrics.SELECTION_RTOL` go to the earlier point) sits, for an ordered
       parameter with at least two values tried, at the lowest or highest value tried and that
       value is not a bound, step out (``Param.step_out``) from the best point in that
       direction, one coordinate at a time; repeated after every batch;
    3. *refine*: around the best point, coordinate-wise: for each ordered parameter and each
       side, the nearest value tried (by any point) on that side, at best's other
       coordinates if that point is new, else the midpoint (``Param.between``) of the two
       values; for a parameter with a single value tried, one step out each way; one point at
       a time, the parameter with the fewest values tried first, then the wider interval
       (ties: sorted-key order); until the budget is used or nothing new is left.
    Extension always has priority over refinement: the rule is re-read after every
    refinement fit and after every batch of extensions.  When the budget is used while the
    rule still asks to extend (the best point sits at a non-bound edge), extension goes on
    past the budget, for at most the budget again in extra fits (version 3): the search ends
    interior or says ``budget_exhausted``.  Bounds (numbers, or expressions over the
    problem's dimensions and the other parameters) are evaluated at each point, and every
    proposed point is clipped to them: a design point or a step past a bound becomes the
    bound, never a fit the model refuses.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Mapping, Sequence

from .design import START_DESIGN_SIZE, space_filling_design
from ..metrics import SELECTION_RTOL, Metric
from ..plugins import get_registry
from .base import Searcher
from .space import (PROBLEM_NAMES, Log, Param, normalise_space, resolve, space_from_json,
                    space_json)

__all__ = ["Searcher", "GridSearcher", "AdaptiveSearcher", "DEFAULT_SEARCH", "DEFAULT_BUDGET",
           "BUILTIN_SEARCHERS", "START_DESIGN_SIZE", "space_from_json", "space_json",
           "best_index", "edge_report", "resolved_bounds", "problem_context",
           "get_searcher_class", "searcher_version"]

DEFAULT_SEARCH = "adaptive"
DEFAULT_BUDGET = 20
#: Significant digits kept for a real value proposed by a search (so that 0.1 * 10 ** k does
#: not become 0.0010000000000000002 and a point is recognised as already tried).
_DIGITS = 12


class GridSearcher(Searcher):
    """Every point of the Cartesian product of the starting grids, nothing else."""

    name = "grid"
    uses_budget = False
    description = "the Cartesian product of the declared starting grids (budget ignored)"

    def propose(self, trace):
        design = self.start()
        return "start", design[len(trace):]


class AdaptiveSearcher(Searcher):
    """Space-filling start, extension past every non-bound edge, coordinate-wise refinement."""

    name = "adaptive"
    uses_budget = True
    #: 2: refinement proposes one point per call (the rule is re-read after every fit).
    #: 3: extension goes on past the budget (at most the budget again) while the best point
    #: sits at a non-bound edge.  Identical to 2 for every unit whose version-2 search did not
    #: end with the budget exhausted.
    #: 4: the start is the 12-point space-filling design over the declared start ranges
    #: (instead of the Cartesian product of the grids); bounds may be expressions of the
    #: problem and the other parameters, and every point is clipped to them; refinement
    #: first tries the neighbouring values of the design at the best point's coordinates
    #: (with a Cartesian start they were all tried there: the same as version 3).
    version = "4"
    extends_past_budget = True
    description = ("12-point space-filling design over the declared start ranges, then "
                   "geometric extension past any best-at-edge value that is not a bound, then "
                   "coordinate refinement; stops at the budget, unless the best point is at a "
                   "non-bound edge (then extension goes on, for at most the budget again)")

    @functools.cached_property
    def _design(self) -> list[dict[str, Any]]:
        return space_filling_design(self.space, self.context)

    def start(self) -> list[dict[str, Any]]:
        """The space-filling starting design
        (:func:`mtlbench.search.design.space_filling_design`)."""
        return [dict(p) for p in self._design]

    def propose(self, trace):
        design = self.start()
        if len(trace) < len(design):
            return "start", design[len(trace):]
        b = best_index(trace, self.select_by)
        if b is None:
            return "start", []  # every starting point failed: nothing to move from
        best = dict(trace[b]["params"])
        tried = [t["params"] for t in trace]
        ext = [p for p in self._extend(best, tried) if not _seen(p, tried)]
        if ext:
            return "extend", _unique(ext)
        ref = [r for r in self._refine(best, tried) if not _seen(r[1], tried)]
        if not ref:
            return "refine", []
        # One refinement point per call, so the rule (extension first) is re-read after every
        # fit: a step out of a single-valued parameter that turns out best is extended at once
        # instead of after a whole batch of refinements has used the budget.  The parameter
        # with the fewest values tried goes first, then the wider of the untried intervals
        # next to the best value (ties: sorted-key order, below before above), so neither a
        # parameter nor one side of the best value is starved by repeated bisection.
        counts = {key: len(self._values(key, tried)) for key in self.space}
        order = {key: i for i, key in enumerate(self.space)}
        rank = {id(r): i for i, r in enumerate(ref)}
        key, point, _ = min(ref, key=lambda r: (counts[r[0]], -r[2], order[r[0]], rank[id(r)]))
        return "refine", [point]

    def _values(self, key: str, tried: Sequence[Mapping[str, Any]]) -> list:
        return sorted({_clean(t[key]) for t in tried if key in t and _is_num(t[key])})

    def _moved(self, best: dict, key: str, par: Param, value: Any) -> dict:
        """``best`` with ``key`` moved to ``value`` (rounded, a bound kept exact), every
        coordinate then clipped to its bounds at the new point."""
        return self.clip({**best, key: _snap(par, value)})

    def _extend(self, best: dict, tried) -> list[dict]:
        out = []
        for key in self.space:
            par = self.bounded(key, best)
            if not par.ordered or not _is_num(best.get(key)):
                continue
            vals = self._values(key, tried)
            if len(vals) < 2:
                continue
            v = _clean(best[key])
            if v <= vals[0] and not par.at_low(v):
                new = par.step_out(v, -1)
                if new is not None:
                    out.append(self._moved(best, key, par, new))
            if v >= vals[-1] and not par.at_high(v):
                new = par.step_out(v, +1)
                if new is not None:
                    out.append(self._moved(best, key, par, new))
        return out

    def _refine(self, best: dict, tried) -> list[tuple[str, dict, float]]:
        """Refinement candidates ``(key, point, width)``, per ordered parameter and side of the
        best value: the nearest value tried on that side (by any point) moved to best's other
        coordinates, if that point is new, else the midpoint between the two values; ``width``
        is the distance (in the parameter's own scale: log for :class:`Log`) between best's
        value and that neighbour; ``inf`` for a step out of a single-valued parameter."""
        out = []
        for key in self.space:
            par = self.bounded(key, best)
            if not par.ordered or not _is_num(best.get(key)):
                continue
            vals = self._values(key, tried)
            v = _clean(best[key])
            if len(vals) < 2:
                for direction in (-1, +1):
                    new = par.step_out(v, direction)
                    if new is not None:
                        out.append((key, self._moved(best, key, par, new), math.inf))
                continue
            below = [x for x in vals if x < v]
            above = [x for x in vals if x > v]
            for other in ([below[-1]] if below else []) + ([above[0]] if above else []):
                # A value tried only at other coordinates (a design point elsewhere) is first
                # tried on best's line; bisecting towards it would never reach it.
                point = self._moved(best, key, par, other)
                if _seen(point, tried):
                    mid = par.between(v, other)
                    point = None if mid is None else self._moved(best, key, par, mid)
                if point is not None:
                    out.append((key, point, _width(par, v, other)))
        return out


BUILTIN_SEARCHERS: dict[str, type[Searcher]] = {"grid": GridSearcher, "adaptive": AdaptiveSearcher}


def searcher_version(name: Any) -> str:
    """The rule version of searcher ``name`` (``Searcher.version``; "1" for an unknown name,
    which fails later with its own message): part of every unit's key and of its stored
    ``protocol`` settings."""
    if not name:
        return "1"
    try:
        return str(getattr(get_searcher_class(str(name)), "version", "1"))
    except Exception:  # noqa: BLE001 - an unknown searcher fails later with its own message
        return "1"


def get_searcher_class(name: str) -> type[Searcher]:
    """The searcher class named ``name`` (from the plugin registry; built-ins as fallback)."""
    reg = get_registry()
    if name in reg.searcher_names:
        return reg.searcher_class(name)
    if name in BUILTIN_SEARCHERS:
        return BUILTIN_SEARCHERS[name]
    return reg.searcher_class(name)  # raises UnknownNameError with the known names


# ------------------------------------------------------------------ trace helpers
def best_index(trace: Sequence[Mapping[str, Any]], metric: str | Metric = "auc") -> int | None:
    """Index of the best fit of ``trace`` by its validation ``metric`` (entry key
    ``val_<name>``; default the AUC), in the metric's direction; None when no fit has one.

    Ties: every fit whose value is within :data:`~mtlbench.metrics.SELECTION_RTOL` x |best|
    of the best value ties with it, and the earliest of them (in fit order) wins.  Values that
    differ only by the floating-point noise of another BLAS kernel or CPU so select the same
    fit; the rule is deterministic, a pure function of the trace."""
    from ..scoring import get_metric

    m = get_metric(metric)
    key = f"val_{m.name}"
    scored = [(i, m.oriented(float(t[key]))) for i, t in enumerate(trace)
              if t.get(key) is not None]
    if not scored:
        return None
    best = max(v for _, v in scored)
    floor = best - SELECTION_RTOL * abs(best)
    return next(i for i, v in scored if v >= floor)


def edge_report(space: Mapping[str, Any], trace: Sequence[Mapping[str, Any]],
                selected: Mapping[str, Any], context: Mapping[str, Any] | None = None
                ) -> tuple[list[str], list[str]]:
    """``(at_bound, at_edge)`` of the selected point: parameters whose selected value equals a
    bound (evaluated at the selected point within ``context``, the problem's dimensions and
    fixed parameters), and ordered parameters whose selected value is the lowest or highest
    value tried (with >= 2 values tried) without being a bound."""
    at_bound, at_edge = [], []
    params = normalise_space(space)
    for key, declared in params.items():
        v = selected.get(key)
        if not declared.ordered or not _is_num(v):
            continue
        par = resolve(declared, selected, context or {})
        # at the searcher's resolution: points are told apart by their 12 significant digits,
        # so a start value within rounding of a bound (999.9999999999999 under high = 1000)
        # is that bound, and the search rightly does not extend past it
        if any(par.at_low(x) or par.at_high(x) for x in (v, _clean(v))):
            at_bound.append(key)
            continue
        vals = sorted({_clean(t["params"][key]) for t in trace
                       if _is_num(t["params"].get(key))})
        if len(vals) >= 2 and _clean(v) in (vals[0], vals[-1]):
            at_edge.append(key)
    return at_bound, at_edge


def resolved_bounds(space: Mapping[str, Any], point: Mapping[str, Any],
                    context: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """``{param: {"low", "high"}}``: the numeric bounds of every ordered parameter at ``point``
    (expressions evaluated within ``context``; None = unbounded; a Log's 0 = every positive
    value), as stored in a unit's search summary."""
    out = {}
    for key, declared in normalise_space(space).items():
        if declared.ordered:
            par = resolve(declared, point, context or {})
            out[key] = {"low": par.low, "high": par.high}
    return out


def problem_context(train: Any) -> dict[str, int]:
    """The problem's dimensions a bound expression may read (:data:`PROBLEM_NAMES`): ``d``,
    ``T`` and the fewest and most rows of a task of ``train`` (the training TaskSet)."""
    sizes = [int(n) for n in train.sizes()]
    return dict(zip(PROBLEM_NAMES, (int(train.d), int(train.T), min(sizes), max(sizes))))


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


def _width(par: Param, a: float, b: float) -> float:
    """Distance between two values of ``par`` in its own scale (log for a positive Log)."""
    if isinstance(par, Log) and a > 0 and b > 0:
        return abs(math.log(b) - math.log(a))
    return float(abs(b - a))


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
