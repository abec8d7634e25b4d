"""What produced a result: distribution, version and a fingerprint of the code.

A unit's key (:attr:`mtlbench.runner.UnitSpec.key`) includes the provenance of its model and of
its dataset plugin, so a result is tied to the code that made it: bumping a plugin from 0.2.0 to
0.2.1, or editing its solver without a version bump, gives new keys and ``compare`` recomputes
those units instead of silently reusing the old ones (as benchopt hashes its solver files).

The code fingerprint of a class is the sha256 of the parsed code of the source files of

* the module that defines the class, and
* every module of the plugin's distribution that it can import, transitively: found from the
  ``import`` statements of each module's code (those inside functions too) and from the
  module's globals (imported modules, functions and classes), plus the private helper modules
  (``_*.py``) next to the class's module (e.g. shared numerics).

Each file counts by its path below the folder of its top-level package and by its syntax tree
(``ast.parse``) without what does nothing when the code runs: comments (not in the tree),
docstrings and any other string standing alone as a statement, line and column numbers and
layout.  So rewording a docstring or a comment, or reformatting, leaves the stored units of a
model current, while any change to the code (a constant, an operator, a default, a name, an
added import) gives new keys.  Code that reads its own docstrings (``__doc__``) is the
exception this rule does not see.  A file that does not parse counts by its bytes, with a
warning saying so.  Each file is read once per version (path, modification time, size) and
parsed once per content: the result is kept beside the file's bytecode in ``__pycache__``
(not when Python writes no bytecode, ``PYTHONDONTWRITEBYTECODE``).

The previous rule hashed the same files' bytes (:func:`text_fingerprint`).  Units stored and
published under it are recognised when they were made by the code installed now
(:func:`previous_rule_provenances`) and moved to their keys under this rule
(:mod:`mtlbench.rekey`).

The plugin's distribution is the one that registered the class (its name is given by the
registry): its modules are those of its top-level packages and modules (``top_level.txt``, else
the files its ``RECORD`` lists) and, for an editable install that names its source folder in a
``.pth`` file, every module under that folder; a helper module beside the model's own package
(``mymodel/`` and ``myhelpers.py`` in one distribution) is therefore part of the model.  Without
a known distribution only the class's own top-level package counts.  mtlbench's core is never
hashed (its version is recorded in each row's ``versions``), nor are numpy or other
distributions.  A class without a source file (defined in an interactive session) is
fingerprinted by its qualified name only and says so (``"code": null``).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["code_fingerprint", "text_fingerprint", "previous_fingerprints", "source_files",
           "class_provenance", "unit_provenance", "previous_rule_provenances",
           "model_provenance", "dataset_provenance", "provenance_differences", "stale_keys",
           "other_code_units", "stale_note"]

#: The core's package: never part of a plugin's fingerprint (its version is recorded instead).
CORE_PACKAGE = "mtlbench"


@dataclass(frozen=True)
class _Scope:
    """Which modules belong to a plugin: its top-level names, and its source folders (an
    editable install's)."""

    tops: frozenset[str]
    roots: tuple[str, ...] = ()

    def owns(self, name: str) -> bool:
        top = name.split(".")[0]
        if top == CORE_PACKAGE and CORE_PACKAGE not in self.tops:
            return False
        if top in self.tops:
            return True
        if not self.roots:
            return False
        path = _module_file(top)
        if path is None:
            return False
        path = str(Path(path).resolve())
        return any(path.startswith(root + os.sep) for root in self.roots)


@functools.lru_cache(maxsize=64)
def _distribution_scope(distribution: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """Top-level module names and editable source folders of an installed distribution
    (empty when it is unknown or lists neither)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(distribution)
    except (metadata.PackageNotFoundError, ValueError):
        return frozenset(), ()
    tops = {line.strip() for line in (dist.read_text("top_level.txt") or "").splitlines()
            if line.strip()}
    roots = []
    for f in dist.files or []:
        parts = Path(str(f)).parts
        if not parts or parts[0] == ".." or parts[0].endswith((".dist-info", ".data")) \
                or parts[0] == "__pycache__" or parts[0].startswith("__editable__"):
            continue
        if parts[0].endswith(".pth"):
            try:
                text = Path(str(dist.locate_file(f))).read_text(encoding="utf-8")
            except OSError:
                continue
            roots += [str(Path(line.strip()).resolve()) for line in text.splitlines()
                      if line.strip() and not line.startswith(("import ", "#"))
                      and Path(line.strip()).is_dir()]
        elif not tops and (len(parts) > 1 or parts[0].endswith(".py")):
            tops.add(parts[0][:-3] if len(parts) == 1 else parts[0])
    return frozenset(tops - {CORE_PACKAGE}), tuple(sorted(set(roots)))


def _scope(mod: types.ModuleType, distribution: str | None) -> _Scope:
    own = mod.__name__.split(".")[0]
    tops, roots = _distribution_scope(distribution) if distribution else (frozenset(), ())
    return _Scope(frozenset(tops | {own}), roots)


def _module_file(name: str) -> str | None:
    """The source file of module ``name`` (imported or not), None if it has none."""
    mod = sys.modules.get(name)
    if mod is not None:
        path = getattr(mod, "__file__", None)
        return path if path and path.endswith(".py") else None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    return origin if origin and origin.endswith(".py") else None


def _source_imports(name: str, path: str) -> frozenset[str]:
    """Modules that the source of module ``name`` (file ``path``) imports, anywhere in it
    (relative imports resolved; ``from a import b`` gives ``a.b`` and ``a``)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found: set[str] = set()
    for level, module, names in _read_source(*_stamp(path)).imports:
        if level is None:  # import a.b as c, d
            found.update(names)
            continue
        base = module
        if level:
            up = package.split(".")[: max(len(package.split(".")) - level + 1, 0)]
            base = ".".join(p for p in [*up, module] if p)
        if base:
            found.add(base)
            found.update(f"{base}.{n}" for n in names if n != "*")
    return frozenset(found)


@dataclass(frozen=True)
class _Source:
    """What the fingerprints read from one version of a source file."""

    code: bytes      # sha256 of its parsed code without docstrings (of its bytes if unparsed)
    text: bytes      # sha256 of its bytes: the previous rule
    #: its import statements: (None, "", names) for ``import names``, (level, module, names)
    #: for ``from <level dots><module> import names``
    imports: tuple[tuple[int | None, str, tuple[str, ...]], ...]


#: The version of the parsed-code digest (:func:`_canonical`): part of the digest and of the
#: name of its cache files.  Any change to what ``_canonical`` writes changes every
#: fingerprint: raise it then, and recognise the fingerprints of the rule before.
CODE_RULE = 1


@functools.lru_cache(maxsize=1024)
def _read_source(path: str, mtime_ns: int, size: int) -> _Source:
    """One file's digests and imports, read once per file version (path, modification time,
    size) and parsed once per content: the parsed result is kept beside Python's bytecode
    cache of the file (:func:`_parsed_cache`).  A file that does not parse is hashed by its
    bytes (and imports nothing), with a warning saying so; one that cannot be read, by a
    placeholder."""
    try:
        data = Path(path).read_bytes()
    except OSError:  # counted as such (a file that reappears changes the fingerprint)
        unreadable = hashlib.sha256(b"<unreadable>").digest()
        return _Source(unreadable, unreadable, ())
    text = hashlib.sha256(data).digest()
    cache = _parsed_cache(path)
    kept = _read_parsed(cache, text) if cache else None
    if kept is not None:
        return _Source(kept[0], text, kept[1])
    try:
        tree = ast.parse(data, filename=path)
        canonical, imports = _canonical(tree)
    except (SyntaxError, ValueError, RecursionError) as exc:
        warnings.warn(f"{path} does not parse here ({type(exc).__name__}: {exc}); its part of "
                      "the code fingerprint is the hash of its bytes, so any edit of it, "
                      "comments and docstrings included, changes the fingerprint",
                      stacklevel=2)
        return _Source(hashlib.sha256(b"bytes\0" + data).digest(), text, ())
    code = hashlib.sha256(f"ast {CODE_RULE}\0{canonical}".encode()).digest()
    if cache:
        _write_parsed(cache, text, code, imports)
    return _Source(code, text, imports)


def _parsed_cache(path: str) -> str | None:
    """Where the parsed digest and imports of source file ``path`` are kept: beside its
    bytecode in ``__pycache__`` (or under ``sys.pycache_prefix``), named for this rule and
    this interpreter (a syntax tree is the interpreter's).  Parsing every file of the built-in
    plugins takes a large part of a second; reading the kept results, milliseconds."""
    try:
        pyc = importlib.util.cache_from_source(path)
    except (NotImplementedError, ValueError):
        return None
    return f"{pyc[:-len('.pyc')]}.code-{CODE_RULE}.json"


def _read_parsed(cache: str, text: bytes) -> tuple[bytes, tuple] | None:
    """(code digest, imports) kept for a file whose bytes hash to ``text``, else None."""
    try:
        kept = json.loads(Path(cache).read_text(encoding="utf-8"))
        if kept["sha256"] != text.hex():
            return None
        return bytes.fromhex(kept["code"]), tuple(
            (level, module, tuple(names)) for level, module, names in kept["imports"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_parsed(cache: str, text: bytes, code: bytes, imports: tuple) -> None:
    """Keep a file's parsed results (atomically; nothing when the folder is not writable or
    Python writes no bytecode, ``sys.dont_write_bytecode``)."""
    if sys.dont_write_bytecode:
        return
    target = Path(cache)
    tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"sha256": text.hex(), "code": code.hex(),
                                   "imports": [list(i) for i in imports]}), encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _is_bare_string(node: Any) -> bool:
    """A string standing alone as a statement: a docstring, or any other string that does
    nothing when the code runs."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
        and isinstance(node.value.value, str)


def _canonical(tree: ast.AST) -> tuple[str, tuple]:
    """The text the code digest hashes, and the import statements of ``tree``.

    The text names each node's type and fields (not its position: line and column numbers
    are attributes, not fields), without the strings that stand alone as statements (module,
    class and function docstrings, and any other), and without the fields that are None or
    empty (so that a field a later Python adds with an empty default, such as
    ``type_params``, leaves it as it was) and the ``u`` prefix of a string (``Constant.kind``).
    Comments are not in the tree."""
    out: list[str] = []
    imports: list[tuple[int | None, str, tuple[str, ...]]] = []

    def visit(node: Any) -> None:
        if isinstance(node, ast.AST):
            if isinstance(node, ast.Import):
                imports.append((None, "", tuple(a.name for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                imports.append((node.level, node.module or "",
                                tuple(a.name for a in node.names)))
            out.append(type(node).__name__ + "(")
            for name in node._fields:
                value = getattr(node, name, None)
                if value is None or (isinstance(value, list) and not value) or \
                        (name == "kind" and isinstance(node, ast.Constant)):
                    continue
                out.append(name + "=")
                visit(value)
                out.append(",")
            out.append(")")
        elif isinstance(node, list):
            out.append("[")
            for item in node:
                if not _is_bare_string(item):
                    visit(item)
                    out.append(",")
            out.append("]")
        else:
            out.append(repr(node))

    visit(tree)
    return "".join(out), tuple(imports)


def _global_imports(mod: types.ModuleType) -> set[str]:
    """Modules that ``mod``'s globals come from (imported modules, functions, classes)."""
    out = set()
    for value in list(vars(mod).values()):
        if isinstance(value, types.ModuleType):
            out.add(value.__name__)
        elif isinstance(value, type) or inspect.isfunction(value):
            name = getattr(value, "__module__", None)
            if isinstance(name, str):
                out.add(name)
    return out


def _module_files(mod: types.ModuleType, scope: _Scope | None = None) -> set[str]:
    """Source files of ``mod`` and of the modules of its plugin (``scope``) it can import."""
    scope = scope or _scope(mod, None)
    files: set[str] = set()
    todo = [mod.__name__]
    pkg_dir = Path(mod.__file__).parent if getattr(mod, "__file__", None) else None
    if pkg_dir is not None and "." in mod.__name__:
        parent = mod.__name__.rsplit(".", 1)[0]
        todo += [f"{parent}.{f.stem}" for f in sorted(pkg_dir.glob("_*.py"))
                 if f.name != "__init__.py"]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if not scope.owns(name):
            continue
        path = _module_file(name)
        if path is None:
            continue
        files.add(path)
        deps = set(_source_imports(name, path))
        if name in sys.modules:
            deps |= _global_imports(sys.modules[name])
        todo += sorted(deps - seen)
    return files


def _stamp(f: str) -> tuple[str, int, int]:
    try:
        st = Path(f).stat()
        return (f, st.st_mtime_ns, st.st_size)
    except OSError:
        return (f, 0, 0)


@functools.lru_cache(maxsize=256)
def _hash_files(stamps: tuple[tuple[str, int, int], ...], root: str, rule: str) -> str:
    """Hash of the files' digests under ``rule`` ("code": this rule, "text": the previous
    one), each beside its path relative to ``root`` (cached per path, modification time and
    size)."""
    h = hashlib.sha256()
    for stamp in stamps:
        source = _read_source(*stamp)
        f = stamp[0]
        rel = Path(f).relative_to(root).as_posix() if f.startswith(root) else Path(f).name
        h.update(rel.encode() + b"\0" + (source.code if rule == "code" else source.text))
    return h.hexdigest()[:16]


def source_files(cls: type, distribution: str | None = None) -> list[str]:
    """The source files :func:`code_fingerprint` hashes for ``cls`` (sorted; empty when the
    class has no source file): its module and the modules of its plugin's ``distribution``
    it can import (see the module docstring)."""
    mod = sys.modules.get(cls.__module__)
    if mod is None or not getattr(mod, "__file__", None):
        return []
    return sorted(_module_files(mod, _scope(mod, distribution)))


def _fingerprint(cls: type, distribution: str | None, rule: str) -> str | None:
    files = source_files(cls, distribution)
    if not files:
        return None
    mod = sys.modules[cls.__module__]
    top = sys.modules.get(mod.__name__.split(".")[0])
    root = str(Path(top.__file__).parent.parent) if top is not None and \
        getattr(top, "__file__", None) else str(Path(mod.__file__).parent)
    return _hash_files(tuple(_stamp(f) for f in files), root, rule)


def code_fingerprint(cls: type, distribution: str | None = None) -> str | None:
    """sha256 (16 hex digits) of the parsed code, without docstrings and comments, of the
    source files that define ``cls`` (see the module docstring), or None when ``cls`` has no
    source file.  ``distribution``: the name of the distribution that registered ``cls``
    (its other modules count too)."""
    return _fingerprint(cls, distribution, "code")


def text_fingerprint(cls: type, distribution: str | None = None) -> str | None:
    """The fingerprint of the previous rule (mtlbench 0.2.0): the same files as
    :func:`code_fingerprint`'s hashed as text, so that any edit of them changed it."""
    return _fingerprint(cls, distribution, "text")


def previous_fingerprints(cls: type, distribution: str | None = None) -> frozenset[str | None]:
    """The fingerprints the previous rule gives the code of ``cls`` installed now: its
    :func:`text_fingerprint` and, for a built-in class whose code is, docstrings and comments
    aside, the code its units were published with, the published fingerprint
    (:data:`mtlbench._published_fingerprints.PUBLISHED`)."""
    from ._published_fingerprints import PUBLISHED

    out = {text_fingerprint(cls, distribution)}
    published = PUBLISHED.get(f"{cls.__module__}.{cls.__qualname__}")
    if published is not None and published[1] == code_fingerprint(cls, distribution):
        out.add(published[0])
    return frozenset(out)


def class_provenance(cls: type, distribution: str, version: str) -> dict[str, Any]:
    return {"distribution": distribution, "version": version,
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "code": code_fingerprint(cls, distribution)}


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


def previous_rule_provenances(registry: Any, model: str, dataset: str) -> list[dict[str, Any]]:
    """The provenances other than :func:`unit_provenance` that the previous fingerprint rule
    gives a unit of ``model`` on ``dataset`` made by the code installed now (its model and
    dataset fingerprints each one of :func:`previous_fingerprints`).  A stored unit with one
    of them was made by this code: it is current (:mod:`mtlbench.rekey` moves it to its key
    under this rule)."""
    current = unit_provenance(registry, model, dataset)
    codes = {"model": previous_fingerprints(registry.model_class(model),
                                            registry.model_plugin(model).distribution),
             "dataset": previous_fingerprints(type(registry.dataset(dataset)),
                                              registry.dataset_plugin(dataset).distribution)}
    out = []
    for m in sorted(codes["model"], key=str):
        for d in sorted(codes["dataset"], key=str):
            prov = {"model": {**current["model"], "code": m},
                    "dataset": {**current["dataset"], "code": d}}
            if prov != current:
                out.append(prov)
    return out


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
    return other_code_units(store.units(keys=keys), registry)


def other_code_units(units: Any, registry: Any, judge_unknown: bool = True) -> dict[str, list[str]]:
    """The rows of a unit table (``ResultStore.units``) made by other code than what is
    installed now: ``{key: [reason, ...]}``.  A unit stored with a provenance of the previous
    fingerprint rule that names the code installed now (:func:`previous_rule_provenances`)
    is not.  With ``judge_unknown`` False, units stored without a fingerprint and units of a
    model or dataset not installed here are not judged (left out) instead of reported."""
    out: dict[str, list[str]] = {}
    current: dict[tuple[str, str], Any] = {}
    previous: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for key, config, dataset, prov in zip(units["key"], units["model_config"], units["dataset"],
                                          units["provenance"]):
        name = (config or {}).get("name") if isinstance(config, dict) else None
        if not judge_unknown and (not prov or not name):
            continue
        pk = (str(name), str(dataset))
        if pk not in current:
            try:
                current[pk] = unit_provenance(registry, *pk)
            except Exception:  # noqa: BLE001 - uninstalled model or dataset
                current[pk] = None
        if current[pk] is None:
            if judge_unknown:
                out[key] = [f"model {name!r} or dataset {dataset!r} is not installed now"]
            continue
        diff = provenance_differences(prov, current[pk])
        if diff and prov:
            if pk not in previous:
                previous[pk] = previous_rule_provenances(registry, *pk)
            if (json.loads(prov) if isinstance(prov, str) else prov) in previous[pk]:
                diff = []
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
