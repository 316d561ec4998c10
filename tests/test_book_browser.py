"""The rendered book, opened page by page in headless Chromium.

Needs `make book` first (it reads `_build/html`) and Debian's Chromium (`.ci/run` installs
it); without either the tests are skipped and say why. Chromium renders each page with its
JavaScript (`--dump-dom`), and the checks run on the DOM it returns:

- no page shows a Python traceback or a figure that did not render (matplotlib's
  "<Figure size ...>" text stands where the image should be);
- every image a page shows exists;
- every chapter page has at least one rendered figure and one results table;
- every Colab link of a chapter points at that chapter's paired .ipynb in the repository;
- every internal link resolves to a built file, and its #fragment to an id on that page;
- no page shows where the build machine keeps files ("/tmp/", "/work/", the home folder, the
  checkout's own path);
- the book works offline: Chromium runs with every host but 127.0.0.1 unresolvable, no page
  asks for anything outside the book (its network log is read), and MathJax, served from the
  build, typesets every equation of every page that has one.

A screenshot of each chapter page's first screen, and a tall one that reaches its first
figures, go to `_build/screenshots/`.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
import yaml

bs4 = pytest.importorskip("bs4")

REPO = Path(__file__).resolve().parents[1]
HTML = REPO / "_build" / "html"
SHOTS = REPO / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
# The flags that keep Chromium off the network (every host but the local server is
# unresolvable, so a page that needs a CDN renders as it would offline) and quiet as root.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--virtual-time-budget=4000",
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium not found (apt-get install chromium)"),
    pytest.mark.skipif(not (HTML / "index.html").is_file(),
                       reason="no rendered book in _build/html: run `make book` first"),
]


def toc_files() -> list[str]:
    """Every page of the book, in the order of _toc.yml, as paths without suffix."""
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        files += [c["file"] for c in part.get("chapters", [])]
    return files


PAGES = toc_files()
CHAPTERS = [p for p in PAGES if re.fullmatch(r"notebooks/ch\d+_\w+", p)]


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HTML))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def chromium(*args: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"chromium {' '.join(args)} failed: {done.stderr[-2000:]}")
    return done.stdout


def page_requests(net_log: Path, origin: str) -> list[str]:
    """Every URL the page at ``origin`` asked for, from Chromium's network log (requests the
    browser makes for itself, such as update checks, have no origin and are left out)."""
    try:
        log = json.loads(net_log.read_text())
        start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    except (OSError, ValueError, KeyError) as e:
        raise RuntimeError(f"chromium wrote no readable network log {net_log}: {e}") from e
    return [e["params"]["url"] for e in log["events"]
            if e["type"] == start and e.get("params", {}).get("initiator") == origin]


@functools.lru_cache(maxsize=None)
def visit(url: str) -> tuple["bs4.BeautifulSoup", list[str]]:
    """The page's DOM after its scripts ran, and the URLs outside the book it asked for."""
    origin = "{0.scheme}://{0.netloc}".format(urlparse(url))
    with tempfile.TemporaryDirectory() as tmp:
        net_log = Path(tmp) / "net.json"
        dom = chromium(f"--log-net-log={net_log}", "--dump-dom", url)
        asked = page_requests(net_log, origin)
    return bs4.BeautifulSoup(dom, "html.parser"), [u for u in asked if not u.startswith(origin + "/")]


def rendered(url: str) -> "bs4.BeautifulSoup":
    return visit(url)[0]


def built_file(page_url: str, ref: str, base: str) -> tuple[Path, str] | None:
    """The built file and fragment an internal reference points at (None if external)."""
    target = urlparse(urljoin(page_url, ref))
    if target.scheme not in ("http", "https") or not urljoin(page_url, ref).startswith(base):
        return None
    rel = unquote(target.path)[len(urlparse(base).path):]
    path = HTML / rel
    return (path / "index.html" if rel.endswith("/") or path.is_dir() else path), target.fragment


def test_every_toc_page_was_built():
    missing = [p for p in PAGES if not (HTML / f"{p}.html").is_file()]
    assert not missing, f"pages in _toc.yml with no HTML: {missing}"
    assert CHAPTERS, "no chapter notebooks in _toc.yml"


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_errors_or_broken_figures(server, page):
    url = urljoin(server, f"{page}.html")
    soup = rendered(url)
    main = soup.find("main") or soup
    text = main.get_text(" ")
    assert "Traceback (most recent call last)" not in text, f"{page} shows a traceback"
    assert not re.search(r"<Figure size \d+x\d+", text), f"{page} shows a figure as text, not an image"
    assert not main.select(".output.traceback, .output.error"), f"{page} has an error output"
    for img in main.find_all("img"):
        ref = built_file(url, img.get("src", ""), server)
        if ref is not None:
            assert ref[0].is_file(), f"{page}: image {img.get('src')} is missing"


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_has_figures_results_table_and_colab_link(server, page):
    soup = rendered(urljoin(server, f"{page}.html"))
    main = soup.find("main")
    outputs = main.select(".cell_output")
    figures = [img for out in outputs for img in out.find_all("img")]
    assert figures, f"{page}: no rendered figure in any cell output"
    tables = [t for out in outputs for t in out.find_all("table")]
    assert tables, f"{page}: no results table in any cell output"
    colab = [a["href"] for a in soup.find_all("a", href=True) if "colab.research.google.com" in a["href"]]
    assert colab, f"{page}: no Colab link"
    for href in colab:
        assert href.endswith(f"/{page}.ipynb"), f"{page}: Colab link {href} is not the chapter's .ipynb"
    assert (REPO / f"{page}.ipynb").is_file() and (REPO / f"{page}.py").is_file()


@pytest.mark.parametrize("page", PAGES)
def test_internal_links_resolve(server, page):
    url = urljoin(server, f"{page}.html")
    soup = rendered(url)
    broken, ids = [], {}  # ids: each target page's element ids, parsed once (a page links to itself often)
    for a in soup.find_all("a", href=True):
        ref = built_file(url, a["href"], server)
        if ref is None:
            continue
        path, fragment = ref
        if not path.is_file():
            broken.append(a["href"])
        elif fragment and path.suffix == ".html":
            if path not in ids:
                target = bs4.BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")
                ids[path] = {tag["id"] for tag in target.find_all(id=True)}
            if fragment not in ids[path]:
                broken.append(a["href"])
    assert not broken, f"{page}: links that do not resolve: {sorted(set(broken))}"


@pytest.mark.parametrize("page", CHAPTERS)
def test_screenshot_of_each_chapter(server, page):
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / f"{Path(page).name}.png"
    shot.unlink(missing_ok=True)
    chromium(f"--screenshot={shot}", "--window-size=1280,1000", urljoin(server, f"{page}.html"))
    assert shot.is_file() and shot.stat().st_size > 20_000, f"{page}: screenshot is empty"
    # and a tall one, down to the chapter's first figures
    tall = SHOTS / f"{Path(page).name}-tall.png"
    tall.unlink(missing_ok=True)
    chromium(f"--screenshot={tall}", "--window-size=1280,9000", urljoin(server, f"{page}.html"))
    assert tall.is_file() and tall.stat().st_size > shot.stat().st_size, f"{page}: tall screenshot failed"


@pytest.mark.parametrize("page", PAGES)
def test_page_works_offline_and_mathjax_typesets_its_equations(server, page):
    url = urljoin(server, f"{page}.html")
    soup, outside = visit(url)
    assert not outside, f"{page} asks for files outside the book (it needs the network): {outside}"
    maths = (soup.find("main") or soup).select(".math")
    untypeset = [m.get_text()[:80] for m in maths if m.find("mjx-container") is None]
    assert not untypeset, f"{page}: equations MathJax did not typeset (raw TeX shows): {untypeset[:3]}"
    errors = [e.get_text()[:80] for e in soup.find_all("mjx-merror")]
    assert not errors, f"{page}: MathJax could not typeset {errors[:3]}"
    if page.startswith("notebooks/ch") or page == "book/notation":
        # the chapters and the notation page are written in equations: an empty selection
        # here means the math went missing from the page, not that there is none to check
        assert maths, f"{page}: no equation on the page"


def test_no_page_shows_where_the_build_machine_keeps_files():
    """The chapters print paths through fgclip.reporting.shown; a path of the build machine
    (a results file, a data root, a checkpoint) on a page leaks it. Reads the built HTML as
    it is (no browser needed)."""
    leaks = {"/tmp/", "/work/", f"{Path.home()}/", f"{REPO}/", f"{Path(sys.prefix)}/"} - {"//"}
    pattern = re.compile("|".join(map(re.escape, sorted(leaks))))
    found = {}
    for page in sorted(HTML.rglob("*.html")):
        text = page.read_text(errors="replace")
        hits = [text[max(m.start() - 40, 0):m.end() + 60] for m in pattern.finditer(text)]
        if hits:
            found[str(page.relative_to(HTML))] = hits[:2]
    assert not found, f"pages that show paths of the build machine: {found}"
