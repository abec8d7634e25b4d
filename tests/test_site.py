"""The HTML site ``mtlbench publish`` writes beside the markdown: pages from the same
leaderboards, escaped, offline, under the publication's manifest; and, in headless Chromium,
tables with the published numbers that sort and filter, and figures and links that resolve."""
from __future__ import annotations

import json
import os
import shutil
import threading
import tomllib
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag, urlparse
from urllib.request import urlopen

import pytest
from click.testing import CliRunner

from mtlbench.cli import cli
from mtlbench.plugins import get_registry
from mtlbench.report.publish import MANIFEST, publish
from mtlbench.report.site import MARKER, inline

from test_report_select import make, unit

REPO = Path(__file__).resolve().parents[1]
#: data set -> model -> mean test AUC x 100 (two blocks, three models: a ranking and a CD)
MEANS = {"toy": {"a": 90.0, "b": 84.0, "stl": 80.0},
         "other": {"a": 86.0, "b": 88.0, "stl": 70.0}}
REPS = 6
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def quiet(_):
    pass


def _rows(means, reps=REPS):
    rows = []
    for ds, by_model in means.items():
        for model, mean in by_model.items():
            for r in range(reps):
                rows.append(unit(model, r, mean / 100 + 0.004 * (r - (reps - 1) / 2),
                                 dataset=ds, reps=reps))
    return rows


@pytest.fixture(autouse=True)
def stl_is_the_baseline(monkeypatch):
    monkeypatch.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A tiny store published with its figures: the folder and the store."""
    tmp = tmp_path_factory.mktemp("site")
    mp = pytest.MonkeyPatch()
    mp.setattr(get_registry().model_class("stl"), "is_baseline", True, raising=False)
    st = make(tmp / "s.sqlite", _rows(MEANS))
    try:
        publish(st, tmp / "pub", log=quiet)
    finally:
        st.close()
        mp.undo()
    return tmp / "pub"


def test_publish_writes_the_site_from_the_same_leaderboards(published):
    site = published / "site"
    pages = sorted(p.name for p in site.glob("*.html"))
    assert pages == ["index.html", "other.html", "toy.html"]
    assert (site / "assets" / "site.css").is_file() and (site / "assets" / "site.js").is_file()
    manifest = json.loads((published / MANIFEST).read_text())
    for name in pages:
        text = (site / name).read_text()
        assert text.startswith(MARKER + "\n<!DOCTYPE html>")
        assert "http://" not in text and "https://" not in text   # nothing from the network
        assert f"site/{name}" in manifest["files"]
    assert "site/assets/site.js" in manifest["files"]
    toy = json.loads((published / "toy.json").read_text())
    page = (site / "toy.html").read_text()
    for row in toy["rows"]:                 # every cell as the markdown prints it
        assert f"{row['cells']['toy']['mean']:.2f} ± {row['cells']['toy']['std']:.2f}" in page
    assert "Provenance" in page and "code fingerprints" in page and "search rule" in page
    assert '<img src="../figures/toy-box.svg"' in page
    for suffix in ("png", "svg", "pdf"):
        assert (published / "figures" / f"toy-box.{suffix}").is_file()
        assert f"figures/toy-box.{suffix}" in manifest["files"]
    index = (site / "index.html").read_text()
    assert 'id="models-by-datasets"' in index and "Critical-difference diagram" in index
    assert "site/index.html" in (published / "README.md").read_text()


def test_every_value_is_escaped(tmp_path):
    label = 'x<script>alert("m")</script>'
    st = make(tmp_path / "e.sqlite", _rows({"toy": {label: 90.0, "stl": 80.0, "b": 85.0}}, 3))
    publish(st, tmp_path / "pub", figures=False, log=quiet)
    st.close()
    for page in (tmp_path / "pub" / "site").glob("*.html"):
        text = page.read_text()
        assert "<script>alert" not in text
    assert "x&lt;script&gt;alert(&quot;m&quot;)&lt;/script&gt;" in \
        (tmp_path / "pub" / "site" / "toy.html").read_text()
    assert inline("**a** `<b>` [c](d.html) *e* 1\\|2") == \
        '<strong>a</strong> <code>&lt;b&gt;</code> <a href="d.html">c</a> <em>e</em> 1|2'


def test_no_html_and_stale_pages_go(tmp_path):
    st = make(tmp_path / "n.sqlite", _rows(MEANS, 3))
    res = CliRunner().invoke(cli, ["publish", "--store", str(st.path), "--out",
                                   str(tmp_path / "pub"), "--no-figures", "--no-html"])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "pub" / "site").exists()
    publish(st, tmp_path / "pub", figures=False, log=quiet)
    assert (tmp_path / "pub" / "site" / "other.html").is_file()
    publish(st, tmp_path / "pub", datasets=["toy"], figures=False, log=quiet)
    assert not (tmp_path / "pub" / "site" / "other.html").exists()   # listed, so removed
    assert (tmp_path / "pub" / "site" / "toy.html").is_file()
    st.close()


def test_a_hand_written_file_in_the_site_folder_stays(tmp_path):
    """Only the pages publish wrote (its marker on the first line) and its two assets are
    publish's to remove: a page or note written by hand under site/ is kept."""
    st = make(tmp_path / "h.sqlite", _rows(MEANS, 3))
    out = tmp_path / "pub"
    publish(st, out, figures=False, log=quiet)
    (out / "site" / "notes.html").write_text("<p>by hand</p>\n")
    (out / "site" / "assets" / "extra.css").write_text("p {}\n")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"] += ["site/notes.html", "site/assets/extra.css"]   # as if publish had
    (out / MANIFEST).write_text(json.dumps(manifest))
    lines = []
    publish(st, out, figures=False, log=lines.append)
    assert (out / "site" / "notes.html").read_text() == "<p>by hand</p>\n"
    assert (out / "site" / "assets" / "extra.css").is_file()
    assert sum("not removed" in ln for ln in lines) == 2, lines
    st.close()


KILLED_IN_THE_SITE = r'''
import os, signal, sys
import mtlbench.report.site as site
from mtlbench.report.publish import publish
from mtlbench.store import ResultStore
page, calls = site.dataset_page, []
def dying(*a, **k):
    calls.append(1)
    if len(calls) == 2:   # the index and the first data set's page are written
        os.kill(os.getpid(), signal.SIGKILL)
    return page(*a, **k)
site.dataset_page = dying
publish(ResultStore(sys.argv[1], readonly=True), sys.argv[2], figures=False, log=lambda s: None)
'''


@pytest.mark.slow
def test_a_publish_killed_while_writing_the_site_leaves_the_old_site(tmp_path):
    """kill -9 between two pages of the site: the folder keeps the previous publication,
    site included, byte for byte (never a site of new and old pages)."""
    import signal
    import subprocess
    import sys

    st = make(tmp_path / "k.sqlite", _rows(MEANS, 3))
    out = tmp_path / "pub"
    publish(st, out, datasets=["toy"], figures=False, log=quiet)
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert "site/toy.html" in before and "site/other.html" not in before
    st.close()
    proc = subprocess.run([sys.executable, "-c", KILLED_IN_THE_SITE, str(st.path), str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*")
            if p.is_file()} == before
    assert list(tmp_path.glob(".pub.publish-*"))   # the unfinished publication, beside


def test_the_wheel_carries_the_site_assets():
    """The style sheet and script are package data (pyproject.toml), so an installed
    mtlbench writes them."""
    from fnmatch import fnmatch

    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["mtlbench.report"]
    assets = sorted((REPO / "mtlbench" / "report" / "site_assets").iterdir())
    assert assets and all(any(fnmatch(f"site_assets/{p.name}", pat) for pat in patterns)
                          for p in assets)


# ------------------------------------------------------------------ in a real browser
def _browser():
    """Headless Chromium through chromedriver (Debian's chromium and chromium-driver), or
    skip saying what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                    "(pip install 'mtlbench[test]')")
    from selenium.webdriver.chrome.service import Service

    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not path.exists():
            pytest.skip(f"no {path}: the browser test needs Debian's {package} package "
                        "(.ci/run installs it: apt-get install chromium chromium-driver)")
    return webdriver, Service


@pytest.fixture
def served(published):
    """The publication served over HTTP on 127.0.0.1 (a free port), as a reader's server
    would: the base URL."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(published))
    handler.log_message = lambda *a, **k: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def browser(tmp_path):
    webdriver, Service = _browser()
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,1800",
                f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _column(driver, table_id, header_start):
    """(index of the column whose header starts with ``header_start``, the header cell)."""
    from selenium.webdriver.common.by import By

    heads = driver.find_elements(By.CSS_SELECTOR, f"#{table_id} thead th")
    j = next(i for i, h in enumerate(heads) if h.text.startswith(header_start))
    return j, heads[j]


def _rows_of(driver, table_id):
    from selenium.webdriver.common.by import By

    out = []
    for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr"):
        if tr.is_displayed():
            out.append([c.text for c in tr.find_elements(By.CSS_SELECTOR, "th, td")])
    return out


def _screenshot(driver, path: Path) -> None:
    """Save a screenshot; with MTLBENCH_SITE_SCREENSHOTS=DIR a copy goes there too."""
    driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    where = os.environ.get("MTLBENCH_SITE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(where) / path.name)


def _check_links(driver, base):
    """Every image, style sheet, script and link of the page resolves on the server (no
    404, nothing outside it), images are decoded, and in-page anchors exist."""
    from selenium.webdriver.common.by import By

    urls = []
    for css, attr in (("img", "src"), ("link", "href"), ("script[src]", "src"), ("a", "href")):
        urls += [e.get_property(attr) for e in driver.find_elements(By.CSS_SELECTOR, css)]
    assert urls
    for url in urls:
        assert url.startswith(base + "/"), f"{url} is not part of the site"
        page, anchor = urldefrag(url)
        with urlopen(page) as resp:
            assert resp.status == 200, url
        if anchor and page == urldefrag(driver.current_url)[0]:
            assert driver.find_elements(By.ID, anchor), f"no element #{anchor}"
    broken = driver.execute_script(
        "return Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
        ".map(i => i.src)")
    assert not broken, broken
    return urls


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_site_in_headless_chromium(published, served, browser, tmp_path):
    from selenium.webdriver.common.by import By

    driver, base = browser, served
    driver.get(f"{base}/site/index.html")
    assert driver.title == "mtlbench leaderboards"
    # the models x data sets table holds the published numbers
    boards = {ds: json.loads((published / f"{ds}.json").read_text()) for ds in MEANS}
    j, head = _column(driver, "models-by-datasets", "toy")
    rows = _rows_of(driver, "models-by-datasets")
    assert len(rows) == 3
    for row in rows:
        cell = next(r for r in boards["toy"]["rows"] if r["model"] == row[0])["cells"]["toy"]
        assert row[j].startswith(f"{cell['mean']:.2f} ± {cell['std']:.2f}"), row
    # a click on the header sorts by the column (an AUC: best first), a second click reverses
    means = {m: boards["toy"]["rows"][i]["cells"]["toy"]["mean"]
             for i, m in enumerate(r["model"] for r in boards["toy"]["rows"])}
    head.find_element(By.TAG_NAME, "button").click()
    assert [r[0] for r in _rows_of(driver, "models-by-datasets")] == \
        sorted(means, key=means.get, reverse=True)
    assert head.get_attribute("aria-sort") == "descending"
    head.find_element(By.TAG_NAME, "button").click()
    assert [r[0] for r in _rows_of(driver, "models-by-datasets")] == sorted(means, key=means.get)
    k, rank_head = _column(driver, "models-by-datasets", "average rank")
    rank_head.find_element(By.TAG_NAME, "button").click()
    ranks = [float(r[k]) for r in _rows_of(driver, "models-by-datasets")]
    assert ranks == sorted(ranks)
    # the filter box keeps the rows holding its words
    box = driver.find_element(By.CSS_SELECTOR, 'input[data-filter="models-by-datasets"]')
    box.send_keys("stl")
    assert [r[0] for r in _rows_of(driver, "models-by-datasets")] == ["stl"]
    assert "1 of 3 rows" in driver.find_element(
        By.CSS_SELECTOR, '[data-count="models-by-datasets"]').text
    box.clear()
    box.send_keys(" ")
    assert len(_rows_of(driver, "models-by-datasets")) == 3
    _screenshot(driver, tmp_path / "site-index.png")
    pages = {urlparse(u).path for u in _check_links(driver, base)
             if urlparse(u).path.endswith(".html")}
    assert {"/site/toy.html", "/site/other.html"} <= pages
    # each data set's page: its table as in the JSON, figures and links that resolve
    for ds in MEANS:
        driver.get(f"{base}/site/{ds}.html")
        j, _ = _column(driver, "table-metric-auc", ds)
        for row in _rows_of(driver, "table-metric-auc"):
            model = row[0].split()[0]
            cell = next(r for r in boards[ds]["rows"] if r["model"] == model)["cells"][ds]
            assert row[j].startswith(f"{cell['mean']:.2f}"), (ds, row)
        assert driver.find_elements(By.CSS_SELECTOR, "figure img")
        _check_links(driver, base)
    _screenshot(driver, tmp_path / "site-dataset.png")
    # a phone's width: the page does not scroll sideways (wide tables scroll in their box)
    driver.set_window_size(390, 844)
    driver.get(f"{base}/site/index.html")
    assert driver.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth + 1")
    _screenshot(driver, tmp_path / "site-phone.png")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_site_works_from_the_folder(published, browser):
    """Opened as files (file://), without a server: the script sorts, the figures load."""
    from selenium.webdriver.common.by import By

    browser.get((published / "site" / "toy.html").as_uri())
    head = browser.find_elements(By.CSS_SELECTOR, "#table-metric-auc thead th")[0]
    head.find_element(By.TAG_NAME, "button").click()
    assert head.get_attribute("aria-sort") == "ascending"
    assert [r[0].split()[0] for r in _rows_of(browser, "table-metric-auc")] == ["a", "b", "stl"]
    assert browser.execute_script(
        "return Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
