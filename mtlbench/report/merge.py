"""``mtlbench merge``: the results of several machines in one store.

Sources are results stores (SQLite files written by ``compare``) and published leaderboard
files (``<dataset>.json``, what ``publish`` writes and ``import-results`` reads); the target is
a store, new or not.

**Checked as an import.**  Every finished unit of every source passes the checks of
``import-results`` before anything is written, with the import's own functions: its form and
consistency (:func:`mtlbench.report.imported.check_published`), the protocol, data and split
fingerprints this installation computes for it (:func:`mtlbench.report.importing.check_units`),
and its key as the hash of its identity (:func:`mtlbench.report.imported.check_keys`).  A
store's units are checked in their published form (:func:`mtlbench.report.records.
unit_records`).  One problem refuses the whole merge.

**One unit per key.**  A unit is its key (model, overrides, search space, problem, dataset
parameters, repetition, protocol, code).  When a key is in several sources, or in a source and
the target, their *results* are compared -- status, selected hyperparameters, validation and
test AUC, the per-task test AUCs and test counts, split and data fingerprints, exactly:

* the same results: one copy is kept (the target's, else the first source's that is a store,
  else the first source's), the others are counted as duplicates;
* different results: a **conflict**.  The merge is refused with one line naming the unit, the
  two sources and what differs, and nothing is written.

Failed units of a store are not merged (a failure is not a result; ``compare
--retry-failed`` reruns it) and are counted; a finished unit replaces a failed one of the same
key in the target.  Races (``mtlbench race``) are not merged; a source that holds some is
named.

**Written as one transaction** (:meth:`mtlbench.store.ResultStore.transaction`).  A store's
unit is copied exactly (its row with times, host, histories, traceback and ``origin``, its
per-task scores and fitted arrays), so a unit computed on another machine stays a computed
unit (as one computed there by a Dask worker); a unit of a published file is written as
``import-results`` writes it, with origin "imported".
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import ConfigError

__all__ = ["merge_stores", "MergePlan", "RESULT_FIELDS"]

#: what must be equal for two units of one key to be the same result
RESULT_FIELDS = ("status", "best_params", "val_auc", "test_auc", "task_auc", "n_test",
                 "split_fingerprint", "data_fingerprint", "target_kind", "metrics",
                 "task_metrics")


@dataclass
class _Source:
    path: Path
    kind: str                          # "store" or "file"
    label: str                         # as the user gave it
    datasets: list[dict[str, Any]] = field(default_factory=list)  # checked data per dataset
    failed: int = 0                    # failed units left out
    races: int = 0


@dataclass
class MergePlan:
    """What a merge writes: per source the keys it contributes, and the counts said after."""

    target: Path
    sources: list[_Source]
    write: list[tuple[_Source, dict[str, Any], Any]]   # (source, its checked data, record)
    duplicates: dict[str, int]                          # source label -> copies not written
    #                                                     (the same results elsewhere)
    present: dict[str, int]                             # source label -> already in target
    replaced_failed: int = 0

    def text(self) -> str:
        parts = []
        for s in self.sources:
            new = sum(1 for src, _, _ in self.write if src is s)
            bits = [f"{new} new"]
            if self.present.get(s.label):
                bits.append(f"{self.present[s.label]} already in the target")
            if self.duplicates.get(s.label):
                bits.append(f"{self.duplicates[s.label]} also in another source (kept once)")
            if s.failed:
                bits.append(f"{s.failed} failed unit(s) left out (compare --retry-failed "
                            "reruns them)")
            if s.races:
                bits.append(f"{s.races} race run(s) not merged")
            parts.append(f"{s.label}: {', '.join(bits)}")
        extra = (f"; {self.replaced_failed} failed unit(s) of the target replaced by finished "
                 "ones" if self.replaced_failed else "")
        return f"{len(self.write)} unit(s) into {self.target}{extra} — " + "; ".join(parts)


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _results(rec: Any) -> dict[str, Any]:
    return {f: getattr(rec, f) for f in RESULT_FIELDS}


def _store_datasets(path: Path, label: str, data_dir: str | None, source: _Source) -> None:
    """Check a store's finished units, dataset by dataset, in their published form."""
    from .._json import jsonable
    from ..store import ResultStore
    from .importing import check_units
    from .records import unit_records

    with ResultStore(path, readonly=True) as rs:
        units = rs.units()
        source.races = len(rs.races())
        ok = units[units["status"] == "ok"]
        source.failed = int(len(units) - len(ok))
        scores = rs.task_scores(keys=ok["key"])
        names = {k: [str(n) for n in g.sort_values("task_index")["task_name"]]
                 for k, g in scores.groupby("key")}
        for ds, d in ok.groupby("dataset", sort=True):
            records = unit_records(rs, d)
            for rec in records:
                rec.task_names = names.get(rec.key, [])
            data = {"dataset": ds, "task_names": {},  # each unit carries its task names
                    "units": [jsonable(r.to_json(), strict=True) for r in records]}
            checked = check_units(data, f"{label!r} (dataset {ds})", data_dir)
            checked["path"] = str(path)
            source.datasets.append(checked)


def _read_source(given: str, data_dir: str | None) -> _Source:
    from .importing import check_import

    path = Path(given).expanduser()
    if not path.is_file():
        raise ConfigError(f"merge: {given!r} is not a file (give results stores or published "
                          "leaderboard .json files)")
    if _is_sqlite(path):
        source = _Source(path, "store", given)
        _store_datasets(path, given, data_dir, source)
        return source
    source = _Source(path, "file", given)
    source.datasets.append(check_import(path, data_dir=data_dir, log=lambda s: None))
    return source


def _differences(a: dict[str, Any], b: dict[str, Any]) -> str:
    """``test_auc 0.8512 vs 0.8519; best_params {...} vs {...}`` (the fields that differ)."""
    def short(v: Any) -> str:
        if isinstance(v, float):
            return repr(v)
        if isinstance(v, list) and len(v) > 3:
            return f"[{len(v)} values]"
        text = json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v)
        return text if len(text) <= 60 else text[:57] + "..."

    out = []
    for f in RESULT_FIELDS:
        if a[f] != b[f]:
            if isinstance(a[f], list) and isinstance(b[f], list) and len(a[f]) == len(b[f]):
                n = sum(x != y for x, y in zip(a[f], b[f]))
                out.append(f"{f} differs in {n} of {len(a[f])} tasks")
            else:
                out.append(f"{f} {short(a[f])} vs {short(b[f])}")
    return "; ".join(out)


def plan_merge(sources: Sequence[str], target: str | os.PathLike,
               data_dir: str | None = None) -> MergePlan:
    """Read and check every source and compare it with the target; raise
    :class:`~mtlbench.errors.ConfigError` (one line) on a bad source or a conflict.
    Nothing is written."""
    from .._json import jsonable
    from ..store import ResultStore
    from .records import unit_records
    from .schema import UnitRecord

    target = Path(target).expanduser()
    if not sources:
        raise ConfigError("merge: give at least one source (a results store or a published "
                          "leaderboard .json file)")
    seen: list[Path] = []
    for given in sources:
        p = Path(given).expanduser()
        if target.exists() and p.exists() and os.path.samefile(p, target):
            raise ConfigError(f"merge: {given!r} is the target store itself; name the other "
                              "stores to merge into it")
        if any(p.exists() and os.path.samefile(p, q) for q in seen):
            raise ConfigError(f"merge: {given!r} is given twice")
        seen.append(p)
    read = [_read_source(g, data_dir) for g in sources]

    incoming: dict[str, tuple[_Source, dict[str, Any], Any]] = {}
    duplicates: dict[str, int] = {}
    conflicts: list[str] = []
    for src in read:
        for data in src.datasets:
            for rec in data["records"]:
                first = incoming.get(rec.key)
                if first is None:
                    incoming[rec.key] = (src, data, rec)
                    continue
                diff = _differences(_results(first[2]), _results(rec))
                if diff:
                    conflicts.append(_conflict(rec, first[0].label, src.label, diff))
                    continue
                copy = src
                if first[0].kind == "file" and src.kind == "store":
                    incoming[rec.key] = (src, data, rec)  # the copy with arrays and histories
                    copy = first[0]
                duplicates[copy.label] = duplicates.get(copy.label, 0) + 1
    present: dict[str, int] = {}
    replaced = 0
    write = list(incoming.values())
    if target.exists():
        with ResultStore(target, readonly=True) as ts:
            have = ts.units(keys=list(incoming))
            mine = {r.key: UnitRecord.from_json(jsonable(r.to_json(), strict=True))
                    for r in unit_records(ts, have)} if len(have) else {}
        kept = []
        for src, data, rec in write:
            old = mine.get(rec.key)
            if old is None:
                kept.append((src, data, rec))
            elif old.status != "ok":
                kept.append((src, data, rec))
                replaced += 1
            else:
                diff = _differences(_results(old), _results(rec))
                if diff:
                    conflicts.append(_conflict(rec, f"the target {str(target)!r}", src.label,
                                               diff))
                else:
                    present[src.label] = present.get(src.label, 0) + 1
        write = kept
    if conflicts:
        more = f" (and {len(conflicts) - 1} more conflicting unit(s))" if len(conflicts) > 1 \
            else ""
        raise ConfigError(f"merge refused, nothing was written: {conflicts[0]}{more}. Keep one "
                          "copy of each unit: leave one of the sources out, or delete the unit "
                          "from one of them.")
    return MergePlan(target=target, sources=read, write=write, duplicates=duplicates,
                     present=present, replaced_failed=replaced)


def _conflict(rec: Any, a: str, b: str, diff: str) -> str:
    return (f"unit {rec.model} {rec.problem} rep {rec.rep} (key {rec.key[:12]}…) has other "
            f"results in {a} than in {b}: {diff}")


def merge_stores(sources: Sequence[str], target: str | os.PathLike,
                 data_dir: str | None = None, dry_run: bool = False,
                 log: Callable[[str], None] = print) -> MergePlan:
    """Merge ``sources`` into the store ``target`` (rules: module docstring); with
    ``dry_run`` check and count only.  Returns the plan that was (or would be) written."""
    from ..store import ResultStore
    from .imported import IMPORTED
    from .importing import record_row

    plan = plan_merge(sources, target, data_dir)
    if dry_run:
        log(f"dry run, nothing written: would merge {plan.text()}")
        return plan
    stores: dict[Path, Any] = {}
    try:
        with ResultStore(plan.target) as ts:
            with ts.transaction():
                for src, data, rec in plan.write:
                    if src.kind == "file":
                        ts.write_unit(*record_row(data, rec, IMPORTED))
                        continue
                    if src.path not in stores:
                        stores[src.path] = ResultStore(src.path, readonly=True)
                    ts.write_unit(*stores[src.path].unit_copy(rec.key))
    finally:
        for st in stores.values():
            st.close()
    log(f"merged {plan.text()}")
    return plan
