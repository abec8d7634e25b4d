"""``mtlbench new-plugin``: the generated package installs with pip (offline, into a target
folder), passes its own tests unchanged, and its model reaches a leaderboard."""
from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from mtlbench.cli import cli
from mtlbench.scaffold import plugin_names, write_plugin

from _pip_helpers import env_with, pip_install_target, run_mtlbench


def test_new_plugin_writes_the_package(tmp_path):
    res = CliRunner().invoke(cli, ["new-plugin", "my-ridge", "--dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    root = tmp_path / "mtlbench-my-ridge"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [".gitignore", "README.md", "mtlbench_my_ridge.py", "pyproject.toml",
                     "tests/test_my_ridge.py"]
    pyproject = (root / "pyproject.toml").read_text()
    assert '[project.entry-points.mtlbench]\nmy-ridge = "mtlbench_my_ridge"' in pyproject
    assert "from mtlbench.testing import ModelConformance" in \
        (root / "tests/test_my_ridge.py").read_text()
    assert "mtlbench leaderboard" in (root / "README.md").read_text()
    # The template declares a start range, not a plain list
    assert '{"lam": Log([0.1, 1.0, 10.0, 100.0], low=0.0, high=None)}' in \
        (root / "mtlbench_my_ridge.py").read_text()


@pytest.mark.parametrize("bad", ["Bad", "9lives", "with space", "", "class"])
def test_invalid_names_are_clear_errors(tmp_path, bad):
    res = CliRunner().invoke(cli, ["new-plugin", bad, "--dir", str(tmp_path)])
    assert res.exit_code == 2
    assert "invalid plugin name" in res.output and "Traceback" not in res.output


def test_refuses_to_overwrite(tmp_path):
    write_plugin("dup", tmp_path)
    res = CliRunner().invoke(cli, ["new-plugin", "dup", "--dir", str(tmp_path)])
    assert res.exit_code == 2 and "already exists" in res.output


def test_names():
    assert plugin_names("my-ridge") == {"name": "my-ridge", "dist": "mtlbench-my-ridge",
                                        "module": "mtlbench_my_ridge", "cls": "MyRidgeModel",
                                        "test": "test_my_ridge.py"}


def test_generated_package_installs_passes_its_tests_and_reaches_a_leaderboard(tmp_path):
    src = write_plugin("scaffolded", tmp_path / "src")
    target = tmp_path / "site"
    pip_install_target(src, target, tmp_path)
    assert (target / "mtlbench_scaffolded.py").exists()
    env = env_with(target)

    # its own tests, unchanged, in a fresh interpreter (the kit comes in through pytest11)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=src, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed" in proc.stdout and "failed" not in proc.stdout

    # discovered through the installed entry point, compared, on the leaderboard
    proc = run_mtlbench(["plugins"], env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert any("mtlbench-scaffolded" in ln and "0.1.0" in ln for ln in proc.stdout.splitlines())
    store = tmp_path / "r.sqlite"
    proc = run_mtlbench(["compare", "--models", "scaffolded,stl", "--reps", "2",
                         "--store", str(store)], env, tmp_path)
    assert proc.returncode == 0 and "0 failed" in proc.stdout, proc.stdout + proc.stderr
    proc = run_mtlbench(["leaderboard", "--dataset", "simulated", "--store", str(store)],
                        env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "scaffolded" in proc.stdout


@pytest.mark.parametrize("kind", ["model", "dataset"])
def test_scaffolds_import_only_the_public_surface(tmp_path, monkeypatch, kind):
    """Every module a scaffold writes imports, and takes from mtlbench only the names of its
    public surface: the top-level API, ``mtlbench.datasets_api`` and ``mtlbench.testing``
    (each module's ``__all__``), never an internal module such as ``mtlbench.dataset`` or
    ``mtlbench.errors``."""
    import importlib

    import mtlbench
    import mtlbench.datasets_api
    import mtlbench.testing
    from test_architecture import _mtlbench_names

    public = {m.__name__: set(m.__all__) for m in (mtlbench, mtlbench.datasets_api,
                                                     mtlbench.testing)}
    root = write_plugin(f"pub-{kind}", tmp_path, kind=kind)
    files = sorted(root.rglob("*.py"))
    assert [f.name for f in files] == [f"mtlbench_pub_{kind}.py", f"test_pub_{kind}.py"]
    for path in files:
        names = _mtlbench_names(path)
        assert names, path
        off = [f"{m}.{n}" if n else m for m, n in names if n not in public.get(m, ())]
        assert off == [], f"{path.name} imports {off} from outside the public surface"
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.syspath_prepend(str(root / "tests"))
    for path in files:
        importlib.import_module(path.stem)
        monkeypatch.delitem(sys.modules, path.stem)


# ------------------------------------------------------------------ datasets, taken names (#16.8)
def test_new_plugin_warns_when_the_name_is_taken(tmp_path):
    res = CliRunner().invoke(cli, ["new-plugin", "lasso", "--dir", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "Warning" in res.output and "'lasso' is already registered by mtlbench" in res.output
    # The built-in keeps its name, so the new plugin's model would be refused
    assert "(a built-in model): a plugin registering that name is refused when it loads " \
           "and the built-in keeps it. Choose another name, e.g. 'my-lasso'." \
           in " ".join(res.output.split())
    res = CliRunner().invoke(cli, ["new-plugin", "--dataset", "simulated", "--dir",
                                   str(tmp_path / "d")])
    assert "a dataset named 'simulated' is already registered" in res.output
    res = CliRunner().invoke(cli, ["new-plugin", "fresh-name", "--dir", str(tmp_path)])
    assert res.exit_code == 0 and "Warning" not in res.output


def test_new_dataset_plugin_loads_and_passes_the_kit_in_process(tmp_path):
    import importlib.util

    from mtlbench.testing import check_dataset

    res = CliRunner().invoke(cli, ["new-plugin", "--kind", "dataset", "my-votes", "--dir",
                                   str(tmp_path)])
    assert res.exit_code == 0, res.output
    root = tmp_path / "mtlbench-my-votes"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [".gitignore", "README.md", "mtlbench_my_votes.py", "pyproject.toml",
                     "tests/data/tasks.csv", "tests/test_my_votes.py"]
    assert "DatasetConformance" in (root / "tests/test_my_votes.py").read_text()
    spec = importlib.util.spec_from_file_location("mtlbench_my_votes",
                                                  root / "mtlbench_my_votes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ds = mod.MyVotesDataset()
    assert ds.availability(data_dir=root / "tests" / "data") == "in data-dir"
    ts = ds.load("my-votes", data_dir=root / "tests" / "data")
    assert ts.T == 4 and ts.d == 3
    check_dataset(ds, data_dir=root / "tests" / "data")


def test_generated_dataset_package_installs_and_is_compared(tmp_path):
    src = write_plugin("votes", tmp_path / "src", kind="dataset")
    target = tmp_path / "site"
    pip_install_target(src, target, tmp_path)
    env = env_with(target)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=src, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passed" in proc.stdout and "failed" not in proc.stdout
    proc = run_mtlbench(["compare", "--datasets", "votes", "--data-dir", str(src / "tests/data"),
                         "--models", "stl", "--reps", "1", "--store", str(tmp_path / "r.sqlite")],
                        env, tmp_path)
    assert proc.returncode == 0 and "0 failed" in proc.stdout, proc.stdout + proc.stderr
