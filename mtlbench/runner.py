"""The grid of work units and its execution (serial, joblib processes, or a Dask cluster).

A unit is (model selection, problem, repetition); its hyperparameter search runs inside it.
:func:`execute_unit` is a pure function of the unit spec (plus where data lives): it loads the
problem (cached per process), runs the protocol and returns a result record; it never raises —
a model that raises, returns NaN/inf scores or runs past the timeout yields a "failed" record
with the message and traceback.  The caller writes each record to the store as it arrives,
so finished units survive a crash and a re-run skips them.

Every unit runs with BLAS limited to one thread, so a result does not depend on how many
units run side by side (``--jobs``, Dask): serial and parallel runs agree to the bit.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import hashlib
import os
import platform
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .data import TaskSet
from .errors import ConfigError, MTLBenchError, UnknownNameError
from .plugins import Registry, get_registry, unknown_name_message
from .protocol import PROTOCOL_VERSION, ProtocolConfig, config_json, run_protocol
from .selectors import ModelSelection
from .store import ResultStore

BLAS_THREADS_PER_UNIT = 1


@dataclass(frozen=True)
class UnitSpec:
    """Everything that identifies one unit of work (hashable, picklable)."""

    model: str                 # registry name
    label: str                 # name plus overrides, as stored and shown
    fixed_json: str            # canonical JSON of fixed hyperparameters
    space_json: str            # canonical JSON of the search space
    dataset: str
    problem: str               # "<dataset>/<problem>" or the dataset name
    problem_name: str          # the dataset's own problem name
    dataset_params_json: str
    rep: int
    protocol: ProtocolConfig
    keep_arrays: bool = False

    @property
    def key(self) -> str:
        ident = config_json({
            "model": self.model, "fixed": self.fixed_json, "space": self.space_json,
            "dataset": self.dataset, "problem": self.problem,
            "dataset_params": self.dataset_params_json, "rep": self.rep,
            "split": self.protocol.split_settings(),
        })
        return hashlib.sha256(ident.encode()).hexdigest()[:32]


@dataclass
class UnitResult:
    spec: UnitSpec
    row: dict[str, Any]
    task_scores: list[tuple] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.row["status"] == "ok"


# ---------------------------------------------------------------------------- planning
def problem_id(dataset: str, problem: str) -> str:
    return dataset if problem == dataset else f"{dataset}/{problem}"


def resolve_problems(registry: Registry, names: Sequence[str]) -> list[tuple[str, str]]:
    """``["shoes", "simulated", "sun/modern"]`` -> [(dataset, problem), ...]."""
    out: list[tuple[str, str]] = []
    for name in names:
        ds_name, _, prob = name.partition("/")
        ds = registry.dataset(ds_name)
        problems = ds.problems()
        if prob:
            if prob not in problems:
                raise UnknownNameError(unknown_name_message(f"problem of {ds_name}", prob, problems))
            out.append((ds_name, prob))
        else:
            out.extend((ds_name, p) for p in problems)
    return out


def plan_units(registry: Registry, selections: Sequence[ModelSelection],
               problems: Sequence[tuple[str, str]], config: ProtocolConfig,
               keep_arrays_rep0: bool = True) -> list[UnitSpec]:
    """All units, ordered problem-major then repetition then model (so early results cover
    every model)."""
    specs = []
    for ds_name, prob in problems:
        ds = registry.dataset(ds_name)
        dparams = config_json(ds.params())
        for rep in range(config.reps):
            for sel in selections:
                specs.append(UnitSpec(
                    model=sel.name, label=sel.label, fixed_json=config_json(sel.fixed),
                    space_json=config_json(sel.space), dataset=ds_name,
                    problem=problem_id(ds_name, prob), problem_name=prob,
                    dataset_params_json=dparams, rep=rep, protocol=config,
                    keep_arrays=keep_arrays_rep0 and rep == 0))
    return specs


# ---------------------------------------------------------------------------- execution
@functools.lru_cache(maxsize=8)
def load_problem(dataset: str, problem: str, data_dir: str | None,
                 dataset_params_json: str) -> TaskSet:
    """Load (once per process) the TaskSet of a problem through its dataset plugin."""
    from pathlib import Path

    ds = get_registry().dataset(dataset)
    if config_json(ds.params()) != dataset_params_json:
        raise ConfigError(f"dataset {dataset!r} parameters differ between planning and execution")
    return ds.load(problem, data_dir=Path(data_dir) if data_dir else None)


class UnitTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise UnitTimeout in this thread after ``seconds`` (SIGALRM; main thread only).

    Elsewhere (a Dask worker thread) the limit is enforced by the caller instead."""
    if not seconds or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return

    def _raise(signum, frame):
        raise UnitTimeout(f"unit exceeded the timeout of {seconds:g} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def versions(model: str | None = None) -> dict[str, str]:
    import numpy
    import scipy

    from . import __version__

    out = {"mtlbench": __version__, "numpy": numpy.__version__, "scipy": scipy.__version__,
           "python": platform.python_version(), "cpu_count": str(os.cpu_count()),
           "platform": platform.platform()}
    if model:
        with contextlib.suppress(Exception):
            info = get_registry().model_plugin(model)
            out["plugin"] = f"{info.distribution} {info.version}".strip()
    return out


def execute_unit(spec: UnitSpec, data_dir: str | None = None, timeout: float | None = None,
                 tasks: TaskSet | None = None) -> UnitResult:
    """Run one unit; never raises (failures become a "failed" record)."""
    import json

    from threadpoolctl import threadpool_limits

    started = _now()
    t0 = time.perf_counter()
    row: dict[str, Any] = {
        "key": spec.key, "model": spec.label, "dataset": spec.dataset, "problem": spec.problem,
        "rep": spec.rep, "seed": spec.protocol.seed,
        "model_config": {"name": spec.model, "fixed": json.loads(spec.fixed_json),
                         "space": json.loads(spec.space_json)},
        "protocol": {**spec.protocol.split_settings(), "reps": spec.protocol.reps},
        "dataset_params": json.loads(spec.dataset_params_json),
        "versions": versions(spec.model), "host": socket.gethostname(), "started_at": started,
    }
    try:
        with threadpool_limits(limits=BLAS_THREADS_PER_UNIT), time_limit(timeout):
            if tasks is None:
                tasks = load_problem(spec.dataset, spec.problem_name, data_dir,
                                     spec.dataset_params_json)
            cls = get_registry().model_class(spec.model)
            base = cls(**json.loads(spec.fixed_json))
            out = run_protocol(base, json.loads(spec.space_json), tasks, spec.protocol,
                               spec.rep, keep_arrays=spec.keep_arrays)
        row.update({
            "status": "ok", "best_params": out.best_params, "grid": out.grid,
            "val_auc": out.val_auc, "test_auc": out.test_auc, "n_tasks": len(out.task_names),
            "dropped_tasks": out.dropped_tasks, "time_select": out.select_time,
            "time_fit": out.fit_time, "n_iter": out.n_iter, "history": out.history,
            "diagnostics": out.diagnostics, "split_fingerprint": out.split_fingerprint,
            "data_fingerprint": out.data_fingerprint,
        })
        scores = [(i, n, a, m) for i, (n, a, m) in
                  enumerate(zip(out.task_names, out.task_auc, out.n_test))]
        arrays = out.arrays
    except BaseException as exc:  # noqa: BLE001 - isolate every failure, even a timeout
        if isinstance(exc, KeyboardInterrupt):
            raise
        row.update({"status": "failed", "message": _message(exc),
                    "traceback": traceback.format_exc()})
        scores, arrays = [], {}
    row["time_total"] = time.perf_counter() - t0
    row["finished_at"] = _now()
    return UnitResult(spec=spec, row=row, task_scores=scores, arrays=arrays)


def _message(exc: BaseException) -> str:
    if isinstance(exc, (MTLBenchError, UnitTimeout)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------- the run
@dataclass
class RunReport:
    planned: int
    skipped: int
    ran: int = 0
    failed: int = 0
    seconds: float = 0.0
    failures: list[UnitResult] = field(default_factory=list)


def pending_units(specs: Sequence[UnitSpec], store: ResultStore,
                  retry_failed: bool = False) -> list[UnitSpec]:
    """Units not yet finished in ``store`` (failed ones too when ``retry_failed``)."""
    status = store.statuses(s.key for s in specs)
    return [s for s in specs
            if status.get(s.key) is None or (retry_failed and status.get(s.key) != "ok")]


def run_units(specs: Sequence[UnitSpec], store: ResultStore, *, jobs: int = 1,
              data_dir: str | None = None, timeout: float | None = None,
              retry_failed: bool = False, scheduler: str | None = None,
              on_result: Callable[[UnitResult], None] | None = None) -> RunReport:
    """Execute every pending unit and write each result to ``store`` as it finishes."""
    todo = pending_units(specs, store, retry_failed)
    report = RunReport(planned=len(specs), skipped=len(specs) - len(todo))
    t0 = time.perf_counter()
    for result in _results(todo, jobs=jobs, data_dir=data_dir, timeout=timeout,
                           scheduler=scheduler):
        store.write_unit(result.row, result.task_scores, result.arrays)
        report.ran += 1
        if not result.ok:
            report.failed += 1
            report.failures.append(result)
        if on_result is not None:
            on_result(result)
    report.seconds = time.perf_counter() - t0
    return report


def _results(todo: Sequence[UnitSpec], *, jobs: int, data_dir: str | None,
             timeout: float | None, scheduler: str | None) -> Iterable[UnitResult]:
    if not todo:
        return iter(())
    if scheduler:
        from .distributed import dask_results

        return dask_results(todo, scheduler=scheduler, data_dir=data_dir, timeout=timeout)
    if jobs == 1:
        return (execute_unit(s, data_dir, timeout) for s in todo)
    from joblib import Parallel, delayed

    if jobs < 1 and jobs != -1:
        raise ConfigError(f"--jobs must be >= 1 (or -1 for all cores), got {jobs}")
    return Parallel(n_jobs=jobs, return_as="generator_unordered")(
        delayed(execute_unit)(s, data_dir, timeout) for s in todo)


def check_problems_load(registry: Registry, problems: Sequence[tuple[str, str]],
                        data_dir: str | None) -> dict[str, TaskSet]:
    """Load every problem once up front so that missing or bad data fails fast and clearly."""
    out = {}
    for ds_name, prob in problems:
        ds = registry.dataset(ds_name)
        out[problem_id(ds_name, prob)] = load_problem(ds_name, prob, data_dir,
                                                      config_json(ds.params()))
    return out


__all__ = ["UnitSpec", "UnitResult", "RunReport", "plan_units", "execute_unit", "run_units",
           "pending_units", "resolve_problems", "check_problems_load", "load_problem",
           "problem_id", "PROTOCOL_VERSION"]
