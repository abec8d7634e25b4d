"""Run units of work on a Dask distributed cluster (``mtlbench compare --scheduler ADDRESS``).

How a run goes
--------------
1. The client (the ``mtlbench compare`` process) connects with ``distributed.Client(ADDRESS)``.
2. Each problem is loaded **once, on the client** (through its dataset plugin, from
   ``--data-dir`` / the cache as usual) and sent to every worker once with
   ``client.scatter(..., broadcast=True)``.  Every unit receives the scattered future as the
   ``tasks`` argument of :func:`mtlbench.runner.execute_unit`, so data travels once per
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

* **on the worker** (primary): :func:`mtlbench.runner.time_limit` injects ``UnitTimeout`` into
  the worker thread after ``timeout`` seconds (``PyThreadState_SetAsyncExc``).  The unit stops
  at its next Python bytecode, frees the worker thread and comes back as a "failed" record
  with the message and traceback;
* **on the client** (backstop, for a unit stuck in one long C call or ``sleep`` that the
  injected exception cannot interrupt): each worker reports when a unit starts (a Dask event
  ``mtlbench-unit-start``); a unit still running ``timeout + grace`` seconds after its start
  (``grace = 2 s + 10 %``, clocked on the client) is recorded as failed and its future
  cancelled.  The worker thread itself is freed only when the C call returns.
"""
from __future__ import annotations

import time
import traceback
import uuid
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from .errors import ConfigError
from .runner import UnitResult, UnitSpec, execute_unit, failed_result, load_problem

if TYPE_CHECKING:  # pragma: no cover
    from .data import TaskSet

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
    threadpool_limits(limits=1)
    from .plugins import get_registry

    get_registry()  # load plugins before the clock starts (the timeout excludes it)
    try:
        from distributed import get_worker

        get_worker().log_event(START_TOPIC, {"key": spec.key, "run": run_token})
    except Exception:  # noqa: BLE001 - the announcement only feeds the client's backstop
        pass
    return execute_unit(spec, data_dir, timeout, tasks=tasks)


def _connect(scheduler: Any):
    from distributed import Client

    if not isinstance(scheduler, str):  # a Client, LocalCluster or similar (API use)
        if hasattr(scheduler, "submit"):
            return scheduler, False
        scheduler = getattr(scheduler, "scheduler_address", scheduler)
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False), True
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConfigError(
            f"cannot connect to the Dask scheduler at {scheduler!r}: {exc}. Start one with "
            "'dask scheduler' and workers with 'dask worker ADDRESS --nthreads 1' "
            "(see docs/scaling.md), or run without --scheduler.") from None


def dask_results(todo: Sequence[UnitSpec], *, scheduler: Any, data_dir: str | None,
                 timeout: float | None) -> Iterator[UnitResult]:
    """Run ``todo`` on the Dask cluster at ``scheduler``; yield each result as it finishes.

    ``scheduler`` is an address (``tcp://host:8786``) or, from Python, a ``Client`` /
    ``LocalCluster``.  Never raises for a failing unit: a unit whose task errors (worker
    died, package missing on the worker) or runs past its deadline yields a "failed" record.
    """
    if not todo:
        return
    # Load every problem on the client first: bad data fails here, before any work is sent.
    problems: dict[tuple, "TaskSet"] = {}
    for s in todo:
        pk = (s.dataset, s.problem_name, s.dataset_params_json)
        if pk not in problems:
            problems[pk] = load_problem(s.dataset, s.problem_name, data_dir,
                                        s.dataset_params_json)
    client, own = _connect(scheduler)
    token = uuid.uuid4().hex[:12]
    started: dict[str, float] = {}

    def _on_start(event: Any) -> None:
        _, msg = event
        if isinstance(msg, dict) and msg.get("run") == token:
            started.setdefault(msg["key"], time.monotonic())

    try:
        if timeout:
            client.subscribe_topic(START_TOPIC, _on_start)
        keys = list(problems)
        shipped = dict(zip(keys, client.scatter([problems[k] for k in keys], broadcast=True,
                                                hash=False)))
        futures = {}
        for s in todo:
            data = shipped[(s.dataset, s.problem_name, s.dataset_params_json)]
            fut = client.submit(_run_on_worker, s, data_dir, timeout, data, token,
                                key=f"mtlbench-unit-{s.key}-{token}", pure=False, retries=0)
            futures[fut.key] = (fut, s)
        yield from _collect(client, futures, timeout, started)
    finally:
        if timeout:
            try:
                client.unsubscribe_topic(START_TOPIC)
            except Exception:  # noqa: BLE001
                pass
        if own:
            client.close()


def _collect(client: Any, futures: dict[str, tuple[Any, UnitSpec]], timeout: float | None,
             started: dict[str, float]) -> Iterator[UnitResult]:
    from distributed import as_completed

    done: set[str] = set()
    ac = as_completed([f for f, _ in futures.values()], loop=client.loop)
    if not timeout:
        for fut in ac:
            done.add(fut.key)
            yield _result_of(fut, futures[fut.key][1])
        return
    limit = timeout + grace_seconds(timeout)
    while len(done) < len(futures):
        batch = ac.next_batch(block=False) if ac.has_ready() else []
        for fut in batch:
            if fut.key not in done:
                done.add(fut.key)
                yield _result_of(fut, futures[fut.key][1])
        if batch:
            continue
        now = time.monotonic()
        for key, (fut, spec) in futures.items():
            t0 = started.get(spec.key)
            if key in done or t0 is None or now - t0 <= limit:
                continue
            done.add(key)
            fut.cancel()
            yield failed_result(
                spec, f"unit exceeded the timeout of {timeout:g} s (no answer from its Dask "
                f"worker {now - t0:.0f} s after it started; the unit was cancelled)",
                seconds=now - t0, host="dask")
        time.sleep(POLL_SECONDS)


def _result_of(fut: Any, spec: UnitSpec) -> UnitResult:
    if fut.status == "finished":
        try:
            return fut.result()
        except Exception as exc:  # noqa: BLE001 - e.g. the result cannot be deserialised
            return failed_result(spec, f"cannot fetch the result from Dask: "
                                       f"{type(exc).__name__}: {exc}", traceback.format_exc())
    if fut.status == "cancelled":
        return failed_result(spec, "the unit was cancelled on the Dask cluster")
    exc = fut.exception()
    tb = "".join(traceback.format_exception(type(exc), exc, fut.traceback()))
    hint = ""
    if isinstance(exc, (ImportError, ModuleNotFoundError)):
        hint = " (install mtlbench and the plugins on every Dask worker)"
    return failed_result(spec, f"the Dask task failed: {type(exc).__name__}: {exc}{hint}", tb)


__all__ = ["dask_results", "grace_seconds", "START_TOPIC"]
