"""Supervised local worker processes: every unit runs where its death can be observed.

``compare`` (serial ``--jobs 1`` included) runs units in ``jobs`` worker processes forked from a
clean ``forkserver`` process (``spawn`` where there is none; :func:`worker_context`): no state
of the ``compare`` process, its threads or its locks is inherited.  Each worker imports mtlbench
and the plugins once, loads each problem once (cached per process) and runs units one at a time,
sent over a pipe; so the per-unit cost is one pickled spec out and one pickled result back.

The supervisor (this process) watches each worker's pipe and its process sentinel:

* a unit that returns (ok or failed) is yielded as is;
* a worker that dies during a unit (a segfault, the out-of-memory killer, ``os._exit``) yields
  a "failed" record naming the signal or exit code; the worker is replaced, the other units
  go on;
* ``timeout``: the unit's own process enforces it first (:func:`~mtlbench.runner.unit.time_limit`,
  a ``UnitTimeout`` with a traceback); if the unit is still running ``timeout + grace`` seconds
  after it started (a long C call, a ``bare except:`` around the fit), the supervisor kills the
  worker and records the unit as timed out.

Workers import mtlbench and the plugins from where the supervisor did, whatever the current
folder holds: CPython starts the forkserver as ``python -c``, which puts the current folder in
front of its ``sys.path`` (a folder named ``mtlbench`` there -- the parent folder of a clone --
would be what it preloads and every worker inherits), and does not pass it the supervisor's
path; so it is started with ``PYTHONSAFEPATH=1`` and the supervisor's ``sys.path`` as
``PYTHONPATH`` (:func:`worker_context`; on Python 3.10, which has no safe path, workers are
spawned instead when the current folder holds such a name).  A worker that cannot import them
is reported as that, in one line naming the module and where it came from
(:func:`~mtlbench.runner.unit.import_failure`), never as a failure of a model.

Workers die with the supervisor: on Linux each asks the kernel for ``SIGKILL`` when its parent
exits (``prctl(PR_SET_PDEATHSIG)``; the forkserver does the same from its first moments,
:mod:`mtlbench._forkserver`), and every worker also watches its parent's pid, so ``kill -9`` of
``compare`` leaves no process behind.  Workers ignore ``SIGINT``; Ctrl-C (and SIGTERM, which
the command line turns into it) reaches the supervisor, which stops them; a worker whose
supervisor is gone exits quietly when it next writes to it.

:func:`run_supervised` runs other plugin code the same way (the override probe of
:mod:`.plan`: a fit bounded from outside).
"""
from __future__ import annotations

import contextlib
import importlib.machinery
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from multiprocessing.connection import wait
from typing import Any, Callable, Iterator, Mapping, Sequence

from .unit import (UnitResult, UnitSpec, failed_result, import_failure, module_location,
                   spec_location, timeout_message)

__all__ = ["local_results", "run_supervised", "grace_seconds", "death_cause", "worker_context",
           "prestart", "die_with_parent"]

POLL_SECONDS = 0.5


def grace_seconds(timeout: float) -> float:
    """How long past ``timeout`` the supervisor waits before it kills a unit's process."""
    return 2.0 + 0.1 * timeout


def death_cause(exitcode: int | None, in_model: bool = True) -> str:
    """``"killed by signal SIGSEGV (Segmentation fault)"`` / ``"exited with code 3"``;
    ``in_model`` False for a process that died before it ran any plugin code (then no
    model is named as a possible cause)."""
    if exitcode is None:
        return "stopped answering"
    if exitcode < 0:
        try:
            sig = signal.Signals(-exitcode)
            text = f"killed by signal {sig.name} ({signal.strsignal(sig)})"
        except ValueError:
            return f"killed by signal {-exitcode}"
        if sig == signal.SIGKILL:
            text += " — e.g. the out-of-memory killer or a kill -9"
        return text
    if not in_model:
        return f"exited with code {exitcode}"
    return (f"exited with code {exitcode} (os._exit/sys.exit in the model, or the "
            "interpreter aborted)")


# ---------------------------------------------------------------------------- the worker
def die_with_parent(client_pid: int) -> None:
    """Exit when the process that started us (the supervisor, or the forkserver it started)
    exits: SIGKILL from the kernel on Linux, and a watcher thread everywhere."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except Exception:  # noqa: BLE001 - the watcher thread below is the fallback
            pass

    def gone() -> bool:
        if os.getppid() != parent:
            return True
        try:
            os.kill(client_pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            pass
        return False

    if gone():  # the supervisor died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if gone():
                os._exit(1)

    threading.Thread(target=watch, name="mtlbench-parent-watch", daemon=True).start()


def _worker_setup(parent_pid: int, environ: dict[str, str] | None, cwd: str | None,
                  origins: Mapping[str, str] | None = None) -> None:
    """What every supervised process does first: die with its supervisor, leave SIGINT and
    SIGTERM to it, take its environment and folder, one BLAS thread, load the plugins
    (their warnings are the supervisor's to show, once).  ``origins``: where the supervisor
    imported mtlbench's packages from (:func:`package_origins`); a worker that has them
    from elsewhere raises ImportError saying so."""
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if environ is not None:  # the supervisor's environment now, not the forkserver's
        os.environ.clear()
        os.environ.update(environ)
    if cwd is not None:
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    for name, where in (origins or {}).items():
        here = module_location(sys.modules.get(name) or importlib.import_module(name))
        if here != where:
            raise ImportError(f"{name} was imported from {here} in the worker process, but "
                              f"from {where} in the process that started it", name=name,
                              path=here)
    import warnings

    from threadpoolctl import threadpool_limits

    from ..plugins import PluginMigrationWarning, PluginWarning, get_registry
    from .unit import BLAS_THREADS_PER_UNIT

    threadpool_limits(limits=BLAS_THREADS_PER_UNIT)  # process-wide
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        warnings.simplefilter("ignore", PluginMigrationWarning)
        get_registry()


def package_origins() -> dict[str, str]:
    """Where this process imported mtlbench and the built-in plugin packages from (those it
    has imported): what its workers must import too."""
    return {name: module_location(sys.modules[name]) for name in _PACKAGES
            if name in sys.modules}


def _start_worker(conn: Any, parent_pid: int, environ: dict[str, str] | None,
                  cwd: str | None, origins: Mapping[str, str] | None) -> bool:
    """:func:`_worker_setup`, or tell the supervisor in one line why this process cannot
    import what it needs ("broken"); False then."""
    try:
        _worker_setup(parent_pid, environ, cwd, origins)
    except Exception as exc:  # noqa: BLE001 - any failure to start is reported as such
        _send(conn, ("broken", import_failure(exc)))
        return False
    return True


def _send(conn: Any, message: tuple) -> None:
    """Send to the supervisor; if it is gone (its end of the pipe closed), exit quietly: no
    one is left to read a result or a traceback."""
    try:
        conn.send(message)
    except (BrokenPipeError, ConnectionError, EOFError):
        os._exit(0)


def _worker_main(conn: Any, data_dir: str | None, parent_pid: int,
                 environ: dict[str, str] | None = None, cwd: str | None = None,
                 origins: Mapping[str, str] | None = None) -> None:
    """Run units received on ``conn`` until None or EOF; answer ("start",) then ("done", r)."""
    if not _start_worker(conn, parent_pid, environ, cwd, origins):
        return
    from .unit import execute_unit

    limits = _limits()
    _send(conn, ("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        spec, timeout = msg
        result = execute_unit(spec, data_dir, timeout,
                              on_start=lambda: _send(conn, ("start", spec.key)))
        # A unit that changed process limits (e.g. RLIMIT_AS): a fresh process goes on.
        retire = _limits() != limits
        try:
            conn.send(("done", result, retire))
        except (BrokenPipeError, ConnectionError, EOFError):
            os._exit(0)
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable diagnostic value
            _send(conn, ("done", failed_result(spec, f"cannot send the unit's result to the "
                                                     f"supervisor: {type(exc).__name__}: "
                                                     f"{exc}"), retire))
        if retire:
            return


def _supervised_main(conn: Any, parent_pid: int, environ: dict[str, str], cwd: str,
                     fn: Callable[..., None], args: tuple,
                     origins: Mapping[str, str] | None = None) -> None:
    """Body of :func:`run_supervised`'s process: ``fn(*args, emit)``, then ("end",)."""
    if not _start_worker(conn, parent_pid, environ, cwd, origins):
        return
    fn(*args, lambda value: _send(conn, ("step",) if value is None else ("value", value)))
    _send(conn, ("end",))


def run_supervised(fn: Callable[..., None], args: tuple, step_seconds: float) -> list[Any]:
    """Run ``fn(*args, emit)`` in a fresh process supervised like a unit's and return the
    values it emitted.

    ``fn`` calls ``emit(None)`` when a step (e.g. one fit) starts and ``emit(value)`` to hand
    back a value (picklable).  The process dies with this one (``kill -9`` included), ignores
    SIGINT, and is killed when a step runs ``step_seconds`` + :func:`grace_seconds` past its
    start (a fit that swallows its in-process time limit), when this process is interrupted
    (Ctrl-C, SIGTERM: the exception propagates) or when it returns; a process that dies or
    is killed ends the call with the values emitted until then."""
    ctx = worker_context()
    conn, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_supervised_main,
                       args=(child, os.getpid(), dict(os.environ), os.getcwd(), fn, args,
                             package_origins()),
                       name="mtlbench-supervised", daemon=True)
    with _caller_script_hidden():
        proc.start()
    child.close()
    values: list[Any] = []
    limit = step_seconds + grace_seconds(step_seconds)
    deadline: float | None = None
    try:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return values
            if not wait([conn, proc.sentinel], timeout=left):
                continue
            try:
                while conn.poll():
                    kind, *payload = conn.recv()
                    if kind == "step":
                        deadline = time.monotonic() + limit
                    elif kind == "value":
                        values.append(payload[0])
                    elif kind == "broken":
                        raise _cannot_start(payload[0])
                    else:
                        return values
            except (EOFError, OSError):
                return values
            if not proc.is_alive() and not conn.poll():
                return values
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        conn.close()


def _limits() -> tuple:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return ()
    return tuple(resource.getrlimit(getattr(resource, n)) for n in
                 ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_NOFILE")
                 if hasattr(resource, n))


def prestart() -> None:
    """Start the forkserver (and its imports) now, in the background of the caller's own
    work (``compare`` calls it before planning), so the first workers start at once."""
    worker_context()


def import_path() -> list[str]:
    """This process's ``sys.path`` as its workers get it: ``""`` (the current folder, in
    front for ``python -c`` and ``-m``) made absolute, as multiprocessing does."""
    cwd = os.getcwd()
    return [cwd if p == "" else p for p in sys.path if isinstance(p, str)]


@contextlib.contextmanager
def _server_import_path() -> Iterator[None]:
    """The environment the forkserver is started in: no current folder in front of its
    ``sys.path`` (``PYTHONSAFEPATH``) and this process's :func:`import_path` as
    ``PYTHONPATH``, so that it preloads mtlbench and the plugins from where this process
    has them.  Workers take the supervisor's environment back when they start."""
    saved = {k: os.environ.get(k) for k in ("PYTHONSAFEPATH", "PYTHONPATH")}
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in import_path() if os.pathsep not in p)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def shadowing(folder: str) -> list[str]:
    """The packages the forkserver preloads (:data:`PRELOAD`) of which ``folder`` holds
    another copy under the same name (a package, a module or a plain folder: what an import
    with ``folder`` first on ``sys.path`` would find) than the one this process imported."""
    out = []
    for name in dict.fromkeys(m.split(".")[0] for m in PRELOAD):
        spec = importlib.machinery.PathFinder.find_spec(name, [folder])
        if spec is None:
            continue
        mine = sys.modules.get(name)
        if mine is None or module_location(mine) != spec_location(spec):
            out.append(name)
    return out


@contextlib.contextmanager
def _caller_script_hidden() -> Any:
    """Start processes without multiprocessing re-importing the caller's ``__main__`` in them.

    Workers run only mtlbench code, and a user's script that calls ``mtlbench.compare(...)``
    without an ``if __name__ == "__main__":`` guard would otherwise run again (and fail) in
    the forkserver and in every worker.  multiprocessing reads ``__main__.__spec__`` and
    ``__file__`` when a process starts; both are hidden for that moment only."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


# ---------------------------------------------------------------------------- the supervisor
PRELOAD = ["mtlbench._forkserver", "mtlbench.runner.local", "mtlbench.runner.unit",
           "mtlbench.protocol", "sklearn.base", "scipy.linalg", "scipy.sparse", "threadpoolctl",
           "mtlbench_models", "mtlbench_datasets"]


#: the packages whose origin every worker checks against the supervisor's
_PACKAGES = ("mtlbench", "mtlbench_models", "mtlbench_datasets")


def worker_context() -> Any:
    """``forkserver`` where available: a clean server process (started once, without the
    supervisor's threads or state, with the supervisor's import path:
    :func:`_server_import_path`) imports numpy, scipy, scikit-learn and mtlbench once and
    forks each worker from that, so a replaced worker is ready in about a second; else
    ``spawn`` (also on a Python without ``PYTHONSAFEPATH`` when the current folder holds
    another copy of a preloaded package: :func:`shadowing`).  The server is started here if
    it is not running.  The plugin registry is built in each worker (never in the server),
    from the supervisor's ``sys.path``, and workers run with the supervisor's current
    environment."""
    if "forkserver" in mp.get_all_start_methods() and (
            hasattr(sys.flags, "safe_path") or not shadowing(os.getcwd())):
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        from multiprocessing import forkserver

        with contextlib.suppress(Exception), _caller_script_hidden(), _server_import_path():
            forkserver.ensure_running()
        return ctx
    return mp.get_context("spawn")


def _cannot_start(line: str) -> Exception:
    from ..errors import MTLBenchError

    return MTLBenchError(f"a worker process cannot start, so no unit can run (not a failure "
                         f"of any model): {line}")


_PROBE = """import importlib.util, json, os, sys
sys.path[:] = json.loads(sys.argv[1])
for name in json.loads(sys.argv[2]):
    try:
        __import__(name)
    except BaseException as exc:
        try:
            spec = importlib.util.find_spec(name.split(".")[0])
        except BaseException:
            spec = None
        where = spec and (spec.origin or next(iter(spec.submodule_search_locations or []), None))
        if where and os.path.basename(where).startswith("__init__."):
            where = os.path.dirname(where)
        print(json.dumps([name, f"{type(exc).__name__}: {exc}", where]))
        break
"""


def import_probe() -> str | None:
    """Why a fresh interpreter with this process's import path, environment and folder
    cannot import what a worker imports (one line naming the module, the error and where
    its package came from), or None when it can: asked when a worker died before it was
    ready."""
    names = [m for m in PRELOAD if m.split(".")[0] in _PACKAGES and m != "mtlbench._forkserver"]
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(import_path()),
                               json.dumps(names)], capture_output=True, text=True, timeout=120)
        found = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not found:
        return None
    name, error, where = found
    top = name.split(".")[0]
    return (f"cannot import {name} ({error}); {top} comes from "
            f"{where or 'nowhere'} there")


class _Worker:
    def __init__(self, ctx: Any, data_dir: str | None) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main,
                                args=(child, data_dir, os.getpid(), dict(os.environ),
                                      os.getcwd(), package_origins()),
                                name="mtlbench-unit-worker", daemon=True)
        with _caller_script_hidden():
            self.proc.start()
        child.close()
        self.ready = False                  # imported mtlbench and the plugins
        self.broken = ""                    # why it cannot import them
        self.retiring = False               # will exit after its unit
        self.spec: UnitSpec | None = None   # the unit it runs
        self.started: float | None = None   # monotonic clock at the unit's start
        self.sent: float = 0.0

    def send(self, spec: UnitSpec, timeout: float | None) -> None:
        self.spec, self.started, self.sent = spec, None, time.monotonic()
        self.conn.send((spec, timeout))

    def poll(self) -> tuple[bool, UnitResult | None, bool]:
        """Read pending messages: (the unit started, its result or None, the process is gone)."""
        started = False
        try:
            while self.conn.poll():
                kind, payload, *more = self.conn.recv()
                if kind == "ready":
                    self.ready = True
                elif kind == "broken":
                    self.broken = payload
                    return started, None, True
                elif kind == "start" and self.started is None:
                    self.started, started = time.monotonic(), True
                elif kind == "done":
                    self.retiring = bool(more and more[0])
                    return started, payload, False
        except Exception:  # noqa: BLE001 - EOF or a half-written message of a dying worker
            return started, None, True
        return started, None, not self.proc.is_alive()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


def local_results(todo: Sequence[UnitSpec], *, jobs: int, data_dir: str | None,
                  timeout: float | None,
                  on_start: Callable[[UnitSpec], None] | None = None,
                  reorder: Callable[[list[UnitSpec], UnitResult], list[UnitSpec]] | None = None,
                  ) -> Iterator[UnitResult]:
    """Run ``todo`` (dispatched in this order) in ``jobs`` supervised worker processes and
    yield each result as it finishes.  Never raises for a failing unit.

    ``reorder(queue, result)``, if given, is called after each result has been consumed and
    returns the units not yet dispatched in their new order (e.g. longest expected first,
    once this run has timed a model that had no stored time)."""
    if not todo:
        return
    ctx = worker_context()
    queue = deque(todo)
    workers = [_Worker(ctx, data_dir) for _ in range(max(1, min(jobs, len(todo))))]
    retired: list[_Worker] = []
    limit = timeout + grace_seconds(timeout) if timeout else None
    try:
        while workers:
            for w in workers:
                if w.ready and not w.retiring and w.spec is None and queue:
                    w.send(queue.popleft(), timeout)
            wait([w.conn for w in workers] + [w.proc.sentinel for w in workers],
                 timeout=POLL_SECONDS)
            for w in list(workers):
                started, result, dead = w.poll()
                if started and on_start is not None and w.spec is not None:
                    on_start(w.spec)
                if result is not None:
                    w.spec = None
                    yield result
                    if reorder is not None and queue:
                        queue = deque(reorder(list(queue), result))
                elif dead:
                    workers.remove(w)
                    w.kill()
                    if w.broken:
                        raise _cannot_start(w.broken)
                    if not w.ready:
                        why = import_probe()
                        raise _cannot_start(why or f"it {death_cause(w.proc.exitcode, False)} "
                                                   "before running any unit")
                    if w.spec is not None:
                        seconds = time.monotonic() - (w.started or w.sent)
                        yield failed_result(
                            w.spec, f"the unit's process {death_cause(w.proc.exitcode)} "
                                    f"while running {w.spec.label} on {w.spec.problem} "
                                    f"rep {w.spec.rep}", seconds=seconds)
                    if queue:
                        workers.append(_Worker(ctx, data_dir))
                elif limit is not None and w.started is not None and \
                        time.monotonic() - w.started > limit:
                    spec, seconds = w.spec, time.monotonic() - w.started
                    workers.remove(w)
                    w.kill()
                    yield failed_result(
                        spec, f"{timeout_message(timeout)} (its process was stopped "
                              f"{seconds:.1f} s after the unit started)", seconds=seconds)
                    if queue:
                        workers.append(_Worker(ctx, data_dir))
            if not queue:  # let idle workers go
                for w in [w for w in workers if w.ready and w.spec is None and not w.retiring]:
                    w.stop()
                    workers.remove(w)
                    retired.append(w)
    finally:
        for w in workers:
            w.stop()
        deadline = time.monotonic() + 2.0
        for w in workers + retired:
            w.proc.join(max(0.0, deadline - time.monotonic()))
            w.kill()
