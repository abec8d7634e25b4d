"""Commands that describe the installation: ``plugins``, ``models``, ``datasets``."""
from __future__ import annotations

import warnings

import click

from ._options import format_option
from ._ui import console, emit, registry, render_rows, user_errors

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
             "searchers": list(p.searchers),
             "commands": commands.get((p.distribution, p.name), []),
             "notices": notices.get((p.distribution, p.name), []),
             "status": "ok", "stage": None, "error": None}
            for p in sorted(reg.plugins, key=lambda p: (p.distribution, p.name))]
    failed = [{"plugin": f.name, "distribution": f.distribution, "version": f.version,
               "models": [], "datasets": [], "searchers": [], "commands": [], "notices": [],
               "status": "failed",
               "stage": f.stage, "error": f.error} for f in reg.failures]
    if fmt != "table":
        cols = ("plugin", "distribution", "version", "models", "datasets", "searchers",
                "commands", "notices", "status", "stage", "error")
        emit(render_rows(rows + failed, cols, fmt))
        return
    for r in rows:
        r["migrate"] = len(r["notices"]) or ""
    render_rows(rows, ("plugin", "distribution", "version", "models", "datasets", "searchers",
                       "commands", "migrate"), fmt,
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
    from ..space import normalise_space, space_json

    reg = registry()
    rows = []
    for name in reg.model_names:
        cls = reg.model_class(name)
        info = reg.model_plugin(name)
        space = dict(cls.search_space)
        rows.append({"name": name, "class": cls.__name__, "distribution": info.distribution,
                     "version": info.version,
                     "search_space": (space_json(space) if fmt != "table" else "; ".join(
                         f"{k}={p}" for k, p in normalise_space(space).items())),
                     "paper": cls.paper})
    cols = ["name", "class", "distribution", "version", "search_space", "paper"]
    if fmt == "table":
        for r in rows:
            r["distribution"] = f"{r['distribution']} {r.pop('version')}"
        cols.remove("version")
    emit(render_rows(rows, cols, fmt, title="models"))


@click.command()
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder with local data files (also $MTLBENCH_DATA_DIR).")
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
    cols = ["dataset", "problem", "tasks", "items", "features", "positive_share",
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


