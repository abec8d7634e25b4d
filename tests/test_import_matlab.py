"""``import-attributes`` on MATLAB releases: features n x d or d x n, item ids from a variable
of names, index columns with an explicit --index-base, --drop-label, v7.3 (HDF5) files, and a
summary of what was read.  Every file is written here by ``scipy.io.savemat`` (or h5py, in
MATLAB's v7.3 layout) in the layouts of the public releases (WhittleSearch's
``shoes_attributes.mat`` with ``im_names``; SUN Attribute's ``images.mat`` and
``attributes.mat``)."""
from __future__ import annotations

import csv
import sys

import numpy as np
import pytest
import scipy.io as sio
from click.testing import CliRunner

from mtlbench import DataValidationError
from mtlbench_datasets.personalized import PersonalizedAttributes, import_attributes

N, D = 40, 6
ATTRS = ["pointy", "open"]


def _release(tmp_path, rng=None):
    """A WhittleSearch-like file: GIST-like features d x n (one column per image), the image
    names (1 x n cell), the attribute names, and a labels matrix [user, image, attribute,
    answer] with 1-based image and attribute numbers and 0 for 'unsure'."""
    rng = rng or np.random.default_rng(0)
    F = rng.standard_normal((N, D))
    im_names = np.array([f"img_{i + 1:04d}.jpg" for i in range(N)], dtype=object).reshape(1, N)
    rows = []
    for user in range(1, 7):
        for img in rng.choice(np.arange(1, N + 1), 30, replace=False):   # 1-based
            for att in (1, 2):
                score = F[img - 1, att - 1] + 0.3 * rng.standard_normal()
                answer = 0 if abs(score) < 0.15 else (1 if score > 0 else -1)
                rows.append([user, img, att, answer])
    labels = np.array(rows, dtype=np.float64)
    labels[0, 1] = N          # the last image is labelled: only 1-based numbering fits
    path = tmp_path / "shoes_attributes.mat"
    sio.savemat(path, {"gist_feat": F.T, "im_names": im_names,
                       "attribute_names": np.array(ATTRS, dtype=object).reshape(1, 2),
                       "mturk_labels": labels})
    return path, F, [str(x) for x in im_names.ravel()], labels


def _kw(path, **extra):
    return dict(features=path, features_var="gist_feat", labels=path, item_ids_var="im_names",
                items_by="position", labels_var="mturk_labels", attribute_names=path,
                attribute_names_var="attribute_names", **extra)


def _rows(out):
    with open(out / "labels.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def test_one_based_release_imports_with_index_base_1(tmp_path):
    path, F, names, labels = _release(tmp_path)
    out = tmp_path / "shoes"
    rep = import_attributes(out, index_base=1, drop_label=["0"], name="shoes", **_kw(path))
    # d x n features recognised from the 40 image names, turned into one row per image
    np.testing.assert_array_equal(np.load(out / "features.npy"), F)
    assert rep["features_layout"].startswith("columns") and rep["items"] == N
    assert (out / "items.txt").read_text().split() == names
    kept = labels[labels[:, 3] != 0]
    rows = _rows(out)
    assert len(rows) == len(kept) == rep["labels"]
    for r, (user, img, att, answer) in zip(rows, kept):
        assert r["user"] == str(int(user)) and r["item"] == names[int(img) - 1]
        assert r["attribute"] == ATTRS[int(att) - 1] and int(r["label"]) == int(answer)
    assert rep["dropped_label_rows"] == {"0": int((labels[:, 3] == 0).sum())}
    assert rep["classes"] == {"+1": int((kept[:, 3] > 0).sum()), "-1": int((kept[:, 3] < 0).sum())}
    assert rep["users"] == 6 and rep["labels_per_user"]["max"] <= 60
    ts = PersonalizedAttributes(n_components=None).load("pointy", data_dir=out)
    assert ts.T >= 1 and ts.d == D


def test_without_index_base_the_import_is_refused_naming_the_fix(tmp_path):
    path, *_ = _release(tmp_path)
    out = tmp_path / "shoes"
    with pytest.raises(DataValidationError) as ei:
        import_attributes(out, drop_label=["0"], **_kw(path))
    msg = str(ei.value)
    assert "--index-base 1" in msg and "only --index-base 1 fits" in msg
    assert "positions of attribute names" in msg or "positions of feature rows" in msg
    assert not out.exists() or not any(out.iterdir())          # nothing written
    # the wrong base: refused, the base that fits named, nothing dropped silently
    with pytest.raises(DataValidationError, match=r"position 40 is outside the 40 feature "
                                                  r"rows.*counted from 0.*fit --index-base 1"):
        import_attributes(out, drop_label=["0"], index_base=0, drop_unknown_items=True,
                          attribute="pointy", features=path, features_var="gist_feat",
                          labels=path, item_ids_var="im_names", items_by="position",
                          labels_var="mturk_labels", label_columns=["user", "item", "-", "label"])


def test_ambiguous_indices_are_refused_too(tmp_path):
    """Positions 1 .. n-1 fit both bases: refused, saying both are possible."""
    path, F, names, labels = _release(tmp_path)
    labels = labels[labels[:, 1] < N]
    labels = labels[labels[:, 1] > 0]
    sio.savemat(tmp_path / "l.mat", {"votes": labels})
    with pytest.raises(DataValidationError, match="both are possible"):
        import_attributes(tmp_path / "o", features=path, features_var="gist_feat",
                          item_ids_var="im_names", items_by="position",
                          labels=tmp_path / "l.mat", attribute="pointy",
                          label_columns=["user", "item", "-", "label"], drop_label=["0"])


def test_layout_and_variables_are_asked_for_when_they_cannot_be_told(tmp_path):
    rng = np.random.default_rng(1)
    sio.savemat(tmp_path / "sq.mat", {"F": rng.standard_normal((5, 5)),
                                      "names": np.array([f"i{k}" for k in range(5)],
                                                        dtype=object)})
    lab = tmp_path / "l.csv"
    lab.write_text("user,item,label\nu,i0,1\n")
    with pytest.raises(DataValidationError, match="either dimension could count the items: "
                                                  "give --features-layout rows or columns"):
        import_attributes(tmp_path / "o", features=tmp_path / "sq.mat", item_ids_var="names",
                          labels=lab, attribute="a")
    sio.savemat(tmp_path / "two.mat", {"A": rng.standard_normal((5, 3)),
                                       "B": rng.standard_normal((3, 5))})
    with pytest.raises(DataValidationError, match=r"2 2-D numeric variable\(s\) \(A, B\); "
                                                  r"name the one to use with --features-var"):
        import_attributes(tmp_path / "o", features=tmp_path / "two.mat", labels=lab,
                          attribute="a", index_base=0)
    with pytest.raises(DataValidationError, match="give --features-layout rows"):
        import_attributes(tmp_path / "o", features=tmp_path / "two.mat", features_var="A",
                          labels=lab, attribute="a", index_base=0)


def test_sun_style_names_and_attribute_lists(tmp_path):
    """SUN Attribute: images.mat (an n x 1 cell of image paths), attributes.mat (a cell of
    attribute words); features as rows in a .npy; labels name images by path."""
    rng = np.random.default_rng(2)
    images = [f"a/abbey/sun_{k:03d}.jpg" for k in range(N)]
    sio.savemat(tmp_path / "images.mat", {"images": np.array(images, dtype=object)
                                          .reshape(N, 1)})
    sio.savemat(tmp_path / "attributes.mat", {"attributes": np.array(
        ["cluttered space", "open area", "rustic"], dtype=object).reshape(3, 1)})
    F = rng.standard_normal((N, D))
    np.save(tmp_path / "f.npy", F)
    with open(tmp_path / "votes.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["worker", "image", "attr", "vote"])
        for u in range(4):
            for k in rng.choice(N, 25, replace=False):
                w.writerow([f"w{u}", images[k], 2, "yes" if F[k, 0] > 0 else "no"])
    rep = import_attributes(tmp_path / "sun", features=tmp_path / "f.npy",
                            item_ids=tmp_path / "images.mat", labels=tmp_path / "votes.csv",
                            user_column="worker", item_column="image",
                            attribute_column="attr", label_column="vote",
                            attribute_names=tmp_path / "attributes.mat", index_base=1)
    assert rep["attributes"] == ["open_area"] and rep["features_layout"].startswith("rows")
    assert rep["index_base"] == 1 and rep["labels"] == 100
    assert (tmp_path / "sun" / "items.txt").read_text().split() == images


def test_ids_given_as_numbers_hint_at_index_base(tmp_path):
    path, *_ = _release(tmp_path)
    lab = tmp_path / "l.csv"
    lab.write_text("user,item,label\nu,3,1\nu,4,-1\n")
    with pytest.raises(DataValidationError, match="whole numbers: if they are positions of "
                                                  "the feature rows, give --items-by position "
                                                  "and --index-base 0 or 1"):
        import_attributes(tmp_path / "o", features=path, features_var="gist_feat",
                          item_ids_var="im_names", labels=lab, attribute="a")


def _write_v73(path, F_t, names, labels):
    """A MATLAB v7.3 file as MATLAB writes it: HDF5 behind a 512-byte header, arrays
    transposed, text as uint16 characters, cell arrays as references into #refs#."""
    h5py = pytest.importorskip("h5py", reason="h5py (pip install 'mtlbench[mat]') reads v7.3")
    with h5py.File(path, "w", userblock_size=512) as f:
        for key, arr in (("gist_feat", F_t), ("mturk_labels", labels)):
            ds = f.create_dataset(key, data=np.asarray(arr, dtype=np.float64).T)
            ds.attrs["MATLAB_class"] = np.bytes_("double")
        refs = f.create_group("#refs#")
        cell = np.empty((len(names), 1), dtype=h5py.ref_dtype)   # MATLAB 1 x n, stored n x 1
        for k, name in enumerate(names):
            ds = refs.create_dataset(f"n{k}", data=np.array([[ord(c)] for c in name],
                                                            dtype=np.uint16))
            ds.attrs["MATLAB_class"] = np.bytes_("char")
            cell[k, 0] = ds.ref
        ds = f.create_dataset("im_names", data=cell)
        ds.attrs["MATLAB_class"] = np.bytes_("cell")
    with open(path, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: (test)".ljust(116))


def test_v73_files_read_like_v5(tmp_path):
    path, F, names, labels = _release(tmp_path)
    v73 = tmp_path / "v73.mat"
    _write_v73(v73, F.T, names, labels)
    kw = dict(index_base=1, drop_label=["0"], attribute="pointy",
              label_columns=["user", "item", "-", "label"], item_ids_var="im_names",
              items_by="position", labels_var="mturk_labels", features_var="gist_feat")
    a = import_attributes(tmp_path / "a", features=path, labels=path, **kw)
    b = import_attributes(tmp_path / "b", features=v73, labels=v73, **kw)
    for f in ("features.npy",):
        np.testing.assert_array_equal(np.load(tmp_path / "a" / f), np.load(tmp_path / "b" / f))
    assert _rows(tmp_path / "a") == _rows(tmp_path / "b") and a["labels"] == b["labels"]
    assert (tmp_path / "b" / "items.txt").read_text().split() == names


def test_v73_without_h5py_says_what_to_install(tmp_path, monkeypatch):
    path, F, names, labels = _release(tmp_path)
    v73 = tmp_path / "v73.mat"
    _write_v73(v73, F.T, names, labels)
    monkeypatch.setitem(sys.modules, "h5py", None)
    with pytest.raises(DataValidationError, match=r"v7.3 file \(HDF5\); reading it needs h5py: "
                                                  r"pip install 'mtlbench\[mat\]'"):
        import_attributes(tmp_path / "o", features=v73, features_var="gist_feat", labels=v73,
                          item_ids_var="im_names", index_base=1)


def test_the_command_inspects_imports_and_summarises(tmp_path):
    from mtlbench.cli import cli

    path, F, names, labels = _release(tmp_path)
    runner = CliRunner()
    res = runner.invoke(cli, ["import-attributes", "--inspect", str(path)])
    assert res.exit_code == 0, res.output
    assert "im_names: cell/text 1x40, e.g. 'img_0001.jpg'" in res.output
    assert "gist_feat: numeric 6x40 float64" in res.output
    args = ["import-attributes", "--out", str(tmp_path / "shoes"), "--features", str(path),
            "--features-var", "gist_feat", "--item-ids-var", "im_names", "--items-by",
            "position", "--labels", str(path), "--labels-var",
            "mturk_labels", "--attribute-names", str(path), "--attribute-names-var",
            "attribute_names", "--drop-label", "0", "--n-components", "3", "--name", "shoes"]
    res = runner.invoke(cli, args)
    assert res.exit_code == 2 and "--index-base 1" in res.output, res.output
    assert "Traceback" not in res.output
    res = runner.invoke(cli, args + ["--index-base", "1"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert f"{N} items x {D} features" in out and "one column per item" in out
    assert "labels per user" in out and "positive" in out and "negative" in out
    assert "dropped" in out and "--drop-label" in out
    assert "index columns read as positions counted from 1" in out
