"""Shared fixtures (small problems, the real-data folder, a fresh registry per test) and the
suite's two habits:

* **slow tests are marked automatically**: a test that starts processes, installs packages or
  runs a cluster gets the ``slow`` marker when its source or the source of a fixture it uses
  does one of :data:`STARTS_PROCESSES` (a subprocess, ``pip install``, a Dask cluster, a
  ``compare`` run, which computes its units in worker processes), so ``pytest -m "not slow"``
  is the quick loop (under 2 minutes) and ``pytest`` the whole suite;
* **the marking is checked**: a test that is not marked slow but starts a process anyway
  fails, naming the fix (mark it ``@pytest.mark.slow``), so the quick loop stays quick.

Every test also has a time limit (pytest-timeout, ``timeout`` in pyproject.toml).
"""
from __future__ import annotations

import inspect
import multiprocessing.process
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from mtlbench import TaskSet

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data_dir() -> Path:
    """The real public data sets beside the project (../shared/data), or skip."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (it ships beside the project "
                    "in ../shared/data; see its README for sources)")
    return SHARED_DATA


def small_problem(T: int = 6, n: int = 40, d: int = 8, seed: int = 0, shared: bool = False,
                  name: str = "small") -> TaskSet:
    """T linear tasks sharing one weight direction plus noise; balanced-ish labels."""
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(d)
    if shared:
        items = rng.standard_normal((n * 2, d))
        index, labels = [], []
        for t in range(T):
            ix = rng.choice(items.shape[0], size=n, replace=False)
            s = items[ix] @ (w0 + 0.3 * rng.standard_normal(d)) + 0.3 * rng.standard_normal(n)
            y = np.where(s > np.median(s), 1.0, -1.0)
            index.append(ix), labels.append(y)
        return TaskSet.from_shared_items(name, items, index, labels)
    Xs, ys = [], []
    for t in range(T):
        X = rng.standard_normal((n + 3 * t, d))
        s = X @ (w0 + 0.3 * rng.standard_normal(d)) + 0.3 * rng.standard_normal(X.shape[0])
        ys.append(np.where(s > np.median(s), 1.0, -1.0))
        Xs.append(X)
    return TaskSet.from_arrays(name, Xs, ys)


@pytest.fixture
def problem() -> TaskSet:
    return small_problem()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Never touch the user's cache; never inherit a strict-plugins setting."""
    monkeypatch.setenv("MTLBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("MTLBENCH_STRICT_PLUGINS", raising=False)
    monkeypatch.delenv("MTLBENCH_DATA_DIR", raising=False)
    yield


# ------------------------------------------------------------------ slow tests
#: What starts a process in a test's (or its fixtures') source: a subprocess or pip install,
#: a Dask cluster, a ``compare`` run through the CLI or the API (units run in worker processes;
#: a ``--dry-run`` runs nothing), the runner itself.
STARTS_PROCESSES = re.compile(
    r"subprocess\.|Popen|sys\.executable|pip_install_target|run_mtlbench\(|LocalCluster|"
    r"local_cluster\(|Client\(|\[\s*\"compare\"|\bcompare\(|\bapi\.run\(|\brun_units\(|"
    r"local_results\(|runpytest_subprocess")


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _with_helpers(func, module) -> list[str]:
    """The source of ``func`` and of the functions of its test module it calls, transitively
    (``_compare(store)`` that runs ``compare`` makes the test a process-starting one)."""
    out, todo, seen = [], [func], set()
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        text = _source(f)
        out.append(text)
        for name in set(re.findall(r"\b([A-Za-z_]\w*)\(", text)):
            helper = getattr(module, name, None)
            if inspect.isfunction(helper) and helper.__module__ == getattr(module, "__name__", ""):
                todo.append(helper)
    return out


_SCANNED: dict = {}  # function -> whether its source (with helpers) starts processes


def _starts_processes(item) -> bool:
    func, module = getattr(item, "function", None), getattr(item, "module", None)
    if func not in _SCANNED:
        _SCANNED[func] = any(STARTS_PROCESSES.search(t) for t in _with_helpers(func, module))
    if _SCANNED[func]:
        return True
    sources = []
    info = getattr(item, "_fixtureinfo", None)
    for name, defs in (info.name2fixturedefs.items() if info is not None else ()):
        if name != "_quick_tests_start_no_process":  # the check below, not a process
            sources += [_source(d.func) for d in defs
                        if Path(inspect.getfile(d.func)).is_relative_to(Path(__file__).parent)]
    return any(STARTS_PROCESSES.search(text) for text in sources)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is None and _starts_processes(item):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _quick_tests_start_no_process(request, monkeypatch):
    """A test not marked slow may not start a process: it fails, saying to mark it."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    started: list[str] = []
    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def recording_popen(self, args, *a, **k):
        # one-off probes libraries make and cache, not processes a test starts:
        # platform.processor() runs uname, loky's physical-core count runs lscpu
        if not (isinstance(args, (list, tuple)) and args and args[0] in ("uname", "lscpu")):
            started.append(f"subprocess {args!r}"[:120])
        return popen_init(self, args, *a, **k)

    def recording_start(self):
        started.append(f"process {self.name}")
        return process_start(self)

    monkeypatch.setattr(subprocess.Popen, "__init__", recording_popen)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", recording_start)
    yield
    if started:
        pytest.fail(f"{request.node.nodeid} starts processes ({'; '.join(started[:3])}) but "
                    "is not marked slow: add @pytest.mark.slow (tests/conftest.py marks tests "
                    "whose source matches STARTS_PROCESSES automatically)", pytrace=False)
