"""Fit times of rMTFL, RAMUSA and CoCMTL (issue 4) on the simulated data and at SUN scale.

    python benchmarks/bench_competitors_1.py            # simulated + SUN scale, default params
    python benchmarks/bench_competitors_1.py --quick    # simulated only

SUN scale: T = 250 users, d = 2048 features, 50 labels per user; Gaussian features, labels
from the sign (median split) of a rank-5 linear model plus noise.  Each model is fitted once at
its default hyperparameters (the centre of its search grid), from a cold start.  Printed:
seconds per fit, iterations, seconds per iteration, and the final objective.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# One BLAS thread per process unless told otherwise (--threads): on a shared 2-core machine,
# OpenBLAS threads spinning against other processes made small eigh/svd calls ~100x slower.
if __name__ == "__main__":
    _t = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), "1")
    for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_v, _t)

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "plugins"), str(ROOT / "datasets")]

from mtlbench import TaskSet  # noqa: E402
from mtlbench_datasets.simulated import make_low_rank_tasks, make_simulated  # noqa: E402
from mtlbench_models.cocmtl import CoCMTL  # noqa: E402
from mtlbench_models.ramusa import RAMUSA  # noqa: E402
from mtlbench_models.rmtfl import RMTFL  # noqa: E402


def sun_scale(seed: int = 0, T: int = 250, d: int = 2048, n: int = 50, rank: int = 5) -> TaskSet:
    return make_low_rank_tasks(seed, T=T, d=d, n=n, rank=rank, noise=0.1, name="sun-scale")


def bench(tasks: TaskSet, models) -> None:
    print(f"\n{tasks!r}")
    print(f"{'model':<8} {'seconds':>9} {'iters':>7} {'ms/iter':>9} {'objective':>14}  notes")
    for m in models:
        t0 = time.perf_counter()
        m.fit(tasks)
        dt = time.perf_counter() - t0
        it = max(int(m.n_iter_), 1)
        notes = ""
        if hasattr(m, "n_stages_"):
            notes = f"stages={m.n_stages_} rank={m.rank_}"
        if hasattr(m, "task_outliers_"):
            notes = f"outliers={int(m.task_outliers_.sum())} shared_rows={int(m.shared_features_.sum())}"
        print(f"{m.name:<8} {dt:9.2f} {it:7d} {1e3 * dt / it:9.2f} "
              f"{m.objective_history_[-1]:14.6g}  {notes}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="simulated data only")
    ap.add_argument("--threads", default="1", help="BLAS threads (--threads=N; default 1)")
    args = ap.parse_args()
    print(f"BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}, load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    models = lambda: [RMTFL(), RAMUSA(), CoCMTL()]  # noqa: E731
    bench(make_simulated(0), models())
    if not args.quick:
        bench(sun_scale(), models())


if __name__ == "__main__":
    main()
