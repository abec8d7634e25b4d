"""Hook specifications of mtlbench plugins.

A plugin is a module (or object) named by an entry point in the group ``mtlbench``.  It
implements any of the hooks below; each hook receives a ``register`` callback::

    from mtlbench import hookimpl, MTLModel

    class MeanRegularised(MTLModel): ...

    @hookimpl
    def register_models(register):
        register(MeanRegularised)

Built-in models and datasets are registered through exactly the same hooks.
"""
from __future__ import annotations

import pluggy

PROJECT_NAME = "mtlbench"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def register_models(register):
    """Register model classes: call ``register(cls)`` for each ``MTLModel`` subclass.

    ``cls.name`` is the name users type (``mtlbench compare --models NAME``).
    """


@hookspec
def register_datasets(register):
    """Register dataset plugins: call ``register(obj)`` with a ``Dataset`` subclass or instance."""


@hookspec
def register_commands(cli):
    """Add click commands to the ``mtlbench`` command group: ``cli.add_command(cmd)``.

    Used by plugins that ship a tool of their own (e.g. TFCL's ``check-ustep``).
    """


@hookspec
def register_searchers(register):
    """Register hyperparameter search strategies: call ``register(cls)`` for each
    :class:`mtlbench.search.Searcher` subclass; ``cls.name`` is what users type
    (``mtlbench compare --search NAME``).  The protocol builds one per unit as
    ``cls(space, context)`` (``context``: the training problem's dimensions ``d``, ``T``,
    ``n_min``, ``n_max`` and the model's fixed hyperparameters, which bound expressions may
    read).  The built-ins ``grid`` and ``adaptive`` register through this hook too."""
