"""``mtlbench --version`` / ``--help`` must start fast: they may import neither the numeric
stack nor any plugin (no timing here; benchmarks/bench_startup.py measures the time)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("numpy", "scipy", "pandas", "sklearn", "cvxpy", "joblib", "pluggy",
         "mtlbench_models", "mtlbench_datasets", "mtlbench.plugins", "mtlbench.report",
         "mtlbench.runner", "mtlbench.store", "importlib.metadata",
         "rich")

PROBE = """
import json, sys
from mtlbench.cli import main
sys.argv = ["mtlbench", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit:
    pass
print("\\nMODULES=" + json.dumps(sorted(sys.modules)))
"""


def _modules_after(args: list[str]) -> tuple[set[str], str]:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True,
                         text=True, check=True).stdout
    text, _, mods = out.rpartition("MODULES=")
    return set(json.loads(mods)), text


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["compare", "--help"]])
def test_version_and_help_import_nothing_heavy(args):
    mods, text = _modules_after(args)
    loaded = sorted(m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert loaded == [], f"mtlbench {' '.join(args)} imported {loaded}"
    assert "mtlbench" in text


def test_help_lists_lazy_commands_without_loading_them():
    mods, text = _modules_after(["--help"])
    for name in ("compare", "leaderboard", "publish", "new-plugin", "plugins", "results"):
        assert name in text
    assert "mtlbench.scaffold" not in mods
    for module in ("info", "run", "report", "new_plugin", "_progress"):
        assert f"mtlbench.cli.{module}" not in mods


def test_each_builtin_command_loads_under_its_name():
    """Every entry of the lazy table names a click command of that name in its module, and
    ``--help`` shows the table's one-line help (no truncated first sentence)."""
    import click
    from click.testing import CliRunner

    from mtlbench.cli import cli
    from mtlbench.cli.main import COMMANDS, load_command

    for name in COMMANDS:
        cmd = load_command(name)
        assert isinstance(cmd, click.Command) and cmd.name == name
    text = CliRunner().invoke(cli, ["--help"], terminal_width=200).output
    for name, (_, _, short) in COMMANDS.items():
        assert f"{name}  " in text and short in text and len(short) <= 75


@pytest.mark.parametrize("module", ["mtlbench", "mtlbench.cli"])
def test_python_dash_m_runs_the_command(module):
    out = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("mtlbench, version")


def test_import_mtlbench_is_light_and_api_names_resolve():
    code = ("import sys, mtlbench; assert 'numpy' not in sys.modules; "
            "from mtlbench import compare, load_results, TaskSet, MTLModel, Log; "
            "print(mtlbench.compare is compare, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "True"]


def test_plugin_commands_are_found_when_called(tmp_path):
    # check-ustep / import-attributes come from built-in plugins through register_commands
    out = subprocess.run([sys.executable, "-c", "from mtlbench.cli import main; main()",
                          "import-attributes", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "--out" in out.stdout
