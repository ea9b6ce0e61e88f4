"""What limited a measured cell: the load tool, the server, or neither. The one owner of the rule.

Theory of operation. A closed-loop load tool measures a server only while the tool itself has CPU to
spare. Since the harness reaps every load tool itself (system/processes.run_tool, os.wait4), a run
records the tool's own CPU time (`load_tool_resources`) beside the server's (`server_resources`), and
each pinned to its own CPU (environment.pinning). So:

- a cell is **tool-bound** when the tool used CPU_SATURATED or more of the CPUs it was pinned to:
  a faster server could not have been asked for more;
- it is **server-bound** when the server's process group used CPU_SATURATED or more of its CPUs:
  its CPU per request is then the inverse of its rate (CPUs ÷ rate) and says nothing the rate does not;
- both, or neither (a server that waits: a simulated call, a pool, a timer).

Records made before the tool's CPU was recorded keep the old rule, and say so: a cell is tool-bound
when its median is TOOL_BOUND_FRACTION or more of the tool's **ceiling**, the highest median the tool
reached at that level in the same record (against the scenario's ceiling design, or any faster one: a
rate the tool reached is one it can reach). `highest` is that rule, the one definition; `ceilings` applies it
level by level to a scenario's record, `ceiling_row` to the how-fast steps' rows; every table asks here.

Known limits: CPU time is the kernel's count over the tool's wall time (start-up included: a one-second
run of a tool that takes 50 ms to start reads 5% low); the server's time is its process group's, sampled
over the tool's run. Neither sees what the kernel spends on loopback traffic outside both processes.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.model.records.common import Environment
from harness.model.records.scenario_record import Outcome, Run, ScenarioRecord

CPU_SATURATED = 0.9  # a process at 90% or more of the CPUs it may use is at its limit
TOOL_BOUND_FRACTION = 0.8  # the old rule: a cell at 80% or more of the tool's ceiling measures the tool


def cpu_count(cpus: str | None, environment: Environment) -> int:
    """How many CPUs a taskset list names ("0", "0,1", "0-3"); every CPU of the machine when not pinned (None)."""
    if cpus is None:
        return environment.cpu_count
    count = 0
    for part in filter(None, cpus.split(",")):
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


def tool_busy(run: Run, environment: Environment) -> float | None:
    """The share of its pinned CPUs the load tool used over its run; None when the record did not measure it."""
    usage = run.load_tool_resources
    if usage is None or usage.wall_seconds <= 0:
        return None
    return usage.cpu_seconds / usage.wall_seconds / cpu_count(environment.pinning.load_tool_cpu, environment)


def server_busy(run: Run, environment: Environment) -> float | None:
    """The share of its pinned CPUs the server's process group used over the run; None without its CPU time."""
    resources = run.server_resources
    wall = run.load_tool_resources.wall_seconds if run.load_tool_resources else run.duration_s
    if resources is None or resources.cpu_seconds is None or not wall:
        return None
    return resources.cpu_seconds / wall / cpu_count(environment.pinning.server_cpu, environment)


def _median(values: Iterable[float | None]) -> float | None:
    """The median of the values, or None as soon as one is unknown (a cell is judged by one rule)."""
    known = list(values)
    if not known or any(value is None for value in known):
        return None
    return statistics.median(value for value in known if value is not None)


@dataclass(frozen=True)
class Limit:
    """What limited one cell (a design's runs at one level), by the medians of its runs."""

    tool_busy: float | None  # share of the tool's CPUs; None: the record predates the measurement (old rule)
    server_busy: float | None  # share of the server's CPUs; None: not measured
    ceiling_share: float | None  # the cell's median ÷ the tool's ceiling; None without a ceiling

    @property
    def old_rule(self) -> bool:
        """True when the tool's CPU was not recorded, so tool-bound falls back on the share of the ceiling."""
        return self.tool_busy is None

    @property
    def tool_bound(self) -> bool:
        if self.tool_busy is not None:
            return self.tool_busy >= CPU_SATURATED
        return self.ceiling_share is not None and self.ceiling_share >= TOOL_BOUND_FRACTION

    @property
    def server_bound(self) -> bool:
        return self.server_busy is not None and self.server_busy >= CPU_SATURATED


def limit(runs: Sequence[Run], environment: Environment, ceiling: float | None) -> Limit:
    """The limit of a cell: its runs' median tool and server CPU shares, and its median rate over the ceiling."""
    rates = [run.requests_per_second for run in runs if run.requests_per_second is not None]
    share = statistics.median(rates) / ceiling if rates and ceiling else None
    return Limit(tool_busy=_median(tool_busy(run, environment) for run in runs),
                 server_busy=_median(server_busy(run, environment) for run in runs), ceiling_share=share)


def highest(ceiling_median: float | None, medians: Iterable[float]) -> float | None:
    """The tool's ceiling, the one definition: the highest of the ceiling design's median and every other median at
    the same level (a rate the tool reached is one it can reach); None when the ceiling was not measured."""
    if ceiling_median is None:
        return None
    return max([ceiling_median, *medians])


def ceiling_row(ceiling_name: str | None, medians: Mapping[str, float | None]) -> tuple[str | None, float | None]:
    """For a record of named rows measured at one level (the how-fast steps): the row whose median is the tool's
    ceiling (`highest`: the ceiling row's or a faster one's) and that median; no median when the ceiling row has none."""
    measured = {name: median for name, median in medians.items() if median is not None}
    if not ceiling_name or ceiling_name not in measured:
        return ceiling_name, None
    ceiling = highest(measured[ceiling_name], measured.values())
    return next(name for name, median in measured.items() if median == ceiling), ceiling


def run_level(record: ScenarioRecord, run: Run) -> float:
    """The level a run belongs to: its offered rate in an open-loop sweep, else its concurrency."""
    if isinstance(record.settings.rate, list) and run.get("rate") is not None:
        return run.get("rate")
    return run.concurrency


def _medians(outcome: Outcome, record: ScenarioRecord) -> dict[tuple[int | None, float], float]:
    """An outcome's median requests/s by (size, level), over its successful runs."""
    grouped: dict[tuple[int | None, float], list[float]] = {}
    for run in outcome.runs:
        if run.error is None and run.requests_per_second is not None:
            grouped.setdefault((run.get("size"), run_level(record, run)), []).append(run.requests_per_second)
    return {key: statistics.median(rates) for key, rates in grouped.items()}


def ceilings(record: ScenarioRecord) -> dict[float, float]:
    """The tool's ceiling by level (`highest`): the ceiling design's median there, or a faster cell's; {} for a
    record that measured no ceiling, and no entry at a level where the ceiling design has no successful run."""
    if record.ceiling is None:
        return {}
    ceiling_medians: dict[float, float] = {}
    for (_, level), median in _medians(record.ceiling, record).items():
        ceiling_medians[level] = max(median, ceiling_medians.get(level, median))
    by_level: dict[float, list[float]] = {}
    for design in record.designs:
        for (_, level), median in _medians(design, record).items():
            by_level.setdefault(level, []).append(median)
    return {level: found for level, median in ceiling_medians.items()
            if (found := highest(median, by_level.get(level, []))) is not None}
