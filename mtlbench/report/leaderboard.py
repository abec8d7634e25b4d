"""Leaderboards from the results store: honest tables with significance and provenance.

One leaderboard per dataset: rows = models (labels as stored), columns = the dataset's problems,
cells = mean ± std (ddof 1) of the test AUC x 100 over repetitions.

Statistics (all computed here, from the stored per-repetition and per-task scores)
------------------------------------------------------------------------------
* **Best per column**: the highest mean (ties: every equal-best cell), in bold.
* **Paired test against the best, per problem**: for every other model, a two-sided Wilcoxon
  signed-rank test (``scipy.stats.wilcoxon``, zero differences dropped, exact distribution
  when scipy can use it) on the differences best - model over the repetitions both finished;
  the p-values of one column are Holm-corrected (step-down, family = the other models of that
  column); a cell is marked † when its Holm-adjusted p < ``alpha`` (0.05).  With n paired
  repetitions the smallest attainable two-sided exact p is 2 / 2^n, so for n < 6 no cell can be
  marked: the table says so instead of hiding it.  All differences zero -> p = 1.
* **Average rank**: each block (problem, repetition) in which every ranked model finished ranks
  the models by test AUC (1 = best, ties share the average rank); the column is the mean rank
  over those blocks (the statistic of the Friedman test, Demšar 2006).
* **Friedman test** (``scipy.stats.friedmanchisquare``, needs >= 3 models): over the
  (problem, repetition) blocks above, and, when the dataset has >= 2 problems, across problems
  on the per-problem mean AUC (blocks = problems).
* **Win/tie/loss against the baseline** (the model whose class declares ``is_baseline``;
  the built-in ``stl``): per (problem, repetition, task name) pair in which both finished, the
  model's task test AUC is higher / equal (|diff| <= 1e-12) / lower.
* **The search**: per model the fits per unit (budget), units whose selection sits at a
  declared bound, units whose selected fit did not converge, and selections at a non-bound
  edge of what was searched (read from each unit's stored search trace).  A model whose mean
  test AUC is within ``CHANCE_MARGIN`` (2) points of 50 is flagged ≈ (chance level).

Honesty rules: the units come from the one selection rule of
:mod:`mtlbench.report.select` (one seed, one protocol setting, the latest code per model
label), and the table says what it left out; failed units are counted per cell and per model,
never dropped silently; repetitions per cell are printed whenever they differ; a model with
fewer finished repetitions than the most complete model is flagged (⚠); a partial run states
planned vs finished units and names absent models.

Outputs: :func:`to_markdown` (tabulate, pipe format), :func:`to_json` (the same numbers and
provenance; the markdown is rendered from this very structure), :func:`to_csv` (one row per
model x problem).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import math
from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from ..protocol import config_json
from .select import (Selection, at_bound, at_edge, budget, n_fits, select_units,
                     selected_converged)
from .render import (GENERATED_MARKER, SORT_HEADER, _fmt_seconds, _machines_text,  # noqa: F401
                     cell_text, render, to_csv, to_json, to_markdown)
from .stats import TIE_TOL, block_ranks, friedman, holm, min_attainable_p, wilcoxon_p

_canon = config_json

FORMAT_VERSION = "mtlbench-leaderboard/2"  # 2: per-unit records, search columns
ALPHA = 0.05
CHANCE_MARGIN = 2.0  # test AUC x 100 within this of 50 is flagged as chance level
TEST_NAME = ("two-sided Wilcoxon signed-rank test (scipy.stats.wilcoxon) on paired "
             "repetitions against the column's best model")
CORRECTION = "Holm step-down, per column (family = the other models of the problem)"


# =============================================================================== building
def _short(values: Iterable[Any]) -> list[Any]:
    return sorted({v for v in values if v is not None and v == v}, key=str)


def declared_baseline(labels: Sequence[str], units: pd.DataFrame | None = None) -> str | None:
    """The label of the model that declares itself the win/tie/loss baseline
    (``MTLModel.is_baseline``), looked up through the model registry; None if none does."""
    from .roles import model_class_of

    for label in sorted(labels, key=lambda s: ("[" in s, s)):
        cls = model_class_of(label, units)
        if cls is not None and getattr(cls, "is_baseline", False):
            return label
    return None


def build_leaderboard(store, dataset: str, *, baseline: str | None = None,
                      alpha: float = ALPHA, seed: int | None = None,
                      models: Sequence[str] | None = None,
                      expected: Sequence[str] | None = None,
                      selection: Selection | None = None) -> dict[str, Any]:
    """The leaderboard of ``dataset`` as a JSON-able dict (the single source of every format).

    Units are chosen by :func:`mtlbench.report.select.select_units` (``seed``, ``models``,
    ``expected``: the planned model set).  ``baseline``: the label of the win/tie/loss
    baseline; default: the model that declares ``is_baseline``."""
    sel = selection or select_units(store, dataset, seed=seed, models=models, expected=expected)
    units = sel.units[sel.units["dataset"] == dataset]
    notes = [n.split(": ", 1)[1] if n.startswith(f"{dataset}: ") else n for n in sel.notes
             if n.startswith(f"{dataset}: ") or ": " not in n[:40]]
    if baseline is None:
        baseline = declared_baseline(sorted(units["model"].unique()), units)
    problems = sorted(units["problem"].unique())
    models = sorted(units["model"].unique())
    ok = units[units["status"] == "ok"]

    # ---- cells
    cells: dict[str, dict[str, dict[str, Any]]] = {m: {} for m in models}
    for m in models:
        for p in problems:
            u = units[(units["model"] == m) & (units["problem"] == p)]
            uok = u[u["status"] == "ok"].sort_values("rep")
            scores = (100.0 * uok["test_auc"].to_numpy(dtype=np.float64))
            n = int(scores.shape[0])
            cells[m][p] = {
                "n": n, "failed": int((u["status"] != "ok").sum()),
                "mean": float(scores.mean()) if n else None,
                "std": float(scores.std(ddof=1)) if n > 1 else None,
                "reps": [int(r) for r in uok["rep"]], "test_auc_x100": scores.tolist(),
                "best": False, "p_value": None, "p_holm": None, "n_pairs": 0,
                "significantly_worse": None,
            }

    # ---- per problem: best, Wilcoxon vs best, Holm
    small_n_columns = []
    for p in problems:
        means = {m: cells[m][p]["mean"] for m in models if cells[m][p]["mean"] is not None}
        if not means:
            continue
        top = max(means.values())
        best_models = [m for m, v in means.items() if v == top]
        best = best_models[0]
        for m in best_models:
            cells[m][p]["best"] = True
        bscore = dict(zip(cells[best][p]["reps"], cells[best][p]["test_auc_x100"]))
        tested, pvals = [], []
        for m in means:
            if m == best:
                continue
            mscore = dict(zip(cells[m][p]["reps"], cells[m][p]["test_auc_x100"]))
            common = sorted(set(bscore) & set(mscore))
            diffs = [bscore[r] - mscore[r] for r in common]
            cells[m][p]["n_pairs"] = len(common)
            pv = wilcoxon_p(diffs)
            cells[m][p]["p_value"] = pv
            if pv is not None:
                tested.append(m)
                pvals.append(pv)
        for m, adj in zip(tested, holm(pvals)):
            cells[m][p]["p_holm"] = adj
            cells[m][p]["significantly_worse"] = bool(adj < alpha)
        weak = [{"model": m, "pairs": cells[m][p]["n_pairs"],
                 "min_attainable_p": min_attainable_p(cells[m][p]["n_pairs"])}
                for m in means if m != best
                and min_attainable_p(cells[m][p]["n_pairs"]) >= alpha]
        m_tests = max(len(tested), 1)
        holm_blocked = bool(tested) and all(
            min_attainable_p(cells[m][p]["n_pairs"]) >= alpha / m_tests for m in tested)
        if weak or holm_blocked:
            small_n_columns.append({"problem": p, "models": weak, "comparisons": len(tested),
                                    "all": len(weak) == len(means) - 1 or holm_blocked})

    # ---- ranks and Friedman over (problem, rep) blocks
    ranked = [m for m in models if all(cells[m][p]["n"] > 0 for p in problems)]
    piv = ok[ok["model"].isin(ranked)].pivot_table(index=["problem", "rep"], columns="model",
                                                   values="test_auc", aggfunc="first")
    piv = piv.reindex(columns=ranked).dropna()
    scores = 100.0 * piv.to_numpy(dtype=np.float64)
    ranks = block_ranks(scores) if len(ranked) else np.empty((0, 0))
    avg_rank = {m: float(ranks[:, j].mean()) for j, m in enumerate(ranked)} if len(piv) else {}
    fried_blocks = friedman(scores) if len(ranked) else friedman(np.empty((0, 0)))
    fried_blocks["blocks_are"] = "(problem, repetition) pairs in which every ranked model finished"
    fried_problems: dict[str, Any] | None = None
    if len(problems) >= 2:
        pm = np.array([[cells[m][p]["mean"] for m in ranked] for p in problems], dtype=float) \
            if ranked else np.empty((0, 0))
        fried_problems = friedman(pm)
        fried_problems["blocks_are"] = "problems (per-problem mean test AUC)"

    # ---- win/tie/loss against the baseline, per task
    wtl: dict[str, dict[str, Any] | None] = {m: None for m in models}
    if baseline is not None and baseline in models:
        ts = store.task_scores(keys=ok["key"])
        ts = ts[ts["key"].isin(set(ok["key"]))]
        base = ts[ts["model"] == baseline][["problem", "rep", "task_name", "test_auc"]]
        for m in models:
            if m == baseline:
                continue
            mine = ts[ts["model"] == m][["problem", "rep", "task_name", "test_auc"]]
            j = mine.merge(base, on=["problem", "rep", "task_name"], suffixes=("", "_base"))
            diff = (j["test_auc"] - j["test_auc_base"]).to_numpy()
            per_problem = {}
            for p in problems:
                dp = diff[(j["problem"] == p).to_numpy()]
                per_problem[p] = {"win": int((dp > TIE_TOL).sum()),
                                  "tie": int((np.abs(dp) <= TIE_TOL).sum()),
                                  "loss": int((dp < -TIE_TOL).sum())}
            wtl[m] = {"win": int((diff > TIE_TOL).sum()),
                      "tie": int((np.abs(diff) <= TIE_TOL).sum()),
                      "loss": int((diff < -TIE_TOL).sum()), "per_problem": per_problem}
    else:
        notes.append(f"No '{baseline}' results for this dataset: the win/tie/loss column is empty."
                     if baseline else "No model of this table declares itself the baseline "
                     "(is_baseline): the win/tie/loss column is empty.")

    # ---- rows
    progress = {r["model"]: r for r in sel.progress[sel.progress["dataset"] == dataset]
                .to_dict("records")} if not sel.progress.empty else {}
    max_reps = max((sum(cells[m][p]["n"] for p in problems) for m in models), default=0)
    rows = []
    for m in models:
        um = units[units["model"] == m]
        finished = sum(cells[m][p]["n"] for p in problems)
        vers = um["versions"].dropna()
        prog = progress.get(m, {})
        overall = [cells[m][p]["mean"] for p in problems if cells[m][p]["mean"] is not None]
        mean_all = float(np.mean(overall)) if overall else None
        rows.append({
            "model": m, "avg_rank": avg_rank.get(m), "reps_finished": finished,
            "search": search_summary(um[um["status"] == "ok"]),
            "failed": int((um["status"] != "ok").sum()), "fewer_reps": finished < max_reps,
            "planned_units": int(prog.get("planned", 0)),
            "finished_units": int(prog.get("finished", finished)),
            "missing_units": int(prog.get("missing", 0)),
            "mean_test_auc_x100": mean_all,
            "near_chance": mean_all is not None and abs(mean_all - 50.0) <= CHANCE_MARGIN,
            "win_tie_loss": wtl[m], "time_total_s": float(um["time_total"].fillna(0).sum()),
            # units imported from published files (import-results), and those of them
            # recomputed here and found equal (--verify)
            "imported_units": int(um.get("origin", pd.Series(dtype=object))
                                  .isin(["imported", "verified"]).sum()),
            "verified_units": int((um.get("origin", pd.Series(dtype=object))
                                   == "verified").sum()),
            "plugin": _short(v.get("plugin") for v in vers),
            "cells": cells[m],
        })
    def _overall(r: dict[str, Any]) -> float:
        vals = [c["mean"] for c in r["cells"].values() if c["mean"] is not None]
        return float(np.mean(vals)) if vals else -math.inf

    rows.sort(key=lambda r: (r["avg_rank"] is None, r["avg_rank"] or 0.0, -_overall(r),
                             r["model"]))
    unranked = [m for m in models if m not in ranked]
    if unranked:
        notes.append(f"Not ranked (no finished repetition on some problem): {', '.join(unranked)}.")
    if fried_blocks["blocks"] and len(piv) < len(ok[["problem", "rep"]].drop_duplicates()):
        notes.append(f"Ranks use the {len(piv)} (problem, repetition) blocks in which every "
                     "ranked model finished.")

    imported = [r for r in rows if r["imported_units"]]
    if imported:
        notes.append("ⁱ after a model: units imported from a published file (import-results), "
                     "not computed in this store; ✓: some of them recomputed here and found "
                     "equal (import-results --verify): " + ", ".join(
                         f"{r['model']} ({r['imported_units']} imported, {r['verified_units']} "
                         "verified)" for r in imported) + ".")
    chance = [r["model"] for r in rows if r["near_chance"]]
    if chance:
        notes.append(f"≈ after a model: its mean test AUC is within {CHANCE_MARGIN:g} points of "
                     f"50 (chance level): {', '.join(chance)}.")
    n_set = {cells[m][p]["n"] for m in models for p in problems}
    planned = sel.planned_reps.get(dataset)
    absent = sel.absent.get(dataset, [])
    complete = all(r["missing_units"] == 0 and r["failed"] == 0 for r in rows) and not absent
    tests = {
        "alpha": alpha, "pairwise_test": TEST_NAME, "correction": CORRECTION,
        "marker": "†", "marker_meaning": (f"significantly worse than the column's best model: "
                                          f"Holm-adjusted p < {alpha}"),
        "small_n_columns": small_n_columns,
        "friedman_over_problem_reps": fried_blocks, "friedman_over_problems": fried_problems,
        "ranked_models": ranked,
    }
    return {
        "format": FORMAT_VERSION, "dataset": dataset, "problems": problems,
        "models": [r["model"] for r in rows],
        "baseline": baseline if baseline is not None and baseline in models else None,
        "sort_key": "avg_rank", "seed": sel.seeds.get(dataset),
        "planned_reps": planned, "absent_models": absent, "complete": complete,
        "left_out": sel.left_out,
        "scale": "test AUC x 100 (mean over tasks of the per-task AUC), mean ± std over repetitions",
        "reps_differ": len(n_set) > 1, "reps_per_cell": sorted(n_set),
        "rows": rows, "tests": tests, "notes": notes,
        "provenance": _provenance(units, dataset),
        "task_names": _task_names(store, ok),
        "units": unit_records(store, units),
    }


def search_summary(units: pd.DataFrame) -> dict[str, Any]:
    """Per model: the fits per unit (stored budget and fits used), units whose selection sits
    at a declared bound, units whose selected fit did not converge (or recorded nothing), and
    units whose selection sits at a non-bound edge of what was searched (the search's
    ``at_edge``; a defect of the starting grid or of the budget)."""
    budgets = sorted({b for b in (budget(r) for _, r in units.iterrows()) if b is not None})
    fits = [n_fits(r) for _, r in units.iterrows()]
    bound_units, bound_params, edge_units, edge_params = 0, set(), 0, set()
    not_conv, unknown_conv, edge_known, bound_known = 0, 0, 0, 0
    for _, r in units.iterrows():
        b = at_bound(r)
        if b is not None:
            bound_known += 1
            bound_units += bool(b)
            bound_params.update(b)
        e = at_edge(r)
        if e is not None:
            edge_known += 1
            edge_units += bool(e)
            edge_params.update(e)
        c = selected_converged(r)
        not_conv += c is False
        unknown_conv += c is None
    return {"units": int(len(units)), "budget": budgets,
            "fits_min": min(fits) if fits else None, "fits_max": max(fits) if fits else None,
            "at_bound": int(bound_units) if bound_known else None,
            "at_bound_params": sorted(bound_params),
            "at_edge": int(edge_units) if edge_known else None,
            "at_edge_params": sorted(edge_params),
            "not_converged": int(not_conv), "converged_unknown": int(unknown_conv)}


def _task_names(store, ok: pd.DataFrame) -> dict[str, list[str]]:
    """Per problem, the task names of its first ok unit (units refer to them by position)."""
    out: dict[str, list[str]] = {}
    if ok.empty:
        return out
    ts = store.task_scores(keys=ok["key"])
    for p, g in ok.groupby("problem"):
        first = ts[ts["key"] == g.iloc[0]["key"]].sort_values("task_index")
        out[p] = [str(n) for n in first["task_name"]]
    return out


UNIT_FIELDS = ("key", "model", "problem", "rep", "seed", "status", "best_params", "val_auc",
               "test_auc", "n_tasks", "dropped_tasks", "split_fingerprint", "data_fingerprint",
               "protocol", "dataset_params", "model_config", "versions", "n_iter", "time_total",
               "time_select", "time_fit", "diagnostics", "message", "started_at", "finished_at",
               "host", "provenance", "origin")


def unit_records(store, units: pd.DataFrame) -> list[dict[str, Any]]:
    """Per unit what a leaderboard needs (and :func:`mtlbench.report.publish.import_results`
    reads back): identity, selected hyperparameters, the search trace (parameters, validation
    AUC, converged flag per fit) and its summary, split and data fingerprints, protocol, code
    versions, and per task the test AUC and number of test labels (in the order of
    ``task_names[problem]``; a unit whose tasks differ carries its own ``task_names``)."""
    ts = store.task_scores(keys=units["key"]) if len(units) else pd.DataFrame(
        columns=["key", "task_index", "task_name", "test_auc", "n_test"])
    by_key = {k: g.sort_values("task_index") for k, g in ts.groupby("key")}
    first_names: dict[str, list[str]] = {}
    out = []
    for _, r in units.sort_values(["problem", "model", "rep"]).iterrows():
        rec = {f: r.get(f) for f in UNIT_FIELDS}
        fits, info = _trace_for_json(r)
        rec["search"] = info
        rec["trace"] = fits
        rec["selected_converged"] = selected_converged(r)
        g = by_key.get(r["key"])
        if g is not None and len(g):
            names = [str(n) for n in g["task_name"]]
            ref = first_names.setdefault(r["problem"], names)
            rec["task_auc"] = [float(a) for a in g["test_auc"]]
            rec["n_test"] = [int(n) for n in g["n_test"]]
            if names != ref:
                rec["task_names"] = names
        out.append(rec)
    return out


def _trace_for_json(r: pd.Series) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from .select import row_search

    fits, info = row_search(r)
    keep = ("params", "val_auc", "converged", "n_iter", "fit_time", "phase", "error")
    return [{k: f[k] for k in keep if k in f} for f in fits], info


def _provenance(units: pd.DataFrame, dataset: str) -> dict[str, Any]:
    ok = units[units["status"] == "ok"]
    vers = [v for v in units["versions"] if isinstance(v, dict)]
    protos = [p for p in units["protocol"] if isinstance(p, dict)]
    proto = dict(protos[0]) if protos else {}
    proto.pop("reps", None)
    # split fingerprints: one per (problem, rep) if every model saw the same split
    fps: dict[str, list[str]] = {}
    for (p, r), g in ok.groupby(["problem", "rep"]):
        fps[f"{p}#rep{int(r)}"] = sorted(set(g["split_fingerprint"].dropna()))
    consistent = all(len(v) == 1 for v in fps.values())
    h = hashlib.sha256()
    for k in sorted(fps):
        h.update(f"{k}:{','.join(fps[k])}\n".encode())
    machines = Counter()
    for host, v in zip(units["host"], units["versions"]):
        v = v if isinstance(v, dict) else {}
        machines[(host or "unknown", v.get("cpu_count", "not recorded"),
                  v.get("platform", "not recorded"))] += 1
    started = _short(units["started_at"])
    finished = _short(units["finished_at"])
    return {
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "dataset": dataset,
        "mtlbench_versions": _short(v.get("mtlbench") for v in vers),
        "plugin_versions": _short(v.get("plugin") for v in vers),
        "numpy_versions": _short(v.get("numpy") for v in vers),
        "scipy_versions": _short(v.get("scipy") for v in vers),
        "python_versions": _short(v.get("python") for v in vers),
        "protocol": proto, "seed": proto.get("seed"),
        "planned_reps": _short(p.get("reps") for p in protos),
        "dataset_params": units["dataset_params"].iloc[0] if len(units) else None,
        "data_fingerprints": {p: _short(g["data_fingerprint"]) for p, g in ok.groupby("problem")},
        "split_fingerprints": fps, "split_fingerprints_consistent": consistent,
        "split_digest": h.hexdigest()[:16],
        "machines": [{"host": h_, "cpu_count": c, "platform": pl, "units": n}
                     for (h_, c, pl), n in sorted(machines.items())],
        "units": int(len(units)), "units_ok": int(len(ok)),
        "units_failed": int((units["status"] != "ok").sum()),
        "time_total_s": float(units["time_total"].fillna(0).sum()),
        "first_started_at": started[0] if started else None,
        "last_finished_at": finished[-1] if finished else None,
    }




__all__ = ["build_leaderboard", "declared_baseline", "search_summary", "unit_records",
           "to_markdown", "to_json", "to_csv", "render", "cell_text", "FORMAT_VERSION",
           "GENERATED_MARKER", "SORT_HEADER", "CHANCE_MARGIN"]
