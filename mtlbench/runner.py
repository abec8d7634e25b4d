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
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .data import TaskSet
from .dataset import problems_of
from .errors import ConfigError, DatasetUnavailableError, MTLBenchError, UnknownNameError
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
            "selection": self.protocol.selection_settings(),
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
    return dataset if problem == dataset.split("[", 1)[0] else f"{dataset}/{problem}"


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


class UnitTimeout(BaseException):
    """A unit ran past ``--timeout``.

    A BaseException (like KeyboardInterrupt) so that the protocol's per-grid-point
    ``except Exception`` cannot swallow it: the whole unit stops, not just one grid point."""


def _timeout_message(seconds: float) -> str:
    return f"unit exceeded the timeout of {seconds:g} s"


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`UnitTimeout` in the calling thread after ``seconds``.

    * main thread (serial runs, joblib/loky worker processes): ``SIGALRM`` timer, which also
      interrupts sleeps and blocking system calls;
    * any other thread (a Dask worker thread): a timer thread injects ``UnitTimeout`` into
      the calling thread with ``PyThreadState_SetAsyncExc``.  It is delivered at the next
      Python bytecode, so it stops the iterative solvers (Python loops) but not a single long
      C call (one huge LAPACK call, a ``time.sleep``); the Dask client keeps a deadline as a
      backstop for those (see :mod:`mtlbench.distributed`).
    """
    if not seconds:
        yield
        return
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def _raise(signum, frame):
            raise UnitTimeout(_timeout_message(seconds))

        old = signal.signal(signal.SIGALRM, _raise)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        return
    with _thread_time_limit(seconds):
        yield


@contextlib.contextmanager
def _thread_time_limit(seconds: float) -> Iterator[None]:
    import ctypes

    target = threading.get_ident()
    lock = threading.Lock()
    armed = [True]

    def _fire() -> None:
        with lock:  # never inject after the guarded block has ended
            if armed[0]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target),
                                                           ctypes.py_object(UnitTimeout))

    timer = threading.Timer(seconds, _fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            armed[0] = False
        timer.cancel()


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


def _base_row(spec: UnitSpec) -> dict[str, Any]:
    import json

    return {
        "key": spec.key, "model": spec.label, "dataset": spec.dataset, "problem": spec.problem,
        "rep": spec.rep, "seed": spec.protocol.seed,
        "model_config": {"name": spec.model, "fixed": json.loads(spec.fixed_json),
                         "space": json.loads(spec.space_json)},
        "protocol": {**spec.protocol.split_settings(), **spec.protocol.selection_settings(),
                     "reps": spec.protocol.reps},
        "dataset_params": json.loads(spec.dataset_params_json),
    }


def failed_result(spec: UnitSpec, message: str, tb: str = "", *,
                  started_at: str | None = None, seconds: float | None = None,
                  host: str | None = None) -> UnitResult:
    """A "failed" record made outside :func:`execute_unit` (e.g. by a Dask client whose
    worker died or whose unit ran past its deadline)."""
    row = _base_row(spec)
    row.update({"versions": versions(), "host": host or socket.gethostname(),
                "started_at": started_at or _now(), "status": "failed", "message": message,
                "traceback": tb, "time_total": seconds, "finished_at": _now()})
    return UnitResult(spec=spec, row=row)


def execute_unit(spec: UnitSpec, data_dir: str | None = None, timeout: float | None = None,
                 tasks: TaskSet | None = None) -> UnitResult:
    """Run one unit; never raises (failures become a "failed" record).

    ``tasks`` is the problem's data when the caller already has it (a Dask worker receives
    it once from the client); otherwise it is loaded through the dataset plugin."""
    import json

    from threadpoolctl import threadpool_limits

    started = _now()
    t0 = time.perf_counter()
    row = _base_row(spec)
    row.update({"versions": versions(spec.model), "host": socket.gethostname(),
                "started_at": started})
    try:
        with threadpool_limits(limits=BLAS_THREADS_PER_UNIT):
            # Loading data and plugins (once per process) does not count against the timeout.
            if tasks is None:
                tasks = load_problem(spec.dataset, spec.problem_name, data_dir,
                                     spec.dataset_params_json)
            cls = get_registry().model_class(spec.model)
            base = cls(**json.loads(spec.fixed_json))
            with time_limit(timeout):
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
        message = _message(exc)
        if isinstance(exc, UnitTimeout) and not str(exc):  # injected into a worker thread
            message = _timeout_message(timeout or 0)
        row.update({"status": "failed", "message": message,
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
    return _worker_errors_explained(Parallel(n_jobs=jobs, return_as="generator_unordered")(
        delayed(execute_unit)(s, data_dir, timeout) for s in todo))


def _worker_errors_explained(results: Iterable[UnitResult]) -> Iterator[UnitResult]:
    """execute_unit never raises, so an error here means a worker process itself died (a
    segfault, the out-of-memory killer): say so plainly instead of a joblib traceback."""
    it = iter(results)
    while True:
        try:
            res = next(it)
        except StopIteration:
            return
        except Exception as exc:  # noqa: BLE001 - e.g. loky's TerminatedWorkerError
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise MTLBenchError(
                f"a --jobs worker process died ({type(exc).__name__}: {first}). Units finished "
                "so far are in the store; run the same command again to resume, with --jobs 1 "
                "to find the unit that crashes its process.") from None
        yield res


def check_problems_load(registry: Registry, problems: Sequence[tuple[str, str]],
                        data_dir: str | None) -> dict[str, TaskSet]:
    """Load every problem once up front so that missing or bad data fails fast and clearly."""
    out = {}
    for ds_name, prob in problems:
        ds = registry.dataset(ds_name)
        out[problem_id(ds_name, prob)] = load_problem(ds_name, prob, data_dir,
                                                      config_json(ds.params()))
    return out


def _probe_taskset(tasks: TaskSet, per_class: int = 3) -> TaskSet | None:
    """The same tasks and features with only ``per_class`` labels of each class per task."""
    rows, keep = [], []
    for t in range(tasks.T):
        y = tasks.y(t)
        pos, neg = np.flatnonzero(y > 0)[:per_class], np.flatnonzero(y < 0)[:per_class]
        if pos.size and neg.size:
            keep.append(t)
            rows.append(np.sort(np.concatenate([pos, neg])))
    if not keep:
        return None
    from .protocol import restrict_tasks

    sub = restrict_tasks(tasks, keep)
    return sub.subset(rows, name=f"{tasks.name}[probe]", meta={})


def check_overrides(registry: Registry, selections: Sequence[ModelSelection],
                    problems: Mapping[str, TaskSet], timeout: float | None = None) -> None:
    """Reject an out-of-range hyperparameter override before any unit runs.

    Models validate hyperparameters in ``fit`` (the model contract), so each user-given value
    is tried once by fitting on a probe of the first problem (its real tasks and features,
    3 labels per class per task; at most 10 s, or the unit ``timeout`` if shorter, per fit).
    A ``ValueError``/``TypeError`` whose message names the overridden parameter becomes a
    :class:`ConfigError`; any other outcome of the probe is ignored (the run records it per
    unit).  Selections without overrides are not probed."""
    import warnings

    from .model import clone

    seconds = min(10.0, timeout) if timeout else 10.0
    first = next(iter(problems.values()), None)
    probe = _probe_taskset(first) if first is not None else None
    if probe is None:
        return
    for sel in selections:
        user_values = list(sel.fixed.items())
        user_values += [(k, v) for k, vals in sel.grid_overrides.items() for v in vals]
        if not user_values:
            continue
        cls = registry.model_class(sel.name)
        for key, value in user_values:
            try:
                with warnings.catch_warnings(), time_limit(seconds), _threadpool_one():
                    warnings.simplefilter("ignore")
                    clone(cls(**sel.fixed), **{key: value}).fit(probe)
            except (ValueError, TypeError) as exc:
                data_error = isinstance(exc, MTLBenchError) and not isinstance(exc, ConfigError)
                if not data_error and key in str(exc):
                    raise ConfigError(f"invalid hyperparameter override "
                                      f"{sel.name}[{key}={value!r}]: {exc}") from None
            except KeyboardInterrupt:
                raise
            except BaseException:  # noqa: BLE001 - only parameter errors matter here
                pass


def _threadpool_one():
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=BLAS_THREADS_PER_UNIT)


__all__ = ["UnitSpec", "UnitResult", "RunReport", "plan_units", "execute_unit", "run_units",
           "pending_units", "resolve_problems", "check_problems_load", "check_overrides",
           "failed_result", "load_problem",
           "problem_id", "PROTOCOL_VERSION"]
