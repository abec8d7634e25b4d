"""The leaderboard and the summary across data sets as plain text for a terminal of a given
width (``mtlbench leaderboard``'s default format; markdown is ``--format markdown``).

The content is that of the markdown pages (the parts of :mod:`mtlbench.report.render` and
:mod:`mtlbench.report.across_render`), laid out for reading: paragraphs wrapped to the width,
inline markdown dropped (the best cell of a column is marked ▲ where the markdown makes it
bold), and tables split into blocks of columns that fit, each block repeating the first
column (the model or the block); a header wraps onto several lines rather than widening its
column.  A leaderboard prints its score columns (the metric per problem, rank, W/T/L, Δ%)
apart from its run and search columns.
"""
from __future__ import annotations

import re
import textwrap
from typing import Sequence

from .schema import Leaderboard

GAP = "  "
BEST = "▲"

_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\(([^)\s]+)\)")


def plain(text: str) -> str:
    """Inline markdown as plain text: ``**x**`` -> ``x``, ``*x*`` -> ``x``, ```x``` -> ``x``,
    ``[t](u)`` -> ``t``, ``\\|`` -> ``|``."""
    s = _LINK.sub(r"\1", str(text))
    s = re.sub(r"`([^`]+)`", r"\1", s)
    s = re.sub(r"\*\*(.+?)\*\*", r"\1", s)
    s = re.sub(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])", r"\1", s)
    return s.replace("\\|", "|")


def _cell(text: str) -> str:
    """A table cell: a bold value (the column's best) marked with :data:`BEST`."""
    s = str(text)
    if s.startswith("**") and "**" in s[2:]:
        end = s.index("**", 2)
        s = s[2:end] + f" {BEST}" + s[end + 2:]
    return plain(s)


def paragraph(text: str, width: int, bullet: str = "") -> list[str]:
    """``text`` wrapped to ``width`` columns; ``bullet`` starts the first line and the others
    are indented by as much."""
    return textwrap.wrap(plain(text), width, initial_indent=bullet,
                         subsequent_indent=" " * len(bullet), break_on_hyphens=False) or [""]


def table(head: Sequence[str], rows: Sequence[Sequence[str]], width: int,
          right: Sequence[int] = ()) -> list[str]:
    """The table as lines of at most ``width`` columns where it can: blocks of columns, each
    repeating column 0; ``right``: the columns aligned right (numbers)."""
    head = [plain(h) for h in head]
    rows = [[_cell(c) for c in r] for r in rows]

    def need(j: int) -> int:  # a header wraps at words; one longer than 16 is broken
        content = max((len(r[j]) for r in rows), default=0)
        longest_word = max((len(w) for w in head[j].split()), default=0)
        return max(content, min(len(head[j]), max(min(longest_word, 16), 8)))

    widths = [need(j) for j in range(len(head))]
    blocks, current, used = [], [], widths[0]
    for j in range(1, len(head)):
        if current and used + len(GAP) + widths[j] > width:
            blocks.append(current)
            current, used = [], widths[0]
        current.append(j)
        used += len(GAP) + widths[j]
    if current or not blocks:
        blocks.append(current)
    out: list[str] = []
    for b, cols in enumerate(blocks):
        cols = [0] + cols
        spare = width - sum(widths[j] for j in cols) - len(GAP) * (len(cols) - 1)
        for j in cols[1:]:  # room left in the block: headers on fewer lines, left to right
            grow = max(0, min(spare, len(head[j]) - widths[j]))
            widths[j] += grow
            spare -= grow
        wrapped = [textwrap.wrap(head[j], widths[j], break_on_hyphens=False) or [""]
                   for j in cols]
        depth = max(len(w) for w in wrapped)

        def line(cells: Sequence[str]) -> str:
            return GAP.join(c.rjust(widths[j]) if j in right else c.ljust(widths[j])
                            for j, c in zip(cols, cells)).rstrip()

        if b:
            out.append("")
        for k in range(depth):
            out.append(line([w[k - depth + len(w)] if k >= depth - len(w) else ""
                             for w in wrapped]))
        out.append(GAP.join("─" * widths[j] for j in cols))
        out += [line([r[j] for j in cols]) for r in rows]
    return out


def _section(title: str) -> list[str]:
    return ["", title, "═" * len(title)]


# =============================================================================== leaderboard
#: the leaderboard's run and search columns, printed in a table of their own
_RUN_COLUMNS = ("reps", "units done/planned", "failed", "budget (fits/unit)", "at bound",
                "degenerate", "selected fit not converged", "refit not converged",
                "failed search fits", "run time")


def leaderboard_text(lb: Leaderboard, width: int = 100) -> str:
    """The leaderboard for a terminal ``width`` columns wide (module docstring)."""
    from .render import (friedman_items, heading_parts, how_to_read_items, provenance_rows,
                         table_headers, table_row)

    title, paragraphs = heading_parts(lb)
    out = [title, "═" * min(len(title), width)]
    for p in paragraphs:
        out += [""] + paragraph(p, width)
    from ..syntax import problem_name

    head = table_headers(lb)
    for j, prob in enumerate(lb.problems, start=1):  # the title names the data set
        head[j] = problem_name(prob, lb.dataset)
    rows = [table_row(lb, r) for r in lb.rows]
    run = [j for j, h in enumerate(head) if h in _RUN_COLUMNS]
    score = [j for j in range(len(head)) if j not in run]
    out += _section("Scores")
    out += table([head[j] for j in score], [[r[j] for j in score] for r in rows], width,
                 right=range(1, len(score)))
    out += _section("Units, search and run time")
    out += table(["model"] + [head[j] for j in run], [[r[0]] + [r[j] for j in run]
                                                      for r in rows], width,
                 right=range(1, len(run) + 1))
    out += _section("How to read these tables")
    for item in how_to_read_items(lb):  # the markdown's bold is the terminal's mark
        item = item.replace("**Bold**: the best mean", f"{BEST} after a cell: the best mean", 1)
        out += paragraph(item, width, "- ")
    out += _section("Friedman test")
    for item in friedman_items(lb):
        out += paragraph(item, width, "- ")
    out += _section("Provenance")
    keep = {"dataset parameters", "protocol", "search rule", "seed", "planned repetitions",
            "left out by the selection rule", "same splits for every model", "mtlbench",
            "machine(s)", "units", "total run time", "runs"}
    for what, value in provenance_rows(lb):
        if what in keep:
            out += paragraph(f"{what}: {value}", width, "- ")
    out += [""] + paragraph("Fingerprints, figures and every unit: --format markdown or json, "
                            "or 'mtlbench publish'.", width)
    return "\n".join(out) + "\n"


# =============================================================================== summary
def summary_text(summary, width: int = 100) -> str:
    """The judgement across data sets for a terminal ``width`` columns wide."""
    from .across_render import (RANKS_HEAD, _metric, blocks_paragraph, equivalence_parts,
                                headline_table, ranks_parts)

    m = _metric(summary)
    title = "Across data sets" + ("" if m.name == "auc" else f" — {m.label}")
    out = [title, "═" * len(title), ""] + paragraph(blocks_paragraph(summary), width)
    head, rows, caption = headline_table(summary)
    out += _section("Headline") + table(head, rows, width) + [""] + paragraph(caption, width)
    test, ranks, posthoc = ranks_parts(summary)
    out += _section("Ranks across data sets") + paragraph(test, width) + [""]
    out += table(RANKS_HEAD, ranks, width, right=[1])
    if posthoc:
        out += [""] + paragraph(posthoc, width)
    text, head, rows = equivalence_parts(summary)
    out += _section("Practical equivalence") + paragraph(text, width) + [""]
    out += table(head, rows, width, right=range(1, len(head)))
    for note in summary.notes:
        out += [""] + paragraph(note, width, "- ")
    return "\n".join(out) + "\n"


__all__ = ["leaderboard_text", "summary_text", "table", "paragraph", "plain", "BEST"]
