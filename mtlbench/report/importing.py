"""Importing published units into a store, and restoring this project's own publication.

``import_results`` reads a published ``<dataset>.json`` back into a store, after checking
every unit's form and consistency (:mod:`mtlbench.report.imported`), that this installation
computes the same split fingerprints, data fingerprints and protocol for the same dataset,
seed and repetitions (:func:`mtlbench.protocol.make_split`), and optionally recomputing some
units (``--verify N``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import ConfigError
from .schema import UnitRecord


def _local_check(unit: UnitRecord, dataset: str, cache: dict,
                 data_dir: str | None = None) -> str | None:
    """Why this installation disagrees with a published unit's split / data / protocol, or
    None.  Recomputes the split of (dataset, problem, seed, rep) through the dataset plugin and
    :func:`mtlbench.protocol.make_split`."""
    import dataclasses

    from ..dataset import load_tasks
    from ..plugins import get_registry
    from ..protocol import (PROTOCOL_VERSION, ProtocolConfig, config_json, evaluable_tasks,
                            make_split, restrict_tasks)

    proto = unit.protocol or {}
    if proto.get("protocol_version") != PROTOCOL_VERSION:
        return (f"protocol version {proto.get('protocol_version')!r} differs from this "
                f"installation's {PROTOCOL_VERSION}")
    fields = {f.name for f in dataclasses.fields(ProtocolConfig)}
    try:
        cfg = ProtocolConfig(**{k: v for k, v in proto.items() if k in fields})
    except (ConfigError, TypeError, ValueError) as exc:
        return f"its protocol {proto} is not valid here: {exc}"
    from ..search import searcher_version

    if "search_version" in proto and str(proto["search_version"]) != searcher_version(cfg.search):
        return (f"it was searched by version {proto['search_version']} of the {cfg.search!r} "
                f"rule; this installation's is version {searcher_version(cfg.search)}")
    extra = {k: v for k, v in proto.items()
             if k not in fields and k not in ("protocol_version", "search_version")}
    if extra:
        return f"its protocol has settings this installation does not know: {sorted(extra)}"
    local_proto = {**cfg.split_settings(), "reps": cfg.reps}
    for k, v in local_proto.items():
        if k in proto and proto[k] != v:
            return f"protocol setting {k} = {proto[k]!r} is {v!r} here"
    problem = unit.problem
    name = problem.split("/", 1)[1] if "/" in problem else problem
    ck = (dataset, name, config_json(unit.dataset_params))
    if ck not in cache:
        try:
            ds = get_registry().dataset(dataset)
            if config_json(ds.params()) != config_json(unit.dataset_params or {}):
                cache[ck] = (None, f"dataset parameters {unit.dataset_params} differ from "
                                   f"this installation's {ds.params()}")
            else:
                tasks = load_tasks(ds, name, data_dir)
                keep, _ = evaluable_tasks(tasks)
                cache[ck] = (restrict_tasks(tasks, keep), None)
        except Exception as exc:  # noqa: BLE001 - reported as a refusal
            cache[ck] = (None, f"cannot load {problem} here: {exc}")
    tasks, why = cache[ck]
    if tasks is None:
        return why
    if tasks.fingerprint() != unit.data_fingerprint:
        return (f"the data fingerprint of {problem} differs (published "
                f"{str(unit.data_fingerprint)[:12]}…, here {tasks.fingerprint()[:12]}…)")
    fp = make_split(tasks, cfg, int(unit.rep)).fingerprint()
    if fp != unit.split_fingerprint:
        return (f"the split of {problem} repetition {unit.rep} differs (published "
                f"{str(unit.split_fingerprint)[:12]}…, here {fp[:12]}…)")
    return None


def check_import(path: str | Path, data_dir: str | None = None, verify: int = 0,
                 verify_seed: int = 0, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Read a published leaderboard JSON and check it for import; nothing is written.

    Refused (:class:`ConfigError`, one line) when the file is not a leaderboard, a unit is
    not well-formed or not consistent (:func:`mtlbench.report.imported.check_published`),
    any unit's protocol, data fingerprint or split fingerprint differs from what this
    installation computes, or a key is not the hash of its unit; with ``verify`` N, unless
    N units drawn at random (``verify_seed``) and recomputed here agree
    (:func:`mtlbench.report.imported.verify_units`).  Returns the data with ``verified``:
    the keys of the units recomputed."""
    from .imported import read_published_file

    path = Path(path)
    data = read_published_file(path)
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith(
            "mtlbench-leaderboard/"):
        raise ConfigError(f"{str(path)!r} is not a published mtlbench leaderboard "
                          "(no 'format': 'mtlbench-leaderboard/...')")
    if not isinstance(data.get("units"), list) or not data["units"]:
        raise ConfigError(f"{str(path)!r} carries no per-unit results (published before "
                          "units were included); republish it with this mtlbench version")
    data = check_units(data, repr(str(path)), data_dir, verify, verify_seed, log)
    data["path"] = str(path)
    return data


def check_units(data: dict[str, Any], where: str, data_dir: str | None = None,
                verify: int = 0, verify_seed: int = 0,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """The checks of :func:`check_import` on a leaderboard's data already read (``"dataset"``,
    ``"task_names"``, ``"units"`` in the published form), ``where`` naming its source in the
    refusal; also what ``mtlbench merge`` checks a store's units with.  Returns the data with
    ``records`` (the units as records) and ``verified``."""
    from ..rekey import rekey_published
    from .imported import check_keys, check_published, verify_units

    check_published(data, where)  # the raw JSON: types before records are read
    units = [UnitRecord.from_json(u) for u in data["units"]]
    dataset = data["dataset"]
    cache: dict = {}
    problems: dict[str, list[str]] = {}
    for u in units:
        why = _local_check(u, dataset, cache, data_dir)
        if why:
            problems.setdefault(why, []).append(f"{u.model} {u.problem} rep {u.rep}")
    if problems:
        parts = [f"{who[0]}" + (f" (and {len(who) - 1} more unit(s))" if len(who) > 1 else "")
                 + f": {why}" for why, who in list(problems.items())[:3]]
        more = f" (and {len(problems) - 3} more reasons)" if len(problems) > 3 else ""
        raise ConfigError(f"refusing to import {where}: it does not match what this "
                          f"installation computes — {'; '.join(parts)}{more}. "
                          "Nothing was imported.")
    check_keys(data, where)
    rekeyed = rekey_published(data)  # units of the previous code fingerprint rule
    if rekeyed:
        units = [UnitRecord.from_json(u) for u in data["units"]]
        log(f"{rekeyed} unit(s) of {where} have code fingerprints of the previous rule "
            "that name the code installed here: read under this rule's keys")
    data["verified"] = (verify_units(data, verify, verify_seed, data_dir, where, log)
                        if verify else set())
    data["records"] = units
    return data


def record_row(data: dict[str, Any], u: UnitRecord, origin: str | None
                ) -> tuple[dict[str, Any], list[tuple], None]:
    """A published unit record of a checked file as the store writes it (row, per-task
    scores, no arrays), with ``origin``."""
    from ..store import UNIT_COLUMNS

    names = data.get("task_names") or {}
    row = {c: getattr(u, c, None) for c in UNIT_COLUMNS}
    row["dataset"] = data["dataset"]
    trace = u.trace or []
    info = u.search or {}
    row["grid"] = ({"fits": trace, **{k: v for k, v in info.items() if k != "n_fits"}}
                   if info and set(info) - {"n_fits"} else trace)
    row["host"] = u.host or f"imported from {Path(data['path']).name}"
    row["origin"] = origin
    tnames = u.task_names or names.get(u.problem, [])
    scores = [(i, tnames[i] if i < len(tnames) else str(i), a, m)
              for i, (a, m) in enumerate(zip(u.task_auc or [], u.n_test or []))]
    recorded = dict(u.task_metrics or {})
    if u.task_auc and isinstance(u.metrics, dict) and "auc" in (u.metrics.get("test") or {}):
        recorded["auc"] = list(u.task_auc)   # a unit of format 4 recorded every metric
    row["task_metrics"] = [(i, tnames[i] if i < len(tnames) else str(i), m, metric, vals[i])
                           for metric, vals in recorded.items()
                           for i, m in enumerate(u.n_test or []) if i < len(vals)]
    return row, scores, None


def write_import(data: dict[str, Any], store, log: Callable[[str], None] = print,
                 replace: bool = False) -> int:
    """Write the units of a file checked by :func:`check_import` into ``store`` in one
    transaction, each with its origin ("verified" if --verify recomputed it, else
    "imported"); a unit whose key the store holds already is kept unless ``replace``.
    Returns how many units were written."""
    from .imported import IMPORTED, VERIFIED

    path = Path(data["path"])
    held = set(store.statuses(u.key for u in data["records"])) if not replace else set()
    rows = [record_row(data, u, VERIFIED if u.key in data["verified"] else IMPORTED)
            for u in data["records"] if u.key not in held]
    store.write_units(rows)
    verified = sum(1 for u in data["records"] if u.key in data["verified"] and u.key not in held)
    log(f"imported {len(rows)} unit(s) of {data['dataset']} from {path} into {store.path}"
        + (f" ({verified} of them verified by recomputing them here)" if verified else "")
        + (f"; kept the {len(held)} unit(s) of the file the store holds already (computed "
           "there or imported before; --replace imports over them)" if held else ""))
    return len(rows)


def import_results(path: str | Path, store, log: Callable[[str], None] = print,
                   data_dir: str | None = None, verify: int = 0, verify_seed: int = 0,
                   replace: bool = False) -> int:
    """Import the units of a published leaderboard JSON into ``store``; returns how many.

    All or nothing: every check (:func:`check_import`) passes before any unit is written,
    and they are written in one transaction; units the store holds already are kept unless
    ``replace`` (:func:`write_import`)."""
    return write_import(check_import(path, data_dir, verify, verify_seed, log), store, log,
                        replace)


def restore_published(path: str | Path, store, data_dir: str | None = None,
                      rep0: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Put the units of this project's own published leaderboard JSON back into the store
    they were published from (a maintainer's tool: ``scripts/restore_store.py``).

    Results stores are not kept in version control; the published JSON files are the record.
    After the same checks as an import (:func:`check_import`: form, consistency, keys, data
    and split fingerprints), a unit is restored only if its key is the key THIS installation
    computes for it (same model and dataset code fingerprints, plugin versions and search
    rule), i.e. exactly the unit ``compare`` would store; it is stored as computed here
    (origin None, not "imported"), so ``compare`` skips it and the next publication is the
    same store.  Units made by other code are left out (``compare`` recomputes them), and so
    are repetition 0's units unless ``rep0``: only a run stores what the figures draw from
    (rep 0's fitted arrays and convergence history, which the JSON does not carry), so
    ``compare`` recomputes them, and :func:`check_restored` then checks that they equal the
    published ones.  A unit the store holds already is kept (with its arrays); the others are
    written in one transaction.  Returns counts: ``restored``, ``rep0`` (left for
    ``compare``), ``other_code`` (per model label, left for ``compare``)."""
    from collections import Counter

    from ..errors import MTLBenchError
    from ..plugins import get_registry
    from ..provenance import unit_provenance
    from .imported import published_spec

    data = check_import(path, data_dir, log=log)
    dataset = data["dataset"]
    reg = get_registry()
    here: dict[str, Any] = {}
    counts: dict[str, Any] = {"restored": 0, "rep0": 0, "other_code": Counter()}
    held = set(store.statuses(u.key for u in data["records"]))
    rows = []
    for raw, rec in zip(data["units"], data["records"]):
        name = raw["model_config"]["name"]
        if name not in here:
            try:
                here[name] = unit_provenance(reg, name, dataset)
            except MTLBenchError:
                here[name] = None        # the model is not installed here
        if here[name] is None or published_spec(raw, dataset, here[name]).key != raw["key"]:
            counts["other_code"][raw["model"]] += 1
            continue
        if int(raw["rep"]) == 0 and not rep0:
            counts["rep0"] += 1
            continue
        if rec.key not in held:  # a unit the store holds already is kept
            rows.append(record_row(data, rec, None))
    store.write_units(rows)
    counts["restored"] = len(rows)
    other = counts["other_code"]
    log(f"{dataset}: restored {counts['restored']} unit(s) from {data['path']} into {store.path}"
        + (f"; {counts['rep0']} of repetition 0 left for compare (it stores the figures' arrays)"
           if counts["rep0"] else "")
        + (f"; {sum(other.values())} made by other code than is installed, left for compare ("
           + ", ".join(f"{m} {n}" for m, n in sorted(other.items())) + ")" if other else ""))
    return counts


def check_restored(path: str | Path, store) -> tuple[int, list[str]]:
    """Compare the store's units with the published ones of the same key (the units that
    ``compare`` recomputed after :func:`restore_published`, and any other): the selected
    hyperparameters, the test AUC and every per-task AUC must be equal, bit for bit (the same
    key means the same code, data, split, search and protocol).  Returns (units compared,
    one line per difference)."""
    from ..rekey import rekey_published

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    keys = [u["key"] for u in data["units"]]
    rekey_published(data)  # a unit of the previous fingerprint rule: found by either key
    published = {k: u for key, u in zip(keys, data["units"]) if u["status"] == "ok"
                 for k in {key, u["key"]}}
    rows = store.units(keys=published)
    scores = store.task_scores(keys=published)
    per_task = {k: g.sort_values("task_index")["test_auc"].tolist()
                for k, g in scores.groupby("key")}
    out = []
    for row in rows.itertuples(index=False):
        u = published[row.key]
        where = f"{data['dataset']}: {u['model']} {u['problem']} rep {u['rep']}"
        if u.get("target_kind", "binary") != "binary":
            mine = (row.metrics or {}).get("test") if isinstance(row.metrics, dict) else None
            if row.status != "ok" or row.best_params != u["best_params"] \
                    or mine != u["metrics"]["test"]:
                out.append(f"{where}: published {u['metrics']['test']} at {u['best_params']}, "
                           f"here {mine} at {row.best_params} ({row.status})")
            continue
        if row.status != "ok":
            out.append(f"{where}: published ok, {row.status} here")
        elif row.best_params != u["best_params"] or row.test_auc != u["test_auc"] \
                or per_task.get(row.key) != list(u["task_auc"]):
            out.append(f"{where}: published test AUC {u['test_auc']!r} at {u['best_params']}, "
                       f"here {row.test_auc!r} at {row.best_params}")
    return len(rows), out


def _pairing(model, problem, rep, split, protocol, config) -> str:
    """What pairs a stored unit with a published one whatever code made either: model,
    problem, repetition, split, protocol (the planned number of repetitions aside), space."""
    protocol = {k: v for k, v in (protocol or {}).items() if k != "reps"}
    return json.dumps([model, problem, int(rep), split, protocol, config], sort_keys=True)


def check_restored_any_code(paths, store) -> tuple[int, int, int, list[str]]:
    """Each finished unit of ``store`` beside the published unit (of the leaderboard JSON files
    ``paths``) of the same model, problem, repetition, split, protocol and search space,
    whatever code made either: (pairs, pairs with the same selection and test AUC, pairs
    whose data fingerprints differ, one line per pair that differs)."""
    import numpy as np

    rows = store.units(status="ok")
    mine = {_pairing(r.model, r.problem, r.rep, r.split_fingerprint, r.protocol,
                     r.model_config): r for r in rows.itertuples(index=False)}
    scores = store.task_scores(keys=list(rows["key"]))
    per_task = {k: g.sort_values("task_index")["test_auc"].to_numpy()
                for k, g in scores.groupby("key")}
    n = same = data_differs = 0
    lines: list[str] = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        for u in data["units"]:
            row = mine.get(_pairing(u["model"], u["problem"], u["rep"], u["split_fingerprint"],
                                    u["protocol"], u["model_config"]))
            if row is None or u["status"] != "ok":
                continue
            n += 1
            where = f"{u['model']} {u['problem']} rep {u['rep']}"
            note = ""
            if row.data_fingerprint != u["data_fingerprint"]:
                data_differs += 1
                note = " (data fingerprint differs: the data set is not the same bits here)"
            if row.best_params == u["best_params"] and row.test_auc == u["test_auc"]:
                same += 1
            elif row.best_params == u["best_params"]:
                ours = per_task.get(row.key, np.array([]))
                theirs = np.asarray(u["task_auc"], dtype=float)
                dev = (float(np.max(np.abs(ours - theirs))) if ours.shape == theirs.shape
                       else float("nan"))
                lines.append(f"same selection, test AUC differs: {where}: published "
                             f"{u['test_auc']!r}, here {row.test_auc!r} (max per-task "
                             f"difference {dev:.2e}){note}")
            else:
                lines.append(f"selection differs: {where}: published {u['best_params']} "
                             f"(test AUC {u['test_auc']:.6f}), here {row.best_params} "
                             f"(test AUC {row.test_auc:.6f}){note}")
    return n, same, data_differs, lines


__all__ = ["import_results", "check_import", "check_units", "write_import", "record_row",
           "restore_published", "check_restored", "check_restored_any_code"]
