"""The coloured grid the survival and conformance matrices are drawn as: one row per design, one narrow column per case.

Each cell is a verdict's mark on the verdict's colour (docs/assets/site.css, `.survival-grid` and the
`.sv-*` classes), so a whole matrix fits the 688 px content column at 1280 px and reads at a glance.
What the design answered is the cell's tooltip and its name for a screen reader (an image role with
a label); the legend and the text tables under a grid say the same in words. The grid is a Markdown
table inside a `markdown` div, so Material wraps it like any table: at 390 px it scrolls sideways
and says so (site.js's hint), the design's column pinned (site.css).
"""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """A case: the short label in the header, where it links, and the name its tooltip gives."""

    label: str
    href: str
    title: str


def mark_cell(css_class: str, mark: str, said: str) -> str:
    """One cell: the mark on the colour of `css_class` (an `sv-*` class), `said` as tooltip and as its spoken name."""
    said = html.escape(said.replace("|", "/"), quote=True)
    return f'<span class="sv {css_class}" role="img" title="{said}" aria-label="{said}">{mark}</span>'


def legend_mark(css_class: str, mark: str) -> str:
    """A mark on its colour as the legend shows it: decoration, the legend's words say what it means."""
    return f'<span class="sv {css_class}" aria-hidden="true">{mark}</span>'


def not_run_cell() -> str:
    return '<span class="sv sv-none" title="not run">–</span>'


def grid_table(columns: list[Column], rows: list[tuple[str, list[str]]]) -> str:
    """The grid: a header of linked case labels, then each row's label and its cells (one per column)."""
    head = "| Design | " + " | ".join(
        f'[{column.label}]({column.href} "{html.escape(column.title, quote=True)}")' for column in columns) + " |"
    lines = [head, "|---|" + ":-:|" * len(columns)]
    for label, cells in rows:
        if len(cells) != len(columns):
            raise ValueError(f"grid row {label!r} has {len(cells)} cells for {len(columns)} columns")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return '<div class="survival-grid" markdown>\n\n' + "\n".join(lines) + "\n\n</div>\n"
