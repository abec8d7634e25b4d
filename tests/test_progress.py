"""The progress contract: reports reach a listener with the solver's own clock; without a
listener a report is a no-op and a callable objective is never evaluated."""
import time

import pytest

from mtlbench import progress_active, report_progress
from mtlbench.progress import ProgressRecorder, listen


def test_report_without_listener_is_a_no_op_and_never_calls_the_objective():
    assert not progress_active()

    def boom():
        raise AssertionError("evaluated without a listener")

    report_progress(1, boom, certificate=0.5)  # nothing listens: nothing happens


def test_recorder_keeps_every_report_in_order_with_nondecreasing_times():
    rec = ProgressRecorder()
    with rec.recording():
        assert progress_active()
        for it in range(1, 6):
            report_progress(it, 10.0 / it, certificate=1.0 / it)
    assert not progress_active()
    assert [p.iteration for p in rec.points] == [1, 2, 3, 4, 5]
    assert [p.objective for p in rec.points] == pytest.approx([10.0 / i for i in range(1, 6)],
                                                               rel=1e-15)
    assert rec.points[-1].certificate == pytest.approx(0.2, rel=1e-15)
    times = [p.time for p in rec.points]
    assert all(b >= a for a, b in zip(times, times[1:]))


def test_time_spent_evaluating_a_callable_objective_is_not_charged_to_the_solver():
    rec = ProgressRecorder()

    def slow_objective():
        time.sleep(0.05)
        return 1.0

    with rec.recording():
        for it in range(4):
            report_progress(it, slow_objective)
    # 0.2 s were spent inside the recorder; the solver itself did (almost) nothing
    assert rec.elapsed < 0.05
    assert rec.points[-1].time < 0.05


def test_listeners_nest_and_restore():
    outer, inner = [], []
    with listen(lambda *a: outer.append(a)):
        report_progress(1, 1.0)
        with listen(lambda *a: inner.append(a)):
            report_progress(2, 2.0)
        report_progress(3, 3.0)
    assert [a[0] for a in outer] == [1, 3] and [a[0] for a in inner] == [2]
    assert not progress_active()


def test_a_callable_certificate_is_evaluated_only_when_listening_and_not_charged():
    def boom():
        raise AssertionError("evaluated without a listener")

    report_progress(1, 1.0, certificate=boom)   # nothing listens: nothing happens
    rec = ProgressRecorder()

    def slow_gap():
        time.sleep(0.05)
        return 0.25

    with rec.recording():
        for it in range(3):
            report_progress(it, 2.0, slow_gap)
    assert [p.certificate for p in rec.points] == [0.25] * 3
    assert rec.elapsed < 0.05
