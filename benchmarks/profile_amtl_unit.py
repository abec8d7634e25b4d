"""Where one AMTL unit's time goes at the paper's scale: per search fit and per function.

One unit = the default search (adaptive, 20 fits) + the refit, one repetition of one attribute
of ``synthetic-attributes`` (Shoes scale), one BLAS thread, as ``bench_paper_scale.py`` runs
it, but under cProfile.  Printed:

1. per fit of the unit (in the order the search made them; the refit last): (lam, mu), CPU
   seconds, outer iterations, converged (and by which rule), Levenberg-Marquardt steps,
   their inner CG iterations, rejected steps and hand-backs, block-coordinate CG iterations;
2. the functions with the largest own time and the largest cumulative time.

It answers issue 23's "a profile showing why it cannot go lower": which fits and which
phase (block iterations or the LM phase's inner solves) the unit's seconds are.

    OMP_NUM_THREADS=1 python benchmarks/profile_amtl_unit.py [--problem attr6] [--rep 0]
        [--dataset-params seed=101] [--top 15]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from threadpoolctl import threadpool_limits

from mtlbench.dataset import load_tasks
from mtlbench.plugins import get_registry
from mtlbench.protocol import ProtocolConfig, run_protocol


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="attr6")
    ap.add_argument("--rep", type=int, default=0)
    ap.add_argument("--dataset-params", default="")
    ap.add_argument("--top", type=int, default=15,
                    help="functions listed per table (0: the per-fit table only)")
    args = ap.parse_args()

    reg = get_registry()
    sel = "synthetic-attributes" + (f"[{args.dataset_params}]" if args.dataset_params else "")
    ds = reg.dataset(sel)
    tasks = load_tasks(ds, args.problem, None)
    cls = reg.model_class("amtl")
    fits: list[dict] = []
    original_fit = cls.fit

    def recording_fit(self, tasks_, init=None):
        t0 = time.process_time()
        out = original_fit(self, tasks_, init)
        dg = self.diagnostics_
        fits.append({"lam": self.lam, "mu": self.mu, "cpu": time.process_time() - t0,
                     "iters": self.n_iter_, "conv": self.converged_, "by": dg["converged_by"],
                     "lm": dg["gauss_newton_steps"], "lm_cg": dg["gauss_newton_cg_iters"],
                     "rej": dg["gauss_newton_rejected"], "exits": dg["gauss_newton_exits"],
                     "cg": dg["cg_iters"]})
        return out

    cls.fit = recording_fit
    prof = cProfile.Profile()
    try:
        with threadpool_limits(limits=1):
            t0 = time.perf_counter()
            prof.enable()
            out = run_protocol(cls(), dict(cls.search_space), tasks, ProtocolConfig(), args.rep)
            prof.disable()
            wall = time.perf_counter() - t0
    finally:
        cls.fit = original_fit
    total = sum(f["cpu"] for f in fits)
    print(f"{sel}/{args.problem} rep {args.rep}: {tasks.T} tasks, d = {tasks.d}; unit "
          f"{wall:.2f} s under cProfile (fits {total:.2f} CPU s); selected {out.best_params}, "
          f"test AUC {100 * out.test_auc:.2f}")
    print(f"{'lam':>8s}{'mu':>8s}{'CPU s':>8s}{'share':>7s}{'iters':>7s}{'conv':>6s}"
          f"{'LM':>5s}{'LM cg':>7s}{'rej':>5s}{'exit':>5s}{'bcd cg':>8s}")
    for f in fits:
        conv = ("T" + (f["by"] or "")[:1]) if f["conv"] else "F"
        print(f"{f['lam']:8.3g}{f['mu']:8.3g}{f['cpu']:8.2f}{100 * f['cpu'] / total:6.0f}%"
              f"{f['iters']:7d}{conv:>6s}{f['lm']:5d}{f['lm_cg']:7d}{f['rej']:5d}"
              f"{f['exits']:5d}{f['cg']:8d}")
    for key, title in (("tottime", "own time"), ("cumulative", "cumulative time")):
        if args.top <= 0:
            break
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(args.top)
        lines = [ln for ln in s.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
        print(f"-- top {args.top} functions by {title}")
        print("\n".join(lines[start:start + args.top + 1]))


if __name__ == "__main__":
    main()
