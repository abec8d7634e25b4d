"""Failure isolation: a model that raises, returns NaN/inf scores or runs past --timeout is
recorded as failed for that unit (status, message, traceback), shown in the final table, and
the other units go on; failures are not cached as successes; --retry-failed reruns them."""
from __future__ import annotations

import sqlite3
import subprocess
from datetime import datetime

import pytest
from click.testing import CliRunner

import fault_plugins
from mtlbench.cli import cli
from mtlbench.runner import load_problem
from plugin_fixtures import activate


@pytest.fixture
def faulty(tmp_path_factory, monkeypatch):
    root = fault_plugins.install(tmp_path_factory.mktemp("faulty-dist"))
    activate(monkeypatch, root)
    load_problem.cache_clear()
    yield root
    load_problem.cache_clear()


def _units(store):
    con = sqlite3.connect(store)
    try:
        return {(m, r): dict(status=s, message=msg, traceback=tb, started_at=b, finished_at=f,
                             time_total=sec, test_auc=a)
                for m, r, s, msg, tb, b, f, sec, a in con.execute(
                    "SELECT model, rep, status, message, traceback, started_at, finished_at, "
                    "time_total, test_auc FROM units")}
    finally:
        con.close()


def _table_row(output: str, model: str) -> list[str]:
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 3 and cells[2] == model:
            return cells[1:-1]
    raise AssertionError(f"no table row for {model!r} in:\n{output}")


def test_failing_units_are_recorded_and_the_others_go_on(faulty, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    store = str(tmp_path / "f.sqlite")
    models = "stl,fail-raise,fail-nan,fail-nan[value=inf],slow[seconds=30]"
    res = CliRunner().invoke(cli, ["compare", "--datasets", "tiny", "--models", models,
                                   "--reps", "2", "--timeout", "1", "--store", store])
    assert res.exit_code == 1, res.output  # units failed: non-zero, and how to retry
    assert "8 unit(s) failed; rerun them with the same command plus --retry-failed" in res.output
    assert "ran 10 unit(s)" in res.output and "8 failed" in res.output
    units = _units(store)
    assert len(units) == 10
    for rep in (0, 1):
        assert units["stl", rep]["status"] == "ok" and units["stl", rep]["test_auc"] > 0.5
        raised = units["fail-raise", rep]
        assert raised["status"] == "failed" and raised["test_auc"] is None
        assert "fail-raise: deliberate failure in fit" in raised["message"]
        assert "RuntimeError" in raised["traceback"] and "Traceback" in raised["traceback"]
        for label in ("fail-nan", "fail-nan[value=inf]"):
            bad = units[label, rep]
            assert bad["status"] == "failed" and "NaN/inf scores" in bad["message"], bad
            assert "FloatingPointError" in bad["message"]
        slow = units["slow[seconds=30]", rep]
        assert slow["status"] == "failed"
        assert "exceeded the timeout of 1 s" in slow["message"], slow
        assert "UnitTimeout" in slow["traceback"]
    # the final table: the good model has its score, every failing one its failure count
    assert _table_row(res.output, "stl")[3] == "2"
    for label in ("fail-raise", "fail-nan", "fail-nan[value=inf]", "slow[seconds=30]"):
        row = _table_row(res.output, label)
        assert row[2] == "—" and row[3] == "0" and row[4] == "2", row
    assert "failed fail-raise tiny rep 0: RuntimeError: every grid point failed" in res.output
    assert "failed slow[seconds=30] tiny rep 1: unit exceeded the timeout" in res.output


def test_failures_are_not_cached_as_successes_and_retry_failed_reruns_them(
        faulty, tmp_path, monkeypatch):
    store = str(tmp_path / "r.sqlite")
    args = ["compare", "--datasets", "tiny", "--models", "stl,flaky", "--reps", "2",
            "--store", store]
    runner = CliRunner()
    monkeypatch.setenv("TP_FLAKY_FAIL", "1")
    res = runner.invoke(cli, args)
    assert res.exit_code == 1 and "2 failed" in res.output, res.output
    first = _units(store)
    assert [first["flaky", r]["status"] for r in (0, 1)] == ["failed", "failed"]
    assert "TP_FLAKY_FAIL=1" in first["flaky", 0]["message"]

    monkeypatch.delenv("TP_FLAKY_FAIL")
    res = runner.invoke(cli, args + ["--timeout", "50"])  # failures stay failures without the flag
    assert res.exit_code == 1 and "ran 0 unit(s)" in res.output and "4 already" in res.output
    assert "2 unit(s) of this run failed in an earlier run and were not rerun; add " \
           "--retry-failed" in res.output
    res = runner.invoke(cli, args + ["--allow-failures"])
    assert res.exit_code == 0, res.output
    assert _units(store) == first

    res = runner.invoke(cli, args + ["--retry-failed"])
    assert res.exit_code == 0 and "ran 2 unit(s)" in res.output and "0 failed" in res.output
    after = _units(store)
    for r in (0, 1):
        assert after["flaky", r]["status"] == "ok" and after["flaky", r]["message"] is None
        assert after["stl", r] == first["stl", r]  # successes are not rerun
    assert _table_row(res.output, "flaky")[3] == "2"


def test_failure_isolation_in_parallel_worker_processes(faulty, tmp_path):
    """--jobs 2 (joblib worker processes rebuild the registry from entry points; the
    timeout there is SIGALRM in each worker's main thread)."""
    store = str(tmp_path / "j.sqlite")
    cmd = fault_plugins.cli_command() + [
        "compare", "--datasets", "tiny", "--models", "stl,fail-raise,slow[seconds=30]",
        "--reps", "2", "--jobs", "2", "--timeout", "1", "--store", store]
    proc = subprocess.run(cmd, env=fault_plugins.subprocess_env(faulty), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    units = _units(store)
    assert {k: v["status"] for k, v in units.items()} == {
        ("stl", 0): "ok", ("stl", 1): "ok", ("fail-raise", 0): "failed",
        ("fail-raise", 1): "failed", ("slow[seconds=30]", 0): "failed",
        ("slow[seconds=30]", 1): "failed"}
    assert "exceeded the timeout of 1 s" in units["slow[seconds=30]", 0]["message"]
    assert "deliberate failure" in units["fail-raise", 1]["message"]


def _slow_spec(seconds):
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig
    from mtlbench.runner import plan_units, resolve_problems
    from mtlbench.selectors import apply_overrides

    reg = get_registry()
    sel = apply_overrides(reg.model_class("slow"), {"seconds": seconds}, "slow")
    return plan_units(reg, [sel], resolve_problems(reg, ["tiny"]), ProtocolConfig(reps=1))[0]


def test_timeout_stops_the_whole_unit_not_one_grid_point(faulty):
    """The protocol isolates failing grid points with ``except Exception``; a timeout must
    not be swallowed there (the next grid points would run without a limit)."""
    from mtlbench.runner import execute_unit

    res = execute_unit(_slow_spec([2.0, 2.0, 2.0]), timeout=0.3)
    assert res.row["status"] == "failed" and "timeout of 0.3 s" in res.row["message"]
    assert res.row["time_total"] < 1.5


def test_timeout_in_a_worker_thread(faulty):
    """Off the main thread (as in a Dask worker) SIGALRM is unavailable; the limit is an
    exception injected into the thread."""
    import threading

    from mtlbench.runner import execute_unit

    spec = _slow_spec(30)
    get_ready = execute_unit(_slow_spec(0.01))  # load plugins and data outside the clock
    assert get_ready.ok
    out = []
    th = threading.Thread(target=lambda: out.append(execute_unit(spec, timeout=0.3)))
    th.start()
    th.join(timeout=20)
    assert not th.is_alive() and len(out) == 1
    row = out[0].row
    assert row["status"] == "failed" and row["message"] == "unit exceeded the timeout of 0.3 s"
    assert "UnitTimeout" in row["traceback"] and row["time_total"] < 5


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_units_that_kill_their_process_are_recorded_and_the_others_survive(
        faulty, tmp_path, monkeypatch, jobs):
    """A segfault, os._exit and SIGKILL (what the out-of-memory killer sends) end one unit
    each as a failed record naming the cause; the healthy units beside them are stored, the
    run goes on, serial runs included, and a rerun recomputes nothing."""
    monkeypatch.setenv("COLUMNS", "200")
    store = str(tmp_path / "k.sqlite")
    args = ["compare", "--datasets", "tiny", "--models", "f-good,f-segv[a=2],f-exit,f-kill",
            "--reps", "2", "--jobs", jobs, "--store", store]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1, res.output
    assert "ran 8 unit(s)" in res.output and "6 failed" in res.output
    units = _units(store)
    assert len(units) == 8
    for rep in (0, 1):
        assert units["f-good", rep]["status"] == "ok"
        assert "killed by signal SIGSEGV" in units["f-segv[a=2]", rep]["message"]
        assert "exited with code 3" in units["f-exit", rep]["message"]
        kill = units["f-kill", rep]["message"]
        assert "killed by signal SIGKILL" in kill and "out-of-memory killer" in kill
        assert f"on tiny rep {rep}" in kill
    again = CliRunner().invoke(cli, args)
    assert "ran 0 unit(s)" in again.output and "8 already" in again.output
    assert _units(store) == units


def test_a_hang_that_swallows_the_time_limit_is_stopped_from_outside(faulty, tmp_path):
    """A fit looping around a bare ``except:`` swallows the in-process UnitTimeout; the
    supervisor kills its process after the timeout (plus a grace) and records it."""
    store = str(tmp_path / "h.sqlite")
    res = CliRunner().invoke(cli, ["compare", "--datasets", "tiny", "--models",
                                   "f-hang,f-good", "--reps", "1", "--jobs", "1",
                                   "--timeout", "1", "--store", store])
    assert res.exit_code == 1, res.output
    units = _units(store)
    assert units["f-good", 0]["status"] == "ok"
    msg = units["f-hang", 0]["message"]
    assert "exceeded the timeout of 1 s (its process was stopped" in msg, msg
    # the record made by the supervisor says when the unit ran, not when it was recorded
    # (times are stored to the second, hence the 1 s tolerance)
    row = units["f-hang", 0]
    ran = (datetime.fromisoformat(row["finished_at"])
           - datetime.fromisoformat(row["started_at"])).total_seconds()
    assert row["time_total"] > 1.0 and abs(ran - row["time_total"]) <= 1.0, row


def test_a_unit_that_changes_process_limits_gets_a_fresh_process_after_it(faulty, tmp_path):
    """f-oom lowers its address-space limit and runs out of memory (MemoryError: a failed
    unit); the next unit must not inherit the limit (the worker is replaced)."""
    store = str(tmp_path / "o.sqlite")
    res = CliRunner().invoke(cli, ["compare", "--datasets", "tiny", "--models",
                                   "f-oom,f-good", "--reps", "2", "--jobs", "1",
                                   "--timeout", "60", "--store", store])
    assert res.exit_code == 1, res.output
    units = _units(store)
    for rep in (0, 1):
        assert units["f-oom", rep]["status"] == "failed"
        assert "MemoryError" in units["f-oom", rep]["message"], units["f-oom", rep]
        assert units["f-good", rep]["status"] == "ok", units["f-good", rep]


def test_overrides_are_checked_without_running_the_plugin(faulty, tmp_path):
    """Overrides are validated against declared constraints: a model that segfaults in fit
    cannot take the compare process down before the run, and a value outside its declared
    bounds is refused with one line before any unit."""
    from mtlbench.plugins import get_registry
    from mtlbench.runner import check_overrides
    from mtlbench.selectors import apply_overrides

    reg = get_registry()
    cls = reg.model_class("f-segv")
    check_overrides(reg, [apply_overrides(cls, {"a": 2}, "f-segv")])  # would segfault if fit
    res = CliRunner().invoke(cli, ["compare", "--datasets", "tiny", "--models",
                                   "f-good,f-segv[a=0]", "--store", str(tmp_path / "v.sqlite")])
    assert res.exit_code == 2
    assert "invalid hyperparameter override f-segv[a=0]: f-segv: a must be >= 1" \
        in res.output, res.output
    assert not (tmp_path / "v.sqlite").exists()


@pytest.mark.slow
def test_the_override_probe_is_bounded_from_outside(faulty, tmp_path):
    """An undeclared override is probed by one fit before any unit runs; a fit that swallows
    its time limit (600 s here) is stopped from outside after min(10 s, --timeout) + a grace,
    like a unit, and the run goes on (it blocked ``compare`` for the fit's whole
    duration, and its process outlived a kill -9)."""
    store = str(tmp_path / "p.sqlite")
    cmd = fault_plugins.cli_command() + [
        "compare", "--datasets", "tiny", "--models", "f-catchall[seconds=600],f-good",
        "--reps", "1", "--timeout", "1", "--store", store]
    proc = subprocess.run(cmd, env=fault_plugins.subprocess_env(faulty), capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    units = _units(store)
    assert units["f-good", 0]["status"] == "ok"
    msg = units["f-catchall[seconds=600]", 0]["message"]
    assert "exceeded the timeout of 1 s (its process was stopped" in msg, msg


def test_fits_of_the_search_that_raise_are_counted_and_shown_with_the_plugin_line(
        faulty, tmp_path, monkeypatch):
    """A fit of the search that raises was swallowed (the unit ok, 0 failures
    everywhere, the error only in the stored trace).  Now the search summary counts them
    (``failed_fits``), each trace entry keeps the plugin's frames (framework frames
    stripped), ``compare`` ends by naming them with the plugin's line, and
    ``results --failures [--traceback]`` lists them; a unit whose every fit raised stores the
    plugin's frames with its traceback."""
    import json

    monkeypatch.setenv("COLUMNS", "200")
    store = str(tmp_path / "p.sqlite")
    res = CliRunner().invoke(cli, ["compare", "--datasets", "tiny", "--models",
                                   "f-partial,fail-raise", "--reps", "1", "--jobs", "1",
                                   "--store", store, "--allow-failures"])
    assert res.exit_code == 0, res.output
    con = sqlite3.connect(store)
    try:
        grid, diag = con.execute("SELECT grid, diagnostics FROM units WHERE model = "
                                 "'f-partial'").fetchone()
    finally:
        con.close()
    trace, summary = json.loads(grid), json.loads(diag)["search"]
    failed = [f for f in trace if "error" in f]
    assert failed and len(failed) < len(trace) and summary["failed_fits"] == len(failed)
    tb = failed[0]["traceback"]
    assert tb.startswith("  tp_faulty, line ") and ", in fit\n    raise ValueError(" in tb
    assert tb.endswith(failed[0]["error"]) and "ValueError: f-partial: lam = " in tb
    assert "mtlbench" not in tb  # no framework frame
    n = len(failed)
    text = " ".join(res.output.split())
    assert f"{n} fit(s) of the search raised in 1 finished unit(s)" in text
    assert f"failed fits f-partial tiny rep 0: {n} of {len(trace)}" in text
    assert "x ValueError: f-partial: lam = " in text and "(at tp_faulty, line " in text

    raised = _units(store)["fail-raise", 0]
    assert "The first failed fit, in the plugin's code:\n  tp_faulty, line " \
           in raised["traceback"]
    assert 'raise RuntimeError("fail-raise: deliberate failure in fit")' in raised["traceback"]

    out = CliRunner().invoke(cli, ["results", "--store", store, "--failures", "--traceback"])
    assert out.exit_code == 0, out.output
    assert "failed fail-raise tiny rep 0" in out.output
    assert f"failed fits f-partial tiny rep 0: {n} of {len(trace)}" in out.output
    assert "      tp_faulty, line " in out.output and "raise ValueError(" in out.output


def test_plugin_traceback_keeps_the_plugins_frames_only():
    from mtlbench.protocol import plugin_traceback

    def deep(k):
        if k == 0:
            raise KeyError("bottom")
        deep(k - 1)

    try:
        deep(20)
    except KeyError as exc:
        text = plugin_traceback(exc, limit=3)
    lines = text.splitlines()
    assert lines[-1] == "KeyError: 'bottom'"
    assert len([ln for ln in lines if ln.startswith("  test_failures, line ")]) == 3
    assert lines[-2] == "    raise KeyError(\"bottom\")"
