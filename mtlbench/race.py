"""The solver race (``mtlbench race``): objective against solver time, to a certified optimum.

For one problem and one repetition's training split (:func:`mtlbench.protocol.make_split`,
exactly the data the protocol fits a unit's search on), each model is fitted at stated
hyperparameters by each of its solvers -- its own ``fit`` and the alternatives it registers in
``solvers`` (:mod:`mtlbench.model`) -- and every reported iteration is recorded with the
solver's own clock (:mod:`mtlbench.progress`).

Hyperparameters, for each searched parameter, in this order of precedence: the value given in
the selector (``-m "lasso[rho_ratio=0.05]"``), the value selected by the stored unit of the same
model, problem, repetition and seed (``--from-store``), or the centre of the starting design
(the middle of the declared start range on its scale, clipped to the bounds at this problem:
:func:`centre_params`).

Each solver run is one fresh process (forkserver, like units) with BLAS limited to one thread;
a run that raises or kills its process is recorded as failed, and the race goes on.  The run
sends its progress points as it goes (at most every :data:`SEND_SECONDS`, in time the recorder
does not charge to the solver), so one that outlives ``timeout`` is stopped with the curve it
reached (status "stopped": drawn and timed up to there, marked "stopped at the time limit").
Runs are sequential, so one cannot slow another down.

The reference optimum of each model (:func:`reference_optimum`)
----------------------------------------------------------------
* **certified** -- a run reported a certificate (an upper bound of objective - optimum, e.g. a
  duality gap): the optimum lies in [max(F - certificate), best F found];
* **independent solver** -- a convex model without certificate whose alternative solvers
  (e.g. a cvxpy conic reformulation) ran: the best of their optima, confirmed by the agreement
  check;
* **best found** -- anything else (every non-convex model): the lowest objective over all runs
  and over *reference runs* (:func:`reference_variants`: tolerance parameters divided by 100,
  iteration caps multiplied by 10, other seeds where the model has one).  Never called optimal.

Suboptimality of a run at time t is (F(t) - F_ref) / |F_ref|; the table gives the first time it
is <= 1e-2, 1e-4, 1e-6 (:data:`LEVELS`), the final objective, convergence, iterations and the
last certificate.  Before times of several solvers of one model are compared, their final
objectives must agree within the model's ``solver_agreement_rtol`` (:func:`solver_agreement`);
a disagreement is reported first and loudly.  A model that never reports progress races with its
final point only (its ``fitted_objective(tasks)``, else its last ``objective_history_`` value);
without either it is listed with its time only.

Results are rows (:func:`race_rows`, the ``races`` table of :mod:`mtlbench.store`, the JSON and
CSV output, and what :mod:`mtlbench.report.race_figures` draws).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import inspect
import json
import math
import os
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .data import TaskSet
from .errors import ConfigError
from .model import MTLModel
from .protocol import ProtocolConfig, config_json, evaluable_tasks, make_split, restrict_tasks
from .space import Int, Log, clip_point, normalise_space
from .syntax import fmt_value, init_params

__all__ = ["LEVELS", "RaceEntry", "SolverRun", "Reference", "RaceResult", "centre_params",
           "race_selections", "race_entries", "reference_variants", "run_entry",
           "reference_optimum", "solver_agreement", "level_times", "run_race", "race_rows",
           "race_problem", "solver_class", "own_solvers", "csv_records", "to_json",
           "CSV_COLUMNS", "RACE_FORMAT", "DEFAULT_TIMEOUT", "STOPPED", "SEND_SECONDS"]

#: Relative suboptimality levels of the table (time to reach each).
LEVELS = (1e-2, 1e-4, 1e-6)
RACE_FORMAT = "mtlbench-race/1"
DEFAULT_TIMEOUT = 600.0
#: seconds between two sends of the progress points a race worker has recorded
SEND_SECONDS = 0.25
#: the status of a run stopped at its time limit (its curve is what it reached)
STOPPED = "stopped"
#: Reference runs: tolerance parameters divided by this, iteration caps multiplied by it / 10.
TIGHTEN = 100.0
LONGER = 10


@dataclass(frozen=True)
class RaceEntry:
    """One run of the race: a model at fixed hyperparameters, one of its solvers."""

    model: str                     # registry name
    label: str                     # name[searched params], as in the table
    params: Mapping[str, Any]      # constructor arguments
    origin: Mapping[str, str]      # searched param -> "given" | "store" | "centre"
    solver: str                    # the solver's name
    role: str = "solver"           # "solver" | "reference" (a longer run for the reference)
    variant: str = ""              # what a reference run changes, e.g. "tol/100, max_iter*10"
    convex: bool = False


@dataclass
class SolverRun:
    """What one run produced: its progress points (solver time, iteration, objective,
    certificate), final objective (and where it came from), convergence, iterations."""

    entry: RaceEntry
    status: str                    # "ok" | "failed" | STOPPED (at the time limit)
    message: str = ""
    points: list[dict[str, Any]] = field(default_factory=list)
    elapsed: float | None = None
    final_objective: float | None = None
    objective_source: str | None = None   # "fitted_objective" | "objective_history_"
    converged: bool | None = None
    n_iter: int | None = None
    certificate: float | None = None
    host: str = ""
    started_at: str = ""
    finished_at: str = ""

    def curve(self) -> list[dict[str, Any]]:
        """The reported points, or the final point alone for a run that reported none."""
        if self.points:
            return self.points
        if self.final_objective is not None and self.elapsed is not None:
            return [{"time": self.elapsed, "iteration": self.n_iter, "objective":
                     self.final_objective, "certificate": self.certificate}]
        return []


@dataclass(frozen=True)
class Reference:
    """The reference optimum of one model selection (module docstring)."""

    value: float | None            # F_ref: the best objective found
    kind: str                      # "certified" | "independent solver" | "best found" | "none"
    lower: float | None = None     # a certified lower bound of the optimum
    note: str = ""

    @property
    def certified_to(self) -> float | None:
        """(F_ref - lower) / |F_ref|: levels below this are not certified."""
        if self.value is None or self.lower is None:
            return None
        return max(self.value - self.lower, 0.0) / max(abs(self.value), 1e-300)

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "kind": self.kind, "lower": self.lower, "note": self.note,
                "certified_to": self.certified_to}


@dataclass
class RaceResult:
    """A race: the problem, every run, and per model label its reference and agreement."""

    dataset: str
    problem: str
    rep: int
    seed: int
    config: ProtocolConfig
    dataset_params: dict[str, Any]
    split_fingerprint: str
    data_fingerprint: str
    summary: dict[str, Any]
    runs: list[SolverRun]
    references: dict[str, Reference]
    agreements: dict[str, dict[str, Any]]
    provenance: dict[str, Any] = field(default_factory=dict)   # model name -> provenance
    #   (:func:`mtlbench.provenance.unit_provenance`: model and dataset plugin, code)
    versions: dict[str, Any] = field(default_factory=dict)
    race_id: str = ""


# ----------------------------------------------------------------------------- selections
def centre_params(cls: type[MTLModel], context: Mapping[str, Any] | None = None,
                  decided: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The centre of the starting design for every searched parameter not in ``decided``:
    the middle of its start range on its own scale (geometric for Log, and for Int from 1 up;
    arithmetic otherwise; Int rounded), the middle listed value of a categorical parameter;
    then clipped to the bounds, whose expressions read ``context`` (the problem's dimensions,
    fixed parameters) and the ``decided`` values of the other searched parameters."""
    space = normalise_space(cls.search_space)
    decided = dict(decided or {})
    point: dict[str, Any] = {}
    for key, par in space.items():
        if not par.ordered:
            point[key] = par.grid[(len(par.grid) - 1) // 2]
            continue
        lo, hi = par.start_range
        geometric = isinstance(par, Log) or (isinstance(par, Int) and lo >= 1)
        mid = math.sqrt(lo * hi) if geometric else (lo + hi) / 2.0
        point[key] = int(round(mid)) if isinstance(par, Int) else float(f"{mid:.12g}")
    clipped = clip_point(space, {**point, **decided}, dict(context or {}))
    return {k: clipped[k] for k in point if k not in decided}


def _stored_selection(store, problem: str, rep: int, seed: int, name: str,
                      label: str | None, split_fingerprint: str | None = None
                      ) -> tuple[dict[str, Any], str] | None:
    """(fixed + selected hyperparameters, description) of the latest finished unit of model
    ``name`` (preferably the plain label ``label``) on ``problem``, ``rep``, ``seed``; a unit
    whose split differs from ``split_fingerprint`` (other data or split settings) is an
    error."""
    df = store.units(problems=[problem], status="ok")
    if df.empty:
        return None
    df = df[(df["rep"] == rep) & (df["seed"] == seed)]
    names = [(c or {}).get("name") if isinstance(c, dict) else None for c in df["model_config"]]
    df = df[[n == name for n in names]]
    if df.empty:
        return None
    if label is not None and (df["model"] == label).any():
        df = df[df["model"] == label]
    row = df.sort_values("finished_at").iloc[-1]
    if split_fingerprint and row["split_fingerprint"] != split_fingerprint:
        raise ConfigError(
            f"race: the stored unit of {row['model']} on {problem} rep {rep} was fitted on "
            f"another split (fingerprint {str(row['split_fingerprint'])[:12]}..., here "
            f"{split_fingerprint[:12]}...): other data or split settings; race with the "
            "store's settings (--test-fraction/--val-fraction) or give the values with -m")
    params = {**(row["model_config"].get("fixed") or {}), **(row["best_params"] or {})}
    return params, f"unit {row['key'][:12]} ({row['model']}, finished {row['finished_at']})"


def race_selections(registry, selectors: Sequence[str], *, problem: str, rep: int, seed: int,
                    store=None, split_fingerprint: str | None = None,
                    context: Mapping[str, Any] | None = None
                    ) -> list[tuple[str, str, dict[str, Any], dict[str, str], str]]:
    """(name, label, params, origin per searched parameter, note) for each selector.

    Every searched parameter gets one value (given > stored > centre, the centre clipped to
    the bounds at the problem's dimensions ``context``, :func:`centre_params`); a list in a
    selector is an error (the race fits one point).  Raises :class:`ConfigError` naming the
    selector."""
    from .selectors import apply_overrides, parse_selector

    out = []
    seen = set()
    for text in selectors:
        name, overrides = parse_selector(text)
        cls = registry.model_class(name)
        sel = apply_overrides(cls, overrides, name)
        if sel.grid_overrides:
            raise ConfigError(f"race: {text!r} lists several values for "
                              f"{', '.join(sorted(sel.grid_overrides))}; the race fits one "
                              "point per model: give one value each")
        params: dict[str, Any] = {}
        origin: dict[str, str] = {}
        note = ""
        stored = None
        if store is not None:
            stored = _stored_selection(store, problem, rep, seed, name,
                                       name if not overrides else None, split_fingerprint)
            if stored is None:
                note = (f"no finished unit of {name} for {problem} rep {rep} seed {seed} in the "
                        "store: starting-design centre")
            else:
                note = f"selected by {stored[1]}"
        searched = list(normalise_space(cls.search_space))
        for key in searched:
            if key in sel.fixed:
                params[key], origin[key] = sel.fixed[key], "given"
            elif stored is not None and key in stored[0]:
                params[key], origin[key] = stored[0][key], "store"
        centre = centre_params(cls, {**dict(context or {}), **sel.fixed}, params)
        for key in searched:
            if key in centre:
                params[key], origin[key] = centre[key], "centre"
        for key, value in (stored[0] if stored else {}).items():   # fixed at that unit
            if key not in params and key in init_params(cls):
                params[key] = value
        params.update({k: v for k, v in sel.fixed.items() if k not in searched})
        label = name + ("[" + ",".join(f"{k}={fmt_value(params[k])}" for k in sorted(params))
                        + "]" if params else "")
        if label in seen:
            raise ConfigError(f"race: the model selection {label} is given twice")
        seen.add(label)
        out.append((name, label, params, origin, note))
    return out


def race_entries(registry, selections) -> list[RaceEntry]:
    """The model's own solver and each alternative of ``solvers`` for every selection.
    An alternative must subclass the model (same hyperparameters, same objective)."""
    out = []
    for name, label, params, origin, _ in selections:
        cls = registry.model_class(name)
        convex = bool(getattr(cls, "convex", False))
        out.append(RaceEntry(name, label, params, origin, _solver_name(cls), convex=convex))
        for alt_name, alt in own_solvers(cls).items():
            if not (isinstance(alt, type) and issubclass(alt, cls)):
                raise ConfigError(f"model {name!r}: solver {alt_name!r} is {alt!r}, not a "
                                  f"subclass of {cls.__name__} (an alternative solver overrides "
                                  "fit only; docs/race.md)")
            out.append(RaceEntry(name, label, params, origin, str(alt_name), convex=convex))
    return out


def own_solvers(cls: type) -> dict[str, type]:
    """The alternative solvers ``cls`` declares itself: a ``solvers`` mapping inherited from
    a parent model belongs to the parent's objective, not to a subclass (an ablation)."""
    return dict(vars(cls).get("solvers") or {})


def _solver_name(cls: type) -> str:
    return str(getattr(cls, "solver_name", "default") or "default")


def reference_variants(cls: type[MTLModel], entry: RaceEntry) -> list[RaceEntry]:
    """Longer runs of the model's own solver for a best-found reference: every constructor
    parameter named ``tol`` or ``*_tol``/``*tol`` divided by :data:`TIGHTEN`, every
    ``max_iter``/``max_*`` integer multiplied by :data:`LONGER`; and, for a model with a
    ``seed`` or ``random_state`` parameter, two other seeds (other cold starts)."""
    defaults = {k: v for k, v in init_params(cls).items() if v is not inspect.Parameter.empty}
    current = {**defaults, **dict(entry.params)}
    longer: dict[str, Any] = {}
    what = []
    for key, value in sorted(current.items()):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if (key == "tol" or key.endswith("tol")) and isinstance(value, float) and value > 0:
            longer[key] = value / TIGHTEN
            what.append(f"{key}/{TIGHTEN:g}")
        elif (key == "max_iter" or key.startswith("max_")) and isinstance(value, int):
            longer[key] = value * LONGER
            what.append(f"{key}*{LONGER}")
    out = []
    if longer:
        out.append(RaceEntry(entry.model, entry.label, {**entry.params, **longer}, entry.origin,
                             entry.solver, role="reference", variant=", ".join(what),
                             convex=entry.convex))
    for key in ("seed", "random_state"):
        if isinstance(current.get(key), int) and not isinstance(current.get(key), bool):
            for k in (1, 2):
                out.append(RaceEntry(entry.model, entry.label,
                                     {**entry.params, key: current[key] + k}, entry.origin,
                                     entry.solver, role="reference",
                                     variant=f"{key}={current[key] + k}", convex=entry.convex))
    return out


# ----------------------------------------------------------------------------- one run
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _point(p: Any) -> dict[str, Any]:
    return {"time": p.time, "iteration": p.iteration, "objective": p.objective,
            "certificate": p.certificate}


class _Sender:
    """Sends a race worker's new progress points to the race (``("points", [...])``) at
    most every :data:`SEND_SECONDS`; the time it takes is not charged to the solver."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.sent, self.last = conn, 0, time.perf_counter()

    def __call__(self, rec: Any) -> None:
        now = time.perf_counter()
        if now - self.last < SEND_SECONDS:
            return
        new = rec.points[self.sent:]
        self.conn.send(("points", [_point(p) for p in new]))
        self.sent += len(new)
        self.last = time.perf_counter()
        rec.exclude(self.last - now)


def _fit_and_record(cls: type[MTLModel], params: Mapping[str, Any], tasks: TaskSet,
                    send: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Fit ``cls(**params)`` on ``tasks`` with BLAS on one thread, recording progress; the
    body of a race worker process (also callable in-process, e.g. by tests).  ``send``, if
    given, is called with the recorder after each reported point (a worker's
    :class:`_Sender`)."""
    from threadpoolctl import threadpool_limits

    from .progress import ProgressRecorder
    from .protocol import check_fit_returned

    rec = ProgressRecorder(on_point=send)
    model = cls(**dict(params))
    with threadpool_limits(limits=1):
        with rec.recording():
            returned = model.fit(tasks)
        check_fit_returned(returned, model)
        final, source = None, None
        evaluate = getattr(model, "fitted_objective", None)
        if callable(evaluate):
            final, source = float(evaluate(tasks)), "fitted_objective"
        else:
            hist = getattr(model, "objective_history_", None)
            if hist is not None and len(hist):
                final, source = float(hist[-1]), "objective_history_"
    converged = getattr(model, "converged_", None)
    n_iter = getattr(model, "n_iter_", None)
    points = [_point(p) for p in rec.points]
    return {"points": points, "elapsed": rec.elapsed, "final_objective": final,
            "objective_source": source,
            "converged": None if converged is None else bool(converged),
            "n_iter": None if n_iter is None else int(np.max(n_iter)),
            "certificate": next((p["certificate"] for p in reversed(points)
                                 if p["certificate"] is not None), None)}


def _worker(conn, cls, params, tasks, parent_pid: int) -> None:
    from .runner.local import die_with_parent

    die_with_parent(parent_pid)
    try:
        conn.send(("ok", _fit_and_record(cls, params, tasks, _Sender(conn))))
    except BaseException as exc:  # noqa: BLE001 - every failure is reported to the race
        conn.send(("failed", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        conn.close()


def solver_class(registry, entry: RaceEntry) -> type[MTLModel]:
    cls = registry.model_class(entry.model)
    return cls if entry.solver == _solver_name(cls) else own_solvers(cls)[entry.solver]


def run_entry(registry, entry: RaceEntry, tasks: TaskSet,
              timeout: float | None = DEFAULT_TIMEOUT, isolated: bool = True) -> SolverRun:
    """Run one entry in a fresh process; never raises for a failing fit (a failed run).
    ``isolated=False`` fits in this process instead (no timeout; for tests and notebooks)."""
    from .runner.local import death_cause, worker_context

    cls = solver_class(registry, entry)
    started = _now()
    if not isolated:
        run = SolverRun(entry, "failed", host=socket.gethostname(), started_at=started)
        try:
            for k, v in _fit_and_record(cls, entry.params, tasks).items():
                setattr(run, k, v)
            run.status = "ok"
        except Exception as exc:  # noqa: BLE001 - a failing fit is a failed run
            run.message = f"{type(exc).__name__}: {exc}"
        run.finished_at = _now()
        return run
    ctx = worker_context()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(child, cls, dict(entry.params), tasks, os.getpid()),
                       name="mtlbench-race-worker", daemon=True)
    t0 = time.monotonic()
    proc.start()
    child.close()
    run = SolverRun(entry, "failed", host=socket.gethostname(), started_at=started)
    deadline = None if timeout is None else t0 + timeout
    try:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not parent.poll(left):
                if proc.is_alive():
                    run.status = STOPPED
                    run.message = (f"stopped at the time limit of {timeout:g} s (--timeout), "
                                   f"after {len(run.points)} reported point(s): its curve is "
                                   "what it reached")
                else:
                    run.message = f"its process {death_cause(proc.exitcode)}"
                break
            msg = parent.recv()
            if msg[0] == "points":
                run.points.extend(msg[1])
                continue
            if msg[0] == "ok":
                run.status = "ok"
                for k, v in msg[1].items():
                    setattr(run, k, v)
            else:
                run.message = msg[1]
            break
    except EOFError:
        proc.join(5)
        run.points = []
        run.message = f"its process {death_cause(proc.exitcode)}"
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()
    if run.status == STOPPED:
        run.elapsed = run.points[-1]["time"] if run.points else None
    elif run.status == "failed" and run.elapsed is None:
        run.elapsed = time.monotonic() - t0
    run.finished_at = _now()
    return run


# ----------------------------------------------------------------------------- analysis
def _has_curve(run: SolverRun) -> bool:
    """A run whose points are objectives of its iterates: finished, or stopped at the time
    limit (the points it reached)."""
    return run.status == "ok" or (run.status == STOPPED and bool(run.points))


def reference_optimum(runs: Sequence[SolverRun], convex: bool) -> Reference:
    """The reference optimum of one model selection from its runs (module docstring); the
    points of a run stopped at the time limit count (each is an objective at an iterate, and
    a certificate there bounds the optimum), the run itself is no second solver."""
    ok = [r for r in runs if r.status == "ok"]
    drawn = [r for r in runs if _has_curve(r)]
    values = [p["objective"] for r in drawn for p in r.curve()
              if p.get("objective") is not None and math.isfinite(p["objective"])]
    if not values:
        return Reference(None, "none", note="no run reported an objective")
    best = min(values)
    lowers = [p["objective"] - p["certificate"] for r in drawn for p in r.curve()
              if p.get("certificate") is not None and math.isfinite(p["certificate"])]
    if lowers:
        lower = max(lowers)
        return Reference(best, "certified", lower,
                         f"a certificate bounds the optimum below by {lower:.12g}")
    solvers = {r.entry.solver for r in ok if r.entry.role == "solver"}
    failed = [r for r in runs if r.status != "ok" and r.entry.role == "solver"]
    if convex and len(solvers) > 1:
        return Reference(best, "independent solver", None,
                         f"convex: optimum of {len(solvers)} solvers "
                         f"({', '.join(sorted(solvers))})")
    why = "non-convex" if not convex else "convex, but no certificate and no second solver"
    if convex and failed:
        why += " (" + "; ".join(f"{r.entry.solver}: {r.message}" for r in failed) + ")"
    longer = [r for r in ok if r.entry.role == "reference"]
    how = (f"best of {len(ok)} run(s), {len(longer)} of them longer/other starts"
           if longer else f"best of {len(ok)} run(s)")
    return Reference(best, "best found", None, f"{why}: {how}; not known to be optimal")


def solver_agreement(runs: Sequence[SolverRun], rtol: float,
                     reference: Reference) -> dict[str, Any]:
    """Whether the solvers (role "solver") of one model agree on the optimum: the spread of
    their final objectives, relative to |F_ref|, is <= ``rtol``.  ``ok`` is None with fewer
    than two solvers that finished with an objective."""
    finals = {r.entry.solver: r.final_objective for r in runs
              if r.entry.role == "solver" and r.status == "ok" and r.final_objective is not None}
    out: dict[str, Any] = {"rtol": rtol, "finals": finals, "ok": None, "spread": None,
                           "message": ""}
    if len(finals) < 2 or reference.value is None:
        out["message"] = "one solver: nothing to compare" if len(finals) == 1 else \
            "fewer than two solvers finished"
        return out
    lo, hi = min(finals.values()), max(finals.values())
    spread = (hi - lo) / max(abs(reference.value), 1e-300)
    out["spread"] = spread
    out["ok"] = bool(spread <= rtol)
    names = " and ".join(sorted(finals))
    if out["ok"]:
        out["message"] = f"{names} agree: relative spread {spread:.1e} <= {rtol:g}"
    else:
        worst = max(finals, key=finals.get)
        out["message"] = (f"{names} DO NOT AGREE: relative spread {spread:.1e} > {rtol:g} "
                          f"({worst} stopped at {finals[worst]:.12g}, the best is {lo:.12g}); "
                          "their times are not comparable until they do")
    return out


def suboptimality(objective: float, reference: Reference) -> float | None:
    if reference.value is None:
        return None
    return (objective - reference.value) / max(abs(reference.value), 1e-300)


def level_times(run: SolverRun, reference: Reference,
                levels: Sequence[float] = LEVELS) -> dict[str, float | None]:
    """First solver time at which the run's relative suboptimality is <= each level (None:
    never reached -- also by a run stopped at the time limit before it got there --, or no
    reference)."""
    out: dict[str, float | None] = {f"{lv:.0e}": None for lv in levels}
    if not _has_curve(run) or reference.value is None:
        return out
    for p in run.curve():
        s = suboptimality(p["objective"], reference)
        for lv in levels:
            key = f"{lv:.0e}"
            if out[key] is None and s is not None and s <= lv:
                out[key] = float(p["time"])
    return out


# ----------------------------------------------------------------------------- the race
def race_problem(registry, dataset: str, problem: str, data_dir: str | None, rep: int,
                 config: ProtocolConfig) -> tuple[TaskSet, dict[str, Any]]:
    """The training split of repetition ``rep`` (the protocol's: evaluable tasks, the
    split of (seed, rep)), and a description of it."""
    from .runner.unit import load_problem

    ds = registry.dataset(dataset)
    tasks = load_problem(dataset, problem, data_dir, config_json(ds.params()))
    keep, dropped = evaluable_tasks(tasks)
    if not keep:
        raise ConfigError(f"{tasks.name}: no task can be split by the protocol")
    tasks = restrict_tasks(tasks, keep)
    split = make_split(tasks, config, rep)
    train = tasks.subset(split.train, name=f"{tasks.name}[train, rep {rep}]", meta={})
    info = {"split_fingerprint": split.fingerprint(), "data_fingerprint": tasks.fingerprint(),
            "dataset_params": ds.params(), "tasks": train.T, "features": train.d,
            "labels": int(sum(train.X(t).shape[0] for t in range(train.T))),
            "dropped_tasks": dropped}
    return train, info


def run_race(registry, entries: Sequence[RaceEntry], train: TaskSet, *, dataset: str,
             problem: str, rep: int, config: ProtocolConfig, info: Mapping[str, Any],
             timeout: float | None = DEFAULT_TIMEOUT, reference_runs: bool = True,
             isolated: bool = True,
             on_run: Callable[[SolverRun], None] | None = None) -> RaceResult:
    """Run every entry (sequentially, each in a fresh process), then the reference runs a
    best-found reference needs, and analyse."""
    from .provenance import unit_provenance
    from .runner.unit import versions

    runs: list[SolverRun] = []
    for e in entries:
        runs.append(run_entry(registry, e, train, timeout, isolated))
        if on_run is not None:
            on_run(runs[-1])
    labels = list(dict.fromkeys(e.label for e in entries))
    references: dict[str, Reference] = {}
    agreements: dict[str, dict[str, Any]] = {}
    for label in labels:
        mine = [r for r in runs if r.entry.label == label]
        first = mine[0].entry
        cls = registry.model_class(first.model)
        ref = reference_optimum(mine, first.convex)
        if reference_runs and ref.kind == "best found":
            own = next(r.entry for r in mine if r.entry.solver == _solver_name(cls))
            for variant in reference_variants(cls, own):
                runs.append(run_entry(registry, variant, train, timeout, isolated))
                if on_run is not None:
                    on_run(runs[-1])
            mine = [r for r in runs if r.entry.label == label]
            ref = reference_optimum(mine, first.convex)
        references[label] = ref
        agreements[label] = solver_agreement(
            mine, float(getattr(cls, "solver_agreement_rtol", 1e-6)), ref)
    prov = {}
    for e in entries:
        if e.model not in prov:
            try:   # model and dataset: distribution, version, code fingerprint
                prov[e.model] = unit_provenance(registry, e.model, dataset)
            except Exception:  # noqa: BLE001 - a class not registered through a plugin
                prov[e.model] = None
    result = RaceResult(dataset=dataset, problem=problem, rep=rep, seed=config.seed,
                        config=config, dataset_params=dict(info["dataset_params"]),
                        split_fingerprint=info["split_fingerprint"],
                        data_fingerprint=info["data_fingerprint"], summary=dict(info),
                        runs=runs, references=references, agreements=agreements,
                        provenance=prov, versions=versions())
    result.race_id = hashlib.sha256(config_json({
        "problem": problem, "dataset_params": result.dataset_params, "rep": rep,
        "split": config.split_settings(), "started": runs[0].started_at if runs else "",
        "labels": labels}).encode()).hexdigest()[:16]
    return result


# ----------------------------------------------------------------------------- output
def race_rows(result: RaceResult) -> list[dict[str, Any]]:
    """One row per run (the ``races`` table's columns; also the JSON and CSV output)."""
    rows = []
    proto = {**result.config.split_settings(), "rep": result.rep}
    for r in result.runs:
        e = r.entry
        ref = result.references.get(e.label, Reference(None, "none"))
        ident = {"problem": result.problem, "dataset_params": result.dataset_params,
                 "rep": result.rep, "split": result.config.split_settings(), "model": e.label,
                 "solver": e.solver, "role": e.role, "variant": e.variant,
                 "params": dict(e.params), "provenance": result.provenance.get(e.model)}
        rows.append({
            "key": hashlib.sha256(config_json(ident).encode()).hexdigest()[:32],
            "race": result.race_id, "dataset": result.dataset, "problem": result.problem,
            "rep": result.rep, "seed": result.seed, "model": e.label, "model_name": e.model,
            "solver": e.solver, "role": e.role, "variant": e.variant,
            "params": dict(e.params), "origin": dict(e.origin), "status": r.status,
            "message": r.message,
            "curve": {k: [p[k] for p in r.curve()] for k in
                      ("time", "iteration", "objective", "certificate")},
            "elapsed": r.elapsed, "final_objective": r.final_objective,
            "objective_source": r.objective_source, "converged": r.converged,
            "n_iter": r.n_iter, "certificate": r.certificate,
            "levels": level_times(r, ref), "reference": ref.to_json(),
            "agreement": result.agreements.get(e.label),
            "split_fingerprint": result.split_fingerprint,
            "data_fingerprint": result.data_fingerprint,
            "dataset_params": result.dataset_params, "protocol": proto,
            "versions": result.versions, "provenance": result.provenance.get(e.model),
            "host": r.host, "started_at": r.started_at, "finished_at": r.finished_at})
    return rows


CSV_COLUMNS = ("problem", "rep", "seed", "model", "solver", "role", "variant", "status",
               "time_1e-02", "time_1e-04", "time_1e-06", "elapsed", "final_objective",
               "suboptimality", "converged", "n_iter", "certificate", "reference",
               "reference_kind", "agreement", "message")


def csv_records(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Flat records of race rows (the CSV output and the printed table)."""
    out = []
    for r in rows:
        ref = r.get("reference") or {}
        agr = r.get("agreement") or {}
        levels = r.get("levels") or {}
        sub = None
        if ref.get("value") is not None and r.get("final_objective") is not None:
            sub = (r["final_objective"] - ref["value"]) / max(abs(ref["value"]), 1e-300)
        out.append({
            "problem": r["problem"], "rep": r["rep"], "seed": r["seed"], "model": r["model"],
            "solver": r["solver"], "role": r["role"], "variant": r.get("variant") or "",
            "status": r["status"], **{f"time_{k}": levels.get(k) for k in
                                      (f"{lv:.0e}" for lv in LEVELS)},
            "elapsed": r.get("elapsed"), "final_objective": r.get("final_objective"),
            "suboptimality": sub, "converged": r.get("converged"), "n_iter": r.get("n_iter"),
            "certificate": r.get("certificate"), "reference": ref.get("value"),
            "reference_kind": ref.get("kind"),
            "agreement": None if agr.get("ok") is None else ("yes" if agr["ok"] else "NO"),
            "message": r.get("message") or ""})
    return out


def to_json(result: RaceResult, rows: Sequence[Mapping[str, Any]]) -> str:
    return json.dumps({
        "format": RACE_FORMAT, "race": result.race_id, "dataset": result.dataset,
        "problem": result.problem, "rep": result.rep, "seed": result.seed,
        "split_fingerprint": result.split_fingerprint,
        "data_fingerprint": result.data_fingerprint, "problem_summary": result.summary,
        "levels": list(LEVELS),
        "references": {k: v.to_json() for k, v in result.references.items()},
        "agreements": result.agreements, "runs": list(rows)}, indent=1, default=repr)
