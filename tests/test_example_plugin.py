"""The external example plugin (examples/mtlbench-meanreg) installed with pip is discovered
through its real entry point and runs in ``mtlbench compare`` (all in subprocesses)."""
from __future__ import annotations

import pytest

from _pip_helpers import REPO, env_with, pip_install_target, run_mtlbench

EXAMPLE = REPO / "examples" / "mtlbench-meanreg"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("meanreg")
    target = work / "site"
    pip_install_target(EXAMPLE, target, work)
    assert (target / "mtlbench_meanreg.py").exists()
    return work, env_with(target)


def test_plugins_lists_distribution_and_version(installed):
    work, env = installed
    proc = run_mtlbench(["plugins"], env, work)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if "mtlbench-meanreg" in ln)
    assert "0.1.0" in line and "meanreg-example" in line


def test_models_lists_it_with_distribution(installed):
    work, env = installed
    proc = run_mtlbench(["models"], env, work)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines()
                if ln.strip("│ ").startswith("meanreg-example"))
    assert "MeanRegularizedMTL" in line and "mtlbench-meanreg 0.1.0" in line


def test_compare_runs_it(installed):
    work, env = installed
    store = work / "results.sqlite"
    proc = run_mtlbench(["compare", "--models", "meanreg-example", "--reps", "1", "--store",
                         str(store)], env, work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout
    from mtlbench.store import ResultStore

    rs = ResultStore(str(store))
    df = rs.units()
    rs.close()
    assert list(df.model) == ["meanreg-example"] and list(df.status) == ["ok"]
    assert df.test_auc.iloc[0] > 0.8
