"""Write (or check) the verdict pages of a published leaderboards folder from its JSON.

    python scripts/write_verdict.py leaderboards          # writes verdict.md, simulated-paper.md
    python scripts/write_verdict.py leaderboards --check  # exit 1: a page differs from the data

Run it after every ``mtlbench publish``: the rules, the paper's claims and the person-written
text are in ``scripts/verdict_pages.py``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verdict_pages import differences, render_pages, write_pages


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?", default="leaderboards",
                    help="the published folder (its <dataset>.json files); default leaderboards")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 naming the first line of each page that "
                         "differs from what the JSON gives")
    args = ap.parse_args(argv)
    if args.check:
        diffs = differences(args.folder, render_pages(args.folder))
        for d in diffs:
            print(d)
        if not diffs:
            print(f"the pages of {args.folder} match its published JSON")
        return 1 if diffs else 0
    for path in write_pages(args.folder):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
