"""Running a race: one fresh process a solver run, its progress sent as it goes, stopped at
the time limit with the curve it reached."""
from __future__ import annotations

import datetime as _dt
import hashlib
import os
import socket
import time
import traceback
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..data import TaskSet
from ..errors import ConfigError
from ..model import MTLModel
from ..protocol import ProtocolConfig, config_json, evaluable_tasks, make_split, restrict_tasks

from .reference import reference_optimum, solver_agreement
from .runs import (DEFAULT_TIMEOUT, SEND_SECONDS, STOPPED, RaceEntry, RaceResult, Reference,
                   SolverRun)
from .selection import _solver_name, own_solvers, reference_variants


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

    from ..progress import ProgressRecorder
    from ..evaluate import check_fit_returned

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
    from ..runner.local import die_with_parent

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
    from ..runner.local import death_cause, worker_context

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

def race_problem(registry, dataset: str, problem: str, data_dir: str | None, rep: int,
                 config: ProtocolConfig) -> tuple[TaskSet, dict[str, Any]]:
    """The training split of repetition ``rep`` (the protocol's: evaluable tasks, the
    split of (seed, rep)), and a description of it."""
    from ..runner.unit import load_problem

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
    from ..provenance import unit_provenance
    from ..runner.unit import versions

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
