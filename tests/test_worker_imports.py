"""Worker processes import mtlbench from where the process that starts them did, whatever the
current folder holds, and a worker that cannot import it says so in one line."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mtlbench
from mtlbench.runner.local import import_probe, shadowing

REPO = Path(__file__).resolve().parents[1]
INSTALLED = Path(mtlbench.__file__).resolve().parent


def _mtlbench_command() -> list[str]:
    """The console script beside this interpreter: its ``sys.path`` does not start with the
    current folder, as for a user who types ``mtlbench``."""
    script = Path(sys.executable).with_name("mtlbench")
    if script.exists():
        return [str(script)]
    if sys.version_info < (3, 11):
        pytest.skip("no mtlbench console script beside this interpreter")
    return [sys.executable, "-P", "-c", "from mtlbench.cli import main; main()"]


def _compare_in(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(_mtlbench_command() + [
        "compare", "--models", "stl", "--reps", "1", "--jobs", "1",
        "--store", str(folder / "run.sqlite")], cwd=folder, capture_output=True, text=True,
        timeout=240)


def _broken_package(folder: Path) -> Path:
    (folder / "mtlbench").mkdir(parents=True)
    (folder / "mtlbench" / "__init__.py").write_text(
        "raise RuntimeError('this is not the installed mtlbench')\n")
    return folder


def test_compare_works_from_a_folder_holding_a_broken_mtlbench_or_a_clone(tmp_path):
    """The parent folder of a clone (``mtlbench/`` holding the whole checkout) and a folder
    with a package of that name that does not import: the workers import the installed
    mtlbench, not what the current folder holds."""
    broken = _broken_package(tmp_path / "broken")
    clone = tmp_path / "clone"
    shutil.copytree(REPO, clone / "mtlbench", ignore=shutil.ignore_patterns(
        ".git", "leaderboards", "*.egg-info", "__pycache__", ".pytest_cache"))
    assert (clone / "mtlbench" / "mtlbench" / "__init__.py").exists()
    for folder in (broken, clone):
        proc = _compare_in(folder)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "0 failed" in proc.stdout and "Traceback" not in proc.stderr, proc.stderr


def test_a_worker_with_another_mtlbench_is_reported_as_such(tmp_path):
    """A process that imported mtlbench from a copy that is not on its path (a notebook that
    edits sys.path) gets workers with the installed one: the run stops at once with one
    line naming the package and both places, never a failed unit."""
    copy = tmp_path / "copy"
    shutil.copytree(INSTALLED, copy / "mtlbench",
                    ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(copy)!r})
        import mtlbench
        sys.path.pop(0)
        from mtlbench.errors import MTLBenchError
        try:
            mtlbench.compare(models="stl", reps=1, jobs=1, store={str(tmp_path / "s.sqlite")!r})
        except MTLBenchError as exc:
            print("ERROR", exc)
    """))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("ERROR")), "")
    assert "a worker process cannot start" in line and "not a failure of any model" in line, \
        proc.stdout + proc.stderr
    assert f"from {INSTALLED} in the worker process, but from {copy / 'mtlbench'}" in line


@pytest.mark.slow
def test_the_import_probe_names_the_module_and_where_it_came_from(tmp_path, monkeypatch):
    """What the supervisor says when a worker died before it was ready: a fresh interpreter
    with the workers' import path tried the imports."""
    assert import_probe() is None
    folder = _broken_package(tmp_path)
    monkeypatch.syspath_prepend(str(folder))
    line = import_probe()
    assert line is not None and line.startswith("cannot import mtlbench.runner.local "
                                                "(RuntimeError: this is not the installed")
    assert line.endswith(f"mtlbench comes from {folder / 'mtlbench'} there")


def test_shadowing_names_the_packages_a_folder_holds_another_copy_of(tmp_path):
    assert shadowing(str(tmp_path)) == []
    (tmp_path / "mtlbench").mkdir()                  # a clone: a plain folder
    (tmp_path / "scipy.py").write_text("")           # a module
    assert sorted(shadowing(str(tmp_path))) == ["mtlbench", "scipy"]
    assert "mtlbench" not in shadowing(str(INSTALLED.parent))   # the installed copy itself
