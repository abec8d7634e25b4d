"""Commands that fill and read a results store: ``compare``, ``results``, ``import-results``.

Thin layers over :mod:`mtlbench.api` (planning and running) and :mod:`mtlbench.report`
(``results`` uses the leaderboard's selection rule, so the two agree).  Only click and the
standard library are imported at import time; rich, numpy, pandas, the runner and the plugins
load when a command runs, so ``compare --help`` stays fast.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys
import threading
from typing import Any

import click

from .. import api
from ..api import DEFAULT_STORE
from ..syntax import split_top_level
from ._options import (data_dir_option, dataset_list, datasets_option, format_option,
                       model_list, models_option, open_store, seed_option, store_option)
from ._ui import console, err_console, escape, registry, user_errors, warn

__all__ = ["compare", "results", "import_results"]


def _split_csv(value: str | None) -> list[str]:
    return split_top_level(value) if value else []


# ------------------------------------------------------------------------------- compare
@click.command()
@datasets_option("Datasets or dataset/problem, comma-separated and/or repeated (default: "
                 "simulated).")
@models_option("Model selectors, comma-separated and/or repeated, e.g. -m 'lasso,tfcl[k=[3,5]]' "
               "-m stl, or a group: -m classic, -m all (default: every discovered model "
               "that runs by default; `mtlbench models` says which).")
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
@data_dir_option()
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
@click.option("--train-fraction", type=float, default=None,
              help="Training-fraction protocol (MALSAR-style, e.g. 0.1): this share of each "
                   "task for training and validation, the rest for test; instead of "
                   "--test-fraction. Recorded in every unit's key.")
@click.option("--select-by", "select_by", default=None,
              help="Metric that selects hyperparameters (default: each problem's primary "
                   "metric, auc for binary targets, rmse for real-valued ones); "
                   "'mtlbench plugins' lists the metrics.")
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
def compare(datasets_: tuple[str, ...], models_: tuple[str, ...], reps: int | None,
            seed: int | None, jobs: int | None, scheduler: str | None, store: str,
            data_dir: str | None, timeout: float | None, retry_failed: bool,
            rerun: tuple[str, ...], allow_failures: bool, config_path: str | None,
            test_fraction: float | None, val_fraction: float | None,
            train_fraction: float | None, select_by: str | None, search: str | None,
            budget: int | None, dry_run: bool) -> None:
    """Run models on datasets under the common protocol and print mean ± std of each
    problem's primary metric (test AUC for binary targets, RMSE for real-valued ones), and
    the other metrics briefly.

    Exits with status 1 when a unit of the run failed (--allow-failures: 0); 130 on Ctrl-C
    and 143 on SIGTERM, after saying what was saved."""
    with _terminate_like_interrupt() as received:
        try:
            if not scheduler and not dry_run:
                from ..runner.local import prestart

                prestart()  # worker processes' imports overlap with planning
            registry()  # plugin warnings, once
            plan = api.plan(dataset_list(datasets_),
                            model_list(models_), reps=reps, seed=seed,
                            jobs=jobs, scheduler=scheduler, store=store, data_dir=data_dir,
                            timeout=timeout, retry_failed=retry_failed, config=config_path,
                            test_fraction=test_fraction, val_fraction=val_fraction,
                            search=search, budget=budget,
                            rerun=[m for r in rerun for m in _split_csv(r)],
                            train_fraction=train_fraction, select_by=select_by)
        except KeyboardInterrupt:
            _stopped(received, "while planning, before any unit ran")
        try:
            _compare(plan, store, dry_run, allow_failures, received)
        except KeyboardInterrupt:  # outside the units' run (which says what it saved)
            _stopped(received, f"the units finished so far are saved in {store}")


def _compare(plan, store: str, dry_run: bool, allow_failures: bool, received: list) -> None:
    pc = plan.config
    search_text = pc.search + (f" (budget {pc.budget} fits per unit)" if pc.search != "grid"
                               else "")
    console.print(
        f"[bold]mtlbench compare[/]: {len(plan.selections)} model(s) x {len(plan.problems)} "
        f"problem(s) x {pc.reps} repetition(s) = {len(plan.specs)} units; "
        f"seed {pc.seed}; search {search_text}; store {store}")
    for pid, s in plan.summaries.items():
        balance = (f"positive share {s['positive_share']:.3f}" if s["positive_share"] is not None
                   else f"real-valued targets, mean {s['target_mean']:g} ± {s['target_std']:g}")
        console.print(f"  {escape(pid)}: {s['tasks']} tasks, {s['features']} features, "
                      f"{s['labels']} labels, {balance}")
    if plan.rekeyed:
        console.print(f"  {plan.rekeyed} stored unit(s) of the previous code fingerprint rule, "
                      "made by the code installed now, moved to their keys under this rule")
    for line in plan.skipped:
        console.print(f"  [yellow]skipped[/] {escape(line)}", soft_wrap=True)
    shown = _print_notices(plan, set())
    if dry_run:
        _print_plan(plan)
        return
    import warnings

    from ._progress import progress_reporter
    from ..plugins import PluginMigrationWarning
    from ..runner import RunInterrupted

    try:
        with progress_reporter(console.real()) as reporter, warnings.catch_warnings():
            warnings.simplefilter("ignore", PluginMigrationWarning)  # shown below, once
            result = api.run(plan, reporter=reporter)
    except RunInterrupted as exc:
        _stopped(received, f"{exc.report.saved} unit(s) of this run were saved in {store}")
    _print_notices(plan, shown)
    report = result.report
    console.print(f"ran {report.ran} unit(s) in {report.seconds:.1f} s, "
                  f"{report.skipped} already in the store, {report.failed} failed")
    from ..store import ResultStore

    with ResultStore(plan.store) as rs:
        units = rs.units(keys=result.keys)
        _print_summary(units)
        _print_failed_fits(units, err=True)
    for res in report.failures[:10]:
        err_console.print(f"[red]failed[/] {escape(res.row['model'])} {res.row['problem']} "
                          f"rep {res.row['rep']}: {escape(str(res.row.get('message')))}",
                          soft_wrap=True)
    _failure_exit(report, allow_failures)


def _print_notices(plan, shown: set) -> set:
    """Print each migration notice (:class:`~mtlbench.plugins.PluginNotice`) of a model
    this run uses once: those of its declarations, and those its first finished unit gave
    (``converged_`` never set); ``shown`` holds the ones printed before."""
    models = {s.model for s in plan.specs}
    for n in registry().notices:
        if n.model in models and (n.model, n.message) not in shown:
            shown.add((n.model, n.message))
            warn(f"plugin {n.name!r} ({n.distribution} {n.version}), model {n.model!r}: "
                 f"{n.message}")
    return shown


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


#: the dry-run table's words for where an expected unit time comes from (runner.cost)
_SOURCE_WORDS = {"stored": "stored", "scaled": "other problems (extrapolated)",
                 "hint": "cost_hint (extrapolated)", "default": "no time (1 s assumed)"}


def _print_plan(plan) -> None:
    """The dry run: units to run per (problem, model), what is stored, the estimate."""
    from rich.table import Table

    todo = {s.key for s in plan.todo}
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for s in plan.specs:
        g = groups.setdefault((s.problem, s.label), {"run": [], "stored": [], "expected": None})
        g["run" if s.key in todo else "stored"].append(s.rep)
        if s.key in plan.expected:
            g["expected"] = plan.expected[s.key]
    table = Table(title="dry run: units per problem and model")
    for col in ("problem", "model", "to run", "repetitions to run", "stored",
                "expected s/unit", "from"):
        table.add_column(col, justify="right" if col in ("to run", "stored", "expected s/unit")
                         else "left")
    for (prob, label), g in groups.items():
        e = g["expected"]
        table.add_row(escape(prob), escape(label), str(len(g["run"])), _reps_text(g["run"]),
                      str(len(g["stored"])), f"{e.seconds:.1f}" if e else "",
                      (_SOURCE_WORDS[e.source] + (", UNCERTAIN (another kind of problem)"
                                                   if e.unlike else "")) if e else "")
    console.print(table)
    retry = ""
    if plan.stored_failed and not plan.retry_failed:
        retry = f" ({plan.stored_failed} failed; --retry-failed reruns them)"
    elif plan.stored_failed:
        retry = f" ({plan.stored_failed} failed, to be rerun)"
    console.print(f"{len(plan.specs)} planned unit(s): {len(plan.todo)} to run, "
                  f"{len(plan.specs) - len(plan.todo)} already in the store{retry}")
    console.print(f"estimate: {escape(plan.estimate.text())}")
    console.print("dry run: nothing was run.")


@contextlib.contextmanager
def _terminate_like_interrupt():
    """SIGTERM (what ``timeout``, systemd and Slurm send) ends ``compare`` like Ctrl-C: it is
    raised as KeyboardInterrupt in the main thread, so the same cleanup runs (workers
    stopped, claims released, finished units kept).  Yields the list of signals received; a
    second SIGTERM during the cleanup is ignored."""
    received: list[int] = []

    def on_sigterm(signum, frame):
        if not received:
            received.append(signum)
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _stopped(received: list, saved: str) -> None:
    """Say what a stopped ``compare`` saved and how to resume; exit 128 + the signal."""
    signum = received[0] if received else signal.SIGINT
    what = "Interrupted" if signum == signal.SIGINT else \
        f"Terminated ({signal.Signals(signum).name})"
    err_console.print(f"[yellow]{what}:[/] {saved}. Resume with the same command (finished "
                      f"units are skipped):\n  mtlbench {escape(shlex.join(sys.argv[1:]))}",
                      soft_wrap=True)
    sys.exit(128 + int(signum))


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


def _print_summary(units) -> None:
    """Per target kind of the run's problems (``units``: the run's stored units): the primary
    metric's table (mean ± std over repetitions, best first), then the means of the other
    recorded metrics -- the numbers ``leaderboard`` shows, computed one way."""
    from rich.table import Table

    from ..report.render import metric_text
    from ..report.roles import dataset_title
    from ..report.select import metric_frame, problem_kinds
    from ..scoring import get_metric, metrics_for, primary_metric

    kinds = problem_kinds(units)
    for kind in sorted(set(kinds.values())):
        part = units[units["problem"].isin([p for p, k in kinds.items() if k == kind])]
        titles = {p: dataset_title(p) if p in set(part["dataset"]) else p
                  for p in part["problem"].unique()}
        primary = get_metric(primary_metric(kind))
        df = metric_frame(part, primary.name, table_units=True)
        df = df.assign(_o=[-primary.oriented(v) if v is not None else float("inf")
                           for v in df["mean"]]).sort_values(["problem", "_o"])
        table = Table(title=f"{primary.heading()}, mean ± std over repetitions (primary metric: "
                            "it selects the hyperparameters and ranks)")
        for col in ("problem", "model", primary.label, "reps", "failed", "time (s)"):
            table.add_column(col, justify="right" if col not in ("problem", "model") else "left")
        for _, r in df.iterrows():
            cell = metric_text(r["mean"], primary, table_units=True)
            if r["std"] is not None and r["std"] == r["std"]:
                cell += f" ± {metric_text(r['std'], primary, table_units=True)}"
            table.add_row(escape(titles[r["problem"]]), escape(r["model"]), cell,
                          str(r["reps"]), str(r["failed"]) if r["failed"] else "",
                          f"{r['time_total_s']:.1f}")
        console.print(table)
        others = [m for m in metrics_for(kind) if m.name != primary.name]
        if not others:
            continue
        frames = {m.name: metric_frame(part, m.name, table_units=True)
                  .set_index(["problem", "model"]) for m in others}
        brief = Table(title="other metrics on test, mean over repetitions (x 100: shares and "
                            "AUCs; ↑ / ↓: higher / lower is better)")
        for col in ["problem", "model"] + [f"{m.label} {m.arrow}" for m in others]:
            brief.add_column(col, justify="right" if col not in ("problem", "model") else "left")
        for _, r in df.iterrows():
            idx = (r["problem"], r["model"])
            brief.add_row(escape(titles[r["problem"]]), escape(r["model"]),
                          *[metric_text(frames[m.name].loc[idx, "mean"], m, table_units=True)
                            for m in others])
        console.print(brief)


def _auc_cell(mean: float | None, std: float | None) -> str:
    """``86.78 ± 0.55`` (x100, two decimals), ``86.78`` for one repetition, ``—`` for none."""
    if mean is None or mean != mean:
        return "—"
    return f"{mean:.2f} ± {std:.2f}" if std is not None and std == std else f"{mean:.2f}"


# ------------------------------------------------------------------------------- results
@click.command("results")
@store_option
@datasets_option()
@models_option()
@seed_option
@click.option("--failures", is_flag=True, help="List failed units with their messages.")
@click.option("--traceback", "show_tb", is_flag=True,
              help="With --failures: print each failed unit's traceback.")
@format_option
@user_errors
def results(store: str, datasets_: tuple[str, ...], models_: tuple[str, ...], seed: int | None,
            failures: bool, show_tb: bool, fmt: str) -> None:
    """Stored results: mean ± std test AUC per problem and model, under the same selection
    rule as the leaderboard (one seed, the latest code per model), with what was left out."""
    from rich.table import Table

    from ..report.select import left_out_text, results_frame, select_units

    rs = open_store(store, readonly=True)
    try:
        problems = dataset_list(datasets_)
        models = model_list(models_)
        all_units = rs.units()
        datasets = None
        if problems:
            datasets = sorted({p.split("/", 1)[0] for p in problems})
        sel = select_units(rs, datasets, seed=seed, models=models, problems=problems,
                           expected=models, all_units=all_units)
        df = results_frame(sel)
        if fmt == "json":
            click.echo(json.dumps({"results": json.loads(df.to_json(orient="records")),
                                   "left_out": sel.left_out, "notes": sel.notes,
                                   "absent_models": sel.absent,
                                   "progress": json.loads(sel.progress.to_json(
                                       orient="records"))}, indent=1))
        elif fmt == "csv":
            click.echo(df.to_csv(index=False), nl=False)
        else:
            table = Table(title="mean ± std test AUC (x100) over repetitions")
            for col in ("problem", "model", "test AUC", "reps", "failed", "seed", "time (s)"):
                table.add_column(col, justify="left" if col in ("problem", "model")
                                 else "right", no_wrap=True)
            for _, r in df.iterrows():
                reps = f"{r['reps']}/{r['planned_reps']}"
                table.add_row(escape(r["problem"]), escape(r["model"]),
                              _auc_cell(r["test_auc_mean_x100"], r["test_auc_std_x100"]), reps,
                              str(r["failed"]) if r["failed"] else "", str(r["seed"]),
                              f"{r['time_total_s']:.1f}")
            console.print(table)
            console.print(escape(left_out_text(sel)), soft_wrap=True)
            for note in sel.notes:
                console.print(f"  {escape(note)}", soft_wrap=True)
            stale = _stale_note(rs)
            if stale:
                console.print(f"[yellow]Note:[/] {escape(stale)}", soft_wrap=True)
        if failures:
            failed = sel.units[sel.units["status"] != "ok"]
            for _, r in failed.iterrows():
                click.echo(f"failed {r['model']} {r['problem']} rep {r['rep']}: "
                           f"{r['message']}", err=fmt != "table")
                if show_tb and isinstance(r["traceback"], str) and r["traceback"].strip():
                    click.echo(r["traceback"].rstrip(), err=fmt != "table")
            if failed.empty and fmt == "table":
                console.print("no failed units in this selection")
            _print_failed_fits(sel.units, err=fmt != "table", tracebacks=show_tb)
    finally:
        rs.close()


def _print_failed_fits(units, *, err: bool, tracebacks: bool = False, limit: int = 10) -> None:
    """Units that finished although fits of their search raised (the search went on without
    them): a count, then per unit (the first ``limit``) its failed fits' errors and the
    plugin's line that raised; with ``tracebacks`` each distinct traceback in full (the
    plugin's frames, kept in the trace: :func:`mtlbench.protocol.plugin_traceback`)."""
    from ..report.select import row_search

    lost = []
    for _, row in units[units["status"] == "ok"].iterrows():
        fits, _ = row_search(row)
        failed = [f for f in fits if f.get("error")]
        if failed:
            lost.append((row, len(fits), failed))
    if not lost:
        return
    n = sum(len(failed) for _, _, failed in lost)
    click.echo(f"{n} fit(s) of the search raised in {len(lost)} finished unit(s) (each unit "
               "was selected from its other fits; 'mtlbench results --failures --traceback' "
               "shows where):", err=err)
    for row, n_fits, failed in lost[:limit]:
        errors: dict[str, list[dict]] = {}
        for f in failed:
            errors.setdefault(f["error"], []).append(f)
        click.echo(f"  failed fits {row['model']} {row['problem']} rep {row['rep']}: "
                   f"{len(failed)} of {n_fits}", err=err)
        for error, fits in errors.items():
            tb = str(fits[0].get("traceback") or "")
            frames = [line.strip() for line in tb.splitlines() if line.startswith("  ")
                      and not line.startswith("    ")]
            where = f" (at {frames[-1]})" if frames and not tracebacks else ""
            click.echo(f"    {len(fits)} x {error}{where}", err=err)
            if tracebacks and tb:
                click.echo("\n".join("      " + line for line in tb.splitlines()), err=err)
    if len(lost) > limit:
        click.echo(f"  ... and {len(lost) - limit} more unit(s)", err=err)


def _stale_note(store) -> str:
    """The store's note on units made by older code than what is installed, else ''."""
    from ..plugins import get_registry
    from ..provenance import stale_note

    try:
        return stale_note(store, get_registry()) or ""
    except Exception:  # noqa: BLE001 - a note must not stop the report
        return ""


# ------------------------------------------------------------------------- import-results
@click.command("import-results")
@click.argument("file", type=click.Path(dir_okay=False))
@store_option
@data_dir_option("Folder with local data files (also $MTLBENCH_DATA_DIR), to recompute the "
                 "data and split fingerprints of real datasets.")
@click.option("--verify", type=click.IntRange(min=0), default=0, show_default=True,
              help="Recompute this many units drawn at random from the file here, and refuse "
                   "the import unless they agree (bit-identical where the code is the same).")
@click.option("--verify-seed", type=int, default=0, show_default=True,
              help="Seed of the random draw of --verify.")
@click.option("--replace", is_flag=True,
              help="Overwrite units the store holds already (computed there, with their "
                   "fitted arrays and histories, or imported before); without it they are "
                   "kept.")
@user_errors
def import_results(file: str, store: str, data_dir: str | None, verify: int,
                   verify_seed: int, replace: bool) -> None:
    """Import a published leaderboard's units (leaderboards/DATASET.json) into a store, so
    that 'compare --models mine' computes only your model and 'leaderboard' shows all.

    Every unit is checked first (types, test AUC = mean of the per-task AUCs, keys,
    fingerprints) and refused when splits, data or protocol differ from this installation's;
    one problem refuses the whole file and nothing is written.  The units are written in one
    transaction; a unit the store holds already is kept unless --replace.  Imported units
    are marked as such in the leaderboard (docs/reports.md)."""
    from ..dataset import resolve_data_dir
    from ..report.importing import check_import, write_import

    ddir = resolve_data_dir(data_dir)

    def log(text: str) -> None:
        console.print(escape(text), soft_wrap=True)

    checked = check_import(file, data_dir=str(ddir) if ddir else None, verify=verify,
                          verify_seed=verify_seed, log=log)
    rs = open_store(store, must_exist=False)
    try:
        write_import(checked, rs, log=log, replace=replace)
    finally:
        rs.close()
