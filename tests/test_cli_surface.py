"""The everyday command line, tried as a new user would: every command in ``--help``, one
spelling of each option, ``models`` at 100 columns, progress in a pipe with an ETA from this
run's rate, one number shown one way, files written only when asked, and a data folder lookup
that notices a subfolder."""
from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import mtlbench
from mtlbench.cli import cli
from mtlbench.cli.main import COMMANDS, PLUGIN_COMMANDS, load_command

from test_report_select import make, unit

REPO = Path(__file__).resolve().parents[1]


def _all_commands() -> dict[str, click.Command]:
    group = click.Group()
    from mtlbench.plugins import get_registry

    get_registry().add_commands(group)
    return {**{n: load_command(n) for n in COMMANDS}, **group.commands}


# ------------------------------------------------------------------ --help lists every command
def test_help_lists_every_command_including_those_of_the_builtin_plugins():
    text = CliRunner().invoke(cli, ["--help"], terminal_width=200).output
    for name in [*COMMANDS, *PLUGIN_COMMANDS]:
        assert re.search(rf"^\s+{re.escape(name)}\s", text, re.M), name
    assert "import-attributes" in text and "check-ustep" in text


def test_plugin_command_table_is_what_the_builtin_plugins_register():
    from mtlbench.cli.info import _plugin_commands
    from mtlbench.plugins import BUILTIN_DISTRIBUTION, get_registry

    reg = get_registry()
    builtin = {name for (dist, _), names in _plugin_commands(reg).items()
               if dist == BUILTIN_DISTRIBUTION for name in names}
    assert builtin == set(PLUGIN_COMMANDS)
    assert all(len(h) <= 75 for h in PLUGIN_COMMANDS.values())


# ------------------------------------------------------------------ one spelling per option
def test_each_option_has_one_spelling_across_commands():
    """A long option has the same short form in every command that has it, a short form
    means one long option everywhere, and -m / -d are the models / dataset(s) options."""
    short_of: dict[str, set[str]] = {}
    long_of: dict[str, set[str]] = {}
    for name, cmd in _all_commands().items():
        for p in cmd.params:
            if not isinstance(p, click.Option) or p.hidden:
                continue
            longs = [o for o in p.opts if o.startswith("--")]
            shorts = [o for o in p.opts if not o.startswith("--")]
            for lg in longs:
                short_of.setdefault(lg, set()).update(shorts or ["(none)"])
            for sh in shorts:
                long_of.setdefault(sh, set()).update(longs)
    mixed = {lg: s for lg, s in short_of.items() if len(s - {"(none)"}) > 1}
    assert mixed == {}
    assert long_of["-m"] == {"--models"}
    assert long_of["-d"] <= {"--datasets", "--dataset"}
    for lg in ("--models", "--datasets", "--dataset"):
        assert short_of[lg] - {"(none)"} == {"-" + lg[2]}, lg
        assert "(none)" not in short_of[lg], lg


def test_models_and_datasets_options_take_repeats_and_commas(tmp_path):
    res = CliRunner().invoke(cli, ["compare", "-m", "stl", "-m", "lasso,stl[lam=1.0]",
                                   "-d", "simulated", "--reps", "1", "--dry-run",
                                   "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 0, res.output
    assert "3 model(s) x 1 problem(s)" in res.output
    res = CliRunner().invoke(cli, ["compare", "-m", "lasso]", "--dry-run",
                                   "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 2 and "invalid model selector in --models 'lasso]'" in res.output


# ------------------------------------------------------------------ models at 100 columns
def test_models_is_readable_at_100_columns():
    res = CliRunner().invoke(cli, ["models"], env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(map(len, lines)) <= 100
    # one block per model: its name, class and distribution on the first line, then one line
    # per searched hyperparameter
    title = next(i for i, ln in enumerate(lines) if ln.startswith("lasso  "))
    assert "LASSO" in lines[title] and "mtlbench" in lines[title]
    param = next(ln for ln in lines[title:] if "rho_ratio" in ln)
    assert re.search(r"rho_ratio\s+log\s+start 0\.003 \.\. 0\.3\s+limits - \.\. 1", param)


# ------------------------------------------------------------------ one number, one way
#: four test AUCs whose mean x 100 is 84.825 exactly in decimals: 100 * mean(x) is
#: 84.82499999999999 and mean(100 * x) 84.825 -- rounded at two decimals, 84.82 and 84.83
AUCS = [0.882, 0.878, 0.806, 0.827]


def test_one_number_is_shown_one_way(tmp_path, capsys):
    from mtlbench.cli.run import _print_summary
    from mtlbench.report.leaderboard import build_leaderboard

    st = make(tmp_path / "s.sqlite", [unit("lasso", r, a, reps=4) for r, a in enumerate(AUCS)])
    board = build_leaderboard(st, "toy")
    units = st.units()
    st.close()
    cell = board.rows[0].cells["toy"]
    assert f"{cell.mean:.2f}" == "84.83"
    _print_summary(units)                                   # the end of `compare`
    assert "84.83 ± " in capsys.readouterr().out
    res = CliRunner().invoke(cli, ["results", "--store", str(tmp_path / "s.sqlite")])
    assert "84.83 ± " in res.output
    res = CliRunner().invoke(cli, ["leaderboard", "-d", "toy", "--store",
                                   str(tmp_path / "s.sqlite")])
    assert "84.83 ± " in res.output and "84.82" not in res.output
    api = mtlbench.load_results(tmp_path / "s.sqlite")
    assert api.summary()["test_auc_mean_x100"].item() == cell.mean       # the same float
    assert api.to_frame()["test_auc_x100"].tolist() == pytest.approx([100 * a for a in AUCS])
    assert "test_auc" not in api.to_frame() and "test_auc" not in api.to_frame(level="task")


# ------------------------------------------------------------------ progress in a pipe
class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _Spec:
    def __init__(self, i: int) -> None:
        self.key, self.label, self.problem, self.rep = f"k{i}", "m", "p", i


class _Res:
    def __init__(self, spec: _Spec, t: float) -> None:
        self.spec, self.ok = spec, True
        self.row = {"model": "m", "problem": "p", "rep": spec.rep, "time_total": t}


@pytest.mark.parametrize("expected,every", [(1.0, 10.0), (10.0, 1.0)])
def test_eta_uses_the_rate_measured_in_this_run(expected, every):
    """Ten units expected at ``expected`` s each on 2 workers, finishing one every ``every``
    s of wall time: once units have finished, the ETA is the work left at the rate seen."""
    from mtlbench.cli._progress import ProgressState

    clock = _Clock()
    state = ProgressState(clock)
    specs = [_Spec(i) for i in range(10)]
    state.run_started(specs, {s.key: expected for s in specs}, jobs=2)
    assert state.eta_seconds() == pytest.approx(10 * expected / 2)  # no rate yet
    for i in range(4):
        state.unit_started(specs[i])
    for i in range(4):
        clock.t += every
        state.unit_finished(_Res(specs[i], t=123.0))   # the unit's own time is not used
    # 4 units in 4 * every s: the run does one unit per `every` s; 6 are left
    assert state.eta_seconds() == pytest.approx(6 * every)


def test_compare_in_a_pipe_prints_a_line_per_unit(tmp_path):
    res = CliRunner().invoke(cli, ["compare", "-m", "stl", "--reps", "2", "-j", "1",
                                   "--store", str(tmp_path / "r.sqlite")])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("[")]
    assert len(lines) == 2, res.output
    assert re.match(r"\[1/2\] ok +stl simulated rep \d  [\d.]+ s  \| elapsed \d+:\d\d, "
                    r"ETA \d+:\d\d$", lines[0]), lines[0]
    assert lines[1].endswith(", done")
    assert "running 2 unit(s) in 1 process(es)" in res.output


# ------------------------------------------------------------------ files only when asked
def test_printing_commands_write_no_figure_unless_asked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from test_report_across import MEANS, _rows

    make(tmp_path / "s.sqlite", _rows(MEANS)).close()
    res = CliRunner().invoke(cli, ["leaderboard", "--all", "--store", "s.sqlite"])
    assert res.exit_code == 0, res.output
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("s.sqlite")] == []
    res = CliRunner().invoke(cli, ["leaderboard", "--all", "--store", "s.sqlite",
                                   "--figures", "figs"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "figs" / "summary-cd.png").is_file()
    assert "](figs/summary-cd.png)" in res.output
    res = CliRunner().invoke(cli, ["leaderboard", "-d", "one", "--store", "s.sqlite",
                                   "--figures", "figs"])
    assert res.exit_code == 2 and "--figures DIR goes with --all" in res.output


# ------------------------------------------------------------------ no machine paths in docs
def test_docs_name_no_folder_of_a_development_machine():
    bad = re.compile(r"(/work/|/home/\w|/Users/\w|/root/|C:\\\\Users)")
    hits = [f"{p.relative_to(REPO)}:{i + 1}" for p in sorted((REPO / "docs").glob("*.md"))
            for i, ln in enumerate(p.read_text(encoding="utf-8").splitlines()) if bad.search(ln)]
    assert hits == []


# ------------------------------------------------------------------ the data folder lookup
def test_a_missing_file_in_a_subfolder_of_the_data_dir_is_named(tmp_path):
    from mtlbench.datasets_api import DataFile, DataSource, locate
    from mtlbench.errors import DatasetUnavailableError

    src = DataSource("toy", (DataFile("toy.csv", sha256="0" * 64),))
    (tmp_path / "downloads" / "Toy data").mkdir(parents=True)
    (tmp_path / "downloads" / "Toy data" / "toy.csv").write_text("x\n")
    with pytest.raises(DatasetUnavailableError) as ei:
        locate(src, data_dir=tmp_path, cache_dir=tmp_path / "cache", allow_download=False)
    msg = str(ei.value)
    assert (f"found toy.csv in {tmp_path / 'downloads' / 'Toy data'}, a subfolder of the data "
            f"folder {tmp_path}; use --data-dir {tmp_path / 'downloads' / 'Toy data'}") in msg


def test_shoes_in_a_subfolder_is_named_and_without_a_copy_synthetic_is_suggested(tmp_path):
    from mtlbench.errors import DatasetUnavailableError
    from mtlbench_datasets.personalized import Shoes

    with pytest.raises(DatasetUnavailableError) as ei:
        Shoes().load("brown", data_dir=tmp_path)
    assert "--datasets synthetic-attributes" in str(ei.value)
    (tmp_path / "crowd" / "shoes").mkdir(parents=True)
    (tmp_path / "crowd" / "shoes" / "labels.csv").write_text("user,item,attribute,label\n")
    (tmp_path / "crowd" / "sun").mkdir(parents=True)   # another data set's folder: not named
    (tmp_path / "crowd" / "sun" / "labels.csv").write_text("user,item,attribute,label\n")
    (tmp_path / "crowd" / "sun" / "dataset.json").write_text('{"name": "sun"}')
    with pytest.raises(DatasetUnavailableError) as ei:
        Shoes().load("brown", data_dir=tmp_path)
    msg = str(ei.value)
    assert f"found labels.csv in {tmp_path / 'crowd' / 'shoes'}," in msg
    assert f"use --data-dir {tmp_path / 'crowd'}" in msg and "other folder" not in msg
