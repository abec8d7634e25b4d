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

Edge drills (``publish``, ``import-results``, the folder ``compare`` runs from, hostile input):

=============  ==============================================================================
clone-parent   ``compare`` from a folder holding a copy of the checkout named ``mtlbench``
publish-kill   ``kill -9`` of ``publish`` at random times, then the same ``publish`` again
publish-full   ``publish`` into a tmpfs (``mount -t tmpfs``, as root) with too little space
manifest       a ``.manifest.json`` naming files outside ``--out``
import-kill    ``kill -9`` of ``import-results`` at random times, then the same import again
import-full    ``import-results`` into a store on a tmpfs with too little space
hostile-json   ``import-results`` of a file nested 100000 levels deep
=============  ==============================================================================

There, survived: the command ended by itself, with its result or one clear line (no traceback);
recorded: what it left is consistent (the old or the new set of published files, none or all of
the imported units, nothing outside ``--out`` removed); lost: attempts that left anything else.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
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
    except sqlite3.OperationalError:  # not a store (yet)
        return []
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


# ------------------------------------------------------------------------ edge drills
def _mtlbench(root: Path, args: list[str], cwd: Path | None = None, **popen) -> subprocess.Popen:
    return subprocess.Popen(fault_plugins.cli_command() + args, env=fault_plugins.subprocess_env(
        root), text=True, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


def _clean(proc: subprocess.Popen, timeout: float = 600) -> tuple[bool, str]:
    """(ended by itself without a traceback, its last line of output, first on standard
    error)."""
    out, err = proc.communicate(timeout=timeout)
    lines = err.strip().splitlines() or out.strip().splitlines() or [""]
    return proc.returncode in (0, 1, 2) and "Traceback" not in err, " ".join(lines[-1].split())


def _published_store(root: Path, tmp: Path) -> Path:
    store = tmp / "edge.sqlite"
    if not store.exists():
        _compare(root, store, "f-good,f-partial", 1, [], reps=4).communicate(timeout=600)
    return store


def _folder_state(folder: Path) -> dict[str, bytes] | None:
    """The files of a published folder if it is a whole publication (its manifest's files
    all there and every JSON file whole), else None."""
    if not folder.exists():
        return {}
    try:
        listed = json.loads((folder / ".manifest.json").read_text())["files"]
        for rel in listed:
            if rel.endswith(".json"):
                json.loads((folder / rel).read_text())
            elif not (folder / rel).is_file():
                return None
    except (OSError, ValueError, KeyError):
        return None
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@contextlib.contextmanager
def _tmpfs(path: Path, size: int):
    """A tmpfs of ``size`` bytes mounted at ``path`` (None where mounting is not permitted)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True)
    if done.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(folder: Path, leave: int) -> None:
    """Fill the file system of ``folder`` but ``leave`` bytes."""
    st = os.statvfs(folder)
    free = st.f_bavail * st.f_frsize
    with open(folder / "filler", "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))


def clone_parent_drill(root: Path, tmp: Path) -> tuple[bool, bool, int, str]:
    folder = tmp / "parent"
    shutil.copytree(HERE.parent, folder / "mtlbench", ignore=shutil.ignore_patterns(
        ".git", "leaderboards", "*.egg-info", "__pycache__"))
    store = tmp / "clone.sqlite"
    mtlbench = Path(sys.executable).with_name("mtlbench")
    cmd = [str(mtlbench)] if mtlbench.exists() else [sys.executable, "-P", "-m", "mtlbench.cli"]
    proc = subprocess.Popen(cmd + ["compare", "--datasets", "tiny", "--models", "f-good",
                                   "--reps", str(REPS), "--store", str(store)],
                            env=fault_plugins.subprocess_env(root), cwd=folder, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    survived, last = _clean(proc)
    rows = _rows(store)
    return (survived and proc.returncode == 0, all(r[2] == "ok" for r in rows),
            REPS - len(rows), last)


def publish_kill_drill(root: Path, tmp: Path, tries: int = 6) -> tuple[bool, bool, int, str]:
    store, out = _published_store(root, tmp), tmp / "pub-kill"
    args = ["publish", "--store", str(store), "--out", str(out)]
    bad = killed = 0
    for _ in range(tries):
        # the same folder with the same files, or another folder with a whole publication
        before, inode = _folder_state(out), out.stat().st_ino if out.exists() else None
        proc = _mtlbench(root, args)
        time.sleep(random.uniform(0.2, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        killed += proc.returncode == -signal.SIGKILL
        after = _folder_state(out)
        same = out.stat().st_ino == inode if out.exists() else inode is None
        bad += after is None or (same and after != before) or (not same and not after)
    survived, last = _clean(_mtlbench(root, args))
    return (survived, bad == 0 and _folder_state(out) not in (None, {}), bad,
            f"{killed} of {tries} killed while publishing; then: {last}")


def publish_full_drill(root: Path, tmp: Path) -> tuple[bool, bool, int, str]:
    store = _published_store(root, tmp)
    with _tmpfs(tmp / "small-disk", 64 << 20) as disk:
        if disk is None:
            return True, True, 0, "skipped: mounting a tmpfs needs root"
        out = disk / "lb"
        args = ["publish", "--store", str(store), "--out", str(out)]
        _mtlbench(root, args).communicate(timeout=600)
        before = _folder_state(out)
        _fill(disk, sum(len(b) for b in before.values()) // 2)  # room for half a copy
        proc = _mtlbench(root, args)
        survived, last = _clean(proc)
        same = _folder_state(out) == before and not list(disk.glob(".lb.publish-*"))
        return survived and "disk is full" in last, same, int(not same), last[:120]


def manifest_drill(root: Path, tmp: Path) -> tuple[bool, bool, int, str]:
    store, out = _published_store(root, tmp), tmp / "pub-manifest"
    args = ["publish", "--store", str(store), "--out", str(out), "--no-figures"]
    _mtlbench(root, args).communicate(timeout=600)
    victim = tmp / "victim.txt"
    victim.write_text("keep me")
    manifest = json.loads((out / ".manifest.json").read_text())
    manifest["files"] += ["../victim.txt", str(victim)]
    (out / ".manifest.json").write_text(json.dumps(manifest))
    survived, last = _clean(_mtlbench(root, args))
    kept = victim.exists()
    return survived, kept, int(not kept), last


def _import_file(root: Path, tmp: Path) -> Path:
    out = tmp / "pub-import"
    if not out.exists():
        _mtlbench(root, ["publish", "--store", str(_published_store(root, tmp)), "--out",
                         str(out), "--no-figures"]).communicate(timeout=600)
    return out / "tiny.json"


def import_kill_drill(root: Path, tmp: Path, tries: int = 8) -> tuple[bool, bool, int, str]:
    path = _import_file(root, tmp)
    n = len(json.loads(path.read_text())["units"])
    bad = 0
    for i in range(tries):
        store = tmp / f"import-kill-{i}.sqlite"
        proc = _mtlbench(root, ["import-results", str(path), "--store", str(store)])
        time.sleep(random.uniform(0.3, 4.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        bad += len(_rows(store)) not in (0, n)
    survived, last = _clean(_mtlbench(root, ["import-results", str(path), "--store",
                                             str(tmp / "import-kill-0.sqlite")]))
    return survived, bad == 0, bad, last


def import_full_drill(root: Path, tmp: Path) -> tuple[bool, bool, int, str]:
    """Import into a store on a tmpfs left with less and less room: every attempt ends with
    all units imported or with one line and none."""
    from mtlbench.store import ResultStore

    path = _import_file(root, tmp)
    n = len(json.loads(path.read_text())["units"])
    outcomes, clean, bad = [], True, 0
    for leave in (128, 112, 104, 96, 88, 80, 64):
        with _tmpfs(tmp / "small-store", 8 << 20) as disk:
            if disk is None:
                return True, True, 0, "skipped: mounting a tmpfs needs root"
            store = disk / "s.sqlite"
            ResultStore(store).close()  # an empty store, then ``leave`` KiB of room
            _fill(disk, leave << 10)
            proc = _mtlbench(root, ["import-results", str(path), "--store", str(store)])
            survived, last = _clean(proc)
            (disk / "filler").unlink()  # SQLite needs room to read its journal back
            rows = len(_rows(store))
        clean &= survived
        ok = (proc.returncode, rows) in ((0, n), (2, 0))
        bad += not ok
        outcomes.append(f"{leave} KiB: " + ("all" if rows == n else f"{rows}") +
                        ("" if proc.returncode == 0 else
                         f" ({last.split(chr(39))[0].removeprefix('Error: ').strip()})"))
    return clean, bad == 0, bad, "; ".join(outcomes)[:200]


def hostile_json_drill(root: Path, tmp: Path) -> tuple[bool, bool, int, str]:
    path = tmp / "deep.json"
    path.write_text('{"format": "mtlbench-leaderboard/3", "units": ' + "[" * 100_000
                    + "]" * 100_000 + "}")
    store = tmp / "hostile.sqlite"
    proc = _mtlbench(root, ["import-results", str(path), "--store", str(store)])
    survived, last = _clean(proc)
    return survived and proc.returncode == 2, not store.exists(), int(store.exists()), last


EDGE_DRILLS = {"clone-parent": clone_parent_drill, "publish-kill": publish_kill_drill,
               "publish-full": publish_full_drill, "manifest": manifest_drill,
               "import-kill": import_kill_drill, "import-full": import_full_drill,
               "hostile-json": hostile_json_drill}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated drill names")
    args = ap.parse_args()
    names = ["kill", *DRILLS, *EDGE_DRILLS]
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
            elif name in EDGE_DRILLS:
                res = EDGE_DRILLS[name](root, tmp)
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
