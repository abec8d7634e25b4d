"""What produced a result: distribution, version and a fingerprint of the code.

A unit's key (:attr:`mtlbench.runner.UnitSpec.key`) includes the provenance of its model and of
its dataset plugin, so a result is tied to the code that made it: bumping a plugin from 0.2.0 to
0.2.1, or editing its solver without a version bump, gives new keys and ``compare`` recomputes
those units instead of silently reusing the old ones (as benchopt hashes its solver files).

The code fingerprint of a class is the sha256 of the source files of

* the module that defines the class, and
* every module of the same top-level package that it uses, transitively (found from the module
  globals: imported modules, functions and classes), plus the package's private helper modules
  (``_*.py`` next to the class's module, e.g. shared numerics).

Only files of the plugin's own package are hashed (not numpy, not mtlbench's core: the core's
version is recorded in each row's ``versions``).  A class without a source file (defined in an
interactive session) is fingerprinted by its qualified name only and says so (``"code": null``).
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
import types
from pathlib import Path
from typing import Any, Mapping

__all__ = ["code_fingerprint", "class_provenance", "unit_provenance", "model_provenance",
           "dataset_provenance", "provenance_differences", "stale_keys", "stale_note"]


def _module_files(mod: types.ModuleType) -> set[str]:
    """Source files of ``mod`` and of the modules of its top-level package it uses."""
    top = mod.__name__.split(".")[0]
    seen: set[str] = set()
    files: set[str] = set()
    todo = [mod]
    pkg_dir = Path(mod.__file__).parent if getattr(mod, "__file__", None) else None
    if pkg_dir is not None and "." in mod.__name__:
        parent = mod.__name__.rsplit(".", 1)[0]
        for f in sorted(pkg_dir.glob("_*.py")):
            if f.name != "__init__.py":
                name = f"{parent}.{f.stem}"
                if name in sys.modules:
                    todo.append(sys.modules[name])
                else:
                    files.add(str(f))
    while todo:
        m = todo.pop()
        if m.__name__ in seen:
            continue
        seen.add(m.__name__)
        path = getattr(m, "__file__", None)
        if path and path.endswith(".py"):
            files.add(path)
        for value in list(vars(m).values()):
            if isinstance(value, types.ModuleType):
                dep = value
            else:
                name = getattr(value, "__module__", None)
                if not isinstance(name, str) or not (isinstance(value, type)
                                                     or inspect.isfunction(value)):
                    continue
                dep = sys.modules.get(name)
            if dep is not None and dep.__name__.split(".")[0] == top \
                    and dep.__name__ not in seen:
                todo.append(dep)
    return files


def _stamp(f: str) -> tuple[str, int, int]:
    try:
        st = Path(f).stat()
        return (f, st.st_mtime_ns, st.st_size)
    except OSError:
        return (f, 0, 0)


@functools.lru_cache(maxsize=256)
def _hash_files(stamps: tuple[tuple[str, int, int], ...], root: str) -> str:
    """Hash of the files' contents (cached per path, modification time and size)."""
    h = hashlib.sha256()
    for f, _, _ in stamps:
        try:
            data = Path(f).read_bytes()
        except OSError:
            data = b"<unreadable>"
        rel = Path(f).relative_to(root).as_posix() if f.startswith(root) else Path(f).name
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]


def code_fingerprint(cls: type) -> str | None:
    """sha256 (16 hex digits) of the source files that define ``cls`` (see the module
    docstring), or None when ``cls`` has no source file."""
    mod = sys.modules.get(cls.__module__)
    if mod is None or not getattr(mod, "__file__", None):
        return None
    files = _module_files(mod)
    top = sys.modules.get(mod.__name__.split(".")[0])
    root = str(Path(top.__file__).parent.parent) if top is not None and \
        getattr(top, "__file__", None) else str(Path(mod.__file__).parent)
    return _hash_files(tuple(_stamp(f) for f in sorted(files)), root)


def class_provenance(cls: type, distribution: str, version: str) -> dict[str, Any]:
    return {"distribution": distribution, "version": version,
            "class": f"{cls.__module__}.{cls.__qualname__}", "code": code_fingerprint(cls)}


def model_provenance(registry: Any, name: str) -> dict[str, Any]:
    info = registry.model_plugin(name)
    return class_provenance(registry.model_class(name), info.distribution, info.version)


def dataset_provenance(registry: Any, name: str) -> dict[str, Any]:
    info = registry.dataset_plugin(name)
    return class_provenance(type(registry.dataset(name)), info.distribution, info.version)


def unit_provenance(registry: Any, model: str, dataset: str) -> dict[str, Any]:
    """What produced a unit of ``model`` on ``dataset`` (stored with the unit, part of its key)."""
    return {"model": model_provenance(registry, model),
            "dataset": dataset_provenance(registry, dataset)}


def provenance_differences(stored: Mapping[str, Any] | str | None,
                           current: Mapping[str, Any]) -> list[str]:
    """Short sentences naming how a stored unit's provenance differs from the current code
    (empty when it is the same); a row without provenance is reported as such."""
    if isinstance(stored, str):
        stored = json.loads(stored)
    if not stored:
        return ["stored without a code fingerprint (an older mtlbench)"]
    out = []
    for part in ("model", "dataset"):
        old, new = stored.get(part) or {}, current.get(part) or {}
        if old.get("version") != new.get("version") or \
                old.get("distribution") != new.get("distribution"):
            out.append(f"{part} plugin {old.get('distribution')} {old.get('version')} -> "
                       f"{new.get('distribution')} {new.get('version')}")
        elif old.get("code") != new.get("code"):
            out.append(f"{part} code changed ({new.get('class')})")
    return out


def stale_keys(store: Any, registry: Any, keys: Any = None) -> dict[str, list[str]]:
    """Units of ``store`` (all, or ``keys``) made by other code than what is installed now:
    ``{key: [reason, ...]}`` (a model or dataset no longer installed, another plugin version,
    changed code, or no fingerprint because an older mtlbench stored it)."""
    df = store.units(keys=keys)
    out: dict[str, list[str]] = {}
    current: dict[tuple[str, str], Any] = {}
    for key, config, dataset, prov in zip(df["key"], df["model_config"], df["dataset"],
                                          df["provenance"]):
        name = (config or {}).get("name") if isinstance(config, dict) else None
        pk = (str(name), str(dataset))
        if pk not in current:
            try:
                current[pk] = unit_provenance(registry, *pk)
            except Exception:  # noqa: BLE001 - uninstalled model or dataset
                current[pk] = None
        if current[pk] is None:
            out[key] = [f"model {name!r} or dataset {dataset!r} is not installed now"]
            continue
        diff = provenance_differences(prov, current[pk])
        if diff:
            out[key] = diff
    return out


def stale_note(store: Any, registry: Any, keys: Any = None) -> str:
    """One paragraph for ``mtlbench results``: how many stored units are of older code and
    why (empty when none)."""
    stale = stale_keys(store, registry, keys)
    if not stale:
        return ""
    reasons: dict[str, int] = {}
    for why in stale.values():
        for r in why:
            reasons[r] = reasons.get(r, 0) + 1
    top = "; ".join(f"{r} ({n})" for r, n in sorted(reasons.items(), key=lambda x: -x[1])[:4])
    return (f"{len(stale)} stored unit(s) were made by other code than is installed now: "
            f"{top}. 'mtlbench compare' recomputes them (their keys differ); "
            "'compare --rerun MODEL' forces recomputation.")
