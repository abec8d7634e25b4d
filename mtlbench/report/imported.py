"""What ``import-results`` checks before a published unit enters a store, and ``--verify``.

A published leaderboard JSON (``leaderboards/<dataset>.json``) is read as untrusted input.

**Read** (:func:`read_published_file`): a file that cannot be read, is not UTF-8, is not JSON,
nests objects or lists deeper than :data:`MAX_DEPTH` or holds a string no store can hold (a
lone surrogate) is refused with one line, never a traceback.

**Checked for every unit** (:func:`check_published`; the first problem refuses the whole file
with one line naming the unit and the field):

* the unit is an object with the fields a unit has, each of its type: ``key`` (32 hex
  digits), ``model`` (a label of the model ``model_config.name``: the name, or the name with
  its overrides), ``problem`` (a non-empty string), ``rep`` and ``seed`` (integers >= 0,
  ``seed`` that of its protocol, ``rep`` below its protocol's ``reps``), ``status`` ("ok" or
  "failed"), ``protocol``, ``model_config`` (with ``name``, ``fixed``, ``space``),
  ``dataset_params`` and ``provenance`` (objects; code fingerprints 16 hex digits or null);
  optional fields (times, ``n_iter``, ``versions``, ``message``, ...) have their type or are
  null;
* an "ok" unit carries its results: ``split_fingerprint`` and ``data_fingerprint`` (sha256:
  64 hex digits), ``best_params`` (an object), ``val_auc`` and ``test_auc`` (finite, in
  [0, 1]), ``task_auc`` (one finite AUC in [0, 1] per task) and ``n_test`` (one positive
  integer per task), as many as ``n_tasks`` and as the problem's task names; and its
  ``test_auc`` is the mean of its ``task_auc`` within :data:`TEST_AUC_TOLERANCE` (the
  protocol computes it so: a changed AUC shows);
* a unit of real-valued targets (``target_kind`` "real") carries, instead of AUCs, its
  metrics (``metrics.test``: finite numbers or null) and per task the values of each
  (``task_metrics``) and the number of test rows (``n_test``), as many as ``n_tasks``;
* a "failed" unit carries no test AUC;
* no key twice; and each key is the hash of the unit's identity (model, overrides, search
  space, problem, dataset parameters, repetition, protocol, code provenance: what
  :attr:`mtlbench.runner.UnitSpec.key` hashes), so an edited identity field shows.

(The caller then checks that this installation computes the same data and split
fingerprints and protocol: :func:`mtlbench.report.importing.check_import`.)

**--verify N** (:func:`verify_units`) recomputes N "ok" units drawn at random (seeded) from the
file, on this machine, in supervised worker processes, and refuses the file unless they agree:

* where the unit's code fingerprints and search rule are this installation's (its key is the
  key this installation computes for it), the whole unit is recomputed — search, refit, test — and
  its per-task test AUCs, test AUC and selected hyperparameters must be **bit-identical**;
* otherwise (the unit was made by other code — an older solver, another plugin version — or
  searched by another version of its searcher's rule) bit-identity is not to be expected, and
  the selection itself may legitimately move; the
  model is fitted with this installation's code at the **published hyperparameters** (its
  overrides plus ``best_params``, nothing searched) on the same split, and its validation
  AUC and test AUC must be within :data:`OTHER_CODE_TOLERANCE` of the published ones (the
  largest per-task difference is reported).  Such a check detects numbers off by more than
  that tolerance; it cannot vouch for smaller differences.

Verified units are stored with origin "verified", the others of the file with "imported"
(``units.origin``; units computed in the store have none), and the leaderboard marks rows that
hold imported units.

**Written** (:func:`mtlbench.report.importing.write_import`) in one transaction: a kill or a
full disk in the middle leaves the store as it was.  A unit whose key the store already holds
(computed there, with its fitted arrays and histories, or imported before) is kept unless the
import is asked to replace it.
"""
from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import ConfigError, MTLBenchError

__all__ = ["read_published_file", "check_structure", "check_published", "check_keys",
           "published_spec", "problem_name", "search_versions", "verify_units",
           "TEST_AUC_TOLERANCE", "OTHER_CODE_TOLERANCE", "IMPORTED", "VERIFIED", "MAX_DEPTH"]

#: |test_auc - mean(task_auc)| allowed in a published unit (float64 rounding of a mean taken
#: in another order; the published files agree to 1e-15)
TEST_AUC_TOLERANCE = 1e-12
#: |published - recomputed| allowed for validation and test AUC when --verify refits a unit
#: made by other code or search rule at its published hyperparameters (0.5 AUC points)
OTHER_CODE_TOLERANCE = 0.005
#: values of the store's ``origin`` column for units that came from a published file
IMPORTED, VERIFIED = "imported", "verified"
#: how deeply a published file may nest objects and lists (published leaderboards nest 8
#: deep; a model's own diagnostics add a few levels)
MAX_DEPTH = 32

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX16 = re.compile(r"[0-9a-f]{16}")


class _Bad(Exception):
    """One problem of one field (turned into the refusal's one line)."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"field {field!r} {why}")


def _describe(i: int, u: Any) -> str:
    if not isinstance(u, dict):
        return f"unit {i}"
    who = " ".join(str(u[k]) for k in ("model", "problem") if isinstance(u.get(k), str))
    rep = u.get("rep")
    return f"unit {i} ({who} rep {rep})" if who and isinstance(rep, int) else f"unit {i}"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _need(u: dict, field: str, ok: Callable[[Any], bool], what: str,
          optional: bool = False) -> Any:
    if field not in u or u[field] is None:
        if optional:
            return None
        raise _Bad(field, f"is missing (expected {what})")
    v = u[field]
    if not ok(v):
        raise _Bad(field, f"is {_short(v)}, expected {what}")
    return v


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _auc(v: Any) -> bool:
    return _is_number(v) and 0.0 <= v <= 1.0


def _check_unit(u: Any, task_names: Mapping[str, Any]) -> None:
    if not isinstance(u, dict):
        raise _Bad("(the unit)", f"is {_short(u)}, expected an object")
    _need(u, "key", lambda v: isinstance(v, str) and _HEX32.fullmatch(v), "32 hex digits")
    for f in ("model", "problem"):
        _need(u, f, lambda v: isinstance(v, str) and v.strip(), "a non-empty string")
    proto = _need(u, "protocol", lambda v: isinstance(v, dict), "an object")
    rep = _need(u, "rep", lambda v: _is_int(v) and v >= 0, "an integer >= 0")
    _need(u, "seed", lambda v: _is_int(v) and v >= 0 and v == proto.get("seed", v),
          f"an integer >= 0 equal to its protocol's seed ({_short(proto.get('seed'))})")
    if _is_int(proto.get("reps")) and rep >= proto["reps"]:
        raise _Bad("rep", f"is {rep}, but its protocol has {proto['reps']} repetitions")
    status = _need(u, "status", lambda v: v in ("ok", "failed"), "'ok' or 'failed'")
    mc = _need(u, "model_config", lambda v: isinstance(v, dict), "an object")
    for f, ok, what in (("name", lambda v: isinstance(v, str) and v, "a model name"),
                        ("fixed", lambda v: isinstance(v, dict), "an object"),
                        ("space", lambda v: isinstance(v, dict), "an object")):
        if not ok(mc.get(f)):
            raise _Bad(f"model_config.{f}", f"is {_short(mc.get(f))}, expected {what}")
    if u["model"].split("[", 1)[0] != mc["name"]:
        raise _Bad("model", f"is {u['model']!r}, not a label of its model "
                            f"(model_config.name {mc['name']!r})")
    _need(u, "dataset_params", lambda v: isinstance(v, dict), "an object", optional=True)
    prov = _need(u, "provenance", lambda v: isinstance(v, dict), "an object", optional=True)
    for part, info in (prov or {}).items():
        code = info.get("code") if isinstance(info, dict) else "?"
        if code is not None and not (isinstance(code, str) and _HEX16.fullmatch(code)):
            raise _Bad(f"provenance.{part}.code", f"is {_short(code)}, expected 16 hex "
                                                  "digits (a code fingerprint) or null")
    for f in ("time_total", "time_select", "time_fit"):
        _need(u, f, lambda v: _is_number(v) and v >= 0, "a number of seconds >= 0",
              optional=True)
    _need(u, "n_iter", lambda v: _is_int(v) and v >= 0, "an integer >= 0", optional=True)
    for f in ("versions", "diagnostics", "search"):
        _need(u, f, lambda v: isinstance(v, dict), "an object", optional=True)
    for f in ("trace", "dropped_tasks"):
        _need(u, f, lambda v: isinstance(v, list), "a list", optional=True)
    for f in ("message", "host", "started_at", "finished_at"):
        _need(u, f, lambda v: isinstance(v, str), "a string", optional=True)
    _need(u, "origin", lambda v: v in (IMPORTED, VERIFIED), f"{IMPORTED!r} or {VERIFIED!r}",
          optional=True)
    if status == "failed":
        if u.get("test_auc") is not None or u.get("task_auc"):
            raise _Bad("test_auc", "is given for a failed unit")
        return
    for f in ("split_fingerprint", "data_fingerprint"):
        _need(u, f, lambda v: isinstance(v, str) and _HEX64.fullmatch(v),
              "64 hex digits (a sha256 fingerprint)")
    _need(u, "best_params", lambda v: isinstance(v, dict), "an object")
    if u.get("target_kind", "binary") != "binary":
        _check_real_unit(u, task_names)
        return
    _need(u, "val_auc", _auc, "an AUC: a finite number in [0, 1]",
          optional=proto.get("select_by") not in (None, "auc"))
    test_auc = _need(u, "test_auc", _auc, "an AUC: a finite number in [0, 1]")
    per_task = _need(u, "task_auc", lambda v: isinstance(v, list) and v and all(map(_auc, v)),
                     "a non-empty list of AUCs (finite numbers in [0, 1])")
    _need(u, "n_test", lambda v: isinstance(v, list) and len(v) == len(per_task)
          and all(_is_int(n) and n > 0 for n in v),
          f"{len(per_task)} positive integers (one per task)")
    _need(u, "n_tasks", lambda v: v == len(per_task), f"{len(per_task)} (one per task AUC)",
          optional=True)
    names = u.get("task_names", task_names.get(u["problem"]))
    if not (isinstance(names, list) and len(names) == len(per_task)
            and all(isinstance(n, str) for n in names)):
        raise _Bad("task_auc", f"holds {len(per_task)} AUCs, but the file names "
                               f"{len(names) if isinstance(names, list) else 'no'} task(s) of "
                               f"{u['problem']} (task_names)")
    import numpy as np

    mean = float(np.mean(np.asarray(per_task, dtype=np.float64)))
    if abs(mean - test_auc) > TEST_AUC_TOLERANCE:
        raise _Bad("test_auc", f"is {test_auc!r}, but the mean of its {len(per_task)} "
                               f"per-task AUCs (task_auc) is {mean!r} (tolerance "
                               f"{TEST_AUC_TOLERANCE:g})")


def _check_real_unit(u: dict, task_names: Mapping[str, Any]) -> None:
    """The results of an "ok" unit of real-valued targets (module docstring)."""
    if u["target_kind"] != "real":
        raise _Bad("target_kind", f"is {_short(u['target_kind'])}, expected 'binary' or 'real'")
    metrics = _need(u, "metrics", lambda v: isinstance(v, dict) and isinstance(v.get("test"),
                                                                                dict),
                    "an object with the test values ('test')")
    for name, v in metrics["test"].items():
        if v is not None and not _is_number(v):
            raise _Bad(f"metrics.test.{name}", f"is {_short(v)}, expected a number or null")
    n_test = _need(u, "n_test", lambda v: isinstance(v, list) and v
                   and all(_is_int(n) and n > 0 for n in v), "positive integers (one per task)")
    _need(u, "n_tasks", lambda v: v == len(n_test), f"{len(n_test)} (one per n_test)",
          optional=True)
    per_task = _need(u, "task_metrics", lambda v: isinstance(v, dict), "an object")
    for name, vals in per_task.items():
        if not (isinstance(vals, list) and len(vals) == len(n_test)
                and all(v is None or _is_number(v) for v in vals)):
            raise _Bad(f"task_metrics.{name}", f"is {_short(vals)}, expected {len(n_test)} "
                                               "numbers or nulls (one per task)")
    names = u.get("task_names", task_names.get(u["problem"]))
    if not (isinstance(names, list) and len(names) == len(n_test)):
        raise _Bad("n_test", f"holds {len(n_test)} tasks, but the file names "
                             f"{len(names) if isinstance(names, list) else 'no'} task(s) of "
                             f"{u['problem']} (task_names)")
def read_published_file(path: str | Path) -> Any:
    """The JSON value of a published file, read as untrusted input (module docstring):
    :class:`ConfigError` in one line when it cannot be read, is not UTF-8 or not JSON, or
    fails :func:`check_structure`."""
    path = Path(path)
    where = repr(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} is not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                          f"at offset {exc.start})") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise ConfigError(f"refusing to import {where}: it nests objects or lists deeper than "
                          f"the JSON reader follows (a published file nests at most "
                          f"{MAX_DEPTH} levels). Nothing was imported.") from None
    except ValueError as exc:
        raise ConfigError(f"{where} is not JSON: {exc}") from None
    check_structure(data, where)
    return data


def check_structure(data: Any, where: str) -> None:
    """Refuse (:class:`ConfigError`, one line naming where) a JSON value nested deeper than
    :data:`MAX_DEPTH` or holding a string that is not valid Unicode (a lone surrogate such
    as ``"\\ud800"``, which the JSON reader accepts and no store can hold)."""
    stack: list[tuple[Any, int, str]] = [(data, 1, "")]
    while stack:
        value, depth, at = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError(f"refusing to import {where}: {_short(at)} nests objects or lists "
                              f"deeper than {MAX_DEPTH} levels (a published file nests 8). "
                              "Nothing was imported.")
        if isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, depth, at))
                stack.append((v, depth + 1, f"{at}.{k}" if at else str(k)))
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{at}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigError(f"refusing to import {where}: {_short(at) or 'the file'} "
                                  f"holds a string that is not valid Unicode ({_short(value)}). "
                                  "Nothing was imported.") from None


def check_published(data: Any, where: str) -> None:
    """Refuse (:class:`ConfigError`, one line naming the unit and the field) a published
    leaderboard whose units are not well-formed or not consistent (module docstring)."""
    def refuse(what: str) -> ConfigError:
        return ConfigError(f"refusing to import {where}: {what}. Nothing was imported.")

    if not isinstance(data.get("dataset"), str) or not data["dataset"].strip():
        raise refuse("field 'dataset' is missing or not a dataset name")
    task_names = data.get("task_names") or {}
    if not isinstance(task_names, dict):
        raise refuse(f"field 'task_names' is {_short(task_names)}, expected an object")
    seen: set[str] = set()
    for i, u in enumerate(data["units"]):
        try:
            _check_unit(u, task_names)
        except _Bad as exc:
            raise refuse(f"{_describe(i, u)}: {exc}") from None
        if u["key"] in seen:
            raise refuse(f"{_describe(i, u)}: field 'key' {u['key']} is given twice")
        seen.add(u["key"])


def search_versions(unit: Mapping[str, Any]) -> list[str]:
    """The versions of its searcher's rule a published unit may have been searched by: the
    one its protocol records, or (published before the version was recorded) any up to the
    installed one."""
    from ..search import searcher_version

    recorded = unit["protocol"].get("search_version")
    if recorded is not None:
        return [str(recorded)]
    installed = searcher_version(unit["protocol"].get("search"))
    return [str(v) for v in range(1, int(installed) + 1)] if installed.isdigit() \
        else [installed]


def check_keys(data: Mapping[str, Any], where: str) -> None:
    """Refuse a file in which a unit's key is not the hash of its identity (an identity
    field was edited, or the key): run after the installation's checks, so that a unit of
    other data or settings is refused with that reason first."""
    for i, u in enumerate(data["units"]):
        spec = published_spec(u, data["dataset"])
        keys = [spec.key_under(v) for v in search_versions(u)]
        if u["key"] not in keys:
            raise ConfigError(
                f"refusing to import {where}: {_describe(i, u)}: field 'key' {u['key']} is not "
                "the hash of the unit's identity (model, overrides, search space, problem, "
                "dataset parameters, repetition, protocol and search rule version, code "
                f"provenance), which is {keys[-1]}: one of them was edited. Nothing was "
                "imported.")


def problem_name(dataset: str, problem: str) -> str:
    """The dataset's own name of a problem id (:func:`mtlbench.runner.problem_id` inverted)."""
    if problem.startswith(dataset + "/"):
        return problem[len(dataset) + 1:]
    return dataset.split("[", 1)[0]


def published_spec(unit: Mapping[str, Any], dataset: str,
                   provenance: Mapping[str, Any] | None | bool = True,
                   at_selection: bool = False):
    """The :class:`~mtlbench.runner.UnitSpec` of a published unit: with its own provenance
    (``True``), another one (a mapping, e.g. this installation's) or none; with
    ``at_selection`` its published hyperparameters fixed and nothing searched."""
    from ..protocol import ProtocolConfig, config_json
    from ..runner.unit import UnitSpec

    fields = {f.name for f in dataclasses.fields(ProtocolConfig)}
    cfg = ProtocolConfig(**{k: v for k, v in unit["protocol"].items() if k in fields})
    mc = unit["model_config"]
    fixed, space = dict(mc["fixed"]), dict(mc["space"])
    if at_selection:
        fixed, space = {**fixed, **unit["best_params"]}, {}
    prov = unit.get("provenance") if provenance is True else provenance
    return UnitSpec(model=mc["name"], label=unit["model"], fixed_json=config_json(fixed),
                    space_json=config_json(space), dataset=dataset, problem=unit["problem"],
                    problem_name=problem_name(dataset, unit["problem"]),
                    dataset_params_json=config_json(unit.get("dataset_params") or {}),
                    rep=unit["rep"], protocol=cfg,
                    provenance_json=config_json(prov) if prov else "")


def _codes(prov: Mapping[str, Any] | None) -> str:
    """``model e57cdff59f6d…, dataset a2892854bc4c…`` (the code fingerprints)."""
    parts = []
    for part in ("model", "dataset"):
        code = ((prov or {}).get(part) or {}).get("code")
        parts.append(f"{part} {code[:12]}…" if isinstance(code, str) else f"{part} unrecorded")
    return ", ".join(parts)


def _differences(unit: Mapping[str, Any], here: Mapping[str, Any], dataset: str) -> str:
    """What made a published unit other than this installation would: code (fingerprint,
    plugin version) of its model and dataset, and the version of its searcher's rule (the
    one its key was made with)."""
    from ..search import searcher_version

    out = []
    theirs = unit.get("provenance") or {}
    for part in ("model", "dataset"):
        a, b = theirs.get(part) or {}, here.get(part) or {}
        for field, what in (("code", "code"), ("version", "plugin version")):
            if a.get(field) != b.get(field):
                out.append(f"{part} {what} {str(a.get(field))[:12]} in the file, "
                           f"{str(b.get(field))[:12]} here")
    installed = searcher_version(unit["protocol"].get("search"))
    spec = published_spec(unit, dataset)
    used = [v for v in search_versions(unit) if spec.key_under(v) == unit["key"]]
    if used and installed not in used:
        out.append(f"search rule version {used[0]} in the file, {installed} here")
    return "; ".join(out) or "its key differs"


def verify_units(data: Mapping[str, Any], n: int, seed: int, data_dir: str | None,
                 where: str, log: Callable[[str], None]) -> set[str]:
    """Recompute ``n`` "ok" units drawn with ``random.Random(seed)`` from the file and refuse
    it (:class:`ConfigError`) unless they agree with the published numbers (rules: module
    docstring); returns the keys of the units verified."""
    from ..plugins import get_registry
    from ..provenance import unit_provenance
    from ..runner import default_jobs
    from ..runner.local import local_results

    dataset = data["dataset"]
    ok = [u for u in data["units"] if u["status"] == "ok"]
    chosen = random.Random(seed).sample(ok, min(n, len(ok)))
    real = [u for u in chosen if u.get("target_kind", "binary") != "binary"]
    if real:
        raise ConfigError(f"refusing to import {where}: --verify compares per-task AUCs, and "
                          f"{_unit_text(real[0])} has real-valued targets; import it without "
                          "--verify. Nothing was imported.")
    reg = get_registry()
    plans = []
    for u in chosen:
        try:
            here = unit_provenance(reg, u["model_config"]["name"], dataset)
        except MTLBenchError as exc:
            raise ConfigError(f"refusing to import {where}: --verify cannot recompute "
                              f"{_unit_text(u)} here: {exc}. Nothing was imported.") from None
        same = published_spec(u, dataset, here).key == u["key"]
        spec = published_spec(u, dataset, here, at_selection=not same)
        plans.append((u, spec, same, here))
    log(f"--verify: recomputing {len(plans)} unit(s) drawn from {where} (seed {seed}) here ...")
    results = {r.spec.key: r for r in local_results(
        [p[1] for p in plans], jobs=max(1, min(len(plans), default_jobs())),
        data_dir=data_dir, timeout=None)}
    for u, spec, same, here in plans:
        result = results[spec.key]
        if not result.ok:
            raise ConfigError(f"refusing to import {where}: --verify could not recompute "
                              f"{_unit_text(u)} here: {result.row.get('message')}. Nothing "
                              "was imported.")
        log(_compare(u, result, same, here, dataset, where))
    return {u["key"] for u, *_ in plans}


def _unit_text(u: Mapping[str, Any]) -> str:
    return f"{u['model']} {u['problem']} rep {u['rep']}"


def _compare(u: Mapping[str, Any], result: Any, same: bool, here: Mapping[str, Any],
             dataset: str, where: str) -> str:
    """The line saying how a recomputed unit agrees with the published one, or raise."""
    mine = [float(a) for _, _, a, _ in result.task_scores]
    theirs = [float(a) for a in u["task_auc"]]

    def refuse(what: str) -> ConfigError:
        return ConfigError(f"refusing to import {where}: --verify recomputed {_unit_text(u)} "
                           f"here and {what}. Nothing was imported.")

    if len(mine) != len(theirs):
        raise refuse(f"got {len(mine)} per-task AUCs, the file has {len(theirs)}")
    diffs = [abs(a - b) for a, b in zip(mine, theirs)]
    worst = max(range(len(diffs)), key=diffs.__getitem__)
    if same:
        if diffs[worst] != 0.0 or result.row["test_auc"] != u["test_auc"]:
            raise refuse(f"with the same code got different numbers: the test AUC of task "
                         f"{worst} is {mine[worst]!r} here, {theirs[worst]!r} in the file "
                         f"({sum(d != 0 for d in diffs)} of {len(diffs)} tasks differ)")
        if result.row["best_params"] != u["best_params"]:
            raise refuse(f"with the same code selected {result.row['best_params']}, the file "
                         f"says {u['best_params']}")
        return (f"verified {_unit_text(u)}: recomputed with the same code and search rule "
                f"(fingerprints {_codes(here)}): {len(mine)} per-task test AUCs bit-identical")
    val, test = result.row["val_auc"], result.row["test_auc"]
    made = _differences(u, here, dataset)
    for name, a, b in (("validation AUC", val, u["val_auc"]), ("test AUC", test, u["test_auc"])):
        if abs(a - b) > OTHER_CODE_TOLERANCE:
            raise refuse(f"at the published hyperparameters {u['best_params']} (made by "
                         f"other code or search rule: {made}) got a {name} of {a:.4f}, the "
                         f"file says {b:.4f} (tolerance {OTHER_CODE_TOLERANCE:g})")
    return (f"verified {_unit_text(u)} within {OTHER_CODE_TOLERANCE:g}: it was made by other "
            f"code or search rule ({made}), refitted here at its published hyperparameters: "
            f"validation AUC {val:.4f} (file {u['val_auc']:.4f}), test AUC {test:.4f} (file "
            f"{u['test_auc']:.4f}), largest per-task difference {diffs[worst]:.4f}")
