"""The quick book: every chapter executes and builds strictly, on the default model with its null book and on
a GPT-2-architecture model; every finding has its null's value and none that holds on random weights is
counted as holding; in headless Chromium every page loads without JavaScript errors, figures are non-empty
images, 3-D figures render a canvas, links resolve."""
import functools
import http.server
import shutil
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from lotlib.book.build import (
    BookOptions,
    book_folder,
    book_notebooks,
    build_book,
    parameter_section,
)
from lotlib.book.pipeline import project_root
from lotlib.summary import load_summaries
from lotlib.verdicts import (
    PAPER_NULL_MODEL,
    load_claims,
    outcome,
    paper_nulled,
    report_table,
)

from ..conftest import ROOT, _save_tiny, gpt2_tokenizer

pytestmark = pytest.mark.slow  # quick books built

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="session")
def builds(tmp_path_factory) -> Path:
    """The build folder the tests' quick books share (never the checkout's build/)."""
    return tmp_path_factory.mktemp("build")


@pytest.fixture(scope="session")
def quick_book(builds) -> Path:
    root = project_root(ROOT)
    return build_book(root, BookOptions(quick=True, build=builds, overrides=parameter_section(root, "tests")))


def _pages(html: Path) -> list[str]:
    names = [f"notebooks/{n}.html" for n in book_notebooks(project_root(ROOT))]
    return ["intro.html", *names, *(p.name for p in html.glob("*.html") if p.name in {"api.html", "bibliography.html"})]


def test_every_chapter_page_is_built(quick_book):
    for page in _pages(quick_book):
        assert (quick_book / page).stat().st_size > 1000, page
    for name in book_notebooks(project_root(ROOT)):  # each chapter recorded its measurements
        assert (quick_book.parents[1] / "notebooks" / f"{name}.summary.json").exists(), name


def test_every_finding_is_judged_against_its_nulls(quick_book, builds):
    root = project_root(ROOT)
    claims = root / "book" / "claims"
    mine = quick_book.parents[1] / "notebooks"
    null, paper = (book_folder(root, m, quick=True, build=builds) / "notebooks"
                   for m in ("untrained:smollm2-135m", PAPER_NULL_MODEL))
    on = {folder: {name: s.get("values", {}) for name, s in load_summaries(folder).items()} for folder in (null, paper)}
    table = report_table(claims, mine, null, paper).set_index("id")
    findings = [c for c in load_claims(claims) if c["nature"] == "finding" and c["test"]["kind"] != "none"]
    for folder, judged in ((null, findings), (paper, [c for c in findings if paper_nulled(c)])):
        missing = [c["id"] for c in judged if on[folder].get(c["notebook"], {}).get(c["key"]) is None]
        assert not missing, f"findings without {folder.parent.name}'s value: {missing}"
        for c in judged:  # a finding that passes on random weights never holds
            row = table.loc[c["id"]]
            on_random = outcome(on[folder][c["notebook"]][c["key"]], c["test"], c["paper_value"],
                                c.get("deterministic", False), row["band"])
            if on_random == "passes":
                assert row["verdict"] != "holds", c["id"]
    assert (table["verdict"] != "missing").all(), table[table["verdict"] == "missing"].index.tolist()


@pytest.fixture(scope="session")
def gpt2_book(tmp_path_factory, builds) -> Path:
    """The quick book on a GPT-2-architecture model (12 blocks, random weights, GPT-2's real tokenizer), without
    a null book: its weights are already random, and the default model's book runs the null path."""
    from transformers import GPT2Config

    config = GPT2Config(n_layer=12, n_embd=64, n_head=4, n_positions=128, vocab_size=50257)
    folder = _save_tiny(tmp_path_factory.mktemp("gpt2-book"), config, gpt2_tokenizer())
    root = project_root(ROOT)
    return build_book(root, BookOptions(quick=True, model=str(folder), null=False, build=builds,
                                        overrides=parameter_section(root, "tests")))


def test_the_quick_book_runs_on_a_gpt2_architecture(gpt2_book):
    notebooks = gpt2_book.parents[1] / "notebooks"
    for name in book_notebooks(project_root(ROOT)):
        assert (notebooks / f"{name}.summary.json").exists(), name
        assert (gpt2_book / "notebooks" / f"{name}.html").stat().st_size > 1000, name
    table = report_table(project_root(ROOT) / "book" / "claims", notebooks).set_index("id")
    layer_norm_only = [i for i, row in table.iterrows() if "hyperplane" in row["claim"].lower()]
    assert layer_norm_only and all(table.loc[i, "verdict"] != "not applicable" for i in layer_norm_only)


@pytest.fixture(scope="session")
def site(quick_book):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(quick_book))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def browser():
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Chromium is not installed (apt-get install chromium chromium-driver; .ci/run does it)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--enable-unsafe-swiftshader", "--use-angle=swiftshader", "--window-size=1400,1600"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def _wait(driver, script: str, seconds: float = 20.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if driver.execute_script(script):
            return True
        time.sleep(0.25)
    return False


PLOTS_DRAWN = """return [...document.querySelectorAll('.plotly-graph-div')].every(
    d => d.querySelector('canvas, svg.main-svg'))"""
IMAGES = """return [...document.querySelectorAll('main img, article img')].map(
    i => [i.getAttribute('src'), i.complete, i.naturalWidth, i.naturalHeight])"""
SCENES = """return [...document.querySelectorAll('.plotly-graph-div')].filter(d => d.querySelector('.gl-container'))
    .map(d => [...d.querySelectorAll('.gl-container canvas')].some(c => c.width > 0 && c.height > 0))"""
OVERFLOWING_CODE = """return [...document.querySelectorAll('div.cell_input pre')]
    .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.textContent.split('\\n')[0].slice(0, 60))"""
LINKS = "return [...document.querySelectorAll('a[href]')].map(a => a.href)"


def test_pages_in_headless_chromium(quick_book, site, browser):
    problems, internal = [], set()
    for page in _pages(quick_book):
        browser.get(site + page)
        if not _wait(browser, PLOTS_DRAWN):
            problems.append(f"{page}: a plotly figure did not render")
        for src, complete, width, height in browser.execute_script(IMAGES):
            if not (complete and width > 0 and height > 0):
                problems.append(f"{page}: image {src} is empty or broken")
        for line in browser.execute_script(OVERFLOWING_CODE):  # at 1400 px, as a reader's screen
            problems.append(f"{page}: a code cell is wider than the text column: {line}")
        if not all(browser.execute_script(SCENES)):
            problems.append(f"{page}: a 3-D figure has no drawn canvas")
        for entry in browser.get_log("browser"):
            if entry["source"] == "javascript" or (entry["source"] == "network" and "favicon" not in entry["message"]):
                problems.append(f"{page}: {entry['source']}: {entry['message']}")
        internal |= {urllib.parse.urldefrag(h).url for h in browser.execute_script(LINKS) if h.startswith(site)}
    for url in sorted(internal):
        try:
            urllib.request.urlopen(url, timeout=10).close()
        except OSError as err:
            problems.append(f"broken internal link {url}: {err}")
    assert not problems, "\n".join(problems)


def test_interactive_figures_are_3d_and_offline(quick_book):
    page = (quick_book / "notebooks" / "b1_lines_of_thought.html").read_text()
    assert "scatter3d" in page and "_static/plotly.min.js" in page
    assert "cdn.plot.ly" not in page and (quick_book / "_static" / "plotly.min.js").stat().st_size > 1_000_000


def test_every_chapter_page_launches_in_colab_and_binder_and_downloads_as_ipynb_and_py(quick_book):
    """The launch buttons open the page's notebook on the repository's notebooks branch (tests/book/test_export.py
    checks that `lotlib notebooks` writes each of them); the .py download is the chapter's source, on the site."""
    for name in book_notebooks(project_root(ROOT)):
        page = (quick_book / "notebooks" / f"{name}.html").read_text()
        target = f"lotlib/lotlib/blob/notebooks/notebooks/{name}.ipynb"
        assert f"https://colab.research.google.com/github/{target}" in page, name
        assert "https://mybinder.org/v2/gh/lotlib/lotlib/notebooks?urlpath=lab/tree/" in page, name
        assert f'href="{name}.py"' in page and f"_sources/notebooks/{name}.ipynb" in page, name
        source = (quick_book / "notebooks" / f"{name}.py").read_text()
        assert source == (ROOT / "notebooks" / f"{name}.py").read_text(), name


def test_a_duration_never_reads_sixty_seconds():
    """A heartbeat at 119.7 s once read "1 min 60 s": whole seconds are taken before the minutes."""
    from lotlib.book.build import _duration

    assert [_duration(s) for s in (45, 89.4, 119.7, 125, 3600.2)] == [
        "45 s", "89 s", "2 min 00 s", "2 min 05 s", "60 min 00 s"]
