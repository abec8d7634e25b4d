"""Progress during ``fit``: a clock on every solver (read by ``mtlbench race``).

A solver reports each iteration with :func:`report_progress`::

    from mtlbench import report_progress

    for it in range(self.max_iter):
        ...                                   # one iteration
        report_progress(it + 1, obj, certificate=gap)   # gap: an upper bound of obj - optimum

Arguments: ``iteration`` (int, 1 for the first iteration; 0 may report the starting point),
``objective`` (the model's objective at the current iterate, a float -- or a zero-argument
callable returning it, for a solver that does not compute the objective anyway), and the
optional ``certificate`` (an upper bound of objective - optimum, e.g. a duality gap; ``None``
where the model has none, e.g. a non-convex problem; also a float or a zero-argument callable,
for a solver whose stopping rule does not compute it at every iteration).

**It costs nothing when unused.**  Outside a race (every fit of a benchmark unit) nothing
listens, and the call is one global read and a return; a callable ``objective`` or
``certificate`` is then never called.  Inside a race, the listener measures the solver's own
time: time spent inside the listener (including evaluating a callable ``objective`` or
``certificate``) is subtracted from the clock, so a solver that reports a value it would not
otherwise compute is not charged for it.  A callable is called at once, before the solver
resumes (it may read the solver's current state).

Reporting is optional in the model contract: a model that never calls it still races, with
its final point only (``docs/race.md``).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Union

__all__ = ["report_progress", "progress_active", "listen", "ProgressRecorder", "ProgressPoint"]

Objective = Union[float, Callable[[], float]]
Certificate = Union[float, None, Callable[[], "float | None"]]

#: The active listener, or None (the common case: one global read per report).
_listener: "Callable[[int, Objective, Certificate], None] | None" = None


def report_progress(iteration: int, objective: Objective,
                    certificate: Certificate = None) -> None:
    """Report one iteration of a running ``fit`` to the active listener, if any (see the
    module docstring)."""
    listener = _listener
    if listener is not None:
        listener(iteration, objective, certificate)


def progress_active() -> bool:
    """Whether anything listens to :func:`report_progress` (guard work done only to report)."""
    return _listener is not None


@contextmanager
def listen(callback: Callable[[int, Objective, Certificate], None]) -> Iterator[None]:
    """Make ``callback(iteration, objective, certificate)`` receive every report of the fits
    run inside the ``with`` block (one listener at a time: the previous one is restored)."""
    global _listener
    previous = _listener
    _listener = callback
    try:
        yield
    finally:
        _listener = previous


@dataclass(frozen=True)
class ProgressPoint:
    """One reported iteration: solver time (s, listener time excluded), iteration, objective
    and certificate (or None)."""

    time: float
    iteration: int
    objective: float
    certificate: float | None


@dataclass
class ProgressRecorder:
    """A listener that records every report with the solver's own elapsed time.

    Use::

        rec = ProgressRecorder()
        with rec.recording():
            model.fit(tasks)
        rec.points     # [ProgressPoint(time, iteration, objective, certificate), ...]
        rec.elapsed    # the fit's wall time minus the time spent in the recorder
    """

    points: list[ProgressPoint] = field(default_factory=list)
    #: called with the recorder after each recorded point (e.g. to send the points on)
    on_point: Callable[["ProgressRecorder"], None] | None = None
    _start: float = 0.0
    _paused: float = 0.0
    _stop: float | None = None

    def __call__(self, iteration: int, objective: Objective, certificate: Certificate) -> None:
        entered = time.perf_counter()
        t = entered - self._start - self._paused
        value = objective() if callable(objective) else objective
        cert = certificate() if callable(certificate) else certificate
        self.points.append(ProgressPoint(
            time=t, iteration=int(iteration), objective=float(value),
            certificate=None if cert is None else float(cert)))
        self._paused += time.perf_counter() - entered
        if self.on_point is not None:
            self.on_point(self)

    def exclude(self, seconds: float) -> None:
        """Take ``seconds`` (spent by the caller on the recorder's behalf, e.g. sending the
        points on) off the solver's clock."""
        self._paused += seconds

    @contextmanager
    def recording(self) -> Iterator["ProgressRecorder"]:
        """Listen while the block runs; the clock starts when the block is entered."""
        self.points.clear()
        self._paused = 0.0
        self._stop = None
        self._start = time.perf_counter()
        try:
            with listen(self):
                yield self
        finally:
            self._stop = time.perf_counter()

    @property
    def elapsed(self) -> float:
        """Solver time of the recorded block (wall time minus time spent in the recorder)."""
        end = self._stop if self._stop is not None else time.perf_counter()
        return end - self._start - self._paused
