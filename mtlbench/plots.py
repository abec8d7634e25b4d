"""Moved to :mod:`mtlbench.report.plots` (kept so that ``mtlbench.plots`` imports still work)."""
from .report.plots import *  # noqa: F401,F403
from .report.plots import __all__  # noqa: F401
