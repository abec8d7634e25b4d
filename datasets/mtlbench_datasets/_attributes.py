"""The personalized-attribute folder layout: its files, the label reader, and the importer.

Private helper of ``personalized.py`` (which re-exports every name here): the layout's file
names and help text, ``normalize_attribute``, the reader of ``labels.csv``, and
``import_attributes`` / the ``mtlbench import-attributes`` command, which turn CSV, NumPy and
MATLAB files (read by ``_matfile.py``) into the layout.  The layout itself is documented in
``personalized.py`` and docs/datasets.md.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

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
build it from CSV/NPY/MAT files with `mtlbench import-attributes --help`; see docs/datasets.md"""


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
#: the columns of a labels matrix in a MATLAB file, by its number of columns, unless
#: --label-columns names them
_MAT_LABEL_COLUMNS = {4: ("user", "item", "attribute", "label"), 3: ("user", "item", "label")}
WHERE = "import-attributes"


def _read_table(path: Path, what: str):
    import pandas as pd

    sep = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    enc, _ = text_encoding(path, f"{WHERE}: {what}")
    try:
        return pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, encoding=enc)
    except Exception as exc:  # noqa: BLE001
        raise DataValidationError(f"{WHERE}: {what} {path} cannot be read "
                                  f"({type(exc).__name__}: {exc})") from None


def _number_text(v: float) -> str:
    """A number of a MATLAB matrix as the text a CSV would hold (``3.0`` -> ``"3"``)."""
    return str(int(v)) if np.isfinite(v) and v == int(v) else repr(float(v))


def _mat_labels(path: Path, var: str | None, columns: Sequence[str] | None):
    """The labels matrix of a MATLAB file as a table of text, its columns named."""
    import pandas as pd

    from ._matfile import load_mat, matrix

    key, M = matrix(load_mat(path, WHERE), var, path, WHERE, "--labels-var")
    names = list(columns) if columns else list(_MAT_LABEL_COLUMNS.get(M.shape[1], ()))
    if len(names) != M.shape[1]:
        raise DataValidationError(
            f"{WHERE}: the labels matrix {key!r} of {path} has {M.shape[1]} columns; name them "
            "in order with --label-columns (e.g. user,item,attribute,label; '-' for a column "
            "to ignore)")
    table = {n: [_number_text(v) for v in M[:, j]] for j, n in enumerate(names) if n != "-"}
    return pd.DataFrame(table), f"{path} ({key})"


def _read_item_ids(item_ids: Path | None, var: str | None, features: Path) -> list[str] | None:
    """Item ids from a text file (one per line) or a MATLAB variable of names (in the
    ``--item-ids`` file, else in the features file); None when none are given."""
    from ._matfile import is_mat, load_mat, names

    if item_ids is None and var is None:
        return None
    path = item_ids if item_ids is not None else features
    if is_mat(path):
        return names(load_mat(path, WHERE), var, path, WHERE, "--item-ids-var")[1]
    if var is not None:
        raise DataValidationError(f"{WHERE}: --item-ids-var names a variable of a MATLAB "
                                  f"file, but {path} is not a .mat file")
    return [ln for ln in read_text_lines(path, WHERE)[0] if ln]


def _orient(F: np.ndarray, layout: str, n_ids: int | None, path: Path, mat: bool
            ) -> tuple[np.ndarray, str]:
    """Items as rows: ``layout`` "rows" (n x d), "columns" (d x n) or "auto" (decided by the
    number of item ids; without ids a NumPy/CSV file is rows, a MATLAB file must be told)."""
    if F.ndim != 2:
        return F, "rows"  # check_features says what is wrong
    a, b = F.shape
    if layout == "auto":
        if n_ids is None:
            if mat:
                raise DataValidationError(
                    f"{WHERE}: the features of {path} are {a} x {b} and no item ids were "
                    "given to tell which dimension counts the items: give --features-layout "
                    "rows (one row per item) or columns (one column per item), or the item "
                    "names (--item-ids / --item-ids-var)")
            layout = "rows"
        elif a == n_ids and b == n_ids:
            raise DataValidationError(
                f"{WHERE}: the features of {path} are {a} x {b} with {n_ids} item ids, so "
                "either dimension could count the items: give --features-layout rows or "
                "columns")
        elif a == n_ids:
            layout = "rows"
        elif b == n_ids:
            layout = "columns"
        else:
            raise DataValidationError(
                f"{WHERE}: {n_ids} item ids, but the features of {path} are {a} x {b} (neither "
                "dimension has one entry per item)")
    if layout == "columns":
        return np.ascontiguousarray(F.T), f"columns (one column per item: {a} x {b} read as " \
                                          f"{b} items x {a} features)"
    return F, "rows (one row per item)"


def _positions(values: list[str], column: str, base: int | None, n: int, what: str,
               src: str) -> np.ndarray:
    """The 0-based positions that an index column's values name (``base`` 0 or 1, which
    must be given), or a refusal naming the option and what the data allows."""
    try:
        idx = np.array([int(float(v)) if float(v) == int(float(v)) else None for v in values],
                       dtype=object)
    except (ValueError, OverflowError):
        idx = None
    if idx is None or any(v is None for v in idx):
        bad = next((v for v in values if not _is_integer(v)), "?")
        raise DataValidationError(f"{WHERE}: column {column!r} of {src} holds {bad!r}, not a "
                                  f"position of {what}")
    idx = idx.astype(np.int64)
    lo, hi = (int(idx.min()), int(idx.max())) if idx.size else (0, 0)
    fits = [b for b in (0, 1) if lo >= b and hi <= n - 1 + b]
    if base is None:
        says = ("both are possible" if len(fits) == 2 else
                f"only --index-base {fits[0]} fits" if fits else "neither fits")
        raise DataValidationError(
            f"{WHERE}: column {column!r} of {src} holds positions of {what}; say where they "
            f"start: --index-base 1 (MATLAB counts from 1) or --index-base 0. Its values run "
            f"from {lo} to {hi} for {n} {what}: {says}")
    pos = idx - base
    out = (pos < 0) | (pos >= n)
    if out.any():
        v = int(idx[np.flatnonzero(out)[0]])
        other = [b for b in fits if b != base]
        raise DataValidationError(
            f"{WHERE}: column {column!r} of {src}: position {v} is outside the {n} {what} "
            f"counted from {base} (values {lo} to {hi})"
            + (f"; they fit --index-base {other[0]}" if other else ""))
    return pos


def _is_integer(text: str) -> bool:
    try:
        return float(text) == int(float(text))
    except (ValueError, OverflowError):
        return False


def import_attributes(out: str | os.PathLike, *, features: str | os.PathLike,
                      labels: str | os.PathLike, item_ids: str | os.PathLike | None = None,
                      id_column: str | None = None,
                      user_column: str = "user", item_column: str = "item",
                      attribute_column: str | None = "attribute", label_column: str = "label",
                      attribute: str | None = None, positive: Sequence[str] | None = None,
                      name: str | None = None, source: str = "", feature_description: str = "",
                      drop_unknown_items: bool = False, force: bool = False,
                      features_var: str | None = None, features_layout: str = "auto",
                      item_ids_var: str | None = None, labels_var: str | None = None,
                      label_columns: Sequence[str] | None = None,
                      attribute_names: str | os.PathLike | None = None,
                      attribute_names_var: str | None = None, index_base: int | None = None,
                      items_by: str | None = None, drop_label: Sequence[str] | None = None
                      ) -> dict[str, Any]:
    """Write the folder layout from CSV, NumPy or MATLAB inputs; returns what was read.

    ``features``: ``.npy``, ``.csv``/``.tsv`` (column ``id_column``, default the first, holds
    item ids; all other columns numeric) or ``.mat`` (the 2-D numeric variable
    ``features_var``, default the only one).  ``features_layout``: "rows" (one row per item),
    "columns" (one column per item, as MATLAB files often hold them) or "auto" (the dimension
    that has one entry per item id; without ids, NumPy and CSV files are rows and a MATLAB
    file must be told).

    Item ids: the CSV id column, or ``item_ids`` (a text file, one per line, or a ``.mat`` file
    with the variable of names ``item_ids_var``; ``item_ids_var`` alone reads it from the
    features file).  Without ids the items are the feature rows (ids 0 .. n-1).

    ``labels``: ``.csv``/``.tsv`` with user / item / attribute / label columns (names
    configurable; without an attribute column give ``attribute``), or ``.mat``: the numeric
    matrix ``labels_var`` whose columns ``label_columns`` names in order (default
    user,item,attribute,label for 4 columns, user,item,label for 3; "-" ignores one).

    **Index columns.**  ``items_by``: the item column names items by "id" (the default when
    item ids are given) or holds their "position" among the feature rows (the only choice
    without ids; MATLAB files often refer to images so, e.g. ``im_names(idx)``).  The
    attribute column holds positions in the list ``attribute_names`` (a text file or a
    ``.mat`` variable ``attribute_names_var``) when that is given.  Positions need
    ``index_base`` 0 or 1 (MATLAB counts from 1): there is no default, and a position outside
    the list for that base is an error naming the base that fits (never dropped).

    Label values: ``drop_label`` values are dropped first (e.g. "0" for "unsure"; counted);
    ``positive`` lists the values meaning +1 (everything else -1); by default 1/+1/true/yes are
    +1 and -1/0/false/no are -1, anything else is an error.  ``drop_unknown_items`` drops
    labels whose item id has no features (ids only; counted).

    ``out`` may hold other files: only the layout's own files (features.npy, items.txt,
    labels.csv, dataset.json) are written; existing ones are replaced only with ``force``
    (each atomically, after every input was read), nothing else in ``out`` is touched, and an
    input file that is one of those outputs is refused (it would be overwritten).
    """
    from ._matfile import is_mat, load_mat, matrix, names

    out = Path(out).expanduser()
    fpath = Path(features).expanduser()
    lpath = Path(labels).expanduser()
    ipath = Path(item_ids).expanduser() if item_ids else None
    apath = Path(attribute_names).expanduser() if attribute_names else None
    outputs = [out / f for f in OUTPUT_FILES]
    inputs = [p for p in (fpath, lpath, ipath, apath) if p]
    clash = [str(p) for p in inputs
             if any(p.exists() and o.exists() and os.path.samefile(p, o) for o in outputs)]
    if clash:
        raise DataValidationError(
            f"{WHERE}: input file(s) {clash} would be overwritten by the output in "
            f"{out}; move them elsewhere or choose another --out")
    existing = [o.name for o in outputs if o.exists()]
    if existing and not force:
        raise DataValidationError(
            f"{WHERE}: {out} already holds {existing} (use --force to replace these "
            "files; other files in the folder are never touched)")
    if not fpath.is_file():
        raise DataValidationError(f"{WHERE}: features file {fpath} not found")
    if index_base not in (None, 0, 1):
        raise DataValidationError(f"{WHERE}: --index-base must be 0 or 1, got {index_base!r}")
    if features_layout not in ("auto", "rows", "columns"):
        raise DataValidationError(f"{WHERE}: --features-layout must be auto, rows or columns, "
                                  f"got {features_layout!r}")
    ids = _read_item_ids(ipath, item_ids_var, fpath)
    features_from = str(fpath)
    if fpath.suffix.lower() == ".npy":
        F, layout = _orient(load_npy(fpath, WHERE), features_layout,
                            None if ids is None else len(ids), fpath, mat=False)
    elif is_mat(fpath):
        key, M = matrix(load_mat(fpath, WHERE), features_var, fpath, WHERE, "--features-var")
        features_from = f"{fpath} ({key})"
        F, layout = _orient(M, features_layout, None if ids is None else len(ids), fpath,
                            mat=True)
    else:
        tab = _read_table(fpath, "features")
        idc = id_column or tab.columns[0]
        if idc not in tab.columns:
            raise DataValidationError(f"{WHERE}: {fpath} has no column {idc!r}; "
                                      f"columns: {list(tab.columns)}")
        if ids is not None:
            raise DataValidationError(f"{WHERE}: {fpath} holds its item ids (column {idc!r}); "
                                      "leave out --item-ids")
        ids = tab[idc].astype(str).str.strip().tolist()
        try:
            F = tab.drop(columns=[idc]).to_numpy(dtype=np.float64)
        except ValueError as exc:
            raise DataValidationError(
                f"{WHERE}: {fpath}: non-numeric feature value ({exc})") from None
        layout = "rows (one row per item)"
    F = check_features(F, WHERE, fpath)
    if items_by not in (None, "id", "position"):
        raise DataValidationError(f"{WHERE}: --items-by must be id or position, got "
                                  f"{items_by!r}")
    if items_by == "id" and ids is None:
        raise DataValidationError(f"{WHERE}: --items-by id needs item ids (--item-ids, "
                                  "--item-ids-var or an id column of CSV features)")
    positional = ids is None or items_by == "position"
    if ids is not None and len(ids) != F.shape[0]:
        raise DataValidationError(f"{WHERE}: {len(ids)} item ids for {F.shape[0]} feature rows")
    if ids is not None and len(set(ids)) != len(ids):
        raise DataValidationError(f"{WHERE}: duplicate item ids in the features")

    if is_mat(lpath):
        tab, lsrc = _mat_labels(lpath, labels_var, label_columns)
    else:
        tab, lsrc = _read_table(lpath, "labels"), str(lpath)
    need = [user_column, item_column, label_column] \
        + ([attribute_column] if attribute is None else [])
    miss = [c for c in need if c is None or c not in tab.columns]
    if miss:
        raise DataValidationError(
            f"{WHERE}: {lsrc} lacks column(s) {miss}; columns: {list(tab.columns)}"
            + ("; give --attribute NAME if the file holds one attribute" if attribute is None
               else ""))
    n_rows = len(tab)
    raw = tab[label_column].astype(str).str.strip().str.lower()
    dropped_labels: dict[str, int] = {}
    if drop_label:
        drop = {str(v).strip().lower() for v in drop_label}
        hit = raw.isin(drop) | raw.map(lambda v: _is_integer(v) and any(
            _is_integer(d) and float(d) == float(v) for d in drop))
        dropped_labels = {str(k): int(c) for k, c in raw[hit].value_counts().sort_index().items()}
        tab, raw = tab[~hit], raw[~hit]
    if positive:
        pos_set = {str(p).strip().lower() for p in positive}
        y = np.where(raw.isin(pos_set), 1, -1)
    else:
        is_pos, is_neg = raw.isin(_POSITIVE), raw.isin(_NEGATIVE)
        bad = ~(is_pos | is_neg)
        if bad.any():
            vals = sorted(set(raw[bad].tolist()))[:5]
            raise DataValidationError(
                f"{WHERE}: {lsrc}: label values {vals} are not recognised; give "
                "--positive VALUE for the value(s) that mean +1, or --drop-label VALUE for "
                "those to leave out (e.g. 'unsure')")
        y = np.where(is_pos, 1, -1)

    if attribute is not None:
        attrs = [attribute] * len(tab)
    elif apath is not None:
        anames = (names(load_mat(apath, WHERE), attribute_names_var, apath, WHERE,
                         "--attribute-names-var")[1] if is_mat(apath)
                  else [ln for ln in read_text_lines(apath, WHERE)[0] if ln])
        apos = _positions(tab[attribute_column].astype(str).str.strip().tolist(),
                          attribute_column, index_base, len(anames), "attribute names", lsrc)
        attrs = [anames[i] for i in apos]
    else:
        attrs = tab[attribute_column].tolist()
    attrs = [normalize_attribute(a) for a in attrs]
    items = tab[item_column].astype(str).str.strip().tolist()
    n_unknown_rows = 0
    if positional:
        rows_of = _positions(items, item_column, index_base, F.shape[0], "feature rows"
                             + ("" if ids is None else " (item ids)"), lsrc)
        items = [str(i) for i in rows_of] if ids is None else [ids[i] for i in rows_of]
        keep = [True] * len(items)
    else:
        known = set(ids)
        keep = [i in known for i in items]
        unknown = [i for i, k in zip(items, keep) if not k]
        n_unknown_rows = len(unknown)
        if unknown and not drop_unknown_items:
            hint = ("; the column holds whole numbers: if they are positions of the feature "
                    "rows, give --items-by position and --index-base 0 or 1"
                    if all(map(_is_integer, unknown)) else "")
            raise DataValidationError(
                f"{WHERE}: {n_unknown_rows} label rows name items without features, e.g. "
                f"{sorted(set(unknown))[:5]} (use --drop-unknown-items to drop them){hint}")
    users = tab[user_column].astype(str).str.strip().tolist()
    rows = [(u, i, a, int(v)) for u, i, a, v, k in zip(users, items, attrs, y, keep) if k]
    if ids is None:
        ids = [str(i) for i in range(F.shape[0])]

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
                "imported_from": {"features": features_from, "labels": lsrc}}
        (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        for f in OUTPUT_FILES:  # each file replaced atomically; nothing else in out is touched
            os.replace(tmp / f, out / f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    per_user = np.bincount(np.unique([r[0] for r in rows], return_inverse=True)[1]) \
        if rows else np.zeros(0, dtype=int)
    return {"out": str(out), "items": F.shape[0], "features": F.shape[1], "labels": len(rows),
            "users": len(set(r[0] for r in rows)), "attributes": attr_list,
            "label_rows_read": n_rows, "dropped_unknown_item_rows": n_unknown_rows,
            "dropped_label_rows": dropped_labels,
            "labels_per_user": ({"min": int(per_user.min()), "median": float(np.median(per_user)),
                                 "max": int(per_user.max())} if per_user.size else {}),
            "classes": {"+1": sum(r[3] > 0 for r in rows), "-1": sum(r[3] < 0 for r in rows)},
            "features_layout": layout,
            "index_base": index_base if positional or apath is not None else None,
            "features_from": features_from, "labels_from": lsrc}


def summary_lines(rep: Mapping[str, Any]) -> list[str]:
    """What an import read, for the command's output."""
    lpu = rep["labels_per_user"]
    out = [f"wrote {rep['out']}: {rep['items']} items x {rep['features']} features "
           f"(from {rep['features_from']}, {rep['features_layout']})",
           f"  labels: {rep['label_rows_read']} rows read from {rep['labels_from']}; "
           f"{rep['labels']} kept from {rep['users']} users"
           + (f" ({lpu['min']} to {lpu['max']} labels per user, median {lpu['median']:g})"
              if lpu else ""),
           f"  classes: {rep['classes']['+1']} positive, {rep['classes']['-1']} negative; "
           f"attributes: {', '.join(rep['attributes']) or 'none'}"]
    if rep["index_base"] is not None:
        out.append(f"  index columns read as positions counted from {rep['index_base']}")
    for value, n in rep["dropped_label_rows"].items():
        out.append(f"  dropped {n} label rows with label {value!r} (--drop-label)")
    if rep["dropped_unknown_item_rows"]:
        out.append(f"  dropped {rep['dropped_unknown_item_rows']} label rows naming items "
                   "without features (--drop-unknown-items)")
    return out


def inspect_lines(path: Path) -> list[str]:
    """The variables of a MATLAB file (``--inspect``): what to name with the ``--*-var``
    options."""
    from ._matfile import describe, load_mat

    return [f"{path}:"] + describe(load_mat(path, WHERE))


def _import_command(dataset_cls):
    """The ``import-attributes`` command; ``dataset_cls`` (the generic personalized-attribute
    data set, passed in so this module does not import ``personalized``) loads the written
    folder once as a check."""
    import click

    class UserError(click.ClickException):
        exit_code = 2  # bad input, as every mtlbench command says it

    @click.command("import-attributes")
    @click.option("--out", "out", type=click.Path(file_okay=False),
                  help="Folder to write (e.g. ~/data/shoes; then --data-dir ~/data).")
    @click.option("--features", type=click.Path(exists=True, dir_okay=False),
                  help=".npy, .csv/.tsv (id column + numeric columns) or .mat.")
    @click.option("--features-var", help="For .mat features: the variable holding them "
                                         "(default: the only 2-D numeric one).")
    @click.option("--features-layout", type=click.Choice(["auto", "rows", "columns"]),
                  default="auto", show_default=True,
                  help="rows: one row per item; columns: one column per item (d x n); auto: "
                       "the dimension with one entry per item id.")
    @click.option("--item-ids", type=click.Path(exists=True, dir_okay=False),
                  help="Item ids of the feature rows: a text file (one per line) or a .mat "
                       "file (with --item-ids-var).")
    @click.option("--item-ids-var", help="The MATLAB variable of item names (a cell array, "
                                         "e.g. im_names; in the --item-ids file, else in the "
                                         "features file).")
    @click.option("--id-column", help="For CSV features: the item-id column (default: the first).")
    @click.option("--labels", type=click.Path(exists=True, dir_okay=False),
                  help="CSV/TSV of personal labels (one row per user, item, attribute), or a "
                       ".mat file with a matrix of them.")
    @click.option("--labels-var", help="For .mat labels: the matrix variable (default: the "
                                       "only 2-D numeric one).")
    @click.option("--label-columns",
                  help="For .mat labels: its columns in order, e.g. user,item,attribute,label "
                       "('-' ignores one).")
    @click.option("--user-column", default="user", show_default=True)
    @click.option("--item-column", default="item", show_default=True)
    @click.option("--attribute-column", default="attribute", show_default=True)
    @click.option("--label-column", default="label", show_default=True)
    @click.option("--attribute",
                  help="Attribute name when the labels file has no attribute column.")
    @click.option("--attribute-names", type=click.Path(exists=True, dir_okay=False),
                  help="The attribute column holds positions in this list of names (a text "
                       "file or a .mat file with --attribute-names-var).")
    @click.option("--attribute-names-var", help="The MATLAB variable of attribute names.")
    @click.option("--items-by", type=click.Choice(["id", "position"]), default=None,
                  help="The item column names items by id (the default with item ids) or by "
                       "position among the feature rows (the only choice without ids).")
    @click.option("--index-base", type=click.Choice(["0", "1"]), default=None,
                  help="Index columns (item positions, attribute positions) count from 0 or "
                       "from 1 (MATLAB); required whenever there are any, no default.")
    @click.option("--drop-label", multiple=True,
                  help="Label value to leave out, e.g. 0 for 'unsure' (repeatable).")
    @click.option("--positive", multiple=True,
                  help="Label value meaning +1 (repeatable); default: 1/+1/true/yes vs "
                       "-1/0/false/no.")
    @click.option("--name",
                  help="Data set name written to dataset.json (default: the folder name).")
    @click.option("--source", default="", help="Where the data comes from (citation).")
    @click.option("--feature-description", default="", help="What the features are.")
    @click.option("--drop-unknown-items", is_flag=True,
                  help="Drop labels whose item id has no features.")
    @click.option("--force", is_flag=True,
                  help="Replace the layout files already in --out (other files there are kept).")
    @click.option("--n-components", default=100, show_default=True, type=int,
                  help="PCA components used for the check load (0: no PCA).")
    @click.option("--inspect", "inspect", type=click.Path(exists=True, dir_okay=False),
                  help="Only list the variables of this .mat file (name, kind, shape) and exit.")
    def cmd(out, features, features_var, features_layout, item_ids, item_ids_var, id_column,
            labels, labels_var, label_columns, user_column, item_column, attribute_column,
            label_column, attribute, attribute_names, attribute_names_var, items_by,
            index_base, drop_label, positive, name, source, feature_description,
            drop_unknown_items, force, n_components, inspect):
        """Turn CSV, NumPy or MATLAB files into the personalized-attribute folder layout, say
        what was read, then load it once.  Check the variables of a MATLAB release against
        your copy first: --inspect FILE.mat (docs/datasets.md)."""
        try:
            if inspect:
                click.echo("\n".join(inspect_lines(Path(inspect))))
                return
            missing = [o for o, v in (("--out", out), ("--features", features),
                                      ("--labels", labels)) if not v]
            if missing:
                raise click.UsageError(f"missing option(s) {', '.join(missing)}")
            rep = import_attributes(
                out, features=features, labels=labels, item_ids=item_ids, id_column=id_column,
                user_column=user_column, item_column=item_column, attribute_column=attribute_column,
                label_column=label_column, attribute=attribute, positive=positive or None,
                name=name, source=source, feature_description=feature_description,
                drop_unknown_items=drop_unknown_items, force=force, features_var=features_var,
                features_layout=features_layout, item_ids_var=item_ids_var,
                labels_var=labels_var,
                label_columns=[c.strip() for c in label_columns.split(",")]
                if label_columns else None,
                attribute_names=attribute_names, attribute_names_var=attribute_names_var,
                index_base=None if index_base is None else int(index_base),
                items_by=items_by, drop_label=drop_label or None)
            click.echo("\n".join(summary_lines(rep)))
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
            raise UserError(str(exc)) from None

    return cmd
