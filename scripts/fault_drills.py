"""Fault drills: run ``mtlbench compare`` against models that crash, hang or eat memory, and
kill runs midway; print per drill whether the run survived, the fault was recorded, and how
many units were lost.

    python scripts/fault_drills.py [--jobs 2] [--only segfault,hang]

Each drill runs a real ``mtlbench compare`` subprocess on the tiny fault-test dataset with a
healthy model (``f-good``) beside the faulty one, using the fault-injecting plugin distribution
of ``tests/fault_plugins.py`` (installed into a temporary folder on PYTHONPATH):

=============  ==============================================================================
kill           ``kill -9`` of ``compare`` midway, then the same command again
segfault       ``f-segv``: a NULL read through ctypes (SIGSEGV)
exit           ``f-exit``: ``os._exit(3)`` inside fit
oom-killer     ``f-kill``: SIGKILL, what the kernel's out-of-memory killer sends
oom-ulimit     ``f-oom``: the fit caps its address space (``resource.setrlimit``, i.e.
               ``ulimit -v``) and allocates 4 GB: MemoryError
hang           ``f-block``: one call no signal interrupts (SIGALRM blocked), ``--timeout 2``
bare-except    ``f-hang``: a loop whose bare ``except:`` swallows the time limit, ``--timeout 2``
=============  ==============================================================================

survived: the run ended by itself with its summary table (exit status 0 or 1, not a crash);
recorded: every unit of the faulty model is stored as failed with the cause in its message;
lost: units of the plan missing from the store at the end (must be 0).
"""
from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import fault_plugins  # noqa: E402

REPS = 2
DRILLS = {  # name: (faulty selector, extra options, text expected in every failed message)
    "segfault": ("f-segv", [], "SIGSEGV"),
    "exit": ("f-exit", [], "exited with code 3"),
    "oom-killer": ("f-kill", [], "SIGKILL"),
    "oom-ulimit": ("f-oom", ["--timeout", "60"], "MemoryError"),
    "hang": ("f-block", ["--timeout", "2"], "exceeded the timeout of 2 s"),
    "bare-except": ("f-hang", ["--timeout", "2"], "exceeded the timeout of 2 s"),
}


def _rows(store: Path) -> list[tuple]:
    if not store.exists():
        return []
    con = sqlite3.connect(store, timeout=30)
    try:
        return con.execute("SELECT model, rep, status, message FROM units").fetchall()
    finally:
        con.close()


def _compare(root: Path, store: Path, models: str, jobs: int, extra: list[str],
             reps: int = REPS, **popen) -> subprocess.Popen:
    cmd = fault_plugins.cli_command() + ["compare", "--datasets", "tiny", "--models", models,
                                         "--reps", str(reps), "--jobs", str(jobs),
                                         "--store", str(store), *extra]
    return subprocess.Popen(cmd, env=fault_plugins.subprocess_env(root), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def fault_drill(root: Path, tmp: Path, name: str, jobs: int) -> tuple[bool, bool, int, str]:
    sel, extra, expect = DRILLS[name]
    store = tmp / f"{name}.sqlite"
    proc = _compare(root, store, f"f-good,{sel}", jobs, extra)
    out, err = proc.communicate(timeout=600)
    survived = proc.returncode in (0, 1) and "mean ± std test AUC" in out
    rows = _rows(store)
    faulty = [r for r in rows if r[0] == sel]
    recorded = len(faulty) == REPS and all(r[2] == "failed" and expect in (r[3] or "")
                                           for r in faulty)
    lost = 2 * REPS - len(rows)
    good_ok = sum(1 for r in rows if r[0] == "f-good" and r[2] == "ok")
    note = (faulty[0][3] or "")[:90] if faulty else (err.strip().splitlines() or [""])[-1][:90]
    return survived and good_ok == REPS, recorded, lost, note


def kill_drill(root: Path, tmp: Path, jobs: int) -> tuple[bool, bool, int, str]:
    store = tmp / "kill.sqlite"
    models, reps = "f-good,slow[seconds=0.3]", 8
    proc = _compare(root, store, models, jobs, [], reps=reps)
    end = time.monotonic() + 300
    while time.monotonic() < end and len(_rows(store)) < 3:
        time.sleep(0.1)
    before = len(_rows(store))
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    again = _compare(root, store, models, jobs, [], reps=reps)
    out, _ = again.communicate(timeout=600)
    con = sqlite3.connect(store)
    integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    rows = _rows(store)
    survived = again.returncode == 0 and integrity == "ok"
    ran = next((line for line in out.splitlines() if line.startswith("ran ")), "")
    return (survived, True, 2 * reps - len(rows),
            f"{before} unit(s) stored before kill -9; rerun: {ran[:60]}; integrity {integrity}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated drill names")
    args = ap.parse_args()
    names = ["kill", *DRILLS]
    if args.only:
        names = [n for n in names if n in args.only.split(",")]
    print(f"fault drills with --jobs {args.jobs}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'drill':<12} {'survived':>8} {'recorded':>8} {'lost':>5}  note")
    totals = [0, 0, 0]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        root = fault_plugins.install(tmp / "dist")
        for name in names:
            t0 = time.monotonic()
            if name == "kill":
                res = kill_drill(root, tmp, args.jobs)
            else:
                res = fault_drill(root, tmp, name, args.jobs)
            survived, recorded, lost, note = res
            totals[0] += survived
            totals[1] += recorded
            totals[2] += lost
            print(f"{name:<12} {'yes' if survived else 'NO':>8} "
                  f"{'yes' if recorded else 'NO':>8} {lost:>5}  {note} "
                  f"[{time.monotonic() - t0:.0f} s]", flush=True)
    print(f"survived {totals[0]}/{len(names)}, recorded {totals[1]}/{len(names)}, "
          f"units lost {totals[2]}")


if __name__ == "__main__":
    main()
