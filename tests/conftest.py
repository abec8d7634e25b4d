"""Shared fixtures: small problems, the real-data folder, a fresh registry per test."""
from __future__ import annotations

import os
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
