"""Hook specifications of mtlbench plugins (plugin API version
:data:`mtlbench.PLUGIN_API_VERSION`).

A plugin is a module (or object) named by an entry point in the group ``mtlbench``.  It
implements any of the hooks below; each hook receives one keyword argument (``register`` or
``cli``)::

    from mtlbench import hookimpl, MTLModel

    class MeanRegularised(MTLModel): ...

    @hookimpl
    def register_models(register):
        register(MeanRegularised)

Built-in models and datasets are registered through exactly the same hooks.

Stability: the hook names, their argument names and what ``register`` accepts are stable
within a plugin API version; a change a plugin author must act on raises the version and is
listed with its migration in CHANGELOG.md, and plugins written for an earlier version keep
loading (with a :class:`~mtlbench.plugins.PluginMigrationWarning` saying what to change)
for at least one more release.

Mistakes are caught when the plugin registers (:mod:`mtlbench.plugins`): a hook implementation
whose name is none of these hooks (a misspelling: the message names the closest hook), one
that takes an argument its specification does not pass, or a plugin that implements no hook
at all makes that plugin unusable and ``mtlbench plugins`` shows why.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:
    from .dataset import Dataset
    from .metrics import Metric
    from .model import MTLModel
    from .search.base import Searcher

PROJECT_NAME = "mtlbench"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_models(register: Callable[[type[MTLModel]], None]) -> None:
    """Register model classes: call ``register(cls)`` once for each
    :class:`~mtlbench.MTLModel` subclass (the class, not an instance).

    ``cls.name`` is the name users type (``mtlbench compare --models NAME``); a name a
    built-in model already has is refused.  The class's declarations (``search_space``,
    ``param_constraints``, ``convex``, ``supports_warm_start``, ``target_kinds``) are checked
    here: a malformed one makes that model unusable, a form to migrate warns."""


@hookspec
def register_datasets(register: Callable[[type[Dataset] | Dataset], None]) -> None:
    """Register datasets: call ``register(obj)`` with a :class:`~mtlbench.Dataset` subclass
    (built with no arguments) or instance; ``obj.name`` is what users type
    (``--datasets NAME``)."""


@hookspec
def register_searchers(register: Callable[[type[Searcher]], None]) -> None:
    """Register hyperparameter search strategies: call ``register(cls)`` for each
    :class:`mtlbench.search.Searcher` subclass; ``cls.name`` is what users type
    (``mtlbench compare --search NAME``).  The protocol builds one per unit as
    ``cls(space, context)`` (``context``: the training problem's dimensions ``d``, ``T``,
    ``n_min``, ``n_max`` and the model's fixed hyperparameters, which bound expressions may
    read).  The built-ins ``grid`` and ``adaptive`` register through this hook too."""


@hookspec
def register_metrics(register: Callable[[type[Metric]], None]) -> None:
    """Register metrics: call ``register(cls)`` for each :class:`mtlbench.Metric` subclass;
    ``cls.name`` is what users type (``--metric NAME``, ``--select-by NAME``).  Every unit
    records every registered metric that applies to its problem's target kind.  The
    declarations (name, ``higher_is_better``, ``target_kinds``, ``task_value``) are checked
    here: a malformed one makes that metric unusable.  The built-in metrics register through
    this hook too (:mod:`mtlbench.scoring`)."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add click commands to the ``mtlbench`` command group (a ``click.Group``):
    ``cli.add_command(cmd)``.

    Used by plugins that ship a tool of their own (e.g. TFCL's ``check-ustep``)."""


#: The hooks' names and the arguments each passes (what a hook implementation may take).
HOOK_ARGUMENTS: dict[str, tuple[str, ...]] = {
    f.__name__: tuple(inspect.signature(f).parameters)
    for f in (register_models, register_datasets, register_searchers, register_metrics,
              register_commands)}


def hook_signature(name: str) -> str:
    """``register_models(register)``: how to write hook ``name``."""
    return f"{name}({', '.join(HOOK_ARGUMENTS[name])})"


__all__ = ["hookimpl", "hookspec", "PROJECT_NAME", "HOOK_ARGUMENTS",
           "hook_signature", "register_models", "register_datasets",
           "register_searchers", "register_metrics", "register_commands"]
