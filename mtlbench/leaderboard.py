"""Moved to :mod:`mtlbench.report` (kept so that ``mtlbench.leaderboard`` imports still work)."""
from .report.leaderboard import *  # noqa: F401,F403
from .report.leaderboard import __all__  # noqa: F401
from .report.publish import import_results, publish  # noqa: F401
from .report.select import select_units  # noqa: F401
from .report.stats import friedman, holm, wilcoxon_p  # noqa: F401
