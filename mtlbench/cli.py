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
    for col in ("plugin", "distribution", "version", "models", "datasets"):
        table.add_column(col)
    for p in sorted(reg.plugins, key=lambda p: (p.distribution, p.name)):
        table.add_row(p.name, p.distribution, p.version, ", ".join(p.models),
                      ", ".join(p.datasets))
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
@click.option("--reps", type=click.IntRange(min=1), default=None,
              help="Repetitions (default 15, the paper's).")
@click.option("--seed", type=int, default=None, help="Seed of the splits (default 0).")
@click.option("--jobs", "-j", type=int, default=None,
              help="Units run side by side, each in its own supervised process "
                   "(default: the number of CPUs; -1 too; -j 1 for one at a time).")
@click.option("--scheduler", default=None,
              help="Address of a Dask distributed scheduler (tcp://host:8786) to run units on. "
                   "Warning: anyone who can reach an unsecured scheduler can run code on its "
                   "workers and this client; bind it to a private interface or use TLS "
                   "(docs/scaling.md).")
@click.option("--store", default=DEFAULT_STORE, show_default=True, type=click.Path(dir_okay=False),
              help="SQLite results store; finished units in it are not recomputed.")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder with local data files (also $MTLBENCH_DATA_DIR).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds a unit may run before it is recorded as failed.")
@click.option("--retry-failed", is_flag=True, help="Rerun units recorded as failed.")
@click.option("--rerun", "rerun", multiple=True, is_flag=False, flag_value="*",
              help="Recompute units already in the store: every unit (--rerun alone) or those "
                   "of the given models (--rerun MODEL, repeatable or comma-separated).")
@click.option("--allow-failures", is_flag=True,
              help="Exit with status 0 even when units failed.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="TOML file with [compare] defaults and [models.NAME] overrides.")
@click.option("--test-fraction", type=float, default=None, help="Test share per task (0.15).")
@click.option("--val-fraction", type=float, default=None,
              help="Validation share of train+validation per task (0.2).")
@user_errors
def compare(datasets_: str | None, models_: str | None, model_opts: tuple[str, ...],
            reps: int | None, seed: int | None, jobs: int | None, scheduler: str | None,
            store: str, data_dir: str | None, timeout: float | None, retry_failed: bool,
            rerun: tuple[str, ...], allow_failures: bool, config_path: str | None,
            test_fraction: float | None, val_fraction: float | None) -> None:
    """Run models on datasets under the common protocol and print mean ± std test AUC.

    Exits with status 1 when a unit of the run failed (--allow-failures: 0)."""
    from .dataset import resolve_data_dir
    from .progress import RichReporter
    from .protocol import ProtocolConfig
    from .runner import (RunInterrupted, check_overrides, check_problems_load, default_jobs,
                         plan_units, resolve_problems, run_units)
    from .selectors import apply_overrides, check_config_models, load_config, parse_selector
    from .store import ResultStore

    if not scheduler:
        from .runner.local import prestart

        prestart()  # worker processes' imports overlap with planning
    reg = _registry()
    cfg = load_config(config_path) if config_path else {}
    check_config_models(cfg, reg.model_names, config_path)
    defaults = cfg.get("compare", {})
    known = {"datasets", "models", "reps", "seed", "test_fraction", "val_fraction", "jobs",
             "timeout"}
    if set(defaults) - known:
        raise ConfigError(f"config [compare]: unknown keys {sorted(set(defaults) - known)}; "
                          f"known: {sorted(known)}")

    def _listish(v: Any) -> list[str]:
        return list(v) if isinstance(v, list) else _split_csv(v)

    ds_names = _split_csv(datasets_) or _listish(defaults.get("datasets", ["simulated"]))
    selectors = list(model_opts) + _split_csv(models_)
    if not selectors:
        selectors = _listish(defaults.get("models", [])) or reg.model_names
    config = ProtocolConfig(
        reps=reps or int(defaults.get("reps", 15)),
        seed=seed if seed is not None else int(defaults.get("seed", 0)),
        test_fraction=test_fraction or float(defaults.get("test_fraction", 0.15)),
        val_fraction=val_fraction or float(defaults.get("val_fraction", 0.2)))
    if jobs is None:
        jobs = int(defaults["jobs"]) if "jobs" in defaults else -1
    if jobs == -1:
        jobs = default_jobs()
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1 (or -1 for all cores), got {jobs}")
    if timeout is None and "timeout" in defaults:
        timeout = float(defaults["timeout"])

    selections = []
    for text in selectors:
        name, overrides = parse_selector(text)
        cls = reg.model_class(name)
        merged = {**cfg.get("models", {}).get(name, {}), **overrides}
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
        f"{config.reps} repetition(s) = {len(specs)} units; seed {config.seed}; store {store}")
    for pid, ts in loaded.items():
        s = ts.summary()
        console.print(f"  {pid}: {s['tasks']} tasks, {s['features']} features, "
                      f"{s['labels']} labels, positive share {s['positive_share']:.3f}")

    rerun_models = [m for r in rerun for m in _split_csv(r)]
    try:
        with RichReporter(console) as reporter:
            report = run_units(specs, result_store, jobs=jobs, data_dir=ddir_s,
                               timeout=timeout, retry_failed=retry_failed, scheduler=scheduler,
                               reporter=reporter, rerun=rerun_models, registry=reg)
    except RunInterrupted as exc:
        _interrupted(exc.report, store)
    console.print(f"ran {report.ran} unit(s) in {report.seconds:.1f} s, "
                  f"{report.skipped} already in the store, {report.failed} failed")
    pids = sorted({s.problem for s in specs})
    _print_summary(result_store, problems=pids, models=labels, keys=[s.key for s in specs])
    for res in report.failures[:10]:
        err_console.print(f"[red]failed[/] {escape(res.row['model'])} {res.row['problem']} "
                          f"rep {res.row['rep']}: {escape(str(res.row.get('message')))}",
                          soft_wrap=True)
    result_store.close()
    _failure_exit(report, allow_failures)


def _interrupted(report, store: str) -> None:
    import shlex

    err_console.print(f"[yellow]Interrupted:[/] {report.saved} unit(s) of this run were saved "
                      f"in {store}. Resume with the same command (finished units are "
                      f"skipped):\n  mtlbench {shlex.join(sys.argv[1:])}", soft_wrap=True)
    sys.exit(130)


def _failure_exit(report, allow_failures: bool) -> None:
    """Exit status 1 when units of the run failed (now or in an earlier run), saying how to
    retry them."""
    if report.claimed_elsewhere:
        console.print(f"{report.claimed_elsewhere} unit(s) are being computed by another run "
                      "on this store; run the command again once it ends to see them.")
    if report.failed_before:
        err_console.print(f"{report.failed_before} unit(s) of this run failed in an earlier "
                          "run and were not rerun; add --retry-failed to rerun them "
                          "(e.g. with a larger --timeout).", soft_wrap=True)
    if report.failed:
        err_console.print(f"{report.failed} unit(s) failed; rerun them with the same command "
                          "plus --retry-failed ('mtlbench results --failures' lists them).",
                          soft_wrap=True)
    if (report.failed or report.failed_before) and not allow_failures:
        sys.exit(1)


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


@cli.command()
@click.option("--store", default=DEFAULT_STORE, show_default=True, type=click.Path(dir_okay=False))
@click.option("--datasets", "datasets_", default=None, help="Filter: comma-separated problems.")
@click.option("--models", "models_", default=None, help="Filter: comma-separated model labels.")
@click.option("--failures", is_flag=True, help="List failed units with their messages.")
@user_errors
def results(store: str, datasets_: str | None, models_: str | None, failures: bool) -> None:
    """Show results stored by earlier runs (mean ± std test AUC per problem and model)."""
    from .store import ResultStore

    if not Path(store).exists():
        raise ConfigError(f"no results store at {store!r}; run 'mtlbench compare' first "
                          "or pass --store PATH")
    rs = ResultStore(store, readonly=True)
    problems = None
    if datasets_:
        all_problems = set(rs.units().problem)
        problems = [p for p in all_problems
                    if any(p == d or p.startswith(d + "/") for d in _split_csv(datasets_))]
    models = _split_csv(models_) or None
    _print_summary(rs, problems=problems, models=models)
    from .provenance import stale_note

    note = stale_note(rs, _registry())
    if note:
        console.print(f"[yellow]Note:[/] {escape(note)}", soft_wrap=True)
    if failures:
        df = rs.units(problems=problems, models=models, status="failed")
        for _, r in df.iterrows():
            console.print(f"[red]failed[/] {escape(r['model'])} {r['problem']} rep {r['rep']}: "
                          f"{escape(str(r['message']))}", soft_wrap=True)
    rs.close()


# ------------------------------------------------------------------------------- more commands
# Commands defined in their own modules (leaderboard, publish, new-plugin).
from .leaderboard import register as _register_leaderboard  # noqa: E402
from .scaffold import new_plugin_cmd as _new_plugin_cmd  # noqa: E402

_register_leaderboard(cli)
cli.add_command(_new_plugin_cmd)


def main() -> None:  # console-script entry point
    cli(prog_name="mtlbench")


if __name__ == "__main__":  # pragma: no cover
    main()
