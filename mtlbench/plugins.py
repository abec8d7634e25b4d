"""Plugin discovery and the registry of models and datasets.

Plugins are found through entry points in the group ``mtlbench`` (built-ins included) and
managed by pluggy.  Loading is resilient: a plugin that fails to import or to register is
recorded as a :class:`PluginFailure` (shown by ``mtlbench plugins`` and as a warning) and the
others keep working.  Set ``MTLBENCH_STRICT_PLUGINS=1`` to turn any failure into an error.
Two plugins registering the same name is always an error naming both distributions.
"""
from __future__ import annotations

import os
import traceback
import warnings
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Iterable

import pluggy

from . import hookspecs
from .dataset import Dataset
from .errors import PluginConflictError, PluginError, UnknownNameError
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


@dataclass
class PluginFailure:
    """A plugin that could not be imported or failed while registering."""

    name: str
    distribution: str
    version: str
    stage: str  # "import" | "register_models" | "register_datasets" | "validate"
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
        for hook_name, kind in (("register_models", "model"), ("register_datasets", "dataset")):
            impl = getattr(plugin, hook_name, None)
            if impl is None:
                continue
            try:
                impl(register=self._register_callback(kind, info))
            except PluginConflictError:
                raise
            except Exception as exc:  # noqa: BLE001
                self._fail(PluginFailure(name, distribution, version, hook_name,
                                         f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        return info

    def _register_callback(self, kind: str, info: PluginInfo) -> Callable[[Any], None]:
        table = self._models if kind == "model" else self._datasets

        def register(obj: Any) -> None:
            if kind == "model":
                if not (isinstance(obj, type) and issubclass(obj, MTLModel)):
                    raise TypeError(f"register() expects an MTLModel subclass, got {obj!r}")
            else:
                if isinstance(obj, type) and issubclass(obj, Dataset):
                    obj = obj()
                if not isinstance(obj, Dataset):
                    raise TypeError(f"register() expects a Dataset subclass or instance, got {obj!r}")
            key = getattr(obj, "name", "")
            if not key or not isinstance(key, str):
                raise TypeError(f"{obj!r} has no 'name' attribute")
            if key in table:
                other = table[key].plugin
                raise PluginConflictError(
                    f"{kind} name {key!r} is registered twice: by plugin {other.name!r} "
                    f"(distribution {other.distribution} {other.version}) and by plugin "
                    f"{info.name!r} (distribution {info.distribution} {info.version}); "
                    "uninstall one of them or rename the model"
                )
            table[key] = Registered(obj, info)
            (info.models if kind == "model" else info.datasets).append(key)

        return register

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

    def model_class(self, name: str) -> type[MTLModel]:
        return self._lookup(self._models, name, "model").obj

    def model_plugin(self, name: str) -> PluginInfo:
        return self._lookup(self._models, name, "model").plugin

    def dataset(self, name: str) -> Dataset:
        return self._lookup(self._datasets, name, "dataset").obj

    def dataset_plugin(self, name: str) -> PluginInfo:
        return self._lookup(self._datasets, name, "dataset").plugin

    def _lookup(self, table: dict[str, Registered], name: str, kind: str) -> Registered:
        if name in table:
            return table[name]
        raise UnknownNameError(unknown_name_message(kind, name, table))


def unknown_name_message(kind: str, name: str, known: Iterable[str]) -> str:
    import difflib

    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return f"unknown {kind} {name!r}.{hint} Known {kind}s: {', '.join(known) or '(none)'}."


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
