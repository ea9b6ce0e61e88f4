"""How the generated pages present designs: links in tables, one colour per design on plots, log scales,
the article's figure on plots, and the tables marked wide on purpose (harness.presentation, harness.plots)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from fake_records import fixture, typed
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records.scenario_record import ScenarioRecord
from harness.render import plots, site
from harness.render.presentation import (
    PALETTE,
    UNKNOWN_COLOUR,
    WIDE_TABLE_CLASS,
    design_colour,
    design_link,
    design_marker,
    wide_table,
)



def test_a_known_design_links_to_its_page_from_the_docs_root_with_its_title_as_tooltip() -> None:
    design = load_catalogue().designs["thread-pool-executor"]
    assert design_link("thread-pool-executor") == f'[thread-pool-executor](/{design.page} "{design.title}")'
    assert (REPO_ROOT / "docs" / design.page).exists()
    assert design_link("made-up-design") == "`made-up-design`"  # no page to link to


def test_a_double_quote_in_a_title_cannot_end_the_tooltip_early() -> None:
    assert design_link("uvicorn", 'say "hi"') == '[uvicorn](/designs/uvicorn.md "say \'hi\'")'


def test_no_two_designs_of_one_scenario_share_a_colour_and_every_design_keeps_one() -> None:
    catalogue = load_catalogue()
    for scenario_id, scenario in catalogue.scenarios.items():
        colours = [design_colour(name) for name in scenario.designs]
        assert len(set(colours)) == len(colours), scenario_id
    assert {design_colour(name) for name in catalogue.designs} <= set(PALETTE)
    assert design_colour("made-up-design") == UNKNOWN_COLOUR and design_marker("made-up-design") == "o"


def test_a_design_has_the_same_colour_on_every_plot_it_is_drawn_on() -> None:
    record = typed(fixture("sweep-io"))
    svgs = [plots.throughput_plot(record), plots.latency_plot(record), plots.memory_plot(record)]
    for design in record.designs:
        colour = design_colour(design.name)
        assert all(colour in svg for svg in svgs), design.name


def _figure(record: ScenarioRecord, make) -> Any:
    """The matplotlib figure a plot function draws, instead of its SVG."""
    made = []
    original = plots._to_svg
    plots._to_svg = lambda figure: made.append(figure) or ""
    try:
        make(record)
    finally:
        plots._to_svg = original
    return made[0]


def test_the_y_axis_is_logarithmic_and_says_so_only_when_the_values_span_more_than_a_decade() -> None:
    record = fixture("sweep-io")  # 9 req/s at one client, thousands at 1,000
    axes = _figure(typed(record), plots.throughput_plot).axes[0]
    assert axes.get_yscale() == "log" and axes.get_ylabel().endswith("(log scale)")
    flat = copy.deepcopy(record)
    for design in flat["designs"]:
        for run in design["runs"]:
            run["requests_per_second"] = 100.0 + run["concurrency"] / 100  # 100 to 110: one decade is plenty
    axes = _figure(typed(flat), plots.throughput_plot).axes[0]
    assert axes.get_yscale() == "linear" and "log scale" not in axes.get_ylabel()
    plots.plt.close("all")


def test_the_articles_requests_per_second_figure_is_a_hollow_marker_at_its_level() -> None:
    record = fixture("sweep-io")
    record["designs"][0]["reproduces"] = ["article/one"]

    def points(published: dict[str, Any], plotted: list[float]) -> list[tuple[float, float]]:
        record["scenario"]["published"] = published
        read = typed(record)
        return plots.article_points(read, read.designs[0], plotted)

    assert points({"metric": "requests_per_second", "figures_100": {"article/one": 42.0}}, [1, 100, 1000]) == [
        (100, 42.0)]
    axes = _figure(typed(record), plots.throughput_plot).axes[0]
    assert plots.ARTICLE_LABEL in [text.get_text() for text in axes.get_legend().get_texts()]
    hollow = [collection for collection in axes.collections if collection.get_offsets().tolist() == [[100, 42.0]]]
    assert len(hollow) == 1 and hollow[0].get_facecolor().size == 0  # no fill: hollow
    # A duration is not a rate, and a plain `figures` in a sweep belongs to no level: neither is drawn.
    assert points({"metric": "duration_s", "figures_100": {"article/one": 42.0}}, [1, 100, 1000]) == []
    assert points({"figures": {"article/one": 42.0}}, [1, 100, 1000]) == []
    assert points({"figures": {"article/one": 42.0}}, [100]) == [(100, 42.0)]
    plots.plt.close("all")


def test_a_scenario_table_fits_first_and_keeps_every_column_behind_a_wide_toggle() -> None:
    text = site.scenario_table(typed(fixture("sweep-io")))
    summary_head = text.splitlines()[0]
    assert summary_head == "| Design | Clients | Req/s | p50 / p99 ms | Failed |"
    toggle = next(line for line in text.splitlines() if line.startswith("??? "))
    assert WIDE_TABLE_CLASS in toggle.split('"')[0]
    full_head = next(line for line in text.splitlines() if line.startswith("    | Design | Model |"))
    assert "Latency p50 / p90 / p99 / max (ms)" in full_head and "Completed" in full_head
    assert not re.search(r"^\| [A-Z][^|]*\(`", text, re.MULTILINE)  # no long "Title (`name`)" label any more


def test_a_wide_table_is_wrapped_in_the_marked_block_that_markdown_still_parses() -> None:
    wrapped = wide_table("| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert wrapped.startswith(f'<div class="{WIDE_TABLE_CLASS}" markdown>\n\n| a | b |')
    assert wrapped.endswith("\n\n</div>\n")


@pytest.mark.parametrize("name", ["environment.md", "survive-limits.md"])
def test_the_reference_tables_are_the_ones_marked_wide(name: str) -> None:
    assert f'<div class="{WIDE_TABLE_CLASS}" markdown>' in (REPO_ROOT / "docs" / "_generated" / name).read_text(
        encoding="utf-8")
