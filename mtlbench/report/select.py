"""Which units of a results store count for a table: the one selection rule.

``mtlbench results``, ``mtlbench leaderboard``, ``mtlbench publish`` and the figures all read
the store through :func:`select_units`, so they always describe the same units.

The rule, per dataset
---------------------
1. **Filters** the user asked for: ``models`` (a model label, or a registry name matching every
   label of that model, e.g. ``tfcl`` matches ``tfcl[k=5]``) and ``problems``.
2. **One seed**: ``seed`` if given, else the seed with most units (ties: the most recently
   finished).  Units of other seeds are left out (and counted).
3. **One protocol setting**: among the remaining units, the protocol settings other than the
   seed and the planned repetitions (fractions, protocol version, search and budget when
   stored) together with the dataset parameters; the setting with most units is kept (ties:
   the newest).
4. **The latest code per model label**: a label's units are grouped by what produced them (the
   model configuration — fixed parameters and search space — and the code fingerprints and
   plugin version stored in ``versions``); the group of the most recently finished unit is
   kept, older ones are left out ("an older search space or code").
5. **One unit per (label, problem, repetition)**: an ok one if there is one, else the newest.
6. **Planned repetitions**: the largest ``reps`` stored in the kept units' protocol; every
   (label, problem) is expected to finish repetitions 0..reps-1.  Units whose repetition
   lies beyond it cannot exist after step 3 but are left out if they do.

What the rule left out is returned as counted sentences (``Selection.notes``), and the
progress of each model (planned / finished / failed / missing units) together with models
that are absent — named in ``expected`` (the planned set, e.g. ``--models``) or having units
of the same seed for other datasets of the store — is in ``Selection.progress`` and
``Selection.absent``.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from ..errors import ConfigError
from ..protocol import config_json

_canon = config_json

#: words in a ``versions`` key or a unit column that mark a fingerprint of the code that
#: produced the unit (the model's distribution version is the ``plugin`` entry)
CODE_WORDS = ("code", "fingerprint", "hash", "source", "provenance")


@dataclass
class Selection:
    """The units a table is built from and what the rule left out."""

    units: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    seeds: dict[str, Any] = field(default_factory=dict)          # dataset -> seed used
    planned_reps: dict[str, int] = field(default_factory=dict)   # dataset -> reps
    problems: dict[str, list[str]] = field(default_factory=dict)  # dataset -> problems
    progress: pd.DataFrame = field(default_factory=pd.DataFrame)  # one row per dataset x model
    absent: dict[str, list[str]] = field(default_factory=dict)   # dataset -> absent models

    def __iter__(self):  # ``units, notes = select_units(...)`` keeps working
        return iter((self.units, self.notes))


def _model_matches(label: str, wanted: Sequence[str]) -> bool:
    return label in wanted or label.split("[", 1)[0] in wanted


def _settings(row: pd.Series) -> str:
    proto = dict(row["protocol"] or {}) if isinstance(row["protocol"], dict) else {}
    proto.pop("reps", None)
    proto.pop("seed", None)
    return _canon({"protocol": proto, "dataset_params": row["dataset_params"]})


def _provenance(row: pd.Series) -> str:
    """What produced a unit: the model configuration, the plugin distribution and version,
    and every stored code fingerprint (``versions`` keys or row columns naming code, a
    fingerprint or a hash; the split and data fingerprints are not code)."""
    vers = row["versions"] if isinstance(row["versions"], dict) else {}
    code = {k: v for k, v in vers.items()
            if k == "plugin" or any(w in k for w in CODE_WORDS)}
    for col in row.index:
        if col not in ("split_fingerprint", "data_fingerprint") and not col.startswith("_") \
                and any(w in col for w in CODE_WORDS):
            code[col] = row[col]
    return _canon({"config": row["model_config"], "code": code})


def _newest(df: pd.DataFrame) -> Any:
    return df["finished_at"].fillna("").max()


def _choose(df: pd.DataFrame, col: str) -> Any:
    """The value of ``col`` with most units (ties: the most recently finished)."""
    counts = Counter(df[col])
    newest = df.groupby(col)["finished_at"].max().fillna("")
    return max(counts, key=lambda v: (counts[v], newest.get(v, ""), str(v)))


def _planned(protocol: Any) -> int | None:
    try:
        return int(protocol.get("reps")) if isinstance(protocol, dict) else None
    except (TypeError, ValueError):
        return None


def select_units(store, dataset: str | Sequence[str] | None = None, *, seed: int | None = None,
                 models: Sequence[str] | None = None, problems: Sequence[str] | None = None,
                 expected: Sequence[str] | None = None, all_units: pd.DataFrame | None = None
                 ) -> Selection:
    """Apply the selection rule (module docstring) to ``store``.

    ``dataset``: one dataset name, several, or None (every dataset with results).
    ``problems``: problem ids (``shoes/brown``) or dataset names; ``expected``: model labels
    the run planned (absent ones are named).  Raises :class:`ConfigError` when nothing is
    left, naming what the store holds."""
    df = store.units() if all_units is None else all_units
    present = sorted(set(df["dataset"])) if not df.empty else []
    datasets = _datasets_asked(store, dataset, present)
    sel = Selection(units=df.iloc[0:0])
    left: Counter = Counter()
    kept, progress = [], []
    wanted = list(models) if models else None
    for ds in datasets:
        d = _filtered(df[df["dataset"] == ds], ds, problems, wanted, left)
        if d.empty:
            continue
        d = _one_seed(d, ds, seed, sel, left)                               # 2.
        if d.empty:
            continue
        d = _latest_code(_one_setting(d, ds, sel, left), ds, sel, left)     # 3. and 4.
        d = _one_per_repetition(d, left)                                    # 5.
        d = _planned_repetitions(d, ds, sel, left)                          # 6.
        sel.problems[ds] = sorted(d["problem"].unique())
        progress += _progress_rows(d, ds, sel.planned_reps[ds], len(sel.problems[ds]))
        _name_absent(df, d, ds, sel, expected, wanted)
        kept.append(d.drop(columns=["_settings", "_prov", "_ok"]))
    if not kept:
        what = f" for models {', '.join(wanted)}" if wanted else ""
        what += f" with seed {seed}" if seed is not None else ""
        raise ConfigError(f"no results{what} in the store {str(store.path)!r} for "
                          f"{', '.join(datasets)}; datasets with results: "
                          f"{', '.join(present) or 'none'}")
    sel.units = (pd.concat(kept).sort_values(["dataset", "problem", "model", "rep"])
                 .reset_index(drop=True))
    sel.left_out = {k: int(v) for k, v in left.items() if v}
    sel.progress = pd.DataFrame(progress, columns=["dataset", "model", "planned", "finished",
                                                   "failed", "missing"])
    return sel


def _datasets_asked(store, dataset: str | Sequence[str] | None, present: list[str]) -> list[str]:
    if dataset is None:
        datasets = present
    else:
        datasets = [dataset] if isinstance(dataset, str) else list(dataset)
        missing = [d for d in datasets if d not in present]
        if missing:
            d = missing[0]
            raise ConfigError(f"no results for dataset {d!r} in the store {str(store.path)!r}; "
                              f"datasets with results: {', '.join(present) or 'none'}. "
                              f"Run 'mtlbench compare --datasets {d} --store ...' first.")
    if not datasets:
        raise ConfigError(f"the store {str(store.path)!r} holds no results; run 'mtlbench "
                          "compare --store ...' first")
    return datasets


def _filtered(d: pd.DataFrame, ds: str, problems: Sequence[str] | None,
              wanted: list[str] | None, left: Counter) -> pd.DataFrame:
    """1. the problems and models asked for."""
    if problems:
        d = d[d["problem"].map(lambda p: any(p == q or p.startswith(q + "/") or q == ds
                                             for q in problems))]
    if wanted:
        n0 = len(d)
        d = d[d["model"].map(lambda m: _model_matches(m, wanted))]
        left["other models (not asked for)"] += n0 - len(d)
    return d


def _one_seed(d: pd.DataFrame, ds: str, seed: int | None, sel: Selection,
              left: Counter) -> pd.DataFrame:
    """2. the seed asked for, else the one with most units."""
    if seed is not None:
        other = d[d["seed"] != seed]
        for s, n in Counter(other["seed"]).items():
            sel.notes.append(f"{ds}: left out {n} unit(s) of seed {s} (shown with --seed {s}).")
        left["other seeds"] += len(other)
        d = d[d["seed"] == seed]
        if d.empty:
            return d
    else:
        chosen = _choose(d, "seed")
        for s, n in sorted(Counter(d[d["seed"] != chosen]["seed"]).items()):
            sel.notes.append(f"{ds}: left out {n} unit(s) of seed {s} (this table uses "
                             f"seed {chosen}; see them with --seed {s}).")
            left["other seeds"] += n
        d = d[d["seed"] == chosen]
    sel.seeds[ds] = int(d["seed"].iloc[0])
    return d


def _one_setting(d: pd.DataFrame, ds: str, sel: Selection, left: Counter) -> pd.DataFrame:
    """3. one protocol setting and set of dataset parameters: the one with most units."""
    d = d.assign(_settings=d.apply(_settings, axis=1))
    if d["_settings"].nunique() > 1:
        chosen = _choose(d, "_settings")
        n = int((d["_settings"] != chosen).sum())
        sel.notes.append(f"{ds}: left out {n} unit(s) of other protocol settings or dataset "
                         f"parameters (this table uses {json.loads(chosen)}).")
        left["other protocol settings"] += n
        d = d[d["_settings"] == chosen]
    return d


def _latest_code(d: pd.DataFrame, ds: str, sel: Selection, left: Counter) -> pd.DataFrame:
    """4. per model label, the configuration and code of its most recently finished unit."""
    d = d.assign(_prov=d.apply(_provenance, axis=1))
    parts = []
    for label, g in d.groupby("model", sort=True):
        if g["_prov"].nunique() > 1:
            newest = g.sort_values("finished_at", na_position="first").iloc[-1]["_prov"]
            n = int((g["_prov"] != newest).sum())
            sel.notes.append(f"{ds}: left out {n} unit(s) of {label} from an older search "
                             "space, fixed parameters or code (the newest is shown).")
            left["older configuration or code"] += n
            g = g[g["_prov"] == newest]
        parts.append(g)
    return pd.concat(parts) if parts else d


def _one_per_repetition(d: pd.DataFrame, left: Counter) -> pd.DataFrame:
    """5. one unit per (label, problem, repetition): an ok one if there is one, else the
    newest."""
    n0 = len(d)
    d = (d.assign(_ok=(d["status"] == "ok").astype(int))
         .sort_values(["_ok", "finished_at"], na_position="first")
         .drop_duplicates(["model", "problem", "rep"], keep="last"))
    if len(d) < n0:
        left["duplicates"] += n0 - len(d)
    return d


def _planned_repetitions(d: pd.DataFrame, ds: str, sel: Selection,
                         left: Counter) -> pd.DataFrame:
    """6. the largest planned ``reps`` of the kept units; units beyond it are left out."""
    planned = [p for p in map(_planned, d["protocol"]) if p]
    reps = max(planned) if planned else int(d["rep"].max()) + 1
    beyond = d[d["rep"] >= reps]
    if len(beyond):
        sel.notes.append(f"{ds}: left out {len(beyond)} unit(s) beyond the planned "
                         f"{reps} repetitions.")
        left["beyond the planned repetitions"] += len(beyond)
        d = d[d["rep"] < reps]
    sel.planned_reps[ds] = reps
    return d


def _progress_rows(d: pd.DataFrame, ds: str, reps: int, n_problems: int) -> list[dict[str, Any]]:
    """Per model: planned / finished / failed / missing units."""
    out = []
    for label, g in d.groupby("model", sort=True):
        ok = int((g["status"] == "ok").sum())
        failed = int((g["status"] != "ok").sum())
        planned_units = reps * n_problems
        out.append({"dataset": ds, "model": label, "planned": planned_units, "finished": ok,
                    "failed": failed, "missing": max(planned_units - ok - failed, 0)})
    return out


def _name_absent(df: pd.DataFrame, d: pd.DataFrame, ds: str, sel: Selection,
                 expected: Sequence[str] | None, wanted: list[str] | None) -> None:
    """Models planned (``expected``) or present for other datasets of this seed that have no
    unit here."""
    here = set(d["model"])
    others = df[(df["dataset"] != ds) & (df["seed"] == sel.seeds[ds])]
    cand = set(expected or []) | set(others["model"])
    if wanted:
        cand = {m for m in cand if _model_matches(m, wanted)}
    absent = sorted(m for m in cand if m not in here
                    and not any(h.split("[", 1)[0] == m for h in here))
    if absent:
        sel.absent[ds] = absent
        sel.notes.append(f"{ds}: no unit at all for {', '.join(absent)} (planned, or run on "
                         "other datasets of this seed).")


def left_out_text(sel: Selection) -> str:
    """One line: ``left out: 5 units of other seeds; 3 units of older configuration or code``."""
    if not sel.left_out:
        return "left out: nothing"
    return "left out: " + "; ".join(f"{n} unit(s) of {why}" if why.startswith("other")
                                    or why.startswith("older") else f"{n} unit(s): {why}"
                                    for why, n in sel.left_out.items())


def auc_x100(test_auc: Any) -> tuple[Any, float | None, float | None]:
    """Test AUCs on the 0-1 scale (one per repetition, in repetition order) as every table and
    frame shows them: the values x 100, their mean and their sample standard deviation (ddof
    1; None for fewer than two values).  Scaled before averaging, in one place, so that a
    number is the same float, and rounds the same way, wherever it is shown."""
    import numpy as np

    scores = 100.0 * np.asarray(test_auc, dtype=np.float64)
    n = scores.shape[0]
    return (scores, float(scores.mean()) if n else None,
            float(scores.std(ddof=1)) if n > 1 else None)


def results_frame(sel: Selection) -> pd.DataFrame:
    """One row per (dataset, problem, model) of a selection: mean ± std test AUC (x100) over
    the finished repetitions, finished / planned / failed units, seed, run time; sorted by
    problem, then mean AUC (best first).  What ``mtlbench results`` shows, and the end of
    ``compare`` for its run's units."""
    u = sel.units
    recs = []
    for (ds, prob, model), g in u.groupby(["dataset", "problem", "model"], sort=True):
        ok = g[g["status"] == "ok"].sort_values("rep")
        _, mean, std = auc_x100(ok["test_auc"])
        recs.append({"dataset": ds, "problem": prob, "model": model,
                     "test_auc_mean_x100": mean, "test_auc_std_x100": std,
                     "reps": int(len(ok)), "planned_reps": sel.planned_reps.get(ds),
                     "failed": int((g["status"] != "ok").sum()),
                     "seed": sel.seeds.get(ds),
                     "time_total_s": float(g["time_total"].fillna(0).sum())})
    df = pd.DataFrame(recs)
    if not df.empty:
        df = df.sort_values(["problem", "test_auc_mean_x100"], ascending=[True, False],
                            na_position="last")
    return df.reset_index(drop=True)


def problem_kinds(units: pd.DataFrame) -> dict[str, str]:
    """The target kind of each problem of a unit table (its units' ``target_kind``; units
    stored before target kinds existed are binary)."""
    from ..store import unit_target_kind

    out: dict[str, str] = {}
    for _, r in units.iterrows():
        out.setdefault(r["problem"], unit_target_kind(r))
    return out


def metric_frame(units: pd.DataFrame, metric: str, table_units: bool = False) -> pd.DataFrame:
    """One row per (problem, model) of ``units``: mean and std (ddof 1) over the finished
    repetitions of ``metric``'s test value (in the metric's own units; with ``table_units``, a
    percent metric x 100 before averaging, as the leaderboards compute it, so a number is the
    same float wherever it is shown), ``reps`` (units with a value), ``not_recorded``
    (finished units without one: stored before the metric existed, undefined, or failed),
    ``failed`` units and ``time_total_s``."""
    from ..scoring import get_metric
    from ..store import unit_metric

    scale = 100.0 if table_units and get_metric(metric).percent else 1.0
    recs = []
    for (prob, model), g in units.groupby(["problem", "model"], sort=True):
        ok = g[g["status"] == "ok"]
        vals = [scale * v for v in (unit_metric(r, metric) for _, r in ok.iterrows())
                if v is not None]
        arr = pd.Series(vals, dtype=float)
        recs.append({"problem": prob, "model": model, "metric": metric,
                     "mean": float(arr.mean()) if len(arr) else None,
                     "std": float(arr.std(ddof=1)) if len(arr) > 1 else None,
                     "reps": len(vals), "not_recorded": int(len(ok) - len(vals)),
                     "failed": int((g["status"] != "ok").sum()),
                     "time_total_s": float(g["time_total"].fillna(0).sum())})
    return pd.DataFrame(recs, columns=["problem", "model", "metric", "mean", "std", "reps",
                                       "not_recorded", "failed", "time_total_s"])


# ------------------------------------------------------------------ search trace (defensive)
def search_trace(grid: Any, protocol: Any = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(fits, unit-level search info) from a unit's stored ``grid`` JSON.

    Reads both layouts: the old list of ``{params, val_auc}`` and the search trace (a list of
    fits ``{params, val_auc, converged, n_iter, fit_time, phase}``, or a dict holding such a
    list under ``fits``/``trace`` beside ``search``, ``budget``, ``n_fits``, ``at_bound``,
    ``at_edge``, ``budget_exhausted``).  Missing search info is taken from the protocol
    settings (``search``, ``budget``) when stored there."""
    info: dict[str, Any] = {}
    fits: list[dict[str, Any]] = []
    if isinstance(grid, dict):
        for k in ("fits", "trace", "grid"):
            if isinstance(grid.get(k), list):
                fits = [f for f in grid[k] if isinstance(f, dict)]
                break
        info = {k: v for k, v in grid.items() if k not in ("fits", "trace", "grid")}
    elif isinstance(grid, list):
        fits = [f for f in grid if isinstance(f, dict)]
    if isinstance(protocol, dict):
        for k in ("search", "budget"):
            if k not in info and protocol.get(k) is not None:
                info[k] = protocol[k]
    info.setdefault("n_fits", len(fits))
    return fits, info


def row_search(row: pd.Series) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(fits, search info) of a unit row: the ``trace`` column when the store has one, else
    the ``grid`` column; unit-level info also read from ``diagnostics['search']`` and the
    protocol settings."""
    stored = row.get("trace") if "trace" in row.index else None
    if isinstance(stored, str):
        try:
            stored = json.loads(stored)
        except ValueError:
            stored = None
    fits, info = search_trace(stored if stored else row.get("grid"), row.get("protocol"))
    diag = row.get("diagnostics")
    if isinstance(diag, dict) and isinstance(diag.get("search"), dict):
        info = {**diag["search"], **info}
    return fits, info


def _search_info(row: pd.Series) -> dict[str, Any]:
    """The unit's stored search summary (``diagnostics['search']`` and what the trace
    column holds beside the fits)."""
    return row_search(row)[1]


def selected_fit_converged(row: pd.Series) -> bool | None:
    """Whether the search fit at the selected parameters converged (the fit whose validation
    AUC chose them): the model's ``converged_`` after that fit, as the search summary
    recorded it (``selected_converged``), else, in units stored before the summary recorded
    it, the trace entry at the selected parameters; None when nothing was recorded."""
    info = _search_info(row)
    if "selected_converged" in info:
        flag = info["selected_converged"]
        return flag if isinstance(flag, bool) else None
    fits, _ = row_search(row)
    best = row.get("best_params")
    for f in fits:
        if f.get("params") == best and isinstance(f.get("converged"), bool):
            return f["converged"]
    return None


def refit_converged(row: pd.Series) -> bool | None:
    """Whether the refit on train+validation (the model scored on test) converged: the
    model's ``converged_`` after the refit, as the search summary recorded it
    (``refit_converged``; the same meaning as :func:`selected_fit_converged`), else, in units
    stored before the summary recorded it, the model's own ``diagnostics_['converged']`` of
    that fit, else a unit-level ``converged`` column; None when nothing was recorded."""
    info = _search_info(row)
    if "refit_converged" in info:
        flag = info["refit_converged"]
        return flag if isinstance(flag, bool) else None
    diag = row.get("diagnostics")
    if isinstance(diag, dict) and isinstance(diag.get("converged"), bool):
        return diag["converged"]
    flag = row.get("converged")  # a unit-level column, if the store has one
    if flag is not None and not isinstance(flag, (dict, list, str)) and not pd.isna(flag):
        return bool(flag)
    return None


def degenerate(row: pd.Series) -> bool | None:
    """Whether the selected fit is degenerate (the search summary's ``degenerate``: constant
    validation scores on at least a quarter of the tasks); None for units stored before the
    search recorded it."""
    flag = _search_info(row).get("degenerate")
    return flag if isinstance(flag, bool) else None


def constant_share(row: pd.Series) -> float | None:
    """Share of tasks with constant validation scores in the selected fit, when stored."""
    share = _search_info(row).get("selected_constant_share")
    return float(share) if isinstance(share, (int, float)) and not isinstance(share, bool) \
        else None


def failed_fits(row: pd.Series) -> int:
    """Fits of the unit's search that raised (trace entries with an ``error``): the unit is
    ok, but its search lost them."""
    fits, _ = row_search(row)
    return sum(1 for f in fits if f.get("error"))


def search_fits_not_converged(row: pd.Series) -> tuple[int, int]:
    """(fits of the unit's search whose model said it did not converge -- ``converged``
    False in the trace: stopped at its iteration cap or short of its certificate --, fits
    that recorded the flag)."""
    fits, _ = row_search(row)
    flags = [f["converged"] for f in fits if isinstance(f.get("converged"), bool)]
    return sum(1 for c in flags if not c), len(flags)


def at_bound(row: pd.Series) -> list[str] | None:
    """Searched parameters whose selected value sits at a declared bound of the model: the
    stored ``at_bound`` list, else computed from a stored space whose entries declare
    ``low``/``high``; None when the unit records no bounds (an old list-style space)."""
    fits, info = row_search(row)
    if isinstance(info.get("at_bound"), list):
        return [str(p) for p in info["at_bound"]]
    cfg = row.get("model_config")
    space = cfg.get("space", {}) if isinstance(cfg, dict) else {}
    best = row.get("best_params") if isinstance(row.get("best_params"), dict) else {}
    declared = {k: d for k, d in (space or {}).items()
                if isinstance(d, dict) and ("low" in d or "high" in d)}
    if not declared:
        return None
    return [k for k, d in declared.items() if k in best and any(
        d.get(b) is not None and best[k] == d.get(b) for b in ("low", "high"))]


def at_edge(row: pd.Series) -> list[str] | None:
    """The stored ``at_edge`` list (selection at an edge of what was searched, not a bound);
    None when the unit does not record it."""
    _, info = row_search(row)
    return [str(p) for p in info["at_edge"]] if isinstance(info.get("at_edge"), list) else None


def n_fits(row: pd.Series) -> int:
    fits, info = row_search(row)
    try:
        return int(info.get("n_fits", len(fits)))
    except (TypeError, ValueError):
        return len(fits)


def budget(row: pd.Series) -> int | None:
    _, info = row_search(row)
    try:
        return None if info.get("budget") is None else int(info["budget"])
    except (TypeError, ValueError):
        return None


__all__ = ["Selection", "select_units", "left_out_text", "results_frame", "metric_frame",
           "problem_kinds", "search_trace",
           "row_search", "selected_fit_converged", "refit_converged", "degenerate",
           "constant_share", "failed_fits", "at_bound", "at_edge", "n_fits", "budget",
           "CODE_WORDS"]
