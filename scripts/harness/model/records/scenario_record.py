"""A scenario's record (suites/runner.py writes it, results/<scenario>.json): what ran, where, when, every
design's runs. The shape every load scenario shares; the other suites' records have their own modules here."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, ClassVar

from harness.model.records.common import Environment
from harness.model.records.typed import CONVERTERS, RecordShapeError, Typed, optional
from harness.model.settings import NAME_KEYS, ScenarioSettings


def _settings_from_json(data: Any, where: str) -> ScenarioSettings:
    if not isinstance(data, dict):
        raise RecordShapeError(f"{where}: expected the settings as an object, found {type(data).__name__}")
    return ScenarioSettings.from_record(data)


CONVERTERS[ScenarioSettings] = (_settings_from_json, ScenarioSettings.to_record)


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


class Run(Typed):
    """One run of the load tool against one design at one concurrency: what the tool said, and the server's resources.

    The first fields every tool gives (None where a failed run could not say), written even when None; the
    optional ones only the tools, or the settings, that measure them."""

    tool: str
    concurrency: int
    command: list[str] | None = None
    keep_alive: bool | None = None
    exit_code: int | None = None
    complete: int | None = None
    failed: int | None = None
    requests_per_second: float | None = None
    duration_s: float | None = None
    latency_ms: Latency | None = None
    error: str | None = None
    requests_requested: int | None = None
    repetition: int | None = None
    time_wait_before: int | None = None
    time_wait_overflows: int | None = None
    time_limit: float | None = None
    server_resources: ServerResources | None = None
    load_tool_resources: LoadToolResources | None = optional()  # records before it was measured lack it
    non_2xx: int | None = optional()
    failed_by_kind: dict[str, int] | None = optional()
    answered: int | None = optional()
    connections: int | None = optional()
    connect_ms: Latency | None = optional()
    open_files: OpenFiles | None = optional()
    keep_alive_requests: int | None = optional()
    server_command: list[str] | None = optional()
    load_command: list[str] | None = optional()
    warm_up: WarmUp | None = optional()
    bytes: int | None = optional()
    header_statistic: HeaderStatistic | None = optional()
    stopped_by_time_limit: bool | None = optional()
    requests_sent: int | None = optional()
    proxy_command: list[str] | None = optional()  # the reverse proxy's, for a design behind one
    delay_proxy_command: list[str] | None = optional()
    status_counts: dict[str, int] | None = optional()
    latency_ms_2xx: Latency | None = optional()
    late_ms: Latency | None = optional()
    rate: float | None = optional()
    keep_alive_note: str | None = optional()
    skipped: int | None = optional()
    mode: str | None = optional()
    max_in_flight: int | None = optional()
    service_ms: Latency | None = optional()
    late: int | None = optional()
    late_tolerance_ms: float | None = optional()
    timed_out: bool | None = optional()
    batches_timed: int | None = optional()
    latency_per_batch_of: int | None = optional()
    timeline: list[Any] | None = optional()  # the load client's moments per request (TracedRun.timeline says more)
    size: int | None = optional()
    clock_start_unix_s: float | None = optional()
    traced: TracedRun | None = optional()
    gil: str | None = optional()  # "enabled"/"disabled" inside the server after the run (system/gil_report.py)

    def get(self, name: str) -> Any:
        """The run's value called `name`; None where this run's tool did not report it. A name no run has is an
        AttributeError. (Readers ask this way so that the fields can move into per-tool parts: issue 30.)"""
        if name not in {item.name for item in dataclasses.fields(self)}:
            raise AttributeError(f"no run has a value `{name}`")
        return getattr(self, name)


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


class ScenarioEntry(Typed):
    """The catalogue entry the scenario ran from: its names, and its settings kept flat beside them as in the
    catalogue (`settings` here; the record's own `settings` are the ones the run used, quick or full)."""

    id: str
    title: str
    article: str
    tool: str
    designs: list[str]
    quick: dict[str, Any]  # the settings a quick run replaces, as the catalogue gives them
    published: Any  # the article's own figures, keyed by level (`figures_50`, `failed_50`): free-form by design
    settings: ScenarioSettings

    @classmethod
    def from_flat(cls, data: dict[str, Any]) -> dict[str, Any]:
        names = {key: value for key, value in data.items() if key in NAME_KEYS}
        return {**names, "settings": {key: value for key, value in data.items() if key not in NAME_KEYS}}

    def to_flat(self, data: dict[str, Any]) -> dict[str, Any]:
        settings = data.pop("settings")
        return {key: data[key] for key in ("id", "title", "article", "tool")} | settings | {
            key: data[key] for key in ("designs", "quick", "published")}


class ScenarioRecord(Typed):
    """results/<scenario>.json: one scenario's complete run (or a quick or partial one, in build/results/)."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    scenario: ScenarioEntry
    mode: str  # "full" or "quick"
    settings: ScenarioSettings
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
