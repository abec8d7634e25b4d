"""The ``mtlbench`` group: ``--version``, ``--help`` and the lazy loading of every command.

Start-up is kept short: this module imports only click and the standard library at import
time (rich is imported by the console on first use).  Each built-in command lives in a module of
this package that is imported only when the command is called (:data:`COMMANDS` holds the
one-line help that ``--help`` shows meanwhile); commands added by plugins (the
``register_commands`` hook) are discovered only when a name that is not built in is looked up,
so ``mtlbench --version`` and ``mtlbench --help`` load neither numpy, rich nor any plugin.
The commands of the plugins shipped with mtlbench are listed by ``--help`` all the same, from
:data:`PLUGIN_COMMANDS` (a test checks it against what those plugins register).
"""
from __future__ import annotations

import importlib
import sys
import warnings

import click

from .. import __version__
from ..errors import MTLBenchError
from ._ui import err_console, escape

__all__ = ["COMMANDS", "PLUGIN_COMMANDS", "cli", "main"]

#: built-in commands: name -> (module of this package, attribute (a click command),
#: the one-line help shown by ``mtlbench --help``)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "plugins": ("info", "plugins",
                "List discovered plugins, what they registered, and failed ones."),
    "models": ("info", "models",
               "List available models, their search spaces and plugins."),
    "datasets": ("info", "datasets",
                 "List datasets: problems, task counts, feature dimension, availability."),
    "compare": ("run", "compare",
                "Run models on datasets under the common protocol; print test AUC."),
    "results": ("run", "results",
                "Show stored results (mean ± std test AUC per problem and model)."),
    "import-results": ("run", "import_results",
                       "Import a published leaderboard's units into a store."),
    "merge": ("share", "merge",
              "Merge results stores and published files of several machines into one."),
    "best-params": ("share", "best_params",
                    "A run's selected hyperparameters as a config file for compare --config."),
    "leaderboard": ("report", "leaderboard",
                    "Leaderboard of one dataset (ranks, significance, provenance)."),
    "race": ("race", "race",
             "Race each model's solvers: objective against time to a certified optimum."),
    "publish": ("report", "publish",
                "Write leaderboards/<dataset>.md and .json, figures and an index."),
    "new-plugin": ("new_plugin", "new_plugin",
                   "Scaffold a pip-installable model (or --kind dataset) plugin NAME."),
}

#: commands of the plugins shipped in this distribution (registered through their
#: ``register_commands`` hook, loaded when called): name -> the one-line help ``--help`` shows
PLUGIN_COMMANDS: dict[str, str] = {
    "import-attributes": "Turn attribute labels (CSV, NPY, MATLAB) into the dataset layout.",
    "check-ustep": "Cross-check TFCL's closed-form U-step against a cvxpy SDP.",
}


def load_command(name: str) -> click.Command:
    """The built-in command ``name`` (imports its module)."""
    module, attr, _ = COMMANDS[name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), attr)


class _Group(click.Group):
    """Loads a built-in command's module when the command is called, and plugin commands only
    when a name that is not built in is looked up (a slow or broken plugin cannot slow down or
    take down ``--help``, ``--version`` or the built-in commands)."""

    _plugins_added = False

    def _add_plugin_commands(self) -> None:
        if not self._plugins_added:
            self._plugins_added = True
            from ..plugins import PluginWarning, get_registry

            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", PluginWarning)
                    get_registry().add_commands(self)
            except MTLBenchError as exc:
                err_console.print(f"[bold red]Error:[/] {escape(str(exc))}", soft_wrap=True)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS) | set(PLUGIN_COMMANDS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is None and name in COMMANDS:
            self.add_command(load_command(name), name)
            cmd = super().get_command(ctx, name)
        if cmd is None:
            self._add_plugin_commands()
            cmd = super().get_command(ctx, name)
        return cmd

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name)
            if cmd is not None and cmd is not _builtin(name):  # a plugin's command
                if not cmd.hidden:
                    rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
            elif name in COMMANDS:
                rows.append((name, COMMANDS[name][2]))
            else:
                rows.append((name, PLUGIN_COMMANDS[name]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
        with formatter.section("Plugin commands"):
            formatter.write_text("Other installed plugins may add commands; they are loaded "
                                 "when called. 'mtlbench plugins' lists them.")


def _builtin(name: str) -> click.Command | None:
    """The built-in command ``name`` if its module is already imported, else None."""
    if name not in COMMANDS:
        return None
    module, attr, _ = COMMANDS[name]
    mod = sys.modules.get(f"{__package__}.{module}")
    return getattr(mod, attr, None) if mod is not None else None


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="mtlbench")
def cli() -> None:
    """Benchmark linear multi-task learning models under one leak-free protocol."""


def main() -> None:  # console-script entry point
    cli(prog_name="mtlbench")
