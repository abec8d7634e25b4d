"""Time to load a data set (generate + preprocess): old tree vs this tree, side by side.

Each run loads every problem of the data set in a fresh process, as a worker of ``compare``
does (one BLAS thread, ``load_tasks``; the problems share the dataset instance, and so the
generated items and their PCA), with the code of git ref ``--ref`` (default ``main``;
``_common.checkout`` / ``run_code``) or of this tree, the two alternating run by run so that
both see the same machine load.  Printed per data set (with its number of problems): the
median wall and CPU time of a run over ``--runs`` runs, new/old of the CPU times, and whether
the two codes give the same data fingerprints.  The default data set is the paper-scale
``synthetic-attributes`` default (Shoes scale: item generation, the PCA of the features, the
users' labels); ``compare`` pays its load once in the planning process and once in each
worker process.

    nice -n 5 python benchmarks/bench_data.py [--ref main] [--runs 3]
        [--datasets synthetic-attributes,simulated]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import checkout, run_code

_WORKER = r"""
import json, sys, time
from mtlbench.dataset import load_tasks, problems_of
from mtlbench.plugins import get_registry

ds = get_registry().dataset(sys.argv[1])
w0, c0 = time.perf_counter(), time.process_time()
problems = problems_of(ds, None)
prints = [load_tasks(ds, p).fingerprint() for p in problems]
print(json.dumps({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
                  "fingerprint": prints, "problems": len(problems)}))
"""


def _once(tree: str | None, dataset: str) -> dict:
    proc = run_code(["-c", _WORKER, dataset], tree)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"{dataset}: the load failed: "
                 + (proc.stderr.strip().splitlines() or ["(no output)"])[-1])
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", default="main", help="git ref of the old tree")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--datasets", default="synthetic-attributes",
                    help="comma-separated data set selectors")
    args = ap.parse_args()
    with checkout(args.ref) as old:
        print(f"median of {args.runs} loads in fresh processes (one BLAS thread), old = git "
              f"{args.ref}, new = this tree; load average "
              "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        print(f"{'data set':<28}{'old wall':>9}{'new wall':>9}{'old cpu':>9}{'new cpu':>9}"
              f"{'new/old cpu':>12}  same data fingerprint")
        for dataset in args.datasets.split(","):
            runs: dict[str, list[dict]] = {"old": [], "new": []}
            for i in range(args.runs):
                order = (("old", old), ("new", None)) if i % 2 == 0 else \
                    (("new", None), ("old", old))
                for which, tree in order:
                    runs[which].append(_once(tree, dataset))
            med = {w: {k: statistics.median(r[k] for r in rs) for k in ("wall", "cpu")}
                   for w, rs in runs.items()}
            same = runs["old"][0]["fingerprint"] == runs["new"][0]["fingerprint"]
            print(f"{dataset + ' (' + str(runs['new'][0]['problems']) + ')':<28}"
                  f"{med['old']['wall']:9.2f}{med['new']['wall']:9.2f}"
                  f"{med['old']['cpu']:9.2f}{med['new']['cpu']:9.2f}"
                  f"{med['new']['cpu'] / med['old']['cpu']:11.2f}x  {'yes' if same else 'no'}")


if __name__ == "__main__":
    main()
