"""Parallel runs: --jobs N (supervised processes) and --scheduler (a Dask distributed cluster).

A ``distributed.LocalCluster`` on loopback (2 worker processes x 1 thread) stands in for a real
cluster.  Results must be identical (to the bit) to a serial run; data goes to the workers once;
failing and over-time units become "failed" records and the other units go on; a unit is never
recorded as failed because a neighbour killed its worker.

Every cluster here is made by :func:`local_cluster`, which keeps a LocalCluster from giving up on
a worker its nanny is restarting: LocalCluster closes a nanny whose worker has not come back
within ``distributed.deploy.lost-worker-timeout`` (15 s), which a restart takes on a loaded
machine (seen: 17 s at load 8 on 2 cores), and a run then waits for workers that never come.
(``dask worker`` deployments have no such timeout.)
"""
from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

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


@contextlib.contextmanager
def local_cluster(n_workers: int = 2, **config):
    """A LocalCluster of ``n_workers`` 1-thread worker processes with nannies, under Dask
    ``config`` (e.g. ``{"distributed.scheduler.allowed-failures": 1}``) for its lifetime."""
    import dask

    settings = {"distributed.deploy.lost-worker-timeout": "600s", **config}
    with dask.config.set(settings), distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=":0") as lc:
        yield lc


@pytest.fixture(scope="module")
def cluster(faulty_dist):
    with local_cluster() as lc:
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("nanny", ["restarts its worker", "does not restart its worker"])
def test_dask_queued_units_run_after_stuck_workers_are_restarted(faulty_dist, tmp_path,
                                                                 monkeypatch, nanny):
    """Every worker stuck in an uninterruptible call (--timeout 1): the stuck units are given
    up and their workers restarted, so the queued healthy units still run.

    Also when a nanny kills its stuck worker but does not start a new one (seen on a loaded CI
    machine: the run waited 180 s for a worker that never came, and the queued units never
    ran): the client asks that nanny to start a worker ``RESTART_BACK_SECONDS`` after the
    restart (2 s here).  Without that the run ends with "no worker" after
    ``WORKERS_BACK_SECONDS`` (30 s here, so a regression fails instead of hanging)."""
    import mtlbench.runner.run as runner
    from distributed.nanny import Nanny

    expected_seconds = runner.expected_seconds

    def slow_first(specs, *args, **kwargs):
        out = expected_seconds(specs, *args, **kwargs)
        return {s.key: 1e6 if s.model == "slow" else out[s.key] for s in specs}

    # the stuck units are sent first, so the stl units wait behind them on both workers
    monkeypatch.setattr(runner, "expected_seconds", slow_first)
    monkeypatch.setattr(mdist, "RESTART_BACK_SECONDS", 2.0)
    monkeypatch.setattr(mdist, "WORKERS_BACK_SECONDS", 30.0)
    store = ResultStore(tmp_path / "q.sqlite")
    reg = get_registry()
    sels = [apply_overrides(reg.model_class("slow"), {"seconds": 60, "chunk": 60}, "slow"),
            apply_overrides(reg.model_class("stl"), {}, "stl")]
    specs = plan_units(reg, sels, resolve_problems(reg, ["tiny"]), ProtocolConfig(reps=2))
    with local_cluster() as lc:
        if nanny.startswith("does not"):
            async def worker_exited(self, exitcode):  # the nanny does nothing about it
                return None

            # the nannies of a LocalCluster live in this process
            monkeypatch.setattr(Nanny, "_on_worker_exit", worker_exited)
        report = run_units(specs, store, scheduler=lc.scheduler_address, timeout=1.0)
    assert report.ran == 4 and report.failed == 2, [f.row["message"] for f in report.failures]
    df = store.units()
    stl, stuck = df[df.model == "stl"], df[df.model != "stl"]
    assert (stl.status == "ok").all()
    # a healthy unit waited behind a stuck one and ran after it was given up.  Not every stl
    # unit: Dask may start one on a worker before that worker's stuck unit (a clean CI run
    # saw stl units start at 15:40:00 and 15:40:16, the stuck ones given up at 15:40:01)
    assert stl.started_at.max() >= stuck.finished_at.min()
    for msg in stuck.message:
        assert "exceeded the timeout of 1 s" in msg and "restarted" in msg, msg


#: (faulty model, repetitions, options, Dask config) of the two drills below
SEGFAULT_DRILLS = {
    # two segfaulting units at once: both workers die, and the problem shipped to them
    # (Dask gives a task up after its workers died allowed-failures + 1 = 2 times)
    "no-timeout": ("f-segv", 2, [], {"distributed.scheduler.allowed-failures": 1}),
    # one unit that segfaults 2 s into each of its 4 attempts (Dask's default 3 retries on
    # the worker that survives): 8 s and more in all, past --timeout 5 + the client's grace
    # (7.5 s), although no attempt is
    "timeout": ("f-segv-late[seconds=2]", 1, ["--timeout", "5"], {}),
}


@pytest.mark.slow
@pytest.mark.parametrize("drill", sorted(SEGFAULT_DRILLS))
def test_dask_records_only_the_unit_that_kills_workers_with_its_cause(faulty_dist, tmp_path,
                                                                     drill):
    """A segfaulting model beside healthy stl and lasso units on a
    local Dask cluster.  Only the faulty units are recorded as failed, with the worker's death
    as the cause, with or without --timeout (before: a neighbour lost with a dying worker
    could be recorded as failed, and with --timeout the faulty unit was recorded as over time:
    its first attempt's start time was kept across Dask's retries)."""
    faulty, reps, options, config = SEGFAULT_DRILLS[drill]
    store = str(tmp_path / "k.sqlite")
    args = ["compare", "--datasets", "tiny", "--models",
            f"{faulty},stl,lasso[rho_ratio=[0.03,0.1]]", "--reps", str(reps),
            "--store", store, *options]
    with local_cluster(**config) as lc:
        res = CliRunner().invoke(cli, args + ["--scheduler", lc.scheduler_address])
    assert res.exit_code == 1, res.output
    units = _units(store)
    assert len(units) == 3 * reps
    for rep in range(reps):
        for healthy in ("stl", "lasso[rho_ratio=[0.03,0.1]]"):
            assert units[healthy, rep][0] == "ok", units[healthy, rep]
        status, msg, _ = units[faulty, rep]
        assert status == "failed", msg
        assert f"{faulty} on tiny rep {rep} killed its Dask worker process every time it " \
               "ran" in msg, msg
        assert "timeout" not in msg


@pytest.mark.slow
def test_dask_results_lost_with_a_dying_worker_are_computed_again(faulty_dist, tmp_path):
    """Finished results held by a worker that dies before the client
    fetched them (future status "lost"; Dask recomputes them) are resubmitted, never
    recorded as failed ("the Dask task failed: NoneType: None").  The worker holding the most
    finished results is killed while the client is busy with the first one."""
    store = ResultStore(tmp_path / "l.sqlite")
    specs = _specs({"slow": {"seconds": 0.5, "chunk": 0.1}}, ["tiny"], reps=8)
    killed = []
    with local_cluster() as lc:
        def kill_a_holder(result):
            if killed:
                return
            time.sleep(3)  # the other units finish meanwhile; their results wait on workers
            with distributed.Client(lc.scheduler_address, set_as_default=False) as client:
                held = {w: sum(str(k).startswith("mtlbench-unit-") for k in keys)
                        for w, keys in client.has_what().items()}
                holder = max(held, key=held.get)
                killed.append(held[holder])
                os.kill(client.run(os.getpid, workers=[holder])[holder], signal.SIGKILL)
            time.sleep(0.5)

        report = run_units(specs, store, scheduler=lc.scheduler_address,
                           on_result=kill_a_holder)
    assert killed and killed[0] >= 1  # results were lost with the worker
    assert report.ran == 8 and report.failed == 0, [f.row["message"] for f in report.failures]
    assert (store.units().status == "ok").all()


@pytest.mark.slow
def test_all_workers_gone_with_the_scheduler_alive_is_said_promptly(faulty_dist, tmp_path):
    """Every worker killed with its nanny (``dask worker`` processes),
    the scheduler alive: the run ends within seconds saying so (before: after 209 s, as
    "lost the connection to the Dask scheduler")."""
    from mtlbench.errors import MTLBenchError

    store = ResultStore(tmp_path / "w.sqlite")
    specs = _specs({"slow": {"seconds": 60, "chunk": 0.05}}, ["tiny"], reps=2)
    with local_cluster(n_workers=0) as lc:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", lc.scheduler_address,
             "--nthreads", "1", "--no-dashboard"], start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with distributed.Client(lc.scheduler_address, set_as_default=False) as client:
                client.wait_for_workers(1, timeout=120)
            threading.Timer(5.0, os.killpg, (worker.pid, signal.SIGKILL)).start()
            t0 = time.monotonic()
            with pytest.raises(MTLBenchError, match="has had no worker for .* every worker "
                                                    "died or was stopped"):
                run_units(specs, store, scheduler=lc.scheduler_address)
            waited = time.monotonic() - t0
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(30)
    assert waited < 5 + mdist.NO_WORKERS_SECONDS + 60, waited


@pytest.mark.slow
def test_a_dead_scheduler_is_a_clear_error(faulty_dist, tmp_path, monkeypatch):
    """The scheduler dies mid-run: the client ends with a clear message (not a raw OSError),
    the units finished before are in the store."""
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


def _documented_cluster_commands() -> dict[str, str]:
    """The ``dask scheduler`` and ``dask worker`` command lines docs/scaling.md tells users
    to type (the first bash block that has both)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "scaling.md").read_text()
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        lines = [ln.strip() for ln in block.splitlines() if not ln.strip().startswith("#")]
        found = {kind: next((ln for ln in lines if f"dask {kind} " in ln), None)
                 for kind in ("scheduler", "worker")}
        if all(found.values()):
            return found
    raise AssertionError("docs/scaling.md shows no dask scheduler / dask worker commands")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_documented_cluster_listens_on_the_private_interface_only(tmp_path):
    """The scheduler and worker command lines of docs/scaling.md, run with 127.0.0.1 as the
    private interface: every port the scheduler, the nanny and the worker listen on -- their
    dashboards' HTTP servers included -- is on that interface."""
    import shlex

    psutil = pytest.importorskip("psutil")
    docs = _documented_cluster_commands()
    ports = {"8786": str(_free_port()), "8787": str(_free_port())}
    procs = []

    def start(kind: str) -> subprocess.Popen:
        line = docs[kind].replace("10.0.0.5", "127.0.0.1").replace("10.0.0.6", "127.0.0.1")
        for old, new in ports.items():
            line = line.replace(old, new)
        words = shlex.split(line.replace('"$(nproc)"', "1"))
        env = dict(os.environ)
        while "=" in words[0]:
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        assert words[:2] == ["dask", kind], words
        proc = subprocess.Popen([sys.executable, "-m", f"distributed.cli.dask_{kind}",
                                 *words[2:]], env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        return proc

    def listening(proc) -> list[tuple[str, int]]:
        out = []
        for p in [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                out += [(c.laddr.ip, c.laddr.port) for c in p.net_connections(kind="inet")
                        if c.status == psutil.CONN_LISTEN]
        return out

    try:
        scheduler = start("scheduler")
        worker = start("worker")
        address = f"tcp://127.0.0.1:{ports['8786']}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, TimeoutError):
                with distributed.Client(address, timeout=10, set_as_default=False) as client:
                    client.wait_for_workers(1, timeout=170)
                    break
            time.sleep(1)
        else:
            pytest.fail("the documented worker never joined the documented scheduler")
        time.sleep(2)  # the worker's HTTP server starts with it
        sockets = {"scheduler": listening(scheduler), "worker": listening(worker)}
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    assert len(sockets["scheduler"]) >= 2 and len(sockets["worker"]) >= 3, sockets
    assert {ip for found in sockets.values() for ip, _ in found} == {"127.0.0.1"}, sockets
