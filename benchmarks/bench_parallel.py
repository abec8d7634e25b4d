"""Throughput of the simulated-data grid: ``-j 1`` vs ``-j 2`` vs a 2-worker Dask LocalCluster.

All three run the same units (models x repetitions on the TFCL paper's simulated data, every
unit with its full hyperparameter search) side by side in one process, each into a fresh
results store, and the script prints units per second and the ratios to the serial run.
It also checks that the three stores hold identical test AUCs.

    python benchmarks/bench_parallel.py                  # stl + lasso, 6 repetitions
    python benchmarks/bench_parallel.py --models stl,lasso,rmtfl --reps 4

Every local unit runs in a supervised worker process (serial runs too), so ``-j 1`` vs ``-j 2``
compares the same machinery.  Timings include what a user pays: starting the worker processes,
Dask shipping the
data to the workers.  The LocalCluster's own start-up is reported separately (a real cluster
is started once and reused).  The last column (sum of the units' own run times) separates
per-unit compute from start-up and scheduling overhead.  Speed-ups are bounded by the number
of cores (2 here) and by how busy the machine is; the load average is printed with them.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from _common import simulated_specs


def _run(specs, store_path: Path, **kw) -> tuple[float, dict]:
    from mtlbench.runner import run_units
    from mtlbench.store import ResultStore

    store = ResultStore(store_path)
    t0 = time.perf_counter()
    report = run_units(specs, store, **kw)
    seconds = time.perf_counter() - t0
    if report.failed:
        raise SystemExit(f"{report.failed} unit(s) failed: "
                         f"{[f.row['message'] for f in report.failures[:3]]}")
    df = store.units()
    aucs = dict(zip(df["key"], df["test_auc"]))
    store.close()
    return seconds, aucs, float(df["time_total"].sum())


def _burn(n: int) -> float:
    t0 = time.perf_counter()
    s = 0
    for i in range(n):
        s += i * i
    return time.perf_counter() - t0


def ceiling(n: int = 4_000_000) -> float:
    """How much faster 2 processes burn 2 pure-Python loops than 1 process: the most any
    2-way parallel run can gain on this machine right now (other load included)."""
    import multiprocessing as mp

    t0 = time.perf_counter()
    _burn(n), _burn(n)
    serial = time.perf_counter() - t0
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(_burn, [1000, 1000])  # start-up not measured
        t0 = time.perf_counter()
        pool.map(_burn, [n, n])
        par = time.perf_counter() - t0
    return serial / par


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="stl,lasso")
    ap.add_argument("--reps", type=int, default=6)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from distributed import LocalCluster

    from mtlbench.runner import load_problem

    specs = simulated_specs(args.models.split(","), args.reps)
    load_problem("simulated", "simulated", None, specs[0].dataset_params_json)  # warm the cache
    n = len(specs)
    print(f"{n} units: models {args.models} x {args.reps} repetitions on 'simulated'; "
          f"{os.cpu_count()} CPU(s); load average before: {os.getloadavg()[0]:.2f}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t_serial, a1, u1 = _run(specs, tmp / "serial.sqlite", jobs=1)
        ceil_before = ceiling()
        rows.append(("serial (-j 1)", t_serial, u1))
        t_jobs, a2, u2 = _run(specs, tmp / "jobs2.sqlite", jobs=2)
        rows.append(("supervised processes (-j 2)", t_jobs, u2))
        t0 = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster:
            t_start = time.perf_counter() - t0
            t_dask, a3, u3 = _run(specs, tmp / "dask.sqlite", scheduler=cluster.scheduler_address)
        rows.append(("Dask LocalCluster (2 workers x 1 thread)", t_dask, u3))
    same = a1 == a2 == a3
    ceil = ceiling()
    print(f"{'mode':<42} {'seconds':>8} {'units/s':>8} {'speed-up vs serial':>19} "
          f"{'sum of unit times (s)':>22}")
    for name, sec, unit_sec in rows:
        print(f"{name:<42} {sec:8.2f} {n / sec:8.2f} {t_serial / sec:19.2f} {unit_sec:22.2f}")
    print(f"Dask LocalCluster start-up (not included above): {t_start:.2f} s; "
          f"including it the speed-up is {t_serial / (t_dask + t_start):.2f}")
    print(f"machine ceiling (2 processes running 2 CPU-bound loops vs 1), measured in this run: "
          f"{ceil_before:.2f}x before -j 2, {ceil:.2f}x after; -j 2 reached "
          f"{t_serial / t_jobs:.2f}x = {100 * (t_serial / t_jobs) / max(ceil_before, ceil):.0f}% "
          "of the ceiling (target: -j 2 >= 1.8x on the default job)")
    print(f"identical test AUCs in the three stores: {same}; "
          f"load average after: {os.getloadavg()[0]:.2f}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
