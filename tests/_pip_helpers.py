"""Offline pip installs of plugin packages for tests (shared by the plugin-package tests)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def can_build_offline() -> str | None:
    """None if ``pip install --no-build-isolation`` can build a wheel here, else the reason."""
    if importlib.util.find_spec("setuptools") is None:
        return "setuptools is not installed"
    import setuptools

    major_minor = tuple(int(p) for p in setuptools.__version__.split(".")[:2])
    if major_minor < (70, 1) and importlib.util.find_spec("wheel") is None:
        return ("offline installs need the 'wheel' package with setuptools < 70.1 "
                "(pip install wheel)")
    return None


def pip_install_target(src: Path, target: Path, workdir: Path) -> None:
    """Copy ``src`` (so the build leaves nothing in the repository) and pip-install it into
    ``target`` without network: --no-deps --no-build-isolation."""
    reason = can_build_offline()
    if reason:
        pytest.skip(reason)
    copy = workdir / src.name
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                              "__pycache__", ".pytest_cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "-q", "--target", str(target), str(copy)],
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"


def env_with(target: Path) -> dict[str, str]:
    """Environment in which ``target`` is importable and rich prints wide tables."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "250"
    env.pop("MTLBENCH_STRICT_PLUGINS", None)
    return env


def run_mtlbench(args: list[str], env: dict[str, str], cwd: Path,
                 timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mtlbench.cli", *args], capture_output=True,
                          text=True, env=env, cwd=str(cwd), timeout=timeout)
