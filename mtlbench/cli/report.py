"""Commands that write reports from a store: ``leaderboard`` and ``publish``.

Thin layers over :mod:`mtlbench.report`; every table goes through the one selection rule
(:func:`mtlbench.report.select.select_units`), so ``results``, ``leaderboard`` and ``publish``
agree.  Only click and the standard library are imported at import time.
"""
from __future__ import annotations

from pathlib import Path

import click

from ._options import (csv_list, dataset_list, dataset_option, datasets_option, figures_option,
                       model_list, models_option, open_store, seed_option, store_option)
from ._ui import console, emit, err_console, escape, user_errors

__all__ = ["leaderboard", "publish"]


@click.command("leaderboard")
@dataset_option("Dataset whose results to tabulate.")
@click.option("--all", "across", is_flag=True,
              help="Every data set of the store: headline table, Friedman test with average "
                   "ranks, Nemenyi post-hoc and critical-difference diagram, practical "
                   "equivalence (Bayesian signed-rank).")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json", "csv"]),
              default=None,
              help="table: for reading in a terminal (fits its width: COLUMNS); markdown: the "
                   "page publish writes; json or csv for other programs. Default: table, or "
                   "markdown with --output or --figures.")
@click.option("--metric", default=None,
              help="Metric of the table (default: the data set's primary metric, auc for "
                   "binary targets, rmse for real-valued ones; with --all: that of most data "
                   "sets, the others left out and named). 'mtlbench plugins' lists them.")
@store_option
@models_option()
@seed_option
@click.option("--baseline", default=None,
              help="Label of the win/tie/loss baseline (default: the model that declares "
                   "itself the baseline, e.g. stl).")
@click.option("--blocks", default=None,
              help="With --all: comma-separated data sets (each one block, its problems "
                   "averaged) or problems that count as independent blocks; 'problems' (one "
                   "block per data set and problem) or 'all' (every data set and problem). "
                   "Default: one block per independent data set, variants name[...] of one "
                   "generator counted once; the output says which.")
@click.option("--focus", default=None,
              help="With --all: comma-separated models shown in their own headline column "
                   "(default: the models others declare themselves ablations of).")
@click.option("--rope", type=float, default=None,
              help="With --all: region of practical equivalence in the table's units "
                   "(default: 0.5 points of a metric shown x 100 such as the AUC, else 1 % of "
                   "the block's best mean).")
@figures_option("With --all (markdown): write the CD diagram and the equivalence figure into "
                "this folder and link them (without it no file but --output is written).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of standard output.")
@user_errors
def leaderboard(dataset: str | None, across: bool, fmt: str, metric: str | None, store: str,
                models_: tuple[str, ...], seed: int | None, baseline: str | None,
                blocks: str | None, focus: str | None, rope: float | None,
                figures_dir: str | None, output: str | None) -> None:
    """Leaderboard of one dataset (--dataset) for one metric: mean ± std, ranks, significance,
    Δ% over the baseline, the search, planned vs finished units, provenance; or the judgement
    across every data set of the store (--all)."""
    if bool(dataset) == across:
        raise click.UsageError("give --dataset NAME for one data set's table, or --all for "
                               "the summary across data sets")
    fmt = fmt or ("markdown" if output or figures_dir else "table")
    if figures_dir and (not across or fmt != "markdown"):
        raise click.UsageError("--figures DIR goes with --all and the markdown format (one "
                               "data set's table has no figure; 'mtlbench publish' draws "
                               "every figure)")
    if metric is not None:
        from ..scoring import get_metric

        metric = get_metric(metric).name  # an unknown name: one line with the known ones
    rs = open_store(store, readonly=True)
    try:
        models = model_list(models_)
        if across:
            text = _summary_text(rs, fmt, seed, models, blocks, focus, rope,
                                 Path(figures_dir) if figures_dir else None,
                                 Path(output).parent if output else None, metric)
        else:
            from ..report.leaderboard import build_leaderboard
            from ..report.render import render

            lb = build_leaderboard(rs, dataset, seed=seed, models=models, expected=models,
                                   baseline=baseline, metric=metric)
            if fmt == "table":
                from ..report.text import leaderboard_text

                text = leaderboard_text(lb, _width())
            else:
                text = render(lb, fmt)
    finally:
        rs.close()
    emit(text, output)


def _summary_text(rs, fmt: str, seed: int | None, models: list[str] | None,
                  blocks: str | None, focus: str | None, rope: float | None,
                  figures_dir: Path | None, rel_to: Path | None,
                  metric: str | None = None) -> str:
    from ..report.across import summarize_store
    from ..report.across_render import render_summary, summary_figures

    chosen = blocks if blocks in ("all", "problems") else csv_list(blocks)
    summary, _ = summarize_store(rs, blocks=chosen, focus=csv_list(focus), rope=rope,
                                 seed=seed, models=models, metric=metric)
    if fmt == "table":
        from ..report.text import summary_text

        return summary_text(summary, _width())
    figures = {}
    if figures_dir is not None:
        from ..report.canvas import figure_files

        figures = summary_figures(summary, figures_dir, rel_to=rel_to)
        for path in filter(None, figures.values()):
            written = figure_files(path)
            err_console.print(f"wrote {escape(', '.join(map(str, written)))}", soft_wrap=True)
    return render_summary(summary, fmt, figures)


def _width() -> int:
    """The terminal's width (``COLUMNS`` when set; 100 when not a terminal)."""
    import shutil

    return max(40, shutil.get_terminal_size((100, 24)).columns)


@click.command("publish")
@store_option
@click.option("--out", default="leaderboards", show_default=True,
              type=click.Path(file_okay=False), help="Folder to write into.")
@datasets_option("Datasets, comma-separated and/or repeated (default: every dataset in the "
                 "store).")
@models_option()
@seed_option
@click.option("--figures/--no-figures", default=True, show_default=True,
              help="Draw the figures (needs matplotlib: pip install 'mtlbench[plots]').")
@click.option("--html/--no-html", default=True, show_default=True,
              help="Also write the HTML site into <out>/site/ (open site/index.html: sortable "
                   "and filterable tables, the figures as SVG; works offline).")
@click.option("--force", is_flag=True,
              help="Replace tables that were generated from another results store.")
@user_errors
def publish(store: str, out: str, datasets_: tuple[str, ...], models_: tuple[str, ...],
            seed: int | None, figures: bool, html: bool, force: bool) -> None:
    """Write <out>/<dataset>.md + .json, figures (PNG, SVG, PDF), the HTML site
    <out>/site/, an index README.md and a manifest; remove stale generated files."""
    from ..report.publish import publish as publish_to

    rs = open_store(store, readonly=True)
    try:
        publish_to(rs, out, dataset_list(datasets_), figures=figures, html=html,
                   force=force, seed=seed, models=model_list(models_),
                   log=lambda s: console.print(escape(s), soft_wrap=True))
    finally:
        rs.close()
