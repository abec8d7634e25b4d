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
  ``mtlbench-unit``); a unit still running ``timeout + grace`` seconds after the start
  of its current attempt (``grace = 2 s + 10 %``, clocked on the client) on the worker that
  reported it (asked of the scheduler) is recorded as failed, its future cancelled and its
  worker's process killed through its nanny, which starts a new one (the client does not
  wait for it), so the units queued behind it run.  A nanny whose worker has not come back
  ``RESTART_BACK_SECONDS`` after the restart is asked once more to start one (its own restart
  after the kill can fail).  A worker started without a nanny is removed from the cluster
  instead.  An attempt whose worker died is not over time: Dask
  runs the unit again, and its next start restarts the clock.

Dead workers, no workers, a dead scheduler
------------------------------------------
Workers report when a unit starts and when it ends (events subscribed to in every run): they
say which units were running when a worker died.

* A unit whose worker died while it ran is rerun by Dask on other workers, then given up
  (``KilledWorker``, after ``distributed.scheduler.allowed-failures`` deaths); if the problem
  shipped to the workers died with them, it comes back cancelled.  Every attempt of a unit
  that started, never reported its end, and whose future then ended without a result counts
  as a worker that died while it ran (one thread per worker: nothing else ran there).  At
  two, the unit is recorded as failed with its cause ("killed its Dask worker process every
  time it ran").
* Any other unit that comes back without a result — queued on a dying worker (Dask can give
  those up too), or whose finished result died with its worker before the client fetched it
  (future status ``lost``), or whose shipped problem died with the workers another unit
  killed — is resubmitted (the problem shipped again), at most ``MAX_RESUBMITS`` times after
  ``KilledWorker`` and ``MAX_LOSSES`` times in all.  So a healthy unit beside one that kills
  workers is never recorded as failed because of it.
* No worker connected for ``NO_WORKERS_SECONDS`` and no nanny seen in the run answering
  (nothing will restart one), or none back after ``WORKERS_BACK_SECONDS`` although a nanny
  answers: the run ends with an error saying so (finished units are stored).
* The connection to the scheduler lost for ``SCHEDULER_LOST_SECONDS``: the run ends with a
  clear error (finished units are stored).
"""
from __future__ import annotations

import time
import traceback
import uuid
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import ConfigError, MTLBenchError
from .unit import (BLAS_THREADS_PER_UNIT, UnitResult, UnitSpec, execute_unit, failed_result,
                   load_problem)

if TYPE_CHECKING:  # pragma: no cover
    from ..data import TaskSet

EVENT_TOPIC = "mtlbench-unit"
START_SEND_SECONDS = 0.05
CONNECT_TIMEOUT = 20.0
POLL_SECONDS = 0.1


def grace_seconds(timeout: float) -> float:
    """How long past ``timeout`` the client waits before it gives a unit up."""
    return 2.0 + 0.1 * timeout


def _run_on_worker(spec: UnitSpec, data_dir: str | None, timeout: float | None,
                   tasks: "TaskSet", run_token: str) -> UnitResult:
    """The Dask task: announce the unit's start (for the client: deadlines, which units were
    running when a worker died), run it, announce its end."""
    from threadpoolctl import threadpool_limits

    # Process-wide, not a context: several worker threads must not restore each other's limits.
    threadpool_limits(limits=BLAS_THREADS_PER_UNIT)
    from ..plugins import get_registry

    get_registry()  # load plugins before the clock starts (the timeout excludes it)
    # Let the worker's event loop send the start (batched every 2 ms) before the model runs:
    # a unit that kills its process at once would take the event with it.
    if _announce(run_token, "start"):
        time.sleep(START_SEND_SECONDS)
    result = execute_unit(spec, data_dir, timeout, tasks=tasks)
    _announce(run_token, "done")
    return result


def _announce(run_token: str, phase: str) -> bool:
    """Send the client a unit event (``phase`` "start" or "done"); False if it cannot."""
    try:
        from distributed import get_worker

        worker = get_worker()
        worker.log_event(EVENT_TOPIC, {"key": worker.get_current_task(), "run": run_token,
                                       "worker": worker.address, "phase": phase})
        return True
    except Exception:  # noqa: BLE001 - the events only feed the client's bookkeeping
        return False


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
            "'dask scheduler --host PRIVATE_IP' and workers with 'dask worker ADDRESS --host "
            "THEIR_PRIVATE_IP --nthreads 1', each bound to a private interface (see "
            "docs/scaling.md), or run without --scheduler.") from None


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
    ``LocalCluster``.  Never raises for a failing unit: a unit whose task errors (a package
    is missing on the worker, it kills its worker every time it runs) or runs past its
    deadline yields a "failed" record.  A unit lost through no fault of its own (its result
    or its data died with a worker another unit crashed, it was queued on a dying worker) is
    resubmitted, a bounded number of times.  Raises :class:`MTLBenchError` when the
    scheduler is gone or no worker is left to run anything (finished units are stored).
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
        client.subscribe_topic(EVENT_TOPIC, run.on_event)
        yield from run.results(todo)
    except (OSError, TimeoutError) as exc:
        if getattr(client, "status", "running") != "running":  # the scheduler went away
            raise MTLBenchError(f"{SchedulerLost(client)} ({type(exc).__name__}: "
                                f"{exc})") from None
        raise MTLBenchError(
            f"the Dask cluster at {_address(client)} did not answer in time "
            f"({type(exc).__name__}: {exc}). Units finished so far are in the store; run "
            "the same command again to resume.") from None
    finally:
        try:
            client.unsubscribe_topic(EVENT_TOPIC)
        except Exception:  # noqa: BLE001
            pass
        if own:
            try:
                client.close(timeout=5)
            except Exception:  # noqa: BLE001 - the scheduler may be gone already
                pass


#: times a unit is resubmitted after Dask gave it up (``KilledWorker``) without having seen
#: it running on two workers that died
MAX_RESUBMITS = 2
#: times a unit is resubmitted after it was lost otherwise (its result or its shipped data
#: died with a worker, it was queued on a dying worker)
MAX_LOSSES = 10
#: seconds to wait for a restarted worker when no worker is connected but a nanny that can
#: restart one still answers.  A new worker process imports numpy, scipy and every plugin; on a
#: loaded machine (load 8-10 on 2 cores) that was seen to take over 60 s.
WORKERS_BACK_SECONDS = 180.0
#: seconds without any worker (and without a nanny that answers) before the run ends
NO_WORKERS_SECONDS = 10.0
#: seconds to wait for a stuck worker's nanny to kill its process
RESTART_SECONDS = 30.0
#: seconds a shipment waits for a worker before the client checks the cluster again (only the
#: wait for a worker: the transfer itself is not bounded by it)
SHIP_WAIT_SECONDS = 2.0
#: seconds after a restart before the client asks the nanny of a worker that has not come
#: back to start one (its own restart after the kill failed, or was never made: seen on a
#: loaded CI machine, where the run then waited for a worker that never came)
RESTART_BACK_SECONDS = 20.0


def _problem_key(spec: UnitSpec) -> tuple[str, str, str]:
    return (spec.dataset, spec.problem_name, spec.dataset_params_json)


def _address(client: Any) -> str:
    return getattr(getattr(client, "scheduler", None), "address", None) or "?"


class _DaskRun:
    """The state of one run on a cluster: shipped data, futures, start times, resubmissions."""

    def __init__(self, client: Any, problems: dict[tuple, "TaskSet"], data_dir: str | None,
                 timeout: float | None) -> None:
        self.client, self.problems = client, problems
        self.data_dir, self.timeout = data_dir, timeout
        self.token = uuid.uuid4().hex[:12]
        self.shipped: dict[tuple, Any] = {}
        self.futures: dict[str, tuple[Any, UnitSpec]] = {}
        self.attempts: dict[str, int] = {}   # unit key -> futures submitted for it
        self.crashes: dict[str, int] = {}    # unit key -> its workers that died while it ran
        self.losses: dict[str, int] = {}     # unit key -> resubmissions after other losses
        # Per future key, from the workers' events: the client clock at the start of its
        # current attempt (Dask reruns a task whose worker died: each run is an attempt),
        # the worker running it, how many times it started and how many of those ended.
        self.started: dict[str, float] = {}
        self.where: dict[str, str] = {}
        self.starts: dict[str, int] = {}
        self.done: dict[str, int] = {}       # attempts that ran to their end
        self.lost_since: float | None = None
        self.no_workers_since: float | None = None
        self.workers_checked = 0.0
        self.nannies: set[str] = set()
        # nanny address -> client clock of the restart it was asked for, until a worker of
        # that nanny is connected again (or it was asked to start one: then removed)
        self.restarting: dict[str, float] = {}

    def on_event(self, event: Any) -> None:
        _, msg = event
        if not (isinstance(msg, dict) and msg.get("run") == self.token):
            return
        key = msg["key"]
        if msg.get("phase") == "done":  # that attempt is over; its result waits on the worker
            self.done[key] = self.done.get(key, 0) + 1
            self.started.pop(key, None)
            return
        self.started[key] = time.monotonic()
        self.starts[key] = self.starts.get(key, 0) + 1
        if msg.get("worker"):
            self.where[key] = msg["worker"]

    def restart_worker(self, key: str) -> str:
        """Have the nanny of the worker stuck in a unit kill its process (the nanny starts a
        new one), so that queued units can run; returns a note for the failed record.  Does
        not wait for the new worker: the run goes on meanwhile."""
        addr = self.where.get(key)
        if not addr:
            return ""
        try:
            nanny = self.client.scheduler_info(n_workers=-1)["workers"].get(addr, {}).get(
                "nanny")
        except Exception:  # noqa: BLE001 - only for watching the restart
            nanny = None
        try:
            out = self.client.sync(self.client.scheduler.restart_workers, workers=[addr],
                                   timeout=RESTART_SECONDS, wait_for_workers=False,
                                   on_error="return",
                                   stimulus_id=f"mtlbench-restart-{time.time()}")
        except Exception as exc:  # noqa: BLE001 - the scheduler may refuse; the run goes on
            return f"; its worker {addr} could not be restarted ({type(exc).__name__})"
        status = (out or {}).get(addr)
        if status == "OK":
            if nanny:
                self.restarting[nanny] = time.monotonic()
            return f"; its worker {addr} was restarted"
        if status == "removed":
            return (f"; its worker {addr} has no nanny to restart it: it was removed from "
                    "the cluster")
        if status is None:
            return f"; its worker {addr} was gone already"
        return f"; its worker {addr} could not be restarted ({status})"

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

    def check_workers(self, every: float = 2.0) -> None:
        """Raise :class:`NoWorkers` when the scheduler has had no worker for
        ``NO_WORKERS_SECONDS`` and no nanny seen in this run answers (nothing will restart
        a worker), or for ``WORKERS_BACK_SECONDS`` although one answers."""
        now = time.monotonic()
        if now - self.workers_checked < every or getattr(self.client, "status",
                                                          "running") != "running":
            return  # a lost scheduler is check_scheduler's
        self.workers_checked = now
        try:
            workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        except (OSError, TimeoutError):
            return  # the connection is going: check_scheduler says so
        self.watch_restarts(workers, now)
        if workers:
            self.no_workers_since = None
            self.nannies |= {w["nanny"] for w in workers.values() if w.get("nanny")}
            return
        if self.no_workers_since is None:
            self.no_workers_since = now
        waited = now - self.no_workers_since
        if waited > WORKERS_BACK_SECONDS or (waited > NO_WORKERS_SECONDS
                                             and not any(map(_answers, self.nannies))):
            raise NoWorkers(self.client, waited, bool(self.nannies))

    def watch_restarts(self, workers: dict[str, Any], now: float) -> None:
        """Ask the nanny of a restarted worker that has not come back within
        ``RESTART_BACK_SECONDS`` to start one (a nanny's own restart after the kill can fail,
        and nothing else would bring the worker back).  Asked once, without waiting: the run
        goes on, and :meth:`check_workers` ends it if no worker is left at all."""
        back = {w.get("nanny") for w in workers.values()}
        for nanny, since in list(self.restarting.items()):
            if nanny in back:
                del self.restarting[nanny]
            elif now - since > RESTART_BACK_SECONDS:
                del self.restarting[nanny]
                self.client.loop.add_callback(_instantiate, nanny, RESTART_BACK_SECONDS)

    def ship(self, pk: tuple) -> Any:
        """Send one problem to every worker (again, if the copies were lost)."""
        fut = self.shipped.get(pk)
        if fut is None or fut.status in ("cancelled", "error", "lost"):
            while True:
                try:
                    fut = self.client.scatter([self.problems[pk]], broadcast=True,
                                              hash=False, timeout=SHIP_WAIT_SECONDS)[0]
                    break
                except TimeoutError:
                    # No worker at this moment: a unit just killed them and their nannies are
                    # restarting them, or they are gone for good.  (Checked every few
                    # seconds: a nanny whose worker has not come back is asked again.)
                    self.check_scheduler()
                    self.check_workers(every=0.0)
                    time.sleep(1.0)
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
        return fut

    def outcome(self, fut: Any, spec: UnitSpec) -> UnitResult | None:
        """The unit's record, or None when it is to be submitted again.

        A future that ended without a result (cancelled, lost, given up by Dask with
        ``KilledWorker``) ended with a worker's death; each attempt of it that started and
        never reported its end was running when its worker died (one thread per worker:
        nothing else ran there).  Seen so twice, the unit is the cause and is recorded as
        failed.  Otherwise it was queued on a dying worker, or its result or its data died
        with a worker another unit killed: it is resubmitted (bounded)."""
        result = _result_of(fut, spec)
        killed = _killed_worker(fut)
        if result is not None and not killed:
            return result
        unfinished = self.starts.get(fut.key, 0) - self.done.get(fut.key, 0)
        self.crashes[spec.key] = self.crashes.get(spec.key, 0) + max(0, unfinished)
        crashes = self.crashes.get(spec.key, 0)
        tb = result.row.get("traceback", "") if result is not None else ""
        if crashes >= 2:
            return failed_result(
                spec, f"{_unit(spec)} killed its Dask worker process every time it ran "
                      f"({crashes} times: a segfault, the out-of-memory killer or os._exit in "
                      "the model); recorded as failed", tb, host="dask")
        n = self.losses[spec.key] = self.losses.get(spec.key, 0) + 1
        if n <= (MAX_RESUBMITS if killed else MAX_LOSSES):
            return None
        return failed_result(
            spec, f"{_unit(spec)} was lost {n} times with Dask workers that died while it was "
                  f"queued on them or after it finished (seen running {crashes} time(s): it, "
                  "or a unit beside it, kills its worker process); recorded as failed: "
                  "--retry-failed reruns it", tb, host="dask")

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
                result = self.outcome(fut, spec)
                if result is None:
                    fut.release()
                    new = self.submit(spec)
                    pending.add(new.key)
                    ac.add(new)
                    continue
                yield result
            if batch:
                continue
            self.check_scheduler()
            self.check_workers()
            if limit is not None:
                yield from self.overdue(pending, limit)
            time.sleep(POLL_SECONDS)

    def overdue(self, pending: set[str], limit: float) -> Iterator[UnitResult]:
        """Give up units still running ``limit`` seconds after the start of their current
        attempt (the client's backstop for a unit stuck in one long C call).  An attempt
        whose worker died is over: Dask runs the unit again, and its next start restarts the
        clock (the unit is not recorded as over time while it waits for a new worker)."""
        now = time.monotonic()
        late = [k for k in pending if k in self.started and now - self.started[k] > limit]
        if not late:
            return
        # when they are given up: before the cancel, which frees the worker's slot for a queued
        # unit, and before the restart, which takes seconds
        given_up = datetime.now(timezone.utc)
        processing = self.client.processing()
        for key in late:
            if key not in processing.get(self.where.get(key), ()):
                self.started.pop(key, None)  # that attempt ended with its worker
                continue
            t0 = self.started[key]
            pending.discard(key)
            fut, spec = self.futures[key]
            fut.cancel()
            note = self.restart_worker(key)
            yield failed_result(
                spec, f"unit exceeded the timeout of {self.timeout:g} s (no answer from "
                f"its Dask worker {now - t0:.0f} s after it started; the unit was "
                f"cancelled{note})", seconds=now - t0, host="dask", ended_at=given_up)


def _unit(spec: UnitSpec) -> str:
    return f"{spec.label} on {spec.problem} rep {spec.rep}"


async def _instantiate(nanny: str, timeout: float) -> None:
    """Ask the nanny at ``nanny`` to start its worker process (nothing if it runs one, or is
    starting one); errors are left to the run's own checks (no worker left ends the run)."""
    from distributed.core import rpc

    try:
        async with rpc(nanny, timeout=timeout) as r:
            await r.instantiate()
    except Exception:  # noqa: BLE001 - see above
        pass


def _answers(address: str, seconds: float = 1.0) -> bool:
    """Whether something listens at a Dask ``address`` (a nanny that can restart a worker)."""
    import socket

    from distributed.comm.addressing import get_address_host_port

    try:
        host, port = get_address_host_port(address)
        with socket.create_connection((host, port), timeout=seconds):
            return True
    except (OSError, ValueError):
        return False


SCHEDULER_LOST_SECONDS = 10.0


class SchedulerLost(MTLBenchError):
    def __init__(self, client: Any) -> None:
        super().__init__(
            f"lost the connection to the Dask scheduler at {_address(client)} (for more "
            f"than {SCHEDULER_LOST_SECONDS:g} s). Units finished so far are in the store; "
            "start the scheduler and its workers again and run the same command to resume "
            "(or run without --scheduler).")


class NoWorkers(MTLBenchError):
    def __init__(self, client: Any, seconds: float, had_nannies: bool) -> None:
        why = ("their nannies did not restart any within that time" if had_nannies
               and seconds > WORKERS_BACK_SECONDS else
               "their nannies are gone too, so nothing will restart them" if had_nannies
               else "none has a nanny to restart it")
        super().__init__(
            f"the Dask scheduler at {_address(client)} has had no worker for {seconds:.0f} s: "
            f"every worker died or was stopped, and {why}. Units finished so far are in the "
            "store; start workers ('dask worker ADDRESS --nthreads 1') and run the same "
            "command to resume (or run without --scheduler).")


def _killed_worker(fut: Any) -> bool:
    if fut.status != "error":
        return False
    try:
        return type(fut.exception()).__name__ == "KilledWorker"
    except Exception:  # noqa: BLE001
        return False


def _result_of(fut: Any, spec: UnitSpec) -> UnitResult | None:
    """The unit's result, a "failed" record, or None when it was lost through no fault of
    its own: cancelled (its shipped data died with a worker), or "lost" (its finished
    result died with its worker before the client fetched it)."""
    from concurrent.futures import CancelledError

    if fut.status == "finished":
        try:
            return fut.result()
        except CancelledError:
            return None
        except Exception as exc:  # noqa: BLE001 - e.g. the result cannot be deserialised
            if fut.status != "finished":  # lost while being fetched
                return None
            return failed_result(spec, f"cannot fetch the result from Dask: "
                                       f"{type(exc).__name__}: {exc}", traceback.format_exc())
    if fut.status != "error":  # cancelled, lost
        return None
    exc = fut.exception()
    tb = "".join(traceback.format_exception(type(exc), exc, fut.traceback()))
    if isinstance(exc, ImportError):  # the worker's installation, not the model
        where = f" ({exc.path})" if getattr(exc, "path", None) else ""
        return failed_result(spec, f"a Dask worker cannot import {exc.name or 'mtlbench'}"
                                   f"{where}: {type(exc).__name__}: {exc} (install mtlbench "
                                   "and the plugins on every Dask worker)", tb)
    return failed_result(spec, f"the Dask task failed: {type(exc).__name__}: {exc}", tb)


__all__ = ["dask_results", "check_scheduler_address", "grace_seconds", "EVENT_TOPIC",
           "MAX_RESUBMITS", "MAX_LOSSES", "SchedulerLost", "NoWorkers"]
