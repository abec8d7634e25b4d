"""Shared set-up of the benchmark scripts (run them as ``python benchmarks/NAME.py``).

Comparing against another git ref is done one way in every script: :func:`checkout` extracts
the ref's committed tree (``git archive``) into a temporary folder, and :func:`run_code` runs
``python ARGS`` in a fresh process with that tree (or the working tree) first on PYTHONPATH and
one BLAS thread (:func:`worker_env`), so both codes run with the same interpreter and packages,
side by side in one run.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

REPO = Path(__file__).resolve().parents[1]


def worker_env(tree: str | None = None) -> dict[str, str]:
    """The environment of a timed worker process: one BLAS thread (as in every unit) and, for
    the code of another git ref checked out at ``tree``, that tree's package, model and dataset
    plugins first on PYTHONPATH."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(
            [tree, f"{tree}/plugins", f"{tree}/datasets", env.get("PYTHONPATH", "")])
    return env


@contextlib.contextmanager
def checkout(ref: str) -> Iterator[str]:
    """The committed tree of git ref ``ref`` in a temporary folder (deleted on exit).  Exits
    with one line if ``ref`` names no commit of this repository."""
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet",
                            f"{ref}^{{commit}}"], capture_output=True, text=True)
    if found.returncode != 0:
        sys.exit(f"--ref {ref}: not a commit of {REPO}")
    with tempfile.TemporaryDirectory(prefix="bench-ref-") as tmp:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", found.stdout.strip()],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield tmp


def run_code(args: Sequence[str], tree: str | None = None,
             extra_env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``python ARGS`` in a fresh process running the code of ``tree`` (a :func:`checkout`;
    None: the working tree), one BLAS thread, from ``tree`` as the current directory (so
    ``-m`` / ``-c`` import that tree's packages too).  Output is captured as text unless
    ``kwargs`` say otherwise."""
    root = tree or str(REPO)
    env = {**worker_env(root), **(extra_env or {})}
    if "stdout" not in kwargs and "stderr" not in kwargs:
        kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run([sys.executable, *args], env=env, cwd=root, **kwargs)


def simulated_specs(models: list[str], reps: int):
    """Planned units of ``models`` (selectors such as ``"stl"`` or ``"lasso[rho_ratio=0.1]"``)
    on the simulated data, ``reps`` repetitions, default protocol."""
    from mtlbench.plugins import get_registry
    from mtlbench.protocol import ProtocolConfig
    from mtlbench.runner import plan_units, resolve_problems
    from mtlbench.selectors import apply_overrides, parse_selector

    reg = get_registry()
    sels = []
    for text in models:
        name, over = parse_selector(text)
        sels.append(apply_overrides(reg.model_class(name), over, name))
    return plan_units(reg, sels, resolve_problems(reg, ["simulated"]), ProtocolConfig(reps=reps))
