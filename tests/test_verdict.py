"""The verdict pages are generated from the published JSON.

``leaderboards/verdict.md`` and ``leaderboards/simulated-paper.md`` are written by
``scripts/write_verdict.py``; here they are regenerated from the committed
``leaderboards/*.json`` and compared line by line, so a number (or a word chosen from the
numbers) that no longer matches the data fails.  The paper's claims are checked against the
lines of its LaTeX source they cite, the word rules on pairs built by hand, and the pages of a
format-3 publication with a multi-problem stand-in data set are generated from a small store.
"""
from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from mtlbench.report.leaderboard import build_leaderboard
from mtlbench.report.render import to_json
from mtlbench.report.schema import FORMAT_VERSION

from test_report_select import make, unit

REPO = Path(__file__).resolve().parents[1]
PUBLISHED = REPO / "leaderboards"
sys.path.insert(0, str(REPO / "scripts"))

import verdict_pages as vp  # noqa: E402
import write_verdict  # noqa: E402


@pytest.fixture(scope="module")
def published():
    """(boards, pages) of the committed folder, read once for the module."""
    from mtlbench.report import read_published

    boards = read_published(PUBLISHED)
    if not boards:
        pytest.skip(f"no published leaderboard JSON in {PUBLISHED}")
    return boards, vp.render_pages(PUBLISHED, boards)


# ================================================================================ the pages
def test_committed_pages_match_the_published_json(published):
    _, pages = published
    assert set(pages) == {"verdict.md", "simulated-paper.md"}
    assert vp.differences(PUBLISHED, pages) == [], (
        "the pages no longer match the published JSON: run "
        "`python scripts/write_verdict.py leaderboards` and read the diff")
    for text in pages.values():
        assert text.startswith(vp.MARKER)


def test_a_number_changed_in_a_page_is_found(published, tmp_path):
    _, pages = published
    for fname, text in pages.items():
        (tmp_path / fname).write_text(text, encoding="utf-8")
    assert vp.differences(tmp_path, pages) == []
    verdict = pages["verdict.md"]
    line = next(x for x in verdict.splitlines() if x.startswith("**lenk**"))
    number = re.search(r"\d+\.\d\d", line).group(0)
    changed = f"{float(number) + 0.01:.2f}"
    (tmp_path / "verdict.md").write_text(
        verdict.replace(line, line.replace(number, changed, 1)), encoding="utf-8")
    found = vp.differences(tmp_path, pages)
    row = verdict.splitlines().index(line) + 1
    assert len(found) == 1 and found[0].startswith(f"verdict.md line {row}, column ")
    page, data = found[0].split("\n")[1:]
    assert changed in page and number in data and number not in page


def test_a_changed_result_changes_the_numbers_and_the_words(published, tmp_path):
    boards, pages = published
    if "lenk" not in boards or "tfcl" not in [r.model for r in boards["lenk"].rows]:
        pytest.skip("the published folder has no lenk table with tfcl")
    changed = dict(boards)
    lenk = changed["lenk"] = copy.deepcopy(boards["lenk"])
    cell = lenk.row("tfcl").cells["lenk"]
    cell.test_auc_x100 = [x - 5.0 for x in cell.test_auc_x100]
    cell.mean -= 5.0
    new = vp.render_pages(PUBLISHED, changed)["verdict.md"]
    assert new != pages["verdict.md"]
    para = next(x for x in new.splitlines() if x.startswith("**lenk**"))
    stl = lenk.row("stl").cells["lenk"].mean
    assert f"TFCL (P) {cell.mean:.2f} ± {cell.std:.2f}" in para
    # 5 points lower on every repetition: below STL on most of them, now significantly
    assert f"significantly worse than STL {stl:.2f} ({cell.mean - stl:+.2f}; p_Holm" in para
    (tmp_path / "verdict.md").write_text(pages["verdict.md"], encoding="utf-8")
    assert vp.differences(tmp_path, {"verdict.md": new})


# ================================================================================ the rules
def _pair(diff: float, p: float | None) -> vp.Pair:
    return vp.Pair("a", "b", 80.0 + diff, 80.0, p, 15, "page")


@pytest.mark.parametrize("diff,p,word", [
    (-2.78, 0.13, "below"), (2.0, 0.2, "above"), (-0.004, 0.9, "tied with"),
    (-2.0, 0.01, "significantly worse than"), (0.5, 0.049, "significantly better than"),
    (-2.0, 0.05, "below"), (-2.0, None, "below")])
def test_words_follow_the_test_of_the_pair(diff, p, word):
    assert vp.relation(_pair(diff, p)) == word


@pytest.mark.parametrize("diff,p,word", [
    (2.6, 0.001, "holds"), (1.2, 0.14, "holds in direction only"),
    (-1.28, 0.21, "not reproduced"), (0.001, 0.01, "not reproduced"),
    (-3.0, 0.004, "contradicted")])
def test_claim_words(diff, p, word):
    assert vp.claim_word(_pair(diff, p)) == word


@pytest.mark.parametrize("diff,p,word", [
    (2.6, 0.001, "holds on the stand-in"),
    (1.2, 0.14, "holds in direction only on the stand-in"),
    (-1.28, 0.21, "not reproduced on the stand-in"),
    (-3.0, 0.004, "not reproduced on the stand-in")])
def test_a_stand_in_never_contradicts_a_claim_about_other_data(diff, p, word):
    assert vp.claim_word(_pair(diff, p), stand_in=True) == word


def test_p_values_and_differences_are_printed_as_stated():
    assert [vp.fmt_p(p) for p in (0.000793457, 0.0043, 0.083, 0.13, 1.0, 3.7e-27)] == \
        ["0.00079", "0.0043", "0.083", "0.13", "1", "3.7e-27"]
    # differences from unrounded means: 97.624 - 92.184 = 5.44, where 97.62 - 92.18 would not
    assert vp.fsigned(_pair(5.444, None).diff) == "+5.44"


def test_a_sentence_cannot_borrow_another_pairs_test(published):
    boards, _ = published
    facts = vp.read_facts(PUBLISHED, boards)
    b = next(b for b in facts.blocks if b.best not in (b.baseline, "lasso")
             and {"lasso", "stl"} <= set(b.stats) and b.competitor != "lasso")
    with pytest.raises(KeyError):
        b.pair("lasso", "stl")         # not a comparison the page makes: no test for it
    table = b.pair(b.baseline, b.best)
    assert table.source == "table" and table.p == b.stats[b.baseline].p_vs_best
    # a page pair: Holm over the page's family of that block, recomputed here
    from mtlbench.report.stats import holm, wilcoxon_p

    family = vp.page_family(b)
    raw = []
    for x, y in family:
        common = sorted(set(b.stats[x].scores) & set(b.stats[y].scores))
        raw.append(wilcoxon_p([b.stats[x].scores[r] - b.stats[y].scores[r] for r in common]))
    for (x, y), p in zip(family, holm(raw)):
        assert b.pair(x, y).p == pytest.approx(p, rel=1e-12)
        assert b.pair(y, x).diff == pytest.approx(-b.pair(x, y).diff)


def test_person_written_text_holds_no_number(monkeypatch):
    assert vp.digits_in_prose() == []
    monkeypatch.setitem(vp.PROSE, "simulated-generator", "five blocks, i.e. 5")
    assert len(vp.digits_in_prose()) == 1


# ================================================================================ the paper
def _tex_lines() -> list[str]:
    path = Path(vp.PAPER_TEX)
    if not path.exists():
        pytest.skip(f"the paper's LaTeX source is not on this machine ({path})")
    return path.read_text(encoding="utf-8").splitlines()


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("\\%", "%")).strip()


def test_claims_quote_the_lines_they_cite():
    lines = _tex_lines()
    for c in vp.CLAIMS:
        cited = _plain(" ".join(lines[i - 1] for i in c.tex_lines))
        assert _plain(c.quote) in cited, (c.key, c.tex_lines)
        for value in c.paper_values:
            assert f"{value:.2f}" in cited, (c.key, value)
        assert len(re.findall(r"\{\d+\}", c.paper_text)) == len(c.paper_values), c.key
    # the paper's simulated numbers: Tab. tab:abl (line 863) and the text (line 1081)
    assert "\\textbf{93.66} & 92.46" in lines[862]
    assert "91.07" in lines[1080] and "2.59" in lines[1080]
    assert vp.SIMULATED_PAPER == {"tfcl": 93.66, "tfcl-noauc": 92.46}
    assert vp.SIMULATED_PAPER_COMPETITOR == 91.07


def test_claims_compare_like_with_like():
    """(P) only where the paper reports (P) -- its simulated data --, (Q) on the stand-in of
    its attribute data, never a claim about the real data sets the paper does not report."""
    for c in vp.CLAIMS:
        if c.datasets == (vp.SIMULATED,):
            assert c.ours in ("tfcl", "tfcl-noauc") and c.stand_in is None
        else:
            assert c.datasets == (vp.ATTRIBUTES,) and c.ours == "tfcl-q" and c.stand_in
    assert not {d for c in vp.CLAIMS for d in c.datasets} & {"school", "landmine", "lenk",
                                                             "movielens"}


# ================================================================================ format 3
REPS = 10
ATTR = "synthetic-attributes"
#: problem -> model -> mean test AUC; attr0: TFCL-Q best, attr1: LASSO best
MEANS = {f"{ATTR}/attr0": {"tfcl-q": 0.90, "tfcl-q-noauc": 0.88, "tfcl-q-nog": 0.87,
                           "tfcl-coc": 0.86, "lasso": 0.85, "tfcl": 0.84, "stl": 0.80},
         f"{ATTR}/attr1": {"lasso": 0.90, "tfcl-q": 0.85, "tfcl-q-noauc": 0.86,
                           "tfcl-q-nog": 0.84, "tfcl-coc": 0.85, "tfcl": 0.83, "stl": 0.80}}


def test_pages_of_a_format_3_publication_with_the_attribute_stand_in(tmp_path):
    rng = np.random.default_rng(0)
    rows = []
    for problem, means in MEANS.items():
        noise = rng.normal(0, 0.003, REPS)
        for model, mean in means.items():
            for r in range(REPS):
                rows.append(unit(model, r, mean + noise[r] + 0.0005 * rng.standard_normal(),
                                 dataset=ATTR, problem=problem, reps=REPS))
    store = make(tmp_path / "s.sqlite", rows)
    lb = build_leaderboard(store, ATTR)
    store.close()
    assert lb.format == FORMAT_VERSION
    folder = tmp_path / "lb"
    folder.mkdir()
    (folder / f"{ATTR}.json").write_text(to_json(lb, compact=True), encoding="utf-8")
    pages = vp.render_pages(folder)
    assert set(pages) == {"verdict.md"}          # no simulated data: no simulated page
    text = pages["verdict.md"]
    assert "older format" not in text
    claim = text.split("**Shoes and SUN: TFCL (the full model Q)", 1)[1].split("\n* **", 1)[0]
    assert "generated data of the paper's Shoes shape" in claim
    assert "synthetic-attributes attr0: TFCL-Q (Q) 90." in claim
    assert re.search(r"attr0: TFCL-Q \(Q\) [\d.]+ vs LASSO [\d.]+ \(\+[45]\.\d\d, p_Holm = "
                     r"[\d.]+\): \*\*holds on the stand-in\*\*", claim)
    # significantly below on the stand-in: not reproduced there, never "contradicted"
    assert re.search(r"attr1: TFCL-Q \(Q\) [\d.]+ vs LASSO [\d.]+ \(-[45]\.\d\d, p_Holm = "
                     r"0\.0[\d]+\): \*\*not reproduced on the stand-in\*\*", claim)
    assert ("In all: holds on the stand-in on 1 of 2, not reproduced on the stand-in on 1 of 2."
            in claim) and "contradicted**" not in claim
    # the ablation claims are checked on the stand-in too; the simulated ones are not checked
    for title in ("the AUC loss helps TFCL (Q)", "the co-grouping term helps TFCL (Q)",
                  "TFCL's regulariser above CoCMTL's in (Q)", "TFCL (P) above every competitor"):
        section = text.split(title, 1)[1].split("\n* **", 1)[0]
        assert ("not checked" in section) == title.startswith("TFCL (P)"), title
    assert "| synthetic-attributes attr1 | LASSO" in text
    # the script writes the pages, and --check exits 1 once a number no longer matches
    assert write_verdict.main([str(folder)]) == 0
    assert write_verdict.main([str(folder), "--check"]) == 0
    page = (folder / "verdict.md").read_text(encoding="utf-8")
    page = page.replace("In all: holds on the stand-in on 1 of 2",
                        "In all: holds on the stand-in on 2 of 2")
    (folder / "verdict.md").write_text(page, encoding="utf-8")
    assert write_verdict.main([str(folder), "--check"]) == 1
    assert json.loads((folder / f"{ATTR}.json").read_text())["format"] == FORMAT_VERSION
