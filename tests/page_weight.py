"""How heavy a built page is for its reader: HTML bytes, and the words of its article a reader scrolls past.

The budget (issue 35): no page over 400 KB of HTML or 5,000 words of visible text. Words are counted in
the page's article (`<article>`: the navigation, header and footer are the same on every page and are not
the page's weight), generated tables and folded `<details>` included (a reader who opens them reads them),
code listings aside (`<pre>` and `<code>`: a listing is read line by line, not scrolled past), and never
what a browser does not show (`<script>`, `<style>`, `<svg>` internals, `<template>`).

Run it on a built site to list every page, heaviest first:  python tests/page_weight.py site
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

MAX_HTML_BYTES = 400 * 1000
MAX_VISIBLE_WORDS = 5000
# Elements whose text is not counted: code listings and what the browser never shows as text.
UNCOUNTED = {"pre", "code", "script", "style", "svg", "template", "noscript"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass(frozen=True)
class Weight:
    """One built page: where it is, its HTML size and its article's visible words."""

    page: str
    html_bytes: int
    words: int

    def over_budget(self) -> list[str]:
        """What is over the budget, in words a failing test can print; empty when the page is within it."""
        over = []
        if self.html_bytes > MAX_HTML_BYTES:
            over.append(f"{self.html_bytes / 1000:.0f} KB of HTML > {MAX_HTML_BYTES // 1000} KB")
        if self.words > MAX_VISIBLE_WORDS:
            over.append(f"{self.words:,} words > {MAX_VISIBLE_WORDS:,}")
        return over


class _ArticleWords(HTMLParser):
    """Counts the words of text inside <article>, outside every uncounted element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.in_article = 0
        self.uncounted = 0
        self.words = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            return
        if tag == "article":
            self.in_article += 1
        elif tag in UNCOUNTED:
            self.uncounted += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self.in_article = max(0, self.in_article - 1)
        elif tag in UNCOUNTED:
            self.uncounted = max(0, self.uncounted - 1)

    def handle_data(self, data: str) -> None:
        if self.in_article and not self.uncounted:
            self.words += len(data.split())


def visible_words(html: str) -> int:
    """Words of the article's text a reader scrolls past (code listings and hidden elements aside)."""
    parser = _ArticleWords()
    parser.feed(html)
    parser.close()
    return parser.words


def measure(page: Path, site: Path) -> Weight:
    """The weight of one built page."""
    html = page.read_bytes()
    return Weight(str(page.relative_to(site)), len(html), visible_words(html.decode("utf-8")))


def measure_site(site: Path) -> list[Weight]:
    """Every page of a built site, heaviest (by words) first; the search index and 404 page aside."""
    pages = [path for path in site.rglob("*.html") if path.name != "404.html"]
    return sorted((measure(page, site) for page in pages), key=lambda weight: (-weight.words, -weight.html_bytes))


def main(argv: list[str]) -> int:
    """Print every page's weight, heaviest first, marking the ones over budget; exit 1 if any is."""
    site = Path(argv[1] if len(argv) > 1 else "site")
    weights = measure_site(site)
    print(f"{'page':60} {'KB':>7} {'words':>7}")
    for weight in weights:
        mark = "  OVER: " + "; ".join(weight.over_budget()) if weight.over_budget() else ""
        print(f"{weight.page:60} {weight.html_bytes / 1000:7.0f} {weight.words:7,}{mark}")
    print(f"{len(weights)} pages, {sum(w.words for w in weights):,} words")
    return 1 if any(weight.over_budget() for weight in weights) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
