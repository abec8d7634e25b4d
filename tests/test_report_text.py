"""``mtlbench leaderboard`` in a terminal: the tables fit its width (COLUMNS), the notes are
said once, the numbers are those of the JSON; markdown stays ``--format markdown``."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.report.text import table

from test_report_select import make, unit

PROBLEMS = [f"wide[n_features=20,users=40]/attribute-{i}" for i in range(7)]
MODELS = {"a-model-with-a-long-label": 0.90, "b": 0.85, "stl": 0.80, "tfcl-q-noauc": 0.83}


@pytest.fixture(autouse=True)
def stl_is_the_baseline(monkeypatch):
    monkeypatch.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)


@pytest.fixture
def store(tmp_path):
    """Seven problems, three repetitions: every column has comparisons that cannot be marked
    (the small-n statement, once per column in the markdown)."""
    rows = [unit(m, r, auc + 0.01 * r + 0.002 * k, dataset="wide[n_features=20,users=40]",
                 problem=p, reps=3)
            for m, auc in MODELS.items() for k, p in enumerate(PROBLEMS) for r in range(3)]
    st = make(tmp_path / "w.sqlite", rows)
    yield st
    st.close()


def _run(args, columns=100):
    res = CliRunner().invoke(cli, args, env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    return res.output


def test_the_terminal_table_fits_100_columns_and_says_each_note_once(store):
    args = ["leaderboard", "-d", "wide[n_features=20,users=40]", "--store", str(store.path)]
    text = _run(args)
    md = _run(args + ["--format", "markdown"])
    assert max(len(line) for line in md.splitlines()) > 300      # what a terminal got before
    assert max(len(line) for line in text.splitlines()) <= 100
    assert not [s for s in text.splitlines() if s.startswith("|")] and "**" not in text
    assert text.count("with n < 6 paired repetitions") == 1 == md.count(
        "with n < 6 paired repetitions")
    assert "Columns " + ", ".join(PROBLEMS) in " ".join(text.split())
    lb = json.loads(_run(args + ["--format", "json"]))
    for row in lb["rows"]:                   # every model and cell, as the JSON has them
        assert row["model"] in text
        for p in PROBLEMS:
            c = row["cells"][p]
            assert f"{c['mean']:.2f} ± {c['std']:.2f}" in text
    best = next(r for r in lb["rows"] if r["model"] == "a-model-with-a-long-label")
    assert f"{best['cells'][PROBLEMS[0]]['mean']:.2f} ± " \
           f"{best['cells'][PROBLEMS[0]]['std']:.2f} ▲" in text
    # narrower: more blocks of columns, still within the width
    narrow = _run(args, columns=60)
    assert max(len(line) for line in narrow.splitlines()) <= 60
    assert narrow.count("a-model-with-a-long-label") > text.count("a-model-with-a-long-label")


def test_the_summary_across_data_sets_in_a_terminal(store):
    text = _run(["leaderboard", "--all", "--store", str(store.path)])
    assert text.startswith("Across data sets\n")
    assert "Blocks (1): wide[n_features=20,users=40] — one block per independent data set" in text
    text = _run(["leaderboard", "--all", "--store", str(store.path), "--blocks", "problems"])
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "wide[n_features=20,users=40] / attribute-6" in text
    assert "wide[n_features=20,users=40] / wide" not in text       # no repeated data set name


def test_a_table_splits_into_blocks_that_repeat_the_first_column():
    head = ["model"] + [f"a header of column {j}" for j in range(6)]
    rows = [["m1"] + ["12.34 ± 0.56"] * 6, ["**m2**"] + ["**99.00 ± 0.01**"] * 6]
    lines = table(head, rows, 40, right=range(1, 7))
    assert max(len(s) for s in lines) <= 40
    assert sum(1 for s in lines if s.startswith("m1")) >= 3       # one per block
    assert "99.00 ± 0.01 ▲" in "\n".join(lines)


def test_room_left_in_a_block_unwraps_the_headers():
    """A header wraps only as far as the width needs: with room to spare it is one line, in
    a narrow terminal it wraps and no line is wider than the terminal."""
    head = ["model", "average rank (1 = best)", "W/T/L vs stl (tasks)"]
    rows = [["tfcl", "3.00", "10/2/3"], ["stl", "11.40", "baseline"]]
    wide = table(head, rows, 100, right=(1, 2))
    assert wide[0].split() == "model average rank (1 = best) W/T/L vs stl (tasks)".split()
    assert wide[1].startswith("─")                                  # one header line
    narrow = table(head, rows, 30, right=(1, 2))
    assert max(len(s) for s in narrow) <= 30
    assert not narrow[1].startswith("─")                            # wrapped headers
