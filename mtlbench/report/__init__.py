"""Reports from the results store: selection, statistics, leaderboards, figures, publishing.

=================  ===========================================================================
module             what
=================  ===========================================================================
``select``         the one rule choosing which stored units a table counts (``select_units``)
``stats``          Holm, Wilcoxon signed-rank, Friedman, block ranks
``leaderboard``    ``build_leaderboard`` (a JSON-able dict) and its markdown / JSON / CSV
``plots``          the figures (matplotlib, imported lazily), ``make_figures``
``publish``        ``publish`` into a folder (manifest, stale files, README), ``import_results``
``roles``          what models declare about their role (baseline, ablations)
``commands``       the click commands ``results``, ``leaderboard``, ``publish``,
                   ``import-results``
=================  ===========================================================================
"""
from __future__ import annotations

import importlib
from typing import Any

# Imported lazily (PEP 562) so that the CLI can register the report commands without
# importing pandas/scipy at start-up.
_WHERE = {
    "build_leaderboard": "leaderboard", "cell_text": "leaderboard", "render": "leaderboard",
    "search_summary": "leaderboard", "to_csv": "leaderboard", "to_json": "leaderboard",
    "to_markdown": "leaderboard", "import_results": "publish", "publish": "publish",
    "Selection": "select", "select_units": "select", "friedman": "stats", "holm": "stats",
    "wilcoxon_p": "stats", "make_figures": "plots",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_WHERE)
