"""Compatibility alias: the Dask backend lives in :mod:`mtlbench.runner.dask`
(``import mtlbench.distributed`` gives that very module)."""
import sys

from .runner import dask as _dask

sys.modules[__name__] = _dask
