"""The leaderboard is a typed object that defines the published JSON."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtlbench.plugins import get_registry
from mtlbench.report.leaderboard import build_leaderboard
from mtlbench.report.render import to_json
from mtlbench.report.schema import (FORMAT_VERSION, Cell, FriedmanResult, Leaderboard, Row,
                                    SearchSummary, UnitRecord, WinTieLoss)

from test_leaderboard import make_store, unit

PUBLISHED = Path(__file__).resolve().parents[1] / "leaderboards"


@pytest.fixture(autouse=True)
def stl_is_the_baseline(monkeypatch):
    monkeypatch.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)


@pytest.fixture
def board(tmp_path):
    rows = []
    for r in range(6):
        rows.append(unit("a", r, 0.9 - 0.01 * (r % 2)))
        rows.append(unit("b", r, 0.85 + 0.001 * r))
        rows.append(unit("stl", r, 0.8, task_auc=[0.8, 0.7, 0.9, 0.8, 0.8]))
    rows.append(unit("b", 6, None, status="failed"))
    st = make_store(tmp_path / "s.sqlite", rows)
    yield build_leaderboard(st, "toy")
    st.close()


def test_the_built_leaderboard_is_typed_all_the_way_down(board):
    assert isinstance(board, Leaderboard)
    row = board.row("a")
    assert isinstance(row, Row) and isinstance(row.cells["toy"], Cell)
    assert isinstance(row.search, SearchSummary) and isinstance(row.win_tie_loss, WinTieLoss)
    assert isinstance(board.tests.friedman_over_problem_reps, FriedmanResult)
    assert all(isinstance(u, UnitRecord) for u in board.units)
    # read like the JSON it defines
    assert board["rows"][0]["cells"]["toy"]["mean"] == board.rows[0].cells["toy"].mean
    assert board.get("no such key", 7) == 7 and "rows" in board
    with pytest.raises(KeyError):
        board["no such key"]


def test_json_round_trip_is_exact(board):
    text = to_json(board)
    again = Leaderboard.from_json(json.loads(text))
    assert to_json(again) == text
    assert to_json(again, compact=True) == to_json(board, compact=True)
    assert again.row("b").cells["toy"].failed == 1
    # optional keys are written only when set: a unit's own task names, scores of a failure
    failed = next(u for u in json.loads(text)["units"] if u["status"] != "ok")
    assert "task_auc" not in failed and "task_names" not in failed
    assert "reason" in json.loads(text)["tests"]["friedman_over_problem_reps"] or \
        board.tests.friedman_over_problem_reps.reason is None


def test_keys_missing_from_an_older_file_read_as_not_recorded(board):
    data = json.loads(to_json(board))
    del data["rows"][0]["search"]["at_edge"]
    del data["units"][0]["degenerate"]
    data["unknown_future_key"] = 1
    lb = Leaderboard.from_json(data)
    assert lb.rows[0].search.at_edge is None and lb.units[0].degenerate is None


def test_other_json_is_refused(board):
    with pytest.raises(ValueError, match="format"):
        Leaderboard.from_json({"format": "something-else/1"})


# summary.json is the cross-data-set page (format mtlbench-summary/1), not a table
TABLES = sorted(p for p in PUBLISHED.glob("*.json")
                if not p.name.startswith(".") and p.name != "summary.json")


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_the_published_files_load(path):
    """The published tables of every format this version reads load (import-results and
    publish read them); a file of the current format writes back byte-identical, one of an
    older format reads counts it did not record as None ("not recorded")."""
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    lb = Leaderboard.from_json(data)
    assert lb.units and isinstance(lb.units[0], UnitRecord)
    assert all(isinstance(c, Cell) for r in lb.rows for c in r.cells.values())
    if data["format"] == FORMAT_VERSION:
        assert to_json(lb, compact=True) == text
    else:
        if data["format"] == "mtlbench-leaderboard/2":
            assert lb.rows[0].search.refit_not_converged is None
            assert lb.units[0].degenerate is None
        # before format 4 every table was an AUC table: its cells' test_auc_x100 are the scores
        assert lb.metric == "auc" and lb.higher_is_better
        cell = next(iter(lb.rows[0].cells.values()))
        assert cell.scores == cell.test_auc_x100 and cell.values == []
        again = to_json(lb, compact=True)
        assert to_json(Leaderboard.from_json(json.loads(again)), compact=True) == again
