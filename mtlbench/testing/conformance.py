"""The pytest classes plugin authors subclass: :class:`ModelConformance` and
:class:`DatasetConformance` (one test per check)."""
from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

try:  # the check functions work without pytest; the test classes need it
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

from ._common import ConformanceError, DataNotAvailable
from .dataset_checks import (_dataset, check_dataset_availability, check_dataset_deterministic,
                             check_dataset_load, check_dataset_metadata, check_dataset_params,
                             check_dataset_problems)
from .model_checks import run_model_check

__all__ = ["ModelConformance", "DatasetConformance"]


def _skip(reason: str) -> None:
    if pytest is None:  # pragma: no cover
        raise DataNotAvailable(reason)
    pytest.skip(reason)


def _option_data_dir(request: Any) -> Any:
    try:
        opt = request.config.getoption("mtlbench_data_dir", default=None)
    except (ValueError, AttributeError):
        opt = None
    return opt or os.environ.get("MTLBENCH_DATA_DIR") or None


class ModelConformance:
    """Subclass as ``class TestMine(ModelConformance): model_class = Mine`` in a test file.

    Attributes to set:

    model_class : the MTLModel subclass under test (required)
    params : constructor keyword arguments used by every check (default: the class's
        optional ``kit_params``, else the defaults)
    min_auc : threshold of ``beats_chance`` (0.6)
    max_grid : None (default), or the largest Cartesian product of the declared grids (what
        ``--search grid`` fits); the adaptive search starts every model from the same
        12-point design whatever the grids
    monotone_objective : None (use the class's ``monotone_objective``) or a bool
    """

    model_class: Any = None
    params: Mapping[str, Any] | None = None
    min_auc: float = 0.6
    max_grid: int | None = None
    monotone_objective: bool | None = None

    def _run(self, name: str) -> Any:
        if self.model_class is None:
            raise ConformanceError(f"{type(self).__name__}: set model_class = YourModel")
        params = None if self.params is None else dict(self.params)
        return run_model_check(name, self.model_class, params, min_auc=self.min_auc,
                               max_grid=self.max_grid, monotone=self.monotone_objective)

    def test_mtlbench_metadata(self):
        self._run("metadata")

    def test_mtlbench_clone(self):
        self._run("clone")

    def test_mtlbench_search_space(self):
        self._run("search_space")

    def test_mtlbench_fit_shapes(self):
        self._run("fit_shapes")

    def test_mtlbench_refit(self):
        self._run("refit")

    def test_mtlbench_deterministic(self):
        self._run("deterministic")

    def test_mtlbench_pickle(self):
        self._run("pickle")

    def test_mtlbench_warm_start(self):
        if not getattr(self.model_class, "supports_warm_start", False):
            _skip("supports_warm_start is False")
        self._run("warm_start")

    def test_mtlbench_objective_history(self):
        self._run("objective_history")

    def test_mtlbench_beats_chance(self):
        self._run("beats_chance")


class DatasetConformance:
    """Subclass as ``class TestMine(DatasetConformance): dataset = MyDataset`` in a test file.

    Attributes to set:

    dataset : a Dataset subclass or instance (required)
    problems : problems to load (default None: every problem)
    data_dir : folder with the data files (default: ``--mtlbench-data-dir`` or
        ``$MTLBENCH_DATA_DIR``); loading checks skip when the data is not available locally.
    """

    dataset: Any = None
    problems: Iterable[str] | None = None
    data_dir: Any = None

    def _ds(self):
        if self.dataset is None:
            raise ConformanceError(f"{type(self).__name__}: set dataset = YourDataset")
        return _dataset(self.dataset)

    def _ddir(self, request: Any) -> Any:
        return self.data_dir or _option_data_dir(request)

    def _problems(self, ddir: Any) -> list[str]:
        if self.problems is not None:
            return list(self.problems)
        try:
            return check_dataset_problems(self._ds(), ddir)
        except DataNotAvailable as exc:
            _skip(str(exc))
            raise

    def test_mtlbench_metadata(self):
        check_dataset_metadata(self._ds())

    def test_mtlbench_problems(self, request):
        self._problems(self._ddir(request))

    def test_mtlbench_params(self):
        check_dataset_params(self._ds())

    def test_mtlbench_availability(self, request):
        check_dataset_availability(self._ds(), self._ddir(request))

    def test_mtlbench_load_deterministic(self, request):
        ds, ddir = self._ds(), self._ddir(request)
        for p in self._problems(ddir):
            try:
                ts = check_dataset_load(ds, p, ddir)
            except DataNotAvailable as exc:
                _skip(str(exc))
            check_dataset_deterministic(ds, p, ddir, first=ts)
