"""Leaderboards from the results store: honest tables with significance and provenance.

One leaderboard per dataset and metric: rows = models (labels as stored), columns = the
dataset's problems, cells = mean ± std (ddof 1) over repetitions of the metric's test value
(x 100 for a share or an AUC: ``Metric.percent``).  The default metric is the data set's
primary one (test AUC for binary targets, RMSE for real-valued ones); every metric that
applies to the targets has its table (``metric=``).  Every statistic respects the metric's
direction (``Metric.higher_is_better``): "best" is the highest AUC and the lowest RMSE.

Statistics (all computed here, from the stored per-repetition and per-task scores)
------------------------------------------------------------------------------
* **Best per column**: the best mean in the metric's direction (ties: every equal-best cell),
  in bold.
* **Paired test against the best, per problem**: for every other model, a two-sided Wilcoxon
  signed-rank test (:func:`mtlbench.report.stats.wilcoxon_p`: zero differences dropped, tied
  |differences| share their average rank, p exact over the 2^n sign assignments for n <= 25
  pairs) on the differences best - model over the repetitions both finished; the p-values of
  one column are Holm-corrected (step-down, family = the other models of that column); a
  cell is marked † when its Holm-adjusted p < ``alpha`` (0.05).  With n paired repetitions
  the smallest attainable two-sided exact p is 2 / 2^n, so for n < 6 no cell can be marked:
  the table says so instead of hiding it.  All differences zero -> p = 1.
* **Average rank**: each block (problem, repetition) in which every ranked model finished ranks
  the models by the metric (1 = best in its direction, ties share the average rank); the
  column is the mean rank over those blocks (the statistic of the Friedman test, Demšar 2006).
* **Friedman test** (``scipy.stats.friedmanchisquare``, needs >= 3 models): over the
  (problem, repetition) blocks above, and, when the dataset has >= 2 problems, across problems
  on the per-problem means (blocks = problems).
* **Win/tie/loss against the baseline** (the model whose class declares ``is_baseline``;
  the built-in ``stl``): per (problem, repetition, task name) pair in which both finished, the
  model's task value is better / equal (|diff| <= 1e-12) / worse (pairs where the task's value
  is undefined are not counted).
* **Δ% over the baseline** (LibMTL's Δp; docs/reports.md): per problem, 100 x the mean over
  the repetitions both finished of s (M_model - M_base) / |M_base| (s = +1 when higher is
  better, -1 when lower), averaged over the problems: positive = better than the baseline.
* **The search**: per model the fits per unit (budget), units whose selection sits at a
  declared bound, degenerate selections (the selected fit gives constant validation scores to
  at least a quarter of the tasks; listed by unit), units whose selected search fit did not
  converge and, counted apart, units whose refit did not (each "not recorded" where the unit
  or model did not say), search fits that raised (the unit is ok, its search lost them), and
  selections at a non-bound edge of what was searched (read from each unit's stored search
  trace).  A model whose mean is within ``CHANCE_MARGIN`` (2) points of the metric's chance
  level (an AUC of 50) is flagged ≈.  In a table of a threshold metric (accuracy, error rate),
  a model whose loss is invariant to a shift of its scores (``shift_invariant_loss``) is
  flagged ◦: the sign threshold is no decision it learned.

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

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import ConfigError
from ..protocol import config_json
from ..store import recorded_metrics, unit_metric, unit_target_kind
from .imported import IMPORTED, VERIFIED
from .render import (GENERATED_MARKER, SORT_HEADER, cell_text, render, to_csv, to_json,
                     to_markdown)
from .schema import (FORMAT_VERSION, Cell, FriedmanResult, Leaderboard, Row, SearchSummary,
                     SmallNColumn, TaskCounts, Tests, WeakComparison, WinTieLoss)
from .select import (Selection, at_bound, at_edge, budget, constant_share, degenerate,
                     failed_fits, n_fits, problem_kinds, refit_converged,
                     search_fits_not_converged, select_units, selected_fit_converged)
from .arithmetic import arithmetic_notes
from .records import _provenance, _short, _task_names, unit_records
from .stats import TIE_TOL, block_ranks, friedman, holm, min_attainable_p, wilcoxon_p

_canon = config_json

ALPHA = 0.05
CHANCE_MARGIN = 2.0  # a percent metric within this of 100 x its chance level is flagged
TEST_NAME = ("two-sided Wilcoxon signed-rank test on paired repetitions against the column's "
             "best model (exact p over every sign assignment for n <= 25 pairs, tied "
             "|differences| at their average rank, zero differences dropped)")
CORRECTION = "Holm step-down, per column (family = the other models of the problem)"

#: cells of a table: ``cells[model][problem]``
Cells = dict[str, dict[str, Cell]]


# =============================================================================== building
def declared_baseline(labels: Sequence[str], units: pd.DataFrame | None = None) -> str | None:
    """The label of the model that declares itself the win/tie/loss baseline
    (``MTLModel.is_baseline``), looked up through the model registry; None if none does."""
    from .roles import model_class_of

    for label in sorted(labels, key=lambda s: ("[" in s, s)):
        cls = model_class_of(label, units)
        if cls is not None and getattr(cls, "is_baseline", False):
            return label
    return None


def table_metric(units: pd.DataFrame, dataset: str, metric: str | None = None):
    """(the metric of ``dataset``'s table, its problems, the problems left out): ``metric``,
    else the primary metric of the data set's target kind (of most of its problems); the
    problems are those whose target kind the metric applies to.  A :class:`ConfigError` (one
    line) when it applies to none."""
    from ..metrics import target_kind_text
    from ..scoring import get_metric, metrics_for, primary_metric

    kinds = problem_kinds(units)
    if metric is None:
        counts = Counter(kinds.values())
        metric = primary_metric(max(sorted(counts), key=lambda k: counts[k]))
    m = get_metric(metric)
    problems = sorted(p for p, k in kinds.items() if k in m.target_kinds)
    if not problems:
        kind = next(iter(kinds.values()), "binary")
        raise ConfigError(f"--metric {m.name} applies to "
                          f"{' and '.join(map(target_kind_text, m.target_kinds))} targets, but "
                          f"{dataset} has {target_kind_text(kind)} targets; its metrics: "
                          f"{', '.join(x.name for x in metrics_for(kind))}")
    return m, problems, sorted(set(kinds) - set(problems))


def build_leaderboard(store, dataset: str, *, baseline: str | None = None,
                      alpha: float = ALPHA, seed: int | None = None,
                      models: Sequence[str] | None = None,
                      expected: Sequence[str] | None = None,
                      selection: Selection | None = None,
                      metric: str | None = None) -> Leaderboard:
    """The :class:`~mtlbench.report.schema.Leaderboard` of ``dataset`` for ``metric`` (the
    single source of every format; default: the data set's primary metric,
    :func:`table_metric`).

    Units are chosen by :func:`mtlbench.report.select.select_units` (``seed``, ``models``,
    ``expected``: the planned model set).  ``baseline``: the label of the win/tie/loss
    baseline; default: the model that declares ``is_baseline``."""
    from .roles import binarized

    sel = selection or select_units(store, dataset, seed=seed, models=models, expected=expected)
    units = sel.units[sel.units["dataset"] == dataset]
    notes = [n.split(": ", 1)[1] if n.startswith(f"{dataset}: ") else n for n in sel.notes
             if n.startswith(f"{dataset}: ") or ": " not in n[:40]]
    m, problems, other_kind = table_metric(units, dataset, metric)
    if other_kind:
        notes.append(f"Problems of other target kinds, not in this {m.name} table: "
                     f"{', '.join(other_kind)}.")
    units = units[units["problem"].isin(problems)]
    labels = sorted(units["model"].unique())
    if baseline is None:
        baseline = declared_baseline(labels, units)
    ok = units[units["status"] == "ok"]

    cells = _cells(units, labels, problems, m)
    small_n = [col for p in problems if (col := _test_column(cells, p, alpha, m)) is not None]
    ranking = _rank(ok, cells, labels, problems, m)
    wtl = _win_tie_loss(store, ok, labels, problems, baseline, m)
    if wtl is None:
        notes.append(f"No '{baseline}' results for this dataset: the win/tie/loss column is empty."
                     if baseline else "No model of this table declares itself the baseline "
                     "(is_baseline): the win/tie/loss column is empty.")
    rows = _rows(units, sel, dataset, cells, problems, ranking.avg_rank, wtl or {}, m, baseline)
    notes += _ranking_notes(rows, ranking, ok, m)
    notes += _metric_notes(rows, ok, m)
    notes += _other_code_notes(units)
    notes += arithmetic_notes(store, units, dataset)

    n_set = {cells[m][p].n for m in labels for p in problems}
    absent = sel.absent.get(dataset, [])
    tests = Tests(
        alpha=alpha, pairwise_test=TEST_NAME, correction=CORRECTION, marker="†",
        marker_meaning=(f"significantly worse than the column's best model: Holm-adjusted "
                        f"p < {alpha}"),
        small_n_columns=small_n, friedman_over_problem_reps=ranking.over_blocks,
        friedman_over_problems=ranking.over_problems, ranked_models=ranking.ranked)
    return Leaderboard(
        format=FORMAT_VERSION, dataset=dataset, problems=problems,
        models=[r.model for r in rows],
        baseline=baseline if baseline is not None and baseline in labels else None,
        sort_key="avg_rank", seed=sel.seeds.get(dataset),
        planned_reps=sel.planned_reps.get(dataset), absent_models=absent,
        complete=all(r.missing_units == 0 and r.failed == 0 for r in rows) and not absent,
        left_out=sel.left_out,
        scale=f"{m.heading()}: {m.description}; mean ± std over repetitions",
        reps_differ=len(n_set) > 1, reps_per_cell=sorted(n_set),
        rows=rows, tests=tests, notes=notes,
        provenance=_provenance(units, dataset),
        task_names=_task_names(store, ok),
        units=unit_records(store, units), metric=m.name,
        higher_is_better=m.higher_is_better, binarized=binarized(dataset),
        other_metrics=_other_metrics(ok, m))


def unit_value(row: pd.Series, metric) -> float | None:
    """A stored unit's test value of ``metric`` in table units (x 100 for a percent metric);
    None when the unit did not record it."""
    v = unit_metric(row, metric.name)
    return None if v is None else (100.0 * v if metric.percent else v)


def _cells(units: pd.DataFrame, labels: Sequence[str], problems: Sequence[str],
           metric) -> Cells:
    """Per (model, problem): the finished repetitions' values of ``metric`` (table units),
    those that did not record it, and failures."""
    cells: Cells = {m: {} for m in labels}
    for m in labels:
        for p in problems:
            u = units[(units["model"] == m) & (units["problem"] == p)]
            uok = u[u["status"] == "ok"].sort_values("rep")
            got = [(int(r["rep"]), v) for _, r in uok.iterrows()
                   if (v := unit_value(r, metric)) is not None]
            scores = np.array([v for _, v in got], dtype=np.float64)
            n = int(scores.shape[0])
            cells[m][p] = Cell(
                n=n, failed=int((u["status"] != "ok").sum()),
                mean=float(scores.mean()) if n else None,
                std=float(scores.std(ddof=1)) if n > 1 else None,
                reps=[r for r, _ in got], values=scores.tolist(),
                test_auc_x100=scores.tolist() if metric.name == "auc" else None,
                not_recorded=int(len(uok) - n))
    return cells


def _test_column(cells: Cells, p: str, alpha: float, metric) -> SmallNColumn | None:
    """Mark the best cell(s) of problem ``p`` (in the metric's direction), test every other
    model against the best (Wilcoxon on paired repetitions, Holm over the column); return the
    column's comparisons that cannot reach ``alpha`` with their pairs, or None when every one
    can."""
    means = {m: metric.oriented(c[p].mean) for m, c in cells.items() if c[p].mean is not None}
    if not means:
        return None
    top = max(means.values())
    best_models = [m for m, v in means.items() if v == top]
    best = best_models[0]
    for m in best_models:
        cells[m][p].best = True
    bscore = dict(zip(cells[best][p].reps, cells[best][p].scores))
    tested, pvals = [], []
    for m in means:
        if m == best:
            continue
        cell = cells[m][p]
        mscore = dict(zip(cell.reps, cell.scores))
        common = sorted(set(bscore) & set(mscore))
        cell.n_pairs = len(common)
        cell.p_value = wilcoxon_p([metric.oriented(bscore[r] - mscore[r]) for r in common])
        if cell.p_value is not None:
            tested.append(m)
            pvals.append(cell.p_value)
    for m, adj in zip(tested, holm(pvals)):
        cells[m][p].p_holm = adj
        cells[m][p].significantly_worse = bool(adj < alpha)
    weak = [WeakComparison(model=m, pairs=cells[m][p].n_pairs,
                           min_attainable_p=min_attainable_p(cells[m][p].n_pairs))
            for m in means if m != best and min_attainable_p(cells[m][p].n_pairs) >= alpha]
    m_tests = max(len(tested), 1)
    holm_blocked = bool(tested) and all(
        min_attainable_p(cells[m][p].n_pairs) >= alpha / m_tests for m in tested)
    if not (weak or holm_blocked):
        return None
    return SmallNColumn(problem=p, models=weak, comparisons=len(tested),
                        all=len(weak) == len(means) - 1 or holm_blocked)


@dataclass
class _Ranking:
    ranked: list[str]              # models with a finished repetition on every problem
    avg_rank: dict[str, float]
    blocks_used: int               # (problem, repetition) blocks where every ranked model finished
    over_blocks: FriedmanResult
    over_problems: FriedmanResult | None


def _rank(ok: pd.DataFrame, cells: Cells, labels: Sequence[str],
          problems: Sequence[str], metric) -> _Ranking:
    """Average ranks and the Friedman test over (problem, repetition) blocks, and the
    Friedman test across problems on the per-problem means, on values oriented so that higher
    is better (rank 1 = the best in the metric's direction)."""
    ranked = [m for m in labels if all(cells[m][p].n > 0 for p in problems)]
    recs = [{"problem": p, "rep": r, "model": m, "value": metric.oriented(v)}
            for m in ranked for p in problems for r, v in zip(cells[m][p].reps,
                                                              cells[m][p].scores)]
    piv = pd.DataFrame(recs, columns=["problem", "rep", "model", "value"]).pivot_table(
        index=["problem", "rep"], columns="model", values="value", aggfunc="first")
    piv = piv.reindex(columns=ranked).dropna()
    scores = piv.to_numpy(dtype=np.float64)
    ranks = block_ranks(scores) if len(ranked) else np.empty((0, 0))
    avg_rank = {m: float(ranks[:, j].mean()) for j, m in enumerate(ranked)} if len(piv) else {}
    over_blocks = friedman(scores) if len(ranked) else friedman(np.empty((0, 0)))
    over_blocks.blocks_are = "(problem, repetition) pairs in which every ranked model finished"
    over_problems = None
    if len(problems) >= 2:
        pm = np.array([[metric.oriented(cells[m][p].mean) for m in ranked] for p in problems],
                      dtype=float) if ranked else np.empty((0, 0))
        over_problems = friedman(pm)
        over_problems.blocks_are = f"problems (per-problem mean test {metric.label})"
    return _Ranking(ranked=ranked, avg_rank=avg_rank, blocks_used=len(piv),
                    over_blocks=over_blocks, over_problems=over_problems)


def _counts(diff: np.ndarray) -> dict[str, int]:
    return {"win": int((diff > TIE_TOL).sum()), "tie": int((np.abs(diff) <= TIE_TOL).sum()),
            "loss": int((diff < -TIE_TOL).sum())}


def _win_tie_loss(store, ok: pd.DataFrame, labels: Sequence[str], problems: Sequence[str],
                  baseline: str | None, metric) -> dict[str, WinTieLoss] | None:
    """Per model, per-task wins / ties / losses against the baseline in the metric's
    direction (undefined task values not counted); None without a baseline."""
    if baseline is None or baseline not in labels:
        return None
    ts = store.task_values(metric.name, keys=ok["key"])
    ts = ts[ts["key"].isin(set(ok["key"]))].dropna(subset=["value"])
    cols = ["problem", "rep", "task_name", "value"]
    base = ts[ts["model"] == baseline][cols]
    out = {}
    for m in labels:
        if m == baseline:
            continue
        j = ts[ts["model"] == m][cols].merge(base, on=["problem", "rep", "task_name"],
                                             suffixes=("", "_base"))
        diff = metric.oriented(1.0) * (j["value"] - j["value_base"]).to_numpy()
        per_problem = {p: TaskCounts(**_counts(diff[(j["problem"] == p).to_numpy()]))
                       for p in problems}
        out[m] = WinTieLoss(**_counts(diff), per_problem=per_problem)
    return out


def delta_vs_baseline(cells: Cells, model: str, baseline: str | None,
                      problems: Sequence[str], metric) -> float | None:
    """Δ% of ``model`` over ``baseline`` (module docstring; LibMTL's Δp): per problem 100 x the
    mean over paired repetitions of s (M - M_base) / |M_base|, s the metric's direction,
    averaged over the problems with pairs; None for the baseline itself or without pairs (or
    when M_base = 0 in every pair)."""
    if baseline is None or model == baseline or baseline not in cells:
        return None
    per_problem = []
    for p in problems:
        base = dict(zip(cells[baseline][p].reps, cells[baseline][p].scores))
        mine = dict(zip(cells[model][p].reps, cells[model][p].scores))
        rel = [metric.oriented(mine[r] - base[r]) / abs(base[r]) for r in sorted(set(base) &
                                                                                 set(mine))
               if base[r] != 0]
        if rel:
            per_problem.append(100.0 * float(np.mean(rel)))
    return float(np.mean(per_problem)) if per_problem else None


def _rows(units: pd.DataFrame, sel: Selection, dataset: str, cells: Cells,
          problems: Sequence[str], avg_rank: dict[str, float],
          wtl: dict[str, WinTieLoss], metric, baseline: str | None) -> list[Row]:
    """One row per model, sorted by average rank (unranked last), then the overall mean in
    the metric's direction."""
    from .roles import model_class_of

    progress = {r["model"]: r for r in sel.progress[sel.progress["dataset"] == dataset]
                .to_dict("records")} if not sel.progress.empty else {}
    max_reps = max((sum(c[p].n for p in problems) for c in cells.values()), default=0)
    rows = []
    for m, mc in cells.items():
        um = units[units["model"] == m]
        finished = sum(mc[p].n for p in problems)
        prog = progress.get(m, {})
        # an older store read as it is has no origin column: nothing in it was imported
        origin = um["origin"] if "origin" in um else pd.Series(dtype=object)
        overall = [mc[p].mean for p in problems if mc[p].mean is not None]
        mean_all = float(np.mean(overall)) if overall else None
        chance = None if metric.chance is None else \
            (100.0 * metric.chance if metric.percent else metric.chance)
        cls = model_class_of(m, units)
        rows.append(Row(
            model=m, avg_rank=avg_rank.get(m), reps_finished=finished,
            search=search_summary(um[um["status"] == "ok"]),
            failed=int((um["status"] != "ok").sum()), fewer_reps=finished < max_reps,
            planned_units=int(prog.get("planned", 0)),
            finished_units=int(prog.get("finished", finished)),
            missing_units=int(prog.get("missing", 0)),
            mean_test_auc_x100=mean_all if metric.name == "auc" else None,
            near_chance=(mean_all is not None and chance is not None
                         and abs(mean_all - chance) <= CHANCE_MARGIN),
            win_tie_loss=wtl.get(m), time_total_s=float(um["time_total"].fillna(0).sum()),
            plugin=_short(v.get("plugin") for v in um["versions"].dropna()),
            cells=mc, imported_units=int(origin.isin([IMPORTED, VERIFIED]).sum()),
            verified_units=int((origin == VERIFIED).sum()), mean=mean_all,
            delta_vs_baseline=delta_vs_baseline(cells, m, baseline, problems, metric),
            shift_invariant=bool(getattr(cls, "shift_invariant_loss", False))))
    rows.sort(key=lambda r: (r.avg_rank is None, r.avg_rank or 0.0,
                             -(metric.oriented(r.mean) if r.mean is not None else -math.inf),
                             r.model))
    return rows


def _other_code_notes(units: pd.DataFrame) -> list[str]:
    """One sentence per model label with units that an installed model's current code would
    not have made (its code fingerprint or plugin version changed since): a table shows what
    is stored, so it says when that is not what the installed code computes.  Units without a
    stored fingerprint, and models or datasets not installed here (imported third-party
    results), are not judged."""
    from ..plugins import get_registry
    from ..provenance import other_code_units

    try:
        other = other_code_units(units, get_registry(), judge_unknown=False)
    except Exception:  # noqa: BLE001 - a note must not stop a table
        return []
    total = Counter(units["model"])
    why: dict[str, Counter] = {}
    for label, key in zip(units["model"], units["key"]):
        for reason in other.get(key, ()):
            why.setdefault(label, Counter())[reason] += 1
    return [f"{label}: {max(c.values())} of its {total[label]} unit(s) were made by other code "
            f"than is installed now ({'; '.join(sorted(c))}); the table shows them as that "
            "code computed them ('mtlbench compare' would recompute them)."
            for label, c in sorted(why.items())]


def _other_metrics(ok: pd.DataFrame, metric) -> list[str]:
    """The metrics besides ``metric`` that finished units of the table recorded, in the
    metric table's order (the tables published beside it)."""
    from ..scoring import metrics_for

    if ok.empty:
        return []
    recorded = set().union(*(recorded_metrics(r) for _, r in ok.iterrows()))
    return [x.name for x in metrics_for(unit_target_kind(ok.iloc[0]))
            if x.name != metric.name and x.name in recorded]


def _metric_notes(rows: Sequence[Row], ok: pd.DataFrame, metric) -> list[str]:
    """The units that did not record the metric, the models whose threshold metric is not
    a decision they learned, and the tasks whose test targets are constant (their per-task
    nMSE and explained variance are undefined)."""
    notes = []
    missing = [(r.model, sum(c.not_recorded for c in r.cells.values())) for r in rows]
    missing = [(m, n) for m, n in missing if n]
    if missing:
        notes.append(f"{metric.name} not recorded by finished units stored before it was (an "
                     "older mtlbench recorded the AUC only), undefined or failed there; the "
                     "cells count the others: " + ", ".join(f"{m} ({n})" for m, n in missing)
                     + ".")
    if metric.threshold:
        flagged = [r.model for r in rows if r.shift_invariant]
        if flagged:
            notes.append(f"◦ after a model: its loss is invariant to a shift of its scores (a "
                         f"pairwise ranking surrogate), so the sign threshold of the "
                         f"{metric.label} is no decision it learned: the value says where its "
                         f"regulariser left the scores' offset; compare such models on AUC: "
                         f"{', '.join(flagged)}.")
    flat = []
    for _, r in ok.iterrows():
        diag = r.get("diagnostics")
        if isinstance(diag, dict) and diag.get("constant_test_targets"):
            flat.append(f"{r['model']} {r['problem']} rep {int(r['rep'])}: "
                        f"{', '.join(diag['constant_test_targets'])}")
    if flat and metric.name in ("nmse", "explained-variance"):
        shown = "; ".join(flat[:5]) + (f"; and {len(flat) - 5} more unit(s)"
                                      if len(flat) > 5 else "")
        notes.append("Tasks whose test targets are all equal (their per-task nMSE and explained "
                     "variance are undefined and not counted in W/T/L; the pooled values of "
                     f"the cells include their rows): {shown}.")
    return notes


def _ranking_notes(rows: Sequence[Row], ranking: _Ranking, ok: pd.DataFrame,
                   metric) -> list[str]:
    notes = []
    unranked = sorted(r.model for r in rows if r.model not in ranking.ranked)
    if unranked:
        notes.append(f"Not ranked (no finished repetition on some problem): {', '.join(unranked)}.")
    if ranking.over_blocks.blocks and \
            ranking.blocks_used < len(ok[["problem", "rep"]].drop_duplicates()):
        notes.append(f"Ranks use the {ranking.blocks_used} (problem, repetition) blocks in "
                     "which every ranked model finished.")
    imported = [r for r in rows if r.imported_units]
    if imported:
        notes.append("ⁱ after a model: units imported from a published file (import-results), "
                     "not computed in this store; ✓: some of them recomputed here and found "
                     "equal (import-results --verify): " + ", ".join(
                         f"{r.model} ({r.imported_units} imported, {r.verified_units} verified)"
                         for r in imported) + ".")
    chance = [r.model for r in rows if r.near_chance]
    if chance:
        notes.append(f"≈ after a model: its mean test {metric.label} is within "
                     f"{CHANCE_MARGIN:g} points of {100 * metric.chance:g} (chance level): "
                     f"{', '.join(chance)}.")
    return notes


def search_summary(units: pd.DataFrame) -> SearchSummary:
    """Per model: the fits per unit (stored budget and fits used), units whose selection sits
    at a declared bound or at a non-bound edge of what was searched (the search's
    ``at_edge``; a defect of the starting grid or of the budget), units whose selected search
    fit and whose refit did not converge (each with the units that recorded nothing),
    degenerate selections, search fits that raised, and search fits that did not converge
    (of those that recorded it, with the units that had any)."""
    budgets = sorted({b for b in (budget(r) for _, r in units.iterrows()) if b is not None})
    fits = [n_fits(r) for _, r in units.iterrows()]
    bound, edge = _Flagged(), _Flagged()
    sel_conv, refit_conv, degen = _Flagged(), _Flagged(), _Flagged()
    n_failed_fits, failed_fit_units = 0, []
    capped, recorded, capped_units = 0, 0, []
    for _, r in units.iterrows():
        n_capped, n_recorded = search_fits_not_converged(r)
        capped, recorded = capped + n_capped, recorded + n_recorded
        if n_capped:
            capped_units.append(f"{_unit_label(r)} ({n_capped}/{n_recorded})")
        bound.add(at_bound(r))
        edge.add(at_edge(r))
        sel_conv.add(None if (c := selected_fit_converged(r)) is None else not c)
        refit_conv.add(None if (c := refit_converged(r)) is None else not c)
        if degen.add(degenerate(r)):
            share = constant_share(r)
            degen.units.append(_unit_label(r) + (f" ({100 * share:.0f} % of tasks constant)"
                                                 if share is not None else ""))
        if n := failed_fits(r):
            n_failed_fits += n
            failed_fit_units.append(f"{_unit_label(r)} ({n})")
    return SearchSummary(
        units=int(len(units)), budget=budgets,
        fits_min=min(fits) if fits else None, fits_max=max(fits) if fits else None,
        at_bound=bound.count(), at_bound_params=sorted(bound.params),
        at_edge=edge.count(), at_edge_params=sorted(edge.params),
        selected_not_converged=sel_conv.hits, selected_converged_unknown=sel_conv.unknown,
        refit_not_converged=refit_conv.hits, refit_converged_unknown=refit_conv.unknown,
        degenerate=degen.count(), degenerate_unknown=degen.unknown, degenerate_units=degen.units,
        failed_fits=n_failed_fits, failed_fit_units=failed_fit_units,
        search_not_converged=capped if recorded else None,
        search_converged_recorded=recorded if recorded else None,
        search_not_converged_units=capped_units)


@dataclass
class _Flagged:
    """Units with a flag set, units that recorded it, and what they named."""

    hits: int = 0
    known: int = 0
    unknown: int = 0
    params: set = field(default_factory=set)
    units: list = field(default_factory=list)

    def add(self, flag: Any) -> bool:
        """Count one unit's flag (None: not recorded; a list: the parameters it names, set
        when non-empty); True when the flag is set."""
        if flag is None:
            self.unknown += 1
            return False
        self.known += 1
        if isinstance(flag, list):
            self.params.update(flag)
        self.hits += bool(flag)
        return bool(flag)

    def count(self) -> int | None:
        return self.hits if self.known else None


def _unit_label(r: pd.Series) -> str:
    rep = r.get("rep")
    return f"{r.get('problem', '?')} rep {int(rep) if rep is not None else '?'}"


__all__ = ["build_leaderboard", "declared_baseline", "search_summary", "unit_records",
           "to_markdown", "to_json", "to_csv", "render", "cell_text", "FORMAT_VERSION",
           "GENERATED_MARKER", "SORT_HEADER", "CHANCE_MARGIN", "Leaderboard"]
