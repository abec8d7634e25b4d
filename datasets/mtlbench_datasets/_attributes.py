"""The personalized-attribute folder layout: its files, the label reader, and the importer.

Private helper of ``personalized.py`` (which re-exports every name here): the layout's file
names and help text, ``normalize_attribute``, the reader of ``labels.csv``, and
``import_attributes`` / the ``mtlbench import-attributes`` command, which turn CSV/NPY files
into the layout.  The layout itself is documented in ``personalized.py`` and docs/datasets.md.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from mtlbench import DatasetUnavailableError, DataValidationError, MTLBenchError

from ._common import check_features, load_npy, read_text_lines, text_encoding

FEATURES_FILE = "features.npy"
ITEMS_FILE = "items.txt"
LABELS_FILE = "labels.csv"
META_FILE = "dataset.json"
LABEL_COLUMNS = ("user", "item", "attribute", "label")
OUTPUT_FILES = (FEATURES_FILE, ITEMS_FILE, LABELS_FILE, META_FILE)

LAYOUT_HELP = f"""\
folder layout (personalized attributes; one problem per attribute, one task per user):
  {FEATURES_FILE}  float array (n_items, d), one feature row per item (numpy.save, no pickle)
  {ITEMS_FILE}     n_items lines: item id of each row of {FEATURES_FILE}
                (optional; default: row numbers)
  {LABELS_FILE}    CSV with header user,item,attribute,label; label in {{-1,+1}} or {{0,1}}
  {META_FILE}  optional: {{"name", "attributes", "source", "features"}}
build it from CSV/NPY files with `mtlbench import-attributes --help`; see docs/datasets.md"""


def normalize_attribute(name: str) -> str:
    """Attribute spelling used as problem name: lower case, spaces and hyphens -> '_'."""
    return "_".join(str(name).strip().lower().replace("-", " ").split())


# --------------------------------------------------------------------------- reading the layout
def _read_labels(path: Path, where: str):
    import pandas as pd

    enc, _ = text_encoding(path, where)
    try:
        df = pd.read_csv(path, dtype={"user": str, "item": str, "attribute": str},
                         keep_default_na=False, encoding=enc)
    except Exception as exc:  # noqa: BLE001
        raise DatasetUnavailableError(f"{where}: {path} cannot be read as CSV "
                                      f"({type(exc).__name__}: {exc})") from None
    missing = [c for c in LABEL_COLUMNS if c not in df.columns]
    if missing:
        raise DatasetUnavailableError(
            f"{where}: {path} lacks column(s) {missing}; it has {list(df.columns)}. "
            f"Expected header: {','.join(LABEL_COLUMNS)}")
    lab = pd.to_numeric(df["label"], errors="coerce")
    if lab.isna().any():
        r = int(np.flatnonzero(lab.isna().to_numpy())[0])
        raise DataValidationError(f"{where}: {path} row {r + 2}: label "
                                  f"{df['label'].iloc[r]!r} is not a number")
    vals = set(np.unique(lab.to_numpy()).tolist())
    if vals <= {0.0, 1.0}:
        y = np.where(lab.to_numpy() > 0, 1.0, -1.0)
    elif vals <= {-1.0, 1.0}:
        y = lab.to_numpy(dtype=np.float64)
    else:
        raise DataValidationError(
            f"{where}: {path}: labels must be in {{-1, +1}} (or {{0, 1}}), found "
            f"{sorted(vals)[:6]}")
    attrs = df["attribute"].map(normalize_attribute).to_numpy(dtype=object)
    return df["user"].to_numpy(dtype=object), df["item"].to_numpy(dtype=object), attrs, y


def _file_key(p: Path) -> tuple:
    st = p.stat()
    return (str(p.resolve()), st.st_size, st.st_mtime_ns)


# --------------------------------------------------------------------------- importer
_POSITIVE = {"1", "1.0", "+1", "true", "yes", "y", "t", "pos", "positive"}
_NEGATIVE = {"-1", "-1.0", "0", "0.0", "false", "no", "n", "f", "neg", "negative"}


def _read_table(path: Path, what: str):
    import pandas as pd

    sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    enc, _ = text_encoding(path, f"import-attributes: {what}")
    try:
        return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, encoding=enc)
    except Exception as exc:  # noqa: BLE001
        raise DataValidationError(f"import-attributes: {what} {path} cannot be read "
                                  f"({type(exc).__name__}: {exc})") from None


def import_attributes(out: str | os.PathLike, *, features: str | os.PathLike,
                      labels: str | os.PathLike, item_ids: str | os.PathLike | None = None,
                      id_column: str | None = None,
                      user_column: str = "user", item_column: str = "item",
                      attribute_column: str | None = "attribute", label_column: str = "label",
                      attribute: str | None = None, positive: Sequence[str] | None = None,
                      name: str | None = None, source: str = "", feature_description: str = "",
                      drop_unknown_items: bool = False, force: bool = False) -> dict[str, Any]:
    """Write the folder layout from CSV/NPY inputs; returns a report dict.

    ``features``: ``.npy`` (rows = items; ids from ``item_ids`` (a text file, one per line) or
    row numbers) or ``.csv``/``.tsv`` (column ``id_column``, default the first, holds item ids;
    all other columns numeric).  ``labels``: ``.csv``/``.tsv`` with user / item / attribute /
    label columns (names configurable; without an attribute column give ``attribute``).
    Label values: ``positive`` lists the values meaning +1 (everything else -1); by default
    1/+1/true/yes are +1 and -1/0/false/no are -1, anything else is an error.

    ``out`` may hold other files: only the layout's own files (features.npy, items.txt,
    labels.csv, dataset.json) are written; existing ones are replaced only with ``force``
    (each atomically, after every input was read), nothing else in ``out`` is touched, and an
    input file that is one of those outputs is refused (it would be overwritten).
    """
    out = Path(out).expanduser()
    fpath = Path(features).expanduser()
    lpath = Path(labels).expanduser()
    outputs = [out / f for f in OUTPUT_FILES]
    inputs = [p for p in (fpath, lpath, Path(item_ids).expanduser() if item_ids else None) if p]
    clash = [str(p) for p in inputs
             if any(p.exists() and o.exists() and os.path.samefile(p, o) for o in outputs)]
    if clash:
        raise DataValidationError(
            f"import-attributes: input file(s) {clash} would be overwritten by the output in "
            f"{out}; move them elsewhere or choose another --out")
    existing = [o.name for o in outputs if o.exists()]
    if existing and not force:
        raise DataValidationError(
            f"import-attributes: {out} already holds {existing} (use --force to replace these "
            "files; other files in the folder are never touched)")
    if not fpath.is_file():
        raise DataValidationError(f"import-attributes: features file {fpath} not found")
    where = "import-attributes"
    if fpath.suffix.lower() == ".npy":
        F = check_features(load_npy(fpath, where), where, fpath)
        if item_ids is not None:
            ids = [ln for ln in read_text_lines(Path(item_ids).expanduser(), where)[0] if ln]
        else:
            ids = [str(i) for i in range(F.shape[0] if F.ndim else 0)]
    else:
        tab = _read_table(fpath, "features")
        idc = id_column or tab.columns[0]
        if idc not in tab.columns:
            raise DataValidationError(f"import-attributes: {fpath} has no column {idc!r}; "
                                      f"columns: {list(tab.columns)}")
        ids = tab[idc].astype(str).str.strip().tolist()
        num = tab.drop(columns=[idc])
        try:
            F = num.to_numpy(dtype=np.float64)
        except ValueError as exc:
            raise DataValidationError(
                f"import-attributes: {fpath}: non-numeric feature value ({exc})") from None
    F = check_features(F, where, fpath)
    if len(ids) != F.shape[0]:
        raise DataValidationError(
            f"import-attributes: {len(ids)} item ids for {F.shape[0]} feature rows")
    if len(set(ids)) != len(ids):
        raise DataValidationError("import-attributes: duplicate item ids in the features")
    tab = _read_table(lpath, "labels")
    need = [user_column, item_column, label_column] \
        + ([attribute_column] if attribute is None else [])
    miss = [c for c in need if c is None or c not in tab.columns]
    if miss:
        raise DataValidationError(
            f"import-attributes: {lpath} lacks column(s) {miss}; columns: {list(tab.columns)}"
            + ("; give --attribute NAME if the file holds one attribute" if attribute is None
               else ""))
    raw = tab[label_column].astype(str).str.strip().str.lower()
    if positive:
        pos_set = {str(p).strip().lower() for p in positive}
        y = np.where(raw.isin(pos_set), 1, -1)
    else:
        is_pos, is_neg = raw.isin(_POSITIVE), raw.isin(_NEGATIVE)
        bad = ~(is_pos | is_neg)
        if bad.any():
            vals = sorted(set(raw[bad].tolist()))[:5]
            raise DataValidationError(
                f"import-attributes: {lpath}: label values {vals} are not recognised; give "
                "--positive VALUE for the value(s) that mean +1")
        y = np.where(is_pos, 1, -1)
    attrs = (tab[attribute_column] if attribute is None else np.full(len(tab), attribute))
    attrs = [normalize_attribute(a) for a in attrs]
    items = tab[item_column].astype(str).str.strip().tolist()
    known = set(ids)
    unknown = [i for i in items if i not in known]
    n_unknown_rows = len(unknown)
    if unknown and not drop_unknown_items:
        raise DataValidationError(
            f"import-attributes: {n_unknown_rows} label rows name items without features, e.g. "
            f"{sorted(set(unknown))[:5]} (use --drop-unknown-items to drop them)")
    users = tab[user_column].astype(str).str.strip().tolist()
    rows = [(u, i, a, int(v)) for u, i, a, v in zip(users, items, attrs, y) if i in known]

    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".import-attributes.", dir=out))
    try:
        np.save(tmp / FEATURES_FILE, F)
        (tmp / ITEMS_FILE).write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")
        import csv

        with open(tmp / LABELS_FILE, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(LABEL_COLUMNS)
            w.writerows(rows)
        attr_list = sorted({r[2] for r in rows})
        meta = {"name": name or out.name, "attributes": attr_list, "source": source,
                "features": feature_description or f"{F.shape[1]} features from {fpath.name}",
                "imported_from": {"features": str(fpath), "labels": str(lpath)}}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        for f in OUTPUT_FILES:  # each file replaced atomically; nothing else in out is touched
            os.replace(tmp / f, out / f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"out": str(out), "items": F.shape[0], "features": F.shape[1], "labels": len(rows),
            "users": len(set(users)), "attributes": attr_list,
            "dropped_unknown_item_rows": n_unknown_rows}


def _import_command(dataset_cls):
    """The ``import-attributes`` command; ``dataset_cls`` (the generic personalized-attribute
    data set, passed in so this module does not import ``personalized``) loads the written
    folder once as a check."""
    import click

    @click.command("import-attributes")
    @click.option("--out", "out", required=True, type=click.Path(file_okay=False),
                  help="Folder to write (e.g. ~/data/shoes; then --data-dir ~/data).")
    @click.option("--features", required=True, type=click.Path(exists=True, dir_okay=False),
                  help=".npy (rows = items) or .csv/.tsv (id column + numeric columns).")
    @click.option("--item-ids", type=click.Path(exists=True, dir_okay=False),
                  help="For .npy features: text file with one item id per row "
                       "(default: row numbers).")
    @click.option("--id-column", help="For CSV features: the item-id column (default: the first).")
    @click.option("--labels", required=True, type=click.Path(exists=True, dir_okay=False),
                  help="CSV/TSV of personal labels (one row per user, item, attribute).")
    @click.option("--user-column", default="user", show_default=True)
    @click.option("--item-column", default="item", show_default=True)
    @click.option("--attribute-column", default="attribute", show_default=True)
    @click.option("--label-column", default="label", show_default=True)
    @click.option("--attribute",
                  help="Attribute name when the labels file has no attribute column.")
    @click.option("--positive", multiple=True,
                  help="Label value meaning +1 (repeatable); default: 1/+1/true/yes vs "
                       "-1/0/false/no.")
    @click.option("--name",
                  help="Data set name written to dataset.json (default: the folder name).")
    @click.option("--source", default="", help="Where the data comes from (citation).")
    @click.option("--feature-description", default="", help="What the features are.")
    @click.option("--drop-unknown-items", is_flag=True,
                  help="Drop labels of items without features.")
    @click.option("--force", is_flag=True,
                  help="Replace the layout files already in --out (other files there are kept).")
    @click.option("--n-components", default=100, show_default=True, type=int,
                  help="PCA components used for the check load (0: no PCA).")
    def cmd(out, features, item_ids, id_column, labels, user_column, item_column, attribute_column,
            label_column, attribute, positive, name, source, feature_description,
            drop_unknown_items, force, n_components):
        """Turn CSV/NPY files into the personalized-attribute folder layout, then load it once."""
        try:
            rep = import_attributes(
                out, features=features, labels=labels, item_ids=item_ids, id_column=id_column,
                user_column=user_column, item_column=item_column, attribute_column=attribute_column,
                label_column=label_column, attribute=attribute, positive=positive or None,
                name=name, source=source, feature_description=feature_description,
                drop_unknown_items=drop_unknown_items, force=force)
            click.echo(f"wrote {rep['out']}: {rep['items']} items x {rep['features']} features, "
                       f"{rep['labels']} labels by {rep['users']} users, attributes: "
                       f"{', '.join(rep['attributes'])}")
            if rep["dropped_unknown_item_rows"]:
                click.echo(f"dropped {rep['dropped_unknown_item_rows']} label rows naming items "
                           f"without features")
            ds = dataset_cls(n_components=n_components or None)
            for a in rep["attributes"]:
                try:
                    s = ds.load(a, data_dir=rep["out"]).summary()
                    click.echo(f"  {a}: {s['tasks']} users kept (min_minority=8), "
                               f"{s['items']} items, {s['features']} features, {s['labels']} "
                               f"labels, positive share {s['positive_share']}")
                except MTLBenchError as exc:
                    click.echo(f"  {a}: {exc}")
        except MTLBenchError as exc:
            raise click.ClickException(str(exc)) from None

    return cmd

