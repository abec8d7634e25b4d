"""The starting design of the adaptive search: the same space-filling design rule for every model.

Every unit of the ``adaptive`` searcher (version 4) starts from :data:`START_DESIGN_SIZE` = 12
points spread over the declared start ranges (:attr:`mtlbench.search.space.Param.start_range`: the
smallest and largest grid value of each parameter), whatever the number of parameters, so
every model gets the same number of starting fits and every ordered parameter takes 12
values (fewer only where a range holds fewer integers).

Construction: a Latin hypercube from a *modified good lattice point set* (Fang & Wang,
"Number-theoretic Methods in Statistics", 1994, ch. 1; Korobov lattices).  With the prime
m = 13, point i = 1..12 puts parameter j (sorted keys) at level

    x_ij = (i * h_j) mod 13   in {1, ..., 12},

a permutation of the 12 levels for every generator h_j in 1..12 (13 is prime), so every
parameter takes each level exactly once.  h_1 = 1 (any lattice can be re-indexed to that);
the other generators are the lexicographically first set of distinct values in 2..12 that
(1) maximises the smallest squared distance (in levels) between two points of any
two-parameter projection -- so no pair of parameters is sampled along a few lines --, then
(2) has the fewest parameter pairs at that value, (3) maximises the smallest squared distance
between two points of the whole design (maximin) and (4) has the fewest point pairs at it.
For one parameter that is the 12 levels in order; for two, the Fibonacci lattice
(h = 1, 5).  Spaces of more than 12 parameters reuse the generators cyclically.  Integer
arithmetic throughout: the levels are the same on every machine and with every library version,
and :func:`lattice_generators` is pinned by a test.

Levels to values, u = (x - 1) / 11 in [0, 1] (both ends of every range are design values):

* Log in [a, b]: a (b / a)^u, evenly spread in log scale;
* Linear in [a, b]: a + u (b - a);
* Int in [a, b]: the nearest integer to a (b / a)^u when a >= 1 (the geometric scale of
  :meth:`Int.step_out <mtlbench.search.space.Int.step_out>` and :meth:`Int.between`), else to
  a + u (b - a);
* Categorical with c values: value floor((x - 1) c / 12), i.e. 12 / c points per value when
  c divides 12 (2, 3, 4, 6, 12 values), otherwise counts that differ by at most one.

Real values are computed in decimal arithmetic (``decimal``: ``exp``/``ln`` are correctly
rounded, so the digits do not depend on the platform's libm) and rounded to 12 significant
digits, the precision the searcher compares points at.  A range is first clipped to the
bounds that depend only on the problem (``Int([2, 8], high="min(d, T)")`` with min(d, T) = 5
spreads over [2, 5]); a bound that reads another parameter (``high="1/k"``) is applied point
by point (:func:`mtlbench.search.space.clip_point`).  A point that repeats an earlier one (integer
rounding, clipping, categorical-only spaces) is dropped.
"""
from __future__ import annotations

import functools
import itertools
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import Any, Mapping

import numpy as np

from .space import Categorical, Int, Log, Param, clip_point, normalise_space, resolve

__all__ = ["START_DESIGN_SIZE", "LATTICE_MODULUS", "lattice_generators", "lattice_levels",
           "space_filling_design"]

#: Points of the starting design, the same for every model (12 of the 20 fits of a unit).
START_DESIGN_SIZE = 12
#: The prime modulus of the lattice (one more than the design size: the zero row is dropped).
LATTICE_MODULUS = START_DESIGN_SIZE + 1
_DIGITS = 12
_CTX = Context(prec=34, rounding=ROUND_HALF_EVEN)


def _levels(gens: tuple[int, ...]) -> list[tuple[int, ...]]:
    m = LATTICE_MODULUS
    return [tuple((i * h) % m for h in gens) for i in range(1, m)]


# Squared level distances of the 66 point pairs along one generator's column, by generator
# (integers: exact on every machine).
_I, _J = np.triu_indices(START_DESIGN_SIZE, k=1)
_COLUMN = {h: (np.arange(1, LATTICE_MODULUS) * h) % LATTICE_MODULUS
           for h in range(1, LATTICE_MODULUS)}
_SQ = {h: (c[_I] - c[_J]) ** 2 for h, c in _COLUMN.items()}


def _maximin(dists: np.ndarray) -> tuple[int, int]:
    """(smallest squared distance between two points, minus the number of pairs at it)."""
    low = int(dists.min())
    return low, -int(np.count_nonzero(dists == low))


def _criterion(gens: tuple[int, ...]) -> tuple[int, ...]:
    """The lexicographic criterion of the module docstring (larger is better)."""
    pairs = [int((_SQ[a] + _SQ[b]).min()) for a, b in itertools.combinations(gens, 2)]
    low = min(pairs)
    return (low, -pairs.count(low)) + _maximin(sum(_SQ[h] for h in gens))


@functools.lru_cache(maxsize=None)
def lattice_generators(n_params: int) -> tuple[int, ...]:
    """The generators (h_1, ..., h_p) of the design for ``n_params`` parameters (module
    docstring): h_1 = 1 and the best distinct others by the projection and maximin criterion,
    first in lexicographic order among equals; more than 12 parameters reuse them
    cyclically."""
    if n_params < 1:
        return ()
    p = min(n_params, LATTICE_MODULUS - 1)
    best, best_score = None, None
    for rest in itertools.combinations(range(2, LATTICE_MODULUS), p - 1):
        gens = (1,) + rest
        score = _criterion(gens) if p > 1 else ()
        if best_score is None or score > best_score:
            best, best_score = gens, score
    return tuple(best[j % p] for j in range(n_params))


def lattice_levels(n_params: int) -> list[tuple[int, ...]]:
    """The design in levels: 12 tuples of ``n_params`` levels in 1..12 (a Latin hypercube)."""
    return _levels(lattice_generators(n_params))


def _round(x: Decimal) -> float:
    return float(format(x, f".{_DIGITS}g"))


def _value(par: Param, lo: Any, hi: Any, level: int) -> Any:
    """The value of ``par`` at ``level`` (1..12) of the range [lo, hi]."""
    if isinstance(par, Categorical):
        return par.grid[(level - 1) * len(par.grid) // START_DESIGN_SIZE]
    steps = START_DESIGN_SIZE - 1
    if level == 1 or lo == hi:
        return lo
    if level == START_DESIGN_SIZE:
        return hi
    u = _CTX.divide(Decimal(level - 1), Decimal(steps))
    a, b = Decimal(lo), Decimal(hi)
    geometric = isinstance(par, Log) or (isinstance(par, Int) and lo >= 1)
    if geometric:
        la = a.ln(_CTX)
        x = _CTX.add(la, _CTX.multiply(u, _CTX.subtract(b.ln(_CTX), la))).exp(_CTX)
    else:
        x = _CTX.add(a, _CTX.multiply(u, _CTX.subtract(b, a)))
    if isinstance(par, Int):
        return int(x.to_integral_value(rounding=ROUND_HALF_EVEN))
    return _round(x)


def _start_range(par: Param, context: Mapping[str, Any], searched: set[str]) -> tuple[Any, Any]:
    """The start range, clipped to the bounds that depend on the problem only."""
    lo, hi = par.start_range
    if par.ordered and not (par.bound_names & searched):
        bounded = resolve(par, {}, context)
        lo, hi = bounded.clip(lo), bounded.clip(hi)
    return lo, hi


def space_filling_design(space: Mapping[str, Any],
                         context: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The starting design of ``space`` (module docstring): at most 12 points, keys in sorted
    order, a pure function of the declarations and ``context`` (the problem's dimensions
    ``d``, ``T``, ``n_min``, ``n_max`` and fixed parameters that bounds may read)."""
    params = normalise_space(space)
    if not params:
        return [{}]
    context = dict(context or {})
    keys = list(params)
    ranges = {k: _start_range(params[k], context, set(keys)) for k in keys}
    out: list[dict[str, Any]] = []
    for levels in lattice_levels(len(keys)):
        point = {k: _value(params[k], *ranges[k], x) for k, x in zip(keys, levels)}
        point = clip_point(params, point, context)
        if point not in out:
            out.append(point)
    return out
