"""Unit time of every model across the paper-scale family of ``synthetic-attributes`` settings.

One unit = the default search (adaptive, 20 fits) + the refit on train+validation, one
repetition, one attribute, BLAS limited to one thread like every unit.  The family is
``mtlbench_datasets.synthetic_attributes.SETTINGS`` (the published default and the named
settings of docs/datasets.md, all at Shoes scale: ~190 users x 50 labels, d = 100 after PCA).
For each setting the working tree builds the attribute's data once and hands the same arrays
to every process, so only the code differs.  Each model's unit runs in a fresh process with the
working tree's code ("new") and, with ``--ref REF``, in another with the code of git ref REF
("old", ``_common.checkout`` / ``run_code``), the two interleaved model by model (which goes
first alternates) so that both see the same machine load.

Printed per setting and model: the unit time (search + refit, wall s) and its CPU time (the
process's, one BLAS thread: on a shared machine close to what the wall time of an idle one
would be); the search fits that did not converge, of the search's fits (``converged`` False in
the unit's search trace, read with ``mtlbench.report.select.search_trace``; fits that record no
flag are counted apart as "?"); whether the refit converged; the test AUC; with ``--ref`` the
old times, its count and new/old of the CPU times; then the setting's sums.  A closing table
gives per setting the sums, the slowest unit and the targets, in wall and in CPU time: every
model's unit <= 10 s, the sum over the models <= 60 s, every search fit converged.  The load
average is printed with each setting: on a shared machine the absolute times are indicative,
the ratios within one run are the measurement.

Usage:
    nice -n 5 python benchmarks/bench_paper_scale.py [--ref REF] [--settings a,b]
        [--models a,b] [--problem attr0] [--rep 0] [--timeout 1800]
        [--dataset-params "users=40,n_items=2000"] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import checkout, run_code

UNIT_TARGET, SUM_TARGET = 10.0, 60.0
DATASET = "synthetic-attributes"


def _worker(data_path: str, model: str, rep: int) -> None:
    """Run one unit of ``model`` on the pickled problem and print one JSON line."""
    from threadpoolctl import threadpool_limits

    from mtlbench import TaskSet
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig, run_protocol

    with open(data_path, "rb") as fh:
        d = pickle.load(fh)
    if d["items"] is not None:
        tasks = TaskSet.from_shared_items(d["name"], d["items"], d["index"], d["labels"],
                                          d["task_names"])
    else:
        tasks = TaskSet.from_arrays(d["name"], d["Xs"], d["labels"], d["task_names"])
    cls = get_registry().model_class(model)
    with threadpool_limits(limits=1):
        t0, c0 = time.perf_counter(), time.process_time()
        out = run_protocol(cls(), dict(cls.search_space), tasks, ProtocolConfig(), rep)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    try:
        from mtlbench.report.select import search_trace
        fits, _ = search_trace(out.grid)
    except ImportError:  # a ref from before the search trace: the grid is the list of fits
        fits = [f for f in out.grid if isinstance(f, dict)]
    fits = [f for f in fits if "val_auc" in f]
    search = out.diagnostics.get("search", {})
    print(json.dumps({
        "time": elapsed, "cpu": cpu, "fits": len(fits),
        "not_converged": sum(f.get("converged") is False for f in fits),
        "not_recorded": sum(f.get("converged") is None for f in fits),
        "refit_converged": search.get("refit_converged"), "test_auc": out.test_auc,
        "best": out.best_params}))


def _run(tree: str | None, data_path: str, model: str, rep: int, timeout: float) -> dict:
    args = [str(Path(__file__).resolve()), "--worker", data_path, model, str(rep)]
    try:
        proc = run_code(args, tree, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within --timeout {timeout:g} s", "time": timeout}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": tail}
    return json.loads(lines[-1])


def _problem_file(selector: str, problem: str, folder: str) -> tuple[str, dict]:
    """Load the problem with the working tree (one BLAS thread, as units load it) and pickle
    its arrays; returns the file and the problem's summary."""
    from mtlbench.dataset import load_tasks
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import evaluable_tasks, restrict_tasks

    tasks = load_tasks(get_registry().dataset(selector), problem)
    tasks = restrict_tasks(tasks, evaluable_tasks(tasks)[0])
    data = {"name": tasks.name, "items": tasks.items, "index": tasks.index,
            "Xs": tasks.Xs, "labels": tasks.labels, "task_names": tasks.task_names}
    path = str(Path(folder) / f"{len(os.listdir(folder))}.pkl")
    with open(path, "wb") as fh:
        pickle.dump(data, fh)
    return path, tasks.summary()


def _fits_text(r: dict) -> str:
    text = f"{r['not_converged']}/{r['fits']}"
    return text + (f" ?{r['not_recorded']}" if r.get("not_recorded") else "")


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def _setting_rows(setting: str, selector: str, summary: dict, models: list[str], args,
                  old: str | None, data_path: str) -> list[dict]:
    print(f"\n== setting {setting}: {selector}/{args.problem}: {summary['tasks']} tasks, "
          f"d = {summary['features']}, {summary['labels']} labels, positive share "
          f"{summary['positive_share']:.2f}; rep {args.rep}; one BLAS thread; "
          f"old = {args.ref or '-'}; {_load()}")
    head = (f"{'model':14s} {'new s':>8s} {'cpu s':>8s} {'!conv/fits':>10s} {'refit':>5s} "
            f"{'AUC':>6s}")
    if old:
        head += f" {'old s':>8s} {'cpu s':>8s} {'!conv/fits':>10s} {'AUC':>6s} {'new/old':>7s}"
    print(head)
    rows = []
    for i, m in enumerate(models):
        order = [("old", old), ("new", None)] if old else [("new", None)]
        if i % 2:
            order.reverse()
        res = {which: _run(tree, data_path, m, args.rep, args.timeout) for which, tree in order}
        n, o = res["new"], res.get("old")
        rows.append({"setting": setting, "model": m, "new": n, "old": o})
        if "error" in n:
            line = f"{m:14s} new failed: {n['error'][:80]}"
        else:
            line = (f"{m:14s} {n['time']:8.2f} {n['cpu']:8.2f} "
                    f"{_fits_text(n):>10s} {str(n['refit_converged'])[:5]:>5s} "
                    f"{100 * n['test_auc']:6.2f}")
        if o is not None:
            if "error" in o:
                line += f"  old failed: {o['error'][:60]}"
            elif "error" not in n:
                line += (f" {o['time']:8.2f} {o['cpu']:8.2f} {_fits_text(o):>10s} "
                         f"{100 * o['test_auc']:6.2f} {n['cpu'] / o['cpu']:7.2f}")
        print(line, flush=True)
    ok = [r for r in rows if "error" not in r["new"]]
    tot_new = sum(r["new"]["time"] for r in ok)
    line = f"{'sum':14s} {tot_new:8.2f} {sum(r['new']['cpu'] for r in ok):8.2f}"
    both = [r for r in ok if r["old"] and "error" not in r["old"]]
    if old and both:
        tot_o = sum(r["old"]["time"] for r in both)
        cpu_o = sum(r["old"]["cpu"] for r in both)
        cpu_n = sum(r["new"]["cpu"] for r in both)
        line += f"{'':24s} {tot_o:8.2f} {cpu_o:8.2f} {'':17s} {cpu_n / cpu_o:7.2f}"
    print(line + ("" if len(ok) == len(rows) else f"  ({len(rows) - len(ok)} failed)"))
    return rows


def _summary(rows: list[dict], settings: list[str], n_models: int) -> None:
    print(f"\n== summary (new code), targets: every unit <= {UNIT_TARGET:g} s, the sum of the "
          f"{n_models} <= {SUM_TARGET:g} s, every search fit converged; {_load()}")
    print(f"{'':16s} {'sum s':>8s} {'slowest unit s':>22s} {'> 10 s':>6s}   "
          f"{'sum cpu s':>9s} {'slowest cpu s':>22s} {'> 10 s':>6s}   {'!conv fits':>10s}  "
          f"met (wall / cpu)")
    for setting in settings:
        mine = [r for r in rows if r["setting"] == setting]
        ok = [r for r in mine if "error" not in r["new"]]
        nconv = sum(r["new"]["not_converged"] for r in ok)
        line, met = f"{setting:16s}", []
        for key in ("time", "cpu"):
            tot = sum(r["new"][key] for r in ok)
            slow = max(ok, key=lambda r: r["new"][key], default=None)
            over = [r for r in ok if r["new"][key] > UNIT_TARGET]
            slowest = f"{slow['new'][key]:.1f} ({slow['model']})" if slow else "-"
            width = 8 if key == "time" else 9
            line += f" {tot:{width}.1f} {slowest:>22s} {len(over):6d}  "
            met.append(len(ok) == len(mine) and not over and not nconv and tot <= SUM_TARGET)
        print(line + f" {nconv:10d}  {' / '.join('yes' if m else 'no' for m in met)}"
              + (f"; failed: {len(mine) - len(ok)}" if len(ok) < len(mine) else ""))


def main() -> None:
    from mtlbench.plugins import get_registry
    from mtlbench_datasets.synthetic_attributes import SETTINGS

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", help="git ref of the old code (omit: the working tree only)")
    ap.add_argument("--settings", help=f"comma-separated settings (default: all: "
                                       f"{','.join(SETTINGS)})")
    ap.add_argument("--models", help="comma-separated model names (default: every model)")
    ap.add_argument("--problem", default="attr0")
    ap.add_argument("--rep", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per unit process")
    ap.add_argument("--dataset-params", default="",
                    help='added to every setting, e.g. "users=40,n_items=2000" (a smoke run)')
    ap.add_argument("--json", help="also write every row to this JSON file")
    args = ap.parse_args()

    settings = args.settings.split(",") if args.settings else list(SETTINGS)
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        sys.exit(f"--settings: no setting {', '.join(unknown)}; settings: {', '.join(SETTINGS)}")
    reg = get_registry()
    models = args.models.split(",") if args.models else sorted(reg.model_names)
    unknown = [m for m in models if m not in reg.model_names]
    if unknown:
        sys.exit(f"--models: no model {', '.join(unknown)}; models: {', '.join(reg.model_names)}")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-data-") as folder, \
            (checkout(args.ref) if args.ref else contextlib.nullcontext()) as old:
        for setting in settings:
            params = ",".join(p for p in (f"setting={setting}", args.dataset_params) if p)
            selector = getattr(reg.dataset(f"{DATASET}[{params}]"), "selector", DATASET)
            data_path, summary = _problem_file(selector, args.problem, folder)
            rows += _setting_rows(setting, selector, summary, models, args, old, data_path)
    _summary(rows, settings, len(models))
    if args.json:
        Path(args.json).write_text(json.dumps({"ref": args.ref, "problem": args.problem,
                                               "rep": args.rep, "rows": rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
