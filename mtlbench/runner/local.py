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
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections import deque
from multiprocessing.connection import wait
from typing import Any, Callable, Iterator, Sequence

from .unit import UnitResult, UnitSpec, failed_result, timeout_message

__all__ = ["local_results", "run_supervised", "grace_seconds", "death_cause", "worker_context",
           "prestart", "die_with_parent"]

POLL_SECONDS = 0.5


def grace_seconds(timeout: float) -> float:
    """How long past ``timeout`` the supervisor waits before it kills a unit's process."""
    return 2.0 + 0.1 * timeout


def death_cause(exitcode: int | None) -> str:
    """``"killed by signal SIGSEGV (Segmentation fault)"`` / ``"exited with code 3"``."""
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


def _worker_setup(parent_pid: int, environ: dict[str, str] | None, cwd: str | None) -> None:
    """What every supervised process does first: die with its supervisor, leave SIGINT and
    SIGTERM to it, take its environment and folder, one BLAS thread, load the plugins."""
    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if environ is not None:  # the supervisor's environment now, not the forkserver's
        os.environ.clear()
        os.environ.update(environ)
    if cwd is not None:
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    from threadpoolctl import threadpool_limits

    from ..plugins import get_registry
    from .unit import BLAS_THREADS_PER_UNIT

    threadpool_limits(limits=BLAS_THREADS_PER_UNIT)  # process-wide
    get_registry()


def _send(conn: Any, message: tuple) -> None:
    """Send to the supervisor; if it is gone (its end of the pipe closed), exit quietly: no
    one is left to read a result or a traceback."""
    try:
        conn.send(message)
    except (BrokenPipeError, ConnectionError, EOFError):
        os._exit(0)


def _worker_main(conn: Any, data_dir: str | None, parent_pid: int,
                 environ: dict[str, str] | None = None, cwd: str | None = None) -> None:
    """Run units received on ``conn`` until None or EOF; answer ("start",) then ("done", r)."""
    _worker_setup(parent_pid, environ, cwd)
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
                     fn: Callable[..., None], args: tuple) -> None:
    """Body of :func:`run_supervised`'s process: ``fn(*args, emit)``, then ("end",)."""
    _worker_setup(parent_pid, environ, cwd)
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
                       args=(child, os.getpid(), dict(os.environ), os.getcwd(), fn, args),
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
    ctx = worker_context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with contextlib.suppress(Exception), _caller_script_hidden():
            forkserver.ensure_running()


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


def worker_context() -> Any:
    """``forkserver`` where available: a clean server process (started once, without the
    supervisor's threads or state) imports numpy, scipy, scikit-learn and mtlbench once and
    forks each worker from that, so a replaced worker is ready in about a second; else
    ``spawn``.  The plugin registry is built in each worker (never in the server), from the
    supervisor's ``sys.path``, and workers run with the supervisor's current environment."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return mp.get_context("spawn")


class _Worker:
    def __init__(self, ctx: Any, data_dir: str | None) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_worker_main,
                                args=(child, data_dir, os.getpid(), dict(os.environ),
                                      os.getcwd()),
                                name="mtlbench-unit-worker", daemon=True)
        with _caller_script_hidden():
            self.proc.start()
        child.close()
        self.ready = False                  # imported mtlbench and the plugins
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
    from ..errors import MTLBenchError

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
                    if not w.ready:
                        raise MTLBenchError(
                            f"a unit worker process could not start: it "
                            f"{death_cause(w.proc.exitcode)} before running any unit")
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
