"""VSTG-MTL over several points of its search space, old vs new: time, outer iterations,
objective, validation AUC.

One point (``bench_competitors_2.py``) says little for this model: it is non-convex, and the
number of outer alternations (60-300 on the simulated data) depends on the path the iterates
take, which any change of the solver alters.  This script fits both implementations at the
same 8 points on the design data of the model docstring (``make_simulated(seed=101)``, protocol
split rep 0: no published table uses it) and prints per point and in total the fit time (one
fit each, the two side by side), the outer iterations, the objective (one function for both)
and the validation AUC.  "old" is ``plugins/mtlbench_models/vstgmtl.py`` at git ref ``--ref``
(default: the tree before the 2026-11-26 V-step and extrapolation change).

Usage:  OPENBLAS_NUM_THREADS=1 python benchmarks/bench_vstgmtl.py [--ref REF] [--sun]
``--sun`` adds one fit each at SUN scale (``make_low_rank_tasks(0, T=250, d=2048, n=50)``, the
point of ``bench_competitors_2.py``; a few minutes).  Issue-13 targets: <= 0.3 s per fit on a
simulated training split, <= 30 s at SUN scale.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_competitors_2 import POINT, old_module, sun_scale, timed  # noqa: E402

from mtlbench.protocol import ProtocolConfig, make_split, mean_auc  # noqa: E402
from mtlbench_datasets.simulated import make_simulated  # noqa: E402
from mtlbench_models import vstgmtl as new  # noqa: E402

REF = "f9cec50"
#: (gamma1, gamma2, mu, n_bases), k = 3: points the searches selected or visited on simulated data
POINTS = [(0.1, 0.1, 1.0, 20), (0.0316, 0.01, 1.0, 28), (0.1, 0.01, 1.0, 40),
          (0.1, 0.316, 0.316, 20), (0.01, 0.01, 0.1, 10), (0.1, 0.01, 0.1, 20),
          (0.01, 0.01, 1.0, 10), (0.1, 0.001, 0.0316, 40)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default=REF, help="git ref of the old implementation")
    ap.add_argument("--sun", action="store_true", help="also one fit each at SUN scale")
    a = ap.parse_args()
    old = old_module("vstgmtl", a.ref)
    ts = make_simulated(101)
    sp = make_split(ts, ProtocolConfig(), 0)
    tr = ts.subset(sp.train, name="seed101[train]", meta={})
    va = ts.subset(sp.val, name="seed101[val]", meta={})
    prob = new._Problem(tr)
    F = lambda m: new.vstg_objective(prob, m.U_, m.V_, m.gamma1_, m.gamma2_, m.mu_,
                                     m.diagnostics_["k"])
    print(f"{'gamma1':>7s} {'gamma2':>7s} {'mu':>7s} {'K':>3s} | {'new s':>6s} {'old s':>6s} "
          f"{'it new':>6s} {'it old':>6s} | {'F new':>10s} {'F old':>10s} | {'AUC new':>7s} "
          f"{'AUC old':>7s} conv")
    tot = {"new": [0.0, 0, 0.0], "old": [0.0, 0, 0.0]}
    times = {"new": [], "old": []}
    for g1, g2, mu, K in POINTS:
        p = dict(gamma1=g1, gamma2=g2, mu=mu, n_bases=K, k=3)
        row = {}
        for label, mod in (("new", new), ("old", old)):
            dt, m = timed(lambda: mod.VSTGMTL(**p), tr, 1)
            auc = mean_auc(m, va)[0]
            row[label] = (m, dt, auc)
            tot[label][0] += dt
            times[label].append(dt)
            tot[label][1] += m.n_iter_
            tot[label][2] += auc
        (mn, tn, an), (mo, to, ao) = row["new"], row["old"]
        print(f"{g1:7.4g} {g2:7.4g} {mu:7.4g} {K:3d} | {tn:6.2f} {to:6.2f} {mn.n_iter_:6d} "
              f"{mo.n_iter_:6d} | {F(mn):10.2f} {F(mo):10.2f} | {an:7.4f} {ao:7.4f} "
              f"{mn.converged_}/{mo.converged_}", flush=True)
    n = len(POINTS)
    print(f"total: new {tot['new'][0]:.2f} s, old {tot['old'][0]:.2f} s, ratio "
          f"{tot['old'][0] / tot['new'][0]:.2f}; outer iterations new {tot['new'][1]}, old "
          f"{tot['old'][1]}; mean validation AUC new {tot['new'][2] / n:.4f}, old "
          f"{tot['old'][2] / n:.4f}; median fit new {statistics.median(times['new']):.2f} s, old "
          f"{statistics.median(times['old']):.2f} s (target <= 0.3 s)")
    if a.sun:
        tasks = sun_scale(0)
        p = POINT["vstgmtl"]
        for label, mod in (("new", new), ("old", old)):
            dt, m = timed(lambda: mod.VSTGMTL(**p), tasks, 1)
            print(f"SUN scale {label}: {dt:.1f} s, {m.n_iter_} outer iterations, converged "
                  f"{m.converged_}, U-step its {m.diagnostics_['u_iters']}, V-step its "
                  f"{m.diagnostics_['fista_iters']} (target 30 s)", flush=True)


if __name__ == "__main__":
    main()
