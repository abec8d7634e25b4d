"""Options and config files are validated before any work: one clear line
each, exit status 2, never a traceback, nothing planned or stored."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from mtlbench.cli import cli
from mtlbench.config import MAX_SEED, build_run_config
from mtlbench.errors import ConfigError


def _compare(tmp_path, *args):
    store = tmp_path / "r.sqlite"
    res = CliRunner().invoke(cli, ["compare", "--models", "stl", "--reps", "1",
                                   "--store", str(store), *args])
    return res, store


@pytest.mark.parametrize("args, fragment", [
    (["--seed", "-1"], "--seed = -1: must be an integer between 0 and"),
    (["--seed", str(2 ** 70)], "--seed = 1180591620717411303424"),
    (["--timeout", "nan"], "--timeout = nan: expected a finite number"),
    (["--timeout", "inf"], "--timeout = inf: expected a finite number"),
    (["--timeout", "-5"], "--timeout = -5.0: must be > 0"),
    (["--timeout", "0"], "--timeout = 0.0: must be > 0"),
    (["--test-fraction", "0"], "--test-fraction = 0.0: must be strictly between 0 and 1"),
    (["--val-fraction", "0"], "--val-fraction = 0.0: must be strictly between 0 and 1"),
    (["--val-fraction", "1.5"], "--val-fraction = 1.5"),
    (["--models", ""], "--models is empty"),
    (["--datasets", ""], "--datasets is empty"),
    (["--reps", "1000000000"], "--reps = 1000000000: must be an integer between 1 and 1000"),
    (["--reps", "0"], "--reps = 0"),
    (["--budget", "0"], "--budget = 0"),
    (["--search", "bayes"], "unknown searcher 'bayes'"),
    (["--jobs", "0"], "--jobs must be >= 1 (or -1 for all cores), got 0"),
])
def test_bad_options_are_one_clear_line_before_any_work(tmp_path, args, fragment):
    res, store = _compare(tmp_path, *args)
    assert res.exit_code == 2, res.output
    assert fragment in res.output, res.output
    assert "Traceback" not in res.output
    assert not store.exists()  # nothing was planned or stored


@pytest.mark.parametrize("line, fragment", [
    ("reps = 1.7", "[compare] reps = 1.7: expected an integer"),
    ("reps = true", "[compare] reps = True: expected an integer"),
    ("reps = 2.0", "expected an integer (write 2)"),
    ('reps = "3"', "[compare] reps = '3': expected an integer"),
    ("seed = -1", "[compare] seed = -1"),
    ('seed = "x"', "[compare] seed = 'x': expected an integer"),
    ("timeout = -5", "[compare] timeout = -5.0: must be > 0"),
    ("timeout = nan", "[compare] timeout = nan"),
    ("timeout = inf", "[compare] timeout = inf"),
    ('timeout = "10"', "[compare] timeout = '10': expected a number"),
    ("test_fraction = 0", "[compare] test_fraction = 0.0"),
    ("val_fraction = [0.2]", "[compare] val_fraction = [0.2]: expected a number"),
    ("jobs = 1.5", "[compare] jobs = 1.5"),
    ("datasets = 3", "[compare] datasets = 3"),
    ("models = [1, 2]", "[compare] models = [1, 2]: expected a list of strings"),
    ('models = ""', "[compare] models is empty"),
    ("budget = 0", "[compare] budget = 0"),
    ('search = "nope"', "unknown searcher 'nope'"),
    ("search = 1", "[compare] search = 1: expected a searcher name"),
    ("bogus = 1", "unknown keys ['bogus']"),
])
def test_wrongly_typed_toml_values_are_one_clear_line(tmp_path, line, fragment):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[compare]\n{line}\n")
    res = CliRunner().invoke(cli, ["compare", "--models", "stl", "--reps", "1",
                                   "--config", str(cfg), "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2, res.output
    assert fragment in res.output, res.output
    assert "Traceback" not in res.output


def test_defaults_and_precedence():
    run = build_run_config({}, {})
    assert run.protocol.reps == 15 and run.protocol.seed == 0
    assert run.protocol.search == "adaptive" and run.protocol.budget == 20
    assert run.datasets == ["simulated"] and run.selectors == [] and run.jobs == -1  # all CPUs
    cfg = {"compare": {"reps": 3, "seed": 4, "search": "grid", "budget": 9, "timeout": 5,
                       "models": ["stl"], "datasets": "simulated"}}
    run = build_run_config({"reps": 2, "budget": 7}, cfg, "c.toml", searchers=["grid"])
    assert (run.protocol.reps, run.protocol.seed, run.protocol.budget) == (2, 4, 7)
    assert run.protocol.search == "grid" and run.timeout == 5.0 and run.selectors == ["stl"]
    assert build_run_config({"seed": MAX_SEED}).protocol.seed == MAX_SEED
    with pytest.raises(ConfigError, match="--seed"):
        build_run_config({"seed": MAX_SEED + 1})


def test_search_and_budget_change_the_unit_key(tmp_path):
    from mtlbench.store import ResultStore

    store = tmp_path / "r.sqlite"
    base = ["compare", "--models", "stl", "--reps", "1", "--store", str(store)]
    runner = CliRunner()
    for extra in ([], ["--budget", "8"], ["--search", "grid"], ["--budget", "8"]):
        res = runner.invoke(cli, base + extra)
        assert res.exit_code == 0, res.output
    rs = ResultStore(str(store))
    units = rs.units()
    rs.close()
    assert len(units) == 3  # the repeated --budget 8 run reused its unit
    assert sorted(p["search"] for p in units["protocol"]) == ["adaptive", "adaptive", "grid"]
    assert sorted(p["budget"] for p in units["protocol"]) == [8, 20, 20]
