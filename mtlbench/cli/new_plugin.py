"""``mtlbench new-plugin NAME [--kind dataset]``: a pip-installable model or dataset plugin
package.

The files are written by :func:`mtlbench.scaffold.write_plugin` (a library function); this is
its command.
"""
from __future__ import annotations

import click

from ._ui import console, user_errors, warn

__all__ = ["new_plugin"]


@click.command("new-plugin")
@click.argument("name")
@click.option("--kind", type=click.Choice(["model", "dataset"]), default="model",
              show_default=True, help="What the plugin provides.")
@click.option("--dataset", "is_dataset", is_flag=True, hidden=True,
              help="Same as --kind dataset (the spelling of earlier releases).")
@click.option("--dir", "directory", default=".", show_default=True,
              type=click.Path(file_okay=False),
              help="Folder in which the package folder mtlbench-NAME is created.")
@user_errors
def new_plugin(name: str, kind: str, is_dataset: bool, directory: str) -> None:
    """Create a pip-installable model (or --kind dataset) plugin package with kit tests and
    README."""
    from ..plugins import BUILTIN_DISTRIBUTION
    from ..scaffold import name_taken, plugin_names, write_plugin

    kind = "dataset" if is_dataset else kind
    names = plugin_names(name, kind)
    owner = name_taken(name, kind)
    if owner is not None and owner.distribution == BUILTIN_DISTRIBUTION:
        warn(f"a {kind} named {name!r} is already registered by {owner.distribution} "
             f"{owner.version} (a built-in {kind}): a plugin registering that name is refused "
             f"when it loads and the built-in keeps it. Choose another name, e.g. "
             f"'my-{name}'.")
    elif owner is not None:
        who = f"{owner.distribution} {owner.version}"
        warn(f"a {kind} named {name!r} is already registered by {who}; installed side by "
             f"side, two plugins registering one name make that name unusable. Choose "
             f"another name unless this package is meant to replace {who}.")
    root = write_plugin(name, directory, kind)
    console.print(f"created {root}/")
    for p in sorted(root.rglob("*")):
        if p.is_file():
            console.print(f"  {p.relative_to(root)}")
    if kind == "dataset":
        console.print(
            f"\nnext steps:\n  cd {root}\n  pip install -e .\n  pytest\n"
            f"  mtlbench compare --datasets {names['name']} --data-dir tests/data "
            f"--models stl,lasso --reps 3 --store results.sqlite\n"
            f"  mtlbench leaderboard --dataset {names['name']} --store results.sqlite")
        return
    console.print(
        f"\nnext steps:\n  cd {root}\n  pip install -e .\n  pytest\n"
        f"  mtlbench compare --models {names['name']},stl --reps 3 --store results.sqlite\n"
        f"  mtlbench leaderboard --dataset simulated --store results.sqlite")

