"""Planning a run: which problems, which units, checks before any unit runs, dispatch order.

Nothing here fits a model: hyperparameter overrides are checked against the model's declared
``search_space`` / ``param_constraints`` (:func:`mtlbench.model.param_problems`), so a plugin
whose ``fit`` kills its process cannot take the ``compare`` process down before the run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..data import TaskSet
from ..dataset import problems_of
from ..errors import (ConfigError, DatasetUnavailableError, DataValidationError,
                      MTLBenchError, UnknownNameError, unknown_name_message)
from ..model import param_problems
from ..plugins import Registry
from ..protocol import MIN_PER_CLASS, ProtocolConfig, config_json
from ..provenance import unit_provenance
from ..selectors import ModelSelection
from ..search.space import Param
from .cost import DEFAULT_COST, expected_unit_seconds
from .unit import UnitSpec, load_problem, problem_id

__all__ = ["resolve_problems", "plan_units", "check_problems_load", "check_overrides",
           "expected_seconds", "cost_hint_reader", "cost_scaling_reader", "DEFAULT_COST"]



def resolve_problems(registry: Registry, names: Sequence[str],
                     data_dir: str | None = None) -> list[tuple[str, str]]:
    """``["shoes", "simulated", "sun/modern"]`` -> [(dataset, problem), ...]."""
    out: list[tuple[str, str]] = []
    for name in names:
        ds_name, _, prob = name.rpartition("/") if "]" in name else name.partition("/")
        if "[" in name and "]" not in ds_name:  # "NAME[...]" without a problem
            ds_name, prob = name, ""
        ds = registry.dataset(ds_name)
        ds_name = getattr(ds, "selector", ds_name.split("[", 1)[0].strip())
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
    """Load every problem once up front so that missing or bad data fails fast and clearly.

    A dataset plugin's own errors (:class:`~mtlbench.errors.MTLBenchError`) pass as they are;
    anything else it raises (e.g. numpy refusing a parameter: ``simulated[seed=-1]``) becomes
    one :class:`~mtlbench.errors.DataValidationError` naming the dataset and problem."""
    out = {}
    for ds_name, prob in problems:
        ds = registry.dataset(ds_name)
        try:
            out[problem_id(ds_name, prob)] = load_problem(ds_name, prob, data_dir,
                                                          config_json(ds.params()))
        except MTLBenchError:
            raise
        except Exception as exc:  # noqa: BLE001 - a plugin's bug or a value it rejects
            raise DataValidationError(
                f"dataset {ds_name!r} cannot load problem {prob!r}: {type(exc).__name__}: "
                f"{exc} (a dataset parameter it rejects, or a bug in the dataset plugin)"
            ) from None
    return out


def check_overrides(registry: Registry, selections: Sequence[ModelSelection],
                    problems: Mapping[str, TaskSet] | None = None,
                    timeout: float | None = None) -> None:
    """Reject an out-of-range hyperparameter override before any unit runs.

    Every user-given value (a fixed value or each value of a grid override) is checked
    against the model's declared ``search_space`` and ``param_constraints``
    (:func:`mtlbench.model.param_problems`), without running plugin code beyond ``__init__``.
    Values of parameters the model declares no kind or bounds for (nothing, or a plain list)
    are tried by fitting once on a probe of the first problem (3 labels per class per task)
    in a supervised process, like units: each fit gets min(10 s, ``timeout``), enforced
    inside the process and, for a fit that swallows that limit, from outside (the process is
    killed a grace later); Ctrl-C stops it.  A ``ValueError``/``TypeError`` naming the
    parameter becomes a :class:`ConfigError`; anything else (a crash, a fit stopped from
    outside) is left to the units to record."""
    undeclared: list[tuple[str, dict, str, Any]] = []
    for sel in selections:
        cls = registry.model_class(sel.name)
        declared = {k for k, d in {**dict(cls.param_constraints),
                                   **dict(cls.search_space)}.items() if isinstance(d, Param)}
        values = list(sel.fixed.items())
        values += [(k, v) for k, vals in sel.grid_overrides.items() for v in vals]
        for key, value in values:
            problems_ = param_problems(cls, {key: value})
            if problems_:
                raise ConfigError(f"invalid hyperparameter override "
                                  f"{sel.name}[{key}={value!r}]: {'; '.join(problems_)}")
            if key not in declared:
                undeclared.append((sel.name, dict(sel.fixed), key, value))
    first = next(iter(problems.values()), None) if problems else None
    if undeclared and first is not None:
        seconds = min(10.0, timeout) if timeout else 10.0
        for name, key, value, message in _probe_isolated(undeclared, first, seconds):
            raise ConfigError(f"invalid hyperparameter override {name}[{key}={value!r}]: "
                              f"{message}")


def _probe_isolated(items: list, tasks: TaskSet, seconds: float) -> list[tuple]:
    """Fit each (model, fixed, key, value) once on a probe of ``tasks`` in a process
    supervised like a unit's (:func:`~.local.run_supervised`: each fit is stopped from
    outside ``seconds`` + a grace after it starts, the process dies with ``compare``); the
    parameter errors found (those of the fits before a crash or a stopped fit)."""
    from .local import run_supervised

    probe = _probe_taskset(tasks)
    if probe is None:
        return []
    return run_supervised(_probe_fits, (items, probe, seconds), seconds)


def _probe_fits(items: list, probe: TaskSet, seconds: float, emit) -> None:
    import warnings

    from threadpoolctl import threadpool_limits

    from ..errors import MTLBenchError
    from ..model import clone
    from ..plugins import get_registry
    from .unit import time_limit

    reg = get_registry()
    for name, fixed, key, value in items:
        emit(None)  # a fit starts: the supervisor's clock for it
        try:
            with warnings.catch_warnings(), time_limit(seconds), threadpool_limits(limits=1):
                warnings.simplefilter("ignore")
                clone(reg.model_class(name)(**fixed), **{key: value}).fit(probe)
        except (ValueError, TypeError) as exc:
            data_error = isinstance(exc, MTLBenchError) and not isinstance(exc, ConfigError)
            if not data_error and key in str(exc):
                emit((name, key, value, str(exc)))
        except BaseException:  # noqa: BLE001 - only parameter errors matter here
            pass


def _probe_taskset(tasks: TaskSet, per_class: int = MIN_PER_CLASS) -> TaskSet | None:
    """The same tasks and features with only ``per_class`` labels of each class per task."""
    import numpy as np

    from ..protocol import restrict_tasks

    rows, keep = [], []
    for t in range(tasks.T):
        y = tasks.y(t)
        pos, neg = np.flatnonzero(y > 0)[:per_class], np.flatnonzero(y < 0)[:per_class]
        if pos.size and neg.size:
            keep.append(t)
            rows.append(np.sort(np.concatenate([pos, neg])))
    if not keep:
        return None
    return restrict_tasks(tasks, keep).subset(rows, name=f"{tasks.name}[probe]", meta={})


def expected_seconds(specs: Sequence[UnitSpec], registry: Registry | None = None,
                     history: Any = None, sizes: Mapping[str, float] | None = None,
                     tasks: Mapping[str, float] | None = None) -> dict[str, float]:
    """Expected seconds of each unit (by key), for dispatching longest first and the ETA.

    The rule of :func:`~.cost.expected_unit_seconds`: the median stored time of the same
    model label on the same problem (``history``: e.g.
    :meth:`mtlbench.store.ResultStore.unit_times`), else its times on other problems scaled
    by problem size and task count (``sizes``, ``tasks``: problem id -> labels x features,
    number of tasks) with the model's ``cost_scaling``, else the model class's optional
    ``cost_hint``, else :data:`~.cost.DEFAULT_COST`."""
    return {key: e.seconds for key, e in expected_unit_seconds(
        specs, history, sizes, cost_hint_reader(registry), tasks,
        cost_scaling_reader(registry)).items()}


def cost_hint_reader(registry: Registry | None):
    """Model name -> its class's ``cost_hint`` (None: no registry, or no hint)."""
    if registry is None:
        return None
    return lambda name: getattr(registry.model_class(name), "cost_hint", None)


def cost_scaling_reader(registry: Registry | None):
    """Model name -> its class's ``cost_scaling`` (None: no registry, or none declared)."""
    if registry is None:
        return None
    return lambda name: getattr(registry.model_class(name), "cost_scaling", None)
