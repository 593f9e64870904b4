"""The quick book: every chapter executes and builds strictly; in headless Chromium every page loads
without JavaScript errors, figures are non-empty images, 3-D figures render a canvas, links resolve."""
import functools
import http.server
import shutil
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from lotlib.book.build import book_notebooks, build_book
from lotlib.book.pipeline import project_root

from ..conftest import ROOT

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="session")
def quick_book() -> Path:
    return build_book(project_root(ROOT), quick=True)


def _pages(html: Path) -> list[str]:
    names = [f"notebooks/{n}.html" for n in book_notebooks(project_root(ROOT))]
    return ["intro.html", *names, *(p.name for p in html.glob("*.html") if p.name in {"api.html", "bibliography.html"})]


@pytest.mark.slow
def test_every_chapter_page_is_built(quick_book):
    for page in _pages(quick_book):
        assert (quick_book / page).stat().st_size > 1000, page
    for name in book_notebooks(project_root(ROOT)):  # each chapter recorded its measurements
        assert (quick_book.parents[1] / "notebooks" / f"{name}.summary.json").exists(), name


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
                 "--enable-unsafe-swiftshader", "--use-angle=swiftshader", "--window-size=1280,1600"):
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
LINKS = "return [...document.querySelectorAll('a[href]')].map(a => a.href)"


@pytest.mark.slow
def test_pages_in_headless_chromium(quick_book, site, browser):
    problems, internal = [], set()
    for page in _pages(quick_book):
        browser.get(site + page)
        if not _wait(browser, PLOTS_DRAWN):
            problems.append(f"{page}: a plotly figure did not render")
        for src, complete, width, height in browser.execute_script(IMAGES):
            if not (complete and width > 0 and height > 0):
                problems.append(f"{page}: image {src} is empty or broken")
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


@pytest.mark.slow
def test_interactive_figures_are_3d_and_offline(quick_book):
    page = (quick_book / "notebooks" / "lines_of_thought.html").read_text()
    assert "scatter3d" in page and "_static/plotly.min.js" in page
    assert "cdn.plot.ly" not in page and (quick_book / "_static" / "plotly.min.js").stat().st_size > 1_000_000
