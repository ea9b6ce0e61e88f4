"""Render the which-Python comparison from the python-<version>-<workload> records (catalogue 13-python-versions).

One table per workload: each design's median requests/s on every interpreter that has a
record, and its ratio to the oldest; and one plot with a panel per design. Reads
records only; the runner measured them (the `python` setting picked the interpreter).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from harness.render.cells import format_rate, rate_medians
from harness.render.presentation import design_colour, design_link

RECORD_ID = re.compile(r"python-(\d+\.\d+)-(hello|cpu)")
WORKLOADS = {"hello": "hello world, 50 connections", "cpu": "CPU-bound, 75,000 iterations per request, 10 connections"}


def by_workload(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{workload: {version: record}} for every python-<version>-<workload> record, versions in order."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario_id, record in records.items():
        match = RECORD_ID.fullmatch(scenario_id)
        if match:
            found.setdefault(match[2], {})[match[1]] = record
    return {workload: dict(sorted(versions.items(), key=lambda item: tuple(map(int, item[0].split(".")))))
            for workload, versions in found.items()}


def rates(versions: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{design: {version: median req/s}} (one level per scenario)."""
    table: dict[str, dict[str, float]] = {}
    for version, record in versions.items():
        for (name, _), rate in rate_medians(record).items():
            table.setdefault(name, {})[version] = rate
    return table


def versions_table(workload: str, versions: dict[str, dict[str, Any]]) -> str:
    names = list(versions)
    lines = ["| design | " + " | ".join(f"CPython {version}" for version in names)
             + f" | {names[-1]} / {names[0]} |", "|---|" + "--:|" * (len(names) + 1)]
    for design, per_version in rates(versions).items():
        cells = [format_rate(per_version[version]) if version in per_version else "–" for version in names]
        first, last = per_version.get(names[0]), per_version.get(names[-1])
        ratio = f"**{last / first:.2f}**" if first and last else "–"
        lines.append(f"| {design_link(design)} | " + " | ".join(cells) + f" | {ratio} |")
    environment = next(iter(versions.values()))["environment"]
    lines += ["", f"*{WORKLOADS[workload]}; median requests/s of {next(iter(versions.values()))['settings']['repeat']}"
              f" runs per cell; records `results/python-<version>-{workload}.json`, measured one after another on "
              f"{environment['cpu_model']} (server on CPU {environment['pinning']['server_cpu']}, wrk on CPU "
              f"{environment['pinning']['load_tool_cpu']}).*"]
    return "\n".join(lines) + "\n"


def versions_plot(by: dict[str, dict[str, dict[str, Any]]]) -> str:
    from harness.render import plots  # matplotlib is slow to import: only rendering needs it

    plt = plots.plt
    workloads = [workload for workload in WORKLOADS if workload in by]
    designs = sorted({name for workload in workloads for name in rates(by[workload])})
    figure, axes_grid = plt.subplots(len(workloads), len(designs), figsize=(2.0 * len(designs) + 1, 2.4 * len(workloads)),
                                     squeeze=False)
    for row, workload in enumerate(workloads):
        table = rates(by[workload])
        for column, design in enumerate(designs):
            axes = axes_grid[row][column]
            per_version = table.get(design, {})
            axes.bar(list(per_version), list(per_version.values()), color=design_colour(design))  # its colour everywhere
            if not per_version:  # say so, rather than an empty frame with made-up ticks
                axes.text(0.5, 0.5, "not measured", ha="center", va="center", fontsize=8, transform=axes.transAxes)
                axes.set_xticks([])
                axes.set_yticks([])
            axes.set_title(f"{design}\n{workload}", fontsize=8, loc="left")
            axes.tick_params(labelsize=7)
            if column == 0:
                axes.set_ylabel("requests/s (median)", fontsize=8)
    figure.supxlabel("CPython version", fontsize=9)
    figure.tight_layout()
    return plots._to_svg(figure)


def python_versions_files(records: dict[str, dict[str, Any]], generated_dir: Path, plot_dir: Path,
                          header: str) -> dict[Path, str]:
    by = by_workload(records)
    files = {generated_dir / f"python-versions-{workload}.md": header.format(
        source=f"results/python-*-{workload}.json") + versions_table(workload, versions)
        for workload, versions in by.items()}
    if by:
        files[plot_dir / "python-versions.svg"] = versions_plot(by)
    return files
