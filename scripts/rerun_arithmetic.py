"""Rerun a sample of units under other floating-point arithmetic and compare the results.

OpenBLAS picks its compute kernels for the CPU it runs on; ``OPENBLAS_CORETYPE`` makes it use
another CPU type's kernels (Haswell: AVX2, SkylakeX: AVX-512, Sandybridge: AVX, Prescott: SSE3,
whichever this CPU can run), so one machine can stand in for another.  For every kernel this
script runs ``mtlbench compare`` on the sample in a fresh process with one BLAS thread, into a
store of its own (``OUT/<kernel>.sqlite``; a finished unit is not recomputed, so an interrupted
run resumes), after printing what ``threadpoolctl.threadpool_info()`` reports in a process with
that environment (every unit also records the kernel that ran in its ``versions``).  Then it
compares every pair of kernels, and every kernel with each ``--against`` source (a results
store, e.g. one restored from the published JSON by ``scripts/restore_store.py``, or a
published ``leaderboards/<dataset>.json``):

* per unit (the same model, data set, problem, repetition and split seed): the selected
  hyperparameters equal; the test values of every metric equal bit for bit, and within 1e-9;
* per table (data set x metric): the largest difference of a cell mean (mean over the sample's
  repetitions, in the table's points) and the best model (the highest cell mean, for a metric
  where lower is better the lowest) under each of the two;
* per model: the units whose selection differs, pooled over every pair.

    nice -n 5 python scripts/rerun_arithmetic.py [--kernels SkylakeX,Haswell]
        [--sample school:3,lenk:1,simulated:1] [--models lasso,cocmtl] [--out DIR]
        [--against results/published.sqlite] [--data-dir ../shared/data] [--report-only]
        [--table FILE]

``--sample DATASET:N,...`` runs repetitions 0 .. N-1 of every model (``--models``: default
every installed model) on each data set.  ``--table FILE`` writes the per-model pooled counts
as JSON (model -> data set -> units, selections that differ, largest test difference, and
the code fingerprint that was measured); written beside a store as
``<store>.arithmetic.json`` (e.g. ``results/published.arithmetic.json``), it is what the
leaderboards of that store read for their notes: a model whose units changed is named as
sensitive to floating-point arithmetic, with these counts, while its units carry the code
that was measured (``mtlbench.report.arithmetic.arithmetic_notes``).  Exit status 0; 2 if
fewer than two kernels can run here and no ``--against`` source is given.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd

#: OpenBLAS kernel names in order of preference, each with the CPU flag it needs
#: (``/proc/cpuinfo``): the first two this CPU can run are the default.
KERNELS = (("SkylakeX", "avx512f"), ("Haswell", "avx2"), ("Sandybridge", "avx"),
           ("Nehalem", "sse4_2"), ("Prescott", "sse3"))
DEFAULT_SAMPLE = "school:3,lenk:1,simulated:1"
#: Two test values closer than this count as equal "within 1e-9".
CLOSE = 1e-9
IDENTITY = ["dataset", "problem", "model", "rep", "seed"]

_PROBE = ("import json, numpy, scipy.linalg; from threadpoolctl import threadpool_info; "
          "print(json.dumps([[i.get('internal_api'), i.get('version'), i.get('architecture'), "
          "i.get('num_threads'), i.get('filepath')] for i in threadpool_info() "
          "if i.get('user_api') == 'blas']))")


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def kernel_env(kernel: str) -> dict[str, str]:
    return dict(os.environ, OPENBLAS_CORETYPE=kernel, OPENBLAS_NUM_THREADS="1",
                OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def probe(kernel: str) -> list[list[Any]]:
    """What threadpoolctl reports for the BLAS libraries of a fresh process with the
    kernel's environment: [api, version, architecture, threads, file] per library."""
    out = subprocess.run([sys.executable, "-c", _PROBE], env=kernel_env(kernel),
                         capture_output=True, text=True)
    if out.returncode != 0:
        return []
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_sample(text: str) -> list[tuple[str, int]]:
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, n = part.rpartition(":")
        if not name or not n.isdigit() or int(n) < 1:
            sys.exit(f"--sample: {part!r} is not DATASET:REPETITIONS (e.g. school:3)")
        out.append((name, int(n)))
    return out


def run_kernel(kernel: str, sample, models: str | None, store: Path, jobs: int,
               data_dir: str | None) -> None:
    for dataset, reps in sample:
        cmd = [sys.executable, "-m", "mtlbench", "compare", "-d", dataset, "--reps", str(reps),
               "--store", str(store), "-j", str(jobs), "--allow-failures"]
        if models:
            cmd += ["-m", models]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        print(f"[{kernel}] {' '.join(cmd[2:])}", flush=True)
        done = subprocess.run(cmd, env=kernel_env(kernel), stdout=subprocess.DEVNULL)
        if done.returncode not in (0, 1):
            print(f"[{kernel}] compare ended with status {done.returncode}", flush=True)


# ------------------------------------------------------------------------------ reading units
def _test_values(row: Any) -> dict[str, float]:
    metrics = row.get("metrics") if isinstance(row, dict) else row["metrics"]
    test = (metrics or {}).get("test") if isinstance(metrics, dict) else None
    if isinstance(test, dict) and test:
        return {k: (float("nan") if v is None else float(v)) for k, v in test.items()}
    auc = row.get("test_auc") if isinstance(row, dict) else row["test_auc"]
    return {"auc": float(auc)} if auc is not None else {}


def store_units(path: Path, current_code: bool) -> pd.DataFrame:
    """The finished units of a store: identity, key, selection, test values, fingerprints,
    the BLAS that ran; with ``current_code`` only those made by the code installed now."""
    from mtlbench.plugins import get_registry
    from mtlbench.provenance import other_code_units
    from mtlbench.store import ResultStore

    with ResultStore(path, readonly=True) as store:
        units = store.units(status="ok")
    if current_code and len(units):
        stale = other_code_units(units, get_registry())
        units = units[~units["key"].isin(set(stale))]
    rows = []
    for _, u in units.iterrows():
        rows.append({"dataset": u["dataset"], "problem": u["problem"], "model": u["model"],
                     "rep": int(u["rep"]), "seed": int(u["seed"]), "key": u["key"],
                     "best_params": u["best_params"], "test": _test_values(u),
                     "split": u["split_fingerprint"], "data": u["data_fingerprint"],
                     "blas": (u["versions"] or {}).get("blas"),
                     "config": u["model_config"], "provenance": u["provenance"]})
    return _frame(rows)


def json_units(path: Path) -> pd.DataFrame:
    """The units of a published leaderboard JSON file, as :func:`store_units` reads them."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for u in data.get("units", []):
        if u.get("status") != "ok":
            continue
        rows.append({"dataset": data["dataset"], "problem": u["problem"], "model": u["model"],
                     "rep": int(u["rep"]), "seed": int(u["seed"]), "key": u["key"],
                     "best_params": u["best_params"], "test": _test_values(u),
                     "split": u.get("split_fingerprint"), "data": u.get("data_fingerprint"),
                     "blas": (u.get("versions") or {}).get("blas"),
                     "config": u.get("model_config"), "provenance": u.get("provenance")})
    return _frame(rows)


def _frame(rows: list[dict]) -> pd.DataFrame:
    cols = IDENTITY + ["key", "best_params", "test", "split", "data", "blas", "config",
                       "provenance"]
    df = pd.DataFrame(rows, columns=cols)
    return df.drop_duplicates(IDENTITY, keep="last").reset_index(drop=True)


def load_source(path: Path, current_code: bool) -> pd.DataFrame:
    if path.suffix == ".json":
        return json_units(path)
    return store_units(path, current_code)


# ------------------------------------------------------------------------------ comparing
def _percent(metric: str) -> float:
    from mtlbench.scoring import get_metric

    try:
        return 100.0 if get_metric(metric).percent else 1.0
    except Exception:  # noqa: BLE001 - a metric not installed here: shown as recorded
        return 1.0


def _higher_is_better(metric: str) -> bool:
    from mtlbench.scoring import get_metric

    try:
        return bool(get_metric(metric).higher_is_better)
    except Exception:  # noqa: BLE001
        return True


def _equal(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def compare_pair(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, Any]:
    """Unit-by-unit and table-by-table comparison of two unit tables (module docstring)."""
    m = a.merge(b, on=IDENTITY, suffixes=("_a", "_b"))
    out: dict[str, Any] = {"units": [], "tables": []}
    for _, r in m.iterrows():
        metrics = sorted(set(r["test_a"]) & set(r["test_b"]))
        diffs = {k: abs(r["test_a"][k] - r["test_b"][k]) for k in metrics}
        out["units"].append({
            **{k: r[k] for k in IDENTITY},
            "same_key": r["key_a"] == r["key_b"], "same_split": r["split_a"] == r["split_b"],
            "same_data": r["data_a"] == r["data_b"],
            "same_selection": r["best_params_a"] == r["best_params_b"],
            "bit_equal": all(_equal(r["test_a"][k], r["test_b"][k]) for k in metrics),
            "close": all(_equal(r["test_a"][k], r["test_b"][k]) or diffs[k] <= CLOSE
                         for k in metrics),
            "diffs": diffs, "params": (r["best_params_a"], r["best_params_b"])})
    for dataset, g in m.groupby("dataset"):
        metrics = sorted(set.intersection(*[set(t) for t in g["test_a"]] +
                                          [set(t) for t in g["test_b"]]))
        for metric in metrics:
            scale = _percent(metric)
            va = g.assign(v=[t[metric] * scale for t in g["test_a"]])
            vb = g.assign(v=[t[metric] * scale for t in g["test_b"]])
            ca = va.groupby("model")["v"].mean()
            cb = vb.groupby("model")["v"].mean()
            diff = (ca - cb).abs()
            pick = (lambda s: s.idxmax()) if _higher_is_better(metric) else (lambda s: s.idxmin())
            out["tables"].append({
                "dataset": dataset, "metric": metric, "models": int(len(ca)),
                "max_cell_diff": float(diff.max()) if len(diff) else float("nan"),
                "worst_model": str(diff.idxmax()) if len(diff) else "",
                "best_a": str(pick(ca)), "best_b": str(pick(cb))})
    return out


def summarize(name_a: str, name_b: str, result: dict[str, Any]) -> list[str]:
    units = pd.DataFrame(result["units"])
    lines = [f"== {name_a} vs {name_b}"]
    if units.empty:
        return lines + ["   no unit in common"]
    for dataset, g in units.groupby("dataset"):
        n = len(g)
        same = int(g["same_selection"].sum())
        note = []
        if not g["same_key"].all():
            note.append(f"{int((~g['same_key']).sum())} of other code")
        if not g["same_split"].all():
            note.append(f"{int((~g['same_split']).sum())} of another split")
        if not g["same_data"].all():
            note.append(f"{int((~g['same_data']).sum())} of other data")
        lines.append(f"   {dataset}: {n} units, same selection {same} ({100 * same / n:.1f} %), "
                     f"test bit-equal {int(g['bit_equal'].sum())}, within {CLOSE:g} "
                     f"{int(g['close'].sum())}" + (f"  [{'; '.join(note)}]" if note else ""))
    for t in result["tables"]:
        flip = "" if t["best_a"] == t["best_b"] else "   BEST MODEL DIFFERS"
        lines.append(f"   table {t['dataset']} x {t['metric']}: max |cell mean difference| "
                     f"{t['max_cell_diff']:.4f} ({t['worst_model']}); best {t['best_a']} / "
                     f"{t['best_b']}{flip}")
    differ = units[~units["same_selection"]]
    for _, u in differ.iterrows():
        d = max(u["diffs"].values()) if u["diffs"] else float("nan")
        lines.append(f"   selection differs: {u['dataset']}/{u['problem']} {u['model']} rep "
                     f"{u['rep']}: {u['params'][0]} vs {u['params'][1]} (largest test "
                     f"difference {d:.3g})")
    return lines


def sensitivity_table(results: list[dict[str, Any]], sources: dict[str, pd.DataFrame],
                      kernels: list[str]) -> dict[str, Any]:
    """Per model and data set, pooled over the kernel pairs: units compared, selections that
    differ, the largest test difference, and the code fingerprint measured."""
    pooled: dict[str, dict[str, dict[str, Any]]] = {}
    for res in results:
        for u in res["units"]:
            cell = pooled.setdefault(u["model"], {}).setdefault(
                u["dataset"], {"units": 0, "selection_differs": 0, "max_test_diff": 0.0})
            cell["units"] += 1
            cell["selection_differs"] += int(not u["same_selection"])
            if u["diffs"]:
                cell["max_test_diff"] = max(cell["max_test_diff"], max(u["diffs"].values()))
    first = sources[kernels[0]]
    for model, by_ds in pooled.items():
        for dataset, cell in by_ds.items():
            rows = first[(first["model"] == model) & (first["dataset"] == dataset)]
            prov = rows["provenance"].iloc[0] if len(rows) else None
            cell["code"] = ((prov or {}).get("model") or {}).get("code") \
                if isinstance(prov, dict) else None
    return {"format": 1, "measured_by": "scripts/rerun_arithmetic.py", "kernels": kernels,
            "models": pooled}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default=None,
                    help="comma-separated OpenBLAS core types (default: the first two of "
                         f"{', '.join(k for k, _ in KERNELS)} this CPU can run)")
    ap.add_argument("--sample", default=DEFAULT_SAMPLE,
                    help=f"DATASET:REPETITIONS,... (default {DEFAULT_SAMPLE})")
    ap.add_argument("--models", default=None, help="model selectors (default: every model)")
    ap.add_argument("--out", default="results/arithmetic", help="folder of the kernels' stores")
    ap.add_argument("--against", action="append", default=[],
                    help="a results store or published leaderboard JSON to compare with "
                         "(repeatable)")
    ap.add_argument("--data-dir", default=None, help="folder of the real data sets")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="units side by side (default 2)")
    ap.add_argument("--report-only", action="store_true",
                    help="compare the stores in --out without running anything")
    ap.add_argument("--table", default=None,
                    help="write the per-model counts here (JSON; beside a store as "
                         "<store>.arithmetic.json, its leaderboards' notes read it)")
    args = ap.parse_args(argv)

    flags = cpu_flags()
    if args.kernels:
        kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    else:
        kernels = [k for k, flag in KERNELS if flag in flags][:2]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sample = parse_sample(args.sample)
    ran = []
    for kernel in kernels:
        libs = probe(kernel)
        print(f"[{kernel}] threadpoolctl: " + ("; ".join(
            f"{api} {ver} {arch} ({threads} thread{'s' if threads != 1 else ''}, "
            f"{Path(str(f)).name})" for api, ver, arch, threads, f in libs) or "no BLAS found"))
        if not libs or any(str(arch).lower() != kernel.lower() for _, _, arch, _, _ in libs):
            print(f"[{kernel}] skipped: OpenBLAS did not run the {kernel} kernels here")
            continue
        ran.append(kernel)
        if not args.report_only:
            run_kernel(kernel, sample, args.models, out / f"{kernel}.sqlite", args.jobs,
                       args.data_dir)
    if len(ran) < 2 and not args.against:
        print("fewer than two kernels can run here and no --against source: nothing to "
              "compare", file=sys.stderr)
        return 2
    wanted = {name for name, _ in sample}
    sources = {}
    for kernel in ran:
        units = store_units(out / f"{kernel}.sqlite", current_code=True) \
            if (out / f"{kernel}.sqlite").exists() else _frame([])
        units = units[units["dataset"].isin(wanted)]
        reps = {name: n for name, n in sample}
        units = units[[r < reps[d] for d, r in zip(units["dataset"], units["rep"])]]
        wrong = [b for b in units["blas"].dropna().unique() if kernel.lower() not in b.lower()]
        if wrong:
            print(f"[{kernel}] warning: units of its store record another BLAS: {wrong}")
        sources[kernel] = units.reset_index(drop=True)
    results = []
    lines = []
    for a, b in itertools.combinations(ran, 2):
        res = compare_pair(sources[a], sources[b])
        results.append(res)
        lines += summarize(a, b, res)
    for path in args.against:
        other = load_source(Path(path), current_code=False)
        for kernel in ran:
            lines += summarize(kernel, path, compare_pair(sources[kernel], other))
    print("\n".join(lines))
    if args.table and results:
        table = sensitivity_table(results, sources, ran)
        Path(args.table).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n",
                                    encoding="utf-8")
        print(f"wrote {args.table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
