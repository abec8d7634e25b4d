"""Finding, downloading and checking the files of dataset plugins.

A dataset plugin describes its files once, as a :class:`DataSource` (relative paths, sha256,
public URL, where a human can get them, terms of use); :func:`locate` then finds each file

1. in the user's data folder (``--data-dir`` / ``$MTLBENCH_DATA_DIR``): ``<data-dir>/<path>``,
   ``<data-dir>/<dataset>/<path>`` or under one of the file's ``aliases`` (the upstream name);
2. in the cache (``$MTLBENCH_CACHE_DIR`` or ``~/.cache/mtlbench``): ``<cache>/<dataset>/<path>``;
3. else downloads it from its URL into the cache.

Every file is checked against its sha256 before it is used (hashes are memoised per process
by path, size and modification time, so a file is hashed once).  Downloads stream into a
temporary file next to the destination, are hashed while they are written, and are moved into
place with :func:`os.replace` only when the byte count and the checksum are right; on any
failure (network error, truncation, wrong checksum, Ctrl-C) the temporary file is removed, so
the cache never holds a half-written file.  A cached file that fails its checksum is deleted
and downloaded again once.

Every failure raises :class:`~mtlbench.errors.DatasetUnavailableError` whose message names the
expected files, where they were looked for, where to get them and the expected checksum; when
a missing file is in a subfolder of the data folder (``~/data/School/school.mat`` for
``--data-dir ~/data``) it says so and names the ``--data-dir`` to use.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .dataset import data_dir_hint, default_cache_dir, find_in_subfolders, resolve_data_dir
from .errors import DatasetUnavailableError

__all__ = [
    "DataFile", "DataSource", "sha256sum", "verify_file", "download", "locate",
    "find_local", "availability", "describe_files", "corrupt_file_error",
]

CHUNK = 1 << 20
#: Opener used for downloads; tests replace it (``monkeypatch.setattr(fetch, "urlopen", fake)``).
urlopen: Callable[..., Any] = urllib.request.urlopen
DOWNLOAD_TIMEOUT = 60.0


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset.

    Attributes
    ----------
    path : str
        POSIX path relative to the dataset's folder, e.g. ``"ml-latest-small/ratings.csv"``.
        The same relative path is used in the data folder and in the cache.
    sha256 : str
        Expected checksum (hex).
    url : str or None
        Public address to download from; None when the file cannot be downloaded.
    size : int or None
        Expected size in bytes (detects truncation before hashing; optional).
    aliases : tuple of str
        Other relative names accepted in the data folder (e.g. the upstream file name).
    """

    path: str
    sha256: str
    url: str | None = None
    size: int | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class DataSource:
    """The files of one dataset plus what a user needs to get them by hand."""

    dataset: str
    files: tuple[DataFile, ...]
    homepage: str = ""
    terms: str = ""
    notes: str = field(default="", compare=False)


# --------------------------------------------------------------------------- checksums
_HASH_MEMO: dict[tuple[str, int, int], str] = {}


def sha256sum(path: str | os.PathLike) -> str:
    """sha256 (hex) of a file, streamed; memoised by (path, size, mtime)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    hit = _HASH_MEMO.get(key)
    if hit is not None:
        return hit
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
    digest = h.hexdigest()
    _HASH_MEMO[key] = digest
    return digest


def _size_note(actual: int, expected: int | None) -> str:
    if expected is None:
        return f"{actual} bytes"
    if actual < expected:
        return f"{actual} bytes, expected {expected}: the file is truncated"
    if actual > expected:
        return f"{actual} bytes, expected {expected}"
    return f"{actual} bytes (size as expected)"


def _get_hint(f: DataFile, source: DataSource | None) -> str:
    parts = []
    if f.url:
        parts.append(f"download {f.url}")
    if source is not None and source.homepage:
        parts.append(f"see {source.homepage}")
    return "; ".join(parts) if parts else "no public download address is known"


def verify_file(path: str | os.PathLike, f: DataFile, *, dataset: str,
                source: DataSource | None = None) -> None:
    """Raise :class:`DatasetUnavailableError` unless ``path`` has the size and sha256 of ``f``."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise DatasetUnavailableError(f"{dataset}: cannot read {p}: {exc}") from None
    if f.size is not None and size != f.size:
        actual = sha256sum(p)
        raise DatasetUnavailableError(
            f"{dataset}: {p} has the wrong size ({_size_note(size, f.size)}).\n"
            f"  expected sha256 {f.sha256}\n  actual   sha256 {actual}\n"
            f"  Replace it with a fresh copy ({_get_hint(f, source)}) or delete it."
        )
    actual = sha256sum(p)
    if actual.lower() != f.sha256.lower():
        raise DatasetUnavailableError(
            f"{dataset}: checksum mismatch for {p} ({_size_note(size, f.size)}).\n"
            f"  expected sha256 {f.sha256}\n  actual   sha256 {actual}\n"
            f"  The file is corrupt, truncated or a different edition. Replace it with a fresh "
            f"copy ({_get_hint(f, source)}) or delete it."
        )


# --------------------------------------------------------------------------- download
def download(url: str, dest: str | os.PathLike, *, sha256: str, size: int | None = None,
             dataset: str = "dataset", timeout: float | None = None) -> Path:
    """Download ``url`` to ``dest`` atomically, checking byte count and sha256.

    The bytes go to a temporary file in ``dest``'s folder; it replaces ``dest`` only when
    complete (``Content-Length`` and ``size`` respected) and its sha256 equals ``sha256``.
    On any failure the temporary file is removed and :class:`DatasetUnavailableError` raised.
    """
    dest = Path(dest)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatasetUnavailableError(
            f"{dataset}: cannot create cache folder {dest.parent}: {exc}") from None
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    n = 0
    try:
        try:
            with os.fdopen(fd, "wb") as out:
                resp = urlopen(url, timeout=timeout or DOWNLOAD_TIMEOUT)
                try:
                    declared = _content_length(resp)
                    while True:
                        chunk = resp.read(CHUNK)
                        if not chunk:
                            break
                        out.write(chunk)
                        h.update(chunk)
                        n += len(chunk)
                finally:
                    close = getattr(resp, "close", None)
                    if close is not None:
                        close()
                out.flush()
                os.fsync(out.fileno())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise DatasetUnavailableError(
                f"{dataset}: download of {url} failed after {n} bytes: {reason}"
            ) from None
        if declared is not None and n != declared:
            raise DatasetUnavailableError(
                f"{dataset}: download of {url} is truncated: got {n} bytes, the server "
                f"announced {declared}"
            )
        if size is not None and n != size:
            raise DatasetUnavailableError(
                f"{dataset}: download of {url} has the wrong size ({_size_note(n, size)})"
            )
        digest = h.hexdigest()
        if digest.lower() != sha256.lower():
            raise DatasetUnavailableError(
                f"{dataset}: checksum mismatch for the download of {url} ({n} bytes).\n"
                f"  expected sha256 {sha256}\n  actual   sha256 {digest}\n"
                "  The download is truncated, corrupt or the source changed; nothing was kept."
            )
        os.replace(tmp, dest)
        return dest
    finally:
        if tmp.exists():
            try:
                tmp.unlink()
            except OSError:
                pass


def _content_length(resp: Any) -> int | None:
    headers = getattr(resp, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get("Content-Length")
    except Exception:  # noqa: BLE001 - unusual header objects
        return None
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- locating
def _data_candidates(f: DataFile, dataset: str, data_dir: Path | None) -> list[Path]:
    if data_dir is None:
        return []
    out: list[Path] = []
    for rel in (f.path, *f.aliases):
        out.append(data_dir / rel)
        out.append(data_dir / dataset / rel)
    return out


def _cache_path(f: DataFile, dataset: str, cache_dir: Path) -> Path:
    return cache_dir / dataset / f.path


def find_local(source: DataSource, f: DataFile, *, data_dir: Path | None,
               cache_dir: Path) -> tuple[Path | None, str]:
    """Where ``f`` is on disk without checking it: (path, "in data-dir" | "cached") or
    (None, "")."""
    for cand in _data_candidates(f, source.dataset, data_dir):
        if cand.is_file():
            return cand, "in data-dir"
    cached = _cache_path(f, source.dataset, cache_dir)
    if cached.is_file():
        return cached, "cached"
    return None, ""


def availability(source: DataSource, *, data_dir: str | os.PathLike | None = None,
                 cache_dir: str | os.PathLike | None = None) -> str:
    """"in data-dir", "cached", "downloadable" or "needs local files" (no hashing, no network)."""
    ddir = resolve_data_dir(data_dir)
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    kinds = []
    for f in source.files:
        path, kind = find_local(source, f, data_dir=ddir, cache_dir=cdir)
        if path is None:
            kind = "downloadable" if f.url else "needs local files"
        kinds.append(kind)
    for k in ("needs local files", "downloadable", "cached"):
        if k in kinds:
            return k
    return "in data-dir"


def describe_files(source: DataSource) -> str:
    """The expected files, their checksums and sources (for ``layout_help`` and errors)."""
    lines = [f"expected files of {source.dataset!r}:"]
    for f in source.files:
        alias = f" (also accepted as {', '.join(f.aliases)})" if f.aliases else ""
        lines.append(f"  {f.path}{alias}\n      sha256 {f.sha256}")
        if f.url:
            lines.append(f"      from {f.url}")
    if source.homepage:
        lines.append(f"source: {source.homepage}")
    if source.terms:
        lines.append(f"terms: {source.terms}")
    return "\n".join(lines)


def _missing_message(source: DataSource, missing: list[DataFile], data_dir: Path | None,
                     cache_dir: Path, failures: list[str]) -> str:
    looked = []
    for f in missing:
        cands = [str(c) for c in _data_candidates(f, source.dataset, data_dir)]
        cands.append(str(_cache_path(f, source.dataset, cache_dir)))
        looked.append(f"  {f.path}: looked in " + ", ".join(cands))
    where = "\n".join(looked)
    dd = ("no data folder given (use --data-dir DIR or set $MTLBENCH_DATA_DIR)"
          if data_dir is None else f"data folder: {data_dir}")
    msg = (f"{source.dataset}: required files are missing.\n{where}\n  {dd}; cache: {cache_dir}\n"
           f"{describe_files(source)}")
    if failures:
        msg += "\ndownload attempts:\n" + "\n".join(f"  {x}" for x in failures)
    hint = ""
    if data_dir is not None:
        f = missing[0]
        hint = data_dir_hint(find_in_subfolders(data_dir, (f.path, *f.aliases),
                                                skip=(data_dir / source.dataset,)),
                             f.path, data_dir, source.dataset)
    msg += (f"\n{hint}." if hint else
            f"\nPut the files in the data folder (as <data-dir>/{missing[0].path} or "
            f"<data-dir>/{source.dataset}/{missing[0].path}) and pass --data-dir.")
    return msg


def locate(source: DataSource, *, data_dir: str | os.PathLike | None = None,
           cache_dir: str | os.PathLike | None = None,
           allow_download: bool = True) -> dict[str, Path]:
    """Paths of all files of ``source``, each verified against its sha256.

    Looks in the data folder, then the cache, then downloads into the cache.  Returns a dict
    ``{file.path: Path}``.  Raises :class:`DatasetUnavailableError` with the full story when a
    file is missing, cannot be downloaded or fails its checksum.
    """
    ddir = resolve_data_dir(data_dir)
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    found: dict[str, Path] = {}
    missing: list[DataFile] = []
    failures: list[str] = []
    for f in source.files:
        path, kind = find_local(source, f, data_dir=ddir, cache_dir=cdir)
        if path is not None and kind == "in data-dir":
            verify_file(path, f, dataset=source.dataset, source=source)
            found[f.path] = path
            continue
        if path is not None:  # cached: a bad cached copy is ours to delete and fetch again
            try:
                verify_file(path, f, dataset=source.dataset, source=source)
                found[f.path] = path
                continue
            except DatasetUnavailableError as exc:
                if not (allow_download and f.url):
                    raise
                failures.append(f"cached copy rejected and removed: {str(exc).splitlines()[0]}")
                try:
                    path.unlink()
                except OSError:
                    pass
        if allow_download and f.url:
            dest = _cache_path(f, source.dataset, cdir)
            try:
                found[f.path] = download(f.url, dest, sha256=f.sha256, size=f.size,
                                         dataset=source.dataset)
                continue
            except DatasetUnavailableError as exc:
                failures.append(str(exc).replace("\n", "\n  "))
        missing.append(f)
    if missing:
        raise DatasetUnavailableError(_missing_message(source, missing, ddir, cdir, failures))
    return found


def corrupt_file_error(dataset: str, path: Path, problem: str, f: DataFile | None = None,
                       source: DataSource | None = None) -> DatasetUnavailableError:
    """An error for a file that passed its checks (or has none) but cannot be parsed."""
    extra = ""
    if f is not None:
        extra = f"\n  expected sha256 {f.sha256}; get a fresh copy: {_get_hint(f, source)}"
    return DatasetUnavailableError(f"{dataset}: {path} cannot be read ({problem}){extra}")

