"""The ``mtlbench`` command line (click + rich): thin commands over :mod:`mtlbench.api` and
:mod:`mtlbench.report`.

==================  =========================================================================
module              what
==================  =========================================================================
``main``            the group, ``--version``, ``--help`` and lazy loading of every command
``info``            ``plugins``, ``models``, ``datasets``
``run``             ``compare``, ``results``, ``import-results``
``report``          ``leaderboard``, ``publish``
``share``           ``merge``, ``best-params``
``new_plugin``      ``new-plugin`` (the files come from :mod:`mtlbench.scaffold`)
``_ui``             consoles, :func:`user_errors`, tables, the registry with its warnings
``_options``        options shared by several commands, opening a store
``_progress``       the progress of ``compare``: a bar, or plain lines when not a terminal
==================  =========================================================================

This package is the only part of :mod:`mtlbench` that imports click or rich; library modules
report through callbacks or a reporter object handed down to them.  Errors meant for the user
(:class:`~mtlbench.errors.MTLBenchError`) are printed as one clear message and exit with
status 2; nothing prints a traceback for bad input.
"""
from __future__ import annotations

from ..api import DEFAULT_STORE
from ._ui import console, err_console, user_errors
from .main import cli, main

__all__ = ["cli", "main", "console", "err_console", "user_errors", "DEFAULT_STORE"]
