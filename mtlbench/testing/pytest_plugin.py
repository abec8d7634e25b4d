"""The pytest plugin of the conformance kit (entry point ``pytest11: mtlbench``).

Adds ``--mtlbench-data-dir DIR`` and ``--mtlbench-conformance NAMES`` (run the kit on installed
plugins by registry name, without a test file) and the fixtures ``mtlbench_data_dir``,
``mtlbench_small_problem`` and ``mtlbench_uneven_problem``.  Loaded by every pytest run where
mtlbench is installed, so it adds nothing to collection unless its option is given.
"""
from __future__ import annotations

from typing import Any

import pytest

from mtlbench.plugins import get_registry

from ._common import ConformanceError, DataNotAvailable
from .conformance import _option_data_dir
from .dataset_checks import (DATASET_CHECKS, check_dataset_availability,
                             check_dataset_deterministic, check_dataset_load,
                             check_dataset_problems)
from .model_checks import MODEL_CHECKS, run_model_check
from .problems import small_problem, uneven_problem


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("mtlbench", "mtlbench conformance kit")
    group.addoption("--mtlbench-data-dir", dest="mtlbench_data_dir", default=None,
                    help="folder with dataset files for dataset conformance checks "
                         "(default: $MTLBENCH_DATA_DIR)")
    group.addoption("--mtlbench-conformance", dest="mtlbench_conformance", default=None,
                    metavar="NAMES",
                    help="run the conformance kit on installed plugins: comma-separated "
                         "model/dataset names, or all, models, datasets")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "mtlbench_conformance: a check of the mtlbench plugin conformance kit")


@pytest.fixture
def mtlbench_data_dir(request):
    """The data folder for dataset checks (``--mtlbench-data-dir`` / $MTLBENCH_DATA_DIR)."""
    return _option_data_dir(request)


@pytest.fixture(scope="session")
def mtlbench_small_problem():
    """The kit's small simulated TaskSet (10 tasks, 16 features, 60 samples per task)."""
    return small_problem()


@pytest.fixture(scope="session")
def mtlbench_uneven_problem():
    """The kit's TaskSet with tasks of different sizes (9 to 70 samples, 12 features)."""
    return uneven_problem()


class ConformanceItem(pytest.Item):
    """One kit check of one installed plugin (``--mtlbench-conformance``)."""

    def __init__(self, *, kind: str, target: str, check: str, data_dir: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kind, self.target, self.check, self.data_dir = kind, target, check, data_dir
        self.add_marker("mtlbench_conformance")

    def runtest(self) -> None:
        reg = get_registry()
        if self.kind == "model":
            run_model_check(self.check, reg.model_class(self.target))
            return
        ds = reg.dataset(self.target)
        if self.check in ("problems", "load_deterministic"):
            try:
                probs = check_dataset_problems(ds, self.data_dir)
            except DataNotAvailable as exc:
                pytest.skip(str(exc))
            for p in probs if self.check == "load_deterministic" else ():
                try:
                    ts = check_dataset_load(ds, p, self.data_dir)
                except DataNotAvailable as exc:
                    pytest.skip(str(exc))
                check_dataset_deterministic(ds, p, self.data_dir, first=ts)
        elif self.check == "availability":
            check_dataset_availability(ds, self.data_dir)
        else:
            DATASET_CHECKS[self.check](ds)

    def repr_failure(self, excinfo: Any, style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return "mtlbench-conformance", None, f"{self.kind} {self.target}: {self.check}"


def pytest_collection_modifyitems(session: Any, config: Any, items: list) -> None:
    spec = config.getoption("mtlbench_conformance", default=None)
    if not spec:
        return
    reg = get_registry()
    names = [s.strip() for s in spec.split(",") if s.strip()]
    models, datasets = [], []
    for n in names:
        if n in ("all", "models"):
            models += reg.model_names
        if n in ("all", "datasets"):
            datasets += reg.dataset_names
        if n in ("all", "models", "datasets"):
            continue
        if n in reg.model_names:
            models.append(n)
        elif n in reg.dataset_names:
            datasets.append(n)
        else:
            known = ", ".join(reg.model_names + reg.dataset_names)
            raise pytest.UsageError(f"--mtlbench-conformance: no installed model or dataset "
                                    f"named {n!r}; installed: {known}")
    ddir = _option_data_dir(session)
    dchecks = ["metadata", "problems", "params", "availability", "load_deterministic"]
    for kind, targets, checks in (("model", models, list(MODEL_CHECKS)),
                                  ("dataset", datasets, dchecks)):
        for target in dict.fromkeys(targets):
            for check in checks:
                items.append(ConformanceItem.from_parent(
                    session, name=f"mtlbench-conformance[{kind}:{target}:{check}]",
                    kind=kind, target=target, check=check, data_dir=ddir))


def pytest_report_header(config: Any) -> list[str] | None:
    if config.getoption("mtlbench_conformance", default=None):
        return [f"mtlbench conformance kit: {config.getoption('mtlbench_conformance')}"]
    return None
