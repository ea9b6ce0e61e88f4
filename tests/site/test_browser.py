"""The built site in a real browser: offline, no errors, readable on a phone, accessible, linked.

The site is built once per session (the strict build tests/conftest.py shares), served from 127.0.0.1 by http.server in a thread, and every
page of the build (found on disk, so new pages are covered without a list here) is visited once
at 1280 px and, narrowed, at 390 px in headless Chromium (Debian's, driven by Playwright; two at once, each
visiting every other page; every page but the home page with a search index of no documents, so
Material's search worker does not index the whole site on each of them: LightSearchHandler). What a
visit sees is kept, and the tests below assert on it, so each check fails on its own.

Offline: Chromium sends every request for another host to a dead proxy (so it fails at once),
and the visit records it, so such a request is both blocked and a test failure.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from harness.model.paths import REPO_ROOT

playwright_api = pytest.importorskip("playwright.sync_api")

# The first test here waits for the whole visit (every page, twice, axe at 1280 px, two Chromiums at once):
# minutes on a 2-CPU machine beside the other xdist workers. A generous bound, not pytest's usual 300 s.
pytestmark = pytest.mark.timeout(900)

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
SCREENSHOTS = REPO_ROOT / "build" / "screenshots"
WIDE, PHONE = 1280, 390
# Material renders each diagram into a closed shadow root; opened here so the test can look inside.
OPEN_SHADOW_ROOTS = """
const attachShadow = Element.prototype.attachShadow;
Element.prototype.attachShadow = function (init) { return attachShadow.call(this, {...init, mode: "open"}); };
"""
# Elements wider than the viewport that are not inside something scrolling on purpose.
OVERFLOWING = """() => {
  const width = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth <= width) return [];
  const scrolls = el => el.closest("pre, code, .md-typeset__scrollwrap, .jp-OutputArea-output, .highlight");
  return [...document.querySelectorAll(".md-main *")]
    .filter(el => el.getBoundingClientRect().right > width + 1 && !scrolls(el))
    .slice(0, 5).map(el => el.tagName.toLowerCase() + "." + [...el.classList].join(".") + ": " + (el.textContent || "").trim().slice(0, 60));
}"""
# Tables wider than the content column at 1280 px. Material makes a table an inline-block that scrolls
# inside itself, so scrollWidth is the width its content needs. First as the page opens: every table a
# reader sees fits, with no exception (the issue measured 18 pages failing this). Then with every
# collapsed block opened (a table behind a toggle must fit too once opened), except the tables marked
# `wide-table` (harness/render/presentation.py: the "Every column" tables behind their toggle), which
# may be wider but must keep their first column in view. The blocks it opened are closed again, so the phone's
# checks after it see the page as it opens. Returns [problems, tables measured, wide tables].
TABLES = """() => {
  const column = document.querySelector(".md-content .md-typeset");
  const width = column.clientWidth;
  const name = table => [...table.querySelectorAll("th")].slice(0, 3).map(th => th.textContent.trim()).join(" | ")
    + " / " + (table.querySelector("td") || {textContent: ""}).textContent.trim().slice(0, 40);
  const problems = [];
  for (const table of column.querySelectorAll("table")) {
    if (table.scrollWidth > width + 1) problems.push(`as the page opens, ${table.scrollWidth} px in a ${width} px column: ` + name(table));
  }
  const opened = [...document.querySelectorAll(".md-content details")].filter(details => !details.open);
  opened.forEach(details => { details.open = true; });
  const tables = [...column.querySelectorAll("table")];
  for (const table of tables) {
    if (table.closest(".wide-table")) {  // scrolled to its end, its first column must still be in view
      const first = table.querySelector("td"), wrap = table.closest(".md-typeset__scrollwrap");
      if (first && wrap && wrap.scrollWidth > wrap.clientWidth + 1) {
        wrap.scrollLeft = wrap.scrollWidth;
        const scrolledAway = first.getBoundingClientRect().left < wrap.getBoundingClientRect().left - 1;
        wrap.scrollLeft = 0;
        if (scrolledAway) problems.push("marked wide, but its first column scrolls away: " + name(table));
      }
    } else if (table.scrollWidth > width + 1) {
      problems.push(`opened, ${table.scrollWidth} px in a ${width} px column: ` + name(table));
    }
  }
  const counts = [tables.length, tables.filter(table => table.closest(".wide-table")).length];
  opened.forEach(details => { details.open = false; });
  return [problems, ...counts];
}"""
# At 390 px: tables that scroll sideways without the "scroll →" line above them (docs/assets/site.js).
SILENT_SCROLLERS = """() => [...document.querySelectorAll(".md-typeset__scrollwrap")]
  .filter(wrap => wrap.scrollWidth > wrap.clientWidth + 1)
  .filter(wrap => !(wrap.previousElementSibling && wrap.previousElementSibling.classList.contains("scroll-hint")))
  .map(wrap => (wrap.querySelector("th") || {textContent: ""}).textContent.trim().slice(0, 40))"""
MERMAID = """() => [...document.querySelectorAll(".mermaid")].map(el =>
  el.shadowRoot && el.shadowRoot.querySelector("svg") ? "svg" : el.tagName.toLowerCase() + ": " + el.textContent.trim().slice(0, 40))"""
IMAGES = """() => [...document.querySelectorAll(".md-content img")].map(img =>
  ({src: img.getAttribute("src"), alt: (img.getAttribute("alt") || "").trim(), loaded: img.complete && img.naturalWidth > 0}))"""


@dataclass
class Visit:
    """What one page showed: everything the tests below assert on."""

    path: str
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    other_hosts: list[str] = field(default_factory=list)
    mermaid: list[str] = field(default_factory=list)
    images: list[dict] = field(default_factory=list)
    overflow: dict[int, list[str]] = field(default_factory=dict)
    wide_tables: list[str] = field(default_factory=list)  # at 1280 px: tables wider than the content column
    tables: tuple[int, int] = (0, 0)  # (tables measured, of which marked wide on purpose)
    silent_scrollers: list[str] = field(default_factory=list)  # at 390 px: scrolling tables that do not say so
    serious_violations: list[str] = field(default_factory=list)
    contrast_checked: bool = False  # whether axe's colour rules ran here (ContrastCover)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's name
        pass


@pytest.fixture(scope="session")
def site_url(built_site: Path) -> Iterator[str]:
    with served(built_site) as url:
        yield url


class LightSearchHandler(QuietHandler):
    """The build as QuietHandler serves it, but the search index with its config and no documents.

    Material's search worker fetches the index and builds its lunr index of every section (731) on each page load:
    0.5-0.9 CPU-seconds a page (68 of the visit's 262), for nothing a visit's check reads. The visits load every page
    but the home page from this server: the index is still fetched from each page's own relative URL (a wrong one
    is a failed request) and the worker still starts on it (an error is a console error); the home page's visit,
    and the search tests, load the real index."""

    def __init__(self, *args: object, light_index: bytes, **kwargs: object) -> None:
        self.light_index = light_index  # before the base class's __init__, which answers the request
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if urlsplit(self.path).path != "/search/search_index.json":
            super().do_GET()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.light_index)))
        self.end_headers()
        self.wfile.write(self.light_index)


@contextlib.contextmanager
def served(site: Path, handler: type[QuietHandler] = QuietHandler, **options: object) -> Iterator[str]:
    """The build served from 127.0.0.1 by `handler` in a thread: its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site), **options))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def light_url(built_site: Path) -> Iterator[str]:
    """The build served with a search index of no documents (LightSearchHandler): for the pages whose checks use no
    search (the visits but the home page's, the page tests but the search test)."""
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    assert index["docs"], "the search index is empty"
    light_index = json.dumps({"config": index["config"], "docs": []}).encode()
    with served(built_site, LightSearchHandler, light_index=light_index) as url:
        yield url


# Module scope, not session: while sync_playwright runs, this thread has a running asyncio loop, and
# every later test that calls asyncio.run() in-process (test_http_load, test_real_servers, ...) would fail.
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as playwright:
        chromium = launch(playwright)
        try:
            yield chromium
        finally:
            chromium.close()


def page_paths(site: Path) -> list[str]:
    """Every page of the build, as a URL path: the home page first."""
    pages = sorted(str(path.parent.relative_to(site)) + "/" for path in site.rglob("index.html"))
    return ["" if page == "./" else page for page in pages]


def watch(page: object, visit_for: dict[str, Visit]) -> None:
    """Record console errors, failed requests and requests to other hosts against the page being visited."""
    def current() -> Visit:
        return visit_for["current"]

    def on_request(request: object) -> None:
        if urlsplit(request.url).hostname != "127.0.0.1" and not request.url.startswith("data:"):
            current().other_hosts.append(request.url)

    def on_response(response: object) -> None:
        if response.status >= 400:
            current().failed_requests.append(f"{response.status} {response.url}")

    page.on("console", lambda message: message.type == "error" and current().console_errors.append(message.text))
    page.on("pageerror", lambda error: current().console_errors.append(str(error)))
    page.on("request", on_request)
    page.on("response", on_response)
    page.on("requestfailed", lambda request: urlsplit(request.url).hostname == "127.0.0.1" and
            current().failed_requests.append(f"{request.failure} {request.url}"))


# The visit is split between two Chromiums, each in a thread of its own with its own Playwright and every
# other page: most of a visit is the browser's own work (layout, the diagrams, axe), not this process's, and
# one Chromium left the second CPU idle (the whole visit was the longest thing `make test` waited for).
VISITORS = 2


def launch(playwright: object) -> object:
    """Headless Chromium that sends every host but 127.0.0.1 to a proxy on a closed port: such a request fails
    at once."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make install` installs Debian's chromium (scripts/install_system_packages.sh)")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"],
                                      proxy={"server": "http://127.0.0.1:9", "bypass": "127.0.0.1"})


# Kinds of element that show text in the article: the element's tag, classes and inline style, and its
# parent's. Contrast depends on these (the theme colours them by class), not on the words.
KIND_OF = """
  const kind = el => el.tagName.toLowerCase() + "." + [...el.classList].sort().join(".")
    + (el.getAttribute("style") ? "[" + el.getAttribute("style") + "]" : "");
  const kindOf = el => [...el.childNodes].some(node => node.nodeType === 3 && node.textContent.trim())
    ? kind(el.parentElement) + " > " + kind(el) : null;
  const texts = [...document.querySelectorAll(".md-content *")].filter(kindOf);
"""
TEXT_KINDS = "() => {" + KIND_OF + "return [...new Set(texts.map(kindOf))]; }"
# The article's text elements of the given kinds marked, for axe's colour rules (ContrastCover): how many.
MARK_KINDS = "kinds => {" + KIND_OF + """const wanted = new Set(kinds);
  const marked = texts.filter(el => wanted.has(kindOf(el)));
  marked.forEach(el => el.setAttribute("data-colour-check", ""));
  return marked.length; }"""
MARKED = {"include": [["[data-colour-check]"]]}
NEXT_FRAME = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"


def axe_source() -> str:
    """The axe-core bundled with axe-playwright-python, as the page runs it."""
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


def low_impact_rules(source: str) -> list[str]:
    """axe's rules declared minor or moderate.

    A rule's declared impact overrides its checks' (axe-core sets every failing check's impact to the rule's), so
    these rules never report the serious or critical violations the test counts: running them cost 40% of axe's
    time on a page without the contrast rule (20.0 s against 33.6 s over 40 pages), for no change of verdict."""
    return sorted(set(re.findall(r'id:"([a-z0-9-]+)",impact:"(?:minor|moderate)"', source)))


def colour_rules(source: str) -> list[str]:
    """axe's rules in its colour category (tag cat.color) that it runs unless told otherwise: color-contrast and
    link-in-text-block, each comparing the colours of an element with those around it, so they answer by kind of
    element (ContrastCover)."""
    return sorted(rule for rule, declared in re.findall(r'id:"([a-z0-9-]+)",([^{}]*?)tags:\["cat\.color"', source)
                  if "enabled:!1" not in declared)


AXE_SOURCE = axe_source()
LOW_IMPACT_RULES = low_impact_rules(AXE_SOURCE)
COLOUR_RULES = colour_rules(AXE_SOURCE)
COUNTED = {"resultTypes": ["violations"], "rules": {rule: {"enabled": False} for rule in LOW_IMPACT_RULES}}
NO_CONTRAST = {"resultTypes": ["violations"],
               "rules": {**COUNTED["rules"], **{rule: {"enabled": False} for rule in COLOUR_RULES}}}
COLOUR_ONLY = {"resultTypes": ["violations"], "runOnly": {"type": "rule", "values": COLOUR_RULES}}


@dataclass
class ContrastCover:
    """The kinds of text element (TEXT_KINDS) axe's colour rules (COLOUR_RULES) have already checked, on any page.

    Those rules were most of axe's time here: color-contrast about 2.5 s of a 3.3 s run on a long page, and
    link-in-text-block, once contrast ran only here, 1.0 s of the 1.7 s left on a long page (50 ms a link: it works
    out each link's colours and its paragraph's). Both compare an element's colours with those around it, so they
    answer the same for every element of one kind: on a page they check only the text elements of kinds no earlier
    page showed (MARK_KINDS), and the whole home page, so every kind of text element on the site is checked at
    least once, and the second page with a new kind does not check again the hundred kinds it shares with the
    first; every other rule runs on every page."""

    checked: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def new(self, kinds: list[str]) -> list[str]:
        """The kinds no page showed before, now counted as checked (the caller checks them)."""
        with self.lock:
            new = set(kinds) - self.checked
            self.checked |= new
            return sorted(new)


def visit_pages(urls: dict[str, str], visits: list[Visit], cover: ContrastCover) -> None:
    """Visit each page (at `urls[its path]`) in a Chromium of this thread's own (visit_page)."""
    visit_for: dict[str, Visit] = {}
    with playwright_api.sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(viewport={"width": WIDE, "height": 900})
            context.add_init_script(OPEN_SHADOW_ROOTS)
            page = context.new_page()
            watch(page, visit_for)
            try:
                for visit in visits:
                    visit_for["current"] = visit
                    visit_page(page, urls[visit.path], visit, cover)
            finally:
                context.close()
        finally:
            browser.close()


def serious_violations(page: object, context: dict | None, options: dict) -> list[str]:
    """axe's serious and critical violations on the page (axe already in it), in `context` (None: the whole page)."""
    violations = page.evaluate("([context, options]) => axe.run(context || document, options).then(r => r.violations)",
                               [context, options])
    return [f"{violation['id']} ({violation['impact']}): {violation['nodes'][0]['target']}"
            for violation in violations if violation["impact"] in ("serious", "critical")]


def visit_page(page: object, url: str, visit: Visit, cover: ContrastCover) -> None:
    """One load at 1280 px (errors, requests, diagrams, images, overflow, axe, table widths with every collapsed
    block opened and closed again), then the window narrowed to 390 px (overflow, tables that scroll without
    saying so); left for a blank page, where the window is widened for the next visit.

    Narrowed, not loaded again at 390 px: the phone's layout is CSS media queries, which a resize applies, and
    site.js marks scrolling tables again on every resize; a second load was a quarter of the visit's time. The
    window is widened on the blank page, not on this one: laying a long page out again at 1280 px cost about a
    twentieth of the visit."""
    path = visit.path
    page.goto(url, wait_until="load")  # at 1280 px: the context opens so, and each visit ends so
    if page.locator(".mermaid").count():
        try:  # a diagram that never renders is reported below, with the others
            page.wait_for_function("""() => [...document.querySelectorAll(".mermaid")]
                .every(el => el.shadowRoot && el.shadowRoot.querySelector("svg"))""", timeout=10_000)
        except playwright_api.TimeoutError:
            pass
    visit.mermaid = page.evaluate(MERMAID)
    visit.images = page.evaluate(IMAGES)
    # The navigation (header, both sidebars, footer) is the same on every page: axe checks it on
    # the home page, and only the article elsewhere (axe was 2-8 s a page, most of the visit).
    new_kinds = cover.new(page.evaluate(TEXT_KINDS))
    page.evaluate(AXE_SOURCE)
    if path == "":
        visit.serious_violations = serious_violations(page, None, COUNTED)
        visit.contrast_checked = True
    else:
        visit.serious_violations = serious_violations(page, {"include": [[".md-content"]]}, NO_CONTRAST)
        if new_kinds:
            assert page.evaluate(MARK_KINDS, new_kinds) > 0, f"{path}: no element of the kinds {new_kinds}"
            visit.serious_violations += serious_violations(page, MARKED, COLOUR_ONLY)
            visit.contrast_checked = True
    visit.overflow[WIDE] = page.evaluate(OVERFLOWING)
    if path in SCREENSHOT_OF:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SCREENSHOTS / SCREENSHOT_OF[path], full_page=True)
    visit.wide_tables, *counts = page.evaluate(TABLES)  # after the screenshot: it opens every collapsed block
    visit.tables = tuple(counts)
    page.set_viewport_size({"width": PHONE, "height": 900})
    page.evaluate(NEXT_FRAME)  # the resize handlers (and those of the blocks TABLES closed again) have run
    visit.overflow[PHONE] = page.evaluate(OVERFLOWING)
    visit.silent_scrollers = page.evaluate(SILENT_SCROLLERS)
    page.goto("about:blank")
    page.set_viewport_size({"width": WIDE, "height": 900})


@pytest.fixture(scope="module")
def visits(site_url: str, light_url: str, built_site: Path) -> dict[str, Visit]:
    """Every page visited (visit_pages), by VISITORS Chromiums at once, each taking every VISITORS-th page; the
    home page with the real search index, the others with none (LightSearchHandler)."""
    visits = {path: Visit(path) for path in page_paths(built_site)}
    assert visits, "the build has no pages"
    shares = [list(visits.values())[start::VISITORS] for start in range(VISITORS)]
    cover = ContrastCover()
    with concurrent.futures.ThreadPoolExecutor(VISITORS) as pool:
        urls = {path: (site_url if path == "" else light_url) + path for path in visits}
        for done in [pool.submit(visit_pages, urls, share, cover) for share in shares]:
            done.result()  # a visitor's exception, raised here
    return visits


SCREENSHOT_OF = {"": "home.png", "designs/thread-per-connection/": "design-thread-per-connection.png",
                 "compare/": "compare.png"}


def problems(visits: dict[str, Visit], attribute: str) -> dict[str, object]:
    return {path or "/": getattr(visit, attribute) for path, visit in visits.items() if getattr(visit, attribute)}


def test_no_request_leaves_the_site(visits: dict[str, Visit]) -> None:
    assert problems(visits, "other_hosts") == {}


def test_every_page_loads_without_console_errors(visits: dict[str, Visit]) -> None:
    assert problems(visits, "console_errors") == {}


def test_no_request_fails(visits: dict[str, Visit]) -> None:
    assert problems(visits, "failed_requests") == {}


def test_every_mermaid_block_is_an_svg(visits: dict[str, Visit]) -> None:
    diagrams = [state for visit in visits.values() for state in visit.mermaid]
    assert diagrams, "no page has a diagram: the check would pass on nothing"
    assert {path: visit.mermaid for path, visit in visits.items() if set(visit.mermaid) - {"svg"}} == {}


def test_no_page_overflows_sideways_on_a_desktop_or_a_phone(visits: dict[str, Visit]) -> None:
    overflowing = {f"{path or '/'} at {width} px": elements for path, visit in visits.items()
                   for width, elements in visit.overflow.items() if elements}
    assert overflowing == {}


def test_every_table_fits_the_content_column_at_1280_px_and_only_a_toggled_wide_one_scrolls(
        visits: dict[str, Visit]) -> None:
    measured, wide = (sum(visit.tables[index] for visit in visits.values()) for index in (0, 1))
    assert measured >= 50 and wide >= 1, f"only {measured} tables, {wide} marked wide: the check would pass on nothing"
    found = problems(visits, "wide_tables")
    assert found == {}, "\n".join(f"{path}: {tables}" for path, tables in found.items())


def test_a_table_that_scrolls_on_a_phone_says_so(visits: dict[str, Visit]) -> None:
    assert problems(visits, "silent_scrollers") == {}


# Issue 23's diagrams, drawn where the pages describe them in words: page -> Mermaid diagrams at least.
DIAGRAMS = {"keep-alive/": 1, "designs/async-101-naive-sync/": 2, "many-cores/": 1, "survive/": 1, "database/": 1}


def test_the_diagrams_the_pages_describe_are_drawn_as_svg(visits: dict[str, Visit]) -> None:
    drawn = {path: visits[path].mermaid.count("svg") if path in visits else 0 for path in DIAGRAMS}
    assert {path: count for path, count in drawn.items() if count < DIAGRAMS[path]} == {}, drawn


def test_plots_follow_the_dark_scheme(page: object, light_url: str) -> None:
    """A plot is an <img>: in the dark scheme the page turns it around (site.css), in the light one it is left alone."""
    filters = {}
    for scheme in ("dark", "light"):
        page.emulate_media(color_scheme=scheme)
        page.goto(light_url + "many-cores/")
        page.evaluate("() => localStorage.clear()")  # Material remembers a toggled scheme; follow the media
        page.reload()
        filters[scheme] = page.locator(".md-content img[src*='plots/']").first.evaluate(
            "img => getComputedStyle(img).filter")
    assert "invert" in filters["dark"] and filters["light"] == "none", filters


def test_every_image_loads_and_has_alt_text(visits: dict[str, Visit]) -> None:
    images = [image for visit in visits.values() for image in visit.images]
    assert len(images) >= 3, "the plots and timelines are images: the check would pass on nothing"
    bad = {path: [image for image in visit.images if not (image["loaded"] and image["alt"])]
           for path, visit in visits.items()}
    assert {path: images for path, images in bad.items() if images} == {}


def test_the_visits_server_changes_the_search_index_and_nothing_else(tmp_path: Path) -> None:
    """LightSearchHandler answers the search index with what it was given, and every other path as the build has it."""
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "search_index.json").write_text('{"docs": ["a section"]}', encoding="utf-8")
    (tmp_path / "index.html").write_text("<p>home</p>", encoding="utf-8")
    with served(tmp_path, LightSearchHandler, light_index=b'{"docs": []}') as url:
        assert urllib.request.urlopen(url + "search/search_index.json?v=1").read() == b'{"docs": []}'
        assert urllib.request.urlopen(url).read() == b"<p>home</p>"
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(url + "search/missing.json")
    with served(tmp_path) as url:
        assert urllib.request.urlopen(url + "search/search_index.json").read() == b'{"docs": ["a section"]}'


def test_only_rules_that_cannot_report_a_serious_violation_are_left_out() -> None:
    """The rules left out are axe's declared minor and moderate ones, and none the test could count; the rules left
    out where ContrastCover has seen every kind of text element are axe's colour rules."""
    assert {"region", "heading-order", "landmark-one-main"} <= set(LOW_IMPACT_RULES)
    assert not {"color-contrast", "image-alt", "link-name", "aria-allowed-attr"} & set(LOW_IMPACT_RULES)
    assert 20 <= len(LOW_IMPACT_RULES) <= 60, LOW_IMPACT_RULES
    assert COLOUR_RULES == ["color-contrast", "link-in-text-block"], COLOUR_RULES


def test_no_serious_accessibility_violation(visits: dict[str, Visit]) -> None:
    contrast = [path for path, visit in visits.items() if visit.contrast_checked]
    assert "" in contrast and len(contrast) >= 5, f"colour contrast checked only on {contrast}"
    found = problems(visits, "serious_violations")
    assert found == {}, "\n".join(f"{path}: {violations}" for path, violations in found.items())


def test_screenshots_are_written(visits: dict[str, Visit]) -> None:
    for name in SCREENSHOT_OF.values():
        assert (SCREENSHOTS / name).stat().st_size > 10_000, name


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """A fresh page at 1280 px in this module's browser (the visits launch Chromiums of their own, so a test with a
    page needs no visit first and may run on any worker: conftest.py groups only the tests that read `visits`)."""
    context = browser.new_context(viewport={"width": WIDE, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.mark.parametrize("term", ["epoll", "GIL"])
def test_search_finds_the_term_and_its_links_work(page: object, site_url: str, term: str) -> None:
    page.goto(site_url)
    results = page.locator(".md-search-result__item a")
    search = page.locator("input.md-search__input")
    # Type as a reader does: Material reads the query on keyup (and just after focus), not on the
    # input event that fill() sends; fill() only worked when its focus won a 1 ms race, and lost
    # it on a busy machine ("Type to start searching", no results).
    for _ in range(2):  # once more if the index, built in a web worker, was not ready for the first
        search.click()
        search.fill("")
        search.press_sequentially(term, delay=50)
        try:
            results.first.wait_for(timeout=30_000)
            break
        except playwright_api.TimeoutError:
            continue
    hrefs = results.evaluate_all("links => links.map(link => link.href)")
    assert hrefs, (f"no result for {term}; the search panel says "
                   f"{page.locator('.md-search-result__meta').all_inner_texts()}")
    for href in hrefs[:3]:
        page.goto("about:blank")  # else a link into the page already shown is a same-document jump, with no response
        response = page.goto(href)
        assert response is not None and response.status == 200, href
        fragment = urlsplit(href).fragment
        if fragment:
            assert page.locator(f"[id='{fragment}']").count() == 1, f"{href}: no element with that id"
        assert term.lower() in page.locator(".md-content").inner_text().lower(), href


def test_the_light_dark_toggle_switches_the_scheme(page: object, light_url: str) -> None:
    page.emulate_media(color_scheme="light")
    page.goto(light_url)
    scheme = lambda: page.locator("body").get_attribute("data-md-color-scheme")  # noqa: E731
    assert scheme() == "default"
    page.locator("form[data-md-component=palette] label:visible").first.click()
    assert scheme() == "slate"
    page.locator("form[data-md-component=palette] label:visible").first.click()
    assert scheme() == "default"


def test_the_notebook_page_shows_its_outputs(page: object, light_url: str, built_site: Path) -> None:
    notebooks = [path for path in page_paths(built_site) if path.startswith("notebooks/")]
    assert notebooks, "the notebook page is not in the build"
    for path in notebooks:
        page.goto(light_url + path)
        outputs = page.locator(".jp-OutputArea-output")
        assert outputs.count() > 0, f"{path}: no cell output"
        assert outputs.locator("img, table, pre").count() > 0, f"{path}: the outputs are empty"


def test_linkchecker_finds_no_broken_internal_link_or_anchor(site_url: str, tmp_path: Path) -> None:
    """LinkChecker walks the served build from the home page; other hosts are not fetched (offline).

    Anchors: `mkdocs build --strict` fails on a link to a missing anchor (mkdocs.yml, validation);
    LinkChecker's AnchorCheck plugin fetches every page once per anchor and took over five minutes.
    """
    config = tmp_path / "linkcheckerrc"
    config.write_text("[filtering]\ncheckextern=0\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "linkcheck", "--config", str(config), "--no-status",
                             "--no-warnings", "--output", "text", site_url],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 errors found" in result.stdout, result.stdout[-2000:]


def test_pointing_at_a_glossary_word_shows_its_tooltip(page: object, light_url: str) -> None:
    """Words defined in docs/glossary.md get Material's tooltip (content.tooltips), not only the browser's title."""
    page.goto(light_url + "cpu-bound/")
    word = page.locator("article p abbr", has_text="GIL").first
    title = word.get_attribute("title")  # Material moves it into its own tooltip on hover
    assert title, "no glossary tooltip on the word GIL (scripts/glossary_hook.py)"
    word.hover()
    tooltip = page.locator(".md-tooltip2--active")
    tooltip.wait_for(timeout=5_000)
    assert tooltip.inner_text().strip() == title
