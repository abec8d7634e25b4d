"""Moved to :mod:`mtlbench.report.plots` (kept so that ``mtlbench.plots`` imports still work)."""
from .report.figures import make_figures  # noqa: F401
from .report.plots import *  # noqa: F401,F403
from .report.plots import __all__ as _all

__all__ = [*_all, "make_figures"]
