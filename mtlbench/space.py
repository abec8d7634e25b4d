"""Declared hyperparameters: kind, starting grid and real bounds of each searched parameter.

A model's ``search_space`` maps parameter names to :class:`Param` declarations::

    search_space = {
        "lam_ratio": Log([0.01, 0.1], low=0.0, high=1.0),  # 1.0 = lambda_max: W = 0 beyond
        "k": Int([3], low=2),                                # one starting value, searched
        "loss": Categorical(["auc", "squared"]),
    }

* ``grid`` is where a search *starts*; a searcher may go beyond it, up to the bounds.
* ``low`` / ``high`` are limits of the *model* (say why in the model's docstring: e.g. a ratio
  of lambda_max at 1 gives W = 0, RAMUSA's theta = 1 is the plain trace norm), not guesses of
  where the optimum lies.  ``None`` means unbounded in that direction.  A Log parameter is
  always > 0; ``low=0.0`` there means "every positive value" (0 itself is never tried).
* a plain list (``{"lam": [0.1, 1.0]}``, the first release's form, still accepted from
  third-party plugins) is read as :class:`Categorical`: searched exactly as listed.

The same declarations validate user overrides without fitting anything
(:func:`check_value`), together with a model's ``param_constraints`` for parameters that are
not searched (``tol``, ``max_iter``, ...).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import ConfigError

__all__ = ["Param", "Log", "Linear", "Int", "Categorical", "as_param", "normalise_space",
           "check_value", "space_json", "space_from_json"]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) or _is_np_number(v)


def _is_np_number(v: Any) -> bool:
    return isinstance(v, (np.integer, np.floating)) and not isinstance(v, np.bool_)


@dataclass(frozen=True)
class Param:
    """Base class of a declared hyperparameter (use :class:`Log`, :class:`Linear`,
    :class:`Int` or :class:`Categorical`)."""

    grid: tuple
    low: float | None = None
    high: float | None = None
    kind: str = field(default="", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", tuple(self.grid))
        if not self.grid:
            raise ConfigError(f"{type(self).__name__}: the starting grid is empty")

    # ---- what searchers use
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

    # ---- validation and serialisation
    def check(self, value: Any) -> str | None:
        """Why ``value`` is not allowed (a sentence), or None."""
        if not _is_number(value):
            return f"expected a number, got {value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"expected a finite number, got {value!r}"
        if self.low is not None and value < self.low:
            return f"must be >= {self.low:g}, got {value!r}"
        if self.high is not None and value > self.high:
            return f"must be <= {self.high:g}, got {value!r}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "grid": list(self.grid), "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Log(Param):
    """A positive real parameter searched on a log scale (regularisation weights)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "kind", "log")
        bad = [g for g in self.grid if not _is_number(g) or not g > 0]
        if bad:
            raise ConfigError(f"Log parameter: grid values must be > 0, got {bad}")
        if self.low is not None and self.low < 0:
            raise ConfigError(f"Log parameter: low must be >= 0, got {self.low}")

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

    def spacing(self) -> float:
        return 0.0

    def step_out(self, value: Any, direction: int, factor: float | None = None) -> Any | None:
        return None

    def between(self, a: Any, b: Any) -> Any | None:
        return None

    def check(self, value: Any) -> str | None:
        return None  # user-given alternatives are allowed; the model validates them in fit


def as_param(decl: Any, name: str = "") -> Param:
    """A :class:`Param` from a declaration (a Param, or a plain list read as Categorical)."""
    if isinstance(decl, Param):
        return decl
    if isinstance(decl, (list, tuple)):
        if not decl:
            raise ConfigError(f"search space entry {name!r} is an empty list")
        return Categorical(tuple(decl))
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
    keys): stored with results, shown by ``mtlbench models``."""
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
