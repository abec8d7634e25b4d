"""``compare --dry-run``'s wall-time estimate against the measured wall time of the same job.

Plans a job on an EMPTY store (so every unit's expected time is extrapolated: from the models'
``cost_hint``s scaled to this machine by the machine probe, ``mtlbench.runner.cost``), prints
the estimate and its source, then runs exactly that job with ``mtlbench compare`` in a fresh
process and prints measured / estimated (issue 23's target: within 30 %, i.e. 0.77-1.3).  With
``--no-probe`` the estimate is also printed as it was before the probe (hints unscaled), for the
side-by-side ratio.  The store is a temporary file, deleted afterwards.

    python benchmarks/bench_plan_estimate.py [--datasets synthetic-attributes] [--reps 2]
        [--models a,b] [--jobs 2]

The full paper-scale job is ``--reps 15`` (about half an hour on a 2-core machine); a few
repetitions measure the same per-unit times at a fraction of the cost.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mtlbench import api
from mtlbench.runner import cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="synthetic-attributes")
    ap.add_argument("--models", default=None)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "estimate.sqlite")
        plan = api.plan(args.datasets, args.models, reps=args.reps, seed=args.seed,
                        jobs=args.jobs, store=store, data_dir=args.data_dir)
        est = plan.estimate
        probe = cost.machine_probe_seconds()
        unscaled = est.seconds / cost.probed_machine_speed() if est.seconds else None
        print(f"machine probe: {probe:.4f} s (reference {cost.REFERENCE_PROBE_SECONDS} s: "
              f"speed factor x{cost.probed_machine_speed():.3f})")
        print(f"estimate: {est.text()}")
        cmd = [sys.executable, "-m", "mtlbench", "compare", "--datasets", args.datasets,
               "--reps", str(args.reps), "--seed", str(args.seed), "--jobs", str(args.jobs),
               "--timeout", "3600", "--store", store]
        if args.models:
            cmd += ["--models", args.models]
        if args.data_dir:
            cmd += ["--data-dir", args.data_dir]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        from mtlbench.store import ResultStore

        with ResultStore(store) as rs:
            unit_s = float(rs.unit_times()["time_total"].sum())
    print(f"{'':28s}{'wall s':>10s}{'compute s':>12s}{'measured/estimated':>20s}")
    print(f"{'measured (compare)':28s}{wall:10.1f}{unit_s:12.1f}")
    print(f"{'estimate (probe-scaled)':28s}{est.seconds:10.1f}{est.compute_seconds:12.1f}"
          f"{wall / est.seconds:20.2f}")
    if unscaled:
        print(f"{'estimate (hints unscaled)':28s}{unscaled:10.1f}"
              f"{est.compute_seconds / cost.probed_machine_speed():12.1f}"
              f"{wall / unscaled:20.2f}")
    print("target: measured/estimated within 0.77-1.30 (estimate within 30 %)")


if __name__ == "__main__":
    main()
