"""What is wrong with a plugin, checked when it registers; each sentence names the fix.

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
  is unusable (stage ``validate``); the rest of its plugin is not affected.
"""
from __future__ import annotations

import difflib
import inspect
import re
from typing import Any, Mapping


from .. import hookspecs
from ..dataset import Dataset
from ..errors import ConfigError
from ..metrics import TARGET_KINDS, Metric
from ..model import MTLModel
from ..search.base import Searcher
from ..search.space import as_param, space_problems


_HOOK_NAMES = frozenset(hookspecs.HOOK_ARGUMENTS)

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



def model_declaration_problems(cls: type[MTLModel]) -> list[str]:
    """Why model ``cls`` cannot be used as declared (empty if it can): ``fit`` or
    ``decision_function`` not implemented, a ``fit`` without the ``init`` argument the
    protocol passes, and in ``search_space`` / ``param_constraints``: an entry naming no
    ``__init__`` parameter, an entry that is not a Param or a non-empty list, a
    starting-grid value its own declaration rejects, a bound expression in
    ``param_constraints`` (only searched parameters have them), what
    :func:`mtlbench.search.space.space_problems` finds in the search space (an ordered parameter
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
