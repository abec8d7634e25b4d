"""Fit times of NC-CMTL, VSTG-MTL and AMTL on the simulated data and at SUN scale.

SUN scale (TFCL paper, SUN attributes): T = 250 users, d = 2048 features, 50 labels per user.
We draw Gaussian item features and labels from a rank-5 linear model (sign of X w_t + noise),
which exercises the large-d code paths: NC-CMTL's n_t x n_t push-through solves, VSTG-MTL's
matrix-free CG loss system (dK and N both > 2500), AMTL's CG W-step.

Usage:  python benchmarks/bench_competitors_2.py [--skip-sun] [--sun-iters N]
Set OPENBLAS_NUM_THREADS=1 on a shared/overloaded machine (BLAS thread contention can slow
small products 100x).  Prints one line per (data, model): seconds, iterations, final objective.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from mtlbench import TaskSet
from mtlbench_datasets.simulated import make_low_rank_tasks, make_simulated
from mtlbench_models.amtl import AMTL
from mtlbench_models.nc_cmtl import NCCMTL
from mtlbench_models.vstgmtl import VSTGMTL


def sun_scale(seed: int = 0, T: int = 250, d: int = 2048, n: int = 50, rank: int = 5) -> TaskSet:
    return make_low_rank_tasks(seed, T=T, d=d, n=n, rank=rank, noise=0.5, name="sun-scale")


def run(label, model, tasks):
    t0 = time.perf_counter()
    model.fit(tasks)
    dt = time.perf_counter() - t0
    h = model.objective_history_
    print(f"{label:12s} {model.name:9s} {dt:8.2f} s  iters={model.n_iter_:3d}  "
          f"F0={h[0]:.5g}  F={h[-1]:.5g}  {getattr(model, 'diagnostics_', {}) if model.name == 'vstgmtl' else ''}",
          flush=True)
    return dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-sun", action="store_true")
    ap.add_argument("--sun-iters", type=int, default=None,
                    help="cap the outer iterations at SUN scale (default: the models' defaults)")
    a = ap.parse_args()
    sim = make_simulated(0)
    print(f"simulated: T={sim.T} d={sim.d} n_t=200")
    for m in (NCCMTL(mu=10.0), VSTGMTL(gamma1=0.01, mu=0.01), AMTL(lam=1.0, mu=0.1)):
        run("simulated", m, sim)
    if a.skip_sun:
        return
    sun = sun_scale()
    print(f"SUN scale: T={sun.T} d={sun.d} n_t=50")
    extra = {} if a.sun_iters is None else {"max_iter": a.sun_iters}
    for m in (NCCMTL(mu=10.0, **extra), VSTGMTL(gamma1=0.01, mu=0.01, **extra),
              AMTL(lam=1.0, mu=0.1, **extra)):
        run("sun-scale", m, sun)


if __name__ == "__main__":
    main()
