"""School, Landmine, Lenk and MovieLens loaded from ../shared/data (skipped when absent),
plus the download path of each plugin tested offline (file:// copies) and corrupt-file reports."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from mtlbench import fetch
from mtlbench.errors import DatasetUnavailableError
from mtlbench_datasets.landmine import Landmine
from mtlbench_datasets.lenk import Lenk
from mtlbench_datasets.movielens import MovieLens
from mtlbench_datasets.school import School

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(
    not (SHARED / "school.mat").is_file(),
    reason=f"real data folder {SHARED} (../shared/data beside the repo) is absent; "
           "these tests need its copies of school.mat, landmine.mat, lenk_computer_survey.mat, "
           "ml-latest-small/")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MTLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MTLBENCH_DATA_DIR", raising=False)


def _check_taskset(ts, min_per_class=3):
    for t in range(ts.T):
        y = ts.y(t)
        assert set(np.unique(y)) == {-1.0, 1.0}
        assert min((y > 0).sum(), (y < 0).sum()) >= min_per_class
        assert ts.X(t).shape == (y.shape[0], ts.d)
        assert np.all(np.isfinite(ts.X(t)))


@needs_shared
def test_school():
    ds = School()
    assert ds.availability(data_dir=SHARED) == "in data-dir"
    ts = ds.load("school", data_dir=SHARED)
    s = ts.summary()
    assert (s["tasks"], s["labels"], s["features"]) == (139, 15362, 28)
    _check_taskset(ts)
    X, _, _ = ts.stacked()
    np.testing.assert_allclose(X[:, :-1].mean(axis=0), 0, atol=1e-9)
    np.testing.assert_allclose(X[:, -1], 1.0)
    # label rule: strictly above the school's median exam score
    from scipy.io import loadmat
    raw = loadmat(SHARED / "school.mat")["Y"].ravel()
    y0 = raw[0].ravel().astype(float)
    np.testing.assert_array_equal(ts.y(0), np.where(y0 > np.median(y0), 1.0, -1.0))
    assert "median" in ts.meta["label_rule"] and ts.meta["task_filter"]["dropped"] == []


@needs_shared
def test_landmine():
    ts = Landmine().load("landmine", data_dir=SHARED)
    s = ts.summary()
    assert (s["tasks"], s["labels"], s["features"]) == (29, 14820, 10)
    assert abs(s["positive_share"] - 0.061) < 0.001
    _check_taskset(ts)
    assert Landmine(bias=False).load("landmine", data_dir=SHARED).d == 9


@needs_shared
def test_lenk_shared_items_and_label_rule():
    ts = Lenk().load("lenk", data_dir=SHARED)
    assert ts.items is not None and ts.items.shape == (20, 14)
    assert ts.T == 177 and all(ts.y(t).shape == (20,) for t in range(ts.T))
    assert ts.meta["minority_filter"]["n_removed"] == 3
    _check_taskset(ts)
    # every person rated each of the 20 profiles once
    assert all(sorted(ix.tolist()) == list(range(20)) for ix in ts.index)
    ts6 = Lenk(threshold=6).load("lenk", data_dir=SHARED)
    assert ts6.T == 160 and ">= 6" in ts6.meta["label_rule"]


@needs_shared
def test_movielens():
    ts = MovieLens().load("movielens", data_dir=SHARED)
    s = ts.summary()
    assert s["tasks"] == 587 and s["features"] == 21 and ts.items is not None
    assert s["items"] == len(ts.meta["item_ids"])
    assert ts.meta["minority_filter"]["n_removed"] == 671 - 587
    _check_taskset(ts, min_per_class=8)
    # label rule on one user, straight from ratings.csv
    import pandas as pd
    r = pd.read_csv(SHARED / "ml-latest-small" / "ratings.csv")
    uid = int(ts.task_names[0].removeprefix("user"))
    ru = r[r.userId == uid].sort_values("movieId")
    np.testing.assert_array_equal(ts.y(0), np.where(ru.rating >= 4, 1.0, -1.0))
    np.testing.assert_array_equal(ts.meta["item_ids"][ts.index[0]], ru.movieId.to_numpy())


@needs_shared
def test_env_var_data_dir(monkeypatch):
    monkeypatch.setenv("MTLBENCH_DATA_DIR", str(SHARED))
    assert Landmine().availability() == "in data-dir"
    assert Landmine().load("landmine").T == 29


@needs_shared
@pytest.mark.parametrize("cls", [School, Landmine, Lenk, MovieLens])
def test_download_path_offline(cls, tmp_path, monkeypatch):
    """Each plugin downloads its files (here: file:// URLs of the shared copies) into the cache."""
    src = cls.data_source
    files = tuple(fetch.DataFile(f.path, f.sha256, (SHARED / f.path).as_uri(), f.size)
                  for f in src.files)
    monkeypatch.setattr(cls, "data_source",
                        fetch.DataSource(src.dataset, files, src.homepage, src.terms))
    ds = cls()
    cache = tmp_path / "cache"
    assert ds.availability() == "downloadable"
    ts = ds.load(ds.name)
    assert ds.availability() == "cached"
    for f in files:
        assert (cache / ds.name / f.path).is_file()
    assert ts.T > 0


def test_missing_files_message(tmp_path):
    ds = School()
    assert ds.availability(data_dir=tmp_path) == "downloadable"
    # the network is not used in tests: point the URL at a file that does not exist
    sha = School.data_source.files[0].sha256
    bad = fetch.DataSource("school", (fetch.DataFile("school.mat", sha,
                                                     (tmp_path / "nowhere.mat").as_uri()),),
                           School.data_source.homepage)
    ds.data_source = bad
    with pytest.raises(DatasetUnavailableError) as ei:
        ds.load("school", data_dir=tmp_path)
    msg = str(ei.value)
    assert "school.mat" in msg and str(tmp_path) in msg and sha in msg
    assert "MALSAR" in msg


@needs_shared
def test_corrupt_mat_is_reported_not_a_traceback(tmp_path):
    """A file with the right checksum but broken content (simulated by disabling the check)."""
    (tmp_path / "school.mat").write_bytes((SHARED / "school.mat").read_bytes()[:2000])
    ds = School()
    with pytest.raises(DatasetUnavailableError, match="checksum mismatch|truncated"):
        ds.load("school", data_dir=tmp_path)
    f = School.data_source.files[0]
    unchecked = fetch.DataFile("school.mat", fetch.sha256sum(tmp_path / "school.mat"))
    ds.data_source = fetch.DataSource("school", (unchecked,))
    with pytest.raises(DatasetUnavailableError, match="cannot be read"):
        ds.load("school", data_dir=tmp_path)
    assert f.sha256 != ds.data_source.files[0].sha256


@needs_shared
def test_truncated_movielens_copy_in_data_dir(tmp_path):
    d = tmp_path / "ml-latest-small"
    d.mkdir()
    shutil.copy(SHARED / "ml-latest-small" / "movies.csv", d / "movies.csv")
    ratings = (SHARED / "ml-latest-small" / "ratings.csv").read_bytes()
    (d / "ratings.csv").write_bytes(ratings[:5000])
    with pytest.raises(DatasetUnavailableError) as ei:
        MovieLens().load("movielens", data_dir=tmp_path)
    assert "truncated" in str(ei.value) and "c86fa992" in str(ei.value)


def test_parameters_are_validated(tmp_path):
    with pytest.raises(ValueError, match="min_minority"):
        MovieLens(min_minority=1).load("movielens", data_dir=tmp_path)
    with pytest.raises(ValueError, match="label_rule"):
        School(label_rule="mean").load("school", data_dir=tmp_path)
