"""The grid of work units and its execution (supervised local processes or a Dask cluster).

Layout (no import cycles: ``dask`` and ``local`` import ``unit`` only):

* :mod:`.unit` — one unit: :class:`UnitSpec` (its identity and key), :class:`UnitResult`,
  :func:`execute_unit` (never raises), time limits;
* :mod:`.plan` — problems, units, checks before any unit runs, expected unit times;
* :mod:`.local` — supervised worker processes (``--jobs N``; serial runs too);
* :mod:`.dask` — a Dask distributed cluster (``--scheduler``).

:func:`run_units` ties them to the results store: it skips finished units, claims the units it
will compute (so a second run on the same store skips them), dispatches the longest-expected
first and writes each result as it arrives, so finished units survive a crash and a re-run
skips them.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from ..errors import ConfigError, MTLBenchError
from ..protocol import PROTOCOL_VERSION
from ..store import ResultStore
from .plan import (check_overrides, check_problems_load, expected_seconds, plan_units,
                   resolve_problems)
from .unit import (UnitResult, UnitSpec, execute_unit, failed_result, load_problem, problem_id,
                   time_limit)

__all__ = ["UnitSpec", "UnitResult", "RunReport", "Reporter", "plan_units", "execute_unit",
           "run_units", "pending_units", "resolve_problems", "check_problems_load",
           "check_overrides", "failed_result", "load_problem", "problem_id", "time_limit",
           "expected_seconds", "longest_first_as_timed", "default_jobs", "RunInterrupted",
           "PROTOCOL_VERSION"]


def default_jobs() -> int:
    """The number of CPUs this process may use (the default of ``--jobs``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class Reporter:
    """What a run tells its caller (the CLI's progress display implements it; every method is
    optional).  Library code never prints: it calls these."""

    def run_started(self, todo: Sequence[UnitSpec], expected: dict[str, float],
                    jobs: int) -> None: ...

    def unit_started(self, spec: UnitSpec) -> None: ...

    def unit_finished(self, result: UnitResult) -> None: ...


@dataclass
class RunReport:
    planned: int
    skipped: int
    ran: int = 0
    failed: int = 0
    seconds: float = 0.0
    failures: list[UnitResult] = field(default_factory=list)
    claimed_elsewhere: int = 0          # units another live run on the store is computing
    failed_before: int = 0              # units of the plan that failed in an earlier run
    interrupted: bool = False
    saved: int = 0                      # units written to the store by this run


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`run_units`; ``report`` says how many units were saved."""

    def __init__(self, report: RunReport) -> None:
        super().__init__()
        self.report = report


def pending_units(specs: Sequence[UnitSpec], store: ResultStore, retry_failed: bool = False,
                  rerun: Iterable[str] | None = None) -> list[UnitSpec]:
    """Units not yet finished in ``store`` (failed ones too when ``retry_failed``; every unit
    of the models named in ``rerun`` — registry names or labels, ``"*"`` for all)."""
    return _pending(specs, store.statuses(s.key for s in specs), retry_failed, rerun)


def _pending(specs: Sequence[UnitSpec], status: dict[str, str], retry_failed: bool,
             rerun: Iterable[str] | None) -> list[UnitSpec]:
    rerun = set(rerun or ())
    return [s for s in specs
            if status.get(s.key) is None or (retry_failed and status.get(s.key) != "ok")
            or "*" in rerun or s.model in rerun or s.label in rerun]


def run_units(specs: Sequence[UnitSpec], store: ResultStore, *, jobs: int = 1,
              data_dir: str | None = None, timeout: float | None = None,
              retry_failed: bool = False, scheduler: Any = None,
              on_result: Callable[[UnitResult], None] | None = None,
              reporter: Reporter | None = None, rerun: Iterable[str] | None = None,
              registry: Any = None) -> RunReport:
    """Execute every pending unit and write each result to ``store`` as it finishes.

    Units are dispatched longest-expected first (:func:`~.plan.expected_seconds`); the local
    runner sorts the rest again when it has timed a model that had no stored time
    (:func:`longest_first_as_timed`).  Units that
    another live run on the same store has claimed are skipped (counted in
    ``claimed_elsewhere``).  On Ctrl-C the units finished so far are in the store and
    ``KeyboardInterrupt`` propagates after the workers are stopped."""
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1 (or -1 for all cores), got {jobs}")
    states = store.unit_states(s.key for s in specs)
    todo = _pending(specs, {k: v[0] for k, v in states.items()}, retry_failed, rerun)
    report = RunReport(planned=len(specs), skipped=len(specs) - len(todo))
    todo_keys = {s.key for s in todo}
    report.failed_before = sum(1 for k, v in states.items()
                               if k not in todo_keys and v[0] != "ok")
    # Claimed in the transaction that re-reads the units: one finished by another run since
    # ``states`` was read is skipped (counted as already stored), never computed twice.
    claimed, written = store.claim_units([s.key for s in todo], seen=states)
    report.skipped += len(written)
    report.claimed_elsewhere = len(todo) - len(claimed) - len(written)
    todo = [s for s in todo if s.key in claimed]
    t0 = time.perf_counter()
    results: Iterable[UnitResult] = ()
    try:  # from the claim on: whatever happens, the claims are released
        if registry is None:
            from ..plugins import get_registry

            registry = get_registry()
        history = store.unit_times()
        expected = expected_seconds(todo, registry, history)
        todo = sorted(todo, key=lambda s: -expected[s.key])  # stable: plan order among equals
        if reporter is not None:
            reporter.run_started(todo, expected, jobs)
        results = _results(todo, jobs=jobs, data_dir=data_dir, timeout=timeout,
                           scheduler=scheduler,
                           on_start=reporter.unit_started if reporter is not None else None,
                           reorder=longest_first_as_timed(store, registry, history, todo))
        note_unit = getattr(registry, "note_unit", None)
        for result in results:
            store.write_unit(result.row, result.task_scores, result.arrays)  # + its claim
            if note_unit is not None:  # a model's first finished unit: converged_ set?
                note_unit(result.row)
            report.ran += 1
            report.saved += 1
            if not result.ok:
                report.failed += 1
                report.failures.append(result)
            if reporter is not None:
                reporter.unit_finished(result)
            if on_result is not None:
                on_result(result)
            store.renew_claims()
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM turned into it by the command line
        report.interrupted = True
        interrupted = True
    else:
        interrupted = False
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()
        report.seconds = time.perf_counter() - t0
        try:
            store.release_claims()
        except MTLBenchError:
            pass
    if interrupted:
        raise RunInterrupted(report)
    return report


def longest_first_as_timed(store: ResultStore, registry: Any, history: Any,
                           todo: Sequence[UnitSpec] = ()
                           ) -> Callable[[list[UnitSpec], UnitResult], list[UnitSpec]]:
    """The local runner's re-prioritisation: when a unit finishes whose model label had no
    stored time on its problem when the run started (a fresh store, a new model), the units
    not yet dispatched are sorted again: first one *probe* unit of every (model, problem)
    not timed yet and not yet dispatched (in plan order), then the rest longest expected first
    with the times now stored.

    Without it a fresh store dispatches in plan order (repetition by repetition), and the
    slowest model's last repetitions end the run alone on one core; without the probes a model
    timed early would be dispatched whole before a slower model had been timed at all."""
    timed = set(zip(history["model"], history["problem"])) if history is not None and \
        len(history) else set()

    def reorder(queue: list[UnitSpec], result: UnitResult) -> list[UnitSpec]:
        pair = (result.spec.label, result.spec.problem)
        if pair in timed or not result.ok:
            return queue
        timed.add(pair)
        queued = {s.key for s in queue}
        dispatched = {(s.label, s.problem) for s in todo if s.key not in queued}
        probes: set[str] = set()
        seen: set[tuple[str, str]] = set()
        for s in queue:
            p = (s.label, s.problem)
            if p not in timed and p not in dispatched and p not in seen:
                seen.add(p)
                probes.add(s.key)
        expected = expected_seconds(queue, registry, store.unit_times())
        # stable: plan order among probes and among equal expectations
        return sorted(queue, key=lambda s: (s.key not in probes, -expected[s.key]))

    return reorder


def _results(todo: Sequence[UnitSpec], *, jobs: int, data_dir: str | None,
             timeout: float | None, scheduler: Any,
             on_start: Callable[[UnitSpec], None] | None,
             reorder: Callable[[list[UnitSpec], UnitResult], list[UnitSpec]] | None = None,
             ) -> Iterable[UnitResult]:
    if not todo:
        return iter(())
    if scheduler:
        from .dask import dask_results

        return dask_results(todo, scheduler=scheduler, data_dir=data_dir, timeout=timeout)
    from .local import local_results

    return local_results(todo, jobs=jobs, data_dir=data_dir, timeout=timeout,
                         on_start=on_start, reorder=reorder)
