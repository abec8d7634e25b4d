"""The temporary folder a publication is written in, and how it takes the place of the
published folder.

The folder being published (``out``) is copied to a temporary folder beside it
(``.<name>.publish-<random>``), the publication written there, and the copy then takes the
place of ``out`` in one rename: on Linux an atomic exchange (``renameat2`` with
``RENAME_EXCHANGE``), elsewhere two renames.  A reader sees the old set of files or the new
one, never half; a failure to write leaves ``out`` as it was and is one :class:`ConfigError`
line.  One publication at a time: an exclusive ``flock`` on the folder holding ``out``; the
leftovers of killed publications are removed by the next one.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from pathlib import Path
from typing import Callable, Iterator

from ..errors import ConfigError

#: ``<out>`` -> ``.<out name>.publish-<random>``: the temporary folders of publications
STAGE_INFIX = ".publish-"


@contextlib.contextmanager
def staged(out: Path, log: Callable[[str], None]) -> Iterator[Path]:
    """A temporary folder beside ``out`` holding a copy of it, to publish into; it takes the
    place of ``out`` when the block ends without error, and is removed when it raises (``out``
    unchanged).  A failure to write (a full disk, permissions) becomes one
    :class:`ConfigError` line.  One publication at a time (a lock on the folder holding
    ``out``); leftovers of killed publications are removed first."""
    target = out.resolve()
    if target.exists() and not target.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file, not a folder")
    parent, stage = target.parent, None
    try:
        if Path.cwd().resolve().is_relative_to(target):
            raise ConfigError(f"--out {str(out)!r} is the current folder or holds it; publish "
                              "replaces that folder as a whole: run it from another folder")
        parent.mkdir(parents=True, exist_ok=True)
        with locked(parent):
            for old in parent.glob(f".{target.name}{STAGE_INFIX}*"):
                shutil.rmtree(old, ignore_errors=True)
                log(f"removed {old}, left by a publication that did not finish")
            stage = parent / f".{target.name}{STAGE_INFIX}{uuid.uuid4().hex[:12]}"
            if target.is_dir():
                _copy_folder(target, stage)
            else:
                stage.mkdir()
            yield stage
            _replace(stage, target)
            stage = None
    except OSError as exc:
        where = exc.filename or target
        if stage is not None:
            where = str(where).replace(str(stage), str(target))
        full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
        why = "the disk is full" if full else exc.strerror or str(exc)
        raise ConfigError(f"cannot publish into {str(out)!r}: {why} (writing {where}); the "
                          "folder is as it was before, nothing was published") from None
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)


def _copy_folder(src: Path, dst: Path) -> None:
    """Copy folder ``src`` to ``dst`` (which must not exist), symbolic links as links; the
    first failure raises its OSError (a full disk: ENOSPC), where ``shutil.copytree`` would
    gather them into one."""
    dst.mkdir()
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir():
            _copy_folder(Path(entry.path), target)
        else:
            shutil.copy2(entry.path, target)
    shutil.copystat(src, dst)


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` (``flock`` on the folder itself: no file is left
    behind) while the block runs; none where ``fcntl`` is missing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another publication into {str(folder)!r} is running; wait "
                              "for it to end") from None
        yield
    finally:
        os.close(fd)


def _replace(stage: Path, target: Path) -> None:
    """Put folder ``stage`` in the place of ``target``: an atomic exchange where the kernel
    has one (Linux ``renameat2(RENAME_EXCHANGE)``), else two renames; the old folder is then
    removed."""
    if not target.exists():
        os.rename(stage, target)
        return
    if _exchange(stage, target):
        shutil.rmtree(stage, ignore_errors=True)  # the old folder, now at ``stage``
        return
    old = target.with_name(f".{target.name}{STAGE_INFIX}old-{uuid.uuid4().hex[:12]}")
    os.rename(target, old)
    os.rename(stage, target)
    shutil.rmtree(old, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2`` with ``RENAME_EXCHANGE``); False where
    that is not available."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    done = renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    if done != 0:
        code = ctypes.get_errno()
        if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
            return False
        raise OSError(code, os.strerror(code), str(b))
    return True


__all__ = ["staged", "locked", "STAGE_INFIX"]
