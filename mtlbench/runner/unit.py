"""One unit of work: its identity (:class:`UnitSpec`), its record (:class:`UnitResult`) and
its execution (:func:`execute_unit`).

A unit is (model selection, problem, repetition); its hyperparameter search runs inside it.
:func:`execute_unit` is a pure function of the unit spec (plus where data lives): it loads the
problem (cached per process), runs the protocol and returns a result record; it never raises —
a model that raises, returns NaN/inf scores or runs past the timeout yields a "failed" record
with the message and traceback.  It runs inside a supervised worker process
(:mod:`mtlbench.runner.local`) or a Dask worker (:mod:`mtlbench.runner.dask`), so that a unit
that kills its process is observed from outside and recorded too.

Every unit runs with BLAS limited to one thread, so a result does not depend on how many
units run side by side (``--jobs``, Dask): serial and parallel runs agree to the bit.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import functools
import hashlib
import json
import os
import platform
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from ..data import TaskSet
from ..dataset import load_tasks
from ..errors import ConfigError, MTLBenchError
from ..plugins import get_registry
from ..protocol import PROTOCOL_VERSION, SPLIT_FIELDS, ProtocolConfig, config_json, run_protocol
from ..search.searchers import searcher_version

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
    # What produced the result: model and dataset distributions, versions and code
    # fingerprints (:func:`mtlbench.provenance.unit_provenance`); "" = not recorded.
    provenance_json: str = ""

    @property
    def key(self) -> str:
        """sha256 of everything that determines the result: the model selection, the problem
        and its dataset parameters, the repetition, every protocol setting but ``reps`` (split
        settings, and the search strategy and budget when the protocol has them), the version
        of the searcher's rule installed, and the provenance of the code (a changed plugin
        gives new keys, so its units are rerun)."""
        return self.key_under(searcher_version(self.protocol.search))

    def key_under(self, search_version: str) -> str:
        """The key of this unit searched by version ``search_version`` of its searcher's rule
        (``key`` is under the installed version; a published unit may be of an older one)."""
        ident = {
            "model": self.model, "fixed": self.fixed_json, "space": self.space_json,
            "dataset": self.dataset, "problem": self.problem,
            "dataset_params": self.dataset_params_json, "rep": self.rep,
            "split": self.protocol.split_settings(),
        }
        extra = protocol_key_settings(self.protocol, search_version)
        if extra:
            ident["protocol"] = extra
        if self.provenance_json:
            ident["provenance"] = self.provenance_json
        return hashlib.sha256(config_json(ident).encode()).hexdigest()[:32]


def protocol_key_settings(config: ProtocolConfig,
                          search_version: str | None = None) -> dict[str, Any]:
    """Protocol fields that are neither ``reps`` nor a split setting (the search strategy and
    its budget, the selection metric when one is named): part of the key so that another
    search gives another unit; a field left at None (the default protocol) adds nothing.
    ``search_version``: the version of the searcher's rule (default: the installed one)."""
    out = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
           if f.name != "reps" and f.name not in SPLIT_FIELDS
           and getattr(config, f.name) is not None}
    # A searcher whose rule changed declares a new ``version``: its units get new keys, so a
    # store never serves a result of the old rule as the current one.  Version "1" adds
    # nothing (keys of earlier stores stay valid).
    version = search_version or searcher_version(out.get("search"))
    if version != "1":
        out["search_version"] = version
    return out


@dataclass
class UnitResult:
    spec: UnitSpec
    row: dict[str, Any]
    task_scores: list[tuple] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.row["status"] == "ok"


def problem_id(dataset: str, problem: str) -> str:
    return dataset if problem == dataset.split("[", 1)[0] else f"{dataset}/{problem}"


# ---------------------------------------------------------------------------- execution
@functools.lru_cache(maxsize=8)
def load_problem(dataset: str, problem: str, data_dir: str | None,
                 dataset_params_json: str) -> TaskSet:
    """Load (once per process) the TaskSet of a problem through its dataset plugin."""
    ds = get_registry().dataset(dataset)
    if config_json(ds.params()) != dataset_params_json:
        raise ConfigError(f"dataset {dataset!r} parameters differ between planning and execution")
    return load_tasks(ds, problem, data_dir)


class UnitTimeout(BaseException):
    """A unit ran past ``--timeout``.

    A BaseException (like KeyboardInterrupt) so that the protocol's per-grid-point
    ``except Exception`` cannot swallow it: the whole unit stops, not just one grid point."""


def timeout_message(seconds: float) -> str:
    return f"unit exceeded the timeout of {seconds:g} s"


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`UnitTimeout` in the calling thread after ``seconds``.

    * main thread (the supervised worker processes of local runs): ``SIGALRM`` timer, which
      also interrupts sleeps and blocking system calls (the supervisor kills the process if
      the unit still runs ``timeout`` + a grace later: :mod:`mtlbench.runner.local`);
    * any other thread (a Dask worker thread): a timer thread injects ``UnitTimeout`` into
      the calling thread with ``PyThreadState_SetAsyncExc``.  It is delivered at the next
      Python bytecode, so it stops the iterative solvers (Python loops) but not a single long
      C call (one huge LAPACK call, a ``time.sleep``); the Dask client keeps a deadline as a
      backstop for those (see :mod:`mtlbench.runner.dask`).
    """
    if not seconds:
        yield
        return
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        def _raise(signum, frame):
            raise UnitTimeout(timeout_message(seconds))

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


#: widest vector instruction set named in a unit's ``cpu`` (the same code runs 2-5x faster on a
#: 2-core AVX-512 machine than on a 2-core one without), widest first
_VECTOR_ISA = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"),
               ("asimd", "NEON"))


@functools.lru_cache(maxsize=1)
def cpu_description() -> str:
    """The CPU's model name and its widest vector instruction set, e.g. "AMD EPYC, AVX-512"
    (Linux: /proc/cpuinfo; elsewhere what :func:`platform.processor` says); "unknown" when
    nothing is readable.  Stored with every unit: unit times are only comparable between
    units of the same CPU."""
    name, flags = "", set()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                if key in ("model name", "cpu model", "hardware") and not name:
                    name = " ".join(value.split())
                elif key in ("flags", "features") and not flags:
                    flags = set(value.split())
                if name and flags:
                    break
    name = name or platform.processor() or "unknown"
    isa = next((label for flag, label in _VECTOR_ISA if flag in flags), "")
    return f"{name}, {isa}" if isa else name


def blas_description() -> str:
    """The BLAS libraries loaded in this process and the kernels they run, e.g.
    "openblas 0.3.31.188.0 SkylakeX" (threadpoolctl; one entry per distinct library and
    kernel; "unknown" when none is found).  Stored with every unit: the last bits of a
    model's arithmetic depend on the kernel (OpenBLAS picks it for the CPU, or by
    ``OPENBLAS_CORETYPE``)."""
    from threadpoolctl import threadpool_info

    seen: list[str] = []
    for info in threadpool_info():
        if info.get("user_api") != "blas":
            continue
        text = " ".join(str(info[k]) for k in ("internal_api", "version", "architecture")
                        if info.get(k))
        if text not in seen:
            seen.append(text)
    return "; ".join(seen) or "unknown"


def versions(model: str | None = None) -> dict[str, str]:
    import numpy
    import scipy
    import scipy.linalg  # loads scipy's BLAS, so that blas_description names it too

    from .. import __version__

    out = {"mtlbench": __version__, "numpy": numpy.__version__, "scipy": scipy.__version__,
           "python": platform.python_version(), "cpu_count": str(os.cpu_count()),
           "cpu": cpu_description(), "blas": blas_description(),
           "platform": platform.platform()}
    if model:
        with contextlib.suppress(Exception):
            info = get_registry().model_plugin(model)
            out["plugin"] = f"{info.distribution} {info.version}".strip()
    return out


def _base_row(spec: UnitSpec) -> dict[str, Any]:
    return {
        "key": spec.key, "model": spec.label, "dataset": spec.dataset, "problem": spec.problem,
        "rep": spec.rep, "seed": spec.protocol.seed,
        "model_config": {"name": spec.model, "fixed": json.loads(spec.fixed_json),
                         "space": json.loads(spec.space_json)},
        # the searcher's version (its rule) beside its name: also part of the key
        "protocol": {**spec.protocol.split_settings(), **spec.protocol.selection_settings(),
                     "search_version": searcher_version(spec.protocol.search),
                     "reps": spec.protocol.reps},
        "dataset_params": json.loads(spec.dataset_params_json),
        "provenance": json.loads(spec.provenance_json) if spec.provenance_json else None,
    }


def failed_result(spec: UnitSpec, message: str, tb: str = "", *,
                  started_at: str | None = None, seconds: float | None = None,
                  host: str | None = None,
                  ended_at: _dt.datetime | None = None) -> UnitResult:
    """A "failed" record made outside :func:`execute_unit` (e.g. by a Dask client whose
    worker died or whose unit ran past its deadline).

    ``ended_at`` is when the unit ended (given up, or its process found dead; default now):
    the record may be made later, e.g. after a worker restart that takes seconds.  Without
    ``started_at`` the start is ``seconds`` before the end (the attempt's run time), or the
    end itself when that is unknown, so that the record's times say when the unit ran."""
    end = ended_at or _dt.datetime.now(_dt.timezone.utc)
    if started_at is None:
        started_at = _iso(end - _dt.timedelta(seconds=seconds) if seconds is not None else end)
    row = _base_row(spec)
    row.update({"versions": versions(), "host": host or socket.gethostname(),
                "started_at": started_at, "status": "failed", "message": message,
                "traceback": tb, "time_total": seconds,
                "finished_at": _iso(end)})
    return UnitResult(spec=spec, row=row)


def execute_unit(spec: UnitSpec, data_dir: str | None = None, timeout: float | None = None,
                 tasks: TaskSet | None = None,
                 on_start: Callable[[], None] | None = None) -> UnitResult:
    """Run one unit; never raises (failures become a "failed" record).

    ``tasks`` is the problem's data when the caller already has it (a Dask worker receives
    it once from the client); otherwise it is loaded through the dataset plugin.
    ``on_start`` is called once data and plugins are loaded, when the unit's clock starts
    (the supervisor starts its own deadline then).  A unit whose search ran past ``timeout``
    is failed even if the model swallowed the in-process time limit (a bare ``except:``)."""
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
            if on_start is not None:
                on_start()
            clock = time.perf_counter()
            base = cls(**json.loads(spec.fixed_json))
            with time_limit(timeout):
                out = run_protocol(base, json.loads(spec.space_json), tasks, spec.protocol,
                                   spec.rep, keep_arrays=spec.keep_arrays)
            ran = time.perf_counter() - clock
            if timeout and ran > timeout:
                raise UnitTimeout(f"{timeout_message(timeout)} (the model ignored the time "
                                  f"limit and ran {ran:.1f} s)")
        row.update({
            "status": "ok", "best_params": out.best_params, "grid": out.grid,
            "val_auc": out.val_auc, "test_auc": out.test_auc, "n_tasks": len(out.task_names),
            "dropped_tasks": out.dropped_tasks, "time_select": out.select_time,
            "time_fit": out.fit_time, "n_iter": out.n_iter, "history": out.history,
            "diagnostics": out.diagnostics, "split_fingerprint": out.split_fingerprint,
            "data_fingerprint": out.data_fingerprint, "target_kind": out.target_kind,
            "metrics": {"select_by": out.select_by, "val": {out.select_by: out.val_score},
                        "test": out.metrics},
            # per task, every metric: (task index, name, test rows, metric, value or None)
            "task_metrics": [(i, n, m, metric, values[i])
                             for metric, values in out.task_metrics.items()
                             for i, (n, m) in enumerate(zip(out.task_names, out.n_test))],
        })
        scores = [] if out.task_auc is None else [
            (i, n, a, m) for i, (n, a, m) in enumerate(zip(out.task_names, out.task_auc,
                                                            out.n_test))]
        arrays = out.arrays
    except BaseException as exc:  # isolate every failure, even a timeout
        if isinstance(exc, KeyboardInterrupt):
            raise
        message = _message(exc)
        if isinstance(exc, UnitTimeout) and not str(exc):  # injected into a worker thread
            message = timeout_message(timeout or 0)
        tb = traceback.format_exc()
        if getattr(exc, "plugin_traceback", ""):  # every fit of the search failed
            tb += f"\nThe first failed fit, in the plugin's code:\n{exc.plugin_traceback}\n"
        row.update({"status": "failed", "message": message, "traceback": tb})
        scores, arrays = [], {}
    row["time_total"] = time.perf_counter() - t0
    row["finished_at"] = _now()
    return UnitResult(spec=spec, row=row, task_scores=scores, arrays=arrays)


def module_location(module: Any) -> str | None:
    """The real path a module was imported from: its package's folder (a namespace
    package's first folder), else its file; None for a module without either."""
    if module is None:
        return None
    file = getattr(module, "__file__", None)
    if file and os.path.basename(file).startswith("__init__."):
        return os.path.realpath(os.path.dirname(file))
    if file:
        return os.path.realpath(file)
    paths = list(getattr(module, "__path__", None) or [])
    return os.path.realpath(paths[0]) if paths else None


def spec_location(spec: Any) -> str | None:
    """Where an import spec (``importlib.util.find_spec``) points, as :func:`module_location`
    says it of the module it would import."""
    found = spec.origin or next(iter(spec.submodule_search_locations or []), None)
    if not found:
        return None
    return os.path.realpath(os.path.dirname(found) if os.path.basename(found).startswith(
        "__init__.") else found)


def import_failure(exc: BaseException) -> str:
    """One line for code that could not be imported where a unit was to run: the module,
    the error and where that module's top-level package came from there, e.g. "cannot import
    mtlbench.plugins (ImportError: cannot import name 'get_registry' ...); mtlbench comes
    from /home/me/mtlbench"."""
    import sys

    name = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    tb, module = exc.__traceback__, None
    while tb is not None:  # the innermost module body that was running
        if tb.tb_frame.f_code.co_name == "<module>":
            module = tb.tb_frame.f_globals.get("__name__")
        tb = tb.tb_next
    name = name or module or getattr(exc, "filename", None)
    text = f"{type(exc).__name__}: {exc}"
    if not name:
        return f"cannot import mtlbench or its plugins ({text})"
    top = str(name).split(".")[0]
    where = module_location(sys.modules.get(top))
    if where is None:  # a package whose own import failed is not kept in sys.modules
        import importlib.util

        with contextlib.suppress(Exception):
            where = spec_location(importlib.util.find_spec(top))
    return f"cannot import {name} ({text})" + (f"; {top} comes from {where}" if where else "")


def _message(exc: BaseException) -> str:
    if isinstance(exc, (MTLBenchError, UnitTimeout)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _iso(t: _dt.datetime) -> str:
    """A record's time stamp (ISO 8601, to the second)."""
    return t.isoformat(timespec="seconds")


def _now() -> str:
    return _iso(_dt.datetime.now(_dt.timezone.utc))


__all__ = ["UnitSpec", "UnitResult", "execute_unit", "failed_result", "load_problem",
           "problem_id", "time_limit", "UnitTimeout", "timeout_message", "import_failure",
           "module_location", "spec_location", "PROTOCOL_VERSION"]
