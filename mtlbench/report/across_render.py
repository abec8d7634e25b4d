"""The cross-data-set :class:`~mtlbench.report.across.Summary` as markdown, JSON and CSV, and
its two figures (the critical-difference diagram and the equivalence bars)."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd

from .._json import jsonable
from ..errors import ConfigError
from .across import HeadlineEntry, Summary
from .render import GENERATED_MARKER, _esc

CD_FIGURE = "summary-cd"
EQUIVALENCE_FIGURE = "summary-equivalence"


def summary_figures(summary: Summary, outdir: str | Path, rel_to: str | Path | None = None,
                    fmt: str = "png") -> dict[str, str | None]:
    """Draw the CD diagram and the equivalence bars into ``outdir``; {kind: path relative to
    the folder ``rel_to`` (the page's; or as written), None when there was nothing to
    draw}."""
    from .plots import cd_diagram, equivalence_plot

    outdir = Path(outdir)
    # a summary of another metric than the AUC: its own figure names (summary-cd--rmse.png)
    suffix = "" if (summary.get("metric") or "auc") == "auc" else f"--{summary.metric}"
    paths: dict[str, Path | None] = {"cd": None, "equivalence": None}
    if summary.posthoc is not None:
        paths["cd"] = cd_diagram(summary.average_ranks, summary.posthoc.not_separated,
                                 summary.posthoc.critical_difference,
                                 outdir / f"{CD_FIGURE}{suffix}.{fmt}",
                                 alpha=summary.posthoc.alpha)
    models = [m for m in summary.roles if any(e.model == m for e in summary.equivalence)]
    models.sort(key=lambda m: (summary.average_ranks.get(m, float("inf")), m))
    paths["equivalence"] = equivalence_plot([e.to_json() for e in summary.equivalence],
                                            summary.blocks, models,
                                            outdir / f"{EQUIVALENCE_FIGURE}{suffix}.{fmt}",
                                            summary.rope if _metric(summary).percent
                                            else "the ROPE", "" if not suffix else
                                            f"Against the best of each data set "
                                            f"({_metric(summary).heading()}, ROPE as in the "
                                            "table)")
    return {k: (None if p is None else os.path.relpath(p, rel_to) if rel_to is not None
                else str(p)) for k, p in paths.items()}


# =============================================================================== markdown
def _entry_text(e: HeadlineEntry | None) -> str:
    if e is None:
        return "—"
    core = f"{_esc(e.model)} {e.mean:.2f}" + (f" ± {e.std:.2f}" if e.std is not None else "")
    p = "" if e.best or e.p_holm is None else f", p={e.p_holm:.2g}"
    return core + f" (n={e.n}{p})" + (" †" if e.significantly_worse else "")


def blocks_paragraph(s: Summary) -> str:
    """Which blocks the summary counts and which it left out (inline markdown)."""
    out = [f"**Blocks** ({len(s.blocks)}): {', '.join(map(_esc, s.blocks))} — {s.blocks_rule}."]
    if s.left_out_blocks:
        out.append(" **Left out:** " + "; ".join(f"{_esc(b)} ({why})"
                                                 for b, why in s.left_out_blocks.items())
                   + ". Choose with `--blocks` (`--blocks problems`: one per problem; "
                   "`--blocks all`: every data set and problem).")
    return "".join(out)


def _blocks_text(s: Summary) -> list[str]:
    return [blocks_paragraph(s), ""]


def _metric(s: Summary):
    from ..scoring import get_metric

    return get_metric(s.get("metric") or "auc")


def _block_text(block: str, dataset: str) -> str:
    """A block's label, with "(binarized)" for a data set whose labels were binarized."""
    from .roles import binarized

    return _esc(block) + (" (binarized)" if binarized(dataset) else "")


def headline_table(s: Summary) -> tuple[list[str], list[list[str]], str]:
    """(header, rows, the caption below) of the headline table (inline markdown)."""
    base = f"{_esc(s.baseline)} (baseline)" if s.baseline else "baseline"
    head = ["block", "best model"] + [_esc(m) for m in s.focus_models] + ["best competitor",
                                                                          base]
    rows = [[_block_text(h.block, h.dataset), _entry_text(h.best)]
            + [_entry_text(h.focus.get(m)) for m in s.focus_models]
            + [_entry_text(h.best_competitor), _entry_text(h.baseline)] for h in s.headline]
    m = _metric(s)
    what = "Test AUC x 100" if m.name == "auc" else "T" + m.heading()[1:]
    caption = (f"{what}, mean ± std over repetitions (n); p = Holm-adjusted two-sided "
               "Wilcoxon signed-rank p against the block's best (exact for n <= 25); † "
               "significantly worse than the best (p < 0.05). Focus models: the full models "
               "that other models declare themselves ablations of; best competitor: the best "
               "model that is neither the baseline, a focus model nor an ablation.")
    return head, rows, caption


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            + ["| " + " | ".join(r) + " |" for r in rows])


def _headline_text(s: Summary) -> list[str]:
    head, rows, caption = headline_table(s)
    return ["## Headline", ""] + _md_table(head, rows) + ["", caption, ""]


def ranks_parts(s: Summary) -> tuple[str, list[list[str]], str | None]:
    """(the Friedman test and the models not ranked, the [model, average rank] rows, the
    post-hoc test's paragraph or None), inline markdown."""
    f = s.friedman
    if f.p_value is None:
        test = f"Friedman test: not computed — {f.reason or 'n/a'}."
    else:
        test = (f"Friedman test over the {f.blocks} blocks ({f.blocks_are}): χ² = "
                f"{f.statistic:.2f}, p = {f.p_value:.2g} ({f.models} models; "
                "scipy.stats.friedmanchisquare).")
    if s.not_ranked:
        test += " Not ranked: " + "; ".join(f"{_esc(m)} ({why})"
                                            for m, why in s.not_ranked.items()) + "."
    rows = [[_esc(m), f"{r:.2f}"] for m, r in s.average_ranks.items()]
    ph, posthoc = s.posthoc, None
    if ph is not None:
        cliques = "; ".join("{" + ", ".join(map(_esc, c)) + "}" for c in ph.not_separated)
        posthoc = (f"Post-hoc: {ph.test}, α = {ph.alpha}: critical difference of average ranks "
                   f"CD = {ph.critical_difference:.2f} (Demšar 2006). Groups it cannot "
                   f"separate: {cliques or 'none (every pair differs)'}.")
    return test, rows, posthoc


#: the caption of the critical-difference diagram
CD_CAPTION = ("Average ranks on the axis; a bar joins models the Nemenyi test cannot separate "
              "at α = 0.05.")
#: the caption of the practical-equivalence bars
EQUIVALENCE_CAPTION = ("One panel per block, one bar per model against the block's best: "
                       "P(best better by more than the ROPE) in red, P(practically "
                       "equivalent) in grey, P(model better) in green; the best model's "
                       "own row is empty.")
RANKS_HEAD = ["model", "average rank (1 = best)"]


def _ranks_text(s: Summary, figures: dict[str, str | None]) -> list[str]:
    test, rows, posthoc = ranks_parts(s)
    out = ["## Ranks across data sets", "", test, ""] + _md_table(RANKS_HEAD, rows) + [""]
    if posthoc is not None:
        out += [posthoc, ""]
    if figures.get("cd"):
        out += [f"![Critical-difference diagram]({figures['cd']})", "", CD_CAPTION, ""]
    return out


def equivalence_parts(s: Summary) -> tuple[str, list[str], list[list[str]]]:
    """(the test's paragraph, header, rows) of the practical-equivalence table."""
    m = _metric(s)
    ropes = sorted({e.rope for e in s.equivalence if e.rope is not None})
    if m.percent or len(ropes) <= 1:
        width = ropes[0] if ropes else s.rope
        unit = " points" if m.percent else ""
        rope = f"±{width:g} {m.heading()}{unit}"
    else:
        rope = (f"1 % of the best model's mean {m.label} of each block "
                f"({', '.join(f'{r:.3g}' for r in ropes)})")
    text = (f"{s.bayes_test}, region of practical equivalence {rope}, "
            f"{s.bayes_samples} posterior samples, seed {s.bayes_seed}. Each cell, "
            "against the block's best: P(best better by more than the ROPE) / P(practically "
            "equivalent) / P(model better); they sum to 1. † as in the headline (the "
            "frequentist mark, beside).")
    models = sorted({e.model for e in s.equivalence},
                    key=lambda m: (s.average_ranks.get(m, float("inf")), m))
    by = {(e.block, e.model): e for e in s.equivalence}
    rows = []
    for m in models:
        cells = []
        for b in s.blocks:
            e = by.get((b, m))
            if e is None:
                best = next((h.best.model for h in s.headline if h.block == b), "")
                cells.append("best" if best == m else "—")
            elif e.p_equivalent is None:
                cells.append(f"— ({e.n_pairs} pairs)")
            else:
                cells.append(f"{e.p_best_better:.2f} / {e.p_equivalent:.2f} / "
                             f"{e.p_model_better:.2f}" + (" †" if e.significantly_worse else ""))
        rows.append([_esc(m)] + cells)
    return text, ["model"] + [_esc(b) for b in s.blocks], rows


def _equivalence_text(s: Summary, figures: dict[str, str | None]) -> list[str]:
    text, head, rows = equivalence_parts(s)
    out = ["## Practical equivalence", "", text, ""] + _md_table(head, rows) + [""]
    if figures.get("equivalence"):
        out += [f"![Practical equivalence]({figures['equivalence']})", "",
                EQUIVALENCE_CAPTION, ""]
    return out


def summary_markdown(s: Summary, figures: dict[str, str | None] | None = None,
                     generated_by: str = "mtlbench leaderboard --all") -> str:
    figures = figures or {}
    m = _metric(s)
    title = "# Across data sets" + ("" if m.name == "auc" else f" — {m.label}")
    lines = [f"{GENERATED_MARKER} ({generated_by}) from a results store; regenerate, do not "
             "edit -->", title, ""]
    lines += _blocks_text(s) + _headline_text(s) + _ranks_text(s, figures)
    lines += _equivalence_text(s, figures)
    lines += [f"- {n}" for n in s.notes] + ([""] if s.notes else [])
    return "\n".join(lines)


# =============================================================================== json / csv
def summary_json(s: Summary) -> str:
    return json.dumps(jsonable(s.to_json(), strict=True), indent=1, allow_nan=False) + "\n"


def summary_csv(s: Summary) -> str:
    """One row per (block, model): mean, role, the test against the block's best, the
    equivalence probabilities, the average rank across blocks."""
    eq = {(e.block, e.model): e for e in s.equivalence}
    head = {h.block: h for h in s.headline}
    recs = []
    for block, means in s.block_means.items():
        for model, mean in means.items():
            e = eq.get((block, model))
            recs.append({"block": block, "dataset": head[block].dataset,
                         "problem": head[block].problem, "model": model,
                         "role": s.roles.get(model),
                         "mean_auc_x100": mean if (s.get("metric") or "auc") == "auc" else None,
                         "best": head[block].best.model == model,
                         "significantly_worse": e.significantly_worse if e else None,
                         "avg_rank_across": s.average_ranks.get(model),
                         "p_best_better": e.p_best_better if e else None,
                         "p_equivalent": e.p_equivalent if e else None,
                         "p_model_better": e.p_model_better if e else None,
                         "rope": s.rope, "metric": s.get("metric") or "auc", "mean": mean})
    buf = io.StringIO()
    pd.DataFrame(recs).to_csv(buf, index=False)
    return buf.getvalue()


def render_summary(s: Summary, fmt: str, figures: dict[str, str | None] | None = None) -> str:
    if fmt == "markdown":
        return summary_markdown(s, figures)
    if fmt == "json":
        return summary_json(s)
    if fmt == "csv":
        return summary_csv(s)
    raise ConfigError(f"unknown format {fmt!r}; choose markdown, json or csv")


__all__ = ["summary_markdown", "summary_json", "summary_csv", "render_summary",
           "summary_figures", "CD_FIGURE", "EQUIVALENCE_FIGURE"]
