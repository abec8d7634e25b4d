"""The stacked per-task Gram spectra of the squared loss under their former import path:
:class:`TaskSpectra` lives in ``_core.representations`` (AMTL imports it from here)."""
from ._core.representations import TaskSpectra

__all__ = ["TaskSpectra"]
