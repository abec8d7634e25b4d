"""Commands that write reports from a store: ``leaderboard`` and ``publish``.

Thin layers over :mod:`mtlbench.report`; every table goes through the one selection rule
(:func:`mtlbench.report.select.select_units`), so ``results``, ``leaderboard`` and ``publish``
agree.  Only click and the standard library are imported at import time.
"""
from __future__ import annotations

from pathlib import Path

import click

from ._options import csv_list, models_option, open_store, seed_option, store_option
from ._ui import console, escape, user_errors

__all__ = ["leaderboard", "publish"]


@click.command("leaderboard")
@click.option("--dataset", required=True, help="Dataset whose results to tabulate.")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "csv"]),
              default="markdown", show_default=True)
@store_option
@models_option
@seed_option
@click.option("--baseline", default=None,
              help="Label of the win/tie/loss baseline (default: the model that declares "
                   "itself the baseline, e.g. stl).")
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write to this file instead of standard output.")
@user_errors
def leaderboard(dataset: str, fmt: str, store: str, models_: str | None,
                seed: int | None, baseline: str | None, output: str | None) -> None:
    """Leaderboard of one dataset: mean ± std test AUC, ranks, significance, the search,
    planned vs finished units, provenance."""
    from ..report.leaderboard import build_leaderboard
    from ..report.render import render

    rs = open_store(store, readonly=True)
    try:
        models = csv_list(models_)
        text = render(build_leaderboard(rs, dataset, seed=seed, models=models,
                                        expected=models, baseline=baseline), fmt)
    finally:
        rs.close()
    if output:
        Path(output).write_text(text, encoding="utf-8")
        console.print(f"wrote {output}")
    else:
        click.echo(text, nl=False)


@click.command("publish")
@store_option
@click.option("--out", default="leaderboards", show_default=True,
              type=click.Path(file_okay=False), help="Folder to write into.")
@click.option("--datasets", "datasets_", default=None,
              help="Comma-separated datasets (default: every dataset in the store).")
@models_option
@seed_option
@click.option("--figures/--no-figures", default=True, show_default=True,
              help="Draw the figures (needs matplotlib: pip install 'mtlbench[plots]').")
@click.option("--force", is_flag=True,
              help="Replace tables that were generated from another results store.")
@user_errors
def publish(store: str, out: str, datasets_: str | None, models_: str | None,
            seed: int | None, figures: bool, force: bool) -> None:
    """Write <out>/<dataset>.md + .json, figures, an index README.md and a manifest;
    remove stale generated files."""
    from ..report.publish import publish as publish_to

    rs = open_store(store, readonly=True)
    try:
        publish_to(rs, out, csv_list(datasets_), figures=figures, force=force, seed=seed,
                   models=csv_list(models_),
                   log=lambda s: console.print(escape(s), soft_wrap=True))
    finally:
        rs.close()
