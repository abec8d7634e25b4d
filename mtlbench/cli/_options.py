"""Options and small helpers shared by several commands: ``--format``, ``--store``, ``--seed``,
``--models`` of the report commands, opening a store for reading, comma-separated lists.

Imports only click and the standard library at import time (``--help`` stays light).
"""
from __future__ import annotations

from pathlib import Path

import click

from ..api import DEFAULT_STORE
from ..errors import ConfigError
from ..syntax import split_top_level
from ._ui import FORMATS

format_option = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
                             show_default=True,
                             help="table for reading; json or csv for other programs.")

store_option = click.option("--store", default=DEFAULT_STORE, show_default=True,
                            type=click.Path(dir_okay=False), help="SQLite results store.")

seed_option = click.option("--seed", type=int, default=None,
                           help="Seed of the units to show (default: the seed with most units "
                                "per dataset).")

models_option = click.option("--models", "models_", default=None,
                             help="Comma-separated model labels or names to show (a name "
                                  "matches all its labels); named models without results "
                                  "are reported as missing.")


def csv_list(value: str | None) -> list[str] | None:
    """``"a, b[x=[1,2]]"`` -> ``["a", "b[x=[1,2]]"]`` (commas inside brackets or quotes do not
    split, so labels and parameterised dataset names stay whole); None stays None; a list of
    nothing is an error."""
    if value is None:
        return None
    items = split_top_level(value)
    if not items:
        raise ConfigError("an empty list was given; name at least one entry or leave the "
                          "option out")
    return items


def open_store(path: str, must_exist: bool = True, readonly: bool = False):
    """The store at ``path``; opened for reading only for the commands that only read, so a
    store on a read-only location can be reported on."""
    from ..store import ResultStore

    if must_exist and not Path(path).exists():
        raise ConfigError(f"no results store at {path!r}; run 'mtlbench compare' first "
                          "or pass --store PATH")
    return ResultStore(path, readonly=readonly)
