"""The report commands of the CLI: ``results``, ``leaderboard``, ``publish``, ``import-results``.

Thin click layers over :mod:`mtlbench.report`; every table goes through the one selection
rule (:func:`mtlbench.report.select.select_units`), so ``results`` and ``leaderboard`` agree.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from ..errors import ConfigError


def _open_store(path: str, must_exist: bool = True, readonly: bool = False):
    """The store at ``path``; opened for reading only (when the store supports it) for the
    commands that only read, so a store on a read-only location can be reported on."""
    import inspect

    from ..store import ResultStore

    if must_exist and not Path(path).exists():
        raise ConfigError(f"no results store at {path!r}; run 'mtlbench compare' first "
                          "or pass --store PATH")
    if readonly and "readonly" in inspect.signature(ResultStore).parameters:
        return ResultStore(path, readonly=True)
    return ResultStore(path)


def _stale_note(store) -> str:
    """The store's note on units made by older code than what is installed (when this
    mtlbench records code provenance), else ''."""
    try:
        from ..provenance import stale_note  # type: ignore[import-not-found]
        from ..plugins import get_registry
    except ImportError:
        return ""
    try:
        return stale_note(store, get_registry()) or ""
    except Exception:  # noqa: BLE001 - a note must not stop the report
        return ""


def _csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items:
        raise ConfigError("an empty list was given; name at least one entry or leave the "
                          "option out")
    return items


def results_frame(sel) -> "Any":
    """One row per (dataset, problem, model) of a selection: mean ± std test AUC over the
    finished repetitions, finished / planned / failed units, run time."""
    import pandas as pd

    u = sel.units
    recs = []
    for (ds, prob, model), g in u.groupby(["dataset", "problem", "model"], sort=True):
        ok = g[g["status"] == "ok"]
        auc = 100.0 * ok["test_auc"].to_numpy(dtype=float)
        recs.append({"dataset": ds, "problem": prob, "model": model,
                     "test_auc_mean_x100": float(auc.mean()) if len(auc) else None,
                     "test_auc_std_x100": float(auc.std(ddof=1)) if len(auc) > 1 else None,
                     "reps": int(len(ok)), "planned_reps": sel.planned_reps.get(ds),
                     "failed": int((g["status"] != "ok").sum()),
                     "seed": sel.seeds.get(ds),
                     "time_total_s": float(g["time_total"].fillna(0).sum())})
    df = pd.DataFrame(recs)
    if not df.empty:
        df = df.sort_values(["problem", "test_auc_mean_x100"], ascending=[True, False],
                            na_position="last")
    return df.reset_index(drop=True)


def _commands(console, user_errors, DEFAULT_STORE: str) -> list[click.Command]:
    from rich.markup import escape
    from rich.table import Table

    store_opt = click.option("--store", default=DEFAULT_STORE, show_default=True,
                             type=click.Path(dir_okay=False), help="SQLite results store.")
    seed_opt = click.option("--seed", type=int, default=None,
                            help="Seed of the units to show (default: the seed with most units "
                                 "per dataset).")
    models_opt = click.option("--models", "models_", default=None,
                              help="Comma-separated model labels or names to show (a name "
                                   "matches all its labels); named models without results "
                                   "are reported as missing.")

    @click.command("results")
    @store_opt
    @click.option("--datasets", "datasets_", default=None,
                  help="Filter: comma-separated datasets or dataset/problem.")
    @models_opt
    @seed_opt
    @click.option("--failures", is_flag=True, help="List failed units with their messages.")
    @click.option("--traceback", "show_tb", is_flag=True,
                  help="With --failures: print each failed unit's traceback.")
    @click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]),
                  default="table", show_default=True)
    @user_errors
    def results_cmd(store: str, datasets_: str | None, models_: str | None, seed: int | None,
                    failures: bool, show_tb: bool, fmt: str) -> None:
        """Stored results: mean ± std test AUC per problem and model, under the same selection
        rule as the leaderboard (one seed, the latest code per model), with what was left out."""
        from .select import left_out_text, select_units

        rs = _open_store(store, readonly=True)
        try:
            problems = _csv(datasets_)
            models = _csv(models_)
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
                    m, s = r["test_auc_mean_x100"], r["test_auc_std_x100"]
                    cell = "—" if m is None or m != m else (
                        f"{m:.2f} ± {s:.2f}" if s is not None and s == s else f"{m:.2f}")
                    reps = f"{r['reps']}/{r['planned_reps']}"
                    table.add_row(escape(r["problem"]), escape(r["model"]), cell, reps,
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
        finally:
            rs.close()

    @click.command("leaderboard")
    @click.option("--dataset", required=True, help="Dataset whose results to tabulate.")
    @click.option("--format", "fmt", type=click.Choice(["markdown", "json", "csv"]),
                  default="markdown", show_default=True)
    @store_opt
    @models_opt
    @seed_opt
    @click.option("--baseline", default=None,
                  help="Label of the win/tie/loss baseline (default: the model that declares "
                       "itself the baseline, e.g. stl).")
    @click.option("--output", "-o", type=click.Path(dir_okay=False), default=None,
                  help="Write to this file instead of standard output.")
    @user_errors
    def leaderboard_cmd(dataset: str, fmt: str, store: str, models_: str | None,
                        seed: int | None, baseline: str | None, output: str | None) -> None:
        """Leaderboard of one dataset: mean ± std test AUC, ranks, significance, the search,
        planned vs finished units, provenance."""
        from .leaderboard import build_leaderboard, render

        rs = _open_store(store, readonly=True)
        try:
            models = _csv(models_)
            text = render(build_leaderboard(rs, dataset, seed=seed, models=models,
                                            expected=models, baseline=baseline), fmt)
        finally:
            rs.close()
        if output:
            Path(output).write_text(text, encoding="utf-8")
            console.print(f"wrote {output}")
        else:
            click.echo(text, nl=False)

    @click.command("publish")
    @store_opt
    @click.option("--out", default="leaderboards", show_default=True,
                  type=click.Path(file_okay=False), help="Folder to write into.")
    @click.option("--datasets", "datasets_", default=None,
                  help="Comma-separated datasets (default: every dataset in the store).")
    @models_opt
    @seed_opt
    @click.option("--figures/--no-figures", default=True, show_default=True,
                  help="Draw the figures (needs matplotlib: pip install 'mtlbench[plots]').")
    @click.option("--force", is_flag=True,
                  help="Replace tables that were generated from another results store.")
    @user_errors
    def publish_cmd(store: str, out: str, datasets_: str | None, models_: str | None,
                    seed: int | None, figures: bool, force: bool) -> None:
        """Write <out>/<dataset>.md + .json, figures, an index README.md and a manifest;
        remove stale generated files."""
        from .publish import publish

        rs = _open_store(store, readonly=True)
        try:
            publish(rs, out, _csv(datasets_), figures=figures, force=force, seed=seed,
                    models=_csv(models_), log=lambda s: console.print(escape(s), soft_wrap=True))
        finally:
            rs.close()

    @click.command("import-results")
    @click.argument("file", type=click.Path(dir_okay=False))
    @store_opt
    @click.option("--data-dir", type=click.Path(file_okay=False), default=None,
                  help="Folder with local data files (also $MTLBENCH_DATA_DIR), to recompute "
                       "the data and split fingerprints of real datasets.")
    @user_errors
    def import_results_cmd(file: str, store: str, data_dir: str | None) -> None:
        """Import a published leaderboard's units (leaderboards/DATASET.json) into a store, so
        that 'compare --models mine' computes only your model and 'leaderboard' shows all.
        Refused when splits, data or protocol differ from this installation's."""
        from ..dataset import resolve_data_dir
        from .publish import import_results

        ddir = resolve_data_dir(data_dir)
        rs = _open_store(store, must_exist=False)
        try:
            import_results(file, rs, log=lambda s: console.print(escape(s), soft_wrap=True),
                           data_dir=str(ddir) if ddir else None)
        finally:
            rs.close()

    return [results_cmd, leaderboard_cmd, publish_cmd, import_results_cmd]


def register(cli: click.Group, *, console, user_errors, default_store: str) -> None:
    """Add the report commands to the ``mtlbench`` click group (replacing same-named ones).

    The CLI hands down its console, its error decorator and the default store path, so this
    module never imports the CLI module back."""
    for cmd in _commands(console, user_errors, default_store):
        cli.add_command(cmd)


__all__ = ["register", "results_frame"]
