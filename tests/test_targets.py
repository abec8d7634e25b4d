"""Real-valued targets: the data contract, the splits, the protocol options and their keys,
selection by a regression metric, models that declare the target kinds they handle."""
import json

import numpy as np
import pytest

from mtlbench import ConfigError, DataValidationError, TaskSet
from mtlbench.protocol import (MIN_TARGETS, ProtocolConfig, evaluable_tasks, make_split,
                               run_protocol)
from mtlbench_models.lasso import LASSO
from mtlbench_models.stl import STL
from mtlbench_models.tfcl import TFCL

from conftest import REPO, small_problem


def regression_problem(T=5, n=30, d=6, seed=0, name="reg") -> TaskSet:
    rng = np.random.default_rng(seed)
    w0 = rng.standard_normal(d)
    Xs = [rng.standard_normal((n + 2 * t, d)) for t in range(T)]
    ys = [3.0 + X @ (w0 + 0.3 * rng.standard_normal(d)) + 0.2 * rng.standard_normal(len(X))
          for X in Xs]
    return TaskSet.from_arrays(name, Xs, ys, target_kind="real")


@pytest.mark.parametrize("bad, message", [
    ([1.0, np.nan, 2.0], r"task 'task1': targets contain NaN/inf \(first at row 1: nan\)"),
    ([1.0, 2.0, np.inf], r"task 'task1': targets contain NaN/inf \(first at row 2: inf\)"),
    ([2.5, 2.5, 2.5], r"task 'task1': all 3 targets equal 2.5; .* drop the task"),
    (["1.0", "x", "2"], r"task 'task1': targets are not numbers"),
])
def test_bad_targets_give_one_clear_line(bad, message):
    X = [np.ones((3, 2)), np.ones((3, 2))]
    with pytest.raises(DataValidationError, match=message) as err:
        TaskSet.from_arrays("p", X, [[1.0, 2.0, 3.0], bad], target_kind="real")
    assert "\n" not in str(err.value)


def test_binary_tasks_keep_their_rules_and_name_the_real_kind():
    X = [np.ones((3, 2))]
    with pytest.raises(DataValidationError, match="target_kind='real'"):
        TaskSet.from_arrays("p", X, [[1.0, 2.5, -1.0]])
    with pytest.raises(DataValidationError, match="only one class"):
        TaskSet.from_arrays("p", X, [[1.0, 1.0, 1.0]])
    with pytest.raises(DataValidationError, match="targets are not numbers"):
        TaskSet.from_arrays("p", X, [["a", "b", "c"]])
    with pytest.raises(DataValidationError, match="target_kind must be one of"):
        TaskSet.from_arrays("p", X, [[1.0, -1.0, 1.0]], target_kind="ordinal")


def test_the_target_kind_is_part_of_the_fingerprint_only_when_not_binary():
    p = small_problem()
    as_real = TaskSet.from_arrays("small", [p.X(t) for t in range(p.T)],
                                  [p.y(t) for t in range(p.T)], target_kind="real")
    assert as_real.fingerprint() != p.fingerprint()
    assert as_real.subset([np.arange(5)] * p.T).target_kind == "real"
    assert as_real.summary()["positive_share"] is None and p.summary()["positive_share"]


def test_real_targets_split_by_a_seeded_permutation_with_two_test_rows():
    tasks = regression_problem(T=3, n=4)
    for rep in range(3):
        split = make_split(tasks, ProtocolConfig(seed=3), rep)
        for t in range(tasks.T):
            tr, va, te = split.train[t], split.val[t], split.test[t]
            assert len(te) >= 2 and len(va) >= 1 and len(tr) >= 1
            assert sorted(np.concatenate([tr, va, te])) == list(range(len(tasks.y(t))))
    assert make_split(tasks, ProtocolConfig(seed=3), 0).fingerprint() == \
        make_split(regression_problem(T=3, n=4), ProtocolConfig(seed=3), 0).fingerprint()
    short = TaskSet.from_arrays("s", [np.ones((3, 2)), np.ones((4, 2))],
                                [[1.0, 2.0, 3.0], [1.0, 2, 3, 4]], target_kind="real")
    keep, dropped = evaluable_tasks(short)
    assert keep == [1] and dropped == ["task0"] and MIN_TARGETS == 4


@pytest.mark.parametrize("kind", ["binary", "real"])
def test_the_training_fraction_protocol(kind):
    tasks = small_problem(T=3, n=60) if kind == "binary" else regression_problem(T=3, n=60)
    split = make_split(tasks, ProtocolConfig(train_fraction=0.1), 0)
    for t in range(tasks.T):
        n = len(tasks.y(t))
        trainval = len(split.train[t]) + len(split.val[t])
        assert trainval == pytest.approx(0.1 * n, abs=2) and len(split.test[t]) == n - trainval
        if kind == "binary":
            y = tasks.y(t)
            assert {-1.0, 1.0} <= set(y[split.test[t]]) and {-1.0, 1.0} <= set(
                y[np.concatenate([split.train[t], split.val[t]])])


def test_protocol_keys_record_the_new_settings_and_keep_the_default_one():
    from mtlbench.runner.unit import protocol_key_settings

    d = ProtocolConfig()
    assert d.split_settings() == {"seed": 0, "test_fraction": 0.15, "val_fraction": 0.2,
                                  "protocol_version": 1}
    assert set(protocol_key_settings(d)) == {"search", "budget", "search_version"}
    t = ProtocolConfig(train_fraction=0.2)
    assert "train_fraction" in t.split_settings() and "test_fraction" not in t.split_settings()
    assert protocol_key_settings(ProtocolConfig(select_by="mae"))["select_by"] == "mae"
    with pytest.raises(ConfigError, match="train_fraction must be in"):
        ProtocolConfig(train_fraction=1.5)


def test_published_binary_units_keep_their_keys():
    """The key of every published unit is the hash of its identity as this mtlbench computes
    it (its own recorded provenance and search rule): target kinds, metrics and the
    training-fraction protocol add nothing to the default protocol's key."""
    from mtlbench.report.imported import published_spec, search_versions

    files = sorted((REPO / "leaderboards").glob("*.json"))
    checked = 0
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not str(data.get("format", "")).startswith("mtlbench-leaderboard/"):
            continue
        for u in data["units"][:: max(1, len(data["units"]) // 25)]:
            spec = published_spec(u, data["dataset"])
            assert u["key"] in [spec.key_under(v) for v in search_versions(u)], \
                (path.name, u["model"], u["problem"], u["rep"])
            checked += 1
    assert checked > 100


def test_a_regression_unit_records_every_regression_metric_and_selects_by_rmse():
    tasks = regression_problem()
    out = run_protocol(LASSO(), dict(LASSO.search_space), tasks, ProtocolConfig(budget=6), 0)
    assert out.target_kind == "real" and out.select_by == "rmse" and out.test_auc is None
    assert set(out.metrics) == {"rmse", "mae", "nmse", "explained-variance"}
    assert all(len(v) == tasks.T for v in out.task_metrics.values())
    assert out.metrics["rmse"] == pytest.approx(np.mean(out.task_metrics["rmse"]))
    assert all("val_rmse" in f for f in out.grid if "error" not in f)
    best = min(f["val_rmse"] for f in out.grid if "val_rmse" in f)
    assert out.val_score == best and out.diagnostics["search"]["select_by"] == "rmse"
    by_mae = run_protocol(LASSO(), dict(LASSO.search_space), tasks,
                          ProtocolConfig(budget=6, select_by="mae"), 0)
    assert by_mae.select_by == "mae" and all("val_mae" in f for f in by_mae.grid)


def test_a_binary_unit_records_its_auc_as_before_and_the_other_binary_metrics():
    out = run_protocol(STL(), {"lam": [0.1, 1.0, 10.0]}, small_problem(), ProtocolConfig(), 0)
    assert set(out.metrics) == {"auc", "pooled-auc", "accuracy", "error-rate"}
    assert out.test_auc == out.metrics["auc"] == float(np.mean(out.task_auc))
    assert out.val_auc == out.val_score
    assert out.metrics["error-rate"] == pytest.approx(1 - out.metrics["accuracy"])


def test_a_model_runs_only_on_the_target_kinds_it_declares():
    with pytest.raises(ConfigError, match=r"model 'tfcl' handles binary .* targets \(its "
                                          r"target_kinds\); reg has real-valued targets"):
        run_protocol(TFCL(), dict(TFCL.search_space), regression_problem(), ProtocolConfig(), 0)
    assert STL.target_kinds == ("binary", "real") and TFCL.shift_invariant_loss


def test_regression_forms_of_school_and_lenk(shared_data_dir):
    from mtlbench.dataset import load_tasks
    from mtlbench.plugins import get_registry

    reg = get_registry()
    for name, binary in (("school-regression", "school"), ("lenk-regression", "lenk")):
        tasks = load_tasks(reg.dataset(name), name, shared_data_dir)
        binarized = load_tasks(reg.dataset(binary), binary, shared_data_dir)
        assert tasks.target_kind == "real" and binarized.target_kind == "binary"
        assert tasks.d == binarized.d and reg.dataset(binary).binarized
        assert not reg.dataset(name).binarized
        assert len(np.unique(np.concatenate(tasks.labels))) > 2
    published = json.loads((REPO / "leaderboards" / "school.json").read_text())
    school = load_tasks(reg.dataset("school"), "school", shared_data_dir)
    assert school.fingerprint() == published["units"][0]["data_fingerprint"]


def test_the_plan_checks_the_selection_metric_and_the_protocol_options(tmp_path):
    from mtlbench import api

    store = tmp_path / "s.sqlite"
    p = api.plan(["simulated"], ["stl", "tfcl"], reps=1, store=store, select_by="auc")
    assert not p.skipped and len(p.specs) == 2
    # naming the primary metric is the default protocol: the same keys
    assert [s.key for s in p.specs] == [s.key for s in api.plan(["simulated"], ["stl", "tfcl"],
                                                                reps=1, store=store).specs]
    by_acc = api.plan(["simulated"], ["stl"], reps=1, store=store, select_by="accuracy")
    assert by_acc.specs[0].key not in {s.key for s in p.specs}
    with pytest.raises(ConfigError, match="--select-by rmse: the metric applies to real-valued"):
        api.plan(["simulated"], ["stl"], reps=1, store=store, select_by="rmse")
    with pytest.raises(ConfigError, match="unknown metric 'rmsee'"):
        api.plan(["simulated"], ["stl"], reps=1, store=store, select_by="rmsee")
    with pytest.raises(ConfigError, match="test_fraction .* or train_fraction .* not both"):
        api.plan(["simulated"], ["stl"], reps=1, store=store, test_fraction=0.2,
                 train_fraction=0.3)
    mal = api.plan(["simulated"], ["stl"], reps=1, store=store, train_fraction=0.3)
    assert mal.specs[0].protocol.split_settings()["train_fraction"] == 0.3
