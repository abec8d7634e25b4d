"""End to end through the CLI (click's CliRunner): compare, resume, results, errors."""
import sqlite3

from click.testing import CliRunner

from mtlbench.cli import cli


def _rows(path):
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT key, model, rep, status, test_auc, finished_at FROM units "
                           "ORDER BY key").fetchall()
    finally:
        con.close()


def test_compare_prints_table_and_rerun_refits_nothing(tmp_path):
    store = str(tmp_path / "res.sqlite")
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", "--models", "lasso,stl", "--reps", "2", "--store", store])
    assert res.exit_code == 0, res.output
    assert "simulated" in res.output and "lasso" in res.output and "stl" in res.output
    assert "±" in res.output and "ran 4 unit(s)" in res.output
    first = _rows(store)
    assert len(first) == 4 and all(r[3] == "ok" for r in first)
    res = runner.invoke(cli, ["compare", "--models", "lasso,stl", "--reps", "2", "--store", store])
    assert res.exit_code == 0 and "ran 0 unit(s)" in res.output and "4 already" in res.output
    assert _rows(store) == first  # nothing refitted or rewritten
    res = runner.invoke(cli, ["results", "--store", store])
    assert res.exit_code == 0 and "lasso" in res.output


def test_task_scores_and_provenance_are_stored(tmp_path):
    store = str(tmp_path / "res.sqlite")
    res = CliRunner().invoke(cli, ["compare", "--models", "stl", "--reps", "1", "--seed", "5",
                                   "--store", store])
    assert res.exit_code == 0, res.output
    con = sqlite3.connect(store)
    n = con.execute("SELECT COUNT(*) FROM task_scores").fetchone()[0]
    row = con.execute("SELECT seed, split_fingerprint, versions, best_params, time_fit "
                      "FROM units").fetchone()
    assert n == 100  # one row per simulated user
    assert row[0] == 5 and len(row[1]) == 64 and "numpy" in row[2] and "lam" in row[3]


def test_unknown_names_suggest_the_closest(tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", "--models", "lassso", "--store", str(tmp_path / "x")])
    assert res.exit_code == 2 and "unknown model 'lassso'" in res.output
    assert "Did you mean 'lasso'" in res.output and "Traceback" not in res.output
    res = runner.invoke(cli, ["compare", "--datasets", "simulatd", "--store", str(tmp_path / "x")])
    assert res.exit_code == 2 and "Did you mean 'simulated'" in res.output


def test_listing_commands():
    runner = CliRunner()
    for cmd in (["plugins"], ["models"], ["datasets", "--no-load"]):
        res = runner.invoke(cli, cmd)
        assert res.exit_code == 0, res.output
    assert "simulated" in runner.invoke(cli, ["datasets"], env={"COLUMNS": "200"}).output
