"""Start-up time of the command line: old tree (branch ``main``) vs this tree, side by side.

Runs each command N times in fresh processes, alternating old and new, and prints the median
wall time beside the 0.5 s target for ``--version`` and ``--help``.  ``plugins`` and ``models``
load every plugin (the registration checks included); ``compare --dry-run`` also plans every
model's units, which computes each model's code fingerprint.  The old tree is extracted
with ``git archive main`` into a temporary folder and run with PYTHONPATH pointing at it (its
package, built-in model and dataset plugins), so both use the same interpreter and packages.

    python benchmarks/bench_startup.py [--runs 7] [--ref main]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["--version"], ["--help"], ["plugins"], ["models"],
            ["compare", "--dry-run", "--reps", "1", "--store", "STORE"])
TARGET_S = {"--version": 0.5, "--help": 0.5}


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(tree / d) for d in (".", "plugins", "datasets"))
    env["COLUMNS"] = "120"
    return env


def _once(tree: Path, args: list[str]) -> float:
    cmd = [sys.executable, "-c", "from mtlbench.cli import main; main()", *args]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=_env(tree), cwd=tempfile.gettempdir(), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--ref", default="main", help="git ref of the old tree")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp)
        archive = subprocess.run(["git", "archive", args.ref], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        trees = {"old": old, "new": ROOT}
        print(f"median of {args.runs} runs (seconds), old = git {args.ref}, new = this tree")
        print(f"{'command':<20}{'old':>8}{'new':>8}{'old/new':>9}{'target':>8}")
        floor = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            floor.append(time.perf_counter() - t0)
        print(f"{'(python -c pass)':<20}{'':>8}{statistics.median(floor):8.3f}"
              "   <- interpreter + site start-up, the floor on this machine now")
        store = str(Path(tmp) / "dry-run.sqlite")
        for cmd in ([store if a == "STORE" else a for a in c] for c in COMMANDS):
            times: dict[str, list[float]] = {"old": [], "new": []}
            _once(old, cmd), _once(ROOT, cmd)  # warm the file cache
            for _ in range(args.runs):
                for which, tree in trees.items():
                    times[which].append(_once(tree, cmd))
            o, n = statistics.median(times["old"]), statistics.median(times["new"])
            target = TARGET_S.get(cmd[0])
            label = "mtlbench " + " ".join(cmd[:2])
            print(f"{label:<20}{o:8.3f}{n:8.3f}{o / n:8.1f}x"
                  f"{f'{target:.1f}' if target else '—':>8}")


if __name__ == "__main__":
    main()
