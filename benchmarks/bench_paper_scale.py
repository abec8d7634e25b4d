"""Unit time of every model at the paper's scale: old code vs new, side by side in one run.

One unit = the default search (adaptive, 20 fits) + the refit on train+validation, one
repetition, one attribute of ``synthetic-attributes`` (Shoes scale: ~190 users x 50 labels,
d = 100 after PCA), with BLAS limited to one thread like every unit.  For each model the
script runs the unit in a fresh process for the working tree ("new") and, with ``--ref REF``,
for the code of git ref REF ("old", a temporary ``git worktree`` put first on PYTHONPATH), the
two interleaved model by model so that both see the same machine load.  Both receive the SAME
training data (built once by the working tree and pickled), so only the code differs.

Printed per model: unit time (search + refit, seconds), fits, search fits that did not converge
(``converged`` False in the trace; None counts as "not recorded"), the refit's convergence, test
AUC, and the old/new ratio; then the sum over models, beside the issue-23 targets (every model
<= 10 s, the sum of the 14 <= 80 s).

Usage:
    python benchmarks/bench_paper_scale.py [--ref REF] [--models a,b] [--problem attr0]
                                           [--rep 0] [--dataset-params "users=200"]
Timing is noisy on a shared machine: compare the ratios within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import worker_env

REPO = Path(__file__).resolve().parents[1]
UNIT_TARGET, SUM_TARGET = 10.0, 80.0


def _worker(tasks_path: str, model: str, rep: int) -> None:
    """Run one unit of ``model`` on the pickled problem and print one JSON line."""
    from threadpoolctl import threadpool_limits

    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig, run_protocol

    with open(tasks_path, "rb") as fh:
        tasks = pickle.load(fh)
    cls = get_registry().model_class(model)
    with threadpool_limits(limits=1):
        t0 = time.perf_counter()
        out = run_protocol(cls(), dict(cls.search_space), tasks, ProtocolConfig(), rep)
        elapsed = time.perf_counter() - t0
    conv = [e.get("converged") for e in out.grid if "val_auc" in e]
    search = out.diagnostics.get("search", {})
    print(json.dumps({
        "time": elapsed, "select": out.select_time, "refit": out.fit_time,
        "fits": len(out.grid), "failed_fits": sum("error" in e for e in out.grid),
        "not_converged": sum(c is False for c in conv),
        "not_recorded": sum(c is None for c in conv),
        "refit_converged": search.get("refit_converged"), "test_auc": out.test_auc,
        "best": out.best_params}))


def _run(env_path: str | None, tasks_path: str, model: str, rep: int) -> dict:
    env = worker_env(env_path)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", tasks_path, model, str(rep)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                          cwd=env_path or str(REPO))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": tail}
    return json.loads(lines[-1])


def _old_tree(ref: str) -> str:
    path = Path(tempfile.mkdtemp(prefix="bench-ref-")) / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(path), ref],
                   check=True, capture_output=True)
    return str(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", help="git ref of the old code (omit: new code only)")
    ap.add_argument("--models", help="comma-separated model names (default: every model)")
    ap.add_argument("--problem", default="attr0")
    ap.add_argument("--rep", type=int, default=0)
    ap.add_argument("--dataset-params", default="", help='e.g. "users=200,seed=1"')
    args = ap.parse_args()

    from mtlbench.plugins import get_registry
    from mtlbench.protocol import evaluable_tasks, restrict_tasks

    reg = get_registry()
    sel = "synthetic-attributes" + (f"[{args.dataset_params}]" if args.dataset_params else "")
    tasks = reg.dataset(sel).load(args.problem)
    tasks = restrict_tasks(tasks, evaluable_tasks(tasks)[0])
    models = args.models.split(",") if args.models else sorted(reg.model_names)
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as fh:
        pickle.dump(tasks, fh)
        tasks_path = fh.name
    old = _old_tree(args.ref) if args.ref else None
    n_labels = sum(tasks.y(t).shape[0] for t in range(tasks.T))
    print(f"{tasks.name}: {tasks.T} tasks, d = {tasks.d}, {n_labels} "
          f"labels; rep {args.rep}; one BLAS thread; old = {args.ref or '-'}")
    head = f"{'model':14s} {'new s':>7s} {'fits':>4s} {'!conv':>5s} {'refit':>5s} {'AUC':>6s}"
    if old:
        head += f" {'old s':>7s} {'!conv':>5s} {'AUC':>6s} {'old/new':>7s}"
    print(head)
    tot_new = tot_old = 0.0
    misses = []
    try:
        for m in models:
            o = _run(old, tasks_path, m, args.rep) if old else None
            n = _run(None, tasks_path, m, args.rep)
            if "error" in n:
                print(f"{m:14s} new failed: {n['error']}")
                continue
            tot_new += n["time"]
            if n["time"] > UNIT_TARGET or n["not_converged"]:
                misses.append(m)
            line = (f"{m:14s} {n['time']:7.2f} {n['fits']:4d} {n['not_converged']:5d} "
                    f"{str(n['refit_converged'])[:5]:>5s} {100 * n['test_auc']:6.2f}")
            if o is not None:
                if "error" in o:
                    line += f"  old failed: {o['error'][:60]}"
                else:
                    tot_old += o["time"]
                    line += (f" {o['time']:7.2f} {o['not_converged']:5d} {100 * o['test_auc']:6.2f}"
                             f" {o['time'] / n['time']:7.2f}")
            print(line, flush=True)
    finally:
        if old:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", old],
                           capture_output=True)
        os.unlink(tasks_path)
    line = f"{'sum':14s} {tot_new:7.2f}"
    if old and tot_new:
        line += f"{'':25s} {tot_old:7.2f} {'':12s} {tot_old / tot_new:7.2f}"
    print(line)
    print(f"targets: every model <= {UNIT_TARGET:g} s with every search fit converged, sum <= "
          f"{SUM_TARGET:g} s; missed by: {', '.join(misses) or 'none'}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
