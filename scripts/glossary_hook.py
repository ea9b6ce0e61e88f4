"""MkDocs hook: the glossary page is the one place a term is defined; every page gets its tooltips from it.

An entry of docs/glossary.md is a level-3 heading whose attribute list names the words
that get a tooltip, then one to three sentences:

    ### Global interpreter lock (GIL) { #gil data-abbr="GIL" }

    The lock a CPython thread must hold to run Python code. ...

`data-abbr` lists exact, case-sensitive words separated by `|` (the `abbr` extension
matches whole words only). At `on_config` this hook reads the page and hands the
`abbr` extension its `glossary` option: each word maps to the entry's first sentence,
as plain text. So the tooltip of "GIL" on any page is, by construction, the first
sentence of the GIL entry, and editing the entry edits every tooltip. Code spans and
code blocks are never touched by `abbr`. An entry without `data-abbr` gets no tooltip
(words like "fork" or "event loop" are everywhere; underlining them all would be noise).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError

GLOSSARY_PAGE = "glossary.md"  # relative to docs_dir

ENTRY_HEADING = re.compile(r"^### (?P<term>.+?) \{(?P<attributes>[^}]*)\}\s*$")
ANCHOR = re.compile(r"#(?P<anchor>[\w-]+)")
TOOLTIP_WORDS = re.compile(r'data-abbr="(?P<words>[^"]+)"')
FIRST_SENTENCE = re.compile(r"^(?P<sentence>.+?[.!?])(?=\s|$)")
MARKDOWN_LINK = re.compile(r"\[(?P<text>[^\]]+)\]\([^)]+\)")
MARKUP = re.compile(r"[`*]")  # code and emphasis marks; `_` stays: it is part of TIME_WAIT


@dataclass(frozen=True)
class Entry:
    term: str
    anchor: str
    tooltip_words: tuple[str, ...]
    text: str  # the entry's first paragraph, as written

    @property
    def first_sentence(self) -> str:
        """The tooltip: the first sentence of the entry, with links and markup reduced to plain text."""
        plain = MARKUP.sub("", MARKDOWN_LINK.sub(r"\g<text>", self.text))
        match = FIRST_SENTENCE.match(plain)
        if match is None:
            raise ValueError(f"glossary entry {self.term!r} has no sentence ending in . ! or ?")
        return match.group("sentence")


def parse_entries(markdown: str) -> list[Entry]:
    """Every `###` entry of the glossary page, in page order."""
    entries: list[Entry] = []
    lines = markdown.splitlines()
    for number, line in enumerate(lines):
        heading = ENTRY_HEADING.match(line)
        if heading is None:
            continue
        attributes = heading.group("attributes")
        anchor = ANCHOR.search(attributes)
        if anchor is None:
            raise ValueError(f"glossary line {number + 1}: an entry needs an explicit #anchor: {line}")
        words = TOOLTIP_WORDS.search(attributes)
        paragraph: list[str] = []
        for following in lines[number + 1:]:
            if following.startswith("#") or (paragraph and not following.strip()):
                break
            if following.strip():
                paragraph.append(following.strip())
        entries.append(Entry(
            term=heading.group("term"),
            anchor=anchor.group("anchor"),
            tooltip_words=tuple(word.strip() for word in words.group("words").split("|")) if words else (),
            text=" ".join(paragraph),
        ))
    return entries


def tooltips(entries: list[Entry]) -> dict[str, str]:
    """Word -> tooltip text, for the `abbr` extension's `glossary` option. A word claimed twice is an error."""
    result: dict[str, str] = {}
    for entry in entries:
        for word in entry.tooltip_words:
            if word in result:
                raise ValueError(f"glossary: {word!r} is a tooltip word of two entries")
            result[word] = entry.first_sentence
    return result


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    if "abbr" not in config.markdown_extensions:
        raise PluginError("scripts/glossary_hook.py needs the `abbr` extension in mkdocs.yml")
    page = Path(config.docs_dir) / GLOSSARY_PAGE
    try:
        words = tooltips(parse_entries(page.read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        raise PluginError(f"{page}: {error}") from error
    config.mdx_configs.setdefault("abbr", {})["glossary"] = words
    return config
