"""The kit's test problems: small TaskSets every model must handle (built once per process)."""
from __future__ import annotations

from typing import Any, Iterable

from mtlbench.synthetic import make_simulated, make_uneven_tasks

__all__ = ["small_problem", "uneven_problem"]


def small_problem(seed: int = 0, n_samples: int = 60, n_positive: int = 20):
    """A small version of the paper's simulated problem (``make_simulated``): 10 tasks in
    5 blocks of 2, 16 features in blocks (4, 4, 2, 4, 2), ``n_samples`` labelled samples per
    task of which ``n_positive`` are positive.  Takes milliseconds to fit for linear models."""
    return make_simulated(seed=seed, n_samples=n_samples, n_positive=n_positive,
                          block_features=(4, 4, 2, 4, 2), users_per_block=2)


def uneven_problem(seed: int = 1, sizes: Iterable[int] = (9, 14, 23, 31, 48, 70), d: int = 12):
    """Tasks of different sizes over ``d`` features: some tasks have fewer samples than
    features, some more.  Labels come from a shared linear model plus a task-specific one, with
    at least 3 labels of each class per task."""
    return make_uneven_tasks(seed=seed, sizes=tuple(sizes), d=d)


_PROBLEMS: dict[str, Any] = {}


def _problem(key: str):
    """The kit's problems, built once per process: "small" (10 tasks x 30 samples),
    "small60" (10 tasks x 60 samples, for beats_chance) and "uneven"."""
    if key not in _PROBLEMS:
        _PROBLEMS[key] = {"small": lambda: small_problem(n_samples=30, n_positive=10),
                          "small60": lambda: small_problem(),
                          "uneven": lambda: uneven_problem()}[key]()
    return _PROBLEMS[key]
