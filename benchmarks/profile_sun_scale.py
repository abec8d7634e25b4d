"""Where the SUN-scale time of the models that miss issue 13's 30 s target goes.

At SUN scale (``make_low_rank_tasks(0, T=250, d=2048, n=50, rank=5, noise=0.5)``: 250 users x
50 labels x 2,048 features, 205 MB of float64 data) a solver's time is (number of passes over
the data it needs) x (time of one pass).  This script measures both:

1. the time of one pass on this machine, one BLAS thread: a plain read of the data
   (``sum``), the forward pass X_t w_t for every task and the backward pass X_t^T r_t
   (median of 15 each);
2. per model (RAMUSA, CoCMTL, VSTG-MTL at the points of ``bench_competitors_1.py`` /
   ``bench_competitors_2.py``): the fit time, its iterations, and a cProfile of the fit
   (the functions with the largest own time), so that the share of time spent in passes
   over the data can be read off.

Usage:
    OPENBLAS_NUM_THREADS=1 python benchmarks/profile_sun_scale.py [--models ramusa,cocmtl,vstgmtl]
A few minutes per model; run it on an otherwise idle machine (memory bandwidth is shared).
"""
from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import sun_scale
from bench_competitors_1 import MODELS  # (module, class, point) of RAMUSA, CoCMTL
from bench_competitors_2 import POINT  # VSTG-MTL's point


def model_point(name: str):
    """(class, hyperparameters) at the point the other benchmark scripts time."""
    if name == "vstgmtl":
        from mtlbench_models.vstgmtl import VSTGMTL
        return VSTGMTL, POINT["vstgmtl"]
    module, cls_name, params = MODELS[name]
    return getattr(importlib.import_module(f"mtlbench_models.{module}"), cls_name), params


def median_time(fn, repeat=15):
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def pass_times(tasks):
    X = np.stack([np.asarray(tasks.X(t), dtype=np.float64) for t in range(tasks.T)])  # T x n x d
    w = np.random.default_rng(0).standard_normal((tasks.T, tasks.d, 1))
    r = np.random.default_rng(1).standard_normal((tasks.T, X.shape[1], 1))
    mb = X.nbytes / 1e6
    t_read = median_time(lambda: X.sum())
    t_fwd = median_time(lambda: np.matmul(X, w))
    t_bwd = median_time(lambda: np.matmul(X.transpose(0, 2, 1), r))
    print(f"data {X.shape[0]} x {X.shape[1]} x {X.shape[2]} float64 = {mb:.0f} MB")
    print(f"one pass: read {1e3 * t_read:.1f} ms ({mb / t_read / 1e3:.1f} GB/s), forward X_t w_t "
          f"{1e3 * t_fwd:.1f} ms, backward X_t^T r_t {1e3 * t_bwd:.1f} ms", flush=True)
    return t_fwd, t_bwd


def profile_fit(name, tasks, top=8):
    cls, params = model_point(name)
    cls(**params, max_iter=1).fit(tasks)            # per-TaskSet caches, as in a search
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    m = cls(**params).fit(tasks)
    prof.disable()
    dt = time.perf_counter() - t0
    diag = {k: v for k, v in getattr(m, "diagnostics_", {}).items()
            if isinstance(v, (int, float, bool))}
    print(f"\n== {name} {params}: {dt:.1f} s (target 30 s), n_iter {m.n_iter_}, converged "
          f"{m.converged_}, {diag}")
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    print("\n".join(lines[start:start + top + 1]), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="ramusa,cocmtl,vstgmtl")
    a = ap.parse_args()
    tasks = sun_scale(0)
    pass_times(tasks)
    for name in a.models.split(","):
        profile_fit(name, tasks)


if __name__ == "__main__":
    main()
