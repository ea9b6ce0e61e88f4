"""How generated pages present things: a design's name in every table and its colour on every plot,
and the mark on a table that is wide on purpose. One place for each, so every renderer agrees.

Tables name a design by its short catalogue name, linked to its page, with its long title as the
link's tooltip: the long title in a first column made every table wider than the page at 1280 px.
The link is absolute from docs/ (`/designs/x.md`), because one generated file is included by pages
at different depths (docs/compare.md, docs/articles/*.md, docs/designs/*.md); mkdocs.yml sets
`validation: links: absolute_links: relative_to_docs`, so MkDocs checks the target exists and
rewrites the link relative to each page that includes it.

Plots give a design the same colour and marker on every plot of the site, whatever else the plot
shows. The colours are handed out once, from the catalogue alone: in catalogue order, each design
takes the first of PALETTE's thirty colours that no design sharing a scenario with it already
holds, so no two designs of one scenario (one table, one plot) look alike while the palette lasts. A design added to the catalogue
later takes a free colour and leaves every earlier design's colour as it was. The marker comes from
the catalogue position, a second cue where two lines share a colour.

Tables fit the content column at 1280 px, except the few marked with `wide_table`: those scroll
inside themselves with the first column pinned (docs/assets/site.css), and tests/site/test_browser.py
lets exactly them be wider than the column.
"""

from __future__ import annotations

import functools
import itertools

from harness.model.catalogue import load_catalogue

# matplotlib's tab10, then twenty darker hues (from tab20b, tab20c and ColorBrewer's Dark2): every colour
# reads as a line on white, which tab20's pale halves do not. Thirty, since the database scenarios put fifteen
# designs in one plot.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#1b9e77",
           "#d95f02", "#7570b3", "#e7298a", "#525252", "#6b6ecf", "#bd9e39", "#ad494a", "#a55194",
           "#66a61e", "#a6761d", "#3182bd", "#e6550d", "#31a354", "#756bb1"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
UNKNOWN_COLOUR = "#404040"  # a design the catalogue does not know (a test's made-up record)


@functools.cache
def _colour_indices() -> dict[str, int]:
    """Each design's palette index: the first one no design met earlier in a shared scenario holds."""
    catalogue = load_catalogue()
    together: dict[str, set[str]] = {name: set() for name in catalogue.designs}
    for scenario in catalogue.scenarios.values():
        for name in scenario.designs:
            together.setdefault(name, set()).update(other for other in scenario.designs if other != name)
    indices: dict[str, int] = {}
    for name in catalogue.designs:
        taken = {indices[other] for other in together[name] if other in indices}
        indices[name] = next(index for index in itertools.count() if index not in taken)
    return indices


@functools.cache
def _catalogue_designs() -> dict[str, tuple[int, str, str]]:
    """name -> (catalogue position, page path under docs/, long title)."""
    return {name: (index, design.page, design.title)
            for index, (name, design) in enumerate(load_catalogue().designs.items())}


def design_link(name: str, title: str | None = None) -> str:
    """`[name](/designs/name.md "long title")`: the short name, its page, the long title as a tooltip."""
    known = _catalogue_designs().get(name)
    if known is None or not known[1]:
        return f"`{name}`"
    tooltip = (title or known[2]).replace('"', "'")
    return f'[{name}](/{known[1]} "{tooltip}")'


def design_colour(name: str) -> str:
    """The design's colour on every plot."""
    index = _colour_indices().get(name)
    return UNKNOWN_COLOUR if index is None else PALETTE[index % len(PALETTE)]


def design_marker(name: str) -> str:
    """The design's marker on every plot (tells apart two designs that share a colour)."""
    known = _catalogue_designs().get(name)
    return "o" if known is None else MARKERS[known[0] % len(MARKERS)]


def design_style(name: str) -> dict[str, str]:
    """Keyword arguments for matplotlib's plot/bar: the design's colour and marker, labelled by name."""
    return {"color": design_colour(name), "marker": design_marker(name), "label": name}


WIDE_TABLE_CLASS = "wide-table"  # docs/assets/site.css pins the first column; tests/site/test_browser.py allows the width


def wide_table(markdown: str) -> str:
    """Mark a table (or several) as wide on purpose: it scrolls inside itself with its first column pinned."""
    return f'<div class="{WIDE_TABLE_CLASS}" markdown>\n\n{markdown.rstrip()}\n\n</div>\n'
