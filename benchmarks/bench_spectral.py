"""RAMUSA, CoCMTL and NC-CMTL per fit at the paper's scale: time, convergence and objective,
old code vs new, side by side in one process.

Data: the training split (rep 0 of the protocol) of ``synthetic-attributes`` attr0 (Shoes scale:
~190 tasks x ~34 training rows, d = 100), the problem the paper-scale unit fits 20 times.
"old" is ``plugins/mtlbench_models/<model>.py`` at git ref ``--ref`` (default ``main``),
imported from a temporary copy (it shares the working tree's ``_*.py`` helpers, which this
round only extends); "new" is the working tree.  Both are fitted cold at the SAME
hyperparameters and both final points are scored by the SAME function (the new module's
objective; for RAMUSA with the old fit's lam and theta, so that both points are scored on one
capped objective).  Points: each model's starting grid plus points 10-100x beyond it (the wider
ranges the issue-24 search will visit).  The models are non-convex except RAMUSA's stages:
"rel dF" = (F new - F old) / |F old| (negative: new is lower) is the spread between two local
solvers started at the same point.

Usage:
    OMP_NUM_THREADS=1 python benchmarks/bench_spectral.py [--ref main] \
        [--models ramusa,cocmtl,nc-cmtl]
            [--problem attr0] [--quick]
Timing is noisy on a shared machine: compare the ratios within one run, and the medians.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

REPO = Path(__file__).resolve().parents[1]
MODULE = {"ramusa": ("ramusa", "RAMUSA"), "cocmtl": ("cocmtl", "CoCMTL"),
          "nc-cmtl": ("nc_cmtl", "NCCMTL")}
POINTS = {
    "ramusa": [dict(lam_ratio=a, theta_ratio=b) for a in (0.1, 0.2, 0.4) for b in (0.25, 0.5, 1.0)]
    + [dict(lam_ratio=0.01, theta_ratio=0.5), dict(lam_ratio=0.03, theta_ratio=0.1),
       dict(lam_ratio=0.9, theta_ratio=0.25), dict(lam_ratio=0.2, theta_ratio=0.03)],
    "cocmtl": [dict(lam1_ratio=a, lam2_ratio=b, k=5)
               for a in (0.3, 3.0, 30.0) for b in (0.3, 3.0, 30.0)]
    + [dict(lam1_ratio=0.01, lam2_ratio=0.01, k=5), dict(lam1_ratio=0.03, lam2_ratio=3.0, k=2),
       dict(lam1_ratio=3000.0, lam2_ratio=3000.0, k=10),
       dict(lam1_ratio=3.0, lam2_ratio=0.003, k=1)],
    "nc-cmtl": [dict(mu=m) for m in (1.0, 10.0, 100.0, 0.01, 0.1, 1e3, 1e4)],
}
QUICK = {"ramusa": [0, 4, 3, 9], "cocmtl": [0, 4, 8, 9], "nc-cmtl": [0, 1, 2, 3]}


def old_module(name: str, ref: str):
    """``plugins/mtlbench_models/<name>.py`` as committed at ``ref``, imported under
    ``mtlbench_models._old_<name>`` (its relative imports resolve to the working tree's helpers)."""
    src = subprocess.run(["git", "-C", str(REPO), "show",
                          f"{ref}:plugins/mtlbench_models/{name}.py"],
                         check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="bench-spectral-")) / f"old_{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"mtlbench_models._old_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "mtlbench_models"
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def objective(model: str, fitted, ref_fit, tasks) -> float:
    """The model's objective at ``fitted``'s point, with ``ref_fit``'s data-derived weights."""
    if model == "ramusa":
        from mtlbench_models._losses import SquaredLoss
        from mtlbench_models.ramusa import capped_penalty
        s = np.linalg.svd(fitted.coef_, compute_uv=False)
        return (SquaredLoss(tasks).value(fitted.coef_)
                + ref_fit.lam_ * capped_penalty(s, ref_fit.theta_))
    if model == "cocmtl":
        from mtlbench_models._losses import SquaredLoss
        from mtlbench_models.cocmtl import mean_reg_penalty
        s = np.linalg.svd(fitted.Q_, compute_uv=False)
        return (SquaredLoss(tasks).value(fitted.P_ + fitted.Q_)
                + ref_fit.lam1_ * mean_reg_penalty(fitted.P_)
                + ref_fit.lam2_ * float(np.sum(s[int(ref_fit.k):] ** 2)))
    from mtlbench_models.nc_cmtl import nc_cmtl_objective
    return nc_cmtl_objective([tasks.X(t) for t in range(tasks.T)],
                             [tasks.y(t) for t in range(tasks.T)],
                             fitted.coef_, float(fitted.mu), float(fitted.q), float(fitted.s))


def training_split(problem: str):
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig, evaluable_tasks, make_split, restrict_tasks
    tasks = get_registry().dataset("synthetic-attributes").load(problem)
    tasks = restrict_tasks(tasks, evaluable_tasks(tasks)[0])
    split = make_split(tasks, ProtocolConfig(), 0)
    return tasks.subset(split.train, name=f"{tasks.name}[train]", meta={})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="main")
    ap.add_argument("--models", default="ramusa,cocmtl,nc-cmtl")
    ap.add_argument("--problem", default="attr0")
    ap.add_argument("--quick", action="store_true", help="four points per model")
    args = ap.parse_args()
    import importlib
    train = training_split(args.problem)
    print(f"{train.name}: {train.T} tasks, d = {train.d}; old = {args.ref}; one BLAS thread")
    print(f"{'model':8s} {'point':44s} {'old s':>7s} {'new s':>7s} {'ratio':>6s} {'it old':>6s} "
          f"{'it new':>6s} {'conv o/n':>9s} {'F old':>13s} {'rel dF':>9s}")
    for model in args.models.split(","):
        mod_name, cls_name = MODULE[model]
        Old = getattr(old_module(mod_name, args.ref), cls_name)
        New = getattr(importlib.import_module(f"mtlbench_models.{mod_name}"), cls_name)
        points = POINTS[model]
        if args.quick:
            points = [points[i] for i in QUICK[model]]
        t_old, t_new, rel = [], [], []
        for p in points:
            with threadpool_limits(limits=1):
                t0 = time.perf_counter()
                o = Old(**p).fit(train)
                t1 = time.perf_counter()
                n = New(**p).fit(train)
                t2 = time.perf_counter()
            F_o, F_n = objective(model, o, o, train), objective(model, n, o, train)
            t_old.append(t1 - t0), t_new.append(t2 - t1), rel.append((F_n - F_o) / abs(F_o))
            label = ", ".join(f"{k}={v:g}" for k, v in p.items())
            print(f"{model:8s} {label:44s} {t1 - t0:7.2f} {t2 - t1:7.2f} "
                  f"{(t1 - t0) / (t2 - t1):6.1f} {o.n_iter_:6d} {n.n_iter_:6d} "
                  f"{str(o.converged_)[0]}/{str(n.converged_)[0]:>7s} "
                  f"{F_o:13.6g} {rel[-1]:9.1e}", flush=True)
        med_old, med_new = statistics.median(t_old), statistics.median(t_new)
        print(f"{model:8s} {'median / sum':44s} {med_old:7.2f} {med_new:7.2f} "
              f"{med_old / med_new:6.1f}   sums {sum(t_old):.1f} s / "
              f"{sum(t_new):.1f} s; rel dF in [{min(rel):.1e}, {max(rel):.1e}]")


if __name__ == "__main__":
    main()
