"""Render the which-Python comparison from the python-<version>-<workload> records (catalogue 13-python-versions).

One table per workload: a row per interpreter and design, its median requests/s with the
median's interval and the flags every table carries (cells.rate_flags), and its ratio to the
oldest; and one plot with a panel per design. The interpreter's exact release is the one its
record kept (`interpreter`, read from the interpreter itself); a record made before the harness
kept it says only the version it asked for. Reads records only; the runner measured them
(suites/interleave.py, round robin).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.model import limits
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.stats import interval_name
from harness.render.cells import cells_by_level, format_rate, rate_flags, summarise_cell
from harness.render.presentation import design_colour, design_link

RECORD_ID = re.compile(r"python-(\d+\.\d+)-(hello|cpu)")
WORKLOADS = {"hello": "hello world, 50 connections", "cpu": "CPU-bound, 75,000 iterations per request, 10 connections"}


def by_workload(records: dict[str, ScenarioRecord]) -> dict[str, dict[str, ScenarioRecord]]:
    """{workload: {version: record}} for every python-<version>-<workload> record, versions in order."""
    found: dict[str, dict[str, ScenarioRecord]] = {}
    for scenario_id, record in records.items():
        match = RECORD_ID.fullmatch(scenario_id)
        if match:
            found.setdefault(match[2], {})[match[1]] = record
    return {workload: dict(sorted(versions.items(), key=lambda item: tuple(map(int, item[0].split(".")))))
            for workload, versions in found.items()}


def release(version: str, record: ScenarioRecord) -> str:
    """The exact CPython release a record's designs ran on ("3.12.1"), or the version it asked for."""
    return (record.interpreter.version if record.interpreter else None) or version


def cells(versions: dict[str, ScenarioRecord]) -> dict[str, dict[str, tuple[dict[str, Any], float | None]]]:
    """{design: {version: (cell, the tool's ceiling)}}: one level per scenario."""
    table: dict[str, dict[str, tuple[dict[str, Any], float | None]]] = {}
    for version, record in versions.items():
        ceiling = limits.ceilings(record)
        for design in record.designs:
            for level, runs in cells_by_level(design.runs).items():
                table.setdefault(design.name, {})[version] = (summarise_cell(runs), ceiling.get(level))
    return table


def rates(versions: dict[str, ScenarioRecord]) -> dict[str, dict[str, float]]:
    """{design: {version: median req/s}} (one level per scenario)."""
    return {design: {version: cell["rate"]["median"] for version, (cell, _) in per_version.items()}
            for design, per_version in cells(versions).items()}


def how_measured(versions: dict[str, ScenarioRecord]) -> str:
    """Interleaved round robin, or one after another (a record made before suites/interleave.py)."""
    first = next(iter(versions.values()))
    if first.interleaved_with:
        return ("measured round robin (every version once, then again: a drift of the machine touches them "
                "alike)")
    return "measured one version after another"


def versions_table(workload: str, versions: dict[str, ScenarioRecord]) -> str:
    names = list(versions)
    oldest = release(names[0], versions[names[0]])
    first = next(iter(versions.values()))
    settings, environment = first.settings, first.environment
    lines = [f"| CPython | design | requests/s, median ({interval_name(settings.repeat)}) | / {oldest} |",
             "|---|---|--:|--:|"]
    for design, per_version in cells(versions).items():
        base = per_version.get(names[0])
        for version in names:
            if version not in per_version:
                lines.append(f"| {release(version, versions[version])} | {design_link(design)} | not measured | – |")
                continue
            cell, ceiling = per_version[version]
            rate = cell["rate"]
            label = (f"**{format_rate(rate['median'])}** ({format_rate(rate['interval_low'])}–"
                     f"{format_rate(rate['interval_high'])}){rate_flags(cell, ceiling, record=versions[version])}")
            ratio = f"{rate['median'] / base[0]['rate']['median']:.2f}" if base else "–"
            lines.append(f"| {release(version, versions[version])} | {design_link(design)} | {label} | {ratio} |")
    window = settings.time_limit
    lines += ["", f"*{WORKLOADS[workload]}; {settings.repeat} runs of {window:g} s per cell, {how_measured(versions)}; "
              f"records `results/python-<version>-{workload}.json`, commit `{environment.commit[:10]}`"
              f"{' (with uncommitted changes)' if environment.dirty else ''}, {first.started_utc} to "
              f"{first.finished_utc}; {environment.cpu_model} (server on CPU "
              f"{environment.pinning.server_cpu}, wrk on CPU {environment.pinning.load_tool_cpu}).*"]
    return "\n".join(lines) + "\n"


def versions_plot(by: dict[str, dict[str, ScenarioRecord]]) -> str:
    from harness.render import plots  # matplotlib is slow to import: only rendering needs it

    plt = plots.plt
    workloads = [workload for workload in WORKLOADS if workload in by]
    designs = sorted({name for workload in workloads for name in rates(by[workload])})
    figure, axes_grid = plt.subplots(len(workloads), len(designs), figsize=(2.0 * len(designs) + 1, 2.4 * len(workloads)),
                                     squeeze=False)
    for row, workload in enumerate(workloads):
        table = cells(by[workload])
        for column, design in enumerate(designs):
            axes = axes_grid[row][column]
            per_version = {release(version, by[workload][version]): cell["rate"]
                           for version, (cell, _) in table.get(design, {}).items()}
            medians = [rate["median"] for rate in per_version.values()]
            axes.bar(list(per_version), medians, color=design_colour(design),  # its colour everywhere
                     yerr=[[rate["median"] - rate["interval_low"] for rate in per_version.values()],
                           [rate["interval_high"] - rate["median"] for rate in per_version.values()]],
                     capsize=3, ecolor="black")
            if not per_version:  # say so, rather than an empty frame with made-up ticks
                axes.text(0.5, 0.5, "not measured", ha="center", va="center", fontsize=8, transform=axes.transAxes)
                axes.set_xticks([])
                axes.set_yticks([])
            axes.set_title(f"{design}\n{workload}", fontsize=8, loc="left")
            axes.tick_params(labelsize=7)
            if column == 0:
                axes.set_ylabel("requests/s (median,\nbars: its interval)", fontsize=8)
    figure.supxlabel("CPython version", fontsize=9)
    figure.tight_layout()
    return plots._to_svg(figure)


def python_versions_files(records: dict[str, ScenarioRecord], generated_dir: Path, plot_dir: Path,
                          header: str) -> dict[Path, str]:
    by = by_workload(records)
    files = {generated_dir / f"python-versions-{workload}.md": header.format(
        source=f"results/python-*-{workload}.json") + versions_table(workload, versions)
        for workload, versions in by.items()}
    if by:
        files[plot_dir / "python-versions.svg"] = versions_plot(by)
    return files
