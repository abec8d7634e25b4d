"""Checks of a dataset plugin against the dataset contract (see :mod:`mtlbench.testing`).

Data that is not available locally raises :class:`~mtlbench.testing.DataNotAvailable`; the kit
never downloads.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from mtlbench.data import TaskSet
from mtlbench.dataset import Dataset, call_problems
from mtlbench.protocol import evaluable_tasks, task_rule

from ._common import (AVAILABILITY_VALUES, LOADABLE, _NAME_RE, ConformanceError,
                      DataNotAvailable, _fail)

__all__ = ["DATASET_CHECKS", "check_dataset", "check_dataset_metadata",
           "check_dataset_problems", "check_dataset_params", "check_dataset_availability",
           "check_dataset_load", "check_dataset_deterministic"]


def _dataset(obj: Any):
    if isinstance(obj, type) and issubclass(obj, Dataset):
        obj = obj()
    if not isinstance(obj, Dataset):
        raise ConformanceError(f"{obj!r}: must be a mtlbench.Dataset subclass or instance")
    return obj


def _dwho(ds: Any) -> str:
    return f"dataset {getattr(ds, 'name', '?')} ({type(ds).__module__}.{type(ds).__qualname__})"


def check_dataset_metadata(dataset: Any) -> None:
    """``name`` is a registry name; ``description``, ``source``, ``layout_help()`` are strings."""
    ds = _dataset(dataset)
    who, check = _dwho(ds), "metadata"
    if not isinstance(ds.name, str) or not _NAME_RE.match(ds.name):
        raise _fail(who, check, f"'name' must be a lower-case registry name, got {ds.name!r}")
    for attr in ("description", "source"):
        if not isinstance(getattr(ds, attr, None), str):
            raise _fail(who, check, f"'{attr}' must be a string")
    if not isinstance(ds.layout_help(), str):
        raise _fail(who, check, "layout_help() must return a string")


def check_dataset_problems(dataset: Any, data_dir: Any = None) -> list[str]:
    """``problems()`` is a non-empty list of distinct, non-empty names without '/'.

    A dataset that discovers its problems from its files may list none while the files are
    missing: then :class:`DataNotAvailable` is raised (a skip), not a failure."""
    ds = _dataset(dataset)
    who, check = _dwho(ds), "problems"
    probs = call_problems(ds, data_dir)
    if not isinstance(probs, (list, tuple)):
        raise _fail(who, check, f"problems() must return a list, got {probs!r}")
    if not probs:
        avail = check_dataset_availability(ds, data_dir)
        if avail not in LOADABLE:
            raise DataNotAvailable(f"{ds.name}: problems() lists no problems while its data "
                                   f"is not available ({avail})")
        raise _fail(who, check, f"problems() is empty although availability() is {avail!r}")
    for p in probs:
        if not isinstance(p, str) or not p or "/" in p:
            raise _fail(who, check, f"problem names must be non-empty strings without '/', "
                                    f"got {p!r}")
    if len(set(probs)) != len(probs):
        raise _fail(who, check, f"problems() has duplicates: {probs!r}")
    return list(probs)


def check_dataset_params(dataset: Any) -> dict:
    """``params()`` is a dict that JSON-serialises (it is part of every result's identity)."""
    ds = _dataset(dataset)
    who, check = _dwho(ds), "params"
    p = ds.params()
    if not isinstance(p, Mapping):
        raise _fail(who, check, f"params() must return a dict, got {type(p).__name__}")
    try:
        a = json.dumps(p, sort_keys=True)
        b = json.dumps(ds.params(), sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise _fail(who, check, f"params() must be JSON-able: {exc}") from exc
    if a != b:
        raise _fail(who, check, "params() changes between calls")
    return dict(p)


def check_dataset_availability(dataset: Any, data_dir: Any = None, cache_dir: Any = None) -> str:
    """``availability()`` answers one of :data:`AVAILABILITY_VALUES`, without network."""
    ds = _dataset(dataset)
    kw = {"data_dir": Path(data_dir) if data_dir else None,
          "cache_dir": Path(cache_dir) if cache_dir else None}
    a = ds.availability(**kw)
    if a not in AVAILABILITY_VALUES:
        raise _fail(_dwho(ds), "availability", f"availability() returned {a!r}; expected one of "
                                               f"{AVAILABILITY_VALUES}")
    return a


def _require_data(ds: Any, data_dir: Any, cache_dir: Any) -> None:
    a = check_dataset_availability(ds, data_dir, cache_dir)
    if a not in LOADABLE:
        where = f"data dir {str(data_dir)!r}" if data_dir else "no data dir (--mtlbench-data-dir)"
        raise DataNotAvailable(f"{ds.name}: data {a} ({where}); the kit never downloads")


def check_dataset_load(dataset: Any, problem: str | None = None, data_dir: Any = None,
                       cache_dir: Any = None):
    """``load(problem)`` returns a valid TaskSet the protocol can use.  Raises
    :class:`DataNotAvailable` when the data is not available locally."""
    ds = _dataset(dataset)
    who, check = _dwho(ds), "load"
    _require_data(ds, data_dir, cache_dir)
    problem = problem or check_dataset_problems(ds, data_dir)[0]
    ts = ds.load(problem, data_dir=Path(data_dir) if data_dir else None,
                 cache_dir=Path(cache_dir) if cache_dir else None)
    if not isinstance(ts, TaskSet):
        raise _fail(who, check, f"load({problem!r}) returned {type(ts).__name__}, not a TaskSet")
    try:
        ts._validate()  # a TaskSet built with _validated=True is checked here once more
    except Exception as exc:
        raise _fail(who, check, f"load({problem!r}) returned an invalid TaskSet: {exc}") from exc
    keep, _ = evaluable_tasks(ts)
    if not keep:
        raise _fail(who, check, f"load({problem!r}): no task has "
                                f"{task_rule(ts.target_kind)}, so the protocol cannot split any "
                                "task")
    if len(ts.task_names) != ts.T or len(set(ts.task_names)) != ts.T:
        raise _fail(who, check, "task_names must be T distinct names")
    meta = ts.meta
    for key, shape in (("true_W", (ts.d, ts.T)), ("feature_groups", (ts.d,)),
                       ("task_groups", (ts.T,))):
        if key in meta and np.shape(meta[key]) != shape:
            raise _fail(who, check, f"meta[{key!r}] has shape {np.shape(meta[key])}, "
                                    f"expected {shape}")
    return ts


def check_dataset_deterministic(dataset: Any, problem: str | None = None, data_dir: Any = None,
                                cache_dir: Any = None, first: Any = None) -> None:
    """Two loads of a problem hold identical data (same ``fingerprint()``)."""
    ds = _dataset(dataset)
    a = first if first is not None else check_dataset_load(ds, problem, data_dir, cache_dir)
    b = check_dataset_load(ds, problem, data_dir, cache_dir)
    if a.fingerprint() != b.fingerprint():
        raise _fail(_dwho(ds), "deterministic", f"two loads of {problem!r} differ; seed every "
                                                "random choice from params()")


DATASET_CHECKS: dict[str, Callable[..., Any]] = {
    "metadata": check_dataset_metadata,
    "problems": check_dataset_problems,
    "params": check_dataset_params,
    "availability": check_dataset_availability,
    "load": check_dataset_load,
    "deterministic": check_dataset_deterministic,
}


def check_dataset(dataset: Any, data_dir: Any = None, problems: Iterable[str] | None = None,
                  cache_dir: Any = None) -> dict[str, Any]:
    """Run every dataset check; loading checks run on ``problems`` (default: all) when the
    data is available locally, else they are reported as ``"skipped: <reason>"``."""
    ds = _dataset(dataset)
    out: dict[str, Any] = {}
    check_dataset_metadata(ds)
    out["params"] = check_dataset_params(ds)
    out["availability"] = check_dataset_availability(ds, data_dir, cache_dir)
    try:
        out["problems"] = check_dataset_problems(ds, data_dir)
    except DataNotAvailable as exc:
        out["problems"] = f"skipped: {exc}"
        return out
    for p in (list(problems) if problems is not None else out["problems"]):
        try:
            ts = check_dataset_load(ds, p, data_dir, cache_dir)
            check_dataset_deterministic(ds, p, data_dir, cache_dir, first=ts)
            out[f"load:{p}"] = repr(ts)
        except DataNotAvailable as exc:
            out[f"load:{p}"] = f"skipped: {exc}"
    return out
