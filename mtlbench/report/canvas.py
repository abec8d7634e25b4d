"""What every figure of the reports shares: matplotlib loaded lazily with the Agg canvas (no
pyplot state, no display), each figure written as PNG, SVG and PDF side by side with metadata
that does not change between runs, the grid of panels, wrapped panel titles and a log x axis
whose tick labels cannot overlap.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

DPI = 110
VECTOR_RASTER_DPI = 150  # the raster layers inside SVG and PDF files (dense point clouds)


def _mpl():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from ..errors import ConfigError

        raise ConfigError("figures need matplotlib: pip install 'mtlbench[plots]' "
                          "(or run publish with --no-figures)") from exc
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    return Figure


#: every figure is written in each of these formats, side by side (``box.png``, ``box.svg``,
#: ``box.pdf``): PNG for markdown pages, SVG for the HTML site, PDF for papers
FORMATS = ("png", "svg", "pdf")
#: text stays text in the vector files (searchable, editable; PDF with TrueType fonts, which
#: publishers' PDF checks accept, unlike Type 3), and SVG ids do not change between runs
_VECTOR_RC = {"svg.fonttype": "none", "svg.hashsalt": "mtlbench", "pdf.fonttype": 42}



def figure_files(path: str | Path) -> list[Path]:
    """The files of one figure: ``path`` and its siblings in the other :data:`FORMATS`."""
    path = Path(path)
    return [path] + [path.with_suffix(f".{fmt}") for fmt in FORMATS
                     if f".{fmt}" != path.suffix]



def _metadata(suffix: str, title: str) -> dict[str, Any]:
    """Metadata without dates or versions that change between runs (the files of the same
    figure are byte-identical when republished), with the figure's title."""
    if suffix == ".png":
        return {"Software": None, "Title": title}
    if suffix == ".svg":
        return {"Date": None, "Title": title}
    if suffix == ".pdf":
        return {"CreationDate": None, "Title": title}
    return {}



def _save(fig, path: Path, dpi: int = DPI) -> Path:
    """Write ``fig`` to ``path`` and beside it in the other :data:`FORMATS`; the title
    metadata is the first line of the figure's title (``suptitle``).  Returns ``path``."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    title = fig.get_suptitle().split("\n")[0]
    with matplotlib.rc_context(_VECTOR_RC):
        # lay the figure out once and crop every format to the same box: a "tight" save per
        # format would redo the layout and draw twice each time
        canvas.draw()
        box = fig.get_tightbbox(canvas.get_renderer()).padded(0.1)
        fig.set_layout_engine("none")
        for p in figure_files(path):
            fig.savefig(p, dpi=dpi if p.suffix == ".png" else max(dpi, VECTOR_RASTER_DPI),
                        bbox_inches=box, metadata=_metadata(p.suffix, title))
    return path


def _panels(n: int, ncols: int = 3) -> tuple[int, int]:
    ncols = max(1, min(ncols, n))
    return int(np.ceil(n / ncols)), ncols


def _wrap(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters (at spaces and hyphens; a
    longer word stays whole) for a panel title that must not run into its neighbour's."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_long_words=False)) or text



def _cmap(name: str):
    from matplotlib import colormaps

    return colormaps[name]


def log_x_axis(ax, values: np.ndarray, integer: bool = False, max_labels: int = 5) -> None:
    """A log x axis whose tick labels cannot overlap: at most ``max_labels`` labelled ticks,
    none on minor ticks.  Integers (e.g. a rank k) are labelled with their own values, thinned
    to ``max_labels``; other ranges get decades, or 1-2-5 steps when they span less than two
    decades (matplotlib's default labels minor ticks then, in a larger font, and they collide)."""
    from matplotlib.ticker import (FixedLocator, FuncFormatter, LogFormatterSciNotation,
                                   LogLocator, NullFormatter)

    ax.set_xscale("log")
    lo, hi = float(np.min(values)), float(np.max(values))
    if integer:
        ticks = sorted({int(v) for v in np.asarray(values).ravel()})
        step = int(np.ceil(len(ticks) / max_labels))
        ax.xaxis.set_major_locator(FixedLocator(ticks[::step]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        decades = np.log10(hi) - np.log10(lo)
        if decades < 2:
            exps = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
            major = [v for e in exps for v in (10.0 ** e, 2 * 10.0 ** e, 5 * 10.0 ** e)
                     if lo <= v <= hi]
            if len(major) < 2:  # a narrow range: every integer multiple of its decade
                major = [m * 10.0 ** e for e in exps for m in range(1, 10)
                         if lo <= m * 10.0 ** e <= hi] or major
            step = int(np.ceil(len(major) / max_labels)) or 1
            ax.xaxis.set_major_locator(FixedLocator(major[::step]))
        else:
            ax.xaxis.set_major_locator(LogLocator(base=10, numticks=max_labels + 1))
        ax.xaxis.set_major_formatter(LogFormatterSciNotation(labelOnlyBase=False))
    ax.xaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10)), numticks=12))
    ax.xaxis.set_minor_formatter(NullFormatter())
