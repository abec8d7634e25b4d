"""``mtlbench new-plugin NAME``: write a pip-installable model plugin package.

The package (``mtlbench-NAME/``) holds

* ``pyproject.toml`` declaring the ``mtlbench`` entry point ``NAME = "mtlbench_NAME"``;
* ``mtlbench_NAME.py``: one working model (ridge towards the pooled model, exact solve) to edit;
* ``tests/test_NAME.py``: the conformance kit (:mod:`mtlbench.testing`) applied to the model;
* ``README.md``: how to install, test, compare, see the leaderboard and publish.

The generated package installs and passes its own tests unchanged (checked in mtlbench's test
suite).
"""
from __future__ import annotations

import keyword
import re
from pathlib import Path

import click

from .errors import ConfigError

_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")


def plugin_names(name: str) -> dict[str, str]:
    """Registry name, distribution, module and class names for a plugin called ``name``."""
    if not _NAME.match(name or ""):
        raise ConfigError(f"invalid plugin name {name!r}: use lower-case letters, digits, '-' "
                          "and '_', starting with a letter (it becomes the model's name in "
                          "'mtlbench compare --models NAME')")
    ident = name.replace("-", "_")
    if keyword.iskeyword(ident):
        raise ConfigError(f"invalid plugin name {name!r}: a Python keyword")
    cls = "".join(p.capitalize() for p in re.split(r"[-_]", name) if p) + "Model"
    return {"name": name, "dist": f"mtlbench-{name}", "module": f"mtlbench_{ident}",
            "cls": cls, "test": f"test_{ident}.py"}


PYPROJECT = '''\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "The {name} multi-task model as an mtlbench plugin"
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["mtlbench>={mtlbench_version}", "numpy", "scipy"]

[project.optional-dependencies]
test = ["pytest>=7"]

# mtlbench discovers the model through this entry point (group "mtlbench").
[project.entry-points.mtlbench]
{name} = "{module}"

[tool.setuptools]
py-modules = ["{module}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
'''

MODULE = '''\
"""{name}: a multi-task model plugin for mtlbench.

Replace the model below with yours; keep the contract (see mtlbench's docs/plugins.md):
hyperparameters are ``__init__`` keyword arguments stored unchanged; ``fit(tasks, init=None)``
sets ``coef_`` (d x T) and returns self; ``search_space`` is the default grid.

Template model: ridge towards the pooled model (two stages, each exact).

1. pooled ridge over all tasks:  w0 = argmin_w sum_t 1/2 ||y_t - X_t w||^2 + lam0/2 ||w||^2
2. per task, ridge towards w0:   w_t = argmin_w 1/2 ||y_t - X_t w||^2 + lam/2 ||w - w0||^2
                                    = w0 + (X_t^T X_t + lam I)^{{-1}} X_t^T (y_t - X_t w0)

lam -> 0 gives independent least squares, lam -> inf the pooled model.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mtlbench import LinearMTLModel, TaskSet, hookimpl

__version__ = "0.1.0"


def ridge(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin_w 1/2 ||y - X w||^2 + lam/2 ||w||^2 through the smaller Gram matrix."""
    n, d = X.shape
    if n <= d:
        K = X @ X.T
        K[np.diag_indices_from(K)] += lam
        return X.T @ cho_solve(cho_factor(K), y)
    G = X.T @ X
    G[np.diag_indices_from(G)] += lam
    return cho_solve(cho_factor(G), X.T @ y)


class {cls}(LinearMTLModel):
    """Ridge towards the pooled model; ``lam`` > 0 pulls tasks to it, ``lam0`` > 0 is its ridge."""

    name = "{name}"
    paper = "Template model of mtlbench new-plugin (ridge towards the pooled model)"
    search_space = {{"lam": [0.1, 1.0, 10.0, 100.0]}}

    def __init__(self, lam: float = 1.0, lam0: float = 1.0):
        self.lam = lam
        self.lam0 = lam0

    def fit(self, tasks: TaskSet, init=None) -> "{cls}":
        for key in ("lam", "lam0"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{name}: {{key}} must be a number > 0, got {{value!r}}")
        X_all, y_all, _ = tasks.stacked()
        w0 = ridge(X_all, y_all, float(self.lam0))
        self.coef_ = np.column_stack([
            w0 + ridge(tasks.X(t), tasks.y(t) - tasks.X(t) @ w0, float(self.lam))
            for t in range(tasks.T)])
        self.shared_coef_ = w0
        self.n_iter_ = 1
        return self


@hookimpl
def register_models(register):
    register({cls})
'''

TEST = '''\
"""The mtlbench conformance kit applied to {cls} (run: pytest)."""
from mtlbench.testing import ModelConformance

from {module} import {cls}


class Test{cls}(ModelConformance):
    model_class = {cls}
    # params = {{"lam": 1.0}}   # constructor overrides for the checks, if the defaults are slow
'''

README = '''\
# {dist}

The `{name}` multi-task model as an [mtlbench](https://pypi.org/project/mtlbench/) plugin,
created with `mtlbench new-plugin {name}`.

## Develop

    pip install -e .                 # registers the model through the "mtlbench" entry point
    mtlbench plugins                 # {dist} 0.1.0 -> {name}
    pytest                           # the mtlbench conformance kit (tests/{test})

Edit `{module}.py`: the model is the class `{cls}`. The kit checks that it clones from its
parameters, is deterministic, pickles, gives finite scores of the right shape, has a valid
search space and beats chance on a small simulated problem.

## Benchmark

    mtlbench compare --models {name},stl,lasso --datasets simulated --reps 3 --store results.sqlite
    mtlbench compare -m "{name}[lam=[1.0,10.0]]" --reps 3 --store results.sqlite   # other grid
    mtlbench leaderboard --dataset simulated --store results.sqlite

## Publish

    python -m build                  # or: pip wheel --no-deps .
    twine upload dist/*

Anyone who then runs `pip install {dist}` sees `{name}` in `mtlbench models`.
'''

GITIGNORE = "build/\ndist/\n*.egg-info/\n__pycache__/\n.pytest_cache/\n"


def write_plugin(name: str, directory: str | Path = ".") -> Path:
    """Write the package ``mtlbench-NAME`` under ``directory``; returns its folder."""
    from . import __version__

    names = plugin_names(name)
    root = Path(directory).expanduser() / names["dist"]
    if root.exists() and any(root.iterdir()):
        raise ConfigError(f"{str(root)!r} already exists and is not empty; choose another "
                          "name or --dir")
    base_version = re.match(r"\d+(\.\d+)*", __version__)
    fmt = {**names, "mtlbench_version": base_version.group(0) if base_version else "0.1"}
    files = {
        "pyproject.toml": PYPROJECT.format(**fmt),
        f"{names['module']}.py": MODULE.format(**fmt),
        f"tests/{names['test']}": TEST.format(**fmt),
        "README.md": README.format(**fmt),
        ".gitignore": GITIGNORE,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@click.command("new-plugin")
@click.argument("name")
@click.option("--dir", "directory", default=".", show_default=True,
              type=click.Path(file_okay=False),
              help="Folder in which the package folder mtlbench-NAME is created.")
def new_plugin_cmd(name: str, directory: str) -> None:
    """Create a pip-installable model plugin package (model, kit tests, README)."""
    from ._ui import console, user_errors

    @user_errors
    def run() -> None:
        root = write_plugin(name, directory)
        names = plugin_names(name)
        console.print(f"created {root}/")
        for p in sorted(root.rglob("*")):
            if p.is_file():
                console.print(f"  {p.relative_to(root)}")
        console.print(
            f"\nnext steps:\n  cd {root}\n  pip install -e .\n  pytest\n"
            f"  mtlbench compare --models {names['name']},stl --reps 3 --store results.sqlite\n"
            f"  mtlbench leaderboard --dataset simulated --store results.sqlite")

    run()
