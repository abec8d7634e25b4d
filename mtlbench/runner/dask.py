"""Run units of work on a Dask distributed cluster (``mtlbench compare --scheduler ADDRESS``).

How a run goes
--------------
1. The client (the ``mtlbench compare`` process) connects with ``distributed.Client(ADDRESS)``.
2. Each problem is loaded **once, on the client** (through its dataset plugin, from
   ``--data-dir`` / the cache as usual) and sent to every worker once with
   ``client.scatter(..., broadcast=True)``.  Every unit receives the scattered future as the
   ``tasks`` argument of :func:`mtlbench.runner.unit.execute_unit`, so data travels once per
   worker, not once per unit, and workers need no access to the data files.
3. One Dask task per unit; results stream back with ``as_completed`` and the caller
   (:func:`mtlbench.runner.run_units`) writes each to the results store as it arrives.  A
   crash of the client loses only the units still running; a re-run skips the stored ones.

Workers need mtlbench and the model plugins installed (models are looked up by registry
name from the worker's own entry points); a worker without them yields "failed" units that
say so.  BLAS is limited to one thread per unit on workers too, so results are bit-identical
to a serial run.

Timeouts (``--timeout``)
------------------------
``SIGALRM`` cannot work in Dask worker threads, so the limit is enforced in two layers:

* **on the worker** (primary): :func:`mtlbench.runner.unit.time_limit` injects ``UnitTimeout`` into
  the worker thread after ``timeout`` seconds (``PyThreadState_SetAsyncExc``).  The unit stops
  at its next Python bytecode, frees the worker thread and comes back as a "failed" record
  with the message and traceback;
* **on the client** (backstop, for a unit stuck in one long C call or ``sleep`` that the
  injected exception cannot interrupt): each worker reports when a unit starts (a Dask event
  ``mtlbench-unit-start``); a unit still running ``timeout + grace`` seconds after its start
  (``grace = 2 s + 10 %``, clocked on the client) is recorded as failed, its future
  cancelled and its worker restarted through its nanny (``Client.restart_workers``), so the
  units queued behind it run (a worker started without a nanny cannot be restarted: its
  thread is freed only when the C call returns).

Dead workers and a dead scheduler
---------------------------------
Dask retries a unit whose worker died on other workers, then reports ``KilledWorker``.  Units
that were merely queued on a dying worker can get that answer too, so a ``KilledWorker`` unit
is resubmitted once: a healthy unit then finishes, the unit that kills its worker dies again
and is recorded as failed with its model named.  If the connection to the scheduler is lost
for ``SCHEDULER_LOST_SECONDS``, the run ends with a clear error (finished units are stored).  If dying workers took every copy of the shipped problem, or a finished
result the client had not fetched yet, the unit comes back cancelled: the client ships the
problem again and resubmits it; only losses while the unit itself was running count
(``MAX_RESUBMITS``; losses while queued are bounded by ``MAX_QUEUED_LOSSES``), so a healthy
unit beside a unit that kills workers is not recorded as failed.
"""
from __future__ import annotations

import time
import traceback
import uuid
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import ConfigError, MTLBenchError
from .unit import (BLAS_THREADS_PER_UNIT, UnitResult, UnitSpec, execute_unit, failed_result,
                   load_problem)

if TYPE_CHECKING:  # pragma: no cover
    from ..data import TaskSet

START_TOPIC = "mtlbench-unit-start"
CONNECT_TIMEOUT = 20.0
POLL_SECONDS = 0.1


def grace_seconds(timeout: float) -> float:
    """How long past ``timeout`` the client waits before it gives a unit up."""
    return 2.0 + 0.1 * timeout


def _run_on_worker(spec: UnitSpec, data_dir: str | None, timeout: float | None,
                   tasks: "TaskSet", run_token: str) -> UnitResult:
    """The Dask task: announce the start (for the client's deadline), then run the unit."""
    from threadpoolctl import threadpool_limits

    # Process-wide, not a context: several worker threads must not restore each other's limits.
    threadpool_limits(limits=BLAS_THREADS_PER_UNIT)
    from ..plugins import get_registry

    get_registry()  # load plugins before the clock starts (the timeout excludes it)
    try:
        from distributed import get_worker

        worker = get_worker()
        worker.log_event(START_TOPIC, {"key": worker.get_current_task(), "run": run_token,
                                       "worker": worker.address})
    except Exception:  # noqa: BLE001 - the announcement only feeds the client's backstop
        pass
    return execute_unit(spec, data_dir, timeout, tasks=tasks)


def check_scheduler_address(address: str) -> None:
    """Raise :class:`ConfigError` unless ``address`` is a Dask address this installation can
    connect to in principle (a known scheme, a host and a numeric port): checked before any
    data is loaded, and before a ``Client`` exists (one that fails to start hangs in its
    finaliser)."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ConfigError("--scheduler needs Dask's distributed package: "
                          "pip install 'mtlbench[dask]'") from None
    from distributed.comm import registry
    from distributed.comm.addressing import get_address_host_port, parse_address

    try:
        scheme, _ = parse_address(address, strict=False)
        registry.get_backend(scheme)
        if scheme != "inproc":
            get_address_host_port(address)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"--scheduler {address}: not a Dask scheduler address ({exc}); "
                          "expected e.g. tcp://10.0.0.5:8786 (see docs/scaling.md)") from None


def _connect(scheduler: Any):
    from distributed import Client

    if not isinstance(scheduler, str):  # a Client, LocalCluster or similar (API use)
        if hasattr(scheduler, "submit"):
            return scheduler, False
        scheduler = getattr(scheduler, "scheduler_address", scheduler)
    else:
        check_scheduler_address(scheduler)
    client = Client.__new__(Client)
    try:
        client.__init__(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False)
        return client, True
    except Exception as exc:  # noqa: BLE001 - any failure to start is the same to the user
        _discard(client)
        raise ConfigError(
            f"cannot connect to the Dask scheduler at {scheduler!r}: {exc}. Start one with "
            "'dask scheduler' and workers with 'dask worker ADDRESS --nthreads 1' "
            "(see docs/scaling.md), or run without --scheduler.") from None


def _discard(client: Any) -> None:
    """Forget a ``Client`` whose start failed: its finaliser would otherwise try to close
    the connection that never opened (a 40 s wait, then a traceback at exit)."""
    client.status = "closed"
    try:
        client._loop_runner.stop()
    except Exception:  # noqa: BLE001 - best effort: its loop thread is a daemon anyway
        pass


def dask_results(todo: Sequence[UnitSpec], *, scheduler: Any, data_dir: str | None,
                 timeout: float | None) -> Iterator[UnitResult]:
    """Run ``todo`` on the Dask cluster at ``scheduler``; yield each result as it finishes.

    ``scheduler`` is an address (``tcp://host:8786``) or, from Python, a ``Client`` /
    ``LocalCluster``.  Never raises for a failing unit: a unit whose task errors (its worker
    died repeatedly, a package is missing on the worker) or runs past its deadline yields a
    "failed" record.  If workers die and take every copy of a shipped problem with them,
    the problem is shipped again and the affected units resubmitted (at most
    ``MAX_RESUBMITS`` times each).
    """
    if not todo:
        return
    # Load every problem on the client first: bad data fails here, before any work is sent.
    problems: dict[tuple, "TaskSet"] = {}
    for s in todo:
        if _problem_key(s) not in problems:
            problems[_problem_key(s)] = load_problem(s.dataset, s.problem_name, data_dir,
                                                     s.dataset_params_json)
    client, own = _connect(scheduler)
    run = _DaskRun(client, problems, data_dir, timeout)
    try:
        if timeout:
            client.subscribe_topic(START_TOPIC, run.on_start)
        yield from run.results(todo)
    except (OSError, TimeoutError) as exc:  # the scheduler went away mid-run
        lost = SchedulerLost(client)
        raise MTLBenchError(f"{lost} ({type(exc).__name__}: {exc})") from None
    finally:
        if timeout:
            try:
                client.unsubscribe_topic(START_TOPIC)
            except Exception:  # noqa: BLE001
                pass
        if own:
            try:
                client.close(timeout=5)
            except Exception:  # noqa: BLE001 - the scheduler may be gone already
                pass


MAX_RESUBMITS = 2
MAX_QUEUED_LOSSES = 10
#: seconds to wait for a restarted worker before shipping a problem again, and for a stuck
#: worker's restart through its nanny.  A new worker process imports numpy, scipy and every
#: plugin; on a loaded machine (load 8-10 on 2 cores) that was seen to take over 60 s.
WORKERS_BACK_SECONDS = 180.0


def _problem_key(spec: UnitSpec) -> tuple[str, str, str]:
    return (spec.dataset, spec.problem_name, spec.dataset_params_json)


class _DaskRun:
    """The state of one run on a cluster: shipped data, futures, start times, resubmissions."""

    def __init__(self, client: Any, problems: dict[tuple, "TaskSet"], data_dir: str | None,
                 timeout: float | None) -> None:
        self.client, self.problems = client, problems
        self.data_dir, self.timeout = data_dir, timeout
        self.token = uuid.uuid4().hex[:12]
        self.shipped: dict[tuple, Any] = {}
        self.futures: dict[str, tuple[Any, UnitSpec]] = {}
        self.data_of: dict[str, Any] = {}  # unit future key -> the data future it was given
        self.attempts: dict[str, int] = {}
        self.losses: dict[tuple[str, str], int] = {}  # (unit key, running|queued) -> count
        self.started: dict[str, float] = {}  # future key -> client clock at its start
        self.where: dict[str, str] = {}      # future key -> address of the worker running it
        self.killed: dict[str, int] = {}     # unit key -> KilledWorker answers so far
        self.lost_since: float | None = None

    def on_start(self, event: Any) -> None:
        _, msg = event
        if isinstance(msg, dict) and msg.get("run") == self.token:
            self.started.setdefault(msg["key"], time.monotonic())
            if msg.get("worker"):
                self.where[msg["key"]] = msg["worker"]

    def restart_worker(self, key: str) -> str:
        """Restart the worker process stuck in a unit (through its nanny), so that queued
        units can run; returns a note for the failed record."""
        addr = self.where.get(key)
        if not addr:
            return ""
        try:
            self.client.restart_workers([addr], timeout=WORKERS_BACK_SECONDS,
                                        raise_for_error=True)
            return f"; its worker {addr} was restarted"
        except Exception as exc:  # noqa: BLE001 - e.g. a worker without a nanny
            return f"; its worker {addr} could not be restarted ({type(exc).__name__})"

    def check_scheduler(self) -> None:
        """Raise a clear error when the connection to the scheduler is lost for 10 s."""
        status = getattr(self.client, "status", "running")
        if status == "running":
            self.lost_since = None
            return
        now = time.monotonic()
        if self.lost_since is None:
            self.lost_since = now
        elif now - self.lost_since > SCHEDULER_LOST_SECONDS:
            raise SchedulerLost(self.client)

    def ship(self, pk: tuple) -> Any:
        """Send one problem to every worker (again, if the copies were lost)."""
        fut = self.shipped.get(pk)
        if fut is None or fut.status in ("cancelled", "error", "lost"):
            try:
                fut = self.client.scatter([self.problems[pk]], broadcast=True, hash=False)[0]
            except TimeoutError:
                # No worker alive at this moment: a unit just killed them and their nannies
                # are restarting them.  Wait for one (a dead scheduler still ends the run).
                self.check_scheduler()
                self.client.wait_for_workers(1, timeout=WORKERS_BACK_SECONDS)
                fut = self.client.scatter([self.problems[pk]], broadcast=True, hash=False)[0]
            self.shipped[pk] = fut
        return fut

    def submit(self, spec: UnitSpec) -> Any:
        n = self.attempts.get(spec.key, 0)
        self.attempts[spec.key] = n + 1
        data = self.ship(_problem_key(spec))
        fut = self.client.submit(_run_on_worker, spec, self.data_dir, self.timeout, data,
                                 self.token, key=f"mtlbench-unit-{spec.key}-{self.token}-{n}",
                                 pure=False, retries=0)
        self.futures[fut.key] = (fut, spec)
        self.data_of[fut.key] = data
        return fut

    def results(self, todo: Sequence[UnitSpec]) -> Iterator[UnitResult]:
        from distributed import as_completed

        ac = as_completed([self.submit(s) for s in todo], loop=self.client.loop)
        pending = set(self.futures)
        limit = self.timeout + grace_seconds(self.timeout) if self.timeout else None
        while pending:
            batch = ac.next_batch(block=False) if ac.has_ready() else []
            for fut in batch:
                if fut.key not in pending:
                    continue
                pending.discard(fut.key)
                spec = self.futures[fut.key][1]
                result = _result_of(fut, spec)
                if result is not None and _killed_worker(fut):
                    # Dask gives up a task after its workers died several times while running
                    # it; units merely queued on a dying worker get that answer too.  Resubmit
                    # once: the unit that kills workers fails again and is named.
                    n = self.killed[spec.key] = self.killed.get(spec.key, 0) + 1
                    if n == 1:
                        new = self.submit(spec)
                        pending.add(new.key)
                        ac.add(new)
                        continue
                    result = failed_result(
                        spec, f"{spec.label} on {spec.problem} rep {spec.rep} killed its Dask "
                              "worker process every time it ran (a segfault, the out-of-memory "
                              "killer or os._exit in the model); recorded as failed",
                        result.row.get("traceback", ""), host="dask")
                if result is None:  # lost with a worker that died: run it again
                    # Only a loss while the unit was running counts against it: a unit that
                    # was queued, or whose shipped data died with a worker another unit
                    # crashed, is healthy (bounded by MAX_QUEUED_LOSSES all the same).
                    kind = "running" if fut.key in self.started else "queued"
                    self.losses[(spec.key, kind)] = self.losses.get((spec.key, kind), 0) + 1
                    if (self.losses.get((spec.key, "running"), 0) <= MAX_RESUBMITS
                            and self.losses.get((spec.key, "queued"), 0) <= MAX_QUEUED_LOSSES):
                        new = self.submit(spec)
                        pending.add(new.key)
                        ac.add(new)
                        continue
                    result = failed_result(
                        spec, f"{spec.label} on {spec.problem} rep {spec.rep} was lost "
                        f"{self.attempts[spec.key]} times because Dask workers died while it ran "
                        "(a model that kills its worker process: a segfault, the "
                        "out-of-memory killer, os._exit; or the problem's data shipped to "
                        "the workers was lost with them); recorded as failed", host="dask")
                yield result
            if batch:
                continue
            self.check_scheduler()
            if limit is not None:
                now = time.monotonic()
                for key in list(pending):
                    t0 = self.started.get(key)
                    if t0 is None or now - t0 <= limit:
                        continue
                    pending.discard(key)
                    fut, spec = self.futures[key]
                    fut.cancel()
                    note = self.restart_worker(key)
                    yield failed_result(
                        spec, f"unit exceeded the timeout of {self.timeout:g} s (no answer from "
                        f"its Dask worker {now - t0:.0f} s after it started; the unit was "
                        f"cancelled{note})", seconds=now - t0, host="dask")
            time.sleep(POLL_SECONDS)


SCHEDULER_LOST_SECONDS = 10.0


class SchedulerLost(MTLBenchError):
    def __init__(self, client: Any) -> None:
        addr = getattr(getattr(client, "scheduler", None), "address", None) or "?"
        super().__init__(
            f"lost the connection to the Dask scheduler at {addr} (for more than "
            f"{SCHEDULER_LOST_SECONDS:g} s). Units finished so far are in the store; start "
            "the scheduler and its workers again and run the same command to resume "
            "(or run without --scheduler).")


def _killed_worker(fut: Any) -> bool:
    if fut.status != "error":
        return False
    try:
        return type(fut.exception()).__name__ == "KilledWorker"
    except Exception:  # noqa: BLE001
        return False


def _result_of(fut: Any, spec: UnitSpec) -> UnitResult | None:
    """The unit's result, a "failed" record, or None when it was lost with a dead worker
    (the unit was cancelled or its result vanished before the client fetched it)."""
    from concurrent.futures import CancelledError

    if fut.status == "finished":
        try:
            return fut.result()
        except CancelledError:
            return None
        except Exception as exc:  # noqa: BLE001 - e.g. the result cannot be deserialised
            return failed_result(spec, f"cannot fetch the result from Dask: "
                                       f"{type(exc).__name__}: {exc}", traceback.format_exc())
    if fut.status == "cancelled":
        return None
    exc = fut.exception()
    tb = "".join(traceback.format_exception(type(exc), exc, fut.traceback()))
    hint = ""
    if isinstance(exc, (ImportError, ModuleNotFoundError)):
        hint = " (install mtlbench and the plugins on every Dask worker)"
    return failed_result(spec, f"the Dask task failed: {type(exc).__name__}: {exc}{hint}", tb)


__all__ = ["dask_results", "check_scheduler_address", "grace_seconds", "START_TOPIC", "MAX_RESUBMITS", "SchedulerLost"]
