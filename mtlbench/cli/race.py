"""``mtlbench race``: every solver's objective against time on one training split.

A thin layer over :mod:`mtlbench.race` (selections, runs, reference optima, rows) and
:mod:`mtlbench.report.race_figures` (the figure); only click and the standard library are
imported at import time.
"""
from __future__ import annotations

from pathlib import Path

import click

from ..api import DEFAULT_STORE
from ..syntax import file_stem
from ._options import (data_dir_option, dataset_option, figures_option, format_option,
                       model_list, models_option, open_store)
from ._ui import console, emit, err_console, escape, registry, render_rows, user_errors

__all__ = ["race"]


@click.command("race")
@dataset_option("One problem: DATASET, DATASET/PROBLEM or DATASET[param=value,...] as in "
                "compare's --datasets.", required=True)
@models_option("Model selectors, comma-separated and/or repeated, e.g. "
               "-m 'lasso[rho_ratio=0.05],rmtfl', or a group: -m classic, -m all (default: every "
               "discovered model that runs by default).")
@click.option("--from-store", "from_store", type=click.Path(dir_okay=False), default=None,
              help="Take each searched hyperparameter not given in a selector from the stored "
                   "unit of the same model, problem, repetition and seed.")
@click.option("--rep", type=int, default=0, show_default=True,
              help="Repetition whose training split is raced.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the splits.")
@click.option("--test-fraction", type=float, default=None, help="Test share per task (0.15).")
@click.option("--val-fraction", type=float, default=None,
              help="Validation share of train+validation per task (0.2).")
@data_dir_option()
@click.option("--timeout", type=float, default=None,
              help="Seconds one solver run may take before it is stopped and recorded as "
                   "failed (default 600).")
@click.option("--store", default=None, type=click.Path(dir_okay=False),
              help=f"Store the race is written to (default: the --from-store store, else "
                   f"{DEFAULT_STORE}).")
@figures_option("Write the figure (race-PROBLEM-repR.png) into this folder; without it no "
                "figure is drawn.")
@click.option("--no-reference-runs", is_flag=True,
              help="Do not run the longer reference runs a best-found reference uses.")
@format_option
@user_errors
def race(dataset: str, models_: tuple[str, ...], from_store: str | None, rep: int, seed: int,
         test_fraction: float | None, val_fraction: float | None, data_dir: str | None,
         timeout: float | None, store: str | None, figures_dir: str | None,
         no_reference_runs: bool, fmt: str) -> None:
    """Race each model's solvers on one repetition's training split: objective against
    solver time (one BLAS thread, each run in a fresh process), against a reference optimum
    certified where possible; print the table, store the race and, with --figures DIR, write
    the figure."""
    from .. import race as rc
    from ..dataset import resolve_data_dir
    from ..errors import ConfigError
    from ..protocol import ProtocolConfig
    from ..runner import resolve_problems
    from ..runner.unit import problem_id
    from ..search.searchers import problem_context
    from ..store import ResultStore

    reg = registry()
    ddir = resolve_data_dir(data_dir)
    ddir_s = str(ddir) if ddir else None
    problems = resolve_problems(reg, [dataset], ddir_s)
    if len(problems) != 1:
        raise ConfigError(f"race: {dataset!r} has {len(problems)} problems "
                          f"({', '.join(p for _, p in problems[:5])}...); name one as "
                          "DATASET/PROBLEM")
    ds_name, prob = problems[0]
    pid = problem_id(ds_name, prob)
    if rep < 0:
        raise ConfigError(f"race: --rep must be >= 0, got {rep}")
    if timeout is not None and not 0 < timeout < float("inf"):
        raise ConfigError(f"race: --timeout must be a finite number of seconds > 0, got "
                          f"{timeout}")
    settings = {k: v for k, v in (("test_fraction", test_fraction),
                                  ("val_fraction", val_fraction)) if v is not None}
    config = ProtocolConfig(seed=seed, reps=rep + 1, **settings)
    train, info = rc.race_problem(reg, ds_name, prob, ddir_s, rep, config)
    selectors = reg.expand_model_selectors(model_list(models_)) or reg.default_model_names
    source = open_store(from_store, readonly=True) if from_store else None
    try:
        selections = rc.race_selections(reg, selectors, problem=pid, rep=rep, seed=seed,
                                        store=source,
                                        split_fingerprint=info["split_fingerprint"],
                                        context=problem_context(train))
    finally:
        if source is not None:
            source.close()
    entries = rc.race_entries(reg, selections)
    say = console if fmt == "table" else err_console
    say.print(f"[bold]mtlbench race[/]: {escape(pid)}, training split of repetition {rep} "
              f"(seed {seed}): {info['tasks']} tasks, {info['features']} features, "
              f"{info['labels']} labels; {len(entries)} solver run(s), one BLAS thread, each "
              "in a fresh process", soft_wrap=True)
    for name, label, params, origin, note in selections:
        how = ", ".join(f"{k} {v}" for k, v in sorted(origin.items())) or "no searched parameter"
        say.print(f"  {escape(label)}: {escape(how)}" + (f" ({escape(note)})" if note else ""),
                  soft_wrap=True)

    def progress(run) -> None:
        e = run.entry
        what = f"{e.label} / {e.solver}" + (f" (reference: {e.variant})" if e.variant else "")
        if run.status == "ok":
            extra = f", final objective {run.final_objective:.10g}" \
                if run.final_objective is not None else ", no objective reported"
            say.print(f"  ran {escape(what)}: {run.elapsed:.3g} s{extra}", soft_wrap=True)
        elif run.status == rc.STOPPED:
            say.print(f"  [yellow]stopped[/] {escape(what)}: {escape(run.message)}",
                      soft_wrap=True)
        else:
            say.print(f"  [red]failed[/] {escape(what)}: {escape(run.message)}", soft_wrap=True)

    result = rc.run_race(reg, entries, train, dataset=ds_name, problem=pid, rep=rep,
                         config=config, info=info,
                         timeout=timeout if timeout is not None else rc.DEFAULT_TIMEOUT,
                         reference_runs=not no_reference_runs, on_run=progress)
    rows = rc.race_rows(result)
    out_store = store or from_store or DEFAULT_STORE
    with ResultStore(out_store) as rs:
        rs.write_race(rows)
    say.print(f"stored {len(rows)} run(s) in {escape(out_store)} (race {result.race_id})")
    if figures_dir:
        _draw(rows, Path(figures_dir) / f"race-{file_stem(pid)}-rep{rep}.png",
              f"{pid}: solver race (training split of repetition {rep}, seed {seed})", say)
    if fmt == "json":
        click.echo(rc.to_json(result, rows))
        return
    if fmt == "csv":
        emit(render_rows(rc.csv_records(rows), rc.CSV_COLUMNS, "csv"))
        return
    _print_verdicts(result)
    _print_table(rc.csv_records(rows))


def _draw(rows, path: Path, title: str, say) -> None:
    from ..errors import ConfigError
    from ..report.race_figures import race_plot

    try:
        drawn = race_plot(rows, path, title)
        say.print(f"figure: {escape(str(drawn))}" if drawn else
                  "figure: not drawn (no run with a curve and a reference)")
    except ConfigError as exc:  # matplotlib missing
        say.print(f"[yellow]figure not drawn:[/] {escape(str(exc))}", soft_wrap=True)


def _print_verdicts(result) -> None:
    """The solvers' agreement first (times are compared only where they agree), then each
    reference optimum."""
    for label, agr in result.agreements.items():
        if agr.get("ok") is False:
            console.print(f"[bold red]{escape(label)}: {escape(agr['message'])}[/]",
                          soft_wrap=True)
        elif agr.get("ok"):
            console.print(f"{escape(label)}: {escape(agr['message'])}", soft_wrap=True)
    for label, ref in result.references.items():
        value = "—" if ref.value is None else f"{ref.value:.12g}"
        cert = f", certified to {ref.certified_to:.1e}" if ref.certified_to is not None else ""
        console.print(f"{escape(label)}: reference {value} ({ref.kind}{cert}; "
                      f"{escape(ref.note)})", soft_wrap=True)


def _print_table(records) -> None:
    from rich.table import Table

    from ..race import LEVELS, STOPPED

    def secs(v) -> str:
        return "—" if v is None else f"{v:.3g}"

    table = Table(title="time (s) to reach relative suboptimality (F - F_ref) / |F_ref|")
    cols = ["model", "solver"] + [f"{lv:.0e}" for lv in LEVELS] + \
        ["final objective", "subopt.", "converged", "iterations", "certificate", "time (s)"]
    for c in cols:
        table.add_column(c, justify="left" if c in ("model", "solver") else "right")
    for r in records:
        solver = r["solver"] + (f" (ref: {r['variant']})" if r["role"] == "reference" else "")
        if r["status"] not in ("ok", STOPPED):
            table.add_row(escape(r["model"]), escape(solver), *["—"] * 3,
                          "[red]failed[/]", "", "", "", "", secs(r["elapsed"]))
            continue
        if r["status"] == STOPPED:  # timed up to where it was stopped
            table.add_row(escape(r["model"]), escape(solver),
                          *(secs(r[f"time_{lv:.0e}"]) for lv in LEVELS),
                          "[yellow]stopped at the time limit[/]", "", "", "", "",
                          secs(r["elapsed"]))
            continue
        sub = r["suboptimality"]
        table.add_row(
            escape(r["model"]), escape(solver),
            *(secs(r[f"time_{lv:.0e}"]) for lv in LEVELS),
            "—" if r["final_objective"] is None else f"{r['final_objective']:.10g}",
            "—" if sub is None else f"{sub:.1e}",
            {True: "yes", False: "[red]no[/]", None: "?"}[r["converged"]],
            "—" if r["n_iter"] is None else str(r["n_iter"]),
            "—" if r["certificate"] is None else f"{r['certificate']:.1e}",
            secs(r["elapsed"]))
    console.print(table)
    failed = [r for r in records if r["status"] != "ok"]
    for r in failed:
        what = "[yellow]stopped[/]" if r["status"] == STOPPED else "[red]failed[/]"
        err_console.print(f"{what} {escape(r['model'])} / {escape(r['solver'])}: "
                          f"{escape(r['message'])}", soft_wrap=True)
