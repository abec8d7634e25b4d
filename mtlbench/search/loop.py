"""The fit loop of one unit's hyperparameter search: ask the searcher for points, fit each on
the train part, score it on the validation part, append it to the trace, until the searcher
proposes nothing or the budget is used (:func:`search`).
"""
from __future__ import annotations

import math
import time
from typing import Any, Mapping

import numpy as np

from ..data import TaskSet
from ..errors import ConfigError
from ..evaluate import (_bool_or_none, _int_or_none, check_fit_returned, model_scores,
                        plugin_traceback, score_key)
from ..metrics import Metric
from ..model import MTLModel, clone
from .searchers import (DEFAULT_BUDGET, DEFAULT_SEARCH, best_index, edge_report,
                        get_searcher_class, problem_context, resolved_bounds)
from .space import space_from_json

#: Hard limit of fits per unit for a searcher that ignores the budget (``grid``), so that a
#: faulty searcher cannot loop forever.
MAX_FITS = 10000

#: Relative tolerance under which two warm-start candidates are equally near
#: (:func:`nearest_fit`).
NEAR_RTOL = 1e-9


def search(base: MTLModel, space: Mapping[str, Any], train: TaskSet, val: TaskSet,
           searcher_name: str = DEFAULT_SEARCH, budget: int = DEFAULT_BUDGET,
           metric: str | Metric = "auc") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run one unit's hyperparameter search: ``(trace, summary)``.

    Every point is fitted on the same ``train`` object (so ``train.memo`` is shared) and scored
    on ``val`` by ``metric``.  A trace entry holds ``params``, ``phase`` (start / extend /
    refine), ``val_<metric>`` (:func:`score_key`: ``val_auc``, ``val_rmse``; absent for a
    failed fit, which has ``error``, the exception's type and message, and ``traceback``, its
    frames in the plugin's code: :func:`plugin_traceback`),
    ``converged`` (``converged_`` of the fitted model if it is a bool, else None: not
    recorded), ``n_iter`` and ``constant_share`` (the share of tasks whose validation scores
    are constant: :func:`task_scores`); the trace is a pure function of data, seed, settings
    and code.  The summary holds ``fit_times`` (seconds per fit, aligned with the trace),
    ``search``, ``budget``, ``n_fits``, ``failed_fits`` (fits that raised), ``at_bound``,
    ``at_edge``,
    ``budget_exhausted`` (the budget -- for a searcher that ``extends_past_budget``, the
    budget plus as many extension fits again -- ran out while the searcher still wanted to
    extend past an edge; ``n_fits`` above the budget counts the extension fits past it),
    ``start_exceeds_budget`` (the starting design alone is larger than the budget; it is
    fitted in full), ``problem_dims`` (the dimensions bound expressions read: ``d``, ``T``,
    ``n_min``, ``n_max`` of ``train``) and ``bounds`` (``{param: {"low", "high"}}``, the
    numeric bounds at the selected point).

    The searcher receives the problem's dimensions and ``base``'s fixed numeric
    hyperparameters (a bound such as ``high="1/k"`` may read a parameter the user fixed).
    """
    space = space_from_json(space)
    dims = problem_context(train)
    fixed = {k: v for k, v in base.get_params(deep=False).items()
             if k not in space and isinstance(v, (int, float, np.integer, np.floating))
             and not isinstance(v, (bool, np.bool_))}
    context = {**fixed, **dims}
    from ..scoring import get_metric

    metric = get_metric(metric)
    searcher = get_searcher_class(searcher_name)(space, context)
    searcher.select_by = metric.name
    cap = MAX_FITS
    start_exceeds = False
    if searcher.uses_budget:
        n_start = len(searcher.start())
        start_exceeds = n_start > budget
        cap = max(budget, n_start)
    warm = bool(getattr(base, "convex", False) and getattr(base, "supports_warm_start", False))
    trace: list[dict[str, Any]] = []
    # Timings vary from run to run: they are kept beside the trace (index-aligned), so that
    # neither a searcher nor the stored trace can depend on them (bit-identical results
    # serially, with --jobs and on Dask).
    fit_times: list[float] = []
    fitted: list[tuple[Mapping[str, Any], MTLModel]] = []   # successful fits, for warm starts
    # Past the budget only extension fits, and at most the budget again (version 3 of the
    # adaptive rule); below it the loop is the same as before.
    extends = searcher.uses_budget and getattr(searcher, "extends_past_budget", False)
    limit = cap + budget if extends else cap
    while len(trace) < limit:
        phase, batch = searcher.propose(trace)
        if not batch or (len(trace) >= cap and phase != "extend"):
            break
        for params in batch:
            if len(trace) >= limit or (len(trace) >= cap and phase != "extend"):
                break
            _check_proposal(searcher_name, space, params)
            t0 = time.perf_counter()
            init = nearest_fit(space, params, fitted) if warm else None
            entry, model = _fit_point(base, params, phase, train, val, init, metric)
            fit_times.append(time.perf_counter() - t0)
            trace.append(entry)
            if model is not None and warm:
                fitted.append((params, model))
    exhausted = False
    if searcher.uses_budget and len(trace) >= cap:
        phase, batch = searcher.propose(trace)
        exhausted = phase == "extend" and bool(batch)
    b = best_index(trace, metric)
    selected = trace[b]["params"] if b is not None else {}
    at_bound, at_edge = edge_report(space, trace, selected, context) if b is not None else ([], [])
    summary = {"search": searcher_name, "budget": budget if searcher.uses_budget else None,
               "n_fits": len(trace), "failed_fits": sum(1 for e in trace if "error" in e),
               "at_bound": at_bound, "at_edge": at_edge,
               "budget_exhausted": exhausted, "start_exceeds_budget": start_exceeds,
               "warm_start": warm, "fit_times": fit_times, "problem_dims": dims,
               "bounds": resolved_bounds(space, selected, context) if b is not None else {}}
    return trace, summary


def param_distance(space: Mapping[str, Any], a: Mapping[str, Any],
                   b: Mapping[str, Any]) -> float:
    """Distance of two points of ``space`` in units of each parameter's starting-grid step:
    ``|log(a / b)| / log(spacing)`` for a Log parameter, ``|a - b| / spacing`` for Linear and
    Int, 0 or infinity for a Categorical one (equal or not); the Euclidean norm over the
    parameters."""
    total = 0.0
    for key, par in space.items():
        x, y = a[key], b[key]
        if par.kind == "categorical":
            if x != y:
                return math.inf
            continue
        step = par.spacing()
        if par.kind == "log":
            diff = abs(math.log(float(x) / float(y))) / math.log(step) if step > 1 else 0.0
        else:
            diff = abs(float(x) - float(y)) / step if step > 0 else 0.0
        total += diff * diff
    return math.sqrt(total)


def nearest_fit(space: Mapping[str, Any], params: Mapping[str, Any],
                fitted: list[tuple[Mapping[str, Any], MTLModel]]) -> MTLModel | None:
    """The warm start of a convex model's fit at ``params``: the earlier successful fit whose
    point is nearest (:func:`param_distance`), or None when there is none or every one differs
    in a categorical parameter.  Distances within a relative :data:`NEAR_RTOL` of the smallest
    are ties (a starting design has equally near points, whose computed distances differ in
    the last bits from one CPU to another), won by the latest fit.  The optimum of a convex
    problem does not depend on the start, so the choice changes the number of iterations
    only, and it is a function of the trace."""
    dists = [param_distance(space, params, point) for point, _ in fitted]
    finite = [d for d in dists if math.isfinite(d)]
    if not finite:
        return None
    cut = min(finite) * (1.0 + NEAR_RTOL) + NEAR_RTOL
    return next(model for (_, model), d in zip(reversed(fitted), reversed(dists)) if d <= cut)


def _check_proposal(searcher_name: str, space: Mapping[str, Any],
                    params: Mapping[str, Any]) -> None:
    """A searcher (possibly a third-party plugin) proposes only points of the declared space."""
    if not isinstance(params, Mapping) or set(params) != set(space):
        raise ConfigError(f"searcher {searcher_name!r} proposed {params!r}; a point must set "
                          f"exactly the searched parameters {sorted(space)}")
    for key, value in params.items():
        why = space[key].check(value)
        if why is None and space[key].kind == "categorical" and value not in space[key].grid:
            why = f"is not one of the listed values {list(space[key].grid)}"
        if why:
            raise ConfigError(f"searcher {searcher_name!r} proposed {key}={value!r}, which the "
                              f"declaration rejects: {key} {why}")


def _fit_point(base: MTLModel, params: Mapping[str, Any], phase: str, train: TaskSet,
               val: TaskSet, init: MTLModel | None, metric: Metric
               ) -> tuple[dict[str, Any], MTLModel | None]:
    model = clone(base, **params)
    entry: dict[str, Any] = {"params": dict(params), "phase": phase}
    try:
        fitted = model.fit(train, init=init)
        check_fit_returned(fitted, model)
        scores, constant = model_scores(model, val)
        value = scores.value(metric)[0]
        if not np.isfinite(value):
            raise FloatingPointError(f"the validation {metric.name} is undefined ({value})")
    except Exception as exc:  # noqa: BLE001 - a failing point is recorded, not fatal
        entry["error"] = f"{type(exc).__name__}: {exc}"
        entry["traceback"] = plugin_traceback(exc)
        return entry, None
    entry[score_key(metric)] = float(value)
    entry["converged"] = _bool_or_none(getattr(model, "converged_", None))
    entry["n_iter"] = _int_or_none(getattr(model, "n_iter_", None))
    entry["constant_share"] = float(constant.mean())
    return entry, model



__all__ = ["search", "MAX_FITS"]
