"""The personalized-attribute folder layout: Shoes / SUN / generic, written by the tests in the
documented layout and loaded end to end (PCA, minority filter, import command, CLI compare)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mtlbench.errors import DatasetUnavailableError, DataValidationError, UnknownNameError
from mtlbench_datasets.personalized import (SUN, PersonalizedAttributes, Shoes, import_attributes,
                                            normalize_attribute, pca)

SHOES_ATTRS = ("brown", "comfortable", "fashionable", "formal", "open", "ornate", "pointy")


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("MTLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MTLBENCH_DATA_DIR", raising=False)
    monkeypatch.delenv("MTLBENCH_SHOES_DIR", raising=False)


def write_layout(folder: Path, attrs, *, n_items=80, d=15, n_users=12, per_user=40, seed=0,
                 zero_one=False, extra_rows=()):
    """Small data in the documented layout; user u0 has only 2 positives (filtered at 8)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    F = rng.standard_normal((n_items, d)) @ np.diag(np.linspace(3, 0.2, d))
    np.save(folder / "features.npy", F)
    ids = [f"img{i:04d}" for i in range(n_items)]
    (folder / "items.txt").write_text("\n".join(ids) + "\n")
    with open(folder / "labels.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["user", "item", "attribute", "label"])
        for a in attrs:
            wa = rng.standard_normal(d)
            for u in range(n_users):
                its = rng.choice(n_items, per_user, replace=False)
                s = F[its] @ (wa + 0.3 * rng.standard_normal(d))
                y = np.where(s > np.median(s), 1, -1)
                if u == 0:
                    y[:] = -1
                    y[:2] = 1
                for i, lab in zip(its, y):
                    w.writerow([f"u{u}", ids[i], a, (lab + 1) // 2 if zero_one else lab])
        for row in extra_rows:
            w.writerow(row)
    return F, ids


def test_shoes_end_to_end(tmp_path):
    F, ids = write_layout(tmp_path / "shoes", SHOES_ATTRS)
    ds = Shoes(n_components=5)
    assert ds.problems() == list(SHOES_ATTRS)
    assert ds.availability(data_dir=tmp_path) == "in data-dir"
    for attr in SHOES_ATTRS:
        ts = ds.load(attr, data_dir=tmp_path)
        assert ts.name == f"shoes/{attr}" and ts.d == 5 and ts.T == 11
        assert "u0" not in ts.task_names
        assert ts.meta["minority_filter"]["removed"] == [{"task": "u0", "n_pos": 2, "n_neg": 38}]
        for t in range(ts.T):
            assert min((ts.y(t) > 0).sum(), (ts.y(t) < 0).sum()) >= 8
    # the rows of a task are the PCA scores of exactly the items that user labelled
    with open(tmp_path / "shoes" / "labels.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["attribute"] == "pointy" and r["user"] == "u3"]
    want = {r["item"]: int(r["label"]) for r in rows}
    t = ts.task_names.index("u3")
    got = dict(zip(ts.meta["item_ids"][ts.index[t]], ts.y(t)))
    assert got == want


def test_pca_is_label_free_and_matches_svd(tmp_path):
    rng = np.random.default_rng(1)
    F = rng.standard_normal((50, 8)) @ rng.standard_normal((8, 8))
    Z, rec = pca(F, 3)
    Xc = F - F.mean(axis=0)
    U, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    ref = Xc @ Vt[:3].T
    # same subspace and same per-component scores up to sign, after the one global scale
    for j in range(3):
        a, b = Z[:, j] * rec["scale"], ref[:, j]
        assert min(np.abs(a - b).max(), np.abs(a + b).max()) < 1e-8
    ev = s ** 2 / 49
    np.testing.assert_allclose(rec["explained_variance_ratio"], (ev[:3] / ev.sum()).round(6),
                               atol=1e-6)
    np.testing.assert_allclose(rec["scale"], np.sqrt(ev[:3].mean()))
    # fewer items than features: the Gram route gives the same scores
    G = rng.standard_normal((6, 20))
    Zg, rg = pca(G, 4)
    Xg = G - G.mean(axis=0)
    _, sg, Vg = np.linalg.svd(Xg, full_matrices=False)
    for j in range(4):
        a, b = Zg[:, j] * rg["scale"], Xg @ Vg[j]
        assert min(np.abs(a - b).max(), np.abs(a + b).max()) < 1e-8
    # labels never enter: same features, different labels -> identical feature matrix
    write_layout(tmp_path / "a" / "shoes", ["brown"], seed=3)
    write_layout(tmp_path / "b" / "shoes", ["brown"], seed=3)
    lab = tmp_path / "b" / "shoes" / "labels.csv"
    lines = lab.read_text().splitlines()
    flipped = [lines[0]] + [ln.rsplit(",", 1)[0] + "," + str(-int(ln.rsplit(",", 1)[1]))
                            for ln in lines[1:]]
    lab.write_text("\n".join(flipped) + "\n")
    ta = Shoes(n_components=4).load("brown", data_dir=tmp_path / "a")
    tb = Shoes(n_components=4).load("brown", data_dir=tmp_path / "b")
    np.testing.assert_array_equal(ta.items, tb.items)


def test_missing_shoes_folder_message(tmp_path):
    ds = Shoes()
    assert ds.availability(data_dir=tmp_path) == "needs local files"
    with pytest.raises(DatasetUnavailableError) as ei:
        ds.load("brown", data_dir=tmp_path)
    msg = str(ei.value)
    for part in ("shoes", str(tmp_path / "shoes"), "labels.csv", "features.npy", "items.txt",
                 "user,item,attribute,label", "import-attributes", "Kovashka", "checksum"):
        assert part in msg, part
    with pytest.raises(DatasetUnavailableError, match="no data folder given"):
        ds.load("brown")


def test_sun_aliases_and_unknown_problem(tmp_path):
    write_layout(tmp_path / "sun", ["Open Area", "soothe"])
    ds = SUN(n_components=None)
    assert ds.load("open_area", data_dir=tmp_path).meta["attribute"] == "open_area"
    assert ds.load("soothing", data_dir=tmp_path).T == 11
    assert ds.problems(data_dir=tmp_path) == ["open_area", "soothing"]  # found, not built-in
    with pytest.raises(UnknownNameError, match="attributes found: open_area, soothing"):
        ds.load("pretty", data_dir=tmp_path)
    with pytest.raises(UnknownNameError, match="attributes found"):
        ds.load("rustic", data_dir=tmp_path)


def test_zero_one_labels_duplicates_and_env_dir(tmp_path, monkeypatch):
    extra = [("u5", "img0001", "brown", 1), ("u5", "img0001", "brown", 1),
             ("u5", "img0001", "brown", 0)]
    write_layout(tmp_path / "x", ["brown"], zero_one=True, extra_rows=extra)
    monkeypatch.setenv("MTLBENCH_SHOES_DIR", str(tmp_path / "x"))
    ts = Shoes(n_components=3).load("brown")
    assert ts.meta["duplicates"]["pairs_with_several_labels"] >= 1
    for t in range(ts.T):
        assert set(np.unique(ts.y(t))) == {-1.0, 1.0}


def test_bad_files_are_reported(tmp_path):
    write_layout(tmp_path / "shoes", ["brown"], extra_rows=[("u1", "nosuchimage", "brown", 1)])
    with pytest.raises(DataValidationError, match="nosuchimage"):
        Shoes().load("brown", data_dir=tmp_path)
    write_layout(tmp_path / "s2" / "shoes", ["brown"])
    fp = tmp_path / "s2" / "shoes" / "features.npy"
    fp.write_bytes(fp.read_bytes()[:200])  # truncated
    with pytest.raises(DatasetUnavailableError, match="truncated"):
        Shoes().load("brown", data_dir=tmp_path / "s2")
    write_layout(tmp_path / "s3" / "shoes", ["brown"], extra_rows=[("u1", "img0001", "brown", 2)])
    with pytest.raises(DataValidationError, match="labels must be in"):
        Shoes().load("brown", data_dir=tmp_path / "s3")


def test_folder_of_another_dataset_is_not_taken(tmp_path):
    write_layout(tmp_path, ["cluttered"])
    (tmp_path / "dataset.json").write_text(json.dumps({"name": "sun"}))
    assert Shoes().availability(data_dir=tmp_path) == "needs local files"
    assert SUN().availability(data_dir=tmp_path) == "in data-dir"


def test_import_attributes_from_csv(tmp_path):
    rng = np.random.default_rng(0)
    n, d = 60, 6
    F = rng.standard_normal((n, d))
    with open(tmp_path / "feat.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["image"] + [f"f{j}" for j in range(d)])
        for i in range(n):
            w.writerow([f"im{i}"] + F[i].tolist())
    with open(tmp_path / "votes.tsv", "w", newline="") as fh:
        w = csv.writer(fh, delimiter="\t")
        w.writerow(["worker", "image", "answer"])
        for u in range(5):
            for i in rng.choice(n, 30, replace=False):
                answer = "yes" if F[i, 0] + 0.2 * rng.standard_normal() > 0 else "no"
                w.writerow([f"w{u}", f"im{i}", answer])
    rep = import_attributes(tmp_path / "out", features=tmp_path / "feat.csv",
                            labels=tmp_path / "votes.tsv", user_column="worker",
                            item_column="image", label_column="answer",
                            attribute="Is Shiny", name="mylab")
    assert rep["attributes"] == ["is_shiny"] and rep["items"] == n and rep["labels"] == 150
    out = tmp_path / "out"
    np.testing.assert_array_equal(np.load(out / "features.npy"), F)
    ds = PersonalizedAttributes(n_components=None)
    assert ds.problems(data_dir=out) == ["is_shiny"]
    ts = ds.load("is_shiny", data_dir=out)
    assert ts.d == d and ts.T >= 1
    with pytest.raises(DataValidationError, match="already holds"):
        import_attributes(out, features=tmp_path / "feat.csv", labels=tmp_path / "votes.tsv",
                          user_column="worker", item_column="image", label_column="answer",
                          attribute="x")


def test_import_command_and_compare_on_shoes(tmp_path, monkeypatch):
    """`mtlbench import-attributes` then `mtlbench compare --datasets shoes --data-dir ...`."""
    from mtlbench.cli import cli

    src = tmp_path / "raw"
    F, ids = write_layout(src, ["Brown", "pointy"], n_items=70, d=10, n_users=8, per_user=40)
    np.save(src / "f.npy", F)
    runner = CliRunner()
    res = runner.invoke(cli, ["import-attributes", "--out", str(tmp_path / "data" / "shoes"),
                              "--features", str(src / "f.npy"),
                              "--item-ids", str(src / "items.txt"),
                              "--labels", str(src / "labels.csv"), "--name", "shoes",
                              "--n-components", "5"])
    assert res.exit_code == 0, res.output
    assert "brown: 7 users kept" in res.output
    res = runner.invoke(cli, ["compare", "--datasets", "shoes/brown,shoes/pointy",
                              "--models", "stl", "--reps", "1",
                              "--data-dir", str(tmp_path / "data"),
                              "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 0, res.output
    assert "shoes/brown" in res.output and "0 failed" in res.output
    # missing folder: the clear message, exit status 2, no traceback
    res = runner.invoke(cli, ["compare", "--datasets", "shoes/brown", "--models", "stl",
                              "--reps", "1", "--data-dir", str(tmp_path / "empty"),
                              "--store", str(tmp_path / "r2.sqlite")])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_normalize_attribute():
    assert normalize_attribute(" Open Area ") == "open_area"
    assert normalize_attribute("open-area") == "open_area"


# ------------------------------------------------------------------ other attribute names (#16.6)
def test_shoes_problems_are_the_attributes_found(tmp_path):
    write_layout(tmp_path / "shoes", ["pointy", "shiny"])
    ds = Shoes(n_components=None)
    assert ds.problems() == list(SHOES_ATTRS)            # no folder: the paper's list
    assert ds.problems(data_dir=tmp_path) == ["pointy", "shiny"]
    assert ds.load("shiny", data_dir=tmp_path).meta["attribute"] == "shiny"
    with pytest.raises(UnknownNameError) as ei:
        ds.load("brown", data_dir=tmp_path)
    msg = str(ei.value)
    for part in ("'brown'", "attributes found: pointy, shiny", "shoes/pointy", "personalized",
                 str(tmp_path / "shoes")):
        assert part in msg, part


def test_compare_on_shoes_with_other_attributes(tmp_path):
    from click.testing import CliRunner

    from mtlbench.cli import cli

    write_layout(tmp_path / "shoes", ["pointy", "shiny"])
    store = str(tmp_path / "r.sqlite")
    res = CliRunner().invoke(cli, ["compare", "--datasets", "shoes", "--models", "stl",
                                   "--reps", "1", "--store", store, "--data-dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "shoes/pointy" in res.output and "shoes/shiny" in res.output
    res = CliRunner().invoke(cli, ["compare", "--datasets", "shoes/brown", "--models", "stl",
                                   "--reps", "1", "--store", store, "--data-dir", str(tmp_path),
                                   "--dry-run"])
    assert res.exit_code == 2 and "shoes/pointy" in res.output and "personalized" in res.output


# ------------------------------------------------------------------ bad data files (#14.14)
def test_items_txt_encodings(tmp_path):
    F, ids = write_layout(tmp_path / "shoes", ["brown"])
    ip = tmp_path / "shoes" / "items.txt"
    text = "\n".join(ids) + "\n"
    ip.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))            # UTF-8 BOM: accepted
    ref = Shoes(n_components=None).load("brown", data_dir=tmp_path)
    assert ref.T == 11 and ref.meta["notes"] == ["items.txt read as utf-8-sig (byte-order mark)"]
    ip.write_bytes(text.encode("utf-16"))                              # UTF-16 with BOM: accepted
    assert Shoes(n_components=None).load("brown", data_dir=tmp_path).T == 11
    ip.write_bytes(text.encode("utf-16-le"))                           # no BOM: ambiguous
    with pytest.raises(DataValidationError, match=r"items.txt is not UTF-8.*UTF-16"):
        Shoes(n_components=None).load("brown", data_dir=tmp_path)
    ip.write_bytes(("caf\u00e9\n" + "\n".join(ids[1:]) + "\n").encode("latin-1"))
    with pytest.raises(DataValidationError, match=r"items.txt is not UTF-8.*Latin-1"):
        Shoes(n_components=None).load("brown", data_dir=tmp_path)


@pytest.mark.parametrize("case", ["npz", "huge", "complex"])
def test_bad_feature_arrays_are_named(tmp_path, case):
    F, _ = write_layout(tmp_path / "shoes", ["brown"])
    fp = tmp_path / "shoes" / "features.npy"
    if case == "npz":
        with open(fp, "wb") as fh:
            np.savez(fh, features=F)
        match = "npz archive"
    elif case == "huge":
        F[3, 4] = 1e300
        np.save(fp, F)
        match = "too large.*row 3, column 4"
    else:
        np.save(fp, F + 1j * F)
        match = "complex"
    with pytest.raises(DataValidationError, match=match):
        Shoes().load("brown", data_dir=tmp_path)


def test_import_force_replaces_only_its_files(tmp_path):
    F, ids = write_layout(tmp_path / "src", ["brown"])
    out = tmp_path / "out"
    out.mkdir()
    np.save(out / "raw_features.npy", F)                 # inputs live in the output folder
    (out / "raw_ids.txt").write_text("\n".join(ids) + "\n")
    (out / "notes.md").write_text("mine")
    (out / "labels.csv").write_text("old")               # an old output
    kw = dict(features=out / "raw_features.npy", item_ids=out / "raw_ids.txt",
              labels=tmp_path / "src" / "labels.csv", name="shoes")
    with pytest.raises(DataValidationError, match=r"already holds \['labels.csv'\]"):
        import_attributes(out, **kw)
    import_attributes(out, force=True, **kw)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["dataset.json", "features.npy", "items.txt", "labels.csv", "notes.md",
                     "raw_features.npy", "raw_ids.txt"]
    assert (out / "notes.md").read_text() == "mine"
    import_attributes(out, force=True, **kw)             # again: idempotent
    with pytest.raises(DataValidationError, match="would be overwritten"):
        import_attributes(out, features=out / "features.npy", labels=out / "labels.csv",
                          item_ids=out / "items.txt", force=True)
