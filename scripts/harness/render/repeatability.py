"""Repeatability: two consecutive complete runs of every scenario, compared cell by cell.

Run A is results/<scenario>.json, run B results/rerun/<scenario>.json (the same
format, written by a second complete run). A cell (a design at one level) is
compared when both runs measured it; the two agree when B's median requests/s
lies inside the interval run A's repetitions give its median (stats.median_interval:
min–max for five, 96% for fifteen), the interval every table already shows under
"Every column". A fixed threshold (10%, 5%) between two runs asks more than this
2-CPU machine resolves for some cells and less for others; A's own interval says
what A knew. |B − A| / A is still shown. A tool-bound cell (at 80% or more of the
load tool's ceiling in either run) is shown but not counted: it measures the tool
as much as the design, and the tool's own variation would be charged to the design.

Records are compared only when they are a repeat pair: two consecutive runs of
one commit (a clean tree) on one kernel and machine, full runs with the same
settings (the number of repetitions aside), B started after A finished and within
CONSECUTIVE_HOURS of it. Anything else is not compared, and the page says why:
two runs days apart on different kernels measure the machine's history, not
whether a result repeats. Each record's commit and start time are shown. Each scenario also gets
the speed of every repetition (repetition_speeds), which tells a disturbed
machine apart from a design that varies.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import statistics
from dataclasses import dataclass
from datetime import datetime, timedelta

from harness.model.records.scenario_record import ScenarioRecord
from harness.model.settings import ScenarioSettings
from harness.model.stats import interval_name
from harness.render.cells import (
    cells_by_level,
    describe_level,
    format_level,
    format_rate,
    level_key,
    rate_cells,
    rate_medians,
)
from harness.model import limits

AGREEMENT = 0.10  # a repetition's speed more than 10% off 1.00 is flagged (speeds_line)
MIN_REPETITIONS_FOR_AN_INTERVAL = 3
CONSECUTIVE_HOURS = 6  # a whole `make bench` (run A, then run B) takes under three hours here


@dataclass
class Cell:
    """One design at one level in both runs: medians (None if not measured) and whether it is tool-bound."""

    design: str
    level: float
    first: float | None
    second: float | None
    tool_bound_in: list[str]  # "A", "B" or both: where the cell was tool-bound (model/limits.py)
    interval: tuple[float, float] | None = None  # run A's interval for its median (None: A did not measure it)

    @property
    def difference(self) -> float | None:
        """|B − A| / A."""
        if self.first is None or self.second is None or not self.first:
            return None
        return abs(self.second - self.first) / self.first

    @property
    def compared(self) -> bool:
        return self.difference is not None and not self.tool_bound_in and self.interval is not None

    @property
    def agrees(self) -> bool:
        """B's median inside the interval A's repetitions give A's median."""
        return (self.compared and self.interval is not None and self.second is not None
                and self.interval[0] <= self.second <= self.interval[1])


def medians(record: ScenarioRecord) -> dict[tuple[str, float], tuple[float, bool]]:
    """(design, level) -> (median requests/s, tool-bound) for every measured cell."""
    tool_ceilings = limits.ceilings(record)
    runs = {(design.name, level): cell_runs for design in record.designs
            for level, cell_runs in cells_by_level(design.runs, level_key(record)).items()}
    return {key: (median, limits.limit(runs.get(key, []), record.environment, tool_ceilings.get(key[1])).tool_bound)
            for key, median in rate_medians(record).items()}


def compare_cells(first: ScenarioRecord, second: ScenarioRecord) -> list[Cell]:
    """Every cell either run measured, in run A's design order, then run B's new designs."""
    first_medians, second_medians = medians(first), medians(second)
    # A cell's interval needs three repetitions or more: one value (or two) bounds nothing.
    counts = {(design.name, level): len(runs) for design in first.designs
              for level, runs in cells_by_level(design.runs, level_key(first)).items()}
    intervals = {key: (cell["interval_low"], cell["interval_high"]) for key, cell in rate_cells(first).items()
                 if counts.get(key, 0) >= MIN_REPETITIONS_FOR_AN_INTERVAL}
    order = [design.name for design in first.designs]
    order += [design.name for design in second.designs if design.name not in order]
    cells = []
    for key in sorted(first_medians.keys() | second_medians.keys(), key=lambda key: (order.index(key[0]), key[1])):
        (a, a_bound), (b, b_bound) = first_medians.get(key, (None, False)), second_medians.get(key, (None, False))
        cells.append(Cell(key[0], key[1], a, b, [run for run, bound in (("A", a_bound), ("B", b_bound)) if bound],
                          intervals.get(key)))
    return cells


def not_comparable(first: ScenarioRecord, second: ScenarioRecord) -> list[str]:
    """Why two records of a scenario cannot be compared; empty when they can."""
    reasons = [f"run {name} is a {record.mode} run" for name, record in (("A", first), ("B", second))
               if record.mode != "full"]
    machines = [(record.environment.cpu_model, record.environment.cpu_count) for record in (first, second)]
    if machines[0] != machines[1]:
        reasons.append("different machines: " + " and ".join(f"{model}, {count} CPUs" for model, count in machines))
    reasons += not_a_repeat_pair(first, second)
    one, other = first.settings, second.settings
    changed = sorted(setting.name for setting in dataclasses.fields(ScenarioSettings)
                     if setting.name != "repeat" and getattr(one, setting.name) != getattr(other, setting.name))
    if changed:
        reasons.append("different settings: " + ", ".join(
            f"{key} {getattr(one, key)} then {getattr(other, key)}" for key in changed))
    return reasons


def not_a_repeat_pair(first: ScenarioRecord, second: ScenarioRecord) -> list[str]:
    """Why run B is not the consecutive repeat of run A: another commit, a dirty tree, another kernel, B
    started before A finished or long after it. Empty for a true repeat pair."""
    environments = first.environment, second.environment
    reasons = []
    if environments[0].commit != environments[1].commit:
        reasons.append(f"different commits: {environments[0].commit[:7]} then {environments[1].commit[:7]}")
    if any(environment.dirty for environment in environments):
        reasons.append("a run with uncommitted changes")
    if environments[0].kernel != environments[1].kernel:
        reasons.append(f"different kernels: {environments[0].kernel} then {environments[1].kernel}")
    a_finished = datetime.fromisoformat(first.finished_utc.replace("Z", "+00:00"))
    b_started = datetime.fromisoformat(second.started_utc.replace("Z", "+00:00"))
    if b_started < a_finished:
        reasons.append(f"run B started ({second.started_utc}) before run A finished ({first.finished_utc})")
    elif b_started - a_finished > timedelta(hours=CONSECUTIVE_HOURS):
        reasons.append(f"run B started {(b_started - a_finished).total_seconds() / 3600:.0f} h after run A finished "
                       f"(consecutive runs are at most {CONSECUTIVE_HOURS} h apart)")
    return reasons


def repetition_speeds(first: ScenarioRecord, second: ScenarioRecord) -> dict[str, list[float]]:
    """Run ("A"/"B") -> for each repetition, how fast it ran compared with the machine's usual.

    A repetition's speed is the median, over every cell it measured, of its requests/s divided
    by that cell's median over both runs' repetitions. A design that varies moves its own cells
    only; a machine that slows down for a while moves every cell of the repetitions it touched,
    and so this median.
    """
    per_cell: dict[tuple[str, float], list[tuple[str, int, float]]] = {}
    for run_name, record in (("A", first), ("B", second)):
        for design in record.designs:
            for level, runs in cells_by_level(design.runs, level_key(record)).items():
                per_cell.setdefault((design.name, level), []).extend(
                    (run_name, run.repetition, run.requests_per_second) for run in runs)
    ratios: dict[tuple[str, int], list[float]] = {}
    for measured in per_cell.values():
        if len(measured) < 2:
            continue  # a cell measured once has no usual to compare with
        usual = statistics.median(rate for _, _, rate in measured)
        if not usual:
            continue
        for run_name, repetition, rate in measured:
            ratios.setdefault((run_name, repetition), []).append(rate / usual)
    speeds: dict[str, list[float]] = {}
    for (run_name, _), values in sorted(ratios.items()):
        speeds.setdefault(run_name, []).append(statistics.median(values))
    return speeds


def speeds_line(first: ScenarioRecord, second: ScenarioRecord) -> str:
    """One line: each repetition's speed in both runs, and a warning for those off by more than 10%."""
    speeds = repetition_speeds(first, second)
    if not any(len(values) > 1 for values in speeds.values()):
        return ""
    line = "; ".join(f"run {run_name} " + ", ".join(f"{speed:.2f}" for speed in values)
                     for run_name, values in speeds.items())
    off = []
    for run_name, values in speeds.items():
        # Judged as shown (whole percent), so a 90% on the page is never called "more than 10% off".
        outliers = [f"{index + 1} ({speed:.0%})" for index, speed in enumerate(values)
                    if abs(round(speed, 2) - 1) > AGREEMENT + 1e-9]
        if outliers:
            off.append(f"run {run_name}'s repetition{'s' if len(outliers) > 1 else ''} {', '.join(outliers)}")
    warning = (f" ⚠ More than {AGREEMENT:.0%} off across their cells: {'; '.join(off)}. A disturbed machine "
               "shows this way; look there before blaming a design." if off else "")
    return (f"Speed of each repetition (the median over its cells of requests/s ÷ the cell's median over "
            f"both runs): {line}.{warning}\n\n")


def _when(record: ScenarioRecord) -> str:
    environment = record.environment
    dirty = " (uncommitted changes)" if environment.dirty else ""
    return f"`{environment.commit[:10]}`{dirty}, {record.started_utc} – {record.finished_utc[11:]}, {record.mode}"


def summary(cells: list[Cell]) -> str:
    compared = [cell for cell in cells if cell.compared]
    agreeing = sum(cell.agrees for cell in compared)
    return (f"{len(compared)} cells compared (not tool-bound, three repetitions or more), {agreeing} with run B's "
            "median inside run A's interval")


def _note(cell: Cell) -> str:
    notes = [f"not measured in {run} (failed)" for run, median in (("A", cell.first), ("B", cell.second))
             if median is None]
    if cell.tool_bound_in:
        notes.append(f"tool-bound in {' and '.join(cell.tool_bound_in)}: not counted")
    elif cell.difference is not None and cell.interval is None:
        notes.append(f"fewer than {MIN_REPETITIONS_FOR_AN_INTERVAL} repetitions in A: no interval, not counted")
    if cell.compared and not cell.agrees:
        notes.append("⚠ B outside A's interval")
    return "; ".join(notes) or "–"


def cells_csv(first_run: dict[str, ScenarioRecord], second_run: dict[str, ScenarioRecord]) -> str:
    """Every cell of every scenario compared, one line each: the download in place of a table per scenario (202 rows
    made the methodology page twice the reading budget)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["scenario", "design", "level", "run_a_requests_per_second", "run_b_requests_per_second",
                     "difference", "note"])
    for scenario_id in sorted(first_run.keys() & second_run.keys()):
        first, second = first_run[scenario_id], second_run[scenario_id]
        if not_comparable(first, second):
            continue
        writer.writerows([scenario_id, *row] for row in cell_rows(first, compare_cells(first, second)))
    return buffer.getvalue()


def cell_rows(record: ScenarioRecord, cells: list[Cell]) -> list[list[str]]:
    """Each cell as the download writes it: design, level, both medians, |B−A|/A and the note."""
    return [[cell.design, format_level(record, cell.level),
             "" if cell.first is None else f"{cell.first:.1f}", "" if cell.second is None else f"{cell.second:.1f}",
             "" if cell.difference is None else f"{cell.difference:.1%}", "" if _note(cell) == "–" else _note(cell)]
            for cell in cells]


def _outside(record: ScenarioRecord, cells: list[Cell]) -> str:
    outside = [cell for cell in cells if cell.compared and not cell.agrees]
    if not outside:
        return ""
    items = [f"- `{cell.design}` at {describe_level(record, cell.level)}: {format_rate(cell.first)} "
             f"({format_rate(cell.interval[0])}–{format_rate(cell.interval[1])}) then {format_rate(cell.second)} "
             f"req/s ({cell.difference:.1%} apart)" for cell in outside if cell.interval]
    return "Run B's median outside run A's interval:\n\n" + "\n".join(items) + "\n\n"


def scenario_agreement(first_run: dict[str, ScenarioRecord], second_run: dict[str, ScenarioRecord],
                       scenario_id: str, target: float) -> str:
    """One scenario's two consecutive runs in a sentence: the largest difference, and who is outside `target`.

    Unlike the page's 10% agreement, every measured cell counts here, tool-bound or not: the
    sentence answers "would a second run show the same numbers?", whatever limited them.
    """
    first, second = first_run.get(scenario_id), second_run.get(scenario_id)
    if first is None or second is None:
        missing = " and ".join(where for where, record in (("results/", first), ("results/rerun/", second))
                               if record is None)
        return (f"*Not measured yet: no `{scenario_id}.json` in {missing}. Two consecutive runs "
                f"(`python scripts/bench.py run --scenario {scenario_id}`, then the same with "
                f"`--out results/rerun`) show whether the numbers repeat.*\n")
    reasons = not_comparable(first, second)
    if reasons:
        return f"*The two runs of `{scenario_id}` cannot be compared: {'; '.join(reasons)}.*\n"
    cells = [cell for cell in compare_cells(first, second) if cell.difference is not None]
    if not cells:
        return f"*No design of `{scenario_id}` was measured in both runs.*\n"
    largest = max(cells, key=lambda cell: cell.difference or 0.0)
    outside = [cell for cell in cells if (cell.difference or 0.0) > target]
    verdict = (f"every one of the {len(cells)} servers within {target:.0%}" if not outside else
               f"{len(outside)} of {len(cells)} servers more than {target:.0%} apart: "
               + ", ".join(f"`{cell.design}` {format_rate(cell.first)} then {format_rate(cell.second)} "
                           f"({cell.difference:.1%})" for cell in outside))
    # The stricter "same within 5%" aside, does B land where A says its median lies?
    intervals = rate_cells(first)
    strays = [cell for cell in cells if not (intervals[(cell.design, cell.level)]["interval_low"] <= (cell.second or 0.0)
                                             <= intervals[(cell.design, cell.level)]["interval_high"])]
    widths = [intervals[(cell.design, cell.level)]["relative_interval"] for cell in cells]
    landing = (f"Run A's medians are known to within their {interval_name(first.settings.repeat)}s (under "
               f"\"Every column\"), {min(widths):.0%} to {max(widths):.0%} of the median wide; run B's median lies "
               f"inside A's for {len(cells) - len(strays)} of {len(cells)} servers"
               + (": not " + ", ".join(f"`{cell.design}`" for cell in strays) if strays else ""))
    return (f"Two consecutive runs of `{scenario_id}` (A {_when(first)}; B {_when(second)}): the largest "
            f"difference between a server's two medians is {largest.difference:.1%} (`{largest.design}`); "
            f"{verdict}. {landing}.\n")


def leaders(first_run: dict[str, ScenarioRecord], second_run: dict[str, ScenarioRecord], scenario_id: str,
            shown: int = 3) -> str:
    """Who had the highest medians in each of two consecutive runs, as shares of the scenario's reference.

    A page that says who leads must say it of both runs: on this machine the order at the top can change
    from one run to the next, and one run alone would make a ranking out of noise.
    """
    first, second = first_run.get(scenario_id), second_run.get(scenario_id)
    if first is None or second is None or not_comparable(first, second):
        return ""
    reference = first.scenario.full_settings.relative_to
    runs = []
    for label, record in (("A", first), ("B", second)):
        rates = {design: median for (design, _level), (median, _bound) in medians(record).items()}
        if reference not in rates:
            return ""
        top = sorted(rates, key=rates.get, reverse=True)[:shown]
        runs.append((label, top, rates))
    parts = [f"run {label}: " + ", ".join(f"`{name}` {rates[name] / rates[reference]:.0%}" for name in top)
             for label, top, rates in runs]
    same = runs[0][1][0] == runs[1][1][0]
    ending = (f"`{runs[0][1][0]}` leads both runs" if same else
              "the lead changes from one run to the next, so the order at the top is inside this machine's "
              "run-to-run spread, not a ranking")
    return (f"The highest medians, as a share of `{reference}`'s in the same run ({'; '.join(parts)}): "
            f"{ending}.\n")


def repeatability_page(first_run: dict[str, ScenarioRecord], second_run: dict[str, ScenarioRecord]) -> str:
    """The comparison of every scenario recorded in both runs, with an overall count first."""
    if not second_run:
        return ("*Not measured yet: no second run is recorded in `results/rerun/`. `make bench` makes one after "
                "the first (`python scripts/bench.py run --out results/rerun`: every scenario, in full), and "
                "`python scripts/bench.py render` compares the two.*\n")
    overview = ["| Scenario | Run A: `results/` | Run B: `results/rerun/` | Compared |", "|---|---|---|---|"]
    sections, every_cell = [], []
    for scenario_id in sorted(first_run.keys() & second_run.keys()):
        first, second = first_run[scenario_id], second_run[scenario_id]
        title = f"**{first.scenario.title}** (scenario `{scenario_id}`)"
        reasons = not_comparable(first, second)
        if reasons:
            verdict = "not compared: " + "; ".join(reasons)
            sections.append(f"{title}: {verdict}.\n")
        else:
            cells = compare_cells(first, second)
            every_cell += cells
            verdict = summary(cells)
            sections.append(f"{title}: {verdict}.\n\n{speeds_line(first, second)}{_outside(first, cells)}")
        overview.append(f"| `{scenario_id}` | {_when(first)} | {_when(second)} | {verdict.replace('|', '/')} |")
    missing = sorted(first_run.keys() - second_run.keys())
    extra = sorted(second_run.keys() - first_run.keys())
    notes = "".join(f"{text}: {', '.join(f'`{name}`' for name in names)}.\n\n"
                    for text, names in (("No second run for", missing), ("Only in the second run", extra)) if names)
    return (f"**Overall: {summary(every_cell)}.**\n\n" + "\n".join(overview) + "\n\n" + notes
            + "\n".join(sections))
