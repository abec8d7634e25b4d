"""End to end through the CLI (click's CliRunner): compare, resume, results, errors."""
import json
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


# ------------------------------------------------------------------ output that pipes (#16.3)
def test_tables_do_not_wrap_when_output_is_not_a_terminal():
    res = CliRunner().invoke(cli, ["datasets"], env={"COLUMNS": "40"})
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if "simulated" in ln)
    for cell in ("100", "20000", "80", "0.250", "generated"):  # the whole row on one line
        assert cell in line, (cell, line)
    assert "positive share" in res.output
    res = CliRunner().invoke(cli, ["models"], env={"COLUMNS": "40"})
    assert any("tfcl-q-noauc" in ln and "TFCL" in ln for ln in res.output.splitlines())


def test_real_pipe_to_grep():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "from mtlbench.cli import main; main()",
                          "datasets", "--no-load"], capture_output=True, text=True,
                         env={**__import__("os").environ, "COLUMNS": "50"})
    assert out.returncode == 0, out.stderr
    assert [ln for ln in out.stdout.splitlines() if "simulated" in ln and "generated" in ln]


def test_format_json_and_csv_parse():
    import csv
    import io
    import json

    runner = CliRunner()
    plugins = json.loads(runner.invoke(cli, ["plugins", "--format", "json"]).output)
    assert any(p["plugin"] == "lasso" and p["models"] == ["lasso"] for p in plugins)
    assert any("import-attributes" in p["commands"] for p in plugins)
    models = json.loads(runner.invoke(cli, ["models", "--format", "json"]).output)
    lasso = next(m for m in models if m["name"] == "lasso")
    assert lasso["distribution"] == "mtlbench" and isinstance(lasso["search_space"], dict)
    ds = json.loads(runner.invoke(cli, ["datasets", "--format", "json"]).output)
    sim = next(d for d in ds if d["dataset"] == "simulated")
    assert sim["tasks"] == 100 and sim["features"] == 80 and sim["availability"] == "generated"
    rows = list(csv.DictReader(io.StringIO(runner.invoke(cli, ["datasets", "--format", "csv",
                                                               "--no-load"]).output)))
    assert any(r["dataset"] == "simulated" and r["problem"] == "simulated" for r in rows)
    rows = list(csv.DictReader(io.StringIO(runner.invoke(cli, ["models", "--format",
                                                               "csv"]).output)))
    assert {"lasso", "stl", "tfcl"} <= {r["name"] for r in rows}


def test_results_format(tmp_path):
    import json

    store = str(tmp_path / "r.sqlite")
    runner = CliRunner()
    assert runner.invoke(cli, ["compare", "--models", "stl", "--reps", "2", "--store",
                               store]).exit_code == 0
    doc = json.loads(runner.invoke(cli, ["results", "--store", store, "--format",
                                         "json"]).output)
    rows = doc["results"]
    assert rows[0]["model"] == "stl" and rows[0]["reps"] == 2
    text = runner.invoke(cli, ["results", "--store", store, "--format", "csv"]).output
    header = text.splitlines()[0].split(",")
    assert {"problem", "model"} <= set(header)


def test_help_lists_every_command_and_plugin_commands_work():
    runner = CliRunner()
    res = runner.invoke(cli, ["--help"])
    for name in ("compare", "datasets", "leaderboard", "models", "new-plugin", "plugins",
                 "publish", "results", "Plugin commands"):
        assert name in res.output
    assert runner.invoke(cli, ["leaderboard", "--help"]).exit_code == 0
    assert runner.invoke(cli, ["check-ustep", "--help"]).exit_code == 0
    res = runner.invoke(cli, ["no-such-command"])
    assert res.exit_code == 2 and "No such command" in res.output


def test_report_lists_keep_bracketed_names_whole(tmp_path):
    """--models/--datasets of the report commands split on top-level commas only, so a label
    or a parameterised dataset with a comma inside brackets stays one name."""
    from hypothesis import given
    from hypothesis import strategies as st

    from mtlbench.cli._options import csv_list

    assert csv_list("lasso, stl[lam=[0.1,1]] ,") == ["lasso", "stl[lam=[0.1,1]]"]
    assert csv_list(None) is None

    @given(st.lists(st.from_regex(r"[a-z]{1,5}(\[[a-z]=\[[0-9],[0-9]\]\])?", fullmatch=True),
                    min_size=1, max_size=4))
    def roundtrip(names):
        assert csv_list(", ".join(names)) == names

    roundtrip()
    store = str(tmp_path / "res.sqlite")
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", "-m", "stl[lam=[0.1,1]]", "--reps", "1",
                              "--store", store])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["results", "--store", store, "--format", "json",
                              "--models", "stl[lam=[0.1,1]],lasso"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert [r["model"] for r in out["results"]] == ["stl[lam=[0.1,1]]"]
    assert "lasso" in json.dumps(out["absent_models"])
