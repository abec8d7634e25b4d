"""VSTG-MTL over several points of its search space, old vs new: time, outer iterations,
objective (old vs new, relative difference), validation AUC, convergence.

One point (``bench_competitors_2.py``) says little for this model: it is non-convex, and the
number of outer iterations depends on the path the iterates take, which any change of the solver
alters.  This script fits both implementations at the same points, side by side (old then new
at each point), on design data no published table uses, and prints per point and in summary the
fit time (wall and CPU seconds, one fit each), the outer iterations, the objective (one function
for both: ``vstg_objective``) and its relative difference (new - old) / old, and the validation
AUC.  "old" is ``plugins/mtlbench_models/vstgmtl.py`` and the shared ``_prox.py`` it imports at
git ref ``--ref`` (default ``main``).

Data (``--data``):
  ``simulated``  ``make_simulated(seed=101)``, protocol split rep 0 (100 tasks x 136 x 80), the 8
                 points below; issue-23 target: <= 0.3 s median per fit.
  ``attributes`` ``synthetic-attributes[seed=101]``, attribute attr0, split rep 0 (190 tasks x
                 ~34 x 100, the paper's Shoes scale), the 12 points below.

Usage:  OMP_NUM_THREADS=1 python benchmarks/bench_vstgmtl.py [--ref REF] [--data simulated]
                                                             [--repeat N] [--sun]
``--repeat N`` fits each point N times, old and new alternating in turn (old first in odd rounds,
new first in even ones), and reports the fastest of the N per point (default 1: one fit each,
old then new; that first fit of each code also builds its data pieces, ``_Problem``).
``--sun`` adds one fit each at SUN scale (``make_low_rank_tasks(0, T=250, d=2048, n=50)``, the
point of ``bench_competitors_2.py``; a few minutes).
Timing is noisy on a shared machine: compare the ratios within one run, and the medians.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_competitors_2 import POINT, old_module, sun_scale

from mtlbench.protocol import ProtocolConfig, evaluable_tasks, make_split, mean_auc, restrict_tasks
from mtlbench_datasets.simulated import make_simulated
from mtlbench_models import vstgmtl as new

REF = "main"
#: (gamma1, gamma2, mu, n_bases, k).  simulated: points the searches selected or visited there
#: (k = 3); attributes: the 12-point starting design of the default search (rule version 4) on
#: this problem, which spans the declared start ranges
POINTS = {"simulated": [(0.1, 0.1, 1.0, 20, 3), (0.0316, 0.01, 1.0, 28, 3), (0.1, 0.01, 1.0, 40, 3),
                        (0.1, 0.316, 0.316, 20, 3), (0.01, 0.01, 0.1, 10, 3),
                        (0.1, 0.01, 0.1, 20, 3),
                        (0.01, 0.01, 1.0, 10, 3), (0.1, 0.001, 0.0316, 40, 3)],
          "attributes": [(0.01, 0.00152, 0.351, 8, 1), (0.0152, 0.00351, 1.87, 16, 2),
                         (0.0231, 0.00811, 10.0, 6, 3), (0.0351, 0.0187, 0.231, 11, 5),
                         (0.0534, 0.0433, 1.23, 20, 1), (0.0811, 0.1, 6.58, 7, 2),
                         (0.123, 0.001, 0.152, 14, 3), (0.187, 0.00231, 0.811, 5, 4),
                         (0.285, 0.00534, 4.33, 9, 1), (0.433, 0.0123, 0.1, 18, 2),
                         (0.658, 0.0285, 0.534, 6, 2), (1.0, 0.0658, 2.85, 12, 4)]}


def design_data(name: str):
    """(train, validation) TaskSets of the design data ``name``."""
    if name == "simulated":
        ts = make_simulated(101)
    else:
        from mtlbench.plugins import get_registry
        ts = get_registry().dataset("synthetic-attributes[seed=101]").load("attr0")
        ts = restrict_tasks(ts, evaluable_tasks(ts)[0])
    sp = make_split(ts, ProtocolConfig(), 0)
    return (ts.subset(sp.train, name=f"{name}[train]", meta={}),
            ts.subset(sp.val, name=f"{name}[val]", meta={}))


def fit_timed(cls, params, tasks):
    """(wall s, CPU s, fitted model)."""
    m = cls(**params)
    w0, c0 = time.perf_counter(), time.process_time()
    m.fit(tasks)
    return time.perf_counter() - w0, time.process_time() - c0, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default=REF, help="git ref of the old implementation")
    ap.add_argument("--data", default="simulated", choices=sorted(POINTS))
    ap.add_argument("--repeat", type=int, default=1,
                    help="fits per point and code, interleaved; the fastest is reported")
    ap.add_argument("--sun", action="store_true", help="also one fit each at SUN scale")
    a = ap.parse_args()
    old = old_module("vstgmtl", a.ref, helpers=("_prox",))
    tr, va = design_data(a.data)
    prob = new._Problem(tr)
    print(f"{a.data} (seed 101, split rep 0): {tr.T} tasks, d = {tr.d}; old = {a.ref}; "
          f"fastest of {max(1, a.repeat)} interleaved fit(s) per point")
    print(f"{'gamma1':>7s} {'gamma2':>7s} {'mu':>7s} {'K':>3s} {'k':>2s} | "
          f"{'new s':>6s} {'old s':>6s} "
          f"{'cpu new':>7s} {'cpu old':>7s} | {'it new':>6s} {'it old':>6s} | {'F new':>11s} "
          f"{'F old':>11s} {'rel dF':>9s} | {'AUC new':>7s} {'AUC old':>7s} conv new/old")
    rows = []
    for g1, g2, mu, K, k in POINTS[a.data]:
        p = dict(gamma1=g1, gamma2=g2, mu=mu, n_bases=K, k=k)
        best = {}
        for r in range(max(1, a.repeat)):
            for label, mod in (("old", old), ("new", new)) if r % 2 == 0 else (("new", new),
                                                                            ("old", old)):
                w, c, m = fit_timed(mod.VSTGMTL, p, tr)
                bw, bc, _ = best.get(label, (w, c, m))
                best[label] = (min(w, bw), min(c, bc), m)
        wo, co, mo = best["old"]
        wn, cn, mn = best["new"]
        kk = mn.diagnostics_["k"]
        F = lambda m: new.vstg_objective(prob, m.U_, m.V_, mn.gamma1_, mn.gamma2_, mn.mu_, kk)
        fn, fo = F(mn), F(mo)
        an, ao = mean_auc(mn, va)[0], mean_auc(mo, va)[0]
        rows.append((wn, wo, cn, co, (fn - fo) / abs(fo), mn.converged_, mo.converged_))
        print(f"{g1:7.4g} {g2:7.4g} {mu:7.4g} {K:3d} {k:2d} | "
              f"{wn:6.2f} {wo:6.2f} {cn:7.2f} {co:7.2f} | "
              f"{mn.n_iter_:6d} {mo.n_iter_:6d} | {fn:11.4f} {fo:11.4f} {rows[-1][4]:+9.2e} | "
              f"{an:7.4f} {ao:7.4f} {mn.converged_}/{mo.converged_}", flush=True)
    wn, wo, cn, co, rel, conv_n, conv_o = (list(c) for c in zip(*rows))
    med = statistics.median
    print(f"median fit: new {med(wn):.2f} s, old {med(wo):.2f} s, ratio {med(wo) / med(wn):.1f} "
          f"(CPU: new {med(cn):.2f} s, old {med(co):.2f} s, ratio {med(co) / med(cn):.1f}); total: "
          f"new {sum(wn):.1f} s, old {sum(wo):.1f} s, ratio {sum(wo) / sum(wn):.1f}"
          + ("; issue-23 target <= 0.3 s median" if a.data == "simulated" else ""))
    print(f"objective (new - old) / old: min {min(rel):+.2e}, median {med(rel):+.2e}, max "
          f"{max(rel):+.2e}; new lower or within 1e-6 at {sum(r <= 1e-6 for r in rel)} of "
          f"{len(rel)} points; not converged: new {conv_n.count(False)}, old {conv_o.count(False)}")
    if a.sun:
        tasks = sun_scale(0)
        p = POINT["vstgmtl"]
        for label, mod in (("new", new), ("old", old)):
            w, c, m = fit_timed(mod.VSTGMTL, p, tasks)
            print(f"SUN scale {label}: {w:.1f} s, {m.n_iter_} outer iterations, converged "
                  f"{m.converged_}, U-step its {m.diagnostics_['u_iters']}, V-step its "
                  f"{m.diagnostics_['fista_iters']}", flush=True)


if __name__ == "__main__":
    main()
