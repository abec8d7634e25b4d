"""The progress display of ``mtlbench compare`` (a :class:`mtlbench.runner.Reporter`).

Shows units done / to do, the units running now, and an ETA computed from the expected unit
times (stored times of earlier runs per model and problem, else a model's ``cost_hint``),
corrected by how the finished units of this run compare with their expectation.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..runner import Reporter, UnitResult, UnitSpec

__all__ = ["RichReporter", "format_seconds"]


def format_seconds(s: float) -> str:
    s = max(0, int(round(s)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class RichReporter(Reporter):
    """Use as a context manager around :func:`mtlbench.runner.run_units`."""

    def __init__(self, console: Any) -> None:
        self.progress = Progress(TextColumn("units"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}"),
                                 TextColumn("{task.fields[running]}"), console=console,
                                 transient=False)
        self.bar = None
        self.expected: dict[str, float] = {}
        self.running: dict[str, tuple[UnitSpec, float]] = {}
        self.queued_seconds = 0.0
        self.jobs = 1
        self.done_expected = 0.0
        self.done_actual = 0.0
        self.last = ""

    def __enter__(self) -> "RichReporter":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    # ------------------------------------------------------------------ Reporter
    def run_started(self, todo: Sequence[UnitSpec], expected: dict[str, float],
                    jobs: int) -> None:
        self.expected = dict(expected)
        self.queued_seconds = sum(expected.get(s.key, 1.0) for s in todo)
        self.jobs = max(1, jobs)
        self.bar = self.progress.add_task("units", total=len(todo), eta="?", running="")
        self._refresh()

    def unit_started(self, spec: UnitSpec) -> None:
        self.running[spec.key] = (spec, time.monotonic())
        self.queued_seconds -= self.expected.get(spec.key, 1.0)
        self._refresh()

    def unit_finished(self, result: UnitResult) -> None:
        spec = result.spec
        if spec.key not in self.running:  # a backend that does not report starts
            self.queued_seconds -= self.expected.get(spec.key, 1.0)
        self.running.pop(spec.key, None)
        t = result.row.get("time_total")
        if t is not None and t == t:
            self.done_expected += self.expected.get(spec.key, 1.0)
            self.done_actual += float(t)
        status = "ok" if result.ok else "[red]FAILED[/]"
        self.last = f"{escape(result.row['model'])} {result.row['problem']} " \
                    f"rep {result.row['rep']}: {status}"
        if self.bar is not None:
            self.progress.update(self.bar, advance=1)
        self._refresh()

    # ------------------------------------------------------------------ display
    def eta_seconds(self) -> float | None:
        """Expected seconds left: queued and running units' expected times (scaled by how
        this run's finished units compared with theirs), shared by the workers."""
        ratio = self.done_actual / self.done_expected if self.done_expected > 0 else 1.0
        now = time.monotonic()
        left = max(0.0, self.queued_seconds) * ratio
        left += sum(max(0.0, self.expected.get(k, 1.0) * ratio - (now - t0))
                    for k, (_, t0) in self.running.items())
        return left / self.jobs

    def _refresh(self) -> None:
        if self.bar is None:
            return
        names = [f"{escape(s.label)} {s.problem} rep {s.rep}" for s, _ in self.running.values()]
        running = ("running: " + ", ".join(names[:4]) + (" …" if len(names) > 4 else "")) \
            if names else self.last
        eta = self.eta_seconds()
        self.progress.update(self.bar, eta=format_seconds(eta) if eta is not None else "?",
                             running=running)
