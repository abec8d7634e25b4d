"""Framework overhead per unit: the old in-process execution vs supervised worker processes.

    python benchmarks/bench_framework.py [--reps 6] [--models stl,lasso]

Runs the same units (fast models on the simulated data) twice, side by side, into fresh stores:

* **old (in-process)**: ``execute_unit`` in this very process and a store write per unit —
  what ``compare --jobs 1`` did before units were isolated (a segfault there killed the run);
* **new (supervised, -j 1)**: :func:`mtlbench.runner.run_units` with one supervised worker
  process (forkserver start, one spec out and one result back over a pipe per unit).

It prints wall time, units/s, the sum of the units' own times, the overhead per unit of each
and the ratio, and checks that both stores hold bit-identical test AUCs.  Process start-up
(forkserver with numpy/scipy/scikit-learn imported once, plus the worker's plugin registry) is
paid once per run and is included in the "new" wall time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import simulated_specs


def old_in_process(specs, store_path: Path) -> tuple[float, float, dict]:
    from mtlbench.runner import execute_unit
    from mtlbench.store import ResultStore

    store = ResultStore(store_path)
    t0 = time.perf_counter()
    for spec in specs:
        res = execute_unit(spec)
        store.write_unit(res.row, res.task_scores, res.arrays)
    wall = time.perf_counter() - t0
    df = store.units()
    store.close()
    return wall, float(df.time_total.sum()), dict(zip(df.key, df.test_auc))


def new_supervised(specs, store_path: Path, jobs: int = 1) -> tuple[float, float, dict]:
    from mtlbench.runner import run_units
    from mtlbench.store import ResultStore

    store = ResultStore(store_path)
    t0 = time.perf_counter()
    report = run_units(specs, store, jobs=jobs)
    wall = time.perf_counter() - t0
    assert report.failed == 0, [f.row["message"] for f in report.failures]
    df = store.units()
    store.close()
    return wall, float(df.time_total.sum()), dict(zip(df.key, df.test_auc))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--models", default="stl,lasso")
    ap.add_argument("--rounds", type=int, default=3, help="alternating old/new rounds")
    args = ap.parse_args()
    from mtlbench.runner import load_problem

    specs = simulated_specs(args.models.split(","), args.reps)
    load_problem("simulated", "simulated", None, specs[0].dataset_params_json)  # warm the cache
    n = len(specs)
    print(f"{n} units ({args.models} x {args.reps} reps on 'simulated'); "
          f"load average before: {os.getloadavg()[0]:.2f}")
    rows = {"old (in-process)": [], "new (supervised, -j 1)": []}
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            o = old_in_process(specs, Path(tmp) / f"old{r}.sqlite")
            w = new_supervised(specs, Path(tmp) / f"new{r}.sqlite")
            rows["old (in-process)"].append(o)
            rows["new (supervised, -j 1)"].append(w)
            same = same and o[2] == w[2]
    print(f"{'mode':<26} {'wall s (median)':>16} {'units/s':>8} {'unit time s':>12} "
          f"{'overhead/unit ms':>17}")
    over = {}
    for name, runs in rows.items():
        wall = statistics.median(x[0] for x in runs)
        unit = statistics.median(x[1] for x in runs)
        over[name] = 1000 * (wall - unit) / n
        print(f"{name:<26} {wall:16.2f} {n / wall:8.2f} {unit:12.2f} {over[name]:17.1f}")
    old_w = statistics.median(x[0] for x in rows["old (in-process)"])
    new_w = statistics.median(x[0] for x in rows["new (supervised, -j 1)"])
    for r in range(args.rounds):
        o, w = rows["old (in-process)"][r], rows["new (supervised, -j 1)"][r]
        print(f"  round {r + 1}: overhead/unit old {1000 * (o[0] - o[1]) / n:.1f} ms, new "
              f"{1000 * (w[0] - w[1]) / n:.1f} ms; wall new/old {w[0] / o[0]:.3f}"
              + ("  (forkserver start-up in this round)" if r == 0 else ""))
    print(f"new / old wall time (medians): {new_w / old_w:.3f}; extra overhead per unit: "
          f"{over['new (supervised, -j 1)'] - over['old (in-process)']:.1f} ms "
          "(includes the one-off worker start-up)")
    print(f"bit-identical test AUCs: {same}; load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
