"""Commands that describe the installation: ``plugins``, ``models``, ``datasets``."""
from __future__ import annotations

import sys
import warnings
from typing import Any, Mapping

import click

from ._options import data_dir_option, format_option
from ._ui import console, emit, registry, render_rows, user_errors

#: widest line ``mtlbench models`` prints for reading (a narrower terminal: its width)
READING_WIDTH = 100

__all__ = ["plugins", "models", "datasets"]


@click.command()
@format_option
@user_errors
def plugins(fmt: str) -> None:
    """List discovered plugins, what they registered, and plugins that failed to load."""
    reg = registry()
    commands = _plugin_commands(reg)
    notices: dict[tuple[str, str], list[str]] = {}
    for n in reg.notices:
        notices.setdefault((n.distribution, n.name), []).append(f"{n.model}: {n.message}")
    rows = [{"plugin": p.name, "distribution": p.distribution, "version": p.version,
             "models": list(p.models), "datasets": list(p.datasets),
             "searchers": list(p.searchers), "metrics": list(p.metrics),
             "commands": commands.get((p.distribution, p.name), []),
             "notices": notices.get((p.distribution, p.name), []),
             "status": "ok", "stage": None, "error": None}
            for p in sorted(reg.plugins, key=lambda p: (p.distribution, p.name))]
    failed = [{"plugin": f.name, "distribution": f.distribution, "version": f.version,
               "models": [], "datasets": [], "searchers": [], "metrics": [], "commands": [],
               "notices": [],
               "status": "failed",
               "stage": f.stage, "error": f.error} for f in reg.failures]
    if fmt != "table":
        cols = ("plugin", "distribution", "version", "models", "datasets", "searchers",
                "metrics", "commands", "notices", "status", "stage", "error")
        emit(render_rows(rows + failed, cols, fmt))
        return
    for r in rows:
        r["migrate"] = len(r["notices"]) or ""
    render_rows(rows, ("plugin", "distribution", "version", "models", "datasets", "searchers",
                       "metrics", "commands", "migrate"), fmt,
                title="mtlbench plugins (entry-point group 'mtlbench')")
    if reg.notices:
        render_rows([{"plugin": n.name, "distribution": f"{n.distribution} {n.version}",
                      "model": n.model, "what to change": n.message} for n in reg.notices],
                    ("plugin", "distribution", "model", "what to change"), fmt,
                    title="[yellow]what plugin authors should change (the models work as "
                          "they are)[/]")
    if failed:
        render_rows(failed, ("plugin", "distribution", "version", "stage", "error"), fmt,
                    title="[red]plugins that failed[/]")


def _plugin_commands(reg) -> dict[tuple[str, str], list[str]]:
    """Names of the commands each plugin adds (registered on a scratch group)."""
    out: dict[tuple[str, str], list[str]] = {}
    for info in reg.plugins:
        impl = getattr(reg.pm.get_plugin(f"{info.distribution}:{info.name}"),
                       "register_commands", None)
        if impl is None:
            continue
        scratch = click.Group()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                impl(cli=scratch)
        except Exception:  # noqa: BLE001 - reported when the command is used
            continue
        out[(info.distribution, info.name)] = sorted(scratch.commands)
    return out


@click.command()
@format_option
@user_errors
def models(fmt: str) -> None:
    """List available models with their search spaces and plugin distribution."""
    from ..search.space import space_json

    reg = registry()
    rows = []
    for name in reg.model_names:
        cls = reg.model_class(name)
        info = reg.model_plugin(name)
        rows.append({"name": name, "class": cls.__name__, "distribution": info.distribution,
                     "version": info.version, "search_space": space_json(dict(cls.search_space)),
                     "paper": cls.paper, "group": getattr(cls, "group", None),
                     "default_run": getattr(cls, "default_run", True) is not False})
    if fmt != "table":
        emit(render_rows(rows, ["name", "class", "distribution", "version", "search_space",
                                "paper", "group", "default_run"], fmt))
        return
    width = READING_WIDTH
    if sys.stdout.isatty():
        import shutil

        width = min(width, shutil.get_terminal_size((READING_WIDTH, 24)).columns)
    import textwrap

    click.echo("\n\n".join(_model_block(r, width) for r in rows))
    click.echo("\n" + textwrap.fill(
        "search spaces: each hyperparameter's kind, the start range the search spreads its "
        "design over, and the model's limits ('-': none); --format json for programs.",
        width=width))


def _model_block(row: Mapping[str, Any], width: int) -> str:
    """One model for reading: a title line (name, class, distribution), the paper wrapped to
    ``width``, one line per searched hyperparameter."""
    import textwrap

    extra = ((f", group {row['group']}" if row.get("group") else "")
             + ("" if row.get("default_run", True) else ", not in the default run"))
    lines = [f"{row['name']}  ({row['class']}, {row['distribution']} {row['version']}{extra})"]
    lines += textwrap.wrap(str(row["paper"] or ""), width=width, initial_indent="    ",
                           subsequent_indent="    ") or ["    (no paper given)"]
    space = row["search_space"]
    pad = max((len(k) for k in space), default=0)
    for key, p in space.items():
        lines.append(f"    {key:<{pad}}  {_param_text(p)}")
    if not space:
        lines.append("    (nothing searched)")
    return "\n".join(lines)


def _param_text(p: Mapping[str, Any]) -> str:
    """``log  start 0.003 .. 0.3  limits - .. 1`` from a :func:`mtlbench.search.space.space_json`
    entry."""
    def num(v: Any) -> str:
        return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)

    grid = list(p.get("grid") or [])
    if p.get("kind") == "categorical":
        return "one of " + ", ".join(num(v) for v in grid)
    start = f"{num(min(grid))} .. {num(max(grid))}" if grid else "-"
    return (f"{p.get('kind', '?'):<6} start {start:<16} limits {num(p.get('low'))} .. "
            f"{num(p.get('high'))}")


@click.command()
@data_dir_option()
@click.option("--load/--no-load", default=True, show_default=True,
              help="Load available problems to show task counts and dimensions.")
@click.option("--layout", is_flag=True, help="Explain each dataset's expected file layout.")
@format_option
@user_errors
def datasets(data_dir: str | None, load: bool, layout: bool, fmt: str) -> None:
    """List datasets: problems, task counts, feature dimension and availability."""
    from ..api import dataset_rows

    registry()  # plugin warnings, once
    rows = dataset_rows(data_dir, load=load, layout=layout and fmt != "table")
    cols = ["dataset", "problem", "targets", "tasks", "items", "features", "positive_share",
            "availability", "distribution", "version", "note"]
    if layout and fmt != "table":
        cols.append("layout")
    if fmt == "table":
        for r in rows:
            if r["problem"] is None:
                r["problem"] = "(give --data-dir)"
                r.pop("note", None)
            r["distribution"] = f"{r['distribution']} {r.pop('version')}"
        cols = [c for c in cols if c != "version"]
        if not any(r.get("note") for r in rows):
            cols.remove("note")
    emit(render_rows(rows, cols, fmt, title="datasets"))
    if layout and fmt == "table":
        reg = registry()
        for name in reg.dataset_names:
            ds = reg.dataset(name)
            text = ds.layout_help() or "(generated; no files needed)"
            console.print(f"\n[bold]{name}[/] — {ds.description}\nsource: {ds.source}\n{text}")


