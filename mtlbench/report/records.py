"""What a leaderboard records about its units: the per-unit records of its JSON (identity,
selection, search trace, fingerprints, per-task values) and its provenance (code versions,
protocol, data and split fingerprints, machines, times).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
from collections import Counter
from typing import Any, Iterable

import pandas as pd

from .schema import UNIT_FIELDS, Machine, Provenance, UnitRecord
from .select import degenerate, failed_fits, refit_converged, selected_fit_converged


def _short(values: Iterable[Any]) -> list[Any]:
    return sorted({v for v in values if v is not None and v == v}, key=str)


def _task_rows(store, keys: Iterable[str]) -> dict[str, pd.DataFrame]:
    """Per unit key, its tasks (task_index, task_name, n_test) in order: from the per-task AUC
    of a binary unit, else from the per-task metrics."""
    keys = list(keys)
    cols = ["key", "task_index", "task_name", "n_test"]
    ts = store.task_scores(keys=keys)[cols]
    have = set(ts["key"])
    rest = [k for k in keys if k not in have]
    if rest:
        tm = store.task_metrics(keys=rest)[cols].drop_duplicates(["key", "task_index"])
        ts = pd.concat([ts, tm])
    return {k: g.sort_values("task_index") for k, g in ts.groupby("key")}


def _task_names(store, ok: pd.DataFrame) -> dict[str, list[str]]:
    """Per problem, the task names of its first ok unit (units refer to them by position)."""
    out: dict[str, list[str]] = {}
    if ok.empty:
        return out
    firsts = {p: g.iloc[0]["key"] for p, g in ok.groupby("problem")}
    rows = _task_rows(store, firsts.values())
    for p, key in firsts.items():
        first = rows.get(key)
        out[p] = [] if first is None else [str(n) for n in first["task_name"]]
    return out


def unit_records(store, units: pd.DataFrame) -> list[UnitRecord]:
    """Per unit what a leaderboard needs (and :func:`mtlbench.report.importing.import_results`
    reads back): identity, selected hyperparameters, the search trace (parameters, validation
    AUC, converged flag per fit) and its summary, split and data fingerprints, protocol, code
    versions, the target kind and every metric's test value, and per task the number of test
    labels, the test AUC (binary targets) and every other metric (``task_metrics``) in the
    order of ``task_names[problem]`` (a unit whose tasks differ carries its own
    ``task_names``)."""
    keys = list(units["key"])
    by_key = _task_rows(store, keys) if keys else {}
    auc = store.task_scores(keys=keys) if keys else pd.DataFrame(columns=["key", "test_auc"])
    auc_by_key = {k: g.sort_values("task_index")["test_auc"] for k, g in auc.groupby("key")}
    tm = store.task_metrics(keys=keys) if keys else pd.DataFrame(columns=["key", "metric"])
    tm = tm[tm["metric"] != "auc"]
    metrics_by_key = {k: {m: [None if v != v else float(v) for v in gm.sort_values(
        "task_index")["value"]] for m, gm in g.groupby("metric")} for k, g in tm.groupby("key")}
    first_names: dict[str, list[str]] = {}
    out = []
    for _, r in units.sort_values(["problem", "model", "rep"]).iterrows():
        fits, info = _trace_for_json(r)
        rec = UnitRecord(**{f: r.get(f) for f in UNIT_FIELDS}, search=info, trace=fits,
                         selected_fit_converged=selected_fit_converged(r),
                         refit_converged=refit_converged(r), degenerate=degenerate(r),
                         failed_fits=failed_fits(r))
        g = by_key.get(r["key"])
        if g is not None and len(g):
            names = [str(n) for n in g["task_name"]]
            ref = first_names.setdefault(r["problem"], names)
            if r["key"] in auc_by_key:
                rec.task_auc = [float(a) for a in auc_by_key[r["key"]]]
            rec.n_test = [int(n) for n in g["n_test"]]
            if names != ref:
                rec.task_names = names
        rec.task_metrics = metrics_by_key.get(r["key"])
        out.append(rec)
    return out


def _trace_for_json(r: pd.Series) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from .select import row_search

    fits, info = row_search(r)
    after = ("converged", "n_iter", "fit_time", "phase", "error")
    return [{k: f[k] for k in ("params", *sorted(k for k in f if k.startswith("val_")), *after)
             if k in f} for f in fits], info


def _split_fingerprints(ok: pd.DataFrame) -> dict[str, list[str]]:
    """Per (problem, rep) the split fingerprints seen (one each when every model had the
    same split)."""
    return {f"{p}#rep{int(r)}": sorted(set(g["split_fingerprint"].dropna()))
            for (p, r), g in ok.groupby(["problem", "rep"])}


def _machines(units: pd.DataFrame) -> list[Machine]:
    machines: Counter = Counter()
    for host, v in zip(units["host"], units["versions"]):
        v = v if isinstance(v, dict) else {}
        machines[(host or "unknown", v.get("cpu_count", "not recorded"),
                  v.get("platform", "not recorded"), v.get("cpu"))] += 1
    return [Machine(host=h, cpu_count=c, platform=pl, units=n, cpu=cpu)
            for (h, c, pl, cpu), n in sorted(machines.items(),
                                                  key=lambda kv: [str(x or "") for x in kv[0]])]


def _provenance(units: pd.DataFrame, dataset: str) -> Provenance:
    ok = units[units["status"] == "ok"]
    vers = [v for v in units["versions"] if isinstance(v, dict)]
    protos = [p for p in units["protocol"] if isinstance(p, dict)]
    proto = dict(protos[0]) if protos else {}
    proto.pop("reps", None)
    fps = _split_fingerprints(ok)
    h = hashlib.sha256()
    for k in sorted(fps):
        h.update(f"{k}:{','.join(fps[k])}\n".encode())
    started = _short(units["started_at"])
    finished = _short(units["finished_at"])
    return Provenance(
        generated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        dataset=dataset,
        mtlbench_versions=_short(v.get("mtlbench") for v in vers),
        plugin_versions=_short(v.get("plugin") for v in vers),
        numpy_versions=_short(v.get("numpy") for v in vers),
        scipy_versions=_short(v.get("scipy") for v in vers),
        python_versions=_short(v.get("python") for v in vers),
        protocol=proto, seed=proto.get("seed"),
        planned_reps=_short(p.get("reps") for p in protos),
        dataset_params=units["dataset_params"].iloc[0] if len(units) else None,
        data_fingerprints={p: _short(g["data_fingerprint"]) for p, g in ok.groupby("problem")},
        split_fingerprints=fps,
        split_fingerprints_consistent=all(len(v) == 1 for v in fps.values()),
        split_digest=h.hexdigest()[:16], machines=_machines(units),
        units=int(len(units)), units_ok=int(len(ok)),
        units_failed=int((units["status"] != "ok").sum()),
        time_total_s=float(units["time_total"].fillna(0).sum()),
        first_started_at=started[0] if started else None,
        last_finished_at=finished[-1] if finished else None)


__all__ = ["unit_records"]
