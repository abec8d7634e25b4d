"""The ``mtlbench`` command line (click + rich).

Errors meant for the user (:class:`~mtlbench.errors.MTLBenchError`) are printed as one clear
message and exit with status 2; nothing prints a traceback for bad input.
"""
from __future__ import annotations

import functools
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__
from .errors import ConfigError, MTLBenchError
from .plugins import PluginWarning, get_registry

DEFAULT_STORE = "results/mtlbench.sqlite"
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


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


def _registry():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginWarning)
        reg = get_registry()
    for w in caught:
        if issubclass(w.category, PluginWarning):
            err_console.print(f"[yellow]Warning:[/] {escape(str(w.message))}", soft_wrap=True)
    return reg


def _split_csv(value: str | None) -> list[str]:
    from .selectors import split_top_level

    return split_top_level(value) if value else []


class _Group(click.Group):
    """Adds plugin commands lazily, so a broken plugin cannot take the CLI down."""

    _plugins_added = False

    def _add_plugin_commands(self) -> None:
        if not self._plugins_added:
            self._plugins_added = True
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PluginWarning)
                    get_registry().add_commands(self)
            except MTLBenchError as exc:
                err_console.print(f"[bold red]Error:[/] {escape(str(exc))}", soft_wrap=True)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_plugin_commands()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is None:
            self._add_plugin_commands()
            cmd = super().get_command(ctx, name)
        return cmd


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="mtlbench")
def cli() -> None:
    """Benchmark linear multi-task learning models under one leak-free protocol."""


# ------------------------------------------------------------------------------- plugins
@cli.command()
@user_errors
def plugins() -> None:
    """List discovered plugins, what they registered, and plugins that failed to load."""
    reg = _registry()
    table = Table(title="mtlbench plugins (entry-point group 'mtlbench')")
    for col in ("plugin", "distribution", "version", "models", "datasets", "searchers"):
        table.add_column(col)
    for p in sorted(reg.plugins, key=lambda p: (p.distribution, p.name)):
        table.add_row(p.name, p.distribution, p.version, ", ".join(p.models),
                      ", ".join(p.datasets), ", ".join(p.searchers))
    console.print(table)
    if reg.failures:
        ft = Table(title="[red]plugins that failed[/]")
        for col in ("plugin", "distribution", "version", "stage", "error"):
            ft.add_column(col)
        for f in reg.failures:
            ft.add_row(f.name, f.distribution, f.version, f.stage, f.error)
        console.print(ft)


@cli.command()
@user_errors
def models() -> None:
    """List available models with their search spaces and plugin distribution."""
    reg = _registry()
    table = Table(title="models")
    for col in ("name", "class", "distribution", "search space", "paper"):
        table.add_column(col, overflow="fold")
    for name in reg.model_names:
        cls = reg.model_class(name)
        info = reg.model_plugin(name)
        space = "; ".join(f"{k}={v}" for k, v in dict(cls.search_space).items())
        table.add_row(name, cls.__name__, f"{info.distribution} {info.version}", space, cls.paper)
    console.print(table)


@cli.command()
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder with local data files (also $MTLBENCH_DATA_DIR).")
@click.option("--load/--no-load", default=True, show_default=True,
              help="Load available problems to show task counts and dimensions.")
@click.option("--layout", is_flag=True, help="Explain each dataset's expected file layout.")
@user_errors
def datasets(data_dir: str | None, load: bool, layout: bool) -> None:
    """List datasets: problems, task counts, feature dimension and availability."""
    from .dataset import problems_of, resolve_data_dir

    reg = _registry()
    ddir = resolve_data_dir(data_dir)
    table = Table(title="datasets")
    for col in ("dataset", "problem", "tasks", "items", "features", "positive share",
                "availability", "distribution"):
        table.add_column(col, overflow="fold")
    for name in reg.dataset_names:
        ds = reg.dataset(name)
        info = reg.dataset_plugin(name)
        try:
            avail = ds.availability(data_dir=ddir)
        except Exception as exc:  # noqa: BLE001 - one broken dataset must not hide the rest
            avail = f"error: {exc}"
        problems = problems_of(ds, ddir)
        if not problems:
            table.add_row(name, "(give --data-dir)", "", "", "", "", avail,
                          f"{info.distribution} {info.version}")
        for prob in problems:
            cells = ["", "", "", ""]
            if load and avail in ("generated", "cached", "in data-dir"):
                try:
                    s = ds.load(prob, data_dir=ddir).summary()
                    cells = [str(s["tasks"]), str(s["items"]), str(s["features"]),
                             f"{s['positive_share']:.3f}"]
                except MTLBenchError as exc:
                    cells = ["", "", "", f"cannot load: {exc}"]
            table.add_row(name, prob, *cells, avail, f"{info.distribution} {info.version}")
    console.print(table)
    if layout:
        for name in reg.dataset_names:
            ds = reg.dataset(name)
            text = ds.layout_help() or "(generated; no files needed)"
            console.print(f"\n[bold]{name}[/] — {ds.description}\nsource: {ds.source}\n{text}")


# ------------------------------------------------------------------------------- compare
@cli.command()
@click.option("--datasets", "datasets_", default=None,
              help="Comma-separated datasets or dataset/problem (default: simulated).")
@click.option("--models", "models_", default=None,
              help="Comma-separated model selectors, e.g. 'lasso,tfcl[k=[3,5]]' "
                   "(default: every discovered model).")
@click.option("-m", "--model", "model_opts", multiple=True,
              help="One model selector (repeatable), e.g. -m 'tfcl[k=5]'.")
@click.option("--reps", type=int, default=None,
              help="Repetitions, 1..1000 (default 15, the paper's).")
@click.option("--seed", type=int, default=None,
              help="Seed of the splits, 0..2**63-1 (default 0).")
@click.option("--jobs", "-j", type=int, default=None,
              help="Units run in parallel processes (joblib); -1 for all cores (default 1).")
@click.option("--scheduler", default=None,
              help="Address of a Dask distributed scheduler (tcp://host:8786) to run units on.")
@click.option("--store", default=DEFAULT_STORE, show_default=True, type=click.Path(dir_okay=False),
              help="SQLite results store; finished units in it are not recomputed.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder with local data files (also $MTLBENCH_DATA_DIR).")
@click.option("--timeout", type=float, default=None,
              help="Seconds (finite, > 0) a unit may run before it is recorded as failed.")
@click.option("--retry-failed", is_flag=True, help="Rerun units recorded as failed.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="TOML file with [compare] defaults and [models.NAME] overrides.")
@click.option("--test-fraction", type=float, default=None, help="Test share per task (0.15).")
@click.option("--val-fraction", type=float, default=None,
              help="Validation share of train+validation per task (0.2).")
@click.option("--search", "search", default=None,
              help="Hyperparameter searcher (default 'adaptive'; 'grid' = exactly the declared "
                   "starting grids; plugins may add more). See docs/tuning.md.")
@click.option("--budget", type=int, default=None,
              help="Fits per unit for the search, the same for every model (default 20; the "
                   "final refit is not counted; 'grid' ignores it).")
@user_errors
def compare(datasets_: str | None, models_: str | None, model_opts: tuple[str, ...],
            reps: int | None, seed: int | None, jobs: int | None, scheduler: str | None,
            store: str, data_dir: str | None, timeout: float | None, retry_failed: bool,
            config_path: str | None, test_fraction: float | None,
            val_fraction: float | None, search: str | None, budget: int | None) -> None:
    """Run models on datasets under the common protocol and print mean ± std test AUC."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    from .config import build_run_config
    from .dataset import resolve_data_dir
    from .runner import (check_overrides, check_problems_load, plan_units, resolve_problems,
                         run_units)
    from .selectors import apply_overrides, check_config_models, load_config, parse_selector
    from .store import ResultStore

    reg = _registry()
    cfg = load_config(config_path) if config_path else {}
    run = build_run_config(
        {"datasets": datasets_, "models": models_, "model": list(model_opts) or None,
         "reps": reps, "seed": seed, "jobs": jobs, "timeout": timeout,
         "test_fraction": test_fraction, "val_fraction": val_fraction, "search": search,
         "budget": budget}, cfg, config_path, searchers=reg.searcher_names)
    check_config_models(cfg, reg.model_names, config_path)
    config, jobs, timeout, ds_names = run.protocol, run.jobs, run.timeout, run.datasets
    selectors = run.selectors or reg.model_names

    selections = []
    for text in selectors:
        name, overrides = parse_selector(text)
        cls = reg.model_class(name)
        merged = {**run.model_overrides.get(name, {}), **overrides}
        selections.append(apply_overrides(cls, merged, name))
    labels = [s.label for s in selections]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"the same model selection is given twice: {labels}")

    ddir = resolve_data_dir(data_dir)
    ddir_s = str(ddir) if ddir else None
    problems = resolve_problems(reg, ds_names, ddir_s)
    loaded = check_problems_load(reg, problems, ddir_s)
    check_overrides(reg, selections, loaded, timeout)
    specs = plan_units(reg, selections, problems, config)
    result_store = ResultStore(store)

    console.print(
        f"[bold]mtlbench compare[/]: {len(selections)} model(s) x {len(problems)} problem(s) x "
        f"{config.reps} repetition(s) = {len(specs)} units; seed {config.seed}; search "
        f"{config.search}" + (f" (budget {config.budget} fits per unit)"
                              if config.search != "grid" else "") + f"; store {store}")
    for pid, ts in loaded.items():
        s = ts.summary()
        console.print(f"  {escape(pid)}: {s['tasks']} tasks, {s['features']} features, "
                      f"{s['labels']} labels, positive share {s['positive_share']:.3f}")

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                  transient=False) as progress:
        from .runner import pending_units

        todo = len(pending_units(specs, result_store, retry_failed))
        bar = progress.add_task("units", total=todo)

        def on_result(res) -> None:
            status = "ok" if res.ok else "[red]FAILED[/]"
            progress.update(bar, advance=1,
                            description=f"{escape(res.row['model'])} {res.row['problem']} "
                                        f"rep {res.row['rep']}: {status}")

        report = run_units(specs, result_store, jobs=jobs, data_dir=ddir_s, timeout=timeout,
                           retry_failed=retry_failed, scheduler=scheduler, on_result=on_result)
    console.print(f"ran {report.ran} unit(s) in {report.seconds:.1f} s, "
                  f"{report.skipped} already in the store, {report.failed} failed")
    pids = sorted({s.problem for s in specs})
    _print_summary(result_store, problems=pids, models=labels, keys=[s.key for s in specs])
    for res in report.failures[:10]:
        err_console.print(f"[red]failed[/] {escape(res.row['model'])} {res.row['problem']} "
                          f"rep {res.row['rep']}: {escape(str(res.row.get('message')))}",
                          soft_wrap=True)
    result_store.close()


def _print_summary(store, problems=None, models=None, keys=None) -> None:
    summary = store.summary(problems=problems, models=models, keys=keys)
    table = Table(title="mean ± std test AUC (x100) over repetitions")
    for col in ("problem", "model", "test AUC", "reps", "failed", "time (s)"):
        table.add_column(col, justify="right" if col not in ("problem", "model") else "left")
    for _, r in summary.iterrows():
        mean, std = r["test_auc_mean"], r["test_auc_std"]
        cell = "—" if mean != mean else (f"{100 * mean:.2f} ± {100 * std:.2f}" if std == std
                                         else f"{100 * mean:.2f}")
        t = r["time_total"]
        table.add_row(escape(r["problem"]), escape(r["model"]), cell, str(r["reps"]),
                      str(r["failed"]) if r["failed"] else "",
                      f"{t:.1f}" if t == t else "")
    console.print(table)


# ------------------------------------------------------------------------------- more commands
# Commands defined in their own modules (results, leaderboard, publish, import-results,
# new-plugin).
from .report.commands import register as _register_report  # noqa: E402
from .scaffold import new_plugin_cmd as _new_plugin_cmd  # noqa: E402

_register_report(cli, console=console, user_errors=user_errors, default_store=DEFAULT_STORE)
cli.add_command(_new_plugin_cmd)


def main() -> None:  # console-script entry point
    cli(prog_name="mtlbench")


if __name__ == "__main__":  # pragma: no cover
    main()
