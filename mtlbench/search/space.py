"""Declared hyperparameters: kind, start range and real bounds of each searched parameter.

A model's ``search_space`` maps parameter names to :class:`Param` declarations::

    search_space = {
        "lam_ratio": Log([0.01, 0.1, 1.0], low=0.0, high=1.0),  # 1 = lambda_max: W = 0 beyond
        "k": Int([2, 8], low=2, high="min(d, T)"),                # a bound of the problem
        "lam_group": Log([0.005, 0.1], low=0.0, high="1/k"),      # a joint bound
        "loss": Categorical(["auc", "squared"]),
    }

* ``grid`` of an ordered parameter (Log, Linear, Int) gives its *start range*, from its
  smallest to its largest value (at least two distinct values: checked when a model
  registers): the adaptive search's starting design spreads every ordered parameter over its
  range (:mod:`mtlbench.search.design`).  The largest ratio (Log) or difference (Linear) of
  neighbouring grid values is the step by which the search extends past an edge, and
  ``--search grid`` fits exactly the Cartesian product of the grids.
* ``low`` / ``high`` are limits of the *model* (say why in the model's docstring: e.g. a ratio
  of lambda_max at 1 gives W = 0, RAMUSA's theta = 1 is the plain trace norm), not guesses of
  where the optimum lies.  ``None`` means unbounded in that direction.  A Log parameter is
  always > 0; ``low=0.0`` there means "every positive value" (0 itself is never tried).
  A bound may be a short expression (:class:`~mtlbench.search.bounds.BoundExpr`) over the
  problem's dimensions ``d`` (features), ``T`` (tasks), ``n_min`` / ``n_max`` (training rows
  per task) and the other searched parameters, with numbers, ``+ - * / **`` and ``min(...)``
  / ``max(...)``: the searcher evaluates it for the problem and the point at hand and clips
  to it.
* a plain list (``{"lam": [0.1, 1.0, 10.0]}``, the first release's form, still accepted from
  third-party plugins) of two or more distinct numbers is read as an ordered range
  (:func:`list_to_param`: Int if all are integers, Log if all are > 0 and span a ratio
  >= 10, else Linear); any other list is :class:`Categorical`, searched exactly as listed.

The same declarations validate user overrides without fitting anything
(:func:`check_value`; numeric bounds only -- an expression bound needs the problem), together
with a model's ``param_constraints`` for parameters that are not searched (``tol``,
``max_iter``, ...).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import ConfigError
from .bounds import PROBLEM_NAMES, BoundExpr, _check_bound, _is_number

__all__ = ["Param", "Log", "Linear", "Int", "Categorical", "BoundExpr", "PROBLEM_NAMES",
           "as_param", "list_to_param", "normalise_space", "check_value", "space_json",
           "space_from_json", "space_problems", "bound_order", "resolve", "clip_point"]


def _fmt(v: Any) -> str:
    return "None" if v is None else (v if isinstance(v, str) else f"{v:g}")


@dataclass(frozen=True)
class Param:
    """Base class of a declared hyperparameter (use :class:`Log`, :class:`Linear`,
    :class:`Int` or :class:`Categorical`)."""

    grid: tuple
    low: float | str | None = None
    high: float | str | None = None
    kind: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", tuple(self.grid))
        if not self.grid:
            raise ConfigError(f"{type(self).__name__}: the starting grid is empty")
        for which in ("low", "high"):
            _check_bound(type(self).__name__, which, getattr(self, which))

    # ---- bounds
    @property
    def bound_names(self) -> frozenset:
        """Names read by expression bounds (empty when both bounds are numbers or None)."""
        return frozenset().union(*(BoundExpr.parse(b).names for b in (self.low, self.high)
                                   if isinstance(b, str)))

    @property
    def static(self) -> bool:
        """Both bounds are numbers or None (no expression to evaluate)."""
        return not isinstance(self.low, str) and not isinstance(self.high, str)

    def resolved(self, env: Mapping[str, Any]) -> "Param":
        """This declaration with expression bounds evaluated with the names of ``env``
        (``self`` when both bounds are numbers)."""
        if self.static:
            return self
        lo, hi = (BoundExpr.parse(b).value(env) if isinstance(b, str) else b
                  for b in (self.low, self.high))
        return dataclasses.replace(self, **self._resolved_bounds(lo, hi))

    def _resolved_bounds(self, lo: Any, hi: Any) -> dict[str, Any]:
        return {"low": lo, "high": hi}

    # ---- what searchers use (on a declaration with numeric bounds: see ``resolved``)
    @property
    def ordered(self) -> bool:
        """Whether values have an order a search can move along (not categorical)."""
        return True

    def at_low(self, value: Any) -> bool:
        """``value`` sits at the declared lower bound (a search cannot go lower)."""
        return self.low is not None and self._lo_reached(value)

    def at_high(self, value: Any) -> bool:
        """``value`` sits at the declared upper bound."""
        return self.high is not None and value >= self.high

    def _lo_reached(self, value: Any) -> bool:
        return value <= self.low

    def clip(self, value: Any) -> Any:
        """``value`` moved into the bounds (the upper bound wins if they cross)."""
        if self.low is not None and self._lo_reached(value):
            value = self.low
        if self.high is not None and value > self.high:
            value = self.high
        return value

    def step_out(self, value: Any, direction: int, factor: float | None = None) -> Any | None:
        """The next value beyond ``value`` (``direction`` -1 lower, +1 higher), clipped to the
        bounds; ``None`` when the bound is already reached."""
        raise NotImplementedError

    def between(self, a: Any, b: Any) -> Any | None:
        """A value strictly between ``a`` and ``b`` (geometric / arithmetic midpoint, rounded
        for integers); ``None`` when there is none."""
        raise NotImplementedError

    def spacing(self) -> float:
        """The starting grid's step (a ratio for Log, a difference otherwise)."""
        raise NotImplementedError

    @property
    def start_range(self) -> tuple[Any, Any]:
        """``(smallest, largest)`` value of the grid: where the starting design spreads."""
        return min(self.grid), max(self.grid)

    # ---- validation and serialisation
    def check(self, value: Any) -> str | None:
        """Why ``value`` is not allowed (a sentence), or None.  Numeric bounds only: an
        expression bound depends on the problem (the searcher clips to it)."""
        if not _is_number(value):
            return f"expected a number, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"expected a finite number, got {value!r}"
        if _is_number(self.low) and value < self.low:
            return f"must be >= {self.low:g}, got {value!r}"
        if _is_number(self.high) and value > self.high:
            return f"must be <= {self.high:g}, got {value!r}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "grid": list(self.grid), "low": self.low, "high": self.high}

    def __str__(self) -> str:
        """Short form shown by ``mtlbench models``: ``Log([0.005, 0.1], low=0, high=1/k)``."""
        grid = ", ".join(_fmt(g) if _is_number(g) else repr(g) for g in self.grid)
        return f"{type(self).__name__}([{grid}], low={_fmt(self.low)}, high={_fmt(self.high)})"


@dataclass(frozen=True)
class Log(Param):
    """A positive real parameter searched on a log scale (regularisation weights)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kind", "log")
        bad = [g for g in self.grid if not _is_number(g) or not g > 0]
        if bad:
            raise ConfigError(f"Log parameter: grid values must be > 0, got {bad}")
        if _is_number(self.low) and self.low < 0:
            raise ConfigError(f"Log parameter: low must be >= 0, got {self.low}")

    def _resolved_bounds(self, lo: Any, hi: Any) -> dict[str, Any]:
        # a lower bound at or below 0 leaves every positive value (0 itself is never tried)
        return {"low": None if lo is None else max(float(lo), 0.0),
                "high": None if hi is None else float(hi)}

    def _lo_reached(self, value: Any) -> bool:
        return self.low > 0 and value <= self.low

    def check(self, value: Any) -> str | None:
        msg = super().check(value)
        if msg is None and not value > 0:
            return f"must be > 0, got {value!r}"
        return msg

    def spacing(self) -> float:
        g = sorted(float(v) for v in self.grid)
        return max(g[i + 1] / g[i] for i in range(len(g) - 1)) if len(g) > 1 else 10.0

    def step_out(self, value: Any, direction: int, factor: float | None = None) -> Any | None:
        f = factor or self.spacing()
        new = float(value) * (f if direction > 0 else 1.0 / f)
        if direction > 0 and self.high is not None:
            if value >= self.high:
                return None
            new = min(new, float(self.high))
        if direction < 0 and self.low is not None and self.low > 0:
            if value <= self.low:
                return None
            new = max(new, float(self.low))
        return new

    def between(self, a: Any, b: Any) -> Any | None:
        m = math.sqrt(float(a) * float(b))
        return m if min(a, b) < m < max(a, b) else None


@dataclass(frozen=True)
class Linear(Param):
    """A real parameter searched on a linear scale (a mixing weight in [0, 1], ...)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kind", "linear")

    def spacing(self) -> float:
        g = sorted(float(v) for v in self.grid)
        return max(g[i + 1] - g[i] for i in range(len(g) - 1)) if len(g) > 1 else 1.0

    def step_out(self, value: Any, direction: int, factor: float | None = None) -> Any | None:
        step = (factor or 1.0) * self.spacing()
        new = float(value) + direction * step
        if direction > 0 and self.high is not None:
            if value >= self.high:
                return None
            new = min(new, float(self.high))
        if direction < 0 and self.low is not None:
            if value <= self.low:
                return None
            new = max(new, float(self.low))
        return new

    def between(self, a: Any, b: Any) -> Any | None:
        m = (float(a) + float(b)) / 2.0
        return m if min(a, b) < m < max(a, b) else None


@dataclass(frozen=True)
class Int(Param):
    """An integer parameter (number of groups, rank, ...)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kind", "int")
        bad = [g for g in self.grid if not (isinstance(g, int) and not isinstance(g, bool))]
        if bad:
            raise ConfigError(f"Int parameter: grid values must be integers, got {bad}")

    def _resolved_bounds(self, lo: Any, hi: Any) -> dict[str, Any]:
        # the integers within the bounds (a tolerance of 1e-9 absorbs rounding, e.g. 3 * (1/3))
        return {"low": None if lo is None else int(math.ceil(lo - 1e-9)),
                "high": None if hi is None else int(math.floor(hi + 1e-9))}

    def check(self, value: Any) -> str | None:
        msg = super().check(value)
        if msg is None and int(value) != value:
            return f"expected an integer, got {value!r}"
        return msg

    def spacing(self) -> float:
        g = sorted(int(v) for v in self.grid)
        return max(g[i + 1] - g[i] for i in range(len(g) - 1)) if len(g) > 1 else 1.0

    def step_out(self, value: Any, direction: int, factor: float | None = None) -> Any | None:
        """Integers grow geometrically (x2 up, /2 down, at least by 1), clipped to bounds."""
        v = int(value)
        f = factor or 2.0
        new = max(v + 1, int(round(v * f))) if direction > 0 else min(v - 1, int(round(v / f)))
        if direction > 0 and self.high is not None:
            if v >= self.high:
                return None
            new = min(new, int(self.high))
        if direction < 0:
            lo = int(self.low) if self.low is not None else None
            if lo is not None:
                if v <= lo:
                    return None
                new = max(new, lo)
        return new

    def between(self, a: Any, b: Any) -> Any | None:
        lo, hi = sorted((int(a), int(b)))
        if hi - lo < 2:
            return None
        return int(round(math.sqrt(lo * hi))) if lo > 0 else (lo + hi) // 2


@dataclass(frozen=True)
class Categorical(Param):
    """Unordered choices, searched exactly as listed."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kind", "categorical")

    @property
    def ordered(self) -> bool:
        return False

    def at_low(self, value: Any) -> bool:
        return False

    def at_high(self, value: Any) -> bool:
        return False

    def clip(self, value: Any) -> Any:
        return value

    def spacing(self) -> float:
        return 0.0

    def step_out(self, value: Any, direction: int, factor: float | None = None) -> Any | None:
        return None

    def between(self, a: Any, b: Any) -> Any | None:
        return None

    def check(self, value: Any) -> str | None:
        return None  # user-given alternatives are allowed; the model validates them in fit

    def __str__(self) -> str:
        return f"Categorical({list(self.grid)!r})"


def list_to_param(values: Sequence[Any]) -> Param:
    """The declaration a plain list stands for (the first release's form).

    Two or more distinct numbers make an ordered range searched under the same rule and
    budget as a declared one: :class:`Int` if all are integers, :class:`Log` if all are > 0
    and the largest is at least 10 times the smallest, else :class:`Linear`; the grid is the
    list as given, and the sign of the values is kept as the only bound (all > 0 for Log;
    ``low=0`` for Int and Linear when no value is negative).  Anything else -- strings,
    booleans, a single value -- is :class:`Categorical`, searched exactly as listed."""
    vals = list(values)
    numeric = all(_is_number(v) for v in vals)
    if not numeric or len({float(v) for v in vals}) < 2:
        return Categorical(tuple(vals))
    low = 0 if min(vals) >= 0 else None
    if all(isinstance(v, (int, np.integer)) for v in vals):
        return Int(tuple(int(v) for v in vals), low=low)
    reals = tuple(float(v) for v in vals)
    if min(reals) > 0 and max(reals) >= 10 * min(reals):
        return Log(reals, low=0.0)
    return Linear(reals, low=None if low is None else 0.0)


def as_param(decl: Any, name: str = "") -> Param:
    """A :class:`Param` from a declaration (a Param, or a plain list: :func:`list_to_param`)."""
    if isinstance(decl, Param):
        return decl
    if isinstance(decl, (list, tuple)):
        if not decl:
            raise ConfigError(f"search space entry {name!r} is an empty list")
        return list_to_param(decl)
    raise ConfigError(f"search space entry {name!r} must be a Param (Log, Linear, Int, "
                      f"Categorical) or a list of values, got {decl!r}")


def normalise_space(space: Mapping[str, Any]) -> dict[str, Param]:
    """``{name: Param}`` for every entry of a declared search space, in sorted key order."""
    return {k: as_param(space[k], k) for k in sorted(space)}


def check_value(name: str, decl: Param | Sequence[Any] | None, value: Any) -> str | None:
    """Why ``value`` is not allowed for parameter ``name`` under ``decl`` (or None)."""
    if decl is None:
        return None
    return as_param(decl, name).check(value)


def space_json(space: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-able form of a search space (``{name: {"kind", "grid", "low", "high"}}``, sorted
    keys; an expression bound is kept as its text): stored with results, shown by
    ``mtlbench models``."""
    return {k: p.to_json() for k, p in normalise_space(space).items()}


_KINDS = {"log": Log, "linear": Linear, "int": Int, "categorical": Categorical}


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


# ------------------------------------------------------------------ spaces with bounds
def space_problems(space: Mapping[str, Any]) -> list[str]:
    """Why a declared search space cannot be searched under the rule (empty if fine): an
    ordered parameter whose grid has fewer than two distinct values (no start range), an
    expression bound naming something that is neither a problem dimension nor another
    searched parameter (or a parameter named like a problem dimension that a bound reads),
    or bounds that depend on each other in a circle."""
    params = normalise_space(space)
    out = []
    for key, par in params.items():
        if par.ordered and len(set(par.grid)) < 2:
            lo, hi = _example_range(par)
            out.append(f"{key} = {par} starts from one value; declare a start range of at "
                       f"least two distinct values, e.g. {type(par).__name__}([{lo}, {hi}], "
                       f"low={_fmt(par.low)}, high={_fmt(par.high)}): the starting design "
                       f"spreads every ordered parameter over its range (docs/tuning.md)")
        unknown = sorted(par.bound_names - set(PROBLEM_NAMES) - (set(params) - {key}))
        if unknown:
            others = ', '.join(sorted(set(params) - {key})) or 'none'
            out.append(f"{key}: bound {_names_text(par)} uses {', '.join(map(repr, unknown))}, "
                       f"which is neither a problem dimension ({', '.join(PROBLEM_NAMES)}) nor "
                       f"another searched parameter ({others})")
    read = frozenset().union(*(p.bound_names for p in params.values()))
    for name in sorted(read & set(params) & set(PROBLEM_NAMES)):
        out.append(f"{name}: a searched parameter named like the problem dimension {name!r} "
                   f"is read by a bound expression, which is ambiguous; rename the parameter")
    try:
        bound_order(params)
    except ConfigError as exc:
        out.append(str(exc))
    return out


def _names_text(par: Param) -> str:
    return " / ".join(f"{w}={b!r}" for w, b in (("low", par.low), ("high", par.high))
                      if isinstance(b, str))


def _example_range(par: Param) -> tuple[str, str]:
    v = par.grid[0]
    if isinstance(par, Int):
        return str(v), str(max(2 * v, v + 2))
    if isinstance(par, Log):
        return f"{v / 10:g}", f"{v * 10:g}"
    return f"{v - 1:g}", f"{v + 1:g}"


def bound_order(space: Mapping[str, Param]) -> list[str]:
    """The searched parameters in an order where every parameter comes after those its
    bounds read (ties: sorted keys), so that a point is clipped one coordinate at a time;
    a ConfigError when the bounds depend on each other in a circle."""
    keys = sorted(space)
    deps = {k: sorted(space[k].bound_names & (set(keys) - {k})) for k in keys}
    order: list[str] = []
    while len(order) < len(keys):
        ready = [k for k in keys if k not in order and all(d in order for d in deps[k])]
        if not ready:
            circle = [k for k in keys if k not in order]
            raise ConfigError(f"the bounds of {', '.join(circle)} depend on each other in a "
                              f"circle ({'; '.join(f'{k} reads {deps[k]}' for k in circle)}); "
                              f"let one of them have bounds of its own")
        order.append(ready[0])
    return order


def resolve(par: Param, point: Mapping[str, Any], context: Mapping[str, Any]) -> Param:
    """``par`` with its bounds evaluated at ``point`` (values of the other searched
    parameters) within ``context`` (the problem's dimensions and the fixed parameters)."""
    return par if par.static else par.resolved({**context, **point})


def clip_point(space: Mapping[str, Param], point: Mapping[str, Any],
               context: Mapping[str, Any]) -> dict[str, Any]:
    """``point`` with every ordered coordinate clipped to its bounds, evaluated in
    :func:`bound_order` (a bound that reads another parameter sees its clipped value)."""
    out = dict(point)
    for key in bound_order(space):
        if key in out and space[key].ordered and _is_number(out[key]):
            out[key] = resolve(space[key], out, context).clip(out[key])
    return out
