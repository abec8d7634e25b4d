"""The progress display of ``mtlbench compare`` (a :class:`mtlbench.runner.Reporter`).

On a terminal a bar (units done / to do, elapsed, ETA, the units running now); when the output
is a pipe or a file (``compare | tee log``, a batch job's log) one plain line per finished
unit instead, written as it finishes, with the same counts and ETA.

The ETA uses the rate measured in this run: the expected times of the finished units
(stored times of earlier runs per model and problem, else a model's ``cost_hint``) divided by
the wall time the run has taken so far is the run's throughput in expected seconds per
second -- whatever the number of workers, the machine's load or how wrong the expectations
are as a whole.  Work left (the queued units' expected times, and the running units' less what
they have done at that rate) divided by that throughput is the ETA.  Before any unit has
finished there is no rate: the expected times are shared by the workers.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..runner import Reporter, UnitResult, UnitSpec

__all__ = ["RichReporter", "LineReporter", "ProgressState", "progress_reporter",
           "format_seconds"]


def format_seconds(s: float) -> str:
    s = max(0, int(round(s)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class ProgressState(Reporter):
    """Counts, the units running now and the ETA (module docstring); ``clock`` is a monotonic
    clock in seconds (tests pass a fake one)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.expected: dict[str, float] = {}
        self.running: dict[str, tuple[UnitSpec, float]] = {}
        self.queued_seconds = 0.0
        self.jobs = 1
        self.total = 0
        self.done = 0
        self.failed = 0
        self.done_expected = 0.0
        self.started = 0.0

    def run_started(self, todo: Sequence[UnitSpec], expected: dict[str, float],
                    jobs: int) -> None:
        self.expected = dict(expected)
        self.queued_seconds = sum(self._expected(s.key) for s in todo)
        self.jobs = max(1, jobs)
        self.total = len(todo)
        self.started = self.clock()

    def unit_started(self, spec: UnitSpec) -> None:
        self.running[spec.key] = (spec, self.clock())
        self.queued_seconds -= self._expected(spec.key)

    def unit_finished(self, result: UnitResult) -> None:
        key = result.spec.key
        if key not in self.running:  # a backend that does not report starts
            self.queued_seconds -= self._expected(key)
        self.running.pop(key, None)
        self.done += 1
        self.failed += not result.ok
        self.done_expected += self._expected(key)

    def _expected(self, key: str) -> float:
        return self.expected.get(key, 1.0)

    def rate(self) -> float | None:
        """Expected seconds of work finished per wall second of this run, or None."""
        elapsed = self.clock() - self.started
        if self.done_expected <= 0 or elapsed <= 0:
            return None
        return self.done_expected / elapsed

    def eta_seconds(self) -> float:
        """Wall seconds left (module docstring)."""
        now = self.clock()
        queued = max(0.0, self.queued_seconds)
        rate = self.rate()
        if rate is None:
            left = queued + sum(max(0.0, self._expected(k) - (now - t0))
                                for k, (_, t0) in self.running.items())
            return left / self.jobs
        per_unit = rate / max(1, len(self.running))  # the speed of one running unit
        left = queued + sum(max(0.0, self._expected(k) - (now - t0) * per_unit)
                            for k, (_, t0) in self.running.items())
        return left / rate

    def elapsed(self) -> float:
        return self.clock() - self.started


class RichReporter(ProgressState):
    """A progress bar on a terminal; use as a context manager around the run."""

    def __init__(self, console: Any, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.progress = Progress(TextColumn("units"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
                                 TextColumn("{task.fields[running]}"), console=console,
                                 transient=False)
        self.bar = None
        self.last = ""

    def __enter__(self) -> "RichReporter":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def run_started(self, todo: Sequence[UnitSpec], expected: dict[str, float],
                    jobs: int) -> None:
        super().run_started(todo, expected, jobs)
        self.bar = self.progress.add_task("units", total=len(todo), eta="?", running="")
        self._refresh()

    def unit_started(self, spec: UnitSpec) -> None:
        super().unit_started(spec)
        self._refresh()

    def unit_finished(self, result: UnitResult) -> None:
        super().unit_finished(result)
        status = "ok" if result.ok else "[red]FAILED[/]"
        self.last = f"{escape(result.row['model'])} {result.row['problem']} " \
                    f"rep {result.row['rep']}: {status}"
        if self.bar is not None:
            self.progress.update(self.bar, advance=1)
        self._refresh()

    def _refresh(self) -> None:
        if self.bar is None:
            return
        names = [f"{escape(s.label)} {s.problem} rep {s.rep}" for s, _ in self.running.values()]
        running = ("running: " + ", ".join(names[:4]) + (" …" if len(names) > 4 else "")) \
            if names else self.last
        self.progress.update(self.bar, eta=format_seconds(self.eta_seconds()),
                             running=running)


class LineReporter(ProgressState):
    """One plain line per finished unit, for output that is not a terminal::

        [ 3/12] ok      lasso simulated rep 1  2.4 s  | elapsed 0:07, ETA 0:21
    """

    def __init__(self, console: Any, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self.console = console

    def __enter__(self) -> "LineReporter":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def run_started(self, todo: Sequence[UnitSpec], expected: dict[str, float],
                    jobs: int) -> None:
        super().run_started(todo, expected, jobs)
        if todo:
            self._say(f"running {len(todo)} unit(s) in {self.jobs} process(es); expected "
                      f"{format_seconds(self.eta_seconds())} from stored unit times or the "
                      "models' cost hints")

    def unit_finished(self, result: UnitResult) -> None:
        super().unit_finished(result)
        row = result.row
        width = len(str(self.total))
        t = row.get("time_total")
        took = f"  {t:.1f} s" if isinstance(t, (int, float)) and t == t else ""
        status = "ok" if result.ok else "FAILED"
        left = (f"ETA {format_seconds(self.eta_seconds())}" if self.done < self.total
                else "done")
        self._say(f"[{self.done:>{width}}/{self.total}] {status:<6}  {row['model']} "
                  f"{row['problem']} rep {row['rep']}{took}  | elapsed "
                  f"{format_seconds(self.elapsed())}, {left}")

    def _say(self, text: str) -> None:
        self.console.print(escape(text), soft_wrap=True, highlight=False)


def progress_reporter(console: Any) -> ProgressState:
    """A bar on a terminal, plain lines elsewhere."""
    return RichReporter(console) if console.is_terminal else LineReporter(console)
