"""Plugin discovery and the registry of models, datasets and searchers.

Plugins are found through entry points in the group ``mtlbench`` (built-ins included) and
managed by pluggy.  Loading is resilient: a plugin that fails to import or to register is
recorded as a :class:`PluginFailure` (shown by ``mtlbench plugins`` and as a warning) and the
others keep working.  Set ``MTLBENCH_STRICT_PLUGINS=1`` to turn any failure into an error.

Two plugins registering the same name: only that name becomes unusable (using it raises
:class:`~mtlbench.errors.PluginConflictError` naming both distributions; ``mtlbench plugins``
lists the clash); every other name keeps working.  A model whose ``search_space`` or
``param_constraints`` is malformed (a parameter ``__init__`` does not take, a declaration that
is not a Param or a list, a starting value outside its own bounds) is recorded like a plugin
failure (stage ``validate``) and is unusable; the rest of its plugin is not affected.
"""
from __future__ import annotations

import difflib
import os
import traceback
import warnings
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Iterable, Mapping

import pluggy

from . import hookspecs
from .dataset import Dataset
from .errors import ConfigError, PluginConflictError, PluginError, UnknownNameError
from .model import MTLModel

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


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _dist_of(ep: EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "<unknown>", ""
    return dist.metadata["Name"] or "<unknown>", dist.version or ""


class Registry:
    """Models and datasets registered by plugins, by name."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
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
            impl = getattr(plugin, hook_name, None)
            if impl is None:
                continue
            try:
                impl(register=self._register_callback(kind, info))
            except PluginError:
                raise
            except Exception as exc:  # noqa: BLE001
                self._fail(PluginFailure(name, distribution, version, hook_name,
                                         f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        return info

    def _table(self, kind: str) -> dict[str, Registered]:
        return {"model": self._models, "dataset": self._datasets,
                "searcher": self._searchers}[kind]

    def _register_callback(self, kind: str, info: PluginInfo) -> Callable[[Any], None]:
        table = self._table(kind)

        def register(obj: Any) -> None:
            from .search import Searcher

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
            impl = getattr(plugin, "register_commands", None)
            if impl is None:
                continue
            try:
                impl(cli=cli)
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
        from .dataset import configure_dataset
        from .selectors import parse_selector

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


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    import difflib

    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}.{hint} Known {kind}s: {', '.join(known) or '(none)'}."


def model_declaration_problems(cls: type[MTLModel]) -> list[str]:
    """Why ``cls``'s ``search_space`` / ``param_constraints`` are malformed (empty if fine):
    an entry naming no ``__init__`` parameter, an entry that is not a Param or a non-empty
    list, a starting-grid value its own declaration rejects."""
    import inspect

    from .space import as_param

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
            for v in par.grid:
                why = par.check(v)
                if why:
                    out.append(f"{attr}[{key!r}] starting value {v!r} {why}")
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
