"""Imported first by the ``forkserver`` process (:data:`mtlbench.runner.local.PRELOAD`): it
asks the kernel (Linux ``prctl(PR_SET_PDEATHSIG)``) to kill the forkserver when the process that
started it dies.  It imports nothing heavy, so this happens in the forkserver's first moments.

CPython's forkserver notices its parent's death only in its accept loop, that is after it has
imported every preloaded module: ``kill -9`` of ``compare`` in the first seconds (numpy, scipy,
scikit-learn and the plugins still importing, longer on a loaded machine) would leave it, and
the resource tracker that waits for it, running for that long.  Importing this module anywhere
else does nothing (it checks that it is being imported by ``multiprocessing.forkserver.main``).
"""
from __future__ import annotations

import os
import signal
import sys


def _imported_by_forkserver() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith(
                os.path.join("multiprocessing", "forkserver.py")):
            return True
        frame = frame.f_back
    return False


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001 - then the forkserver's own EOF check is all there is
        return
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(1)


if _imported_by_forkserver():
    _die_with_parent()
