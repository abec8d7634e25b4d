"""Why the results store cannot be opened, read or written: :class:`StoreError` and its
messages, the environment's cause first (a read-only file system, a full disk, missing
permission, a missing folder, a lock held too long, judged from SQLite's result code or the
OS errno and the file system), then what is wrong with the file itself (not an SQLite
database, or damaged).
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import MTLBenchError


class StoreError(MTLBenchError):
    """The results store cannot be opened, read or written (the message says what to do)."""


def _is_sqlite_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


# SQLite's primary result codes (the low byte of ``sqlite_errorcode``)
SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY = 3, 5, 6, 8
SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 10, 11, 13, 14, 26
#: free bytes below which an I/O error is put down to a full disk
FULL_DISK_BYTES = 1 << 20


def disk_facts(path: Path) -> tuple[bool, int | None]:
    """(the file system holding ``path`` is mounted read-only, its free bytes or None), read
    at the nearest existing folder of ``path``."""
    probe = path if path.exists() else path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        st = os.statvfs(probe)
    except (OSError, AttributeError):  # not POSIX, or vanished
        return False, None
    return bool(st.f_flag & getattr(os, "ST_RDONLY", 1)), st.f_bavail * st.f_frsize


def _primary_code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def environment_cause(path: Path, exc: BaseException) -> str | None:
    """What in the environment stops reading or writing the store at ``path`` — a read-only
    file system, a full disk, missing permission, a missing folder, a lock held too long —
    judged from the error (SQLite's result code or the OS errno) and the file system; None
    when the error says nothing about the environment (then the file itself is at fault)."""
    import errno

    primary, err = _primary_code(exc), getattr(exc, "errno", None)
    read_only, free = disk_facts(path)
    folder = path.parent
    if read_only or err == errno.EROFS:
        return "it is on a read-only file system"
    if primary == SQLITE_FULL or err == errno.ENOSPC or (
            primary == SQLITE_IOERR and free is not None and free < FULL_DISK_BYTES):
        left = f"{free / 2**20:.1f} MiB free" if free is not None else "no space left"
        return f"the disk is full ({left} on the file system holding {str(folder)!r})"
    if err in (errno.EACCES, errno.EPERM) or primary in (SQLITE_PERM, SQLITE_READONLY) or (
            primary == SQLITE_CANTOPEN and folder.is_dir()
            and not os.access(path if path.exists() else folder, os.W_OK)):
        what = "the file" if path.exists() else "its folder"
        return f"permission denied: {what} is not writable by this user"
    if err == errno.ENOTDIR or (primary == SQLITE_CANTOPEN and not folder.is_dir()):
        return f"the folder {str(folder)!r} does not exist or is not a folder"
    if primary == SQLITE_CANTOPEN:
        return f"SQLite cannot open the file ({exc}; a network file system without locking?)"
    if primary in (SQLITE_BUSY, SQLITE_LOCKED):
        return (f"{exc} (another process has held the store locked for more than a minute: "
                "a run on another machine over a network file system?)")
    if primary == SQLITE_IOERR:
        return f"a disk I/O error ({exc}): the disk or the network file system failed"
    return None


def _cause(path: Path, exc: BaseException) -> str:
    return environment_cause(path, exc) or str(getattr(exc, "strerror", None) or exc)


def _open_failure(path: Path, exc: BaseException, existed: bool) -> str:
    """The message of a store that cannot be opened: the environment's cause first (read-only,
    permissions, disk full, missing folder), then what is wrong with the file itself (not an
    SQLite database, or damaged)."""
    where = str(path)
    cause = environment_cause(path, exc)
    if cause is not None and not existed:
        return (f"cannot create the results store {where!r}: {cause}. Nothing was written; "
                "fix the cause, or pass another --store PATH.")
    if cause is not None:
        read_only = cause.startswith("it is on a read-only")
        return (f"cannot open the results store {where!r} for writing: {cause}. Nothing in "
                "the store was changed; fix the cause, or pass another --store PATH"
                + ("; 'mtlbench results' and 'leaderboard' can read it where it is."
                   if read_only else "."))
    if existed and isinstance(exc, sqlite3.DatabaseError):
        if _primary_code(exc) == SQLITE_NOTADB or not _is_sqlite_file(path):
            return (f"cannot open the results store {where!r}: {exc} (the file is not an "
                    "SQLite database; it was left untouched). Choose another path with "
                    "--store PATH.")
        return _damaged_message(where, str(exc))
    return (f"cannot open the results store {where!r}: {getattr(exc, 'strerror', None) or exc}."
            " Choose a writable path with --store PATH.")


def _remove_new_store(path: Path) -> None:
    """Remove what a failed first open created at ``path`` (an empty file, its journal) —
    only when it holds no table, so a store another run has just created is never touched."""
    try:
        if path.exists() and path.stat().st_size:
            con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
            try:
                if con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
                    return
            finally:
                con.close()
        for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"),
                  path.with_name(path.name + "-journal")):
            p.unlink(missing_ok=True)
    except (OSError, sqlite3.Error):
        pass


def _damaged_message(where: str, detail: str) -> str:
    return (f"the results store {where!r} is not a valid SQLite database or is damaged "
            f"({detail}). Keep a copy; units may be recoverable with the sqlite3 tool "
            f"('sqlite3 {where} .recover | sqlite3 recovered.sqlite'); then pass another "
            "--store PATH (or move the file aside) to start a new store.")
