"""Plugin discovery and the registry of models, datasets and searchers.

Plugins are found through entry points in the group ``mtlbench`` (built-ins included) and
managed by pluggy: every hook of :mod:`mtlbench.hookspecs` is called through the plugin
manager (``Registry.pm``), on one plugin at a time, with a ``register`` callback of that
plugin's own.  Loading is resilient: a plugin that fails to import or to register is
recorded as a :class:`PluginFailure` (shown by ``mtlbench plugins`` and as a warning) and the
others keep working.  Set ``MTLBENCH_STRICT_PLUGINS=1`` to turn any failure into an error.

Two plugins registering the same name: only that name becomes unusable (using it raises
:class:`~mtlbench.errors.PluginConflictError` naming both distributions; ``mtlbench plugins``
lists the clash); every other name keeps working.  A model whose ``search_space`` or
``param_constraints`` is malformed (a parameter ``__init__`` does not take, a declaration that
is not a Param or a list, a starting value outside its own bounds, an ordered parameter
without a start range of two distinct values, a bound expression naming something unknown)
is recorded like a plugin failure (stage ``validate``) and is unusable; the rest of its
plugin is not affected.  A search space written as plain lists (the first release's form) is
accepted and searched under the same rule and budget as declared ranges
(:func:`mtlbench.space.list_to_param`), with a :class:`PluginMigrationWarning` naming the
model and the declaration to write instead.
"""
from __future__ import annotations

import difflib
import inspect
import os
import traceback
import warnings
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Mapping

import pluggy

from . import hookspecs
from .dataset import Dataset, configure_dataset
from .errors import (ConfigError, PluginConflictError, PluginError, UnknownNameError,
                     unknown_name_message)
from .model import MTLModel
from .searcher import Searcher
from .space import as_param, list_to_param, space_problems
from .syntax import parse_selector

ENTRY_POINT_GROUP = "mtlbench"
STRICT_ENV = "MTLBENCH_STRICT_PLUGINS"


@dataclass
class PluginInfo:
    """One discovered plugin (an entry point) and what it registered."""

    name: str
    distribution: str
    version: str
    module: str
    models: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    searchers: list[str] = field(default_factory=list)


@dataclass
class PluginFailure:
    """A plugin that could not be imported or failed while registering."""

    name: str
    distribution: str
    version: str
    stage: str  # "import" | "register_*" | "validate" | "name clash"
    error: str
    traceback: str = ""


@dataclass
class Registered:
    obj: Any
    plugin: PluginInfo


class PluginWarning(UserWarning):
    """A plugin failed to load; the others keep working."""


class PluginMigrationWarning(UserWarning):
    """A plugin works but uses a form its author should migrate (e.g. a plain-list search
    space); the message says what to write instead."""


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _dist_of(ep: EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "<unknown>", ""
    return dist.metadata["Name"] or "<unknown>", dist.version or ""


_HOOK_NAMES = frozenset(n for n in dir(hookspecs) if n.startswith("register_"))


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, also taking a hook function a plugin forgot to mark with
    ``@hookimpl`` (``def register_models(register): ...``): the first release called hooks by
    name, and such plugins keep working."""

    def parse_hookimpl_opts(self, plugin: Any, name: str):
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name in _HOOK_NAMES and inspect.isroutine(getattr(plugin, name)):
            return {}
        return opts


class Registry:
    """Models and datasets registered by plugins, by name.

    Hooks are called through pluggy (``Registry.pm``), one plugin at a time."""

    def __init__(self) -> None:
        self.pm = _PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: list[PluginInfo] = []
        self.failures: list[PluginFailure] = []
        self._models: dict[str, Registered] = {}
        self._datasets: dict[str, Registered] = {}
        self._searchers: dict[str, Registered] = {}
        # names made unusable: (kind, name) -> the message to raise when the name is used
        self._unusable: dict[tuple[str, str], Exception] = {}
        self._clash_owners: dict[tuple[str, str], list[PluginInfo]] = {}
        self._configured: dict[str, Dataset] = {}  # "NAME[param=value]" -> configured dataset

    # ------------------------------------------------------------------ loading
    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> "Registry":
        eps = sorted(entry_points(group=group), key=lambda e: (e.name, e.value))
        seen: set[tuple[str, str]] = set()
        for ep in eps:
            if (ep.name, ep.value) in seen:  # the same distribution seen twice on sys.path
                continue
            seen.add((ep.name, ep.value))
            dist, version = _dist_of(ep)
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure is reported, not fatal
                self._fail(PluginFailure(ep.name, dist, version, "import",
                                         f"{type(exc).__name__}: {exc}", traceback.format_exc()))
                continue
            self.add_plugin(plugin, name=ep.name, distribution=dist, version=version)
        return self

    def add_plugin(self, plugin: Any, *, name: str, distribution: str = "<local>",
                   version: str = "") -> PluginInfo:
        """Register one plugin object (module or instance) and run its hooks."""
        info = PluginInfo(name=name, distribution=distribution, version=version,
                          module=getattr(plugin, "__name__", type(plugin).__name__))
        try:
            self.pm.register(plugin, name=f"{distribution}:{name}")
        except Exception as exc:  # noqa: BLE001 - e.g. a hookimpl with a wrong signature
            self._fail(PluginFailure(name, distribution, version, "register",
                                     f"{type(exc).__name__}: {exc}", traceback.format_exc()))
            return info
        self.plugins.append(info)
        for hook_name, kind in (("register_models", "model"), ("register_datasets", "dataset"),
                                ("register_searchers", "searcher")):
            try:
                self._call_one(plugin, hook_name, register=self._register_callback(kind, info))
            except PluginError:
                raise
            except Exception as exc:  # noqa: BLE001
                self._fail(PluginFailure(name, distribution, version, hook_name,
                                         f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        return info

    def _call_one(self, plugin: Any, hook_name: str, **kwargs: Any) -> None:
        """Call hook ``hook_name`` through pluggy on ``plugin`` alone: each plugin gets its own
        ``register`` callback (so a registration is attributed to the plugin that made it) and
        a plugin that raises does not take the others' registrations down."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        self.pm.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)

    def _table(self, kind: str) -> dict[str, Registered]:
        return {"model": self._models, "dataset": self._datasets,
                "searcher": self._searchers}[kind]

    def _register_callback(self, kind: str, info: PluginInfo) -> Callable[[Any], None]:
        table = self._table(kind)

        def register(obj: Any) -> None:
            if kind == "model":
                if not (isinstance(obj, type) and issubclass(obj, MTLModel)):
                    raise TypeError(f"register() expects an MTLModel subclass, got {obj!r}")
            elif kind == "searcher":
                if not (isinstance(obj, type) and issubclass(obj, Searcher)):
                    raise TypeError(f"register() expects a Searcher subclass, got {obj!r}")
            else:
                if isinstance(obj, type) and issubclass(obj, Dataset):
                    obj = obj()
                if not isinstance(obj, Dataset):
                    raise TypeError(f"register() expects a Dataset subclass or instance, got {obj!r}")
            key = getattr(obj, "name", "")
            if not key or not isinstance(key, str):
                raise TypeError(f"{obj!r} has no 'name' attribute")
            if (kind, key) in self._clash_owners:  # a third plugin with the same name
                self._clash(kind, key, info)
                return
            if key in table:
                self._clash(kind, key, info)
                return
            if kind == "model":
                problems = model_declaration_problems(obj)
                if problems:
                    msg = (f"model {key!r} declares an invalid search space or parameter "
                           f"constraints: {'; '.join(problems)}")
                    self._unusable[(kind, key)] = PluginError(
                        f"{msg} (plugin {info.name!r}, distribution {info.distribution} "
                        f"{info.version}); the model cannot be used until the plugin is fixed")
                    self._fail(PluginFailure(info.name, info.distribution, info.version,
                                             "validate", msg))
                    return
                for note in model_declaration_notices(obj):
                    warnings.warn(f"mtlbench plugin {info.name!r} (distribution "
                                  f"{info.distribution} {info.version}): model {key!r}: {note}",
                                  PluginMigrationWarning, stacklevel=2)
            table[key] = Registered(obj, info)
            getattr(info, kind + "s").append(key)

        return register

    def _clash(self, kind: str, key: str, info: PluginInfo) -> None:
        """``key`` is registered by more than one plugin: make only that name unusable."""
        table = self._table(kind)
        owners = self._clash_owners.setdefault((kind, key), [])
        if key in table:
            first = table.pop(key).plugin
            owners.append(first)
            lst = getattr(first, kind + "s")
            if key in lst:
                lst.remove(key)
        owners.append(info)
        who = " and ".join(f"plugin {o.name!r} (distribution {o.distribution} {o.version})"
                           for o in owners)
        msg = (f"{kind} name {key!r} is registered twice: by {who}; uninstall one of them or "
               f"rename the {kind}")
        self._unusable[(kind, key)] = PluginConflictError(msg)
        self._fail(PluginFailure(info.name, info.distribution, info.version, "name clash", msg))

    def _fail(self, failure: PluginFailure) -> None:
        self.failures.append(failure)
        msg = (f"mtlbench plugin {failure.name!r} (distribution {failure.distribution} "
               f"{failure.version}) failed at {failure.stage}: {failure.error}")
        if _strict():
            raise PluginError(msg + f"  [{STRICT_ENV} is set]")
        warnings.warn(msg, PluginWarning, stacklevel=3)

    def add_commands(self, cli: Any) -> None:
        """Let every loaded plugin add click commands to ``cli`` (resilient like loading)."""
        for info in list(self.plugins):
            plugin = self.pm.get_plugin(f"{info.distribution}:{info.name}")
            if plugin is None:
                continue
            try:
                self._call_one(plugin, "register_commands", cli=cli)
            except Exception as exc:  # noqa: BLE001
                self._fail(PluginFailure(info.name, info.distribution, info.version,
                                         "register_commands", f"{type(exc).__name__}: {exc}",
                                         traceback.format_exc()))

    # ------------------------------------------------------------------ lookup
    @property
    def model_names(self) -> list[str]:
        return sorted(self._models)

    @property
    def dataset_names(self) -> list[str]:
        return sorted(self._datasets)

    @property
    def searcher_names(self) -> list[str]:
        return sorted(self._searchers)

    def searcher_class(self, name: str):
        return self._lookup(self._searchers, name, "searcher").obj

    def unusable(self) -> dict[tuple[str, str], str]:
        """Names that are registered but cannot be used (name clash, invalid declarations)."""
        return {k: str(v) for k, v in self._unusable.items()}

    def model_class(self, name: str) -> type[MTLModel]:
        return self._lookup(self._models, name, "model").obj

    def model_plugin(self, name: str) -> PluginInfo:
        return self._lookup(self._models, name, "model").plugin

    def dataset(self, name: str) -> Dataset:
        """The dataset registered as ``name``, or configured by a selector
        ``NAME[param=value,...]`` (:func:`mtlbench.dataset.configure_dataset`; the configured
        instance carries its canonical selector as ``selector``)."""
        if "[" not in name:
            return self._lookup(self._datasets, name, "dataset").obj
        return self._configured_dataset(name)

    def dataset_plugin(self, name: str) -> PluginInfo:
        return self._lookup(self._datasets, name.split("[", 1)[0].strip(), "dataset").plugin

    def _configured_dataset(self, text: str) -> Dataset:
        cache = self._configured
        if text not in cache:
            try:
                base_name, overrides = parse_selector(text)
            except ConfigError as exc:
                raise ConfigError(str(exc).replace("model selector", "dataset selector")) from None
            base = self._lookup(self._datasets, base_name, "dataset").obj
            ds, label = configure_dataset(base, overrides)
            if ds is not base:
                ds.selector = label  # type: ignore[attr-defined]
            cache[text] = ds
        return cache[text]

    def _lookup(self, table: dict[str, Registered], name: str, kind: str) -> Registered:
        if name in table:
            return table[name]
        if (kind, name) in self._unusable:
            raise self._unusable[(kind, name)]
        raise UnknownNameError(unknown_name_message(kind, name, table))


def model_declaration_problems(cls: type[MTLModel]) -> list[str]:
    """Why ``cls``'s ``search_space`` / ``param_constraints`` are malformed (empty if fine):
    an entry naming no ``__init__`` parameter, an entry that is not a Param or a non-empty
    list, a starting-grid value its own declaration rejects, a bound expression in
    ``param_constraints`` (only searched parameters have them), and what
    :func:`mtlbench.space.space_problems` finds in the search space (an ordered parameter
    without a start range, an unknown name in a bound expression, circular bounds)."""
    try:
        sig = inspect.signature(cls.__init__)
        params = {p.name for p in sig.parameters.values()
                  if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        open_kwargs = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    except (TypeError, ValueError):
        return []
    out = []
    for attr in ("search_space", "param_constraints"):
        decls = getattr(cls, attr, None) or {}
        if not isinstance(decls, Mapping):
            out.append(f"{attr} must be a dict, got {type(decls).__name__}")
            continue
        for key, decl in decls.items():
            if key not in params and not open_kwargs:
                close = difflib.get_close_matches(str(key), sorted(params), n=1, cutoff=0.5)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                out.append(f"{attr}[{key!r}] is not a parameter of {cls.__name__}.__init__"
                           f"{hint}; its parameters are: {', '.join(sorted(params)) or '(none)'}")
                continue
            try:
                par = as_param(decl, key)
            except ConfigError as exc:
                out.append(f"{attr}[{key!r}]: {exc}")
                continue
            if attr == "param_constraints" and not par.static:
                out.append(f"{attr}[{key!r}]: bounds of a parameter that is not searched must "
                           f"be numbers, got low={par.low!r}, high={par.high!r} (an "
                           f"expression needs the problem: declare it in search_space)")
            for v in par.grid:
                why = par.check(v)
                if why:
                    out.append(f"{attr}[{key!r}] starting value {v!r} {why}")
    space = getattr(cls, "search_space", None) or {}
    if isinstance(space, Mapping):
        try:
            out += [f"search_space: {p}" for p in space_problems(space)]
        except ConfigError:  # an entry that is no declaration: reported above
            pass
    return out


def model_declaration_notices(cls: type[MTLModel]) -> list[str]:
    """What an author should migrate in ``cls.search_space`` (the model works as it is): each
    plain-list entry, with the declaration it is read as and the one to write."""
    out = []
    for key, decl in (getattr(cls, "search_space", None) or {}).items():
        if not isinstance(decl, (list, tuple)) or not decl:
            continue
        par = list_to_param(decl)
        kind = type(par).__name__
        if par.ordered:
            lo, hi = par.start_range
            out.append(f"search_space[{key!r}] = {list(decl)!r} is a plain list, searched as "
                       f"the range {par} under the same rule and budget as declared ranges "
                       f"(12 design points spread from {lo:g} to {hi:g}, then extension and "
                       f"refinement: docs/tuning.md); declare it with the model's real "
                       f"bounds, e.g. {key!r}: {kind}({list(decl)!r}, low=..., high=...)")
        elif len(decl) == 1 and isinstance(decl[0], (int, float)) \
                and not isinstance(decl[0], bool):
            v = decl[0]
            example = (f"Log([{v / 10:g}, {v * 10:g}], low=..., high=...)" if v > 0 else
                       f"Linear([{v - 1:g}, {v + 1:g}], low=..., high=...)")
            out.append(f"search_space[{key!r}] = {list(decl)!r} holds one value, so it is not "
                       f"searched; make it the __init__ default (or a param_constraints "
                       f"entry), or declare a range, e.g. {key!r}: {example}")
    return out


_REGISTRY: Registry | None = None


def get_registry(refresh: bool = False) -> Registry:
    """The process-wide registry, loaded from entry points on first use."""
    global _REGISTRY
    if _REGISTRY is None or refresh:
        reg = Registry()
        reg.load_entry_points()
        _REGISTRY = reg
    return _REGISTRY


def _reset_registry_for_tests() -> None:
    global _REGISTRY
    _REGISTRY = None
