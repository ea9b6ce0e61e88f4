"""Planning a run: its cells (levels), each design's settings, the time estimate and the progress lines.

A run is laid out before anything starts: every scenario's cells (one per concurrency
level, or per offered rate in an open-loop sweep), repeated `repeat` times per design,
after the ceiling's cells. Each cell is estimated at its time limit plus start-up,
corrected by how the scenario's last record compared with its own plan; the progress
lines on stderr rescale the rest as cells finish.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from harness.model.catalogue import Catalogue, Design, Scenario, UnknownNameError
from harness.model.records import RESULTS_DIR, SCRATCH_RESULTS_DIR, results_path
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.settings import ScenarioSettings

CELL_OVERHEAD_SECONDS = 1.0  # starting, verifying and priming a design, and the tool's own start
UNTIMED_CELL_SECONDS = 10.0  # the guess for a cell with no time limit


def scenario_settings(scenario: Scenario, quick: bool, repeat: int | None = None) -> ScenarioSettings:
    """The settings a run of this scenario uses (quick overrides, and --repeat when given)."""
    settings = scenario.settings(quick)
    return settings if repeat is None else dataclasses.replace(settings, repeat=repeat)


def levels(settings: ScenarioSettings) -> list[tuple[str, int, dict[str, Any]]]:
    """The cells of one repetition: (label, concurrency, setting overrides).

    Usually one per concurrency level; `time_limit_at` (concurrency level -> seconds) gives some
    levels a longer time limit than the scenario's. An open-loop scenario whose `rate` is a list
    sweeps the offered rate instead, at its one concurrency level (the cap on requests in flight);
    with `schedule_seconds`, each rate schedules rate x schedule_seconds requests.
    """
    rates = settings.rate
    if not isinstance(rates, list):
        longer = settings.time_limit_at or {}
        return [(f"c={concurrency}", concurrency,
                 {"time_limit": longer[str(concurrency)]} if str(concurrency) in longer else {})
                for concurrency in settings.concurrency]
    cap = settings.concurrency[0]
    cells = []
    for rate in rates:
        overrides: dict[str, Any] = {"rate": rate}  # replaced into the settings (dataclasses.replace) per cell
        if settings.schedule_seconds:
            overrides["requests"] = max(1, round(rate * settings.schedule_seconds))
        cells.append((f"rate={rate:g}", cap, overrides))
    return cells


def design_settings(settings: ScenarioSettings, design: Design) -> ScenarioSettings:
    """The scenario's settings for one design: a blocking design may get a shorter time limit.

    `time_limit_blocking` (a scenario option) caps designs whose catalogue says concurrent = false:
    they answer one request at a time, and a few seconds show their rate as well as a minute.
    """
    if not design.concurrent and settings.time_limit_blocking:
        return dataclasses.replace(settings, time_limit=settings.time_limit_blocking)
    return settings


def sizes(settings: ScenarioSettings, design: Design) -> list[int | None]:
    """The counts a sizing sweep restarts this design with (`sizes`), or [None]: run once, as the catalogue says."""
    return list((settings.sizes or {}).get(design.name) or [None])


def sized_design(settings: ScenarioSettings, design: Design, size: int | None) -> Design:
    """The design with the scenario's size_arguments for it appended, {size} filled in (itself when size is None)."""
    if size is None:
        return design
    arguments = [part.replace("{size}", str(size)) for part in (settings.size_arguments or {})[design.name]]
    return dataclasses.replace(design, command=[*design.command, *arguments])


def plan_cells(settings: ScenarioSettings, designs: list[Design], with_ceiling: bool) -> list[float]:
    """Estimated seconds of every cell of a scenario, in the order they will run."""
    def cell(design_specific: ScenarioSettings) -> float:
        limit = design_specific.time_limit
        warm_up = float(design_specific.warm_up or 0)
        return (float(limit) if limit else UNTIMED_CELL_SECONDS) + warm_up + CELL_OVERHEAD_SECONDS

    def cells(design_specific: ScenarioSettings) -> list[float]:
        return [cell(dataclasses.replace(design_specific, **overrides)) for _, _, overrides in levels(design_specific)]

    planned = cells(settings) if with_ceiling else []
    for _ in range(settings.repeat):
        for design in designs:
            planned += cells(design_settings(settings, design)) * len(sizes(settings, design))
    return planned


def past_speed(catalogue: Catalogue, results_dir: Path, scenario_id: str) -> float:
    """How the last recorded run of a scenario compared with its own plan (1.0 when unknown).

    Time limits are upper bounds (ab stops at n requests, often long before its cap), so a plan
    made of them overestimates; the last record says by how much.
    """
    try:
        path = results_path(scenario_id, results_dir)
        record = ScenarioRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
        wall = record.wall_seconds()
        designs = [catalogue.design(design.name) for design in record.designs]
        planned = sum(plan_cells(record.settings, designs, with_ceiling=record.ceiling is not None))
    except (OSError, ValueError, KeyError, TypeError, UnknownNameError):  # RecordShapeError is a ValueError
        return 1.0
    return wall / planned if planned > 0 and wall > 0 else 1.0


class Progress:
    """One line per cell on stderr: what runs, how far along, and an estimate of the time left.

    The plan is an estimate of every cell's seconds (its time limit plus start-up), made before
    anything runs and spanning every scenario of the run; as cells finish, the estimate for the
    rest is scaled by how the finished cells compared with their own estimates.
    """

    def __init__(self, planned_cells: list[float]) -> None:
        self.planned = planned_cells
        self.done, self.done_estimate, self.started = 0, 0.0, time.monotonic()

    def step(self, label: str) -> None:
        elapsed = time.monotonic() - self.started
        rest = sum(self.planned[self.done:])
        scale = elapsed / self.done_estimate if self.done_estimate else 1.0
        print(f"[{self.done + 1}/{len(self.planned)}] {label}  "
              f"(elapsed {_clock(elapsed)}, about {_clock(rest * scale)} left)", file=sys.stderr, flush=True)
        self.skip(1)

    def skip(self, cells: int) -> None:
        """Count cells as done (run, or skipped because their design already failed)."""
        self.done_estimate += sum(self.planned[self.done:self.done + cells])
        self.done = min(self.done + cells, len(self.planned))


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


# A quick run of every scenario (`bench.py run --quick`, `make bench-quick`) checks that each still starts, measures,
# records and renders; its numbers are never published. Its plan stays under this many seconds (a test sums it), so
# it is run: each [scenario.quick] measures one or two designs besides the ceiling, one level, 1 s runs (an
# article's fixed-count experiment: a cap near its real length), and a scenario one number apart from another
# (pipelining depth, pool size, threads, CPython version) names it as `covered_by` and is left out.
QUICK_RUN_BUDGET_SECONDS = 180.0


def every_scenario(catalogue: Catalogue, quick: bool) -> list[Scenario]:
    """What a run of every scenario runs: all but those run only by name, and in a quick run those covered by another."""
    return [scenario for scenario in catalogue.scenarios.values()
            if not scenario.settings(quick=False).named_only and not (quick and scenario.quick.covered_by)]


def scenario_cells(catalogue: Catalogue, scenario: Scenario, design_names: list[str] | None, quick: bool,
                   repeat: int | None) -> list[float]:
    """Estimated seconds of every cell of one scenario's run, from the catalogue alone."""
    settings = scenario_settings(scenario, quick, repeat)
    designs = [catalogue.design(name) for name in (design_names or scenario.design_names(quick))]
    return plan_cells(settings, designs, with_ceiling=bool(settings.ceiling))


def plan_run(catalogue: Catalogue, runs: list[tuple[Scenario, list[str] | None]], quick: bool,
             repeat: int | None) -> Progress:
    """One progress display for several scenarios: (scenario, design names or None for all) each."""
    planned: list[float] = []
    for scenario, design_names in runs:
        factor = past_speed(catalogue, RESULTS_DIR if not quick else SCRATCH_RESULTS_DIR, scenario.id)
        planned += [seconds * factor for seconds in scenario_cells(catalogue, scenario, design_names, quick, repeat)]
    return Progress(planned)
