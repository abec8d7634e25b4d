"""Planning a run: which problems, which units, checks before any unit runs, dispatch order.

Nothing here fits a model: hyperparameter overrides are checked against the model's declared
``search_space`` / ``param_constraints`` (:func:`mtlbench.model.param_problems`), so a plugin
whose ``fit`` kills its process cannot take the ``compare`` process down before the run.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..data import TaskSet
from ..dataset import problems_of
from ..errors import ConfigError, DatasetUnavailableError, UnknownNameError
from ..model import param_problems
from ..plugins import Registry, unknown_name_message
from ..protocol import ProtocolConfig, config_json
from ..provenance import unit_provenance
from ..selectors import ModelSelection
from .unit import UnitSpec, load_problem, problem_id

__all__ = ["resolve_problems", "plan_units", "check_problems_load", "check_overrides",
           "expected_seconds", "DEFAULT_COST"]

DEFAULT_COST = 1.0


def resolve_problems(registry: Registry, names: Sequence[str],
                     data_dir: str | None = None) -> list[tuple[str, str]]:
    """``["shoes", "simulated", "sun/modern"]`` -> [(dataset, problem), ...]."""
    out: list[tuple[str, str]] = []
    for name in names:
        ds_name, _, prob = name.partition("/")
        ds = registry.dataset(ds_name)
        problems = problems_of(ds, Path(data_dir) if data_dir else None)
        if not problems:
            raise DatasetUnavailableError(
                f"dataset {ds_name!r} lists no problems: {ds.layout_help() or 'give --data-dir'}")
        if prob:
            if prob not in problems:
                raise UnknownNameError(unknown_name_message(f"{ds_name} problem", prob, problems))
            out.append((ds_name, prob))
        else:
            out.extend((ds_name, p) for p in problems)
    return out


def plan_units(registry: Registry, selections: Sequence[ModelSelection],
               problems: Sequence[tuple[str, str]], config: ProtocolConfig,
               keep_arrays_rep0: bool = True) -> list[UnitSpec]:
    """All units, ordered problem-major then repetition then model (so early results cover
    every model).  Each carries the provenance of its model and dataset code (part of its
    key: :mod:`mtlbench.provenance`)."""
    specs = []
    prov: dict[tuple[str, str], str] = {}
    for ds_name, prob in problems:
        ds = registry.dataset(ds_name)
        dparams = config_json(ds.params())
        for rep in range(config.reps):
            for sel in selections:
                pk = (sel.name, ds_name)
                if pk not in prov:
                    prov[pk] = config_json(unit_provenance(registry, sel.name, ds_name))
                specs.append(UnitSpec(
                    model=sel.name, label=sel.label, fixed_json=config_json(sel.fixed),
                    space_json=config_json(sel.space), dataset=ds_name,
                    problem=problem_id(ds_name, prob), problem_name=prob,
                    dataset_params_json=dparams, rep=rep, protocol=config,
                    keep_arrays=keep_arrays_rep0 and rep == 0, provenance_json=prov[pk]))
    return specs


def check_problems_load(registry: Registry, problems: Sequence[tuple[str, str]],
                        data_dir: str | None) -> dict[str, TaskSet]:
    """Load every problem once up front so that missing or bad data fails fast and clearly."""
    out = {}
    for ds_name, prob in problems:
        ds = registry.dataset(ds_name)
        out[problem_id(ds_name, prob)] = load_problem(ds_name, prob, data_dir,
                                                      config_json(ds.params()))
    return out


def check_overrides(registry: Registry, selections: Sequence[ModelSelection],
                    problems: Mapping[str, TaskSet] | None = None,
                    timeout: float | None = None) -> None:
    """Reject an out-of-range hyperparameter override before any unit runs, without fitting.

    Every user-given value (a fixed value or each value of a grid override) is checked
    against the model's declared ``search_space`` and ``param_constraints``
    (:func:`mtlbench.model.param_problems`).  A parameter the model declares nothing about is
    checked by the model's own ``fit`` inside the unit (in its isolated process), which
    records a failed unit naming the problem.  ``problems`` and ``timeout`` are accepted for
    compatibility and unused: no plugin code beyond ``__init__`` runs here."""
    for sel in selections:
        cls = registry.model_class(sel.name)
        values = list(sel.fixed.items())
        values += [(k, v) for k, vals in sel.grid_overrides.items() for v in vals]
        for key, value in values:
            problems_ = param_problems(cls, {key: value})
            if problems_:
                raise ConfigError(f"invalid hyperparameter override "
                                  f"{sel.name}[{key}={value!r}]: {'; '.join(problems_)}")


def expected_seconds(specs: Sequence[UnitSpec], registry: Registry | None = None,
                     history: Any = None) -> dict[str, float]:
    """Expected seconds of each unit (by key), for dispatching longest first and the ETA.

    In order of preference: the median stored time of finished units of the same model label
    on the same problem (``history``: a DataFrame with columns model, problem, model_name,
    time_total, e.g. :meth:`mtlbench.store.ResultStore.unit_times`), else of the same model
    on any problem, else the model class's optional ``cost_hint`` (expected seconds of one
    unit on the simulated data), else :data:`DEFAULT_COST`."""
    by_label: dict[tuple[str, str], float] = {}
    by_model: dict[str, float] = {}
    if history is not None and len(history):
        for (label, prob), g in history.groupby(["model", "problem"]):
            by_label[(label, prob)] = float(statistics.median(g.time_total))
        for name, g in history.groupby("model_name"):
            by_model[name] = float(statistics.median(g.time_total))
    hints: dict[str, float] = {}
    out = {}
    for s in specs:
        t = by_label.get((s.label, s.problem))
        if t is None:
            t = by_model.get(s.model)
        if t is None:
            if s.model not in hints:
                hint = DEFAULT_COST
                if registry is not None:
                    try:
                        hint = float(getattr(registry.model_class(s.model), "cost_hint",
                                             DEFAULT_COST) or DEFAULT_COST)
                    except Exception:  # noqa: BLE001 - an ordering hint only
                        hint = DEFAULT_COST
                hints[s.model] = hint
            t = hints[s.model]
        out[s.key] = t
    return out


def _loads(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v
