"""Options and small helpers shared by several commands, so that one thing has one spelling
everywhere: ``-m/--models`` (model selectors or labels, repeatable and comma-separated),
``-d/--datasets`` (datasets or dataset/problem, the same) and ``-d/--dataset`` for a command
that takes one, ``--store``, ``--seed``, ``--data-dir``, ``--format``, ``--figures DIR``;
opening a store for reading, comma-separated lists.

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

def data_dir_option(help_text: str = "Folder with local data files (also "
                                     "$MTLBENCH_DATA_DIR)."):
    """``--data-dir DIR``."""
    return click.option("--data-dir", type=click.Path(file_okay=False), default=None,
                        help=help_text)


def models_option(help_text: str = "Model labels or names to show (a name matches all its "
                                   "labels), comma-separated and/or repeated; named models "
                                   "without results are reported as missing."):
    """``-m/--models``: repeatable, each value comma-separated (:func:`joined`)."""
    return click.option("-m", "--models", "models_", multiple=True, help=help_text)


def datasets_option(help_text: str = "Datasets or dataset/problem to show, comma-separated "
                                     "and/or repeated."):
    """``-d/--datasets``: repeatable, each value comma-separated (:func:`joined`)."""
    return click.option("-d", "--datasets", "datasets_", multiple=True, help=help_text)


def dataset_option(help_text: str, required: bool = False):
    """``-d/--dataset`` of a command that takes one dataset (or one problem)."""
    return click.option("-d", "--dataset", "dataset", required=required, default=None,
                        help=help_text)


def figures_option(help_text: str):
    """``--figures DIR``: figures are written only when it is given."""
    return click.option("--figures", "figures_dir", type=click.Path(file_okay=False),
                        default=None, help=help_text)


def joined(values: tuple[str, ...] | list[str] | None, option: str, what: str
           ) -> list[str] | None:
    """The entries of a repeatable, comma-separated option (``-m a,b -m c`` -> ``[a, b, c]``);
    not given -> None.  An empty value or unbalanced brackets are an error naming the
    ``option`` (``--models``) and ``what`` it takes (``model selector``)."""
    if not values:
        return None
    out = []
    for v in values:
        if not v.strip():
            raise ConfigError(f"{option} is empty; give at least one {what} (omit the option "
                              "for the default)")
        try:
            out += csv_list(v)
        except ConfigError as exc:
            raise ConfigError(f"invalid {what} in {option} {v!r}: {exc}") from None
    return out


def model_list(values: tuple[str, ...] | None) -> list[str] | None:
    """The values of ``-m/--models`` (:func:`joined`)."""
    return joined(values, "--models", "model selector")


def dataset_list(values: tuple[str, ...] | None) -> list[str] | None:
    """The values of ``-d/--datasets`` (:func:`joined`)."""
    return joined(values, "--datasets", "dataset selector")


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
