"""A scenario's record (suites/runner.py writes it, results/<scenario>.json): what ran, where, when, every
design's runs. The shape every load scenario shares; the other suites' records have their own modules here.

A run (`Run`) keeps at its top what every run has: the tool's counts, rate and latency, its exit code and error,
the server's and the tool's resources (19 fields; 53 before schema 2, the union of every tool's extras). What only
one load tool reports is in `extras`, a class per tool (WrkExtras, HttpClientExtras, ...) picked by the run's
`tool` (typed.tagged: each class's TAG; a tool the catalogue knows has one, a test keeps it so). What the runner
recorded around the tool's run (the commands as pinned, the warm-up, TIME_WAIT, a sizing sweep's count, the GIL,
a traced rerun) is in `runner` (RunnerExtras). `non_2xx` stays at the top: four tools count it, and the tables add
it up whatever the tool. Readers ask `run.get(name)` wherever a value is kept, so a renderer never asks which tool
made the run. Tools still report one flat dict (clients/tools/*.py); `Run.from_report` sorts it into the parts.

Records on disk are not rewritten: schema 1 (flat runs) is read through the migration to 2, which sorts each run's
keys with the same function (nested_run), and every record written from now on is schema 2. A test reads every
committed record and checks that the migration only moved keys (tests/harness/model/test_typed_records.py)."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from datetime import datetime
from functools import cache
from typing import Any, ClassVar, Self

from harness.model.records.common import Environment
from harness.model.typed import RecordShapeError, Typed, any_age, optional, tagged
from harness.model.catalogue import Scenario
from harness.model.settings import ScenarioSettings


class Latency(Typed):
    """Milliseconds: the mean and percentiles of one run's answers (or batches, pipelined)."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None
    mode: float | None = optional()  # the most frequent latency (hey's histogram), where the tool gives it


class ServerResources(Typed):
    """The server's process group during one run (system/resources.py): memory, CPU, processes."""

    peak_rss_mib: float | None
    cpu_seconds: float | None
    cpu_seconds_per_1000_requests: float | None
    peak_processes: int | None
    peak_pss_mib: float | None = optional()  # PSS: records before it was measured lack it


class LoadToolResources(Typed):
    """The load tool's own process during one run (system/processes.run_tool, os.wait4): its CPU time over its
    wall time, so a reader can tell a tool at the limit of its core from a server at the limit of its own."""

    cpu_seconds: float
    user_seconds: float
    system_seconds: float
    wall_seconds: float


class WarmUp(Typed):
    """The scenario's `warm_up`: the same load for that many seconds before the run, not counted."""

    seconds: float
    command: list[str] | None
    requests_per_second: float | None
    failed: int | None
    error: str | None


class HeaderStatistic(Typed):
    """The numbers a response header carried (`header_statistic`, e.g. the pool's wait X-Pool-Wait-Us)."""

    header: str
    count: int
    missing: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None


class OpenFiles(Typed):
    """The open-files limit the client ran under (clients/tools/echo.py)."""

    soft: int
    hard: int
    raised_from: int | None


class TracedRun(Typed):
    """The same load again with the server's system calls traced: the timeline player's run (suites/runner.py)."""

    timeline: list[Any] | None  # the load client's moments per request: its own JSON, drawn by the player as is
    server_trace: Any  # the server's system calls per connection (system/syscall_trace.py), as the trace gave them
    clock_start_unix_s: float | None
    complete: int | None
    failed: int | None
    requests_per_second: float | None
    latency_ms: Latency | None
    duration_s: float | None
    error: str | None


class Interpreter(Typed):
    """The CPython a scenario's `python` asked for, as it said itself (system/launcher.describe_interpreter)."""

    asked: str
    version: str | None  # "3.12.1"; None where this machine lacks it
    gil: str | None = optional()
    executable: str | None = optional()
    missing: str | None = optional()  # why it could not run, and how to get it


class DatabaseRun(Typed):
    """The scratch PostgreSQL a database scenario ran against (system/postgres.py), beside database_command."""

    version: str  # `postgres --version`
    cpu: str | None  # the taskset list it and its backends were held to; None: not pinned
    placement: str  # what shares which CPU, and why
    authentication: str  # how the designs' connections authenticated


class AbExtras(Typed):
    """What ab reports beyond every tool's fields (clients/tools/ab.py)."""

    TAG: ClassVar[str | None] = "ab"

    failed_by_kind: dict[str, int] | None = optional()  # ab's failed requests: connect, receive, length, exceptions
    keep_alive_requests: int | None = optional()  # answers that came on a kept connection (ab -k)


class EchoExtras(Typed):
    """What our line-echo client reports (clients/tools/echo.py): connections and echoes, not HTTP answers."""

    TAG: ClassVar[str | None] = "echo-client"

    failed_by_kind: dict[str, int] | None = optional()
    answered: int | None = optional()
    connections: int | None = optional()
    connect_ms: Latency | None = optional()
    open_files: OpenFiles | None = optional()


class HeyExtras(Typed):
    """What hey reports beyond every tool's fields (clients/tools/hey.py)."""

    TAG: ClassVar[str | None] = "hey"

    stopped_by_time_limit: bool | None = optional()
    requests_sent: int | None = optional()


class HttpClientExtras(Typed):
    """What our own client, http_load.py, reports (clients/tools/http_client.py): closed or open loop, and in an open
    loop how late it sent against its schedule; its timeline where the scenario asks for one."""

    TAG: ClassVar[str | None] = "http-client"

    keep_alive_note: str | None = optional()
    failed_by_kind: dict[str, int] | None = optional()
    skipped: int | None = optional()
    mode: str | None = optional()  # "closed" or "open"
    rate: float | None = optional()  # the offered rate, open loop: a rate sweep's level
    max_in_flight: int | None = optional()
    service_ms: Latency | None = optional()
    late: int | None = optional()
    late_tolerance_ms: float | None = optional()
    timed_out: bool | None = optional()
    timeline: list[Any] | None = optional()  # the load client's moments per request (TracedRun.timeline says more)
    clock_start_unix_s: float | None = optional()


class VegetaExtras(Typed):
    """What vegeta reports beyond every tool's fields (clients/tools/vegeta.py): an open loop at a fixed rate."""

    TAG: ClassVar[str | None] = "vegeta"

    requests_sent: int | None = optional()
    failed_by_kind: dict[str, int] | None = optional()
    status_counts: dict[str, int] | None = optional()
    latency_ms_2xx: Latency | None = optional()
    late_ms: Latency | None = optional()
    rate: float | None = optional()  # the offered rate: a rate sweep's level


class WrkExtras(Typed):
    """What wrk reports beyond every tool's fields (clients/tools/wrk.py and its Lua scripts)."""

    TAG: ClassVar[str | None] = "wrk"

    failed_by_kind: dict[str, int] | None = optional()
    bytes: int | None = optional()
    header_statistic: HeaderStatistic | None = optional()
    batches_timed: int | None = optional()  # pipelined: latency per batch of `latency_per_batch_of` requests
    latency_per_batch_of: int | None = optional()


# Every load tool's extras, one class per tool, picked by the run's `tool` (each class's TAG).
ToolExtras = AbExtras | EchoExtras | HeyExtras | HttpClientExtras | VegetaExtras | WrkExtras
EXTRAS_BY_TOOL: dict[str, type[Typed]] = {option.TAG: option for option in typing.get_args(ToolExtras)}


class RunnerExtras(Typed):
    """What suites/runner.py recorded around the tool's run in a scenario: the system's TIME_WAIT, exactly what ran
    (pinned), the warm-up, and what some settings add (a sizing sweep's count, the GIL inside the server, a traced
    rerun). Other suites that record a Run (how_fast.py) have none."""

    time_wait_before: int | None = None
    time_wait_overflows: int | None = None
    server_command: list[str] | None = optional()
    load_command: list[str] | None = optional()
    proxy_command: list[str] | None = optional()  # the reverse proxy's, for a design behind one
    delay_proxy_command: list[str] | None = optional()
    warm_up: WarmUp | None = optional()
    size: int | None = optional()  # a sizing sweep's count (workers, threads) the server ran with
    gil: str | None = optional()  # "enabled"/"disabled" inside the server after the run (system/gil_report.py)
    traced: TracedRun | None = optional()


class Run(Typed):
    """One run of the load tool against one design at one concurrency: what the tool said, and the server's resources.

    Its own fields are what every run has (None where a failed run could not say), written even when None, and
    two parts: `extras`, what only its tool reports (one class per tool above, picked by `tool`), and `runner`, what
    suites/runner.py recorded around it. A reader asks `run.get(name)` for a value wherever it is kept.

    A tool's adapter (clients/tools/*.py) reports a flat dict; `Run.from_report` sorts its keys into the three
    parts (nested_run), and records of schema 1, written flat, are read through the same function."""

    tool: str
    concurrency: int
    command: list[str] | None = None
    keep_alive: bool | None = None
    exit_code: int | None = None
    complete: int | None = None
    failed: int | None = None
    non_2xx: int | None = optional()  # answers outside 2xx, counted apart from `failed` by the tools that count them
    requests_per_second: float | None = None
    duration_s: float | None = None
    latency_ms: Latency | None = None
    error: str | None = None
    requests_requested: int | None = None
    repetition: int | None = None
    time_limit: float | None = None
    server_resources: ServerResources | None = None
    load_tool_resources: LoadToolResources | None = optional()  # records before it was measured lack it
    extras: ToolExtras | None = tagged("tool")
    runner: RunnerExtras | None = optional()

    def __post_init__(self) -> None:
        if self.extras is not None and self.extras.TAG != self.tool:
            raise RecordShapeError(f"a {self.tool} run with {self.extras.TAG}'s extras ({type(self.extras).__name__})")

    @classmethod
    def from_report(cls, report: dict[str, Any], where: str) -> Self:
        """The run from a flat dict (a tool's report, with the runner's keys beside it), its keys sorted into parts."""
        return cls.from_json(nested_run(cls, report), where)

    def get(self, name: str) -> Any:
        """The run's value called `name`, wherever it is kept (its own field, its tool's extras, the runner's); None
        where this run's tool or runner did not report it. A name no part of any run has is an AttributeError."""
        if name in field_names(type(self)):
            return getattr(self, name)
        if name in field_names(RunnerExtras):
            return getattr(self.runner, name) if self.runner else None
        if any(name in field_names(kind) for kind in EXTRAS_BY_TOOL.values()):
            return getattr(self.extras, name, None)
        raise AttributeError(f"no run has a value `{name}` (its fields, RunnerExtras or a tool's extras)")


@cache
def field_names(kind: type[Typed]) -> frozenset[str]:
    return frozenset(item.name for item in dataclasses.fields(kind))


def nested_run(kind: type[Run], flat: dict[str, Any]) -> dict[str, Any]:
    """A run's flat data (a tool's report and the runner's keys, or a schema-1 record's run) in the parts of `kind`:
    its own fields at the top, the runner's under `runner`, its tool's extras under `extras`. A key none of them has
    stays at the top, where reading names it and the key it may have meant."""
    extras_kind = EXTRAS_BY_TOOL.get(str(flat.get("tool")))
    top: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {"extras": {}, "runner": {}}
    for key, value in flat.items():
        if key in field_names(kind):
            top[key] = value
        elif key in field_names(RunnerExtras):
            parts["runner"][key] = value
        elif extras_kind is not None and key in field_names(extras_kind):
            parts["extras"][key] = value
        else:
            top[key] = value
    return top | {name: part for name, part in parts.items() if part}


def nested_runs(outcome: Any, kind: type[Run] = Run) -> Any:
    """An outcome's (or a row's) data with every run nested (nested_run); anything not of that shape as it is."""
    if not isinstance(outcome, dict) or not isinstance(outcome.get("runs"), list):
        return outcome
    return {**outcome, "runs": [nested_run(kind, run) if isinstance(run, dict) else run for run in outcome["runs"]]}


def nested_outcomes(data: dict[str, Any], keys: tuple[str, ...], kind: type[Run] = Run) -> dict[str, Any]:
    """A record's data with the runs of the outcomes under `keys` (a list of them, or one) nested (nested_runs): the
    migration of schema-1 records, whose runs were flat."""
    nested = dict(data)
    for key in keys:
        if isinstance(data.get(key), list):
            nested[key] = [nested_runs(outcome, kind) for outcome in data[key]]
        elif key in data:
            nested[key] = nested_runs(data[key], kind)
    return nested


class Outcome(Typed):
    """One design in a scenario: whether it started and answered correctly, and its runs."""

    name: str
    title: str
    model: str
    reproduces: list[str]  # the articles' designs it reproduces, "article/design"
    status: str  # "ok", or why the design stopped being measured
    problems: list[str]
    stderr_tail: str | None
    server_exit_codes: list[int | None]  # one per start of the server; None where none was known
    runs: list[Run]
    verified: Any = optional()  # what verification checked (records before it was recorded lack it)
    delay: float | None = optional()  # the ceiling's: always 0 (no simulated call)
    measured_in: str | None = optional()  # a design taken from another record, by its id


class ScenarioRecord(Typed):
    """results/<scenario>.json: one scenario's complete run (or a quick or partial one, in build/results/)."""

    SCHEMA: ClassVar[int | None] = 2
    MIGRATIONS: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
        # 1 -> 2: each run's tool extras under `extras` and the runner's keys under `runner` (Run's own fields 53 -> 19)
        1: lambda data: nested_outcomes(data, ("designs", "ceiling")),
    }

    schema: int
    scenario: Scenario  # the catalogue entry it ran from, its settings flat beside its names as the catalogue has them
    mode: str  # "full" or "quick"
    settings: ScenarioSettings = any_age()
    environment: Environment
    started_utc: str
    finished_utc: str
    designs: list[Outcome]
    ceiling: Outcome | None
    interpreter: Interpreter | None = optional()  # the exact CPython the designs ran on, where the scenario chose one
    database_command: Any = optional()  # how the scratch PostgreSQL ran: its programs and every changed setting
    database: DatabaseRun | None = optional()  # its version, CPU placement and authentication
    interleaved_with: list[str] | None = optional()  # the scenarios measured round robin with this one

    @property
    def id(self) -> str:
        return self.scenario.id

    def outcomes(self) -> list[Outcome]:
        """Every design's outcome, the ceiling's last."""
        return self.designs + ([self.ceiling] if self.ceiling else [])

    def design(self, name: str) -> Outcome | None:
        return next((outcome for outcome in self.designs if outcome.name == name), None)

    def wall_seconds(self) -> float:
        """How long the scenario's run took, from its UTC start and end."""
        started, finished = (datetime.fromisoformat(moment.replace("Z", "+00:00"))
                             for moment in (self.started_utc, self.finished_utc))
        return (finished - started).total_seconds()

    def load_seconds(self) -> float:
        """How long a load tool was running during the scenario: the sum of every cell's measured duration."""
        return sum(run.duration_s or 0.0 for outcome in self.outcomes() for run in outcome.runs)
