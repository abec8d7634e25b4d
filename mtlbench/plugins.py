"""Plugin discovery and the registry of models, datasets, searchers and metrics.

Plugins are found through entry points in the group ``mtlbench`` (built-ins included) and
managed by pluggy: every hook of :mod:`mtlbench.hookspecs` is called through the plugin
manager (``Registry.pm``), on one plugin at a time, with a ``register`` callback of that
plugin's own.  Loading is resilient: a plugin that fails to import or to register is
recorded as a :class:`PluginFailure` (shown by ``mtlbench plugins`` and as a warning) and the
others keep working.  Set ``MTLBENCH_STRICT_PLUGINS=1`` to turn any failure into an error.

Mistakes are caught when a plugin registers, each naming the plugin and the fix:

* its hooks (:func:`hook_problems`, and pluggy's check of hook implementations without a
  specification, as ``PluginManager.check_pending`` does): a hook implementation whose name
  is no hook (the message names the closest one), one taking an argument its hook does not
  pass, a function that looks like a misspelled hook, an entry point naming a class instead
  of the module that registers it, a plugin implementing no hook.  The whole plugin is then
  unusable (stage ``register``);
* what it passes to ``register``: a model hook accepts only MTLModel subclasses, a dataset
  hook Dataset subclasses or instances, a searcher hook Searcher subclasses, a metric hook
  Metric subclasses (an instance, or the right object given to the wrong hook, is named as
  such);
* a metric's declarations (:func:`metric_declaration_problems`): a name, a direction
  (``higher_is_better``), the target kinds it applies to, and ``task_value``.  That metric is
  unusable (stage ``validate``);
* a model's declarations (:func:`model_declaration_problems`): a ``search_space`` or
  ``param_constraints`` entry naming a parameter ``__init__`` does not take, a declaration
  that is not a Param or a list, a starting value outside its own bounds, an ordered
  parameter without a start range of two distinct values, a bound expression naming
  something unknown, a ``fit`` without the ``init`` argument the protocol passes, a
  ``target_kinds`` that is not a non-empty tuple of known target kinds.  That model
  is unusable (stage ``validate``); the rest of its plugin is not affected;
* forms that work but should change (:func:`model_declaration_notices`, a
  :class:`PluginMigrationWarning` naming the model and what to write, kept once per model
  and form as a :class:`PluginNotice` in ``Registry.notices``, which ``mtlbench plugins``
  lists): a search space of plain lists (the first release's form; searched under the same
  rule and budget as declared ranges, :func:`mtlbench.space.list_to_param`),
  ``supports_warm_start`` without ``convex`` (warm starts stay off).

Whether a model sets ``converged_`` is seen by behaviour, never read from its source: at its
first use, the first finished unit of a model (:meth:`Registry.note_unit`) shows whether any of
its fits set it; when none did, a notice says that its convergence is "not recorded".
Registration fits nothing (``compare`` starts in a moment); the conformance kit fits and looks
too (:mod:`mtlbench.testing`).

Names: a name a built-in model, dataset or searcher has stays the built-in's; a third-party
plugin registering it is refused (stage ``name clash``) and the built-in keeps working.  Two
third-party plugins registering the same name make only that name unusable (using it raises
:class:`~mtlbench.errors.PluginConflictError` naming both distributions).
"""
from __future__ import annotations

import difflib
import inspect
import os
import re
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
from .metrics import TARGET_KINDS, Metric
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
class PluginNotice:
    """A form the author of a working model should change (one
    :class:`PluginMigrationWarning`): the plugin, the model and what to write instead."""

    name: str
    distribution: str
    version: str
    model: str
    message: str


@dataclass
class Registered:
    obj: Any
    plugin: PluginInfo


class PluginWarning(UserWarning):
    """A plugin failed to load; the others keep working."""


class PluginMigrationWarning(UserWarning):
    """A plugin works but uses a form its author should migrate (a plain-list search space,
    ``supports_warm_start`` without ``convex``, fits that set no ``converged_``); the message
    names the model and says what to write instead."""


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() not in ("", "0", "false", "no")


def _dist_of(ep: EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "<unknown>", ""
    return dist.metadata["Name"] or "<unknown>", dist.version or ""


_HOOK_NAMES = frozenset(hookspecs.HOOK_ARGUMENTS)
#: The distribution that registers the built-in models, datasets and searchers (mtlbench).
BUILTIN_DISTRIBUTION = hookspecs.PROJECT_NAME


def _is_builtin(info: PluginInfo) -> bool:
    return info.distribution == BUILTIN_DISTRIBUTION


def _prefix(distribution: str) -> str:
    """A name prefix suggested for a distribution's models (``mtlbench-foo`` -> ``foo``)."""
    name = distribution.lower().replace("_", "-")
    return name[len("mtlbench-"):] if name.startswith("mtlbench-") else name


_HOOKS_TEXT = "the hooks are " + ", ".join(hookspecs.hook_signature(n)
                                          for n in hookspecs.HOOK_ARGUMENTS)


def _closest_hook(name: str, cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(name, sorted(_HOOK_NAMES), n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _required_args(func: Any) -> list[str] | None:
    """The arguments ``func`` needs (no default; what pluggy passes it), None if unknown."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    return [p.name for p in sig.parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def hook_problems(plugin: Any) -> list[str]:
    """What is wrong with how ``plugin`` implements the hooks of :mod:`mtlbench.hookspecs`
    (empty if nothing), each sentence naming the fix:

    * a hook implementation taking an argument its hook does not pass
      (``def register_models(reg)``);
    * a function not marked ``@hookimpl`` that looks like a misspelled hook
      (``def register_model(register)`` beside the hooks, defined in the plugin itself);
    * an entry point naming a model, dataset or searcher class rather than the module that
      registers it;
    * a plugin implementing no hook at all.

    A marked implementation whose name is no hook is found by pluggy when the plugin is
    registered (:meth:`Registry._unknown_hooks`)."""
    if isinstance(plugin, type) and issubclass(plugin, (MTLModel, Dataset, Searcher, Metric)):
        kind, hook = _kind_and_hook(plugin)
        return [f"the entry point names the {kind} class {plugin.__qualname__} itself; point "
                f"it at the module that registers it (e.g. {plugin.__module__!r}) and add "
                f"there: @hookimpl def {hook}(register): register({plugin.__name__})"]
    out, implemented, lookalikes = [], [], []
    own_module = getattr(plugin, "__name__", None)
    for attr in sorted(dir(plugin)):
        if attr.startswith("_"):
            continue
        func = getattr(plugin, attr, None)
        if not inspect.isroutine(func):
            continue
        opts = getattr(func, f"{hookspecs.PROJECT_NAME}_impl", None)
        if isinstance(opts, dict):
            spec = opts.get("specname") or attr
        elif attr in _HOOK_NAMES:
            spec = attr  # an unmarked hook function (the first release's form)
        else:
            if attr.startswith("register") and getattr(func, "__module__", None) == own_module \
                    and _closest_hook(attr, cutoff=0.8):
                lookalikes.append(attr)
            continue
        implemented.append(attr)
        args = _required_args(func)
        if spec not in _HOOK_NAMES or args is None:
            continue  # no such hook: reported by pluggy's check
        extra = [a for a in args if a not in hookspecs.HOOK_ARGUMENTS[spec]]
        if extra:
            out.append(f"hook {attr}({', '.join(args)}) takes {', '.join(map(repr, extra))}, "
                       f"which mtlbench does not pass; write "
                       f"def {hookspecs.hook_signature(spec)}")
    for attr in lookalikes:
        out.append(f"{attr} looks like a hook but is none{_closest_hook(attr)}: name it after "
                   f"the hook and mark it @hookimpl; {_HOOKS_TEXT}")
    if not implemented and not lookalikes:
        out.append(f"implements no mtlbench hook, so it registers nothing; {_HOOKS_TEXT} "
                   "(from mtlbench import hookimpl)")
    return out


def _kind_and_hook(obj: Any) -> tuple[str, str]:
    """What ``obj`` is (a model, dataset or searcher class or instance) and its hook."""
    cls = obj if isinstance(obj, type) else type(obj)
    for base, kind in ((MTLModel, "model"), (Dataset, "dataset"), (Searcher, "searcher"),
                       (Metric, "metric")):
        if issubclass(cls, base):
            return kind, f"register_{kind}s"
    return "", ""


def registered_object_problem(kind: str, obj: Any) -> str:
    """Why ``obj`` cannot be registered by a ``register_{kind}s`` hook (empty if it can):
    an instance where the class is expected, an object of another kind (given to the wrong
    hook), or something that is none of a model, dataset or searcher."""
    expected = {"model": "an MTLModel subclass", "dataset": "a Dataset subclass or instance",
                "searcher": "a Searcher subclass", "metric": "a Metric subclass"}[kind]
    is_class = isinstance(obj, type)
    found, hook = _kind_and_hook(obj)
    if found == kind and (is_class or kind == "dataset"):
        return ""
    what = f"the class {obj.__qualname__}" if is_class else \
        f"{type(obj).__name__} instance {obj!r}" if found else \
        f"{obj!r} (a {type(obj).__name__})"
    if found == kind:  # an instance of the right kind
        name = type(obj).__name__
        return (f"register() in register_{kind}s takes the class, not an instance: "
                f"register({name}), not register({name}(...))")
    if found:
        return (f"register() in register_{kind}s expects {expected}, got {what}, which is a "
                f"{found}: register it in {hook}(register)")
    return f"register() in register_{kind}s expects {expected}, got {what}"


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
        from ._version import __version__

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
            msg = (f"model {key!r} declares an invalid search space, parameter constraints "
                   f"or fit signature: {'; '.join(problems)}")
            self._unusable[("model", key)] = PluginError(
                f"{msg} (plugin {info.name!r}, distribution {info.distribution} "
                f"{info.version}); the model cannot be used until the plugin is fixed")
            self._fail(PluginFailure(info.name, info.distribution, info.version,
                                     "validate", msg))
            return False
        for note in model_declaration_notices(cls):
            self._notice(info, key, note)
        return True

    def _metric_declarations_ok(self, cls: type[Metric], key: str, info: PluginInfo) -> bool:
        """Check metric ``cls``'s declarations: a problem makes the metric unusable (False)."""
        problems = metric_declaration_problems(cls)
        if problems:
            msg = f"metric {key!r} is declared wrongly: {'; '.join(problems)}"
            self._unusable[("metric", key)] = PluginError(
                f"{msg} (plugin {info.name!r}, distribution {info.distribution} "
                f"{info.version}); the metric cannot be used until the plugin is fixed")
            self._fail(PluginFailure(info.name, info.distribution, info.version,
                                     "validate", msg))
            return False
        return True
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


def model_declaration_problems(cls: type[MTLModel]) -> list[str]:
    """Why model ``cls`` cannot be used as declared (empty if it can): ``fit`` or
    ``decision_function`` not implemented, a ``fit`` without the ``init`` argument the
    protocol passes, and in ``search_space`` / ``param_constraints``: an entry naming no
    ``__init__`` parameter, an entry that is not a Param or a non-empty list, a
    starting-grid value its own declaration rejects, a bound expression in
    ``param_constraints`` (only searched parameters have them), what
    :func:`mtlbench.space.space_problems` finds in the search space (an ordered parameter
    without a start range, an unknown name in a bound expression, circular bounds), and a
    ``target_kinds`` that is not a non-empty tuple of known target kinds or a
    ``shift_invariant_loss`` that is not a bool."""
    out = _method_problems(cls) + _target_kind_problems(cls)
    try:
        sig = inspect.signature(cls.__init__)
        params = {p.name for p in sig.parameters.values()
                  if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        open_kwargs = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    except (TypeError, ValueError):
        return out
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


def _target_kind_problems(cls: type[Any]) -> list[str]:
    """``target_kinds`` is a non-empty tuple of :data:`~mtlbench.metrics.TARGET_KINDS`."""
    kinds = getattr(cls, "target_kinds", None)
    ok = isinstance(kinds, (tuple, list)) and kinds and all(k in TARGET_KINDS for k in kinds)
    out = [] if ok else [
        f"target_kinds = {kinds!r}: declare a tuple of the target kinds it handles, of "
        f"{', '.join(map(repr, TARGET_KINDS))} (e.g. target_kinds = ('binary', 'real'))"]
    flag = getattr(cls, "shift_invariant_loss", False)
    if issubclass(cls, MTLModel) and not isinstance(flag, bool):
        out.append(f"shift_invariant_loss = {flag!r}: must be True or False")
    return out


def metric_declaration_problems(cls: type[Metric]) -> list[str]:
    """Why metric ``cls`` cannot be used as declared (empty if it can): a ``name`` that is
    not a lower-case word (dashes allowed), a ``higher_is_better`` that is not a bool, a
    ``target_kinds`` that is not a non-empty tuple of known kinds, ``percent`` / ``threshold``
    not bools, ``chance`` neither None nor a number, ``task_value`` not implemented."""
    out = []
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", str(cls.name)):
        out.append(f"name = {cls.name!r}: use lower-case letters, digits and dashes "
                   "(e.g. 'median-ae')")
    for attr in ("higher_is_better", "percent", "threshold"):
        if not isinstance(getattr(cls, attr, None), bool):
            out.append(f"{attr} = {getattr(cls, attr, None)!r}: must be True or False")
    chance = getattr(cls, "chance", None)
    if chance is not None and (isinstance(chance, bool) or not isinstance(chance, (int, float))):
        out.append(f"chance = {chance!r}: must be None or a number")
    out += _target_kind_problems(cls)
    if cls.task_value is Metric.task_value:
        out.append(f"{cls.__name__} does not implement task_value(self, y, s) (the value of "
                   "one task's targets y and scores s)")
    return out


def _method_problems(cls: type[MTLModel]) -> list[str]:
    """``fit`` / ``decision_function`` missing, or a ``fit`` the protocol cannot call as
    ``fit(tasks, init=...)``."""
    out = []
    if cls.fit is MTLModel.fit:
        out.append(f"{cls.__name__} does not implement fit(self, tasks, init=None)")
    elif "init" not in _accepted_keywords(cls.fit):
        out.append(f"{cls.__name__}.fit takes no 'init' argument, but the protocol calls "
                   f"fit(tasks, init=None or the previous fit of the search): write "
                   f"def fit(self, tasks, init=None) (ignore init unless the model declares "
                   f"convex = True and supports_warm_start = True)")
    if cls.decision_function is MTLModel.decision_function:
        out.append(f"{cls.__name__} does not implement decision_function(self, X, task) "
                   f"(subclass LinearMTLModel to score with coef_)")
    return out


def _accepted_keywords(func: Any) -> set[str]:
    """Keyword names ``func`` accepts ({"init", ...}; every name if it takes ``**kwargs``)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return {"init"}  # cannot tell: do not refuse
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return {"init"}
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


#: what a model whose fits set no ``converged_`` should change ({what}: what was seen)
NO_CONVERGED = ("{what}, so the results record its convergence as unknown (\"not "
                "recorded\"; diagnostics_['converged'] is not read): set self.converged_ = "
                "True / False in fit (whether the solver met its stated tolerance; True for "
                "a closed-form fit)")


def model_declaration_notices(cls: type[MTLModel]) -> list[str]:
    """What an author should change in model ``cls`` (the model works as it is), read from
    its declarations:

    * each plain-list ``search_space`` entry, with the declaration it is read as and the one
      to write;
    * ``supports_warm_start = True`` without ``convex = True``: the protocol warm-starts only
      convex models, so its fits start cold.

    (Whether ``fit`` sets ``converged_`` is behaviour: :meth:`Registry.note_unit` and the
    conformance kit look at fitted models.)"""
    out = space_notices(cls)
    if getattr(cls, "supports_warm_start", False) and not getattr(cls, "convex", False):
        out.append("declares supports_warm_start = True but not convex = True, so its fits "
                   "are never warm-started (the protocol warm-starts only convex models, "
                   "where the start cannot change the answer); declare convex = True if fit "
                   "minimises a convex problem, else remove supports_warm_start")
    return out


def space_notices(cls: type[MTLModel]) -> list[str]:
    """Each plain-list entry of ``cls.search_space``: the declaration it is read as and the
    one to write (registration and the conformance kit warn with these)."""
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
