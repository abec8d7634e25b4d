"""The literature page: published numbers read as printed, ours planned per published protocol,
rows waiting for models, the page rendered from both, and the committed page in step with the
data file."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from mtlbench.plugins import get_registry

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(REPO / "scripts"))

import write_literature as wl  # noqa: E402

MINIMAL = '''
[[source]]
id = "a-2020"
citation = "A. Author, A paper, 2020"
quoted_from = "Table 1, p. 5"
metric_code = "mean over tasks of the per-task RMSE"

[source.protocol.lenk-regression]
train_fraction = 0.75
reps = {reps}
paper = "75 % train"
differences = ["Splits: ours are seeded permutations."]

[[result]]
source = "a-2020"
dataset = "lenk-regression"
method = "STL"
metric = "rmse"
value = "{value}"
spread = "0.04"
spread_kind = "variance"
model = "{model}"
same_method = "ridge per task"
'''


def write(tmp_path, **kw):
    fields = {"reps": 1, "value": "2.5000", "model": "stl", **kw}
    path = tmp_path / "lit.toml"
    path.write_text(MINIMAL.format(**fields), encoding="utf-8")
    return path


def test_the_literature_file_names_registered_data_sets_and_metrics():
    reg = get_registry()
    lit = wl.read_literature()
    wl.check_names(lit, reg.dataset_names, wl.metric_table())
    assert lit.results and lit.pending
    for r in lit.results:
        assert math.isfinite(float(r.value))
        assert r.spread_kind in wl.SPREAD_KINDS
    # quoted as printed: trailing zeros survive
    assert any(r.value == "10.0170" for r in lit.results)


def test_a_published_variance_is_shown_as_a_standard_deviation_too(tmp_path):
    r = wl.read_literature(write(tmp_path)).results[0]
    assert r.spread_as_std() == pytest.approx(0.2)
    assert wl._published(r) == "2.5000 ± 0.04 (variance; std 0.200)"
    undefined = wl.Result("s", "d", "m", "rmse", "1.0", "0.3", "undefined", "", "")
    assert undefined.spread_as_std() is None and wl._published(undefined) == "1.0 (0.3)"


@pytest.mark.parametrize("edit, message", [
    (("model = \"stl\"", "model = 3"), "'model' must be a non-empty string|'model' must be"),
    (("value = \"2.5000\"", "value = 2.5"), "in quotes"),
    (("source = \"a-2020\"\ndataset", "source = \"b\"\ndataset"), "source 'b' is not a"),
    (("spread_kind = \"variance\"", "spread_kind = \"sd\""), "'spread_kind' must be one of"),
    (("train_fraction = 0.75", "train_fraction = 75"), "'train_fraction' must be a number"),
    (("dataset = \"lenk-regression\"", "dataset = \"school-regression\""),
     "has no protocol for 'school-regression'"),
])
def test_a_malformed_entry_gives_one_line_naming_it(tmp_path, edit, message):
    path = write(tmp_path)
    path.write_text(path.read_text().replace(*edit), encoding="utf-8")
    with pytest.raises(wl.LiteratureError, match=message) as exc:
        wl.read_literature(path)
    assert "\n" not in str(exc.value)


def test_an_unregistered_metric_must_be_added_first(tmp_path):
    path = write(tmp_path)
    path.write_text(path.read_text().replace('metric = "rmse"', 'metric = "weighted-rmse"'))
    with pytest.raises(wl.LiteratureError, match="register the publication's definition"):
        wl.check_names(wl.read_literature(path), get_registry().dataset_names,
                       wl.metric_table())


def test_a_model_that_lands_moves_its_rows_from_waiting_to_the_runs():
    lit = wl.read_literature()
    before = ["lasso", "rmtfl", "stl", "vstgmtl"]
    waiting = wl.waiting(lit, before)
    assert any(w.startswith("waiting for model gomtl: 2 published") for w in waiting)
    runs = {r.dataset: r for r in wl.planned_runs(lit, before)}
    # both School sources use 75 % / 10 repetitions: one run serves them
    assert set(runs) == {"school-regression", "lenk-regression"}
    assert "gomtl" not in runs["school-regression"].models
    after = wl.planned_runs(lit, before + ["gomtl"])
    assert all("gomtl" in r.models for r in after)
    assert not any("gomtl" in w for w in wl.waiting(lit, before + ["gomtl"]))
    # the single-task baseline runs under every protocol as context
    assert all("stl" in r.models for r in after)


def test_grid_selections_are_the_declared_start_grid():
    reg = get_registry()
    param, sels = wl.grid_selections(reg.model_class("lasso"))
    grid = reg.model_class("lasso").search_space["rho_ratio"].grid
    assert param == "rho_ratio" and sels == [f"lasso[rho_ratio={v!r}]" for v in grid]
    assert wl.grid_selections(reg.model_class("rmtfl")) == ("", [])


def test_the_page_puts_each_published_number_beside_ours(tmp_path):
    lit = wl.read_literature(write(tmp_path, model="stl"))
    metrics = wl.metric_table()
    measured = {("lenk-regression", 0.75, 1, "stl", "rmse"): wl.Measured(2.0, 0.1, 1)}
    page = wl.render(lit, measured, ["stl"], metrics)
    row = next(line for line in page.splitlines() if line.startswith("| STL |"))
    # 2.0 - 2.5 = -0.5 (-20 %), lower RMSE is better; |-0.5| > std 0.2 + 0.1: beyond
    assert row == ("| STL | 2.5000 ± 0.04 (variance; std 0.200) | stl | 2.0000 ± 0.1000 "
                   "(1 reps) | -0.5000 (-20.0 %): ours better, beyond the two spreads |")
    assert wl.COMMAND in page and "Splits: ours are seeded permutations." in page
    waiting = wl.render(wl.read_literature(write(tmp_path, model="gomtl")), {}, ["stl"],
                        metrics)
    assert "| gomtl | waiting for model gomtl |" in waiting
    assert "- waiting for model gomtl: 1 published result(s)" in waiting


def test_the_committed_page_quotes_every_published_number():
    """docs/literature.md is regenerated whenever the data file changes: every published row
    is on it with its value as printed, and no registered model's row is left unrun."""
    lit = wl.read_literature()
    page = (REPO / "docs" / "literature.md").read_text(encoding="utf-8")
    assert wl.COMMAND in page
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    registered = get_registry().model_names
    for r in lit.results:
        mine = [line for line in rows if line.startswith(f"| {r.method} | {r.value}")]
        assert mine, f"{r.source} {r.dataset} {r.method!r}: not on docs/literature.md"
        if r.model in registered:
            assert all("not run" not in line for line in mine)
    for p in lit.pending:
        assert p.citation in page


@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "lenk_computer_survey.mat").exists(),
                    reason="needs ../shared/data/lenk_computer_survey.mat")
def test_the_script_runs_the_published_protocol_and_writes_the_page(tmp_path):
    store, out = tmp_path / "lit.sqlite", tmp_path / "page.md"
    args = ["--literature", str(write(tmp_path)), "--store", str(store), "--out", str(out),
            "--data-dir", str(DATA), "--jobs", "1"]
    assert wl.main(args + ["--no-run"]) == 0
    assert "| STL | 2.5000 ± 0.04 (variance; std 0.200) | stl | not run |" in out.read_text()
    assert wl.main(args) == 0
    row = next(line for line in out.read_text().splitlines() if line.startswith("| STL |"))
    assert "(1 reps)" in row and "not run" not in row
