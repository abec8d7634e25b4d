"""Resume after a crash: kill -9 a running ``mtlbench compare``, run the same command again.

Finished units are not recomputed, none is lost, the SQLite store passes its integrity check,
and the final results equal those of an uninterrupted run.
"""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import fault_plugins
from mtlbench.cli import cli
from mtlbench.runner import load_problem
from plugin_fixtures import activate

REPS = 8
MODELS = "stl,slow[seconds=0.15]"  # slow: 2 fits x 0.15 s per unit, so the run takes a while
N_UNITS = 2 * REPS
N_TASKS = 5  # of the 'tiny' dataset


def _args(store: str) -> list[str]:
    return ["compare", "--datasets", "tiny", "--models", MODELS, "--reps", str(REPS),
            "--store", store]


def _query(store: str, sql: str) -> list[tuple]:
    con = sqlite3.connect(store, timeout=30)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _finished(store: str) -> int:
    try:
        return _query(store, "SELECT COUNT(*) FROM units")[0][0]
    except sqlite3.Error:  # not created yet
        return 0


def _integrity(store: str) -> str:
    return _query(store, "PRAGMA integrity_check")[0][0]


def test_kill_9_midway_then_resume(tmp_path, monkeypatch):
    root = fault_plugins.install(tmp_path / "dist")
    store = str(tmp_path / "killed.sqlite")
    cmd = fault_plugins.cli_command() + _args(store)
    env = fault_plugins.subprocess_env(root)

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while _finished(store) < 3:
            assert proc.poll() is None, "compare ended before it could be killed"
            assert time.monotonic() < deadline, "no unit finished within 120 s"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    assert _integrity(store) == "ok"
    before = dict(_query(store, "SELECT key, finished_at FROM units"))
    assert 3 <= len(before) < N_UNITS, len(before)
    # each stored unit is complete: its per-task scores were written in the same transaction
    per_key = dict(_query(store, "SELECT key, COUNT(*) FROM task_scores GROUP BY key"))
    assert per_key == {k: N_TASKS for k in before}

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"ran {N_UNITS - len(before)} unit(s)" in again.stdout, again.stdout
    assert f"{len(before)} already in the store" in again.stdout

    assert _integrity(store) == "ok"
    after = dict(_query(store, "SELECT key, finished_at FROM units"))
    assert len(after) == N_UNITS  # none lost
    assert {k: after[k] for k in before} == before  # finished units were not recomputed
    assert _query(store, "SELECT COUNT(*) FROM task_scores")[0][0] == N_UNITS * N_TASKS
    assert _query(store, "SELECT COUNT(*) FROM units WHERE status != 'ok'")[0][0] == 0

    # the same results as an uninterrupted run (in-process here)
    activate(monkeypatch, root)
    load_problem.cache_clear()
    clean = str(tmp_path / "clean.sqlite")
    res = CliRunner().invoke(cli, _args(clean))
    load_problem.cache_clear()
    assert res.exit_code == 0, res.output
    cols = "key, model, rep, status, best_params, val_auc, test_auc, split_fingerprint"
    assert _query(store, f"SELECT {cols} FROM units ORDER BY key") == \
        _query(clean, f"SELECT {cols} FROM units ORDER BY key")
    sc = "SELECT key, task_index, task_name, test_auc, n_test FROM task_scores ORDER BY 1, 2"
    assert _query(store, sc) == _query(clean, sc)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux /proc)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                parent[int(entry)] = int(st[1])
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


def _computing(pids: list[int]) -> bool:
    """Whether any of ``pids`` still exists and is not a zombie."""
    return any((st := _stat(p)) is not None and st[0] != "Z" for p in pids)


def _start(tmp_path, store, models, *extra):
    root = fault_plugins.install(tmp_path / "dist")
    cmd = fault_plugins.cli_command() + ["compare", "--datasets", "tiny", "--models", models,
                                         "--store", store, *extra]
    return subprocess.Popen(cmd, env=fault_plugins.subprocess_env(root),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)


def _default_sigint() -> None:
    """Give ``compare`` the SIGINT disposition of a terminal: a suite started as a background
    job of a non-interactive shell (``nohup ... &``, some CI runners) passes SIGINT ignored to
    its children, and Python then installs no KeyboardInterrupt handler, as it should."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(cond, seconds=120.0):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.2)
    return False


def _claims(store):
    try:
        return _query(store, "SELECT COUNT(*) FROM claims")[0][0]
    except sqlite3.Error:
        return 0


def _grandchildren(pid: int) -> list[int]:
    """Processes started by the children of ``pid`` (the forkserver's: the probe, workers)."""
    kids = set(_descendants(pid))
    return [p for p in kids if (st := _stat(p)) is not None and int(st[1]) in kids]


STAGES = {  # stage: (models, options, condition that says the stage is reached)
    # the override probe of an undeclared parameter, before any unit: a fit of 600 s that
    # swallows its time limit (stopped from outside after 10 s + grace)
    "probe": ("f-catchall[seconds=600]", ("--reps", "1"),
              lambda proc, store: _grandchildren(proc.pid) and _claims(store) == 0),
    # units running: one finished, the next one (60 s) running
    "units": ("stl,slow[seconds=60,chunk=0.05]", ("--reps", "2", "-j", "1"),
              lambda proc, store: _finished(store) >= 1 and _claims(store) >= 1),
}


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc (Linux)")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=["ctrl-c", "sigterm", "kill-9"])
@pytest.mark.parametrize("stage", sorted(STAGES))
def test_stopping_compare_at_any_stage(tmp_path, stage, sig):
    """Ctrl-C and SIGTERM (what timeout, systemd and Slurm send) end ``compare`` at any stage
    with a message saying what was saved and how to resume (exit 130 / 143), its claims
    released; after any of them, kill -9 included, no process it started (forkserver,
    resource tracker, probe, workers) is left, and none prints a traceback."""
    store = str(tmp_path / "c.sqlite")
    models, options, reached = STAGES[stage]
    proc = _start(tmp_path, store, models, *options)
    assert _wait_for(lambda: reached(proc, store)), proc.communicate(timeout=5)
    kids = _descendants(proc.pid)
    assert len(kids) >= 2  # at least the forkserver and the probe or a worker
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert _wait_for(lambda: not _computing(kids), 15), kids
    text = " ".join((out + err).split())
    assert "Traceback" not in text and "BrokenPipeError" not in text, text
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        return
    assert proc.returncode == 128 + sig, text
    what = "Interrupted:" if sig == signal.SIGINT else "Terminated (SIGTERM):"
    saved = ("while planning, before any unit ran" if stage == "probe"
             else "1 unit(s) of this run were saved")
    assert f"{what} {saved}" in text, text
    assert "Resume with the same command" in text and "mtlbench compare --datasets tiny" in text
    assert _claims(store) == 0


def test_two_runs_on_one_store_do_not_compute_a_unit_twice(tmp_path):
    store = str(tmp_path / "two.sqlite")
    args = ("--reps", "2", "-j", "2", "--allow-failures")
    first = _start(tmp_path, store, "slow[seconds=20,chunk=0.05]", *args)
    assert _wait_for(lambda: _claims(store) == 2), first.communicate(timeout=5)
    second = _start(tmp_path, store, "slow[seconds=20,chunk=0.05]", *args)
    out2, err2 = second.communicate(timeout=120)
    out1, err1 = first.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, out1 + err1 + out2 + err2
    assert "ran 2 unit(s)" in out1
    text2 = " ".join(out2.split())
    assert "ran 0 unit(s)" in text2, text2
    assert "2 unit(s) are being computed by another run on this store" in text2
    assert _finished(store) == 2 and _claims(store) == 0


TWO_RUNS = '''
import sys, time
from pathlib import Path

import mtlbench

role, root, trials, reps = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for t in range(trials):
    (root / f"ready-{role}-{t}").touch()
    while not (root / f"go-{role}-{t}").exists():
        time.sleep(0.005)
    res = mtlbench.compare(datasets=["tiny"], models=["f-good"], reps=reps, jobs=2,
                           store=str(root / f"s{t}.sqlite"))
    (root / f"ran-{role}-{t}").write_text(str(res.report.ran))
'''


@pytest.mark.slow
def test_two_runs_started_while_units_finish_never_compute_a_unit_twice(tmp_path):
    """Run B starts while run A is finishing units (B reads the store, A
    writes a unit and releases its claim, B claims): before, B then computed that unit a
    second time (2 of 11 trials).  Two processes call ``compare`` on one store per trial, B
    once A has stored a tenth of its units (A then writes a unit every few milliseconds: units
    of one fit on 5 x 40 samples); the units computed twice are counted."""
    trials, reps = 4, 300
    root = fault_plugins.install(tmp_path / "dist")
    env = fault_plugins.subprocess_env(root)
    work = tmp_path / "runs"
    work.mkdir()
    procs = {role: subprocess.Popen([sys.executable, "-c", TWO_RUNS, role, str(work),
                                     str(trials), str(reps)], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for role in ("a", "b")}
    twice = []
    try:
        for t in range(trials):
            ready = lambda: all((work / f"ready-{r}-{t}").exists() for r in procs)
            assert _wait_for(ready), {r: p.poll() for r, p in procs.items()}
            (work / f"go-a-{t}").touch()
            assert _wait_for(lambda: _finished(str(work / f"s{t}.sqlite")) >= reps // 10)
            (work / f"go-b-{t}").touch()
            done = lambda: all((work / f"ran-{r}-{t}").exists() for r in procs)
            assert _wait_for(done), {r: p.poll() for r, p in procs.items()}
            ran = {r: int((work / f"ran-{r}-{t}").read_text()) for r in procs}
            assert _finished(str(work / f"s{t}.sqlite")) == reps
            twice.append(ran["a"] + ran["b"] - reps)
    finally:
        for p in procs.values():
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 0, out
    assert twice == [0] * trials, f"units computed twice per trial: {twice}"


KILLED_AFTER_WRITE = r'''
import os, signal, sys
from mtlbench.store import ResultStore
store = ResultStore(sys.argv[1])
row = {"key": "u1", "model": "m", "dataset": "d", "problem": "d", "rep": 0, "seed": 0,
       "status": "failed", "message": "boom"}
assert store.claim_units(["u1"])[0] == {"u1"}
store.write_unit(row)
os.kill(os.getpid(), signal.SIGKILL)   # killed before anything else runs
'''


@pytest.mark.slow
def test_a_kill_right_after_a_unit_is_written_leaves_no_claim(tmp_path):
    """Writing a unit and releasing its claim are one transaction: a run killed right after
    it wrote a unit leaves no claim on it (a claim left there would keep a run on another
    machine -- which cannot see that the owner is dead -- off that unit, e.g. a
    --retry-failed, for the whole lease)."""
    store = tmp_path / "s.sqlite"
    proc = subprocess.run([sys.executable, "-c", KILLED_AFTER_WRITE, str(store)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert _query(str(store), "SELECT status FROM units WHERE key = 'u1'") == [("failed",)]
    assert _query(str(store), "SELECT COUNT(*) FROM claims") == [(0,)]
    con = sqlite3.connect(store)  # another host's run: a claim there would be respected
    con.execute("INSERT INTO claims VALUES ('u2', 'elsewhere:1:x', 'elsewhere', 1, 1e12)")
    con.commit()
    con.close()
    from mtlbench.store import ResultStore

    with ResultStore(store) as rs:  # the finished unit can be claimed at once (a retry)
        seen = rs.unit_states(["u1", "u2"])
        assert rs.claim_units(["u1", "u2"], seen=seen) == ({"u1"}, set())
