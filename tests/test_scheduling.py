"""Scheduling: --jobs defaults to the CPUs, units are dispatched longest
expected first (stored times per model and problem, else a model's cost_hint), and the
progress display's ETA comes from those expected times."""
from __future__ import annotations

import os

import pandas as pd
from rich.console import Console

from mtlbench.plugins import get_registry
from mtlbench.cli._progress import RichReporter, format_seconds
from mtlbench.protocol import ProtocolConfig
from mtlbench.runner import default_jobs, expected_seconds, plan_units, resolve_problems
from mtlbench.selectors import apply_overrides


def _specs(names, reps=2):
    reg = get_registry()
    sels = [apply_overrides(reg.model_class(n), {}, n) for n in names]
    return plan_units(reg, sels, resolve_problems(reg, ["simulated"]), ProtocolConfig(reps=reps))


def test_jobs_default_is_the_usable_cpus():
    assert default_jobs() == len(os.sched_getaffinity(0))


def test_expected_seconds_prefers_stored_times_then_cost_hints(monkeypatch):
    reg = get_registry()
    specs = _specs(["stl", "lasso", "rmtfl"])
    history = pd.DataFrame({"model": ["lasso", "lasso", "lasso", "rmtfl"],
                            "model_name": ["lasso", "lasso", "lasso", "rmtfl"],
                            "problem": ["simulated", "simulated", "simulated", "school"],
                            "time_total": [2.0, 4.0, 100.0, 7.0]})
    monkeypatch.setattr(reg.model_class("stl"), "cost_hint", 0.25, raising=False)
    exp = expected_seconds(specs, reg, history)
    by_model = {s.model: exp[s.key] for s in specs}
    assert by_model == {"lasso": 4.0,    # median of its stored times on this problem
                        "rmtfl": 7.0,    # stored on another problem only
                        "stl": 0.25}     # no stored time: the class's cost_hint
    order = [s.model for s in sorted(specs, key=lambda s: -exp[s.key])]
    assert order == ["rmtfl", "rmtfl", "lasso", "lasso", "stl", "stl"]
    # nothing stored: every model by its cost_hint (this machine is the reference: factor 1)
    hints = {s.model: reg.model_class(s.model).cost_hint for s in specs}
    assert {s.model: exp for s in specs
            for exp in [expected_seconds(specs, reg, None)[s.key]]} == hints


def test_eta_uses_expected_times_and_names_running_units():
    specs = _specs(["stl", "lasso"], reps=2)
    exp = {s.key: (10.0 if s.model == "lasso" else 2.0) for s in specs}
    rep = RichReporter(Console(file=open(os.devnull, "w"), width=200))
    with rep:
        rep.run_started(specs, exp, jobs=2)
        assert abs(rep.eta_seconds() - 12.0) < 1e-6  # (10 + 10 + 2 + 2) / 2 workers
        rep.unit_started(specs[1])
        assert "running: lasso simulated rep 0" in rep.progress.tasks[0].fields["running"]
    assert format_seconds(3725) == "1:02:05" and format_seconds(65) == "1:05"


class _TimesStore:
    """What longest_first_as_timed reads from a store: unit_times()."""

    def __init__(self, rows):
        self.rows = rows

    def unit_times(self):
        return pd.DataFrame(self.rows, columns=["model", "model_name", "problem", "time_total"])


class _Result:
    def __init__(self, spec, ok=True):
        self.spec, self.ok = spec, ok


def test_no_probe_for_a_model_already_dispatched():
    from mtlbench.runner import longest_first_as_timed

    reg = get_registry()
    specs = _specs(["stl", "lasso"], reps=3)
    store = _TimesStore([("stl", "stl", "simulated", 50.0)])
    reorder = longest_first_as_timed(store, reg, _TimesStore([]).unit_times(), specs)
    stl0, lasso0 = specs[0], specs[1]
    assert {stl0.model, lasso0.model} == {"stl", "lasso"} and stl0.rep == lasso0.rep == 0
    stl0, lasso0 = sorted([stl0, lasso0], key=lambda s: s.model != "stl")
    # lasso's first unit is running (not queued): no second lasso unit is promoted to probe
    queue = [s for s in specs if s.rep > 0]
    new = reorder(list(queue), _Result(stl0))
    assert [s.model for s in new] == ["stl", "stl", "lasso", "lasso"]


def test_a_fresh_store_reorders_once_a_model_is_timed():
    from mtlbench.runner import longest_first_as_timed

    reg = get_registry()
    specs = _specs(["stl", "lasso"], reps=3)
    store = _TimesStore([])
    reorder = longest_first_as_timed(store, reg, store.unit_times(), specs)
    first_stl = next(s for s in specs if s.model == "stl")
    first_lasso = next(s for s in specs if s.model == "lasso")
    queue = [s for s in specs if s is not first_stl]
    # stl timed at 50 s, lasso not timed and not dispatched: one lasso unit probes first, then
    # stl's remaining units (50 s) before lasso's (default cost)
    store.rows = [("stl", "stl", "simulated", 50.0)]
    new = reorder(list(queue), _Result(first_stl))
    assert [s.model for s in new] == ["lasso", "stl", "stl", "lasso", "lasso"]
    assert new[0] is first_lasso
    assert sorted(s.key for s in new) == sorted(s.key for s in queue)  # nothing lost or added
    # a second stl result changes nothing (the pair is timed); a failed unit neither
    store.rows.append(("lasso", "lasso", "simulated", 900.0))
    assert reorder(list(new), _Result(new[1])) == new
    assert reorder(list(new), _Result(first_lasso, ok=False)) == new
    # the first lasso result: lasso now timed at 900 s -> lasso first, plan order among equals
    new.remove(first_lasso)
    again = reorder(list(new), _Result(first_lasso))
    assert [s.model for s in again] == ["lasso"] * 2 + ["stl", "stl"]
    assert [s.rep for s in again if s.model == "lasso"] == sorted(
        s.rep for s in again if s.model == "lasso")


def test_local_runner_dispatches_in_the_order_reorder_returns(tmp_path):
    from mtlbench.runner.local import local_results

    specs = _specs(["stl"], reps=3)
    started = []
    calls = []

    def reverse(queue, result):
        calls.append((result.spec.rep, [s.rep for s in queue]))
        return list(reversed(queue))

    results = list(local_results(specs, jobs=1, data_dir=None, timeout=None,
                                 on_start=started.append, reorder=reverse))
    assert all(r.ok for r in results)
    assert [s.rep for s in started] == [0, 2, 1]
    # called after each result while units were still queued, with the queue as it stood
    assert calls == [(0, [1, 2]), (2, [1])]
