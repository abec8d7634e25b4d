"""Terminal output shared by the command modules: consoles, clear user errors, tables, the
plugin registry with its warnings shown once.

Only :mod:`mtlbench.cli` imports this module (library modules take callbacks or a reporter).
Output that is not a terminal (a pipe, a file) is never wrapped: tables keep every name and
number whole, so ``mtlbench datasets | grep simulated`` works; ``--format json|csv`` gives
machine-readable rows.
"""
from __future__ import annotations

import csv
import functools
import io
import json
import sys
import warnings
from typing import Any, Callable, Mapping, Sequence

import click

from ..errors import MTLBenchError

#: width used when output is not a terminal: wide enough that rich never folds a cell
PIPE_WIDTH = 10_000
FORMATS = ("table", "json", "csv")


def _make_console(**kwargs: Any):
    """A rich console that does not wrap when its output is not a terminal."""
    from rich.console import Console, ConsoleDimensions

    class _Console(Console):
        @property
        def size(self) -> ConsoleDimensions:
            dims = Console.size.fget(self)
            if not self.is_terminal:  # also ignores $COLUMNS, which rich would wrap at
                return ConsoleDimensions(PIPE_WIDTH, dims.height)
            return dims

        @size.setter
        def size(self, new_size: tuple[int, int]) -> None:
            Console.size.fset(self, new_size)

    return _Console(**kwargs)


class _LazyConsole:
    """Creates the rich console on first use, so ``--version``/``--help`` never import rich."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._console = None

    def real(self):
        if self._console is None:
            self._console = _make_console(**self._kwargs)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)


console = _LazyConsole(highlight=False)
err_console = _LazyConsole(stderr=True, highlight=False)


def escape(text: str) -> str:
    """rich markup escaping (imports rich on first use)."""
    from rich.markup import escape as _escape

    return _escape(text)


def user_errors(fn: Callable) -> Callable:
    """Turn user-facing errors into a clear message and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MTLBenchError as exc:
            err_console.print(f"[bold red]Error:[/] {escape(str(exc))}", soft_wrap=True)
            sys.exit(2)

    return wrapper


def warn(message: str) -> None:
    err_console.print(f"[yellow]Warning:[/] {escape(message)}", soft_wrap=True)


def emit(text: str | None, output: str | None = None) -> None:
    """Write ``text`` as is to standard output, or to the file ``output`` (then say so);
    None: nothing."""
    if text is None:
        return
    if output:
        from pathlib import Path

        Path(output).write_text(text, encoding="utf-8")
        console.print(f"wrote {escape(output)}")
    else:
        click.echo(text, nl=False)


def registry():
    """The plugin registry; warnings about plugins (failed loads, name clashes) are printed
    once, as warnings, instead of Python's warning lines."""
    from ..plugins import PluginWarning, get_registry

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginWarning)
        reg = get_registry()
    for w in caught:
        if issubclass(w.category, PluginWarning):
            warn(str(w.message))
    return reg


def render_rows(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fmt: str,
                title: str | None = None) -> str | None:
    """``json``/``csv`` text of ``rows`` (dicts keyed by ``columns``); ``table`` prints a rich
    table to the console and returns None."""
    if fmt == "json":
        return json.dumps([{c: r.get(c) for c in columns} for r in rows], indent=1) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore",
                           lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: _csv_cell(r.get(c)) for c in columns})
        return buf.getvalue()
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c.replace("_", " "))
    for r in rows:
        table.add_row(*(escape(_text(r.get(c))) for c in columns))
    console.print(table)
    return None


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        return "; ".join(f"{k}={x}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _csv_cell(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return ";".join(str(x) for x in v)
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return v
