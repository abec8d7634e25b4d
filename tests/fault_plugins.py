"""A throw-away plugin distribution of misbehaving models and a tiny dataset, for fault tests.

It is written as a real distribution (module + ``.dist-info`` with an ``mtlbench`` entry point,
see ``plugin_fixtures.write_distribution``) so that every process that rebuilds the registry
from entry points — joblib workers, Dask workers, ``mtlbench`` subprocesses — finds it too, as
long as the folder is on ``sys.path`` / ``PYTHONPATH``.

Models (all linear, scores from ``coef_``):

* ``fail-raise``  - ``fit`` raises RuntimeError;
* ``fail-nan``    - ``fit`` sets every weight to ``value`` ("nan" or "inf"): NaN/inf scores;
* ``slow``        - sleeps ``seconds`` (in ``chunk``-second naps) in every ``fit``, then fits;
* ``flaky``       - raises while the environment variable ``TP_FLAKY_FAIL`` is "1", else fits;
* ``f-good``      - fits (the healthy neighbour of the process-killing models);
* ``f-segv``      - segfaults its process (a NULL read through ctypes); declares ``a >= 1``;
* ``f-segv-late`` - sleeps ``seconds`` (a declared parameter), then segfaults like ``f-segv``;
* ``f-exit``      - ``os._exit(3)`` in ``fit``;
* ``f-kill``      - sends itself SIGKILL (what the out-of-memory killer does);
* ``f-oom``       - limits its address space (``resource.setrlimit``) and allocates ``gb`` GB;
* ``f-hang``      - loops forever around ``time.sleep`` with a bare ``except:`` (swallows any
  in-process time limit);
* ``f-catchall``  - like ``f-hang`` for ``seconds`` (an undeclared parameter, so an override
  of it is probed by one fit before the run), then fits;
* ``f-block``     - one long call that no signal interrupts (SIGALRM blocked, then a sleep),
  like a long LAPACK call;
* ``f-version``   - fits; its result depends on the module constant ``SHIFT`` (for tests that
  edit the plugin's code);
* ``f-partial``   - fits for ``lam <= 1`` and raises ValueError above (a search that loses
  some of its fits);
* ``f-crawl``     - reports progress every 20 ms (objective 1 + 1/iteration) for ``seconds``,
  then fits (a race run that outlives its time limit).

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
import signal
import time

import numpy as np

from mtlbench import (Dataset, Int, Linear, LinearMTLModel, Log, TaskSet, hookimpl,
                      report_progress)

SHIFT = 0.0


class _Mean(LinearMTLModel):
    paper = "test plugin (tests/fault_plugins.py)"

    def _fit_mean(self, tasks):
        self.coef_ = np.column_stack([tasks.X(t).T @ tasks.y(t) / tasks.y(t).shape[0]
                                      for t in range(tasks.T)])
        self.n_iter_ = 1
        self.converged_ = True  # closed form
        return self


class Raises(_Mean):
    name = "fail-raise"
    search_space = {"a": Int([1, 2], low=1)}

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


class Crawl(_Mean):
    name = "f-crawl"

    def __init__(self, seconds=60.0):
        self.seconds = seconds

    def fit(self, tasks, init=None):
        end, it = time.monotonic() + float(self.seconds), 0
        while time.monotonic() < end:
            time.sleep(0.02)
            it += 1
            report_progress(it, 1.0 + 1.0 / it)
        return self._fit_mean(tasks)


class Flaky(_Mean):
    name = "flaky"

    def fit(self, tasks, init=None):
        if os.environ.get("TP_FLAKY_FAIL") == "1":
            raise RuntimeError("flaky: failing because TP_FLAKY_FAIL=1")
        return self._fit_mean(tasks)


class Good(_Mean):
    name = "f-good"

    def fit(self, tasks, init=None):
        return self._fit_mean(tasks)


class Segv(_Mean):
    name = "f-segv"
    param_constraints = {"a": Int([1], low=1, high=None)}

    def __init__(self, a=1):
        self.a = a

    def fit(self, tasks, init=None):
        import ctypes

        ctypes.string_at(0)
        return self._fit_mean(tasks)


class SegvLate(_Mean):
    name = "f-segv-late"
    param_constraints = {"seconds": Linear([1.0], low=0.0, high=None)}

    def __init__(self, seconds=1.0):
        self.seconds = seconds

    def fit(self, tasks, init=None):
        import ctypes

        time.sleep(float(self.seconds))
        ctypes.string_at(0)
        return self._fit_mean(tasks)


class Exit(_Mean):
    name = "f-exit"

    def fit(self, tasks, init=None):
        os._exit(3)


class Kill(_Mean):
    name = "f-kill"

    def fit(self, tasks, init=None):
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)


class Oom(_Mean):
    name = "f-oom"

    def __init__(self, gb=4.0):
        self.gb = gb

    def fit(self, tasks, init=None):
        import resource

        with open("/proc/self/statm") as f:
            vm = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (vm + 256 * 2**20, resource.RLIM_INFINITY))
        blocks = [np.ones(2**24) for _ in range(int(self.gb * 2**30 / 2**27))]
        return self._fit_mean(tasks)


class Hang(_Mean):
    name = "f-hang"

    def fit(self, tasks, init=None):
        while True:
            try:
                time.sleep(0.05)
            except:  # noqa: E722 - the fault under test: swallows even the time limit
                pass


class CatchAll(_Mean):
    name = "f-catchall"

    def __init__(self, seconds=0.0):
        self.seconds = seconds

    def fit(self, tasks, init=None):
        end = time.monotonic() + float(self.seconds)
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except:  # noqa: E722 - the fault under test: swallows even the time limit
                pass
        return self._fit_mean(tasks)


class Block(_Mean):
    name = "f-block"

    def fit(self, tasks, init=None):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(3600)


class Versioned(_Mean):
    name = "f-version"

    def fit(self, tasks, init=None):
        self._fit_mean(tasks)
        self.coef_ = self.coef_ + SHIFT
        return self


class PartlyFails(_Mean):
    name = "f-partial"
    search_space = {"lam": Log([0.1, 10.0], low=0.0)}

    def __init__(self, lam=0.1):
        self.lam = lam

    def fit(self, tasks, init=None):
        if self.lam > 1.0:
            raise ValueError(f"f-partial: lam = {self.lam:g} above 1 is refused")
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
    for cls in (Raises, BadScores, Slow, Flaky, Good, Segv, SegvLate, Exit, Kill, Oom, Hang,
                CatchAll, Block, Versioned, PartlyFails, Crawl):
        register(cls)


@hookimpl
def register_datasets(register):
    register(Tiny)
'''


def install(root: Path, version: str = "0.0.1", source: str = SOURCE) -> Path:
    """Write the distribution under ``root`` (once; again when ``version`` or ``source``
    change) and return the folder for sys.path."""
    if not (root / f"{MODULE}.py").exists() or (root / f"{MODULE}.py").read_text() != source \
            or not (root / f"mtlbench_test_faulty-{version}.dist-info").exists():
        for old in root.glob("mtlbench_test_faulty-*.dist-info"):
            import shutil

            shutil.rmtree(old)
        write_distribution(root, "mtlbench_test_faulty", version, {MODULE: source},
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
