"""Start-up time of the command line: old tree (branch ``main``) vs this tree, side by side.

Runs each command N times in fresh processes, alternating old and new, and prints the median
wall time beside the 0.5 s target for ``--version`` and ``--help``.  ``plugins`` and ``models``
load every plugin (the registration checks included); ``compare --dry-run`` also plans every
model's units, which computes each model's code fingerprint.  The old tree is git ref
``--ref`` (default ``main``), extracted and run as every benchmark runs another ref
(``_common.checkout`` / ``run_code``: its package, model and dataset plugins first on
PYTHONPATH), so both use the same interpreter and packages.

    python benchmarks/bench_startup.py [--runs 7] [--ref main]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import checkout, run_code

COMMANDS = (["--version"], ["--help"], ["plugins"], ["models"],
            ["compare", "--dry-run", "--reps", "1", "--store", "STORE"])
TARGET_S = {"--version": 0.5, "--help": 0.5}


def _once(tree: str | None, args: list[str]) -> float:
    t0 = time.perf_counter()
    run_code(["-c", "from mtlbench.cli import main; main()", *args], tree,
             extra_env={"COLUMNS": "120"}, check=True, stdout=subprocess.DEVNULL,
             stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--ref", default="main", help="git ref of the old tree")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, checkout(args.ref) as old:
        trees = {"old": old, "new": None}
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
            _once(old, cmd), _once(None, cmd)  # warm the file cache
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
