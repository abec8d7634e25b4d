"""Commands that share runs: ``merge`` (stores of several machines into one) and
``best-params`` (a finished run's selected hyperparameters as a config file).

Thin layers over :mod:`mtlbench.report.merge` and :mod:`mtlbench.report.best_params`; only
click and the standard library are imported at import time.
"""
from __future__ import annotations


import click

from ..api import DEFAULT_STORE
from ._options import (data_dir_option, dataset_list, datasets_option, model_list,
                       models_option, open_store, seed_option, store_option)
from ._ui import console, emit, escape, user_errors

__all__ = ["merge", "best_params"]


@click.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--store", default=DEFAULT_STORE, show_default=True,
              type=click.Path(dir_okay=False),
              help="Store to merge into (created if missing; its own units take part).")
@data_dir_option("Folder with local data files (also $MTLBENCH_DATA_DIR), to recompute the "
                 "data and split fingerprints of real datasets.")
@click.option("--dry-run", is_flag=True, help="Check everything and say what would be "
                                              "merged; write nothing.")
@user_errors
def merge(sources: tuple[str, ...], store: str, data_dir: str | None, dry_run: bool) -> None:
    """Merge results stores (SQLite files) and published leaderboard files (.json) from
    several machines into one store.

    Every unit is checked as 'import-results' checks it (form, consistency, this
    installation's protocol, data and split fingerprints, its key); a unit found in several
    places is kept once; one with other results under the same key is a conflict that
    refuses the merge, naming it.  All or nothing: nothing is written unless every check
    passes, then everything in one transaction (docs/reports.md)."""
    from ..dataset import resolve_data_dir
    from ..report.merge import merge_stores

    ddir = resolve_data_dir(data_dir)
    merge_stores(list(sources), store, data_dir=str(ddir) if ddir else None, dry_run=dry_run,
                 log=lambda s: console.print(escape(s), soft_wrap=True))


@click.command("best-params")
@store_option
@datasets_option("Datasets or dataset/problem to export, comma-separated and/or repeated "
                 "(default: every dataset with results).")
@models_option()
@seed_option
@click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write the TOML to this file instead of standard output.")
@user_errors
def best_params(store: str, datasets_: tuple[str, ...], models_: tuple[str, ...],
                seed: int | None, output: str | None) -> None:
    """The hyperparameters a finished run selected, per model and problem, as a TOML config
    that 'compare --config' reads back: the same models on the same problems, each fitted at
    the exported values (nothing searched).  Per model and problem the selection made in most
    repetitions is exported (docs/tuning.md)."""
    from ..report.best_params import best_params_toml
    from ..report.select import select_units

    rs = open_store(store, readonly=True)
    try:
        problems = dataset_list(datasets_)
        datasets = sorted({p.split("/", 1)[0] for p in problems}) if problems else None
        sel = select_units(rs, datasets, seed=seed, models=model_list(models_),
                           problems=problems)
        text = best_params_toml(sel, source=str(store))
    finally:
        rs.close()
    emit(text, output)
