"""The published leaderboards as a static HTML site (``mtlbench publish`` writes it into
``<out>/site/``).

Pages
-----
* ``index.html``: the models x data sets table (every data set's cells of its primary metric
  and the average rank across data sets: sortable by any column, filterable by text), then
  the judgement across data sets of the primary metric of most of them (blocks, headline,
  Friedman test and average ranks, post-hoc test and critical-difference diagram, practical
  equivalence); ``summary--<metric>.html`` the same for the data sets of another primary
  metric;
* ``<dataset>.html``: the data set's table of every metric its units recorded (the primary
  one first, each sortable and filterable, with how to read it and its Friedman tests), its
  figures (score distributions per repetition and per task, tuning curves, races, ...) and
  the provenance (search rule, code fingerprints, versions, machines).

Everything on a page comes from the objects the markdown pages are rendered from (the
:class:`~mtlbench.report.schema.Leaderboard` and :class:`~mtlbench.report.across.Summary`,
through the parts of :mod:`mtlbench.report.render` and :mod:`mtlbench.report.across_render`),
so the two show the same: their inline markdown (bold, emphasis, code, links) is turned into
HTML after every character has been escaped.  Figures are the SVG files beside the PNGs under
``<out>/figures/`` (``../figures/`` from a page), with links to their PNG and PDF.  The pages
load one style sheet and one script, written from this package's ``site_assets`` (no network,
no build step), and work opened from the folder (``file://``) as well as served.
"""
from __future__ import annotations

import html
import re
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

from ..syntax import file_stem, problem_name
from .render import (GENERATED_MARKER, _fmt_seconds, _machines_text, cell_text, digits_of,
                     friedman_items, heading_parts, how_to_read_items, provenance_rows,
                     table_headers, table_row, table_sort_keys)
from .schema import Leaderboard

SITE_DIR = "site"
ASSETS = ("site.css", "site.js")
INDEX = "index.html"
#: a page's first line: ``publish`` recognises the files it wrote by it
MARKER = f"{GENERATED_MARKER} (mtlbench publish) from a results store; regenerate, do not edit -->"


# =============================================================================== inline text
_CODE = re.compile(r"`([^`]+)`")
_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])+)\]\(([^)\s]+)\)")  # text may hold [..]
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_EM = re.compile(r"(?<![\w*])\*(?=\S)([^*]+?)(?<=\S)\*(?![\w*])")


def inline(text: str, links: Callable[[str], str] | None = None) -> str:
    """Inline markdown of the report's texts as HTML: every character escaped first, then
    ```code```, ``[text](target)`` (``links`` maps the target), ``**bold**``, ``*emphasis*``
    and the table escape ``\\|``."""
    parts = _CODE.split(str(text))
    out = []
    for i, part in enumerate(parts):
        if i % 2:  # inside backticks: literal
            out.append(f"<code>{html.escape(part)}</code>")
            continue
        s = html.escape(part.replace("\\|", "|"))

        def link(m: re.Match) -> str:
            target = html.unescape(m.group(2))
            href = links(target) if links else target
            return f'<a href="{html.escape(href)}">{m.group(1)}</a>'

        s = _LINK.sub(link, s)
        s = _BOLD.sub(r"<strong>\1</strong>", s)
        s = _EM.sub(r"<em>\1</em>", s)
        out.append(s)
    return "".join(out)


def _attr(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _sort_value(v: float | str | None) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if v == v else ""
    return str(v)


# =============================================================================== building blocks
def _table(head: Sequence[str], rows: Sequence[Sequence[str]], *, table_id: str,
           keys: Sequence[Sequence[float | str | None]] | None = None,
           descending: Sequence[int] = (), caption: str = "", filter_rows: bool = True,
           links: Callable[[str], str] | None = None) -> str:
    """A table whose header cells sort it (``keys``: the value each cell sorts by, default
    its text; ``descending``: columns sorted high-to-low on the first click, e.g. a
    higher-is-better metric) and, with ``filter_rows``, a box that filters its rows."""
    out = []
    if filter_rows:
        out.append(f'<p class="filter"><label>Filter rows <input type="search" '
                   f'data-filter="{_attr(table_id)}" placeholder="e.g. tfcl" '
                   f'autocomplete="off"></label> <span class="count" '
                   f'data-count="{_attr(table_id)}"></span></p>')
    out.append(f'<div class="scroll"><table id="{_attr(table_id)}" class="sortable">')
    out.append("<thead><tr>" + "".join(
        '<th scope="col"' + (' data-first="descending"' if j in descending else "")
        + f">{inline(h, links)}</th>" for j, h in enumerate(head)) + "</tr></thead><tbody>")
    for i, row in enumerate(rows):
        cells = []
        for j, text in enumerate(row):
            key = keys[i][j] if keys is not None else None
            sort = f' data-sort="{_attr(_sort_value(key))}"' if keys is not None else ""
            tag = "th scope=\"row\"" if j == 0 else "td"
            cells.append(f"<{tag}{sort}>{inline(text, links)}</{tag.split()[0]}>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    if caption:
        out.append(f'<p class="caption">{inline(caption, links)}</p>')
    return "\n".join(out)


def _pairs(rows: Sequence[Sequence[str]], links: Callable[[str], str] | None = None) -> str:
    """A two-column table of (what, value) rows (provenance)."""
    body = "".join(f'<tr><th scope="row">{inline(k, links)}</th><td>{inline(v, links)}</td>'
                   "</tr>" for k, v in rows)
    return f'<div class="scroll"><table class="pairs"><tbody>{body}</tbody></table></div>'


def _list(items: Sequence[str], links: Callable[[str], str] | None = None) -> str:
    return "<ul>" + "".join(f"<li>{inline(x, links)}</li>" for x in items) + "</ul>"


def _figure_links(files: Sequence[str]) -> str:
    return " · ".join(f'<a href="../{_attr(f)}">{Path(f).suffix[1:].upper()}</a>'
                      for f in files)


def _figure(title: str, files: Sequence[str], caption: str = "") -> str:
    """A figure of the publication (``files``: its PNG, SVG, PDF relative to the folder),
    drawn from its SVG."""
    svg = next((f for f in files if f.endswith(".svg")), files[0])
    return (f'<figure><img src="../{_attr(svg)}" alt="{_attr(title)}">'
            f"<figcaption><strong>{html.escape(title)}.</strong> {inline(caption)} "
            f'<span class="files">{_figure_links(files)}</span></figcaption></figure>')


def _figures(figs: Sequence[dict[str, Any]]) -> str:
    drawn = [f for f in figs if f.get("files")]
    missing = [f for f in figs if not f.get("files")]
    out = [_figure(f["title"], f["files"], f.get("caption", "")) for f in drawn]
    if missing:
        out.append(_list([f"*{f['title']}*: not drawn — {f.get('note', '')}" for f in missing]))
    return "\n".join(out)


def _page(title: str, nav: str, body: str, footer: str) -> str:
    return "\n".join([
        MARKER, "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        '<link rel="stylesheet" href="assets/site.css">',
        '<script src="assets/site.js" defer></script>', "</head>", "<body>",
        f'<header><nav aria-label="pages">{nav}</nav></header>', "<main>", body, "</main>",
        f"<footer>{footer}</footer>", "</body>", "</html>", ""])


# =============================================================================== pages
def page_name(dataset: str) -> str:
    return f"{file_stem(dataset)}.html"


def _summary_page(stem: str) -> str:
    return INDEX if stem == "summary" else f"{stem}.html"


def _nav(datasets: Sequence[str], summaries: Sequence[tuple[str, Any, dict]], here: str) -> str:
    links = [(INDEX, "Overview")] + [(_summary_page(stem), f"Across data sets ({s.metric})")
                                     for stem, s, _ in summaries if stem != "summary"]
    links += [(page_name(ds), ds) for ds in datasets]
    return "".join(f'<a href="{_attr(href)}"' + (' aria-current="page"' if href == here else "")
                   + f">{html.escape(text)}</a>" for href, text in links)


def _metric_of(lb: Leaderboard):
    from ..scoring import get_metric

    return get_metric(lb.get("metric") or "auc")


def _leaderboard_section(lb: Leaderboard, anchor: str, level: str = "h2",
                         heading: str | None = None, links: dict[str, str] | None = None
                         ) -> str:
    """One metric's table of a data set: its paragraphs, the sortable table, how to read it
    and its Friedman tests."""
    title, paragraphs = heading_parts(lb, links)
    m = _metric_of(lb)
    rows = list(lb.rows)
    # first click high-to-low: a higher-is-better metric, W/T/L (wins - losses) and Δ%
    desc = [j + 1 for j in range(len(lb.problems))] if m.higher_is_better else []
    desc += [len(lb.problems) + 5, len(lb.problems) + 6]
    out = [f'<section id="{_attr(anchor)}">', f"<{level}>{html.escape(heading or title)}"
           f"</{level}>"]
    out += [f"<p>{inline(p)}</p>" for p in paragraphs]
    head = table_headers(lb)
    for j, prob in enumerate(lb.problems, start=1):  # the page's title names the data set
        head[j] = problem_name(prob, lb.dataset)
    out.append(_table(head, [table_row(lb, r) for r in rows],
                      table_id=f"table-{anchor}", keys=[table_sort_keys(lb, r) for r in rows],
                      descending=desc))
    out.append("<details><summary>How to read this table</summary>"
               + _list(how_to_read_items(lb)) + "</details>")
    out.append("<details><summary>Friedman test</summary>" + _list(friedman_items(lb))
               + "</details>")
    out.append("</section>")
    return "\n".join(out)


def dataset_page(lb: Leaderboard, others: dict[str, Leaderboard], figs: Sequence[dict],
                 nav: str) -> str:
    """The page of one data set: every metric's table, the figures, the provenance."""
    anchors = {name: f"#metric-{name}" for name in others}
    body = [_leaderboard_section(lb, f"metric-{lb.get('metric') or 'auc'}", "h1",
                                 links=anchors or None)]
    for name, other in others.items():
        body.append(_leaderboard_section(other, f"metric-{name}",
                                         heading=f"{_metric_of(other).label} (test)"))
    if figs:
        body += ['<section id="figures"><h2>Figures</h2>', _figures(figs), "</section>"]
    body += ['<section id="provenance"><h2>Provenance</h2>', _pairs(provenance_rows(lb)),
             "</section>"]
    stem = file_stem(lb.dataset)
    footer = (f"{html.escape(MARKER[5:-4])}. The same tables as markdown: "
              f'<a href="../{_attr(stem)}.md">{html.escape(stem)}.md</a>; every unit: '
              f'<a href="../{_attr(stem)}.json">{html.escape(stem)}.json</a>.')
    return _page(f"Leaderboard: {lb.dataset}", nav, "\n".join(body), footer)


def _models_by_datasets(boards: dict[str, Leaderboard], summary) -> str:
    """The models x data sets table: per (data set, problem) the cell of the data set's
    primary metric as on its page, and the average rank across data sets."""
    from .across import block_label

    cols = [(ds, lb, p) for ds, lb in boards.items() for p in lb.problems]
    models = sorted({r.model for lb in boards.values() for r in lb.rows},
                    key=lambda m: (summary.average_ranks.get(m, float("inf"))
                                   if summary else 0, m))
    head = ["model", "average rank across data sets"] + [
        f"{block_label(ds, p)} ({_metric_of(lb).label}"
        f"{' ↑' if _metric_of(lb).higher_is_better else ' ↓'})" for ds, lb, p in cols]
    rows, keys = [], []
    for m in models:
        rank = summary.average_ranks.get(m) if summary else None
        row, key = [m, "—" if rank is None else f"{rank:.2f}"], [m, rank]
        for ds, lb, p in cols:
            r = lb.row(m)
            cell = r.cells.get(p) if r is not None else None
            if cell is None or not cell.n:
                row.append("—")
                key.append(None)
            else:
                row.append(cell_text(cell, lb.reps_differ, digits_of(_metric_of(lb))))
                key.append(cell.mean)
        rows.append(row)
        keys.append(key)
    desc = [2 + j for j, (_, lb, _) in enumerate(cols) if _metric_of(lb).higher_is_better]
    return _table(head, rows, table_id="models-by-datasets", keys=keys, descending=desc,
                  caption="Each data set's primary metric on test, mean ± std over "
                          "repetitions (bold: the column's best; †: significantly worse than "
                          "it); the average rank is that of the summary below (1 = best). "
                          "Click a column header to sort by it.")


def summary_body(summary, figs: dict[str, str | None], rel: Callable[[str], list[str]]
                 ) -> str:
    """The judgement across data sets (the sections of ``summary.md``)."""
    from .across_render import (CD_CAPTION, RANKS_HEAD, blocks_paragraph, equivalence_parts,
                                headline_table, ranks_parts)

    out = [f"<p>{inline(blocks_paragraph(summary))}</p>", '<section id="headline">',
           "<h2>Headline</h2>"]
    head, rows, caption = headline_table(summary)
    out += [_table(head, rows, table_id="headline-table", filter_rows=False),
            f"<p>{inline(caption)}</p>", "</section>"]
    test, ranks, posthoc = ranks_parts(summary)
    out += ['<section id="ranks">', "<h2>Ranks across data sets</h2>", f"<p>{inline(test)}</p>",
            _table(RANKS_HEAD, ranks, table_id="ranks-table", filter_rows=False,
                   keys=[[m, summary.average_ranks[m]] for m in summary.average_ranks])]
    if posthoc:
        out.append(f"<p>{inline(posthoc)}</p>")
    if figs.get("cd"):
        out.append(_figure("Critical-difference diagram", rel(figs["cd"]), CD_CAPTION))
    out.append("</section>")
    text, head, rows = equivalence_parts(summary)
    out += ['<section id="equivalence">', "<h2>Practical equivalence</h2>",
            f"<p>{inline(text)}</p>", _table(head, rows, table_id="equivalence-table")]
    if figs.get("equivalence"):
        out.append(_figure("Practical equivalence", rel(figs["equivalence"])))
    out.append("</section>")
    if summary.notes:
        out.append(_list(summary.notes))
    return "\n".join(out)


def write_site(out: Path, written: dict[str, Any], summaries: Sequence[tuple[str, Any, dict]],
               log: Callable[[str], None] = print) -> list[Path]:
    """Write the site into ``out/site`` (``out``: the publication folder).  ``written``:
    {data set: {"leaderboard", "others" {metric: leaderboard}, "figures"}} as ``publish``
    made them; ``summaries``: (page stem, :class:`~mtlbench.report.across.Summary`, its
    figures {kind: path relative to ``out``}) per cross-data-set page.  Returns the files."""
    from .plots import figure_files

    site = out / SITE_DIR
    (site / "assets").mkdir(parents=True, exist_ok=True)
    files = []
    for name in ASSETS:
        text = resources.files(__package__).joinpath("site_assets", name).read_text("utf-8")
        path = site / "assets" / name
        path.write_text(text, encoding="utf-8")
        files.append(path)
    datasets = list(written)

    def rel(p: str) -> list[str]:
        return [str(f.relative_to(out)) for f in figure_files(out / p)]

    boards = {ds: v["leaderboard"] for ds, v in written.items()}
    main = next((s for stem, s, _ in summaries if stem == "summary"), None)
    for stem, summary, figs in summaries or [("summary", None, {})]:
        here = _summary_page(stem)
        body = ["<h1>Leaderboards" + ("" if stem == "summary" else
                                      f" — across data sets ({html.escape(summary.metric)})")
                + "</h1>"]
        if stem == "summary":
            body += ['<section id="models-by-datasets-section"><h2>Models × data sets</h2>',
                     _models_by_datasets(boards, main), "</section>", _datasets_list(boards)]
        if summary is not None:
            body += ['<section id="across"><h2>Across data sets</h2>',
                     summary_body(summary, figs, rel), "</section>"]
        footer = (f"{html.escape(MARKER[5:-4])}. The same as markdown: "
                  f'<a href="../{_attr(stem)}.md">{html.escape(stem)}.md</a>.'
                  if summary is not None else html.escape(MARKER[5:-4]) + ".")
        path = site / here
        path.write_text(_page("mtlbench leaderboards", _nav(datasets, summaries, here),
                              "\n".join(body), footer), encoding="utf-8")
        files.append(path)
    for ds, v in written.items():
        path = site / page_name(ds)
        path.write_text(dataset_page(v["leaderboard"], v.get("others", {}), v["figures"],
                                     _nav(datasets, summaries, page_name(ds))),
                        encoding="utf-8")
        files.append(path)
    log(f"wrote the site {site / INDEX} ({len(files) - len(ASSETS)} page(s))")
    return files


def _datasets_list(boards: dict[str, Leaderboard]) -> str:
    items = []
    for ds, lb in boards.items():
        prov = lb.provenance
        done = sum(r.finished_units or 0 for r in lb.rows)
        planned = sum(r.planned_units or 0 for r in lb.rows)
        items.append(f"[{ds}]({page_name(ds)})" + (" (binarized)" if lb.binarized else "")
                     + f": {_metric_of(lb).label}, {len(lb.problems)} problem(s), "
                     f"{len(lb.models)} models, {done}/{planned} units, "
                     f"{_fmt_seconds(prov.time_total_s)} on "
                     f"{_machines_text(prov.machines, units=False, platform=False)}")
    return '<section id="datasets"><h2>Data sets</h2>' + _list(items) + "</section>"


__all__ = ["write_site", "dataset_page", "inline", "page_name", "SITE_DIR", "INDEX", "MARKER"]
