"""Render results/ into the Markdown tables the pages include.

Rendering never measures: it reads records and writes docs/_generated/. Each
scenario gives one table with every design (docs/_generated/<scenario>.md), and
one file per design with its rows from every scenario it took part in, under a
line naming the scenario (docs/_generated/designs/<design>.md), which its page
includes. Two more files compare across records: memory-per-connection.md (render/memory.py)
and repeatability.md, results/ against a second run in results/rerun/ (render/repeatability.py).
figures.md holds the single numbers the prose quotes (render/figures.py). RENDERERS below is the
registry: every renderer, one signature (RenderInput -> {path: content}), listed once; together
their files are the list of generated files.
`check` recomputes everything in memory and lists the files that differ, are
missing, or should no longer exist: a page can never show a stale number.
One file lies outside docs/_generated and comes from no record: servers/README.md, the index of
servers/ in the site's order (render/servers_index.py). extra_files adds it when the real site is
rendered, not when a test renders into a directory of its own.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.model import limits
from harness.model.catalogue import load_catalogue
from harness.model.disclosed_settings import load_real_servers
from harness.model.how_fast_steps import FAST_AND_CORRECT
from harness.model.paths import REPO_ROOT
from harness.model.records import RESULTS_DIR, load_scenario_records, rerun_dir
from harness.model.records.scenario_record import Outcome, ScenarioRecord
from harness.model.settings import DURATION_TOOLS, LINE_ECHO_TOOLS, ScenarioSettings
from harness.model.stats import interval_name, spread
from harness.render import (
    free_threaded,
    idle_tables,
    instructions_tables,
    keep_alive_verdict,
    multi_process_tables,
    python_versions,
    streaming_tables,
)
from harness.render.cells import (
    cells_by_level,
    format_level,
    is_rate_sweep,
    level_header,
    level_key,
    levels,
    rate_label,
    rate_medians,
    summarise_cell,
)
from harness.render.conformance_grid import conformance_grid_files
from harness.render.conformance_tables import conformance_files
from harness.render.database_tables import database_files
from harness.render.deployment_tables import deployment_files
from harness.render.disclosed_settings_table import disclosed_settings_page
from harness.render.figures import SITE_FIGURES, Figure, figures_page
from harness.render.how_fast_tables import how_fast_files, steps_files
from harness.render.memory import memory_page
from harness.render.predict import predict_files
from harness.render.presentation import WIDE_TABLE_CLASS, design_link, wide_table
from harness.render.repeatability import cells_csv, leaders, repeatability_page, scenario_agreement
from harness.render.servers_index import servers_index
from harness.render.recipe_tables import recipe_files
from harness.render.sizing_tables import is_sizing, sizing_files
from harness.render.survival import survival_files
from harness.render.survival_grid import survival_grid_files
from harness.render.timeline_player import SCENARIO_ID as TIMELINE_SCENARIO
from harness.render.timeline_player import timeline_player_files
from harness.render.generated_header import HEADER

GENERATED_DIR = REPO_ROOT / "docs" / "_generated"
SERVERS_INDEX = REPO_ROOT / "servers" / "README.md"
PLOTS_DIR = REPO_ROOT / "docs" / "plots"  # served by the site, so not under the excluded _generated/
PEAK_AGREEMENT = 0.05  # issue 10: two consecutive runs of `peak` should agree within 5% for every server


def format_ms(value: float | None) -> str:
    return "–" if value is None else (f"{value:,.0f}" if value >= 1000 else f"{value:.1f}")


METRIC_LABELS = {"requests_per_second": "req/s", "duration_s": "total s"}


def published_figure(record: ScenarioRecord, design: Outcome, level: float, table: str = "figures") -> str:
    """The article's figure for this design (by its `reproduces` ids), as the article printed it."""
    published = record.scenario.published or {}  # the catalogue's free-form block of the article's figures
    figures = published.get(f"{table}_{level}", published.get(table, {}))
    for attempt in design.reproduces:
        if attempt in figures:
            return ("≈" if published.get("approximate") else "") + f"{figures[attempt]:g}"
    return "–"


def completed_label(cell: dict[str, Any], time_limit: float | None, duration_only: bool) -> str:
    low, high = cell["complete"][0], cell["complete"][-1]
    done = f"{low:,}" if low == high else f"{low:,}–{high:,}"
    if duration_only:
        return f"{done} in {time_limit:g} s"
    if high < cell["requested"] and time_limit:
        return f"{done} of {cell['requested']:,} ({time_limit:g} s limit)"
    return f"{done} of {cell['requested']:,}"


@dataclass
class Row:
    """What a column needs to render one table cell."""

    record: ScenarioRecord
    design: Outcome
    level: float  # the concurrency, or the offered rate in an open-loop rate sweep
    cell: dict[str, Any]
    ceiling: float | None
    reference: float | None  # the median of the design the scenario compares against (`relative_to`)


def _percentiles(row: Row) -> str:
    return " / ".join(format_ms(row.cell["latency"].get(key)) for key in ("p50", "p90", "p99", "max"))


def _p50_p99(row: Row) -> str:
    return " / ".join(format_ms(row.cell["latency"].get(key)) for key in ("p50", "p99"))


def _failed(row: Row) -> str:
    cell = row.cell
    failed = "?" if cell["failed"] is None else f"{cell['failed']:,}"
    return failed + (f" (+{cell['non_2xx']:,} non-2xx)" if cell["non_2xx"] else "")


def _duration(row: Row) -> str:
    durations = spread([run.duration_s for run in row.cell["runs"]])
    return f"**{durations['median']:.2f}** ({durations['min']:.2f}–{durations['max']:.2f})"


def _duration_median(row: Row) -> str:
    return f"**{spread([run.duration_s for run in row.cell['runs']])['median']:.2f}**"


def _relative(row: Row) -> str:
    if not row.reference:
        return "–"
    return f"{row.cell['rate']['median'] / row.reference:.0%}"


def _mean_mode(row: Row) -> str:
    latency = row.cell["latency"]
    return f"{format_ms(latency.get('mean'))} / {format_ms(latency.get('mode'))}"


def _completed(row: Row) -> str:
    # Each run records the limit it ran under: a blocking design may have had a shorter one.
    time_limits = {run.time_limit for run in row.cell["runs"]} - {None}
    limit = max(time_limits) if time_limits else row.record.settings.time_limit
    return completed_label(row.cell, limit, row.record.scenario.tool in DURATION_TOOLS)


def _cpu_per_request(row: Row) -> str:
    """The server's CPU time per answered request (its whole process group, sampled around the run)."""
    costs = [run.server_resources.cpu_seconds / run.complete * 1e6 for run in row.cell["runs"]
             if run.server_resources and run.server_resources.cpu_seconds is not None and run.complete]
    return f"{statistics.median(costs):,.0f}" if costs else "–"


def columns(record: ScenarioRecord, every_column: bool = False) -> list[tuple[str, Any]]:
    """(header, cell function) for this record's table: the shared ones, plus what its scenario asks for.

    By default the table a reader sees first, narrow enough for the page at 1280 px: the median,
    the figures the scenario is about, the article's figure, p50 / p99 and failures. `every_column`:
    the full table behind the "details" toggle under it (the median's interval, p90 and max, mean / mode,
    completed).
    """
    settings, published = record.settings, record.scenario.published or {}
    metric = published.get("metric", "requests_per_second")
    chosen: list[tuple[str, Any]] = []
    if len(levels(record)) > 1:
        chosen.append((level_header(record), lambda row: format_level(row.record, row.level)))
    chosen.append((f"Requests/s, median ({interval_name(settings.repeat)})" if every_column else "Req/s",
                   lambda row: rate_label(row.cell, row.ceiling, every_column, row.record)))
    if metric == "duration_s":
        chosen.append(("Total time, s, median (min–max)", _duration) if every_column else ("Total s", _duration_median))
    if settings.relative_to:
        chosen.append((f"% of {settings.relative_to}", _relative))
    if settings.cpu_per_request:
        chosen.append(("Server CPU µs per request, median" if every_column else "CPU µs / request", _cpu_per_request))
    if published:
        chosen.append((f"Article, {METRIC_LABELS.get(metric, metric)}",
                       lambda row: published_figure(row.record, row.design, row.level)))
    batch = settings.pipeline_depth or 1  # a pipelined run is timed per batch (clients/tools/wrk.py)
    per = f", per batch of {batch}" if batch > 1 else ""
    if every_column:
        chosen.append((f"Latency p50 / p90 / p99 / max (ms{per})", _percentiles))
        if any(run.latency_ms and run.latency_ms.mode is not None for design in record.designs for run in design.runs):
            chosen.append(("Mean / mode (ms)", _mean_mode))
    else:
        chosen.append((f"p50 / p99 ms{', batch' if batch > 1 else ''}", _p50_p99))
    chosen.append(("Failed", _failed))
    if published.get("failed"):
        chosen.append(("Article failed", lambda row: published_figure(row.record, row.design, row.level, "failed")))
    if every_column:
        chosen.append(("Completed", _completed))
    return chosen


def reference_medians(record: ScenarioRecord) -> dict[float, float]:
    """Median requests/s of the `relative_to` design, by level."""
    name = record.settings.relative_to
    return {level: median for (design, level), median in rate_medians(record).items() if design == name}


def design_label(design: Outcome, is_ceiling: bool = False) -> str:
    """The first column: the design's short name linked to its page (long title as tooltip), or the tool ceiling."""
    if is_ceiling:
        return f"{design.title} (`{design.name}`)"
    return design_link(design.name, design.title)


def design_rows(record: ScenarioRecord, design: Outcome, with_name: bool, every_column: bool = False,
                is_ceiling: bool = False) -> list[str]:
    """Table rows for one design (or, `is_ceiling`, the tool's ceiling): one per level, or one saying why it has none.

    `every_column`: the full table (model, min–max, p90 and max, completed, ...) behind the toggle.
    """
    chosen = columns(record, every_column)
    prefix = ""
    if with_name:
        prefix = f"| {design_label(design, is_ceiling)} " + (f"| {design.model} " if every_column else "")
    cells = cells_by_level(design.runs, level_key(record))
    tool_ceilings = {} if is_ceiling else limits.ceilings(record)
    references = reference_medians(record)
    if design.status != "ok" and not cells:
        reason = f"not measured: {_escape('; '.join(design.problems) or 'failed')}"
        values = []
        for header, render_cell in chosen:
            if header.startswith("Article"):
                values.append(render_cell(Row(record, design, levels(record)[0], {}, None, None)))
            else:
                values.append("–")
        values[1 if chosen[0][0] == level_header(record) else 0] = reason
        return [prefix + "| " + " | ".join(values) + " |"]
    rows = []
    for level, runs in sorted(cells.items()):
        row = Row(record, design, level, summarise_cell(runs), tool_ceilings.get(level), references.get(level))
        values = [render_cell(row) for _, render_cell in chosen]
        if design.status != "ok":
            values[-1] += f" (then failed: {_escape('; '.join(design.problems))})"
        rows.append(prefix + "| " + " | ".join(values) + " |")
    return rows


def _show(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cpu_list(cpus: str) -> str:
    """'0' -> 'CPU 0'; '0,1' -> 'CPUs 0,1 (every CPU, shared with the load tool)'."""
    return f"CPUs {cpus} (every CPU, shared with the load tool)" if "," in cpus else f"CPU {cpus}"


def work_label(settings: ScenarioSettings) -> str:
    """', 75,000 iterations of pure-Python work per request' when the scenario sets `work`."""
    return f", {settings.work:,} iterations of pure-Python work per request" if settings.work else ""


# Commit 902d5b4 made nginx and the ASGI/WSGI apps skip the simulated call at 0 s, as the Python designs
# always did; a delay-0 record started before it compared unequal work, and its caption says so.
EQUAL_WORK_SINCE = "2026-11-25T17:57:26Z"


def work_per_request(record: ScenarioRecord) -> str:
    """The work every server in the table does for each request: the same for all (tests/servers/test_equal_work.py)."""
    settings = record.settings
    if record.scenario.tool in LINE_ECHO_TOOLS:
        return "Work per request, the same for every server: read a line, echo it back."
    if settings.delay:
        call = (f"wait {settings.delay:g} s for the simulated call (a timer, a sleep or a blocked worker, as the "
                "design's model does it)")
    elif record.started_utc >= EQUAL_WORK_SINCE:
        call = ("no simulated call (no server sets a timer or sleeps: nginx and the apps skip it at 0 s, as the "
                "Python designs do)")
    else:
        call = ("no simulated call for the Python designs; ⚠ in this record nginx still set a 0 s timer and made an "
                "internal redirect per request, and the ASGI and WSGI apps slept 0 s, more work than the Python "
                "designs did (measured before commit 902d5b4 made them skip it)")
    work = f", compute {settings.work:,} iterations of pure Python" if settings.work else ""
    connection = "keep the connection for the next request" if settings.keep_alive else "close the connection"
    return (f"Work per request, the same for every server: read and parse the request head, {call}{work}, answer "
            f"with the same 133-byte page, {connection}.")


def longer_levels_label(settings: ScenarioSettings) -> str:
    """' (2 s at 500 and 1,000)' for a scenario whose `time_limit_at` lengthens some levels."""
    by_seconds: dict[float, list[str]] = {}
    for level, seconds in (settings.time_limit_at or {}).items():
        by_seconds.setdefault(seconds, []).append(f"{int(level):,}")
    parts = [f"{seconds:g} s at {' and '.join(levels)}" for seconds, levels in by_seconds.items()]
    return f" ({'; '.join(parts)})" if parts else ""


def designs_python(record: ScenarioRecord) -> str:
    """The CPython release the designs ran on, as the interpreter reported it ("3.12.1"), or the version asked for."""
    return (record.interpreter.version if record.interpreter else None) or record.settings.python or ""


def caption(record: ScenarioRecord) -> str:
    """How the numbers were made, in one paragraph under each table."""
    settings, environment = record.settings, record.environment
    pinning = environment.pinning
    pinned = (f"server pinned to {cpu_list(pinning.server_cpu)}, load tool to CPU {pinning.load_tool_cpu} (taskset)"
              if pinning.server_cpu is not None else "no CPU pinning")
    tools = ", ".join(environment.tools.values())
    longer = longer_levels_label(settings)
    limit = f", stopping after {settings.time_limit:g} s{longer}" if settings.time_limit else ""
    amount = f"{settings.requests:,} requests"
    if record.scenario.tool in DURATION_TOOLS:  # it runs for a duration; it has no request count
        amount, limit = f"{settings.time_limit:g} s of requests{longer}", ""
    load = "at concurrency " + ", ".join(str(c) for c in settings.concurrency)
    if settings.warm_up:
        load += f" (after {settings.warm_up:g} s of the same load, not counted)"
    if is_rate_sweep(record):
        scheduled = settings.schedule_seconds
        amount = (f"{scheduled:g} s of scheduled requests" if scheduled else amount) + " per rate"
        load = (f"in open loop at {', '.join(f'{rate:g}' for rate in settings.rate)} requests/s offered, "
                f"at most {settings.concurrency[0]:,} in flight")
    batch = settings.pipeline_depth or 1
    if batch > 1:
        load += (f", {batch} requests written at once on each connection; latency per batch, from its write to its "
                 "last answer (wrk's correction for coordinated omission, made per request, undone)")
    published = record.scenario.published or {}
    source = (f" Article figures: *{published['source']}*, measured on {published['machine']}."
              if published else "")
    return (f"{work_per_request(record)} "
            f"Median of {settings.repeat} repetition(s) per design ({interval_name(settings.repeat)} in brackets "
            f"under \"Every column\"); "
            f"{record.scenario.tool} with {amount} {load}{limit}, "
            f"{settings.delay:g} s simulated call{work_label(settings)}, keep-alive {'on' if settings.keep_alive else 'off'}; "
            f"{pinned}. Machine: {environment.cpu_model}, {environment.cpu_count} CPUs, "
            f"Linux {environment.kernel}, Python {environment.python}"
            f"{' (harness; the designs ran on CPython ' + designs_python(record) + ')' if settings.python else ''}, {tools}; "
            f"commit `{environment.commit[:10]}`, {record.started_utc} to {record.finished_utc} "
            f"({record.mode} run). Raw record: `results/{record.id}.json`.{source}")


def short_caption(record: ScenarioRecord) -> str:
    """A design page's caption: the work and its flags in full, the set-up in a line. The scenario's own table says
    the rest once, with every column: twenty full captions and full tables made a design page (asyncio-streams)
    pass the 5,000-word reading budget (issue 35)."""
    settings, environment = record.settings, record.environment
    return (f"{work_per_request(record)} Median of {settings.repeat} repetition(s), {record.scenario.tool}, keep-alive "
            f"{'on' if settings.keep_alive else 'off'}; commit `{environment.commit[:10]}`, {record.started_utc} "
            f"({record.mode} run). Every column (the median's {interval_name(settings.repeat)}, p90 and max latency, "
            f"completed requests) and the full set-up (pinning, machine, tools) are under the scenario's own table "
            f"and in `results/{record.id}.json`.")


def table_head(record: ScenarioRecord, with_name: bool, every_column: bool = False) -> str:
    names = (["Design", "Model"] if every_column else ["Design"]) if with_name else []
    headers = names + [header for header, _ in columns(record, every_column)]
    return "| " + " | ".join(headers) + " |\n|" + "---|" * len(headers) + "\n"


# The full table is wider than the page: it sits in a collapsed block whose `wide-table` class lets it
# scroll inside itself with the first column pinned (docs/assets/site.css; tests/site/test_browser.py
# allows exactly these tables to be wider than the content column).
def every_column_toggle(record: ScenarioRecord) -> str:
    """The toggle that opens the full table, naming what it adds."""
    return (f'??? info {WIDE_TABLE_CLASS} "Every column: {interval_name(record.settings.repeat)}, p90 and max '
            'latency, completed requests, model"\n\n')


def _indent(text: str) -> str:
    return "".join(f"    {line}" if line.strip() else line for line in text.splitlines(keepends=True))


def _tables(record: ScenarioRecord, designs: list[Outcome], with_name: bool, ceiling: Outcome | None = None,
            brief: bool = False) -> str:
    """The narrow table, then the full one behind a toggle (the tool's `ceiling` last, unbolded), then the caption."""
    def rows(every_column: bool) -> str:
        lines = []
        for design in designs:
            lines += design_rows(record, design, with_name, every_column)
        if ceiling is not None:
            lines += [line.replace("**", "") for line in design_rows(record, ceiling, with_name, every_column, True)]
        return "\n".join(lines) + "\n"

    summary = table_head(record, with_name) + rows(every_column=False)
    full = table_head(record, with_name, every_column=True) + rows(every_column=True)
    if brief:  # a design page: the narrow table and a short caption; every column is in the scenario's own table
        return summary + "\n" + short_caption(record) + "\n"
    return summary + "\n" + every_column_toggle(record) + _indent(full) + "\n" + caption(record) + "\n"


def scenario_table(record: ScenarioRecord) -> str:
    ceiling = record.ceiling and dataclasses.replace(
        record.ceiling, title=f"Tool ceiling: {record.ceiling.title}, no simulated call", reproduces=[])
    return _tables(record, record.designs, with_name=True, ceiling=ceiling)


def design_table(record: ScenarioRecord, design: Outcome) -> str:
    return _tables(record, [design], with_name=False, brief=True)


def format_duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds:02d} s" if minutes else f"{seconds} s"


def environment_table(records: dict[str, ScenarioRecord]) -> str:
    """One row per results file: where and how its numbers were made, and how long that took."""
    lines = ["| Scenario | Run | Machine | Pinning | Kernel / Python | Tools | Commit | Measured (UTC) | Took "
             "| Under load |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for scenario_id, record in records.items():
        environment = record.environment
        pinning = environment.pinning
        pinned = (f"server {cpu_list(pinning.server_cpu)}, tool CPU {pinning.load_tool_cpu}"
                  if pinning.server_cpu is not None else "none")
        dirty = " (uncommitted changes)" if environment.dirty else ""
        lines.append(
            f"| `{scenario_id}` | {record.mode}, {record.settings.repeat}× | {environment.cpu_model}, "
            f"{environment.cpu_count} CPUs, {environment.memory_gib} GiB, {environment.runner} | {pinned} | "
            f"{environment.kernel} / {environment.python} | {', '.join(environment.tools.values())} | "
            f"`{environment.commit[:10]}`{dirty} | {record.started_utc} – {record.finished_utc[11:]} | "
            f"{format_duration(record.wall_seconds())} | {format_duration(record.load_seconds())} |")
    total = sum(record.wall_seconds() for record in records.values())
    under_load = sum(record.load_seconds() for record in records.values())
    lines.append("")
    lines.append(f"Measuring every scenario above took {format_duration(total)} in all (the sum of their run times). "
                 f"A load tool was running for {format_duration(under_load)} of it (the sum of every cell's measured "
                 "duration); the rest went to starting, verifying, priming and stopping servers.")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class RenderInput:
    """What every renderer is given: the records read once, and where its files go."""

    results_dir: Path
    generated_dir: Path
    scenario_records: dict[str, ScenarioRecord]  # scenario id -> record (results/<scenario>.json), typed
    rerun_scenario_records: dict[str, ScenarioRecord]  # the second run, results/rerun/
    design_names: list[str]
    scenario_ids: list[str]
    figures: list[Figure]

    @property
    def plots_dir(self) -> Path:
        return plots_dir(self.generated_dir)


Renderer = Callable[[RenderInput], dict[Path, str]]


def environment_files(inputs: RenderInput) -> dict[Path, str]:
    """environment.md: ten columns of reference data, one row per record (wide on purpose, scenario pinned)."""
    if not inputs.scenario_records:
        return {}
    return {inputs.generated_dir / "environment.md":
            HEADER.format(source="every file in results/") + wide_table(environment_table(inputs.scenario_records))}


def memory_files(inputs: RenderInput) -> dict[Path, str]:
    """memory-per-connection.md, always there ("not measured yet" when no record allows it): pages include it."""
    return {inputs.generated_dir / "memory-per-connection.md":
            HEADER.format(source="every record in results/ with two or more concurrency levels")
            + memory_page(inputs.scenario_records)}


def repeatability_files(inputs: RenderInput) -> dict[Path, str]:
    """repeatability.md (every scenario), its cells as the download repeatability-cells.csv, and peak-repeatability.md
    (does the peak rate repeat?), always there."""
    return {
        inputs.generated_dir / "repeatability.md": HEADER.format(source="results/ (run A) and results/rerun/ (run B)")
        + repeatability_page(inputs.scenario_records, inputs.rerun_scenario_records),
        inputs.plots_dir / "repeatability-cells.csv": cells_csv(inputs.scenario_records, inputs.rerun_scenario_records),
        inputs.generated_dir / "peak-repeatability.md": HEADER.format(
            source="results/peak.json and results/rerun/peak.json")
        + scenario_agreement(inputs.scenario_records, inputs.rerun_scenario_records, "peak", PEAK_AGREEMENT)
        + leaders(inputs.scenario_records, inputs.rerun_scenario_records, "peak"),
    }


def keep_alive_verdict_files(inputs: RenderInput) -> dict[Path, str]:
    """The keep-alive hypothesis (docs/keep-alive.md), judged from its two records; always there."""
    return {inputs.generated_dir / "keep-alive-verdict.md":
            HEADER.format(source=f"results/{keep_alive_verdict.ON_SCENARIO}.json and "
                                 f"results/{keep_alive_verdict.OFF_SCENARIO}.json")
            + keep_alive_verdict.verdict_page(inputs.scenario_records)}


def figure_files(inputs: RenderInput) -> dict[Path, str]:
    """figures.md: the single numbers the prose quotes (render/figures.py)."""
    if not inputs.figures:
        return {}
    return {inputs.generated_dir / "figures.md":
            HEADER.format(source="results/ (the figures of scripts/harness/render/figures.py)")
            + figures_page(inputs.scenario_records, inputs.figures, inputs.rerun_scenario_records)}


def survival_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The hostile suite's page (results/hostile.json)."""
    return survival_files(inputs.results_dir, inputs.generated_dir, inputs.plots_dir)


def conformance_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The conformance suite's page (results/conformance.json)."""
    return conformance_files(inputs.results_dir, inputs.generated_dir)


def how_fast_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The how-fast page: its steps record and profile (results/how-fast/, results/profiles/)."""
    return how_fast_files(inputs.results_dir, inputs.generated_dir, inputs.plots_dir)


def fast_and_correct_steps_files(inputs: RenderInput) -> dict[Path, str]:
    """The fast-and-correct page's steps table (results/fast-and-correct/steps.json)."""
    return steps_files(FAST_AND_CORRECT, inputs.results_dir, inputs.generated_dir)


def scenario_files(inputs: RenderInput) -> dict[Path, str]:
    """One table per scenario (a "not measured yet" line before its first record), its plots, and one file
    per design with its rows from every scenario it took part in (its page includes just this)."""
    from harness.render import plots  # matplotlib is slow to import: only rendering needs it

    files: dict[Path, str] = {}
    by_design: dict[str, list[str]] = {name: [] for name in inputs.design_names}
    sized: set[str] = set()  # designs a sizing sweep measured: their tables are on the sizing page
    for scenario_id, record in inputs.scenario_records.items():
        if is_sizing(record):  # a sizing sweep's runs differ by count: its own tables (sizing_page_files)
            sized.update(design.name for design in record.designs)
            continue
        header = HEADER.format(source=f"results/{scenario_id}.json")
        files[inputs.generated_dir / f"{scenario_id}.md"] = header + scenario_table(record)
        for design in record.designs:
            table = design_table(record, design)
            by_design.setdefault(design.name, []).append(
                f"**{record.scenario.title}** (scenario `{scenario_id}`)\n\n{table}")
        for plot_name, svg in plots.scenario_plots(record).items():
            files[inputs.plots_dir / plot_name] = svg
    for scenario_id in inputs.scenario_ids:
        if scenario_id.startswith("sizing-"):
            continue  # sizing_page_files writes their "not measured yet" lines too
        if scenario_id.startswith(free_threaded.SCENARIO_PREFIX):
            continue  # records in results/free-threaded/, tables by pair (free_threaded_files)
        if scenario_id not in inputs.scenario_records:  # a page may include a scenario's table before its first record
            files[inputs.generated_dir / f"{scenario_id}.md"] = HEADER.format(source="the catalogue") + (
                f"*Not measured yet: no `results/{scenario_id}.json`. "
                f"`python scripts/bench.py run --scenario {scenario_id} --quick` measures it on your machine.*\n")
    for name, sections in by_design.items():
        if name in streaming_tables.STREAM_DESIGNS and not sections:
            continue  # a stream design's own file comes from the streaming record (streaming_page_files)
        body = "\n".join(sections) if sections else (
            "*Measured in the sizing sweeps only: their tables, by number of workers, are on the "
            "[sizing page](/sizing.md).*\n" if name in sized else
            "*Not measured yet: no record in `results/` includes this design. "
            "`python scripts/bench.py run --design " + name + " --quick` measures it on your machine.*\n")
        files[inputs.generated_dir / "designs" / f"{name}.md"] = HEADER.format(source="results/") + body
    return files


def multi_process_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The many-cores and zero-downtime pages' tables and plots (results/multi-process/ and the scaling records)."""
    return multi_process_tables.multi_process_files(inputs.generated_dir, inputs.plots_dir, inputs.results_dir,
                                                    inputs.scenario_records)


def python_versions_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The Python versions page's tables and plots."""
    return python_versions.python_versions_files(inputs.scenario_records, inputs.generated_dir, inputs.plots_dir, HEADER)


def database_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The real-database page's tables (issue 21) and the guide's verdict on the simulated call."""
    return database_files(inputs.scenario_records, inputs.generated_dir, HEADER, inputs.rerun_scenario_records)


def idle_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The idle-connections table (results/idle-connections/)."""
    return idle_tables.idle_files(inputs.generated_dir, HEADER, inputs.results_dir)


def instructions_page_files(inputs: RenderInput) -> dict[Path, str]:
    """Instructions per request under callgrind (results/instructions/), beside CPU time under wrk where recorded."""
    return instructions_tables.instructions_files(inputs.results_dir, inputs.generated_dir, inputs.scenario_records,
                                                  HEADER)


def disclosed_settings_files(inputs: RenderInput) -> dict[Path, str]:
    """real-server-settings.md: every setting we give a real server that is not its default, and why."""
    return {inputs.generated_dir / "real-server-settings.md":
            HEADER.format(source="scripts/catalogue/real-servers/settings.toml")
            + disclosed_settings_page(load_real_servers())}


def free_threaded_files(inputs: RenderInput) -> dict[Path, str]:
    """The free-threaded page's answer, tables per build pair and workload, memory and dependencies (always there:
    words where records are missing)."""
    return free_threaded.free_threaded_files(inputs.results_dir, inputs.generated_dir, HEADER)


def streaming_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The streaming page's tables and plot, and the stream designs' own files (results/streaming.json)."""
    return streaming_tables.streaming_files(inputs.results_dir, inputs.generated_dir, inputs.plots_dir, HEADER)


def timeline_player_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The timeline player's data (results/timeline.json): one snippet per design and the home page's pairs."""
    return timeline_player_files(inputs.scenario_records.get(TIMELINE_SCENARIO), inputs.generated_dir, HEADER)


def deployment_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The deployment page: the idle-timeout race, past capacity, vegeta beside our client (results/deployment/)."""
    return deployment_files(inputs.results_dir, inputs.generated_dir, inputs.plots_dir, inputs.scenario_records)


def sizing_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The sizing page: a table and a plot per sizing sweep, and the rules (render/sizing_tables.py)."""
    return sizing_files(inputs.scenario_records, inputs.generated_dir, inputs.plots_dir)


def recipe_page_files(inputs: RenderInput) -> dict[Path, str]:
    """The recipe page: the rules as JSON for its calculator, worked examples, the stack check, the CPU quota."""
    return recipe_files(inputs.results_dir, inputs.generated_dir)


def survival_grid_page_files(inputs: RenderInput) -> dict[Path, str]:
    """survive-grid.md: the hostile matrix as a coloured grid, its legend and a verdict per design."""
    return survival_grid_files(inputs.results_dir, inputs.generated_dir)


def conformance_grid_page_files(inputs: RenderInput) -> dict[Path, str]:
    """conformance-compact.md (the answer), conformance-grid.md (the full grid) and the download conformance-matrix.csv."""
    return conformance_grid_files(inputs.results_dir, inputs.generated_dir, inputs.plots_dir)


def predict_page_files(inputs: RenderInput) -> dict[Path, str]:
    """predict/<design>.md: each design page's question, its measured answer folded beneath it (render/predict.py)."""
    return predict_files(inputs.scenario_records, inputs.generated_dir)


# The registry: every renderer, once. Together their files are every generated file of the site
# (render --check compares exactly these; a file no renderer produces is reported as stale).
RENDERERS: list[Renderer] = [
    environment_files,
    memory_files,
    repeatability_files,
    keep_alive_verdict_files,
    figure_files,
    survival_page_files,
    conformance_page_files,
    how_fast_page_files,
    fast_and_correct_steps_files,
    scenario_files,
    multi_process_page_files,
    python_versions_page_files,
    idle_page_files,
    database_page_files,
    free_threaded_files,
    disclosed_settings_files,
    instructions_page_files,
    predict_page_files,
    survival_grid_page_files,
    conformance_grid_page_files,
    timeline_player_page_files,
    deployment_page_files,
    streaming_page_files,
    sizing_page_files,
    recipe_page_files,
]


def expected_files(results_dir: Path = RESULTS_DIR, generated_dir: Path = GENERATED_DIR,
                   design_names: list[str] | None = None,
                   scenario_ids: list[str] | None = None, figures: list[Figure] | None = None,
                   renderers: list[Renderer] | None = None) -> dict[Path, str]:
    """Every generated file and its content: what every renderer in the registry makes of the records.

    `figures` defaults to the site's quoted figures for results/ itself, and to none for any other
    directory (a test's few records cannot answer every figure the pages quote). Two renderers that
    claim one file are a bug, reported as such.
    """
    catalogue = load_catalogue() if design_names is None or scenario_ids is None else None
    inputs = RenderInput(
        results_dir=results_dir, generated_dir=generated_dir,
        scenario_records=load_scenario_records(results_dir),
        rerun_scenario_records=load_scenario_records(rerun_dir(results_dir)),
        design_names=list(catalogue.designs) if design_names is None else design_names,
        scenario_ids=list(catalogue.scenarios) if scenario_ids is None else scenario_ids,
        figures=(SITE_FIGURES if results_dir == RESULTS_DIR else []) if figures is None else figures)
    files: dict[Path, str] = {}
    for renderer in RENDERERS if renderers is None else renderers:
        made = renderer(inputs)
        claimed_twice = sorted(str(path) for path in made.keys() & files.keys())
        if claimed_twice:
            raise RuntimeError(f"{renderer.__name__} renders files another renderer already made: {claimed_twice}")
        files.update(made)
    return files


def plots_dir(generated_dir: Path) -> Path:
    """docs/plots beside docs/_generated (or beside a test's generated directory)."""
    return PLOTS_DIR if generated_dir == GENERATED_DIR else generated_dir.parent / f"{generated_dir.name}-plots"


def generated_paths(generated_dir: Path) -> set[Path]:
    """Every file render owns that exists now."""
    owned = {*generated_dir.rglob("*.md"), *generated_dir.rglob("*.json")} if generated_dir.exists() else set()  # json: the recipe's rules
    plot_dir = plots_dir(generated_dir)
    downloads = {*plot_dir.glob("*.svg"), *plot_dir.glob("*.csv")} if plot_dir.exists() else set()  # csv: full matrices
    return owned | downloads


def extra_files(generated_dir: Path = GENERATED_DIR) -> dict[Path, str]:
    """Generated files outside docs/_generated, from the catalogue and the nav: only beside the real site."""
    return {SERVERS_INDEX: servers_index()} if generated_dir == GENERATED_DIR else {}


def stale_files(results_dir: Path = RESULTS_DIR, generated_dir: Path = GENERATED_DIR,
                expected: dict[Path, str] | None = None) -> list[str]:
    """Generated files that differ from the records, are missing, or have no record any more (`expected`: a render
    of these records already made, for callers that hold one)."""
    extras = extra_files(generated_dir)
    expected = expected_files(results_dir, generated_dir) if expected is None else expected
    return differences(expected | extras,
                       generated_paths(generated_dir) | {path for path in extras if path.exists()})


def differences(expected: dict[Path, str], present: set[Path]) -> list[str]:
    """What `render --check` reports: expected files missing or different, present ones nothing renders."""
    problems = []
    for path, content in sorted(expected.items()):
        if path not in present:
            problems.append(f"missing: {_show(path)}")
        elif path.read_text(encoding="utf-8") != content:
            problems.append(f"stale: {_show(path)}")
    problems += [f"no record behind: {_show(path)}" for path in sorted(present - expected.keys())]
    return problems


def write_all(results_dir: Path = RESULTS_DIR, generated_dir: Path = GENERATED_DIR) -> list[Path]:
    """Write every generated file and remove the ones no record produces any more."""
    expected = expected_files(results_dir, generated_dir) | extra_files(generated_dir)
    for path, content in expected.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    for path in generated_paths(generated_dir):
        if path not in expected:
            path.unlink()
    return sorted(expected)
