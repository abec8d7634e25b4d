"""``compare --dry-run``'s estimate against the measured job: from an empty store, and for the
rest of the job once its first repetition is stored.

1. The job's first repetition is planned on an EMPTY store, so every unit's expected time is
   extrapolated (the models' ``cost_hint``s, scaled to this machine by the machine probe; on a
   problem of another kind than the hints' reference the estimate says UNCERTAIN:
   ``mtlbench.runner.cost``), then run with ``mtlbench compare --reps 1``.
2. The whole job (``--reps``) is planned on that store: the rest is estimated from the stored
   first repetition, then run.

For each phase it prints the estimate's text, and measured / estimated for the wall time
(``--jobs`` processes) and for the compute (the sum of the units' own times); the target for
phase 2 is within 30 % (0.77-1.30).  The store is a temporary file, deleted afterwards.  Times
depend on the machine's load (printed): run it on a quiet machine, under ``nice -n 5``.

    nice -n 5 python benchmarks/bench_plan_estimate.py
        [--datasets "synthetic-attributes[setting=noisy]/attr0"] [--reps 3] [--models a,b]
        [--jobs 2]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_code

from mtlbench import api
from mtlbench.runner import cost


def _phase(args, store: str, reps: int) -> tuple:
    """Plan ``reps`` repetitions on ``store``, run them; (estimate, wall s, compute s) of the
    units this phase ran."""
    from mtlbench.store import ResultStore

    plan = api.plan(args.datasets, args.models, reps=reps, seed=args.seed, jobs=args.jobs,
                    store=store, data_dir=args.data_dir)
    done = {s.key for s in plan.specs} - {s.key for s in plan.todo}
    cmd = ["-m", "mtlbench", "compare", "--datasets", args.datasets, "--reps", str(reps),
           "--seed", str(args.seed), "--jobs", str(args.jobs), "--timeout", "3600",
           "--store", store]
    if args.models:
        cmd += ["--models", args.models]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    t0 = time.perf_counter()
    proc = run_code(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"mtlbench compare failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    with ResultStore(store) as rs:
        units = rs.units()
    compute = float(units.loc[~units["key"].isin(done), "time_total"].sum())
    return plan.estimate, wall, compute


def _print(name: str, est, wall: float, compute: float) -> None:
    print(f"{name:34s}{wall:10.1f}{compute:12.1f}{est.seconds:14.1f}{est.compute_seconds:12.1f}"
          f"{wall / est.seconds:11.2f}{compute / est.compute_seconds:11.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="synthetic-attributes[setting=noisy]/attr0")
    ap.add_argument("--models", default=None)
    ap.add_argument("--reps", type=int, default=3, help="repetitions of the whole job (>= 2)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    if args.reps < 2:
        sys.exit("--reps must be at least 2 (the first repetition, then the rest)")

    print(f"machine probe: {cost.machine_probe_seconds():.4f} s (reference "
          f"{cost.REFERENCE_PROBE_SECONDS} s: speed factor x{cost.probed_machine_speed():.3f}); "
          "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "estimate.sqlite")
        first = _phase(args, store, 1)
        print(f"1. first repetition, empty store: {first[0].text()}")
        rest = _phase(args, store, args.reps)
        print(f"2. repetitions 1-{args.reps - 1}, the first stored: {rest[0].text()}")
    print(f"{'':34s}{'wall s':>10s}{'compute s':>12s}{'est. wall s':>14s}{'est. comp.':>12s}"
          f"{'wall m/e':>11s}{'comp. m/e':>11s}")
    _print("1. first repetition (empty store)", *first)
    _print("2. the rest (first stored)", *rest)
    print("target (2.): measured/estimated within 0.77-1.30 (estimate within 30 %); load "
          "average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
