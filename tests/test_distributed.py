"""Parallel runs: --jobs N (joblib) and --scheduler (a Dask distributed cluster).

A ``distributed.LocalCluster`` on loopback (2 worker processes x 1 thread) stands in for a real
cluster.  Results must be identical (to the bit) to a serial run; data goes to the workers once;
failing and over-time units become "failed" records and the other units go on.
"""
from __future__ import annotations

import os
import sqlite3

import numpy as np
import pytest
from click.testing import CliRunner

import fault_plugins
from mtlbench.runner import dask as mdist
from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.protocol import ProtocolConfig
from mtlbench.runner import load_problem, plan_units, resolve_problems, run_units
from mtlbench.selectors import apply_overrides
from mtlbench.store import ResultStore
from plugin_fixtures import activate

distributed = pytest.importorskip("distributed")

COMPARED = ["status", "test_auc", "val_auc", "best_params", "grid", "n_iter", "n_tasks",
            "split_fingerprint", "data_fingerprint", "dropped_tasks", "history"]


@pytest.fixture(scope="module")
def faulty_dist(tmp_path_factory):
    """The test plugin distribution, visible here and in every worker process."""
    root = fault_plugins.install(tmp_path_factory.mktemp("faulty-dist"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root),
                                                              os.environ.get("PYTHONPATH")])))
        activate(mp, root)
        load_problem.cache_clear()
        yield root
    load_problem.cache_clear()


@pytest.fixture(scope="module")
def cluster(faulty_dist):
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0") as lc:
        yield lc


def _specs(models, datasets, reps):
    reg = get_registry()
    sels = [apply_overrides(reg.model_class(m), over, m) for m, over in models.items()]
    return plan_units(reg, sels, resolve_problems(reg, datasets), ProtocolConfig(reps=reps))


def _snapshot(store: ResultStore):
    units = store.units().set_index("key").sort_index()
    scores = store.task_scores().sort_values(["key", "task_index"]).reset_index(drop=True)
    coefs = {k: store.array(k, "coef") for k in units.index}
    return units, scores, coefs


def _assert_identical(a, b):
    ua, sa, ca = a
    ub, sb, cb = b
    assert list(ua.index) == list(ub.index)
    for col in COMPARED:
        assert ua[col].tolist() == ub[col].tolist(), col
    assert sa[["key", "task_index", "task_name", "test_auc", "n_test"]].equals(
        sb[["key", "task_index", "task_name", "test_auc", "n_test"]])
    for k in ua.index:
        assert (ca[k] is None) == (cb[k] is None)
        if ca[k] is not None:
            assert np.array_equal(ca[k], cb[k])  # bit-identical weights


@pytest.fixture(scope="module")
def serial_run(faulty_dist, tmp_path_factory):
    # lasso (iterative, BLAS-heavy) on a 2-point grid to keep the test short
    specs = _specs({"stl": {}, "lasso": {"rho_ratio": [0.03, 0.1]}}, ["simulated"], reps=2)
    store = ResultStore(tmp_path_factory.mktemp("serial") / "s.sqlite")
    report = run_units(specs, store)
    assert report.ran == 4 and report.failed == 0
    return specs, _snapshot(store)


def test_jobs_2_is_identical_to_serial(serial_run, tmp_path):
    specs, serial = serial_run
    store = ResultStore(tmp_path / "j.sqlite")
    report = run_units(specs, store, jobs=2)
    assert report.ran == 4 and report.failed == 0
    _assert_identical(_snapshot(store), serial)


def test_dask_is_identical_to_serial_and_ships_data_once(serial_run, cluster, tmp_path,
                                                         monkeypatch):
    specs, serial = serial_run
    scattered = []
    real_scatter = distributed.Client.scatter

    def counting_scatter(self, data, *args, **kwargs):
        scattered.append((len(data), kwargs.get("broadcast")))
        return real_scatter(self, data, *args, **kwargs)

    monkeypatch.setattr(distributed.Client, "scatter", counting_scatter)
    store = ResultStore(tmp_path / "d.sqlite")
    seen = []
    report = run_units(specs, store, scheduler=cluster.scheduler_address,
                       on_result=lambda r: seen.append(r.row["key"]))
    assert report.ran == 4 and report.failed == 0 and len(seen) == 4
    _assert_identical(_snapshot(store), serial)
    # one scatter of the one problem, broadcast; workers never loaded data themselves
    assert scattered == [(1, True)]
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        loaded = client.run(lambda: __import__("mtlbench.runner").runner
                            .load_problem.cache_info().currsize)
        hosts = set(store.units()["host"])
    assert len(loaded) == 2 and set(loaded.values()) == {0}
    assert hosts  # provenance kept


def _units(store):
    con = sqlite3.connect(store)
    try:
        return {(m, r): (s, msg or "", tb or "") for m, r, s, msg, tb in con.execute(
            "SELECT model, rep, status, message, traceback FROM units")}
    finally:
        con.close()


def test_dask_failure_isolation_and_worker_side_timeout(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    store = str(tmp_path / "f.sqlite")
    res = CliRunner().invoke(cli, [
        "compare", "--datasets", "tiny", "--models", "stl,fail-raise,slow[seconds=30]",
        "--reps", "2", "--timeout", "1", "--scheduler", cluster.scheduler_address,
        "--store", store])
    assert res.exit_code == 1, res.output  # units failed
    assert "ran 6 unit(s)" in res.output and "4 failed" in res.output
    units = _units(store)
    for rep in (0, 1):
        assert units["stl", rep][0] == "ok"
        status, msg, tb = units["fail-raise", rep]
        assert status == "failed" and "deliberate failure" in msg and "RuntimeError" in tb
        status, msg, tb = units["slow[seconds=30]", rep]
        # stopped on the worker (injected UnitTimeout), not by the client's backstop
        assert status == "failed" and msg == "unit exceeded the timeout of 1 s", msg
        assert "UnitTimeout" in tb
    assert "slow[seconds=30]" in res.output and "—" in res.output


def test_dask_unit_dask_cannot_interrupt_is_given_up_by_the_client(cluster, tmp_path):
    """One uninterruptible 6 s sleep with --timeout 1: the client records the unit as failed
    after timeout + grace (~3 s) and goes on."""
    store = ResultStore(tmp_path / "b.sqlite")
    reg = get_registry()
    sels = [apply_overrides(reg.model_class("slow"), {"seconds": 6, "chunk": 6}, "slow"),
            apply_overrides(reg.model_class("stl"), {}, "stl")]
    specs = plan_units(reg, sels, resolve_problems(reg, ["tiny"]), ProtocolConfig(reps=1))
    report = run_units(specs, store, scheduler=cluster.scheduler_address, timeout=1.0)
    assert report.ran == 2 and report.failed == 1
    df = store.units().set_index("model")
    assert df.loc["stl", "status"] == "ok"
    msg = df.loc["slow[chunk=6,seconds=6]", "message"]
    assert "exceeded the timeout of 1 s" in msg and "no answer from its Dask worker" in msg


def test_unreachable_scheduler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(mdist, "CONNECT_TIMEOUT", 1.0)
    res = CliRunner().invoke(cli, ["compare", "--models", "stl", "--reps", "1",
                                   "--scheduler", "tcp://127.0.0.1:9",
                                   "--store", str(tmp_path / "u.sqlite")])
    assert res.exit_code == 2, res.output
    assert "cannot connect to the Dask scheduler at 'tcp://127.0.0.1:9'" in res.output
    assert "Traceback" not in res.output


def test_units_are_resubmitted_when_the_shipped_data_is_lost(cluster, tmp_path, monkeypatch):
    """Workers that die can take every copy of a shipped problem with them; the units that
    needed it come back cancelled.  Simulated here by cancelling the first shipment: the
    client ships the problem again and reruns those units."""
    real_ship = mdist._DaskRun.ship
    shipments = []

    def ship_then_lose_first(self, pk):
        fut = real_ship(self, pk)
        if not shipments:
            fut.cancel()
        shipments.append(fut.key)
        return fut

    monkeypatch.setattr(mdist._DaskRun, "ship", ship_then_lose_first)
    store = ResultStore(tmp_path / "l.sqlite")
    specs = _specs({"stl": {}}, ["tiny"], reps=2)
    report = run_units(specs, store, scheduler=cluster.scheduler_address)
    assert report.ran == 2 and report.failed == 0, [f.row["message"] for f in report.failures]
    assert len(set(shipments)) == 2  # the lost shipment and one re-shipment


def test_dask_queued_units_run_after_stuck_workers_are_restarted(cluster, tmp_path):
    """Every worker stuck in an uninterruptible call (--timeout 1): the stuck units are given
    up and their workers restarted, so the queued healthy units still run."""
    store = ResultStore(tmp_path / "q.sqlite")
    reg = get_registry()
    sels = [apply_overrides(reg.model_class("slow"), {"seconds": 60, "chunk": 60}, "slow"),
            apply_overrides(reg.model_class("stl"), {}, "stl")]
    specs = plan_units(reg, sels, resolve_problems(reg, ["tiny"]), ProtocolConfig(reps=2))
    report = run_units(specs, store, scheduler=cluster.scheduler_address, timeout=1.0)
    assert report.ran == 4 and report.failed == 2, [f.row["message"] for f in report.failures]
    df = store.units()
    assert (df[df.model == "stl"].status == "ok").all()
    for msg in df[df.model != "stl"].message:
        assert "exceeded the timeout of 1 s" in msg and "restarted" in msg, msg


def test_dask_names_the_model_that_kills_workers_and_spares_healthy_units(faulty_dist, tmp_path):
    store = ResultStore(tmp_path / "k.sqlite")
    specs = _specs({"f-segv": {}, "f-good": {}}, ["tiny"], reps=1)
    # A cluster of its own: this test kills workers, and must not depend on how earlier tests
    # left the shared cluster's nannies (workers restarted several times already).
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0") as lc:
        report = run_units(specs, store, scheduler=lc.scheduler_address)
    df = store.units().set_index("model")
    assert df.loc["f-good", "status"] == "ok", df.loc["f-good", "message"]
    msg = df.loc["f-segv", "message"]
    assert df.loc["f-segv", "status"] == "failed" and "f-segv on tiny rep 0" in msg, msg
    assert "killed its Dask worker process" in msg or "Dask workers died" in msg, msg
    assert report.failed == 1


def test_a_dead_scheduler_is_a_clear_error(faulty_dist, tmp_path, monkeypatch):
    """The scheduler dies mid-run: the client ends with a clear message (not a raw OSError),
    the units finished before are in the store."""
    import threading

    from mtlbench.errors import MTLBenchError

    monkeypatch.setattr(mdist, "SCHEDULER_LOST_SECONDS", 2.0)
    store = ResultStore(tmp_path / "d.sqlite")
    reg = get_registry()
    sels = [apply_overrides(reg.model_class("slow"), {"seconds": 30, "chunk": 0.05}, "slow")]
    specs = plan_units(reg, sels, resolve_problems(reg, ["tiny"]), ProtocolConfig(reps=2))
    lc = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0")
    threading.Timer(3.0, lc.close).start()
    with pytest.raises(MTLBenchError, match="lost the connection to the Dask scheduler"):
        run_units(specs, store, scheduler=lc.scheduler_address)
