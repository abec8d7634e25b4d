"""The runner's layering: the backends import the unit module, never the runner
package or the CLI, so there is no runner <-> backend import cycle; library modules of the
runner do not import click or rich."""
from __future__ import annotations

import ast
from pathlib import Path

import mtlbench

RUNNER = Path(mtlbench.__file__).parent / "runner"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            out.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_backends_import_the_unit_module_only():
    for name in ("dask.py", "local.py"):
        runner_imports = {m for m in _imports(RUNNER / name)
                          if m.startswith(".") and not m.startswith("..")}
        assert runner_imports <= {".unit"}, (name, runner_imports)
    assert not any(m in (".", "..runner") for m in _imports(RUNNER / "unit.py"))


def test_runner_modules_do_not_import_the_cli_or_a_console():
    for path in RUNNER.glob("*.py"):
        mods = _imports(path)
        assert not {m for m in mods if m.split(".")[0] in ("click", "rich")}, path
        assert "..cli" not in mods and "..progress" not in mods, path
