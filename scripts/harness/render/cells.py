"""Cells: a design's runs at one level, summarised; shared by the tables, the plots and the comparisons.

A record's runs group into cells by level. The level is the concurrency, except
in an open-loop rate sweep (its settings' `rate` is a list), where every run has the
same concurrency (the cap on requests in flight) and the level is the offered
rate of the run, run.get("rate"). Runs that ended in an error belong to no cell. Records and runs are the typed
ones (model/records/scenario_record.py); a cell is a render-only dict of the runs it summarises.

A cell whose runs lasted under settings.MIN_RUN_SECONDS is flagged (short_run_warning):
since the runner makes such a run an error, only a record made before that rule has one,
and its numbers stay on the page with the flag rather than disappear. An article's
fixed-count experiment (`fixed_count`, in the record's settings or, for a record older
than the key, in its scenario's catalogue entry) ends at its count by design: not flagged.
"""

from __future__ import annotations

import functools
import statistics
from typing import Any

from harness.model import limits
from harness.model.catalogue import load_catalogue
from harness.model.records.common import Environment
from harness.model.records.scenario_record import Run, ScenarioRecord
from harness.model.settings import MIN_RUN_SECONDS
from harness.model.stats import spread

SPREAD_FLAG = 0.10  # a cell whose median's interval (min–max for 5 runs) exceeds 10% of it is flagged


def is_rate_sweep(record: ScenarioRecord) -> bool:
    return isinstance(record.settings.rate, list)


def level_key(record: ScenarioRecord) -> str:
    """The run field a cell's level is read from."""
    return "rate" if is_rate_sweep(record) else "concurrency"


def levels(record: ScenarioRecord) -> list[float]:
    """The levels the scenario asked for, in its order."""
    return record.settings.rate if is_rate_sweep(record) else record.settings.concurrency


def level_header(record: ScenarioRecord) -> str:
    return "Offered rate (req/s)" if is_rate_sweep(record) else "Clients"


def format_level(record: ScenarioRecord, level: float) -> str:
    return f"{level:,g}" if is_rate_sweep(record) else f"{level:,}"


def describe_level(record: ScenarioRecord, level: float) -> str:
    """A level in a sentence: "c=1,000", or "80 req/s offered"."""
    return f"{level:,g} req/s offered" if is_rate_sweep(record) else f"c={level:,}"


def format_rate(value: float) -> str:
    """Requests per second as the tables print them."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.1f}"


def cells_by_level(runs: list[Run], key: str = "concurrency") -> dict[float, list[Run]]:
    """Successful runs grouped by the run's field `key` (its concurrency, or its offered rate)."""
    grouped: dict[float, list[Run]] = {}
    for run in runs:
        if run.error is None:
            grouped.setdefault(run.get(key), []).append(run)
    return grouped


LATENCY_KEYS = ("mean", "mode", "p50", "p90", "p99", "max")


def summarise_cell(runs: list[Run]) -> dict[str, Any]:
    """Median and range of requests/s, median of each latency statistic, totals of failures."""
    rates = spread([run.requests_per_second for run in runs])
    latencies = [run.latency_ms for run in runs if run.latency_ms]
    latency = {key: statistics.median(getattr(item, key) for item in latencies if getattr(item, key) is not None)
               for key in LATENCY_KEYS if any(getattr(item, key) is not None for item in latencies)}
    return {
        "runs": runs,
        "rate": rates,
        "latency": latency,
        # None: the tool could not know (hey stopped by a time limit does not report requests it sent).
        "failed": None if any(run.failed is None for run in runs) else sum(run.failed for run in runs),
        "non_2xx": sum(run.non_2xx or 0 for run in runs),
        "complete": sorted(run.complete for run in runs),
        "requested": runs[0].requests_requested,
        "repetitions": len(runs),
    }


def rate_cells(record: ScenarioRecord) -> dict[tuple[str, float], dict[str, float]]:
    """Every measured cell's requests/s (`stats.spread`) by (design, level); failed runs left out."""
    return {(design.name, level): summarise_cell(runs)["rate"]
            for design in record.designs
            for level, runs in cells_by_level(design.runs, level_key(record)).items()}


def rate_medians(record: ScenarioRecord) -> dict[tuple[str, float], float]:
    """Every measured cell's median requests/s by (design, level), as the tables' bold numbers."""
    return {key: rate["median"] for key, rate in rate_cells(record).items()}


def cell_limit(cell: dict[str, Any], ceiling: float | None, environment: Environment | None) -> limits.Limit:
    """What limited a cell (model/limits.limit); without the record's environment, only the old rule applies."""
    if environment is None:
        rate = cell["rate"]["median"]
        return limits.Limit(tool_busy=None, server_busy=None, ceiling_share=rate / ceiling if ceiling else None)
    return limits.limit(cell.get("runs") or [], environment, ceiling)


def tool_bound_flag(found: limits.Limit, every_column: bool = False) -> str:
    """' ⚠ tool-bound (…)' when the cell measured the tool: by the tool's own CPU, or, in a record older than that
    measurement, by its share of the tool's ceiling, labelled as the old rule; '' otherwise."""
    if not found.tool_bound:
        return ""
    if found.tool_busy is not None:
        return (f" ⚠ tool-bound (the load tool at {found.tool_busy:.0%} of its CPU)" if every_column
                else f" ⚠ tool-bound (tool CPU {found.tool_busy:.0%})")
    share = f"{found.ceiling_share:.0%}"
    return (f" ⚠ tool-bound ({share} of the tool's ceiling; old rule: the tool's CPU was not recorded)"
            if every_column else f" ⚠ tool-bound ({share} of ceiling)")


def spread_warning(rate: dict[str, float], word: str = "spread ") -> str:
    """' ⚠ spread 35%' when the interval of a cell's median is wider than SPREAD_FLAG of it, else ''.

    The interval is `stats.median_interval`: for five runs or fewer the lowest and highest, so
    the flag says how far the runs disagreed; for more runs the narrower interval the median
    lies in. The one wording of the flag every table uses; a table whose column already says
    what it is passes word="" (' ⚠ 35%').
    """
    return f" ⚠ {word}{rate['relative_interval']:.0%}" if rate["relative_interval"] > SPREAD_FLAG else ""


@functools.cache
def _fixed_count_scenarios() -> frozenset[str]:
    """The scenarios today's catalogue declares fixed-count experiments (read once)."""
    return frozenset(scenario.id for scenario in load_catalogue().scenarios.values()
                     if scenario.settings(quick=False).fixed_count)


def fixed_count(record: ScenarioRecord) -> bool:
    """Whether the record's runs end at a request count by design, however short (an article's experiment)."""
    written = record.settings.fixed_count
    return bool(written) if written is not None else record.id in _fixed_count_scenarios()


def short_run_warning(record: ScenarioRecord, cell: dict[str, Any], every_column: bool = False) -> str:
    """' ⚠ 0.06 s runs' when a run of the cell lasted under MIN_RUN_SECONDS outside a fixed-count experiment.

    The full table gives the range (' ⚠ runs of 0.04–0.12 s, under 1 s'). Such a run weighs the
    tool's start and stop as much as the server: the number is the tool's as much as the design's.
    """
    durations = sorted(run.duration_s for run in cell["runs"] if run.duration_s is not None)
    if not durations or durations[0] >= MIN_RUN_SECONDS or fixed_count(record):
        return ""
    if every_column:
        span = f"{durations[0]:.2f}" + (f"–{durations[-1]:.2f}" if durations[-1] > durations[0] else "")
        return f" ⚠ runs of {span} s, under {MIN_RUN_SECONDS:g} s"
    return f" ⚠ {durations[0]:.2f} s runs"


def rate_flags(cell: dict[str, Any], ceiling: float | None = None, every_column: bool = False,
               record: ScenarioRecord | None = None, environment: Environment | None = None) -> str:
    """A cell's warnings as its table prints them after the median: spread, short runs, tool-bound; '' if none.

    With its `record`, a cell of runs shorter than 1 s outside a fixed-count experiment says so, and the record's
    environment lets the tool's own CPU decide tool-bound (model/limits.py); `environment` alone does the latter.
    """
    rate = cell["rate"]
    text = spread_warning(rate)
    if record is not None:
        text += short_run_warning(record, cell, every_column)
    found = cell_limit(cell, ceiling, environment or (record.environment if record is not None else None))
    return text + tool_bound_flag(found, every_column)


def rate_label(cell: dict[str, Any], ceiling: float | None = None, every_column: bool = False,
               record: ScenarioRecord | None = None) -> str:
    """The median with its warnings; `every_column` adds the median's interval and says whose ceiling it is near."""
    rate = cell["rate"]
    text = f"**{format_rate(rate['median'])}**"
    if every_column:  # the narrow table leaves the interval (min–max for five runs) to the one behind "Every column"
        text += f" ({format_rate(rate['interval_low'])}–{format_rate(rate['interval_high'])})"
    return text + rate_flags(cell, ceiling, every_column, record)
