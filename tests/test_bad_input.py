"""Bad input gives one clear message and no traceback, through the CLI (exit status 2) or the API.

Data files are exercised through the dataset plugins a user would hit: the personalized
attribute layout (``shoes``: features.npy / items.txt / labels.csv, no checksums) and a
checksummed download (``school``: size + sha256 checked by ``mtlbench.fetch``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mtlbench import TaskSet
from mtlbench.cli import cli
from mtlbench.errors import DataValidationError
from mtlbench.fetch import DataFile, DataSource
from mtlbench.plugins import get_registry
from mtlbench.runner import load_problem

N_ITEMS, D, USERS = 30, 6, 4


@pytest.fixture(autouse=True)
def _fresh_problem_cache():
    load_problem.cache_clear()
    yield
    load_problem.cache_clear()


def _compare(tmp_path: Path, *args: str, store: str | None = None):
    res = CliRunner().invoke(cli, ["compare", "--reps", "1", "--store",
                                   store or str(tmp_path / "res.sqlite"), *args])
    return res


def _assert_clean_error(res, *fragments: str) -> str:
    out = " ".join(res.output.split())  # rich wraps long lines
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Error:" in out, out
    for frag in fragments:
        assert frag in out, f"{frag!r} not in {out!r}"
    return out


# --------------------------------------------------------------------------- personalized layout
def _shoes_folder(root: Path, labels: list[str] | None = None) -> Path:
    """A valid Shoes layout: 30 items, 6 features, 4 users labelling every item 'brown'."""
    folder = root / "shoes"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    np.save(folder / "features.npy", rng.standard_normal((N_ITEMS, D)))
    (folder / "items.txt").write_text("".join(f"img{i}\n" for i in range(N_ITEMS)))
    if labels is None:
        labels = [f"w{u},img{i},brown,{1 if (i + u) % 2 else -1}"
                  for u in range(USERS) for i in range(N_ITEMS)]
    (folder / "labels.csv").write_text("user,item,attribute,label\n" + "\n".join(labels) + "\n")
    return folder


def _shoes(tmp_path: Path):
    return _compare(tmp_path, "--datasets", "shoes/brown", "--models", "stl",
                    "--data-dir", str(tmp_path / "data"))


def test_valid_shoes_layout_runs(tmp_path):
    _shoes_folder(tmp_path / "data")
    res = _shoes(tmp_path)
    assert res.exit_code == 0 and "ran 1 unit(s)" in res.output, res.output


def test_truncated_feature_file(tmp_path):
    f = _shoes_folder(tmp_path / "data") / "features.npy"
    f.write_bytes(f.read_bytes()[:200])
    _assert_clean_error(_shoes(tmp_path), "features.npy cannot be read", "truncated")


def test_corrupt_feature_file(tmp_path):
    f = _shoes_folder(tmp_path / "data") / "features.npy"
    f.write_bytes(b"this is not a numpy file\x00\x01" * 20)
    _assert_clean_error(_shoes(tmp_path), "features.npy cannot be read",
                        "not a numpy .npy file")


def test_label_file_with_wrong_columns(tmp_path):
    f = _shoes_folder(tmp_path / "data") / "labels.csv"
    f.write_text("who,what,label\nw0,img0,1\n")
    _assert_clean_error(_shoes(tmp_path), "labels.csv lacks column(s)", "user,item,attribute,label")


def test_nan_features(tmp_path):
    f = _shoes_folder(tmp_path / "data") / "features.npy"
    F = np.load(f)
    F[3, 2] = np.nan
    np.save(f, F)
    _assert_clean_error(_shoes(tmp_path), "features.npy contains NaN/inf (row 3, column 2)")


def test_labels_outside_both_conventions(tmp_path):
    lab = [f"w{u},img{i},brown,{2 if i % 2 else -1}" for u in range(USERS) for i in range(N_ITEMS)]
    _shoes_folder(tmp_path / "data", lab)
    _assert_clean_error(_shoes(tmp_path),
                        "labels.csv: labels must be in {-1, +1} (or {0, 1}), found [-1, 2]")


def test_labels_that_are_not_numbers(tmp_path):
    lab = [f"w0,img{i},brown,{'yes' if i == 4 else 1}" for i in range(N_ITEMS)]
    _shoes_folder(tmp_path / "data", lab)
    _assert_clean_error(_shoes(tmp_path), "row 6: label 'yes' is not a number")


def test_users_with_one_class(tmp_path):
    lab = [f"w{u},img{i},brown,{1 if u % 2 else -1}" for u in range(USERS) for i in range(N_ITEMS)]
    _shoes_folder(tmp_path / "data", lab)
    _assert_clean_error(_shoes(tmp_path), "no user has >= 8 labels of each class", "4 users")


def test_item_ids_missing_from_the_feature_file(tmp_path):
    lab = [f"w{u},img{i},brown,{1 if (i + u) % 2 else -1}" for u in range(USERS)
           for i in range(N_ITEMS)] + ["w0,img999,brown,1", "w1,imgX,brown,-1"]
    _shoes_folder(tmp_path / "data", lab)
    _assert_clean_error(_shoes(tmp_path), "2 item id(s) of labels.csv have no row in features.npy",
                        "'img999'", "'imgX'")


def test_empty_feature_file(tmp_path):
    folder = _shoes_folder(tmp_path / "data")
    np.save(folder / "features.npy", np.zeros((0, D)))
    (folder / "items.txt").write_text("")
    _assert_clean_error(_shoes(tmp_path), "must be a non-empty 2-d numeric array",
                        "shape (0, 6)")


def test_empty_label_file(tmp_path):
    _shoes_folder(tmp_path / "data", labels=[])
    _assert_clean_error(_shoes(tmp_path), "no labels for attribute 'brown' in labels.csv")


def test_item_list_disagrees_with_feature_rows(tmp_path):
    folder = _shoes_folder(tmp_path / "data")
    (folder / "items.txt").write_text("img0\nimg1\n")
    _assert_clean_error(_shoes(tmp_path), "items.txt lists 2 item ids but", "has 30 rows")


# --------------------------------------------------------------------------- checksummed files
SCHOOL_SIZE = 44759  # school.mat as published by MALSAR


def _school(tmp_path: Path):
    return _compare(tmp_path, "--datasets", "school", "--models", "stl",
                    "--data-dir", str(tmp_path / "data"))


def test_truncated_checksummed_file(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "school.mat").write_bytes(b"\x00" * 1000)
    _assert_clean_error(_school(tmp_path), "school.mat has the wrong size",
                        f"1000 bytes, expected {SCHOOL_SIZE}: the file is truncated",
                        "expected sha256 57fb3238")


def test_checksum_mismatch(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "school.mat").write_bytes(b"\x01" * SCHOOL_SIZE)
    _assert_clean_error(_school(tmp_path), "checksum mismatch for", "expected sha256 57fb3238",
                        "actual sha256 " + hashlib.sha256(b"\x01" * SCHOOL_SIZE).hexdigest())


def test_corrupt_file_with_a_matching_checksum(tmp_path, monkeypatch):
    """A file that passes its checks but does not parse (e.g. a wrong checksum was published)."""
    garbage = b"MATLAB 5.0 MAT-file, but then nothing sensible" * 10
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "school.mat").write_bytes(garbage)
    school = type(get_registry().dataset("school"))
    src = school.data_source
    monkeypatch.setattr(school, "data_source", DataSource(
        dataset=src.dataset, homepage=src.homepage,
        files=(DataFile(path="school.mat", sha256=hashlib.sha256(garbage).hexdigest(),
                        size=len(garbage)),)))
    _assert_clean_error(_school(tmp_path), "school.mat cannot be read",
                        "not a readable MATLAB file")


# --------------------------------------------------------------------------- the data API
def _tasks(X_extra=None, y_extra=None):
    rng = np.random.default_rng(1)
    Xs = [rng.standard_normal((10, 3)) for _ in range(2)]
    ys = [np.array([1.0, -1.0] * 5) for _ in range(2)]
    if X_extra is not None:
        Xs[1] = X_extra
    if y_extra is not None:
        ys[1] = y_extra
    return Xs, ys


@pytest.mark.parametrize("build, message", [
    (lambda: TaskSet.from_arrays("p", *_tasks(X_extra=np.full((10, 3), np.nan))),
     "p, task 'task1': features: contains NaN/inf (row 0, column 0)"),
    (lambda: TaskSet.from_shared_items("p", np.array([[1.0, np.inf], [0.0, 1.0]]), [[0, 1]],
                                       [[1.0, -1.0]]),
     "p: item features: contains NaN/inf (row 0, column 1)"),
    (lambda: TaskSet.from_arrays("p", *_tasks(y_extra=np.array([0.0, 1.0] * 5))),
     "labels must be in {-1, +1}, found [0.0] (labels in {0, 1}? map 0 to -1)"),
    (lambda: TaskSet.from_arrays("p", *_tasks(y_extra=np.array([1.0, 2.0] * 5))),
     "p, task 'task1': labels must be in {-1, +1}, found [2.0]"),
    (lambda: TaskSet.from_arrays("p", *_tasks(y_extra=np.ones(10))),
     "p, task 'task1': has only one class (+1, 10 labels); AUC is undefined"),
    (lambda: TaskSet.from_arrays("p", [], []), "p: the data set has no tasks"),
    (lambda: TaskSet.from_arrays("p", *_tasks(X_extra=np.zeros((0, 3)), y_extra=np.zeros(0))),
     "p, task 'task1': the task is empty (no labelled items)"),
    (lambda: TaskSet.from_shared_items("p", np.eye(3), [[0, 1, 7]], [[1.0, -1.0, 1.0]]),
     "p, task 'task0': item index out of range [0, 3) (min 0, max 7)"),
], ids=["nan-features", "inf-items", "labels-01", "labels-12", "one-class", "no-tasks",
        "empty-task", "unknown-item"])
def test_taskset_rejects_bad_data(build, message):
    with pytest.raises(DataValidationError) as info:
        build()
    assert message in str(info.value)


# --------------------------------------------------------------------------- names and options
@pytest.mark.parametrize("args, fragments", [
    (["--models", "lasoo"], ["unknown model 'lasoo'. Did you mean 'lasso'?", "Known models:"]),
    (["--datasets", "shoez"], ["unknown dataset 'shoez'. Did you mean 'shoes', 'school'?"]),
    (["--datasets", "shoes/browm"], ["unknown shoes problem 'browm'. Did you mean 'brown'?",
                                     "Known shoes problems: brown, comfortable"]),
    (["--models", "lasso[rho=1]"], ["model 'lasso' has no hyperparameter 'rho'",
                                    "its hyperparameters are: max_iter, rho_ratio, tol"]),
    (["--models", "lasso[rho_ratio=abc]"],
     ["lasso[rho_ratio='abc']: expected a value like the default 0.03 (float)"]),
    (["--models", "lasso[rho_ratio=[]]"], ["lasso[rho_ratio=...]: an empty list searches nothing"]),
    (["--models", "lasso[rho_ratio=-1]"],
     ["invalid hyperparameter override lasso[rho_ratio=-1]: lasso: rho_ratio must be > 0, got -1"]),
    (["--models", "lasso[rho_ratio=[0.1,-2.0]]"],
     ["invalid hyperparameter override lasso[rho_ratio=-2.0]"]),
    (["--models", "lasso[rho_ratio=0.1"],
     ["unbalanced brackets or quotes in 'lasso[rho_ratio=0.1'"]),
    (["--models", "lasso[rho_ratio=1+]"], ["cannot parse hyperparameter value '1+'"]),
    (["--models", "stl", "--jobs", "0"], ["--jobs must be >= 1 (or -1 for all cores), got 0"]),
], ids=["model", "dataset", "problem", "param", "type", "empty", "range", "range-in-grid",
        "brackets", "value", "jobs"])
def test_bad_names_and_options(tmp_path, args, fragments):
    _assert_clean_error(_compare(tmp_path, *args), *fragments)


def test_unwritable_store_paths(tmp_path):
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    out = _assert_clean_error(_compare(tmp_path, "--models", "stl",
                                       store=str(a_file / "res.sqlite")),
                              "cannot open the results store",
                              "Choose a writable path with --store")
    assert "plain.txt/res.sqlite" in out
    (tmp_path / "adir").mkdir()
    _assert_clean_error(_compare(tmp_path, "--models", "stl", store=str(tmp_path / "adir")),
                        "Invalid value for '--store'", "adir' is a directory")
    not_db = tmp_path / "notes.sqlite"
    not_db.write_text("these are my notes, not a database\n" * 50)
    _assert_clean_error(_compare(tmp_path, "--models", "stl", store=str(not_db)),
                        "cannot open the results store", "file is not a database")
    assert not_db.read_text().startswith("these are my notes")  # left untouched


# --------------------------------------------------------------------------- silent or
# traceback-ending inputs
def _config(tmp_path: Path, data: bytes) -> str:
    path = tmp_path / "cfg.toml"
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("args, fragments", [
    (["--datasets", "simulated[seed=-1]", "--models", "stl"],
     ["dataset 'simulated[seed=-1]' cannot load problem 'simulated'",
      "ValueError: expected non-negative integer"]),
    (["--models", "stl", "--config", b"[compare]\nreps = 1\n# caf\xe9\n"],
     ["is not UTF-8 text", "byte 0xe9 at offset 24"]),
    (["--models", "stl", "--rerun", "stlx"],
     ["--rerun stlx: nothing would be recomputed: unknown model 'stlx'. Did you mean 'stl'?",
      "Models of this run: stl."]),
    (["--models", "stl", "--config", b"[models.lasso]\nrho_ratio = 'abc'\n"],
     ["[models.lasso]: lasso[rho_ratio='abc']: expected a value like the default 0.03"]),
    (["--models", "stl", "--config", b"[models.lasso]\nrho_ratio = -1.0\n"],
     ["[models.lasso]: invalid hyperparameter override lasso[rho_ratio=-1.0]"]),
    (["--models", "stl", "--scheduler", "garbage://x:y"],
     ["--scheduler garbage://x:y: not a Dask scheduler address",
      "unknown address scheme 'garbage'"]),
    (["--models", "stl", "--scheduler", "tcp://host:port"],
     ["--scheduler tcp://host:port: not a Dask scheduler address"]),
], ids=["dataset-seed", "config-not-utf8", "rerun-unknown", "config-type-unselected",
        "config-range-unselected", "scheduler-scheme", "scheduler-port"])
def test_inputs_that_were_ignored_or_ended_in_a_traceback(tmp_path, args, fragments):
    """Each gives one line and exit 2: before, a numpy traceback, a
    UnicodeDecodeError, nothing at all (an unknown --rerun model recomputed nothing; a wrong
    [models.NAME] table of a model not selected waited for the day it is), or a clear line
    followed by a 40 s hang and a traceback from Dask's Client.__del__."""
    args = [_config(tmp_path, a) if isinstance(a, bytes) else a for a in args]
    _assert_clean_error(_compare(tmp_path, *args), *fragments)
    assert not (tmp_path / "res.sqlite").exists()  # refused before the store was created
