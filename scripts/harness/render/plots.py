"""SVG plots rendered from records: throughput, latency and memory against concurrency, latency against
offered rate (open-loop rate sweeps), and timelines.

Plots are part of rendering: they read records only, and are written to
docs/plots/ (a folder the site serves). A design has one colour and marker on every plot
(harness.presentation); a y axis whose values span more than a decade is logarithmic and says so,
else the slow designs' lines collapse onto the x axis; where the scenario's article published a
requests/s figure at a plotted level, it is drawn as a hollow marker in the design's colour. Output is made deterministic (fixed SVG
hash salt, no date in the metadata) so `render --check` can compare them byte for
byte like the tables.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Callable
from typing import Any

import matplotlib

from harness.model.records.scenario_record import Outcome, Run, ScenarioRecord
from harness.render.cells import is_rate_sweep
from harness.render.presentation import design_colour, design_marker, design_style

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

matplotlib.rcParams.update({"svg.hashsalt": "many-clients", "svg.fonttype": "path", "font.size": 10,
                            "axes.spines.top": False, "axes.spines.right": False})
SVG_METADATA = {"Date": None, "Creator": "scripts/bench.py render"}


def _to_svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata=SVG_METADATA, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def _series(design: Outcome, pick: Callable[[Run], float | None],
            level: str = "concurrency") -> tuple[list[float], list[float]]:
    """(levels, median of `pick(run)` per level) over a design's successful runs; the run's field `level` is the level."""
    by_level: dict[float, list[float]] = {}
    for run in design.runs:
        value = pick(run) if run.error is None else None
        if value is not None:
            by_level.setdefault(run.get(level), []).append(value)
    levels = sorted(by_level)
    return levels, [statistics.median(by_level[level]) for level in levels]


DECADE_SPAN = 10.0  # a y axis whose largest value is more than this many times its smallest is logarithmic
ARTICLE_LABEL = "article's figure (hollow marker)"


def spans_decades(values: list[float]) -> bool:
    """True when the positive values span more than a decade: a linear axis would flatten the small ones."""
    positive = [value for value in values if value > 0]
    return bool(positive) and max(positive) > DECADE_SPAN * min(positive)


def article_points(record: ScenarioRecord, design: Outcome, plotted: list[float]) -> list[tuple[float, float]]:
    """(level, requests/s) the article published for this design at a level the plot shows.

    Only requests/s figures (a duration is not on a requests/s axis), and only figures tied to a level
    (`figures_<level>`), or the plain `figures` of a one-level scenario: a plain figure in a sweep
    says nothing about which level it belongs to.
    """
    published = record.scenario.published or {}  # the catalogue's free-form block of the article's figures
    if published.get("metric", "requests_per_second") != "requests_per_second":
        return []
    points = []
    for level in plotted:
        figures = published.get(f"figures_{level:g}", published.get("figures", {}) if len(plotted) == 1 else {})
        value = next((figures[attempt] for attempt in design.reproduces if attempt in figures), None)
        if value is not None:
            points.append((level, float(value)))
    return points


def _line_plot(record: ScenarioRecord, pick: Callable[[Run], float | None], ylabel: str, title: str, log_y: bool | None = None,
               with_article: bool = False) -> str:
    """One line per design against concurrency; `log_y=None` chooses log when the values span decades."""
    figure, axes = plt.subplots(figsize=(7.5, 4.2))
    every_value: list[float] = []
    marked = False
    for design in record.designs:
        levels, values = _series(design, pick)
        if levels:
            axes.plot(levels, values, markersize=4, **design_style(design.name))
            every_value += values
        for level, value in (article_points(record, design, levels) if with_article else []):
            axes.scatter([level], [value], s=60, marker=design_marker(design.name), facecolors="none",
                         edgecolors=design_colour(design.name), linewidths=1.5, zorder=3)
            every_value.append(value)
            marked = True
    if marked:  # one legend entry for every hollow marker
        axes.scatter([], [], s=60, marker="o", facecolors="none", edgecolors="#404040", label=ARTICLE_LABEL)
    axes.set_xscale("log")
    if log_y is None:
        log_y = spans_decades(every_value)
    if log_y:
        axes.set_yscale("log")
        axes.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:,g}"))
    axes.set_xlabel("concurrent clients (log scale)")
    axes.set_ylabel(ylabel + (" (log scale)" if log_y else ""))
    axes.set_title(title, loc="left")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _to_svg(figure)


def throughput_plot(record: ScenarioRecord) -> str:
    return _line_plot(record, lambda run: run.requests_per_second, "requests per second (median)",
                      f"{record.id}: throughput against concurrency", with_article=True)


def latency_plot(record: ScenarioRecord) -> str:
    return _line_plot(record, lambda run: run.latency_ms.p99 if run.latency_ms else None, "p99 latency, ms",
                      f"{record.id}: 99th-percentile latency against concurrency", log_y=True)


def memory_plot(record: ScenarioRecord) -> str:
    return _line_plot(record, lambda run: run.server_resources.peak_rss_mib if run.server_resources else None,
                      "peak memory of the server's processes, MiB",
                      f"{record.id}: memory against open connections")


def open_loop_latency_figure(record: ScenarioRecord) -> Any:
    """p50 and p99 latency (from the scheduled start) against offered rate, one line per design."""
    figure, panels = plt.subplots(1, 2, figsize=(9, 4.2), sharey=True)
    rates = sorted(record.settings.rate)
    for panel, statistic in zip(panels, ("p50", "p99")):
        for design in record.designs:
            levels, values = _series(design, lambda run, statistic=statistic: (
                getattr(run.latency_ms, statistic) if run.latency_ms else None), "rate")
            if levels:
                panel.plot(levels, values, markersize=4, **design_style(design.name))
        # The floor: no request can be answered faster than the simulated call it waits for.
        panel.axhline(record.settings.delay * 1000, color="#9e9e9e", linestyle=":", linewidth=1,
                      label="simulated call")
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_xticks(rates, [f"{rate:g}" for rate in rates])
        panel.xaxis.set_minor_locator(ticker.NullLocator())  # only the offered rates are ticked
        panel.yaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:,g}"))
        panel.set_xlabel("offered rate, requests/s (log scale)")
        panel.set_title(f"{statistic} latency", loc="left")
        panel.grid(True, which="major", alpha=0.3)
    panels[0].set_ylabel("latency from the scheduled start, ms (log scale)")
    figure.suptitle(f"{record.id}: latency against offered rate", x=0.02, ha="left")
    panels[1].legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def open_loop_latency_plot(record: ScenarioRecord) -> str:
    return _to_svg(open_loop_latency_figure(record))


FAILED_COLOUR = "#212121"  # a failed request, on every timeline: no design's colour is near black


def timeline_plot(design: Outcome, title: str) -> str | None:
    """Each request of the first repetition as a bar from its start to its end, in the design's colour.

    The timeline's entries are the load client's free-form moments (scripts/http_load.py --timeline): dicts."""
    timeline = next((run.get("timeline") for run in design.runs if run.get("timeline")), None)
    if not timeline:
        return None
    figure, axes = plt.subplots(figsize=(7.5, 0.12 * len(timeline) + 1.2))
    run_end = max((request.get("end") or 0.0) for request in timeline)
    colour = design_colour(design.name)
    for row, request in enumerate(timeline):
        intended, start, end = request.get("intended_start"), request.get("start"), request.get("end")
        if intended is not None and start is not None and start > intended:
            # Open loop: the time a request waited for its turn, pale, before its own bar.
            axes.barh(row, (start - intended) * 1000, left=intended * 1000, height=0.8, color=colour, alpha=0.3)
        if start is None:
            continue  # never sent
        failed = request.get("status") != 200 or end is None
        axes.barh(row, ((end if end is not None else run_end) - start) * 1000, left=start * 1000, height=0.8,
                  color=FAILED_COLOUR if failed else colour)
    axes.invert_yaxis()
    axes.set_xlabel("time since the first request, ms")
    axes.set_ylabel("request (in order sent)")
    axes.set_title(title, loc="left")
    axes.grid(True, axis="x", alpha=0.3)
    return _to_svg(figure)


def scenario_plots(record: ScenarioRecord) -> dict[str, str]:
    """File name -> SVG for every plot a record supports."""
    plots: dict[str, str] = {}
    scenario_id = record.id
    if len(record.settings.concurrency) > 1:
        plots[f"{scenario_id}-throughput.svg"] = throughput_plot(record)
        plots[f"{scenario_id}-latency.svg"] = latency_plot(record)
        plots[f"{scenario_id}-memory.svg"] = memory_plot(record)
    if is_rate_sweep(record):
        plots[f"{scenario_id}-open-loop-latency.svg"] = open_loop_latency_plot(record)
    for design in record.designs:
        svg = timeline_plot(design, f"{design.name}: {record.settings.concurrency[0]} clients, "
                                    f"{record.settings.delay:g} s call")
        if svg is not None:
            plots[f"{scenario_id}-timeline-{design.name}.svg"] = svg
    return plots
