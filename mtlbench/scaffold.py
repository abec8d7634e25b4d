"""Write a pip-installable model or dataset plugin (the library behind ``mtlbench new-plugin``).

The package (``mtlbench-NAME/``) holds

* ``pyproject.toml`` declaring the ``mtlbench`` entry point ``NAME = "mtlbench_NAME"``;
* ``mtlbench_NAME.py``: one working model (ridge towards the pooled model, exact solve) to edit,
  or with ``--dataset`` one working dataset (tasks read from a CSV file in the data folder);
* ``tests/test_NAME.py``: the conformance kit (:mod:`mtlbench.testing`) applied to it (a
  dataset's tests read a small example file written to ``tests/data/``);
* ``README.md``: how to install, test, compare, see the leaderboard and publish.

A name that an installed plugin already registers is refused by nothing but warned about: two
plugins registering one name make that name unusable.

The generated code imports only the public surface: the top-level ``mtlbench`` names,
``mtlbench.datasets_api`` (dataset authors) and ``mtlbench.testing`` (the kit). The generated
package installs and passes its own tests unchanged (both checked in mtlbench's test suite).
"""
from __future__ import annotations

import keyword
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from .plugins import PluginInfo

_NAME = re.compile(r"^[a-z][a-z0-9_\-]*$")


def plugin_names(name: str, kind: str = "model") -> dict[str, str]:
    """Registry name, distribution, module and class names for a plugin called ``name``."""
    if not _NAME.match(name or ""):
        raise ConfigError(f"invalid plugin name {name!r}: use lower-case letters, digits, '-' "
                          "and '_', starting with a letter (it becomes the model's name in "
                          f"'mtlbench compare --{kind}s NAME')")
    ident = name.replace("-", "_")
    if keyword.iskeyword(ident):
        raise ConfigError(f"invalid plugin name {name!r}: a Python keyword")
    suffix = "Dataset" if kind == "dataset" else "Model"
    cls = "".join(p.capitalize() for p in re.split(r"[-_]", name) if p) + suffix
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
sets ``coef_`` (d x T) and returns self; ``search_space`` declares each searched parameter's
start range and real bounds (docs/tuning.md: every model's search starts from the same
12-point design over the declared ranges).

Template model: ridge towards the pooled model (two stages, each exact).

1. pooled ridge over all tasks:  w0 = argmin_w sum_t 1/2 ||y_t - X_t w||^2 + lam0/2 ||w||^2
2. per task, ridge towards w0:   w_t = argmin_w 1/2 ||y_t - X_t w||^2 + lam/2 ||w - w0||^2
                                    = w0 + (X_t^T X_t + lam I)^{{-1}} X_t^T (y_t - X_t w0)

lam -> 0 gives independent least squares, lam -> inf the pooled model.

Search space: ``lam`` Log, start range [0.1, 100] (a decade grid: the search's extension
step is 10), low 0 (every lam > 0 is a model; neither end is reached at a finite value, so
no other bound).  Replace the range by one from your model's math or from design data no
published table uses (``mtlbench compare --datasets "simulated[seed=101]"``), and say
which in this docstring.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from mtlbench import LinearMTLModel, Log, TaskSet, hookimpl

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
    # start range [0.1, 100]; low=0.0: every positive value (see the module docstring)
    search_space = {{"lam": Log([0.1, 1.0, 10.0, 100.0], low=0.0, high=None)}}

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
        self.converged_ = True  # two exact solves: no iteration, no tolerance
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
    # another start range of lam:
    mtlbench compare -m "{name}[lam=[1.0,10.0]]" --reps 3 --store results.sqlite
    mtlbench leaderboard --dataset simulated --store results.sqlite

## Publish

    python -m build                  # or: pip wheel --no-deps .
    twine upload dist/*

Anyone who then runs `pip install {dist}` sees `{name}` in `mtlbench models`.
'''

DATASET_MODULE = '''\
"""{name}: a dataset plugin for mtlbench.

Replace the reader below with yours; keep the contract (see mtlbench's docs/plugins.md):
``problems()`` names the problems, ``load(problem, data_dir=...)`` returns a ``TaskSet`` (one
task per user, labels in {{-1, +1}}), ``availability()`` says whether the files are there,
``params()`` lists everything that changes the loaded data (part of every result's identity),
``layout_help()`` tells users which files to put where.

Template layout: ``<data-dir>/{name}/tasks.csv`` (or ``<data-dir>/tasks.csv``), header
``task,label,x0,x1,...``, one row per labelled example, label in {{-1, +1}}.  Features are
z-scored per column over all rows (label-free) unless ``standardize=False``.
"""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from mtlbench import (Dataset, DatasetUnavailableError, DataValidationError, TaskSet,
                      UnknownNameError, hookimpl)
from mtlbench.datasets_api import resolve_data_dir

__version__ = "0.1.0"

FILE = "tasks.csv"
LAYOUT = (f"<data-dir>/{name}/{{FILE}} (or <data-dir>/{{FILE}}): CSV with header "
          "task,label,x0,x1,... one row per labelled example, label -1 or +1")


class {cls}(Dataset):
    """Tasks read from one CSV file (see the module docstring for the layout)."""

    name = "{name}"
    description = "{name}: tasks from <data-dir>/{name}/tasks.csv"
    source = "your own data"

    def __init__(self, standardize: bool = True):
        self.standardize = standardize

    def params(self) -> dict:
        return {{"standardize": bool(self.standardize)}}

    def layout_help(self) -> str:
        return LAYOUT

    def _path(self, data_dir) -> Path | None:
        ddir = resolve_data_dir(data_dir)
        if ddir is None:
            return None
        for path in (ddir / self.name / FILE, ddir / FILE):
            if path.is_file():
                return path
        return None

    def availability(self, *, data_dir=None, cache_dir=None) -> str:
        return "in data-dir" if self._path(data_dir) else "needs local files"

    def load(self, problem: str, *, data_dir=None, cache_dir=None) -> TaskSet:
        if problem != self.name:
            raise UnknownNameError(f"{{self.name}}: unknown problem {{problem!r}}; "
                                   f"problems: {{self.name}}")
        path = self._path(data_dir)
        if path is None:
            raise DatasetUnavailableError(f"{{self.name}}: {{FILE}} not found (data folder: "
                                          f"{{resolve_data_dir(data_dir)}}); expected {{LAYOUT}}")
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.reader(fh))
        if not rows or [c.strip() for c in rows[0][:2]] != ["task", "label"] or len(rows[0]) < 3:
            raise DataValidationError(f"{{path}}: the header must be task,label,x0,...; "
                                      f"got {{rows[0] if rows else 'an empty file'}}")
        names, X, y = [], [], []
        for i, r in enumerate(rows[1:], start=2):
            try:
                feats = [float(v) for v in r[2:]]
                lab = float(r[1])
            except (ValueError, IndexError):
                raise DataValidationError(
                    f"{{path}} line {{i}}: non-numeric label or feature") from None
            if lab not in (-1.0, 1.0) or len(feats) != len(rows[0]) - 2:
                raise DataValidationError(f"{{path}} line {{i}}: label must be -1 or +1 and every "
                                          f"row needs {{len(rows[0]) - 2}} features")
            names.append(r[0])
            X.append(feats)
            y.append(lab)
        X, y, names = np.asarray(X, dtype=np.float64), np.asarray(y), np.asarray(names)
        scale = "none"
        if self.standardize:  # label-free: statistics of the features of all rows
            sd = X.std(axis=0)
            X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
            scale = "z-score per column over all rows (labels unused)"
        order = list(dict.fromkeys(names.tolist()))  # tasks in order of first appearance
        return TaskSet.from_arrays(
            self.name, [X[names == t] for t in order], [y[names == t] for t in order],
            task_names=order, meta={{"file": str(path), "preprocessing": scale}})


@hookimpl
def register_datasets(register):
    register({cls})
'''

DATASET_TEST = '''\
"""The mtlbench conformance kit applied to {cls} (run: pytest)."""
from pathlib import Path

from mtlbench.testing import DatasetConformance

from {module} import {cls}


class Test{cls}(DatasetConformance):
    dataset = {cls}
    data_dir = Path(__file__).parent / "data"   # a small example in the layout (tasks.csv)
'''

DATASET_README = '''\
# {dist}

The `{name}` dataset as an [mtlbench](https://pypi.org/project/mtlbench/) plugin, created with
`mtlbench new-plugin --dataset {name}`.

## Develop

    pip install -e .                 # registers the dataset through the "mtlbench" entry point
    mtlbench datasets --layout       # {name}: where its files go
    pytest                           # the mtlbench conformance kit (tests/{test})

Edit `{module}.py`: the dataset is the class `{cls}`; `tests/data/tasks.csv` is a small
example in its layout.

## Benchmark

    mtlbench compare --datasets {name} --data-dir DIR --models stl,lasso --reps 3 \\
        --store results.sqlite
    mtlbench leaderboard --dataset {name} --store results.sqlite
'''


def example_tasks_csv(n_tasks: int = 4, per_task: int = 24, d: int = 3, seed: int = 0) -> str:
    """A small, seeded example in the dataset template's layout (balanced labels per task)."""
    import random

    rng = random.Random(seed)
    lines = ["task,label," + ",".join(f"x{j}" for j in range(d))]
    for t in range(n_tasks):
        w = [rng.gauss(0, 1) for _ in range(d)]
        for i in range(per_task):
            label = 1 if i % 2 == 0 else -1
            x = [rng.gauss(0, 1) + 0.8 * label * wj for wj in w]
            lines.append(f"user{t},{label}," + ",".join(f"{v:.6f}" for v in x))
    return "\n".join(lines) + "\n"


GITIGNORE = "build/\ndist/\n*.egg-info/\n__pycache__/\n.pytest_cache/\n"


def write_plugin(name: str, directory: str | Path = ".", kind: str = "model") -> Path:
    """Write the package ``mtlbench-NAME`` (a ``kind`` = "model" or "dataset" plugin) under
    ``directory``; returns its folder."""
    from . import __version__

    if kind not in ("model", "dataset"):
        raise ConfigError(f"kind must be 'model' or 'dataset', got {kind!r}")
    names = plugin_names(name, kind)
    root = Path(directory).expanduser() / names["dist"]
    if root.exists() and any(root.iterdir()):
        raise ConfigError(f"{str(root)!r} already exists and is not empty; choose another "
                          "name or --dir")
    base_version = re.match(r"\d+(\.\d+)*", __version__)
    fmt = {**names, "mtlbench_version": base_version.group(0) if base_version else "0.1"}
    if kind == "dataset":
        files = {
            "pyproject.toml": PYPROJECT.format(**fmt).replace(
                "multi-task model as an mtlbench plugin", "dataset as an mtlbench plugin").replace(
                '"numpy", "scipy"]', '"numpy"]'),
            f"{names['module']}.py": DATASET_MODULE.format(**fmt),
            f"tests/{names['test']}": DATASET_TEST.format(**fmt),
            "tests/data/tasks.csv": example_tasks_csv(),
            "README.md": DATASET_README.format(**fmt),
            ".gitignore": GITIGNORE,
        }
    else:
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


def name_taken(name: str, kind: str = "model") -> PluginInfo | None:
    """The installed plugin that already registers a ``kind`` called ``name`` (or None)."""
    import warnings

    from .plugins import get_registry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg = get_registry()
    names = reg.dataset_names if kind == "dataset" else reg.model_names
    if name not in names:
        return None
    return reg.dataset_plugin(name) if kind == "dataset" else reg.model_plugin(name)
