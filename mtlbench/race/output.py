"""A race's rows (the ``races`` table of the store), its CSV records and its JSON file."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence


from ..protocol import config_json

from .reference import level_times
from .runs import LEVELS, RACE_FORMAT, RaceResult, Reference


def race_rows(result: RaceResult) -> list[dict[str, Any]]:
    """One row per run (the ``races`` table's columns; also the JSON and CSV output)."""
    rows = []
    proto = {**result.config.split_settings(), "rep": result.rep}
    for r in result.runs:
        e = r.entry
        ref = result.references.get(e.label, Reference(None, "none"))
        ident = {"problem": result.problem, "dataset_params": result.dataset_params,
                 "rep": result.rep, "split": result.config.split_settings(), "model": e.label,
                 "solver": e.solver, "role": e.role, "variant": e.variant,
                 "params": dict(e.params), "provenance": result.provenance.get(e.model)}
        rows.append({
            "key": hashlib.sha256(config_json(ident).encode()).hexdigest()[:32],
            "race": result.race_id, "dataset": result.dataset, "problem": result.problem,
            "rep": result.rep, "seed": result.seed, "model": e.label, "model_name": e.model,
            "solver": e.solver, "role": e.role, "variant": e.variant,
            "params": dict(e.params), "origin": dict(e.origin), "status": r.status,
            "message": r.message,
            "curve": {k: [p[k] for p in r.curve()] for k in
                      ("time", "iteration", "objective", "certificate")},
            "elapsed": r.elapsed, "final_objective": r.final_objective,
            "objective_source": r.objective_source, "converged": r.converged,
            "n_iter": r.n_iter, "certificate": r.certificate,
            "levels": level_times(r, ref), "reference": ref.to_json(),
            "agreement": result.agreements.get(e.label),
            "split_fingerprint": result.split_fingerprint,
            "data_fingerprint": result.data_fingerprint,
            "dataset_params": result.dataset_params, "protocol": proto,
            "versions": result.versions, "provenance": result.provenance.get(e.model),
            "host": r.host, "started_at": r.started_at, "finished_at": r.finished_at})
    return rows


CSV_COLUMNS = ("problem", "rep", "seed", "model", "solver", "role", "variant", "status",
               "time_1e-02", "time_1e-04", "time_1e-06", "elapsed", "final_objective",
               "suboptimality", "converged", "n_iter", "certificate", "reference",
               "reference_kind", "agreement", "message")


def csv_records(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Flat records of race rows (the CSV output and the printed table)."""
    out = []
    for r in rows:
        ref = r.get("reference") or {}
        agr = r.get("agreement") or {}
        levels = r.get("levels") or {}
        sub = None
        if ref.get("value") is not None and r.get("final_objective") is not None:
            sub = (r["final_objective"] - ref["value"]) / max(abs(ref["value"]), 1e-300)
        out.append({
            "problem": r["problem"], "rep": r["rep"], "seed": r["seed"], "model": r["model"],
            "solver": r["solver"], "role": r["role"], "variant": r.get("variant") or "",
            "status": r["status"], **{f"time_{k}": levels.get(k) for k in
                                      (f"{lv:.0e}" for lv in LEVELS)},
            "elapsed": r.get("elapsed"), "final_objective": r.get("final_objective"),
            "suboptimality": sub, "converged": r.get("converged"), "n_iter": r.get("n_iter"),
            "certificate": r.get("certificate"), "reference": ref.get("value"),
            "reference_kind": ref.get("kind"),
            "agreement": None if agr.get("ok") is None else ("yes" if agr["ok"] else "NO"),
            "message": r.get("message") or ""})
    return out


def to_json(result: RaceResult, rows: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({
        "format": RACE_FORMAT, "race": result.race_id, "dataset": result.dataset,
        "problem": result.problem, "rep": result.rep, "seed": result.seed,
        "split_fingerprint": result.split_fingerprint,
        "data_fingerprint": result.data_fingerprint, "problem_summary": result.summary,
        "levels": list(LEVELS),
        "references": {k: v.to_json() for k, v in result.references.items()},
        "agreements": result.agreements, "runs": list(rows)}, indent=1, default=repr)
