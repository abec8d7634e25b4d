"""Framework overhead: run `mtlbench compare` on the simulated data with few repetitions and
print units per second and the share of time spent fitting models vs. in the framework.

    python benchmarks/bench_framework.py [--reps 3] [--models stl,lasso]

Fitting time = model selection (grid fits + validation scoring) + the refit, as recorded per
unit in the store; framework time = everything else in the wall-clock run (planning, data
generation, splitting, test scoring, store writes, progress display).
"""
from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from mtlbench.cli import cli


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--models", default="stl,lasso")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "bench.sqlite")
        t0 = time.perf_counter()
        res = CliRunner().invoke(cli, ["compare", "--models", args.models, "--reps",
                                       str(args.reps), "--store", store])
        wall = time.perf_counter() - t0
        if res.exit_code != 0:
            raise SystemExit(res.output)
        con = sqlite3.connect(store)
        n, fit, unit = con.execute(
            "SELECT COUNT(*), SUM(time_select + time_fit), SUM(time_total) FROM units "
            "WHERE status = 'ok'").fetchone()
        t1 = time.perf_counter()
        res2 = CliRunner().invoke(cli, ["compare", "--models", args.models, "--reps",
                                        str(args.reps), "--store", store])
        resume_wall = time.perf_counter() - t1
    print(f"units: {n}   wall: {wall:.2f} s   units/s: {n / wall:.2f}")
    print(f"fitting (selection + refit): {fit:.2f} s = {100 * fit / wall:.1f}% of wall")
    print(f"inside units but not fitting (splits, scoring): {unit - fit:.2f} s = "
          f"{100 * (unit - fit) / wall:.1f}%")
    print(f"framework outside units (startup, data, store, display): {wall - unit:.2f} s = "
          f"{100 * (wall - unit) / wall:.1f}%")
    print(f"re-run of the same command (all {n} units skipped): {resume_wall:.2f} s")


if __name__ == "__main__":
    main()
