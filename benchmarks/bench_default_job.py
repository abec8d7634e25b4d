"""The default job (``mtlbench compare`` with its defaults: every model on ``simulated``), old
git ref vs working tree, interleaved in one run: wall time of the whole command and the sum of
its unit times, with their ratios new / old.

    nice -n 5 python benchmarks/bench_default_job.py --ref main [--reps 1] [--rounds 2]
"""
from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time

from _common import checkout, run_code


def _job(tree: str | None, store: str, reps: int, jobs: int) -> tuple[float, float, int]:
    """(wall seconds, sum of unit seconds, finished units) of one default job."""
    t0 = time.perf_counter()
    proc = run_code(["-m", "mtlbench", "compare", "--reps", str(reps), "-j", str(jobs),
                     "--store", store], tree)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"compare failed ({'old' if tree else 'new'}): "
                         f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    with sqlite3.connect(store) as db:
        n, total = db.execute("SELECT count(*), sum(time_total) FROM units "
                              "WHERE status = 'ok'").fetchone()
    return wall, float(total or 0.0), int(n)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", required=True, help="git ref of the old code")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="old/new pairs, interleaved")
    args = ap.parse_args()
    print(f"default job (simulated, every model), --reps {args.reps} -j {args.jobs}; "
          f"old = {args.ref}, new = working tree; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'round':>5} {'side':>4} {'wall s':>8} {'units s':>8} {'units':>5}")
    sums = {"old": [0.0, 0.0], "new": [0.0, 0.0]}
    with checkout(args.ref) as old_tree, tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for side, tree in (("old", old_tree), ("new", None)):
                store = os.path.join(tmp, f"{side}-{r}.sqlite")
                wall, units, n = _job(tree, store, args.reps, args.jobs)
                sums[side][0] += wall
                sums[side][1] += units
                print(f"{r:>5} {side:>4} {wall:8.1f} {units:8.1f} {n:5d}", flush=True)
    (ow, ou), (nw, nu) = sums["old"], sums["new"]
    print(f"new / old: wall {nw / ow:.2f}, unit time {nu / ou:.2f}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
