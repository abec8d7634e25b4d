"""Every registered model and dataset plugin passes the conformance kit (mtlbench.testing).

Parametrized over the registry at collection time, so models and datasets added later are
covered automatically.  Checks use the kit's small problems; datasets whose files are not
available (real data folder: ``../shared/data`` next to the repository, or
$MTLBENCH_DATA_DIR) skip their loading checks with the reason.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from mtlbench.plugins import PluginWarning, get_registry
from mtlbench.testing import (MODEL_CHECKS, DataNotAvailable, check_dataset_availability,
                              check_dataset_deterministic, check_dataset_load,
                              check_dataset_metadata, check_dataset_params,
                              check_dataset_problems, run_model_check)

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("MTLBENCH_DATA_DIR") or REPO.parent / "shared" / "data")

with warnings.catch_warnings():
    warnings.simplefilter("ignore", PluginWarning)  # test_plugins.py covers load failures
    _REG = get_registry()
MODELS = _REG.model_names
DATASETS = _REG.dataset_names

# Constructor overrides for models whose default fit is slow on the kit's problems, used until
# the model declares ``kit_params`` itself (the kit then takes those).
KIT_OVERRIDES = {"vstgmtl": {"max_iter": 5, "u_max_iter": 30}}
# Known contract violations of built-in models (none at present): an entry here marks a check
# xfail, strict, so a fix is noticed and the entry removed.
KNOWN_FAILURES: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("check", list(MODEL_CHECKS))
@pytest.mark.parametrize("model", MODELS)
def test_model_passes_kit(model, check, request):
    cls = _REG.model_class(model)
    if check == "warm_start" and not cls.supports_warm_start:
        pytest.skip(f"{model} does not declare supports_warm_start")
    if (model, check) in KNOWN_FAILURES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_FAILURES[model, check], strict=True))
    params = None if getattr(cls, "kit_params", None) else KIT_OVERRIDES.get(model)
    run_model_check(check, cls, params)


@pytest.mark.parametrize("dataset", DATASETS)
def test_dataset_metadata_params_availability(dataset):
    ds = _REG.dataset(dataset)
    check_dataset_metadata(ds)
    check_dataset_params(ds)
    check_dataset_availability(ds, DATA_DIR)


def _problems(dataset):
    ds = _REG.dataset(dataset)
    try:
        return [(dataset, p) for p in check_dataset_problems(ds, DATA_DIR)]
    except DataNotAvailable:
        return [(dataset, None)]


@pytest.mark.parametrize("dataset,problem",
                         [dp for d in DATASETS for dp in _problems(d)],
                         ids=lambda v: str(v))
def test_dataset_loads_deterministically(dataset, problem):
    ds = _REG.dataset(dataset)
    if problem is None:
        pytest.skip(f"{dataset}: problems are listed only once its files are in the data "
                    f"folder ({DATA_DIR})")
    try:
        ts = check_dataset_load(ds, problem, DATA_DIR)
    except DataNotAvailable as exc:
        pytest.skip(str(exc))
    check_dataset_deterministic(ds, problem, DATA_DIR, first=ts)


def test_registry_is_not_empty():
    assert "stl" in MODELS and "simulated" in DATASETS
