"""The Python API: run a comparison and read stored results from a notebook or a script.

::

    import mtlbench

    res = mtlbench.compare(datasets=["simulated"], models=["lasso", "stl"], reps=3,
                           store="results/demo.sqlite")
    res.to_frame()               # one row per unit (model, problem, repetition), pandas
    res.to_frame(level="task")   # one row per (unit, task) with the task's test AUC
    res.summary()                # mean ± std test AUC per (problem, model), as `results`
    res.leaderboard()            # the leaderboard table of the dataset (ranks, tests, W/T/L)
    res.summary_across()         # across data sets: Friedman, ranks, CD, equivalence

    old = mtlbench.load_results("results/mtlbench.sqlite")   # everything a store holds

``compare`` is what ``mtlbench compare`` runs: the command line is a thin layer that turns its
options into a call of :func:`plan` and :func:`run` and prints what they return.  Nothing here
prints or imports click/rich; progress reaches the caller through the ``on_result`` callback.

The store
---------
``store=None`` means the default store ``results/mtlbench.sqlite`` (relative to the working
directory), the same file the command line uses: results of the API and of the CLI are shared,
and calling ``compare`` again recomputes nothing that finished.  For a throwaway run pass a path
in a temporary folder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from .errors import ConfigError
from .results_api import DEFAULT_STORE, Results, load_results

if TYPE_CHECKING:  # heavy modules are imported where they are used
    import pandas as pd

    from .runner import UnitResult, UnitSpec
    from .runner.cost import Expected

DEFAULT_DATASETS = ("simulated",)


@dataclass
class Plan:
    """What a comparison would run: validated settings, the units and what is already stored.

    ``specs`` are all planned units (model x problem x repetition); ``todo`` those not finished
    in the store (failed ones too with ``retry_failed``); ``estimate`` the expected wall time of
    ``todo`` from stored unit times (see :class:`Estimate`); ``skipped`` one sentence per
    (model, problem) left out because the model does not handle the problem's target kind."""

    specs: list["UnitSpec"]
    todo: list["UnitSpec"]
    selections: list[Any]
    problems: list[tuple[str, str]]
    summaries: dict[str, dict[str, Any]]
    config: Any                      # protocol.ProtocolConfig
    store: str
    data_dir: str | None
    jobs: int
    timeout: float | None
    retry_failed: bool
    scheduler: str | None
    stored_ok: int = 0
    stored_failed: int = 0
    estimate: "Estimate | None" = None
    rerun: tuple[str, ...] = ()
    expected: dict[str, Any] = field(default_factory=dict)  # key -> runner.cost.Expected
    #: stored units of the previous code fingerprint rule moved to their keys (mtlbench.rekey)
    rekeyed: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def labels(self) -> list[str]:
        """Every model label of the planned units, in plan order (a selection with values
        pinned on some problems by the config file has another label there)."""
        return list(dict.fromkeys(s.label for s in self.specs))

    @property
    def problem_ids(self) -> list[str]:
        return sorted({s.problem for s in self.specs})

    def units_frame(self) -> "pd.DataFrame":
        """One row per planned unit: model, problem, rep, key, and whether it will run."""
        import pandas as pd

        todo = {s.key for s in self.todo}
        return pd.DataFrame([{"model": s.label, "problem": s.problem, "rep": s.rep,
                              "key": s.key, "will_run": s.key in todo} for s in self.specs])


@dataclass
class Estimate:
    """Expected wall time of the pending units.

    Every pending unit gets an expected time by the rule of
    :func:`mtlbench.runner.cost.expected_unit_seconds` (stored time of the same model and
    problem, else scaled from the model's times on other problems, else the model's
    ``cost_hint``, else a default of 1 s); units are spread over ``workers`` processes longest
    first (each goes to the least loaded process), and the wall time is the busiest process's
    total.  ``by_source`` says how many units and seconds each kind of number contributed:
    everything but ``stored`` is extrapolated; ``uncertain`` how many of them come from
    another kind of problem (another data set, or other dataset parameters than the seed:
    :mod:`mtlbench.runner.cost`), and ``uncertain_why`` names it."""

    seconds: float | None        # None: a Dask cluster of unknown size (see compute_seconds)
    compute_seconds: float       # sum of the expected unit times
    by_source: dict[str, tuple[int, float]]  # source -> (units, seconds)
    workers: int | None          # None: a Dask cluster of unknown size
    hint_scaling: str = ""       # how hints were scaled to this machine (Expected.note)
    #: (units, compute seconds) estimated from another kind of problem, and why (Expected.unlike)
    uncertain: tuple[int, float] = (0, 0.0)
    uncertain_why: str = ""

    @property
    def units(self) -> int:
        return sum(n for n, _ in self.by_source.values())

    @property
    def extrapolated_seconds(self) -> float:
        return sum(t for src, (_, t) in self.by_source.items() if src != "stored")

    def text(self) -> str:
        if not self.units:
            return "nothing to run"
        where = (f"over {self.workers} process(es)" if self.workers
                 else "on the cluster (wall time depends on its size)")
        txt = (f"about {_fmt_seconds(self.seconds if self.workers else self.compute_seconds)} "
               f"{'wall time' if self.workers else 'of compute'} {where} "
               f"(compute {_fmt_seconds(self.compute_seconds)})")
        parts = []
        for src, what in (("stored", "from stored times of the same model and problem"),
                          ("scaled", "extrapolated from the model's times on other problems, "
                                     "scaled by problem size"),
                          ("hint", "extrapolated from the model's cost_hint"
                                   + (f" ({self.hint_scaling})" if self.hint_scaling else "")),
                          ("default", "with no time or hint at all, counted as 1 s each")):
            n, t = self.by_source.get(src, (0, 0.0))
            if n:
                parts.append(f"{n} unit(s) {what} ({_fmt_seconds(t)} of compute)")
        share = self.extrapolated_seconds / self.compute_seconds if self.compute_seconds else 0
        txt += ": " + "; ".join(parts)
        if share:
            txt += f"; {100 * share:.0f} % of the compute is extrapolated"
        n, t = self.uncertain
        if n:
            txt += (f"; UNCERTAIN: {n} unit(s) ({_fmt_seconds(t)} of compute) are estimated "
                    f"from another kind of problem ({self.uncertain_why}), where unit times can "
                    "differ several-fold at the same size; once a model has units of the "
                    "problem stored, its other units there are estimated from them")
        return txt


def _fmt_seconds(s: float | None) -> str:
    if s is None:
        return "?"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _workers(jobs: int, scheduler: str | None) -> int | None:
    if scheduler:
        return None
    if jobs == -1:
        from .runner import default_jobs

        return default_jobs()
    return max(int(jobs), 1)


def estimate_wall_time(todo: Sequence["UnitSpec"], expected: Mapping[str, "Expected"],
                       workers: int | None) -> Estimate:
    """Longest-first spread of the pending units' expected times (by key: ``expected``, from
    :func:`mtlbench.runner.cost.expected_unit_seconds`) over ``workers`` processes."""
    from .runner.cost import spread_longest_first

    times = [expected[s.key] for s in todo]
    by_source: dict[str, tuple[int, float]] = {}
    for e in times:
        n, t = by_source.get(e.source, (0, 0.0))
        by_source[e.source] = (n + 1, t + e.seconds)
    compute = float(sum(e.seconds for e in times))
    wall = spread_longest_first([e.seconds for e in times], workers) if workers else None
    notes = sorted({e.note for e in times if e.source == "hint" and e.note})
    unlike = [e for e in times if e.unlike]
    why = sorted({e.unlike for e in unlike})
    why_text = "; ".join(why[:3]) + (f"; and {len(why) - 3} more" if len(why) > 3 else "")
    return Estimate(wall, compute, by_source, workers, "; ".join(notes),
                    (len(unlike), float(sum(e.seconds for e in unlike))), why_text)


def _explain_unlisted_problems(reg, names: Sequence[str], data_dir: Path | None) -> None:
    """A ``dataset/problem`` the dataset does not list: let the dataset explain (its loader
    knows what the user's folder holds and what to use instead) before the generic message."""
    from .dataset import load_tasks, problems_of
    from .errors import UnknownNameError

    for name in names:
        ds_name, _, prob = name.partition("/")
        if not prob:
            continue
        ds = reg.dataset(ds_name)
        listed = problems_of(ds, data_dir)
        if listed and prob not in listed:
            try:
                load_tasks(ds, prob, data_dir)
            except UnknownNameError:  # the dataset's own account of the problem name
                raise
            except Exception:  # noqa: BLE001 - missing data etc.: the generic message follows
                pass


def _check_config_tables(reg, tables: Mapping[str, Mapping[str, Any]],
                         config: str | os.PathLike | None) -> None:
    """Every ``[models.NAME]`` table of the config file is checked against the model's
    hyperparameters, also for models this run does not select (a typo would otherwise wait,
    silently, for the day the model is selected)."""
    from .selectors import apply_overrides

    for name, table in tables.items():
        try:
            apply_overrides(reg.model_class(name), table, name)
        except ConfigError as exc:
            raise ConfigError(f"config file {str(config)!r}: [models.{name}]: {exc}") from None


def _pinned_selections(reg, selectors: Sequence[str], settings: Any,
                       config: str | os.PathLike | None) -> dict[tuple[int, str], Any]:
    """The selections of the config file's ``[models.NAME.problems."P"]`` pins:
    ``(index of the selector, problem id) -> selection`` with the pinned values fixed over
    the ``[models.NAME]`` table and under the selector's own overrides.  Every pin is checked,
    also those of models or problems this run does not have."""
    from .errors import unknown_name_message
    from .selectors import apply_overrides, parse_selector

    where = f"config file {str(config)!r}"
    for name, pins in settings.problem_overrides.items():
        table = settings.model_overrides.get(name, {})
        for pid, values in pins.items():
            ds = pid.split("/", 1)[0].split("[", 1)[0].strip()
            if ds not in reg.dataset_names:
                raise ConfigError(f"{where}: [models.{name}.problems.{pid!r}]: "
                                  + unknown_name_message("dataset", ds, reg.dataset_names))
            try:
                apply_overrides(reg.model_class(name), {**table, **values}, name)
            except ConfigError as exc:
                raise ConfigError(f"{where}: [models.{name}.problems.{pid!r}]: {exc}") \
                    from None
    out = {}
    for i, text in enumerate(selectors):
        name, overrides = parse_selector(text)
        table = settings.model_overrides.get(name, {})
        for pid, values in settings.problem_overrides.get(name, {}).items():
            out[(i, pid)] = apply_overrides(reg.model_class(name),
                                            {**table, **values, **overrides}, name)
    return out


def _check_rerun(rerun: Sequence[str], selections: Sequence[Any]) -> None:
    """``--rerun NAME`` names a model of this run (registry name or label), or ``*``."""
    from .errors import unknown_name_message

    names = {s.name for s in selections} | {s.label for s in selections}
    for name in rerun:
        if name != "*" and name not in names:
            raise ConfigError(f"--rerun {name}: nothing would be recomputed: "
                              + unknown_name_message("model", name, names,
                                                     known_as="Models of this run"))


def plan(datasets: str | Sequence[str] | None = None, models: str | Sequence[str] | None = None,
         *, reps: int | None = None, seed: int | None = None, jobs: int | None = None,
         scheduler: str | None = None, store: str | os.PathLike | None = None,
         data_dir: str | os.PathLike | None = None, timeout: float | None = None,
         retry_failed: bool = False, config: str | os.PathLike | None = None,
         test_fraction: float | None = None, val_fraction: float | None = None,
         search: str | None = None, budget: int | None = None,
         rerun: Sequence[str] | None = None, train_fraction: float | None = None,
         select_by: str | None = None) -> Plan:
    """Validate the settings, load every problem once, plan the units and compare with the store.

    Arguments as for :func:`compare`.  Raises :class:`~mtlbench.errors.MTLBenchError`
    subclasses (one clear message) for unknown names, bad overrides, missing data or bad
    settings; nothing runs."""
    from .dataset import resolve_data_dir
    from .plugins import get_registry
    from .runner.cost import (expected_unit_seconds, probed_machine_speed, problem_size,
                              problem_tasks)
    from .runner.plan import cost_hint_reader, cost_scaling_reader
    from .runner import (check_overrides, check_problems_load, pending_units, plan_units,
                         problem_id, resolve_problems)
    from .rekey import rekey_store
    from .scoring import metric_names
    from .selectors import apply_overrides, check_config_models, load_config, parse_selector
    from .store import ResultStore

    from .config import build_run_config

    reg = get_registry()
    if isinstance(scheduler, str):
        from .runner.dask import check_scheduler_address

        check_scheduler_address(scheduler)
    cfg = load_config(config) if config else {}
    check_config_models(cfg, reg.model_names, str(config) if config else None)
    settings = build_run_config(
        {"datasets": datasets, "models": models, "reps": reps, "seed": seed, "jobs": jobs,
         "timeout": timeout, "test_fraction": test_fraction, "val_fraction": val_fraction,
         "search": search, "budget": budget, "train_fraction": train_fraction,
         "select_by": select_by}, cfg, str(config) if config else None,
        searchers=reg.searcher_names, metrics=metric_names())
    ds_names = list(settings.datasets)
    selectors = reg.expand_model_selectors(list(settings.selectors)) or reg.default_model_names
    pconf, jobs, timeout = settings.protocol, settings.jobs, settings.timeout
    if jobs is None or jobs == -1:
        from .runner import default_jobs

        jobs = default_jobs()
    rerun = tuple(rerun or ())

    selections = []
    for text in selectors:
        name, overrides = parse_selector(text)
        cls = reg.model_class(name)
        merged = {**settings.model_overrides.get(name, {}), **overrides}
        selections.append(apply_overrides(cls, merged, name))
    labels = [s.label for s in selections]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"the same model selection is given twice: {labels}")
    _check_config_tables(reg, settings.model_overrides, config)
    pinned = _pinned_selections(reg, selectors, settings, config)
    _check_rerun(rerun, selections)

    ddir = resolve_data_dir(data_dir)
    ddir_s = str(ddir) if ddir else None
    _explain_unlisted_problems(reg, ds_names, ddir)
    problems = resolve_problems(reg, ds_names, ddir_s)
    loaded = check_problems_load(reg, problems, ddir_s)
    per_problem = []  # the selections of each problem: pinned ones where the config pins
    for ds_name, prob in problems:
        pid = problem_id(ds_name, prob)
        sels = [pinned.get((i, pid), sel) for i, sel in enumerate(selections)]
        here = [s.label for s in sels]
        if len(set(here)) != len(here):
            raise ConfigError(f"on {pid} the same model selection would run twice (a value "
                              f"pinned by the config file gives another selection's label): "
                              f"{here}")
        per_problem.append(((ds_name, prob), sels))
    check_overrides(reg, list({s.label: s for _, sels in per_problem for s in sels}.values()),
                    loaded, timeout)
    specs, skipped = _plan_by_target_kind(reg, per_problem, loaded, pconf, plan_units)

    store_path = str(store) if store is not None else DEFAULT_STORE
    with ResultStore(store_path) as rs:
        rekeyed = rekey_store(rs, reg, specs)  # units of the previous fingerprint rule
        todo = pending_units(specs, rs, retry_failed, rerun=rerun)
        status = rs.statuses(s.key for s in specs)
        history = rs.unit_times()
    summaries = {pid: ts.summary() for pid, ts in loaded.items()}
    expected = expected_unit_seconds(
        todo, history, {pid: problem_size(s) for pid, s in summaries.items()},
        cost_hint_reader(reg), {pid: problem_tasks(s) for pid, s in summaries.items()},
        cost_scaling_reader(reg), probed_machine_speed)
    workers = _workers(jobs, scheduler)
    return Plan(specs=specs, todo=todo, selections=selections, problems=problems,
                summaries=summaries, config=pconf,
                store=store_path, data_dir=ddir_s, jobs=jobs, timeout=timeout,
                retry_failed=retry_failed, scheduler=scheduler, rerun=rerun,
                stored_ok=sum(v == "ok" for v in status.values()),
                stored_failed=sum(v != "ok" for v in status.values()), rekeyed=rekeyed,
                expected=expected, estimate=estimate_wall_time(todo, expected, workers),
                skipped=skipped)


def _plan_by_target_kind(reg, per_problem: Sequence[tuple[tuple[str, str], Sequence[Any]]],
                         loaded: Mapping[str, Any], pconf: Any, plan_units: Callable
                         ) -> tuple[list["UnitSpec"], list[str]]:
    """The units of every (model, problem) whose model handles the problem's target kind,
    and one sentence per pair left out (``per_problem``: each problem with its selections).
    A run of one model that cannot handle a problem, and a problem no model of the run can
    handle, are a :class:`ConfigError` (one line).  The selection metric must apply to every
    problem; naming the problem's primary metric (``--select-by rmse`` on real-valued
    targets) is the default protocol, with its keys."""
    import dataclasses

    from .evaluate import check_target_kind
    from .runner import problem_id
    from .scoring import primary_metric, selection_metric

    specs, skipped = [], []
    for (ds_name, prob), selections in per_problem:
        pid = problem_id(ds_name, prob)
        tasks = loaded[pid]
        kind = tasks.target_kind
        selection_metric(pconf.select_by, kind, pid)
        conf = pconf if pconf.select_by != primary_metric(kind) else \
            dataclasses.replace(pconf, select_by=None)
        fit = []
        for sel in selections:
            try:
                check_target_kind(reg.model_class(sel.name), tasks)
            except ConfigError as exc:
                if len(selections) == 1:
                    raise
                skipped.append(f"{sel.label} on {pid}: {exc}")
                continue
            fit.append(sel)
        if not fit:
            raise ConfigError(f"no model of this run handles the targets of {pid} "
                              f"({kind}); {skipped[-1].split(': ', 1)[1]}")
        specs += plan_units(reg, fit, [(ds_name, prob)], conf)
    return specs, skipped


def run(the_plan: Plan, *, on_result: Callable[["UnitResult"], None] | None = None,
        reporter: Any = None) -> "Results":
    """Execute a :class:`Plan`'s pending units, writing each to the store as it finishes.

    ``on_result`` is called with each finished unit; ``reporter`` (a
    :class:`mtlbench.runner.Reporter`) also hears when units start, for progress displays.
    Raises :class:`mtlbench.runner.RunInterrupted` (holding the report) on Ctrl-C."""
    from .plugins import get_registry
    from .runner import run_units
    from .store import ResultStore

    with ResultStore(the_plan.store) as rs:
        report = run_units(the_plan.specs, rs, jobs=the_plan.jobs, data_dir=the_plan.data_dir,
                           timeout=the_plan.timeout, retry_failed=the_plan.retry_failed,
                           scheduler=the_plan.scheduler, on_result=on_result,
                           reporter=reporter, rerun=the_plan.rerun, registry=get_registry())
    return Results(the_plan.store, keys=[s.key for s in the_plan.specs], report=report,
                   plan=the_plan)


def compare(datasets: str | Sequence[str] | None = None,
            models: str | Sequence[str] | None = None, *, reps: int | None = None,
            seed: int | None = None, jobs: int | None = None, scheduler: str | None = None,
            store: str | os.PathLike | None = None, data_dir: str | os.PathLike | None = None,
            timeout: float | None = None, retry_failed: bool = False,
            config: str | os.PathLike | None = None, test_fraction: float | None = None,
            val_fraction: float | None = None, search: str | None = None,
            budget: int | None = None, rerun: Sequence[str] | None = None,
            train_fraction: float | None = None, select_by: str | None = None,
            on_result: Callable[["UnitResult"], None] | None = None) -> "Results":
    """Run models on datasets under the common protocol; return the run's :class:`Results`.

    Parameters
    ----------
    datasets, models
        Lists of names (or one comma-separated string) exactly as on the command line:
        ``"shoes"`` (every problem), ``"shoes/brown"``; ``"lasso"``, ``"tfcl[k=5]"``,
        ``"lasso[rho_ratio=[0.01,0.1]]"``; a group name (a model's ``group``, or ``"all"``)
        stands for its models.  Default: ``simulated`` and every discovered model whose
        ``default_run`` is True (or what ``config``'s ``[compare]`` table says).
    reps, seed, test_fraction, val_fraction, search, budget
        Protocol settings (defaults: 15 repetitions, seed 0, 0.15, 0.2, the default searcher).
    train_fraction
        The training-fraction protocol instead of ``test_fraction``: this share of each task
        for training and validation, the rest for test (MALSAR-style 0.1 / 0.2 / 0.3).
    select_by
        The metric that selects hyperparameters (default: each problem's primary metric,
        AUC for binary targets, RMSE for real-valued ones).
    jobs, scheduler, timeout
        Units in parallel processes (-1: all cores), a Dask scheduler address, seconds a unit
        may run before it is recorded as failed.
    store
        SQLite results store; finished units in it are not recomputed.  ``None``: the default
        ``results/mtlbench.sqlite`` (shared with the command line).
    data_dir, config, retry_failed
        Folder of local data files, a TOML file with ``[compare]`` defaults and
        ``[models.NAME]`` overrides, rerun units recorded as failed.
    rerun
        Recompute units already stored: model names or labels, ``["*"]`` for every unit.
    on_result
        Called with each finished unit's ``runner.UnitResult`` (``.ok``, ``.row``), e.g. for a
        progress bar.
    """
    p = plan(datasets, models, reps=reps, seed=seed, jobs=jobs, scheduler=scheduler,
             store=store, data_dir=data_dir, timeout=timeout, retry_failed=retry_failed,
             config=config, test_fraction=test_fraction, val_fraction=val_fraction,
             search=search, budget=budget, rerun=rerun, train_fraction=train_fraction,
             select_by=select_by)
    return run(p, on_result=on_result)


# =============================================================================== listings
def dataset_rows(data_dir: str | os.PathLike | None = None, *, load: bool = True,
                 layout: bool = False) -> list[dict[str, Any]]:
    """One dict per (dataset, problem): availability, plugin distribution and version and,
    with ``load``, task / item / feature counts and the positive share of problems whose data
    is at hand (``note`` says why a problem could not be loaded; a dataset that lists no
    problems without its files gives one row with ``problem=None``).  ``targets``: the target
    kind (``binary`` or ``real``; the positive share is None for real-valued targets).
    ``layout`` adds the dataset's file-layout help."""
    from .dataset import load_tasks, problems_of, resolve_data_dir
    from .errors import MTLBenchError
    from .plugins import get_registry

    reg = get_registry()
    ddir = resolve_data_dir(data_dir)
    rows: list[dict[str, Any]] = []
    for name in reg.dataset_names:
        ds = reg.dataset(name)
        info = reg.dataset_plugin(name)
        base: dict[str, Any] = {"dataset": name, "availability": None,
                                "distribution": info.distribution, "version": info.version}
        try:
            base["availability"] = ds.availability(data_dir=ddir)
        except Exception as exc:  # noqa: BLE001 - one broken dataset must not hide the rest
            base["availability"] = f"error: {exc}"
        if layout:
            base["layout"] = ds.layout_help() or "(generated; no files needed)"
        problems = problems_of(ds, ddir)
        if not problems:
            rows.append({**base, "problem": None, "note": "give --data-dir"})
        for prob in problems:
            row = {**base, "problem": prob}
            if load and base["availability"] in ("generated", "cached", "in data-dir"):
                try:
                    s = load_tasks(ds, prob, ddir).summary()
                    share = s["positive_share"]
                    row.update(tasks=int(s["tasks"]), items=int(s["items"]),
                               features=int(s["features"]), targets=s["target_kind"],
                               positive_share=None if share is None else round(float(share), 3))
                except MTLBenchError as exc:
                    row["note"] = f"cannot load: {exc}"
            rows.append(row)
    return rows


__all__ = ["compare", "plan", "run", "load_results", "Results", "Plan", "Estimate", "dataset_rows",
           "estimate_wall_time", "DEFAULT_STORE"]
