"""AMTL's search fits that stopped at the 2,000-iteration cap: what the same fit does past the cap,
and where a faster-converging variant of the same solver stops.

For every AMTL search fit a store records as not converged (``grid`` entries with
``converged: false``) on DATASET, the fit is rerun on the protocol's training split of its
repetition (loaded as units load it, one BLAS thread) in three ways:

  published     the model's defaults: confirms that this code stops at the cap there;
  past-cap      the same solver with ``max_iter`` lifted to LIFT (diagnosis only, not a
                setting): after how many iterations, and at which F, the published path meets
                its stopping rule;
  exact-blocks  ``cg_max_iter=20, b_passes=20`` and ``max_iter`` LIFT: block steps solved
                (near) exactly, a block-coordinate variant that needs far fewer iterations;
                where it stops.

It prints one line per fit and variant: F / F_0, iterations, how it stopped, CPU seconds.  The
issue's acceptance rule for a faster solver is "the objective reached equal to the old solver's
within 1e-6 relative, or lower": a variant that stops at a stationary point above the
published capped F fails it.

    OMP_NUM_THREADS=1 python benchmarks/bench_amtl_capped.py --store STORE [-j 2]
        [--dataset synthetic-attributes] [--only attr2:4] [--lift 20000]

Findings (2026-11-28, main a5a8c3e, the published store, -j 2, nothing else running): the 14
capped fits (10 of them at (lam, mu) = (1, 1.30)) all stop at the cap on this code.
  * past-cap: 13 reach the global certificate after 2,001-8,642 iterations (median of all 14:
    3,078), one (attr6 rep 1) stops at a stationary point at 2.0e-6 F_0 after 14,386; CPU
    8.0-41.5 s per fit against 5.5-7.7 s for the capped fit.  None is stuck: the published
    path is 1.0-7.2 x the cap long.
  * exact-blocks: all 14 reach the certificate in 187-1,044 iterations, but at 4.6-22.0 s CPU
    (median 9.0 s), more than the capped fit at 11 of 14.  On the design data (seeds 101-103)
    the same steps from the start stop at a stationary point at 0.709 F_0 on seed 102 attr0
    (1, 1.78), and switched on after 300 block iterations they convert 3 of 4 capped design
    fits at 7.6-23.7 s and leave one capped at 34 s (``patches/README.md``, round 12).
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import sqlite3
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

VARIANTS = {
    "published": {},
    "past-cap": {"max_iter": None},
    "exact-blocks": {"max_iter": None, "cg_max_iter": 20, "b_passes": 20},
}


def capped_fits(store: str, dataset: str, model: str = "amtl") -> list[dict]:
    """The (problem, rep, params, n_iter) of every search fit ``store`` records as not
    converged, in the store's order."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    rows = con.execute("select problem, rep, grid from units where model = ? and dataset = ? "
                       "and status = 'ok' order by problem, rep", (model, dataset)).fetchall()
    from mtlbench.report.select import search_trace

    out = []
    for problem, rep, grid in rows:
        for entry in search_trace(json.loads(grid or "[]"))[0]:
            if entry.get("converged") is False:
                out.append({"problem": problem.split("/", 1)[-1], "rep": int(rep),
                            "params": entry["params"], "n_iter": entry.get("n_iter")})
    return out


def _fit(path: str, params: dict) -> dict:
    from threadpoolctl import threadpool_limits

    from mtlbench.plugins import get_registry

    with open(path, "rb") as fh:
        train = pickle.load(fh)
    model = get_registry().model_class("amtl")(**params)
    with threadpool_limits(limits=1):
        t0 = time.process_time()
        model.fit(train)
        cpu = time.process_time() - t0
    hist = model.objective_history_
    return {"F_rel": hist[-1] / hist[0], "iters": model.n_iter_,
            "stopped": model.diagnostics_["converged_by"] or "cap", "cpu": cpu,
            "transfers": model.diagnostics_["transfers"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--dataset", default="synthetic-attributes")
    ap.add_argument("--only", help="comma-separated problem:rep to keep, e.g. attr2:4")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--lift", type=int, default=20000, help="max_iter of the diagnosis runs")
    ap.add_argument("-j", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_coc_capped import train_split
    from threadpoolctl import threadpool_limits

    fits = capped_fits(args.store, args.dataset)
    if args.only:
        keep = {tuple(s.split(":")) for s in args.only.split(",")}
        fits = [f for f in fits if (f["problem"], str(f["rep"])) in keep]
    print(f"{len(fits)} capped AMTL search fit(s) in {args.store} on {args.dataset}", flush=True)
    jobs = []
    for f in fits:
        for name in args.variants.split(","):
            kw = {k: (args.lift if v is None else v) for k, v in VARIANTS[name].items()}
            jobs.append((f, name, {**f["params"], **kw}))
    with tempfile.TemporaryDirectory(prefix="amtl-capped-") as tmp:
        paths = {}                       # one pickled training split per (problem, rep)
        for f in fits:
            key = (f["problem"], f["rep"])
            if key not in paths:
                paths[key] = os.path.join(tmp, f"{key[0]}-{key[1]}.pkl")
                with threadpool_limits(limits=1), open(paths[key], "wb") as fh:
                    pickle.dump(train_split(args.dataset, key[0], key[1]), fh)
        with ProcessPoolExecutor(max_workers=args.j) as pool:
            futures = [pool.submit(_fit, paths[(f["problem"], f["rep"])], p) for f, _, p in jobs]
            for (f, name, _), fut in zip(jobs, futures):
                r = fut.result()
                pt = ", ".join(f"{k} {v:.4g}" for k, v in f["params"].items())
                print(f"{f['problem']} rep {f['rep']:2d} ({pt}) {name:12s} F/F0 "
                      f"{r['F_rel']:.3e} iters {r['iters']:5d} stopped {r['stopped']:12s} "
                      f"transfers {r['transfers']:5d} cpu {r['cpu']:6.1f} s", flush=True)


if __name__ == "__main__":
    main()
