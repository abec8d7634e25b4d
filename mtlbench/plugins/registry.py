"""Plugin discovery and the registry of models, datasets, searchers and metrics.

Plugins are found through entry points in the group ``mtlbench`` (built-ins included) and
managed by pluggy: every hook of :mod:`mtlbench.hookspecs` is called through the plugin
manager (``Registry.pm``), on one plugin at a time, with a ``register`` callback of that
plugin's own.  Loading is resilient: a plugin that fails to import or to register is
recorded as a :class:`PluginFailure` (shown by ``mtlbench plugins`` and as a warning) and the
others keep working.  Set ``MTLBENCH_STRICT_PLUGINS=1`` to turn any failure into an error.

Mistakes are caught when a plugin registers, each naming the plugin and the fix
(:mod:`mtlbench.plugins.checks`); forms that work but should change are kept as notices
(:mod:`mtlbench.plugins.notices`).

Names: a name a built-in model, dataset or searcher has stays the built-in's; a third-party
plugin registering it is refused (stage ``name clash``) and the built-in keeps working.  Two
third-party plugins registering the same name make only that name unusable (using it raises
:class:`~mtlbench.errors.PluginConflictError` naming both distributions).
"""
from __future__ import annotations

import inspect
import os
import traceback
import warnings
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable, Mapping, Sequence

import pluggy

from .. import hookspecs
from ..dataset import Dataset, configure_dataset
from ..errors import (ConfigError, PluginConflictError, PluginError, UnknownNameError,
                     unknown_name_message)
from ..metrics import Metric
from ..model import MTLModel
from ..syntax import parse_selector

from .checks import (_HOOK_NAMES, _HOOKS_TEXT, _closest_hook, hook_problems,
                     metric_declaration_problems, model_declaration_problems,
                     registered_object_problem)
from .notices import (NO_CONVERGED, PluginMigrationWarning, PluginNotice,
                      model_declaration_notices)

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
    metrics: list[str] = field(default_factory=list)


@dataclass
class PluginFailure:
    """A plugin that could not be imported or failed while registering."""

    name: str
    distribution: str
    version: str
    stage: str  # "import" | "register" | "register_*" | "validate" | "name clash"
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


#: The distribution that registers the built-in models, datasets and searchers (mtlbench).
BUILTIN_DISTRIBUTION = hookspecs.PROJECT_NAME


def _is_builtin(info: PluginInfo) -> bool:
    return info.distribution == BUILTIN_DISTRIBUTION


def _prefix(distribution: str) -> str:
    """A name prefix suggested for a distribution's models (``mtlbench-foo`` -> ``foo``)."""
    name = distribution.lower().replace("_", "-")
    return name[len("mtlbench-"):] if name.startswith("mtlbench-") else name


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
    """Models, datasets, searchers and metrics registered by plugins, by name.

    Hooks are called through pluggy (``Registry.pm``), one plugin at a time."""

    def __init__(self) -> None:
        self.pm = _PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self.plugins: list[PluginInfo] = []
        self.failures: list[PluginFailure] = []
        self.notices: list[PluginNotice] = []
        self._first_units: set[str] = set()  # models whose first finished unit was seen
        self._models: dict[str, Registered] = {}
        self._datasets: dict[str, Registered] = {}
        self._searchers: dict[str, Registered] = {}
        self._metrics: dict[str, Registered] = {}
        # names made unusable: (kind, name) -> the message to raise when the name is used
        self._unusable: dict[tuple[str, str], Exception] = {}
        self._clash_owners: dict[tuple[str, str], list[PluginInfo]] = {}
        self._configured: dict[str, Dataset] = {}  # "NAME[param=value]" -> configured dataset

    # ------------------------------------------------------------------ loading
    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> "Registry":
        found = [(ep, *_dist_of(ep)) for ep in entry_points(group=group)]
        # the built-ins first, so that a third-party plugin cannot take one of their names
        found.sort(key=lambda f: (f[1] != BUILTIN_DISTRIBUTION, f[0].name, f[0].value))
        seen: set[tuple[str, str]] = set()
        for ep, dist, version in found:
            if (ep.name, ep.value) in seen:  # the same distribution seen twice on sys.path
                continue
            seen.add((ep.name, ep.value))
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure is reported, not fatal
                self._fail(PluginFailure(ep.name, dist, version, "import",
                                         f"{type(exc).__name__}: {exc}", traceback.format_exc()))
                continue
            self.add_plugin(plugin, name=ep.name, distribution=dist, version=version)
        self._check_installed_version({v for _, d, v in found if d == BUILTIN_DISTRIBUTION})
        return self

    @staticmethod
    def _check_installed_version(installed: set[str]) -> None:
        """Warn when mtlbench's installed metadata (``installed``: the versions its entry
        points' distribution says) names another version than its code: an editable install
        keeps the version it was installed with, and every result records the installed one;
        the fix is to reinstall."""
        from .._version import __version__

        if installed and __version__ not in installed:
            warnings.warn(f"mtlbench's installed metadata says version "
                          f"{', '.join(sorted(installed))} but its code is {__version__}: an "
                          "editable install keeps the version it was installed with; reinstall "
                          "it (pip install -e .) so that results and plugins see the right "
                          "version", PluginWarning, stacklevel=3)

    def add_plugin(self, plugin: Any, *, name: str, distribution: str = "<local>",
                   version: str = "") -> PluginInfo:
        """Register one plugin object (module or instance) and run its hooks.

        A plugin whose hooks are wrong (:func:`hook_problems`; a hook implementation without a
        specification, found as pluggy's ``check_pending`` finds it) is not registered at all:
        it is recorded as a failure at stage ``register``, naming the fix."""
        info = PluginInfo(name=name, distribution=distribution, version=version,
                          module=getattr(plugin, "__name__", type(plugin).__name__))
        problems = hook_problems(plugin)
        if not problems:
            try:
                self.pm.register(plugin, name=f"{distribution}:{name}")
            except pluggy.PluginValidationError as exc:  # what hook_problems did not foresee
                problems = [str(exc)]
            else:
                problems = self._unknown_hooks(plugin)
                if problems:
                    self.pm.unregister(plugin)
        if problems:
            self._fail(PluginFailure(name, distribution, version, "register",
                                     "; ".join(problems)))
            return info
        self.plugins.append(info)
        for hook_name, kind in (("register_models", "model"), ("register_datasets", "dataset"),
                                ("register_searchers", "searcher"),
                                ("register_metrics", "metric")):
            try:
                self._call_one(plugin, hook_name, register=self._register_callback(kind, info))
            except PluginError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failing plugin is reported, not fatal
                self._fail(PluginFailure(name, distribution, version, hook_name,
                                         f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        return info

    def _unknown_hooks(self, plugin: Any) -> list[str]:
        """Hook implementations of ``plugin`` that match no hook specification (what pluggy's
        ``PluginManager.check_pending`` reports, for this plugin alone), each with the
        closest hook's name."""
        out = []
        for caller in self.pm.get_hookcallers(plugin) or []:
            if caller.has_spec() or all(i.optionalhook for i in caller.get_hookimpls()
                                        if i.plugin is plugin):
                continue
            out.append(f"@hookimpl {caller.name}: mtlbench has no hook {caller.name!r}"
                       f"{_closest_hook(caller.name)}; {_HOOKS_TEXT}")
        return out

    def _call_one(self, plugin: Any, hook_name: str, **kwargs: Any) -> None:
        """Call hook ``hook_name`` through pluggy on ``plugin`` alone: each plugin gets its own
        ``register`` callback (so a registration is attributed to the plugin that made it) and
        a plugin that raises does not take the others' registrations down."""
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        self.pm.subset_hook_caller(hook_name, remove_plugins=others)(**kwargs)

    def _table(self, kind: str) -> dict[str, Registered]:
        return {"model": self._models, "dataset": self._datasets,
                "searcher": self._searchers, "metric": self._metrics}[kind]

    def _register_callback(self, kind: str, info: PluginInfo) -> Callable[[Any], None]:
        table = self._table(kind)

        def register(obj: Any) -> None:
            if kind == "dataset" and isinstance(obj, type) and issubclass(obj, Dataset):
                obj = obj()
            why = registered_object_problem(kind, obj)
            if why:
                raise TypeError(why)
            key = getattr(obj, "name", "")
            if not key or not isinstance(key, str):
                raise TypeError(f"{obj!r} has no 'name': set the class attribute name = "
                                f"'my-{kind}' (the name users type)")
            if (kind, key) in self._clash_owners or key in table:
                self._clash(kind, key, info, obj)
                return
            if kind == "model" and not self._model_declarations_ok(obj, key, info):
                return
            if kind == "metric" and not self._metric_declarations_ok(obj, key, info):
                return
            table[key] = Registered(obj, info)
            getattr(info, kind + "s").append(key)

        return register

    def _model_declarations_ok(self, cls: type[MTLModel], key: str, info: PluginInfo) -> bool:
        """Check model ``cls``'s declarations: a problem makes the model unusable (False),
        a form to migrate warns."""
        problems = model_declaration_problems(cls)
        if problems:
            self._declaration_failed(
                "model", key, info,
                f"model {key!r} declares an invalid search space, parameter constraints or "
                f"fit signature: {'; '.join(problems)}")
            return False
        for note in model_declaration_notices(cls):
            self._notice(info, key, note)
        return True

    def _metric_declarations_ok(self, cls: type[Metric], key: str, info: PluginInfo) -> bool:
        """Check metric ``cls``'s declarations: a problem makes the metric unusable (False)."""
        problems = metric_declaration_problems(cls)
        if problems:
            self._declaration_failed(
                "metric", key, info,
                f"metric {key!r} is declared wrongly: {'; '.join(problems)}")
            return False
        return True

    def _declaration_failed(self, kind: str, key: str, info: PluginInfo, msg: str) -> None:
        """Make ``kind`` ``key`` unusable for the declaration problem ``msg`` and record it as
        the plugin's failure."""
        self._unusable[(kind, key)] = PluginError(
            f"{msg} (plugin {info.name!r}, distribution {info.distribution} {info.version}); "
            f"the {kind} cannot be used until the plugin is fixed")
        self._fail(PluginFailure(info.name, info.distribution, info.version, "validate", msg))
    def _notice(self, info: PluginInfo, model: str, message: str) -> PluginNotice:
        """Record a notice and warn (:class:`PluginMigrationWarning`) once."""
        notice = PluginNotice(info.name, info.distribution, info.version, model, message)
        self.notices.append(notice)
        warnings.warn(f"mtlbench plugin {info.name!r} (distribution {info.distribution} "
                      f"{info.version}): model {model!r}: {message}", PluginMigrationWarning,
                      stacklevel=4)
        return notice

    def note_unit(self, row: Mapping[str, Any]) -> PluginNotice | None:
        """At a model's first use: the first finished unit of each model (a stored unit row,
        ``status`` "ok") tells whether its fits set ``converged_`` (the search trace records
        each fit's flag, the search summary the refit's).  When none did, a notice (and a
        :class:`PluginMigrationWarning`) says so, once per model; returns it."""
        name = (row.get("model_config") or {}).get("name")
        if row.get("status") != "ok" or not name or name in self._first_units \
                or name not in self._models:
            return None
        self._first_units.add(name)
        summary = (row.get("diagnostics") or {}).get("search") or {}
        trace = row.get("grid")
        fits = trace.get("fits", []) if isinstance(trace, dict) else trace or []
        flags = [f.get("converged") for f in fits if isinstance(f, dict) and "error" not in f]
        if summary.get("refit_converged") is not None or any(f is not None for f in flags):
            return None
        where = f"{row.get('problem')} rep {row.get('rep')}"
        return self._notice(self._models[name].plugin, name, NO_CONVERGED.format(
            what=f"no fit of its first unit ({where}: {len(flags)} search fits and the refit) "
                 "set converged_"))

    def _clash(self, kind: str, key: str, info: PluginInfo, obj: Any) -> None:
        """``key`` is registered by more than one plugin.  A built-in keeps its name and the
        newcomer is refused; between third-party plugins only that name becomes unusable."""
        table = self._table(kind)
        current = table.get(key)
        others = [current.plugin] if current is not None else \
            self._clash_owners.get((kind, key), [])
        if _is_builtin(info) and not any(_is_builtin(o) for o in others):
            # the built-in came after the others (plugins added by hand): it takes the name
            if current is not None:
                self._drop(kind, key)
            self._clash_owners.pop((kind, key), None)
            self._unusable.pop((kind, key), None)
            table[key] = Registered(obj, info)
            getattr(info, kind + "s").append(key)
            for other in others:
                self._refuse_builtin_name(kind, key, other)
            return
        if current is not None and _is_builtin(current.plugin):
            self._refuse_builtin_name(kind, key, info)
            return
        owners = self._clash_owners.setdefault((kind, key), [])
        if current is not None:
            owners.append(current.plugin)
            self._drop(kind, key)
        owners.append(info)
        who = " and ".join(f"plugin {o.name!r} (distribution {o.distribution} {o.version})"
                           for o in owners)
        msg = (f"{kind} name {key!r} is registered twice: by {who}; uninstall one of them or "
               f"rename the {kind}")
        self._unusable[(kind, key)] = PluginConflictError(msg)
        self._fail(PluginFailure(info.name, info.distribution, info.version, "name clash", msg))

    def _refuse_builtin_name(self, kind: str, key: str, other: PluginInfo) -> None:
        """Refuse plugin ``other``'s ``kind`` named ``key``: a built-in has that name."""
        self._fail(PluginFailure(
            other.name, other.distribution, other.version, "name clash",
            f"{kind} name {key!r} is a built-in {kind} of mtlbench; plugin {other.name!r} "
            f"(distribution {other.distribution} {other.version}) cannot register another "
            f"{kind} under it: rename its {kind} (e.g. '{_prefix(other.distribution)}-{key}'); "
            f"the built-in {key!r} is unchanged"))

    def _drop(self, kind: str, key: str) -> None:
        """Remove ``key`` from the ``kind`` table and from its plugin's list."""
        first = self._table(kind).pop(key).plugin
        lst = getattr(first, kind + "s")
        if key in lst:
            lst.remove(key)

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
    def default_model_names(self) -> list[str]:
        """The models ``compare`` and ``race`` run without ``--models`` (``default_run``)."""
        return [n for n in self.model_names
                if getattr(self.model_class(n), "default_run", True) is not False]

    def model_groups(self) -> dict[str, list[str]]:
        """{group: its models}, from the models' ``group`` (plus ``all``: every model)."""
        groups: dict[str, list[str]] = {}
        for n in self.model_names:
            g = getattr(self.model_class(n), "group", None)
            if isinstance(g, str) and g and g not in self._models:
                groups.setdefault(g, []).append(n)
        return {**groups, "all": self.model_names}

    def expand_model_selectors(self, selectors: Sequence[str]) -> list[str]:
        """``selectors`` with each group name (:meth:`model_groups`) replaced by its models;
        a model's own name always wins over a group of the same name."""
        groups = self.model_groups() if selectors else {}
        out: list[str] = []
        grouped: set[str] = set()         # a model a group brought in, named again: once
        for text in selectors:
            name = text.split("[", 1)[0].strip()
            if name in self._models or name not in groups:
                if text.strip() not in grouped:
                    out.append(text)
            elif name != text.strip():
                from ..errors import ConfigError

                raise ConfigError(f"--models {text!r}: {name!r} is a group of models "
                                  f"({', '.join(groups[name])}); set hyperparameters on a "
                                  "model, not on a group")
            else:
                new = [m for m in groups[name] if m not in out]
                out += new
                grouped.update(new)
        return out

    @property
    def dataset_names(self) -> list[str]:
        return sorted(self._datasets)

    @property
    def searcher_names(self) -> list[str]:
        return sorted(self._searchers)

    def searcher_class(self, name: str):
        return self._lookup(self._searchers, name, "searcher").obj

    @property
    def metric_names(self) -> list[str]:
        return sorted(self._metrics)

    def metric_class(self, name: str) -> type[Metric]:
        return self._lookup(self._metrics, name, "metric").obj


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
