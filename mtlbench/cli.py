"""The ``mtlbench`` command line (click + rich): a thin layer over :mod:`mtlbench.api`.

Errors meant for the user (:class:`~mtlbench.errors.MTLBenchError`) are printed as one clear
message and exit with status 2; nothing prints a traceback for bad input.

Start-up is kept short: this module imports only click, rich and the standard library at import
time.  Commands import what they use when they run; the commands defined in other modules are
imported when called (``_LAZY_COMMANDS``), and commands added by plugins (the
``register_commands`` hook) are discovered only when a name that is not built in is looked up,
so ``mtlbench --version`` and ``mtlbench --help`` load neither numpy nor any plugin.
"""
from __future__ import annotations

import importlib
import sys
import warnings

import click

from . import __version__
from ._ui import FORMATS, console, err_console, escape, render_rows, user_errors, warn
from .api import DEFAULT_STORE
from .errors import MTLBenchError

__all__ = ["cli", "main", "console", "err_console", "user_errors", "DEFAULT_STORE"]

#: built-in commands defined in other modules: name -> (module, attribute, short help).
#: The attribute is a click command, or a function ``register(cli)`` that adds commands.
_LAZY_COMMANDS: dict[str, tuple[str, str, str]] = {
    "results": ("mtlbench.cli", "_register_report_commands",
                "Show stored results (mean ± std test AUC per problem and model)."),
    "leaderboard": ("mtlbench.cli", "_register_report_commands",
                    "Leaderboard of one dataset (ranks, significance, provenance)."),
    "publish": ("mtlbench.cli", "_register_report_commands",
                "Write leaderboards/<dataset>.md and .json, figures and an index."),
    "import-results": ("mtlbench.cli", "_register_report_commands",
                       "Import a published leaderboard's units into a store."),
    "new-plugin": ("mtlbench.scaffold", "new_plugin_cmd",
                   "Scaffold a pip-installable model (or --dataset) plugin NAME."),
}


def _registry():
    from .plugins import PluginWarning, get_registry

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PluginWarning)
        reg = get_registry()
    for w in caught:
        if issubclass(w.category, PluginWarning):
            warn(str(w.message))
    return reg


def _split_csv(value: str | None) -> list[str]:
    from .selectors import split_top_level

    return split_top_level(value) if value else []


def _emit(text: str | None) -> None:
    if text is not None:
        click.echo(text, nl=False)


class _Group(click.Group):
    """Loads commands of other modules when they are called, and plugin commands only when a
    name that is not built in is looked up (a slow or broken plugin cannot slow down or take
    down ``--help``, ``--version`` or the built-in commands)."""

    _plugins_added = False

    def _add_plugin_commands(self) -> None:
        if not self._plugins_added:
            self._plugins_added = True
            from .plugins import PluginWarning, get_registry

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PluginWarning)
                    get_registry().add_commands(self)
            except MTLBenchError as exc:
                err_console.print(f"[bold red]Error:[/] {escape(str(exc))}", soft_wrap=True)

    def _load_lazy(self, name: str) -> None:
        module, attr, _ = _LAZY_COMMANDS[name]
        obj = getattr(importlib.import_module(module), attr)
        if isinstance(obj, click.Command):
            self.add_command(obj, name)
        else:
            obj(self)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is None and name in _LAZY_COMMANDS:
            self._load_lazy(name)
            cmd = super().get_command(ctx, name)
        if cmd is None:
            self._add_plugin_commands()
            cmd = super().get_command(ctx, name)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name)
            if cmd is not None:
                if not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
            else:
                rows.append((name, _LAZY_COMMANDS[name][2]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        with formatter.section("Plugin commands"):
            formatter.write_text("Plugins may add commands; they are loaded when called. "
                                 "'mtlbench plugins' lists them.")


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="mtlbench")
def cli() -> None:
    """Benchmark linear multi-task learning models under one leak-free protocol."""


_format_option = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
                              show_default=True,
                              help="table for reading; json or csv for other programs.")


# ------------------------------------------------------------------------------- plugins
@cli.command()
@_format_option
@user_errors
def plugins(fmt: str) -> None:
    """List discovered plugins, what they registered, and plugins that failed to load."""
    reg = _registry()
    commands = _plugin_commands(reg)
    rows = [{"plugin": p.name, "distribution": p.distribution, "version": p.version,
             "models": list(p.models), "datasets": list(p.datasets),
             "searchers": list(p.searchers), "commands": commands.get((p.distribution, p.name), []), "status": "ok",
             "stage": None, "error": None}
            for p in sorted(reg.plugins, key=lambda p: (p.distribution, p.name))]
    failed = [{"plugin": f.name, "distribution": f.distribution, "version": f.version,
               "models": [], "datasets": [], "searchers": [], "commands": [],
               "status": "failed",
               "stage": f.stage, "error": f.error} for f in reg.failures]
    if fmt != "table":
        cols = ("plugin", "distribution", "version", "models", "datasets", "searchers",
                "commands", "status", "stage", "error")
        _emit(render_rows(rows + failed, cols, fmt))
        return
    render_rows(rows, ("plugin", "distribution", "version", "models", "datasets", "searchers",
                       "commands"), fmt, title="mtlbench plugins (entry-point group 'mtlbench')")
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


@cli.command()
@_format_option
@user_errors
def models(fmt: str) -> None:
    """List available models with their search spaces and plugin distribution."""
    from .space import space_json

    reg = _registry()
    rows = []
    for name in reg.model_names:
        cls = reg.model_class(name)
        info = reg.model_plugin(name)
        space = dict(cls.search_space)
        rows.append({"name": name, "class": cls.__name__, "distribution": info.distribution,
                     "version": info.version,
                     "search_space": (space_json(space) if fmt != "table"
                                      else "; ".join(f"{k}={v}" for k, v in space.items())),
                     "paper": cls.paper})
    cols = ["name", "class", "distribution", "version", "search_space", "paper"]
    if fmt == "table":
        for r in rows:
            r["distribution"] = f"{r['distribution']} {r.pop('version')}"
        cols.remove("version")
    _emit(render_rows(rows, cols, fmt, title="models"))


@cli.command()
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Folder with local data files (also $MTLBENCH_DATA_DIR).")
@click.option("--load/--no-load", default=True, show_default=True,
              help="Load available problems to show task counts and dimensions.")
@click.option("--layout", is_flag=True, help="Explain each dataset's expected file layout.")
@_format_option
@user_errors
def datasets(data_dir: str | None, load: bool, layout: bool, fmt: str) -> None:
    """List datasets: problems, task counts, feature dimension and availability."""
    from .api import dataset_rows

    _registry()  # plugin warnings, once
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
    _emit(render_rows(rows, cols, fmt, title="datasets"))
    if layout and fmt == "table":
        reg = _registry()
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
@click.option("--timeout", type=float, default=None,
              help="Seconds (finite, > 0) a unit may run before it is recorded as failed.")
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
@click.option("--search", "search", default=None,
              help="Hyperparameter searcher (default 'adaptive'; 'grid' = exactly the declared "
                   "starting grids; plugins may add more). See docs/tuning.md.")
@click.option("--budget", type=int, default=None,
              help="Fits per unit for the search, the same for every model (default 20; the "
                   "final refit is not counted; 'grid' ignores it).")
@click.option("--dry-run", is_flag=True,
              help="Print the units that would run, how many are stored and a wall-time "
                   "estimate from stored unit times; run nothing.")
@user_errors
def compare(datasets_: str | None, models_: str | None, model_opts: tuple[str, ...],
            reps: int | None, seed: int | None, jobs: int | None, scheduler: str | None,
            store: str, data_dir: str | None, timeout: float | None, retry_failed: bool,
            rerun: tuple[str, ...], allow_failures: bool, config_path: str | None,
            test_fraction: float | None, val_fraction: float | None, search: str | None,
            budget: int | None, dry_run: bool) -> None:
    """Run models on datasets under the common protocol and print mean ± std test AUC.

    Exits with status 1 when a unit of the run failed (--allow-failures: 0)."""
    from . import api

    if not scheduler and not dry_run:
        from .runner.local import prestart

        prestart()  # worker processes' imports overlap with planning
    _registry()  # plugin warnings, once
    selectors: list[str] | str | None = list(model_opts) + _split_csv(models_)
    if not selectors:
        selectors = models_  # None: the default; "": a clear error from the settings check
    plan = api.plan(datasets_, selectors, reps=reps, seed=seed,
                    jobs=jobs, scheduler=scheduler, store=store, data_dir=data_dir,
                    timeout=timeout, retry_failed=retry_failed, config=config_path,
                    test_fraction=test_fraction, val_fraction=val_fraction, search=search,
                    budget=budget, rerun=[m for r in rerun for m in _split_csv(r)])
    pc = plan.config
    search_text = pc.search + (f" (budget {pc.budget} fits per unit)" if pc.search != "grid"
                               else "")
    console.print(
        f"[bold]mtlbench compare[/]: {len(plan.selections)} model(s) x {len(plan.problems)} "
        f"problem(s) x {pc.reps} repetition(s) = {len(plan.specs)} units; "
        f"seed {pc.seed}; search {search_text}; store {store}")
    for pid, s in plan.summaries.items():
        console.print(f"  {escape(pid)}: {s['tasks']} tasks, {s['features']} features, "
                      f"{s['labels']} labels, positive share {s['positive_share']:.3f}")
    if dry_run:
        _print_plan(plan)
        return
    from .progress import RichReporter
    from .runner import RunInterrupted

    try:
        with RichReporter(console.real()) as reporter:
            result = api.run(plan, reporter=reporter)
    except RunInterrupted as exc:
        _interrupted(exc.report, store)
    report = result.report
    console.print(f"ran {report.ran} unit(s) in {report.seconds:.1f} s, "
                  f"{report.skipped} already in the store, {report.failed} failed")
    from .store import ResultStore

    with ResultStore(plan.store) as rs:
        _print_summary(rs, problems=plan.problem_ids, models=plan.labels, keys=result.keys)
    for res in report.failures[:10]:
        err_console.print(f"[red]failed[/] {escape(res.row['model'])} {res.row['problem']} "
                          f"rep {res.row['rep']}: {escape(str(res.row.get('message')))}",
                          soft_wrap=True)
    _failure_exit(report, allow_failures)


def _reps_text(reps: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2, 5'."""
    out, run = [], []
    for r in sorted(reps):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [r]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def _print_plan(plan) -> None:
    """The dry run: units to run per (problem, model), what is stored, the estimate."""
    from rich.table import Table

    todo = {s.key for s in plan.todo}
    groups: dict[tuple[str, str], dict[str, list[int]]] = {}
    for s in plan.specs:
        g = groups.setdefault((s.problem, s.label), {"run": [], "stored": []})
        g["run" if s.key in todo else "stored"].append(s.rep)
    table = Table(title="dry run: units per problem and model")
    for col in ("problem", "model", "to run", "repetitions to run", "stored"):
        table.add_column(col, justify="right" if col in ("to run", "stored") else "left")
    for (prob, label), g in groups.items():
        table.add_row(escape(prob), escape(label), str(len(g["run"])), _reps_text(g["run"]),
                      str(len(g["stored"])))
    console.print(table)
    retry = ""
    if plan.stored_failed and not plan.retry_failed:
        retry = f" ({plan.stored_failed} failed; --retry-failed reruns them)"
    elif plan.stored_failed:
        retry = f" ({plan.stored_failed} failed, to be rerun)"
    console.print(f"{len(plan.specs)} planned unit(s): {len(plan.todo)} to run, "
                  f"{len(plan.specs) - len(plan.todo)} already in the store{retry}")
    console.print(f"estimate: {plan.estimate.text()}")
    console.print("dry run: nothing was run.")


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
    from rich.table import Table

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


def _register_report_commands(group: click.Group) -> None:
    """results, leaderboard, publish and import-results (defined in :mod:`mtlbench.report`)."""
    from .report.commands import register

    register(group, console=console, user_errors=user_errors, default_store=DEFAULT_STORE)


def main() -> None:  # console-script entry point
    cli(prog_name="mtlbench")


if __name__ == "__main__":  # pragma: no cover
    main()
