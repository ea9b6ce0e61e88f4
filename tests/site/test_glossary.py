"""The glossary page and the tooltips every page gets from it (scripts/glossary_hook.py).

Fast checks read docs/glossary.md; the rest read the strict build of the site that the
site tests share (tests/conftest.py; the same build fails on a glossary link to a missing
page or anchor).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from glossary_hook import Entry, parse_entries, tooltips
from harness.model.paths import REPO_ROOT

GLOSSARY = REPO_ROOT / "docs" / "glossary.md"
ENTRIES = parse_entries(GLOSSARY.read_text(encoding="utf-8"))
TOOLTIPS = tooltips(ENTRIES)
MARKDOWN_LINKS = re.compile(r"\]\([^)]*\)")
SITE_LINK = re.compile(r"\]\((?!https?:)(?P<target>[^)#]+\.md)(?:#[\w-]+)?\)")


def entry_section(entry: Entry) -> str:
    """The entry's whole text on the page, from its heading to the next heading."""
    text = GLOSSARY.read_text(encoding="utf-8")
    start = text.index(f"{{ #{entry.anchor}")
    end = text.find("\n#", start)
    return text[start:end if end != -1 else len(text)]


def test_the_glossary_has_the_terms_the_issue_asks_for() -> None:
    anchors = {entry.anchor for entry in ENTRIES}
    asked = {"backlog", "time-wait", "fin-rst", "half-close", "percentiles", "tool-bound", "loops", "gil",
             "keep-alive", "pipelining"}
    assert asked <= anchors, f"missing: {sorted(asked - anchors)}"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.anchor)
def test_every_entry_links_to_the_page_where_it_is_shown(entry: Entry) -> None:
    _, where, after = entry_section(entry).partition("**Where:**")
    targets = [match.group("target") for match in SITE_LINK.finditer(after)] if where else []
    assert targets, f"{entry.term}: no **Where:** line with a link to a page of this site"
    for target in targets:
        assert (GLOSSARY.parent / target).is_file(), f"{entry.term}: {target} does not exist"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda entry: entry.anchor)
def test_every_entry_is_one_to_three_sentences(entry: Entry) -> None:
    sentences = re.findall(r"[.!?](?=\s|$)", MARKDOWN_LINKS.sub("", entry.text))
    assert 1 <= len(sentences) <= 3, f"{entry.term}: {len(sentences)} sentences"



@pytest.mark.parametrize("word", sorted(TOOLTIPS))
def test_every_tooltip_is_one_short_plain_sentence(word: str) -> None:
    tooltip = TOOLTIPS[word]
    assert len(tooltip) <= 200, f"{word}: a tooltip of {len(tooltip)} characters is a paragraph"
    assert not re.search(r"[`*\[\]]", tooltip), f"{word}: markup left in the tooltip: {tooltip}"


def test_the_tooltip_is_the_entry_s_first_sentence_as_plain_text() -> None:
    entry = Entry(term="Demo", anchor="demo", tooltip_words=("DEMO",),
                  text="A *demo* of [`shutdown()`](protocol-care.md#x), ending here. A second sentence.")
    assert entry.first_sentence == "A demo of shutdown(), ending here."
    assert tooltips([entry]) == {"DEMO": "A demo of shutdown(), ending here."}


def test_parse_reads_heading_attributes_and_the_first_paragraph_only() -> None:
    page = ('# Glossary\n\nIntro.\n\n### Time wait (TIME_WAIT) { #time-wait data-abbr="TIME_WAIT|time wait" }\n\n'
            "First line\nof the entry. More.\n\n**Where:** [x](x.md).\n\n### Fork { #fork }\n\nCopies a process.\n")
    time_wait, fork = parse_entries(page)
    assert (time_wait.term, time_wait.anchor, time_wait.tooltip_words) == ("Time wait (TIME_WAIT)", "time-wait",
                                                                           ("TIME_WAIT", "time wait"))
    assert time_wait.text == "First line of the entry. More."
    assert (fork.anchor, fork.tooltip_words, fork.first_sentence) == ("fork", (), "Copies a process.")


def test_bad_glossary_entries_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="explicit #anchor"):
        parse_entries('### GIL { data-abbr="GIL" }\n\nThe lock.\n')
    with pytest.raises(ValueError, match="two entries"):
        tooltips(parse_entries('### A { #a data-abbr="GIL" }\n\nOne.\n\n### B { #b data-abbr="GIL" }\n\nTwo.\n'))
    with pytest.raises(ValueError, match="no sentence"):
        tooltips(parse_entries('### A { #a data-abbr="X" }\n\nno full stop\n'))


@pytest.fixture
def site(built_site: Path) -> Path:
    """The strict build every site test shares (tests/conftest.py)."""
    return built_site


def abbr(word: str) -> str:
    """The element the abbr extension writes (Python-Markdown escapes & < > and double quotes in attributes)."""
    title = html.escape(TOOLTIPS[word], quote=False).replace('"', "&quot;")
    return f'<abbr title="{title}">{html.escape(word, quote=False)}</abbr>'


def test_a_page_that_says_gil_shows_the_glossary_s_tooltip(site: Path) -> None:
    page = (site / "cpu-bound" / "index.html").read_text(encoding="utf-8")
    assert abbr("GIL") in page
    assert TOOLTIPS["GIL"].startswith("The lock a CPython thread must hold")


def test_every_tooltip_word_is_used_on_some_other_page(site: Path) -> None:
    """A tooltip word no page uses (outside the glossary) is dead: the entry should not claim it."""
    pages = "".join(path.read_text(encoding="utf-8") for path in site.rglob("index.html")
                    if path.parent.name != "glossary")
    unused = [word for word in TOOLTIPS if abbr(word) not in pages]
    assert unused == [], f"no page shows these tooltips: {unused}"


def test_code_is_never_given_a_tooltip(site: Path) -> None:
    """What a reader copies must be exactly the code: abbr leaves code spans and blocks alone."""
    code = re.compile(r"<code[^>]*>(?:(?!</code>).)*?<abbr", re.DOTALL)
    offenders = [str(path.relative_to(site)) for path in site.rglob("index.html")
                 if code.search(path.read_text(encoding="utf-8"))]
    assert offenders == []
