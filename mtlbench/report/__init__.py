"""Reports from the results store: selection, statistics, leaderboards, figures, publishing.

=================  ===========================================================================
module             what
=================  ===========================================================================
``select``         the one rule choosing which stored units a table counts (``select_units``)
``schema``         the leaderboard as typed records (``Leaderboard``): the published JSON
``stats``          Holm, Wilcoxon signed-rank, Friedman, block ranks
``leaderboard``    ``build_leaderboard``: a dataset's ``Leaderboard`` from the store
``records``        its per-unit records (``unit_records``) and provenance
``render``         its markdown / JSON / CSV (from the page's parts)
``text``           the leaderboard and summary as plain text for a terminal
``site``           the HTML site ``publish`` writes (``site_assets``: its CSS and script)
``across``         ``summary_across``: the judgement across data sets (ranks, CD, equivalence)
``across_render``  its markdown / JSON / CSV and figures
``plots``          the figures (matplotlib, imported lazily)
``canvas``         what every figure shares: the Agg canvas, PNG / SVG / PDF files, panels
``figures``        ``make_figures``: every figure a store allows, or why not
``publish``        ``publish`` into a folder (manifest, stale files, README)
``staging``        the temporary folder a publication is written in, and its atomic swap
``importing``      ``import_results``: published units into a store; ``restore_published``
``roles``          what models declare about their role (baseline, ablations)
=================  ===========================================================================

No module here prints or imports click/rich: the commands ``results``, ``leaderboard``,
``publish`` and ``import-results`` are in :mod:`mtlbench.cli` and hand a ``log`` callback down.
"""
from __future__ import annotations

import importlib
from typing import Any

# Imported lazily (PEP 562): ``import mtlbench.report`` loads neither pandas nor scipy.
_WHERE = {
    "build_leaderboard": "leaderboard", "cell_text": "render", "render": "render",
    "search_summary": "leaderboard", "to_csv": "render", "to_json": "render",
    "to_markdown": "render", "import_results": "importing", "publish": "publish",
    "Selection": "select", "select_units": "select", "results_frame": "select",
    "Leaderboard": "schema", "friedman": "stats", "holm": "stats", "wilcoxon_p": "stats",
    "make_figures": "figures", "summary_across": "across", "read_published": "publish",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_WHERE)
