"""The how-fast suite's records (suites/how_fast.py): a chain's steps measured under wrk (results/how-fast/steps.json,
results/fast-and-correct/steps.json) and the profile of the fastest design (results/profiles/<design>.json)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from harness.model.records.common import Environment
from harness.model.records.scenario_record import Run, nested_outcomes
from harness.model.typed import Typed, optional
from harness.model.suite_settings import StepsSettings


class StepsRun(Run):
    """One wrk run against one row: a scenario's run, and the exit code of the server stopped after it."""

    server_exit_code: int | None = optional()


class StepsRow(Typed):
    """One row of the steps table: a step of the chain (its server file written for the run) or a reference server."""

    name: str  # "step-N", or the reference's catalogue name
    title: str
    step: int | None  # the step's number; None for a reference server
    file: str | None = optional()  # the step's server file, from the repository's root (steps only)
    stop_signal: str
    runs: list[StepsRun]  # the runs that answered, every repetition
    problems: list[str]  # why a row stopped being measured (it is not measured again)
    server_command: list[str] | None = optional()  # absent when its server never started


class StepsRecord(Typed):
    """A chain's steps and its reference servers measured in one run, alternating their order (`how-fast steps`)."""

    SCHEMA: ClassVar[int | None] = 2
    MIGRATIONS: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
        1: lambda data: nested_outcomes(data, ("rows",), StepsRun),  # 1 -> 2: wrk's extras under each run's `extras`
    }

    schema: int
    kind: str  # "how-fast-steps"
    chain: str | None = optional()  # the chain's name; the first how-fast record predates chains
    mode: str  # "full" or "quick"
    settings: StepsSettings
    environment: Environment
    started_utc: str
    finished_utc: str
    rows: list[StepsRow]

    def row(self, name: str) -> StepsRow | None:
        return next((row for row in self.rows if row.name == name), None)


class ProfileCommands(Typed):
    """The three commands of a profile, as run (pinned): the server, wrk, and py-spy (the server's pid elided)."""

    server: list[str]
    load: list[str]
    profiler: list[str]


class ProfileCpu(Typed):
    """The server's own CPU time over the wrk run without the profiler (the kernel's count, /proc/PID/stat)."""

    user_seconds: float
    system_seconds: float
    note: str


class WrkSummary(Typed):
    """What wrk said of the run without the profiler (clients/tools/wrk.py parse_run)."""

    complete: int | None
    failed: int | None
    non_2xx: int | None
    duration_s: float | None
    requests_per_second: float | None


class Saturation(Typed):
    """Whether the profiled server was busy: its share of the time on CPU with and without the profiler, and the
    run without it against the steps table's last step (None where there is no steps record)."""

    server_busy: float
    server_busy_profiled: float
    profiled_requests_per_second: float | None
    steps_table_requests_per_second: float | None
    rate_of_steps_table: float | None


class ProfileRecord(Typed):
    """results/profiles/<design>.json: how the collapsed stacks beside it were sampled (`how-fast profile`)."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "profile"
    mode: str  # "full" or "quick"
    design: str
    profiler: str  # py-spy's version line
    rate_hz: int
    seconds: float  # of sampling
    connections: int
    started_utc: str
    finished_utc: str
    environment: Environment
    commands: ProfileCommands
    cpu: ProfileCpu
    wrk: WrkSummary
    saturation: Saturation | None = optional()  # profiles taken before the harness checked saturation lack it
