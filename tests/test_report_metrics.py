"""Tables by metric: direction-aware statistics (a lower-is-better metric ranks the smallest
first), Δ% over the baseline, old units that recorded the AUC only, metric plugins, and a
third-party regression data set end to end through the command line."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.report.across import summary_across
from mtlbench.report.leaderboard import build_leaderboard, to_csv, to_markdown
from mtlbench.report.stats import wilcoxon_p
from mtlbench.store import ResultStore

from plugin_fixtures import activate, write_distribution

TASKS = ["u0", "u1", "u2"]
PROTO = {"seed": 0, "test_fraction": 0.15, "val_fraction": 0.2, "protocol_version": 1, "reps": 8}


@pytest.fixture(autouse=True)
def stl_is_the_baseline(monkeypatch):
    monkeypatch.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)


def regression_unit(model, rep, rmse, dataset="reg", task_rmse=None):
    """A stored unit of real-valued targets whose test RMSE is ``rmse`` (MAE = RMSE / 2)."""
    task_rmse = task_rmse or [rmse] * len(TASKS)
    test = {"rmse": rmse, "mae": rmse / 2, "nmse": rmse / 10, "explained-variance": 1 - rmse / 10}
    def sha(text, n):
        return hashlib.sha256(text.encode()).hexdigest()[:n]

    row = {"key": sha(f"{model}-{dataset}-{rep}", 32), "model": model, "dataset": dataset,
           "problem": dataset, "rep": rep, "seed": 0, "status": "ok", "test_auc": None,
           "protocol": PROTO, "dataset_params": {},
           "model_config": {"name": model, "fixed": {}, "space": {}}, "best_params": {},
           "versions": {"mtlbench": "0.2.0"}, "host": "h", "time_total": 1.0,
           "split_fingerprint": sha(f"split{rep}", 64), "data_fingerprint": sha(dataset, 64),
           "started_at": f"2024-01-01T00:00:{rep:02d}+00:00",
           "finished_at": f"2024-01-01T00:01:{rep:02d}+00:00", "target_kind": "real",
           "metrics": {"select_by": "rmse", "val": {"rmse": rmse}, "test": test},
           "task_metrics": [(i, n, 10, m, v) for m, vals in
                            (("rmse", task_rmse), ("mae", [v / 2 for v in task_rmse]))
                            for i, (n, v) in enumerate(zip(TASKS, vals))]}
    return row


@pytest.fixture
def store(tmp_path):
    """good (lower RMSE than stl in every repetition), stl, bad (higher)."""
    st = ResultStore(tmp_path / "s.sqlite")
    rng = np.random.default_rng(1)
    for r in range(8):
        base = 10.0 + rng.standard_normal()
        st.write_unit(regression_unit("stl", r, base))
        st.write_unit(regression_unit("good", r, base - 1.0 - 0.1 * r,
                                      task_rmse=[base - 2, base - 1, base + 0.5]))
        st.write_unit(regression_unit("bad", r, base + 0.5 + 0.05 * r))
    yield st
    st.close()


def test_a_lower_is_better_metric_ranks_the_smallest_first(store):
    lb = build_leaderboard(store, "reg")
    assert lb.metric == "rmse" and not lb.higher_is_better
    assert lb.models == ["good", "stl", "bad"]
    cells = {r.model: r.cells["reg"] for r in lb.rows}
    assert cells["good"].best and not cells["bad"].best
    assert {r.model: r.avg_rank for r in lb.rows} == {"good": 1.0, "stl": 2.0, "bad": 3.0}
    # the test against the best: paired differences in the metric's direction
    bad = cells["bad"]
    diffs = [b - g for g, b in zip(cells["good"].values, bad.values)]
    assert bad.p_value == wilcoxon_p(diffs) and bad.significantly_worse
    good = next(r for r in lb.rows if r.model == "good")
    assert (good.win_tie_loss.win, good.win_tie_loss.tie, good.win_tie_loss.loss) == (16, 0, 8)
    # Δ% over stl: 100 x mean of -(good - stl) / stl, positive = better
    stl_v = np.array(cells["stl"].values)
    assert good.delta_vs_baseline == pytest.approx(
        100 * np.mean((stl_v - np.array(cells["good"].values)) / stl_v))
    assert next(r for r in lb.rows if r.model == "bad").delta_vs_baseline < 0
    md = to_markdown(lb)
    assert "Leaderboard: reg — RMSE" in md and "the lowest" in md and "Δ% vs stl" in md
    assert set(lb.other_metrics) == {"mae", "nmse", "explained-variance"}
    csv = to_csv(lb)
    assert "rmse" in csv and "delta_vs_baseline_pct" in csv


def test_every_recorded_metric_has_its_table_and_an_inapplicable_one_is_one_line(store):
    ev = build_leaderboard(store, "reg", metric="explained-variance")
    assert ev.higher_is_better and ev.models[0] == "good"
    assert ev.rows[0].cells["reg"].mean == pytest.approx(
        100 * np.mean([1 - v / 10 for v in build_leaderboard(store, "reg").rows[0]
                       .cells["reg"].values]))          # shown x 100
    from mtlbench import ConfigError

    with pytest.raises(ConfigError, match="--metric auc applies to binary .* but reg has "
                                          "real-valued targets; its metrics: rmse, mae"):
        build_leaderboard(store, "reg", metric="auc")


def test_the_summary_across_data_sets_respects_the_direction(store):
    for r in range(8):
        for m, v in (("stl", 5.0), ("good", 4.0 - 0.01 * r), ("bad", 6.0)):
            store.write_unit(regression_unit(m, r, v, dataset="reg2"))
    boards = [build_leaderboard(store, ds) for ds in ("reg", "reg2")]
    s = summary_across(boards)
    assert s.metric == "rmse" and list(s.average_ranks) == ["good", "stl", "bad"]
    assert {h.best.model for h in s.headline} == {"good"}
    eq = {(e.block, e.model): e for e in s.equivalence}
    assert eq[("reg2", "bad")].mean_difference == pytest.approx(2.0 + 0.035, abs=0.01)
    assert eq[("reg2", "bad")].p_best_better > 0.9
    assert eq[("reg2", "bad")].rope == pytest.approx(0.01 * np.mean([4.0 - 0.01 * r
                                                                       for r in range(8)]))


def test_old_units_report_the_auc_and_show_other_metrics_as_not_recorded(tmp_path):
    from test_leaderboard import make_store, unit

    st = make_store(tmp_path / "old.sqlite", [unit(m, r, a) for r in range(3)
                                              for m, a in (("stl", 0.7), ("lasso", 0.8))])
    lb = build_leaderboard(st, "toy")
    assert lb.metric == "auc" and lb.models[0] == "lasso"
    acc = build_leaderboard(st, "toy", metric="accuracy")
    cell = acc.rows[0].cells["toy"]
    assert cell.n == 0 and cell.not_recorded == 3 and "3 not recorded" in to_markdown(acc)
    st.close()


METRIC_PLUGINS = '''
import numpy as np
from mtlbench import Metric, hookimpl

class MedianAE(Metric):
    name = "tp-median-ae"
    label = "median AE"
    description = "mean over tasks of the median absolute error"
    higher_is_better = False
    target_kinds = ("real",)

    def task_value(self, y, s):
        return float(np.median(np.abs(y - s)))

class NoDirection(Metric):
    name = "tp-broken-metric"
    higher_is_better = "yes"
    target_kinds = ("ordinal",)

@hookimpl
def register_metrics(register):
    register(MedianAE)
    register(NoDirection)
'''

REGRESSION_DATASET = '''
import numpy as np
from mtlbench import Dataset, TaskSet, hookimpl
from mtlbench.datasets_api import REAL

class Scores(Dataset):
    name = "tp-scores"
    description = "six tasks with real-valued targets"
    source = "generated"

    def load(self, problem="tp-scores", *, data_dir=None, cache_dir=None):
        rng = np.random.default_rng(0)
        w = rng.standard_normal(4)
        Xs = [rng.standard_normal((24, 4)) for _ in range(6)]
        ys = [5.0 + X @ w + 0.1 * rng.standard_normal(24) for X in Xs]
        return TaskSet.from_arrays(self.name, Xs, ys, target_kind=REAL)

@hookimpl
def register_datasets(register):
    register(Scores)
'''


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    write_distribution(tmp_path / "site", "tp-regression", "0.1",
                       {"tp_metrics": METRIC_PLUGINS, "tp_scores": REGRESSION_DATASET},
                       {"tp-metrics": "tp_metrics", "tp-scores": "tp_scores"})
    activate(monkeypatch, tmp_path / "site")


def test_a_bad_metric_plugin_fails_at_registration_with_one_line(third_party):
    with pytest.warns(UserWarning, match="tp-broken-metric"):
        reg = get_registry()
    assert "tp-median-ae" in reg.metric_names and "tp-broken-metric" not in reg.metric_names
    failure = next(f for f in reg.failures if "tp-broken-metric" in f.error)
    assert failure.stage == "validate" and "\n" not in failure.error
    assert "higher_is_better = 'yes'" in failure.error and "target_kinds" in failure.error
    assert "task_value" in failure.error
    res = CliRunner().invoke(cli, ["plugins", "--format", "json"])
    rows = json.loads(res.output)
    assert any(r["status"] == "failed" and "tp-broken-metric" in r["error"] for r in rows)
    assert any("tp-median-ae" in r.get("metrics", []) for r in rows)


def test_a_third_party_regression_dataset_runs_end_to_end(third_party, tmp_path):
    store = str(tmp_path / "r.sqlite")
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", "--datasets", "tp-scores", "--models",
                              "stl,lasso,tfcl", "--reps", "2", "--budget", "6", "--store",
                              store], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "skipped tfcl on tp-scores" in res.output and "handles binary" in res.output
    assert "test RMSE ↓" in res.output and "median AE" in res.output
    with ResultStore(store, readonly=True) as rs:
        units = rs.units()
        assert set(units["model"]) == {"stl", "lasso"} and set(units["status"]) == {"ok"}
        assert all(set(m["test"]) == {"rmse", "mae", "nmse", "explained-variance",
                                      "tp-median-ae"} for m in units["metrics"])
        assert set(rs.task_metrics()["metric"]) == set(units["metrics"].iloc[0]["test"])
    res = runner.invoke(cli, ["leaderboard", "--dataset", "tp-scores", "--metric",
                              "tp-median-ae", "--store", store])
    assert res.exit_code == 0 and "median AE" in res.output, res.output
    res = runner.invoke(cli, ["leaderboard", "--all", "--metric", "rmse",
                              "--store", store])
    assert res.exit_code == 0 and "Across data sets — RMSE" in res.output, res.output
    res = runner.invoke(cli, ["compare", "--datasets", "tp-scores", "--models", "tfcl",
                              "--reps", "1", "--store", store])
    assert res.exit_code == 2 and "model 'tfcl' handles binary" in res.output
    assert "Traceback" not in res.output


def test_publish_writes_a_table_per_metric_and_a_summary_per_primary_metric(store, tmp_path):
    from test_leaderboard import unit

    from mtlbench.report.imported import check_published
    from mtlbench.report.publish import publish
    from mtlbench.report.schema import Leaderboard

    for r in range(3):
        for m, a in (("stl", 0.7), ("good", 0.8)):
            row, scores = unit(m, r, a)
            store.write_unit(row, scores)
    out = tmp_path / "pub"
    publish(store, out, figures=False, log=lambda s: None)
    names = {p.name for p in out.iterdir()}
    assert {"reg.md", "reg.json", "reg--mae.md", "reg--nmse.md", "reg--explained-variance.md",
            "toy.md", "toy.json", "summary.md", "summary--rmse.md"} <= names
    assert "toy--accuracy.md" not in names        # the old binary units recorded the AUC only
    reg = (out / "reg.md").read_text()
    assert "[mae](reg--mae.md)" in reg and "Leaderboard: reg — RMSE" in reg
    assert "Across data sets — RMSE" in (out / "summary--rmse.md").read_text()
    data = json.loads((out / "reg.json").read_text())
    check_published(data, "reg.json")             # units of real targets are well-formed
    lb = Leaderboard.from_json(data)
    assert lb.metric == "rmse" and lb.units[0].task_metrics["mae"]
    assert "summary--rmse.md" in (out / "README.md").read_text()
