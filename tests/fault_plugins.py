"""A throw-away plugin distribution of misbehaving models and a tiny dataset, for fault tests.

It is written as a real distribution (module + ``.dist-info`` with an ``mtlbench`` entry point,
see ``plugin_fixtures.write_distribution``) so that every process that rebuilds the registry
from entry points — joblib workers, Dask workers, ``mtlbench`` subprocesses — finds it too, as
long as the folder is on ``sys.path`` / ``PYTHONPATH``.

Models (all linear, scores from ``coef_``):

* ``fail-raise``  - ``fit`` raises RuntimeError;
* ``fail-nan``    - ``fit`` sets every weight to ``value`` ("nan" or "inf"): NaN/inf scores;
* ``slow``        - sleeps ``seconds`` (in ``chunk``-second naps) in every ``fit``, then fits;
* ``flaky``       - raises while the environment variable ``TP_FLAKY_FAIL`` is "1", else fits.

Dataset ``tiny``: 5 tasks x 40 samples x 6 features (units take milliseconds).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from plugin_fixtures import write_distribution

MODULE = "tp_faulty"

SOURCE = '''
import os
import time

import numpy as np

from mtlbench import Dataset, LinearMTLModel, TaskSet, hookimpl


class _Mean(LinearMTLModel):
    paper = "test plugin (tests/fault_plugins.py)"

    def _fit_mean(self, tasks):
        self.coef_ = np.column_stack([tasks.X(t).T @ tasks.y(t) / tasks.y(t).shape[0]
                                      for t in range(tasks.T)])
        self.n_iter_ = 1
        return self


class Raises(_Mean):
    name = "fail-raise"
    search_space = {"a": [1, 2]}

    def __init__(self, a=1):
        self.a = a

    def fit(self, tasks, init=None):
        raise RuntimeError("fail-raise: deliberate failure in fit")


class BadScores(_Mean):
    name = "fail-nan"

    def __init__(self, value="nan"):
        self.value = value

    def fit(self, tasks, init=None):
        self._fit_mean(tasks)
        self.coef_[:] = float(self.value)
        return self


class Slow(_Mean):
    name = "slow"

    def __init__(self, seconds=0.2, chunk=0.02):
        self.seconds = seconds
        self.chunk = chunk

    def fit(self, tasks, init=None):
        end = time.monotonic() + float(self.seconds)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(float(self.chunk), left))
        return self._fit_mean(tasks)


class Flaky(_Mean):
    name = "flaky"

    def fit(self, tasks, init=None):
        if os.environ.get("TP_FLAKY_FAIL") == "1":
            raise RuntimeError("flaky: failing because TP_FLAKY_FAIL=1")
        return self._fit_mean(tasks)


class Tiny(Dataset):
    name = "tiny"
    description = "5 tasks x 40 samples x 6 features (fault tests)"
    source = "generated"

    def load(self, problem="tiny", *, data_dir=None, cache_dir=None):
        rng = np.random.default_rng(7)
        w = rng.standard_normal(6)
        Xs, ys = [], []
        for t in range(5):
            X = rng.standard_normal((40, 6))
            s = X @ (w + 0.5 * rng.standard_normal(6)) + 0.5 * rng.standard_normal(40)
            ys.append(np.where(s > np.median(s), 1.0, -1.0))
            Xs.append(X)
        return TaskSet.from_arrays("tiny", Xs, ys)


@hookimpl
def register_models(register):
    for cls in (Raises, BadScores, Slow, Flaky):
        register(cls)


@hookimpl
def register_datasets(register):
    register(Tiny)
'''


def install(root: Path) -> Path:
    """Write the distribution under ``root`` (once) and return the folder for sys.path."""
    if not (root / f"{MODULE}.py").exists():
        write_distribution(root, "mtlbench_test_faulty", "0.0.1", {MODULE: SOURCE},
                           {"faulty": MODULE})
    return root


def subprocess_env(root: Path) -> dict[str, str]:
    """Environment for an ``mtlbench`` subprocess that sees the test distribution."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("MTLBENCH_STRICT_PLUGINS", None)
    env["COLUMNS"] = "200"
    return env


def cli_command() -> list[str]:
    """``mtlbench`` run with the current interpreter."""
    return [sys.executable, "-c", "from mtlbench.cli import main; main()"]
