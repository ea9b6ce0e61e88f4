"""The multi-process suites' records (results/multi-process/): how evenly workers share connections
(suites/balance.py, balance.json), restarts under steady load (suites/restart.py, restart.json) and one
restart with requests in flight and kept-alive connections idle (restart-in-flight.json).

A restart record written before the suite repeated its targets kept a target's one run in the target's own
row (with `error` where its server did not start); RestartTarget reads that shape as a target of one run.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.model.records.common import Environment
from harness.model.records.scenario_record import Latency, OpenFiles
from harness.model.typed import Typed, optional


class RunError(Typed):
    """A run of a target that gave no measurement: its server did not start, or its client gave no report."""

    repetition: int
    error: str


# --- balance.json ---

class BalanceScenario(Typed):
    """What every balance row ran: so many requests, each on a new connection, so many at a time."""

    id: str
    requests: int
    concurrency: int
    delay: float
    quick: bool


class BalanceRow(Typed):
    """One design at one worker count: the connections each worker said it served, largest first."""

    name: str
    title: str
    workers: int
    server_command: list[str]
    load_command: list[str]
    served: list[int]
    requests_ok: int
    failed: int
    exit_code: int | None


class BalanceRecord(Typed):
    """results/multi-process/balance.json."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "balance"
    scenario: BalanceScenario
    environment: Environment
    started_utc: str
    finished_utc: str
    rows: list[BalanceRow]


# --- restart.json ---

class LoadReport(Typed):
    """What our open-loop client (scripts/http_load.py) reports of one run: its settings, its counts, its latency."""

    tool: str
    url: str
    mode: str  # "open" (a rate) or "closed" (a concurrency)
    requests: int
    concurrency: int | None
    rate: float | None
    max_in_flight: int | None
    duration_limit_s: float | None
    timeout_s: float | None
    complete: int
    failed: int
    failed_by_kind: dict[str, int]  # connect (refused), read (reset or cut), status, length, timeout
    skipped: int
    timed_out: bool
    interrupted: bool
    wall_time_s: float
    requests_per_second: float
    latency_ms: Latency | None  # from when each request was due
    keep_alive: bool
    python: str
    open_files: OpenFiles
    clock_start_s: float  # CLOCK_MONOTONIC at its start: the harness places its restarts on the client's clock
    service_ms: Latency | None = optional()  # open loop: from when each request was sent
    late: int | None = optional()
    late_tolerance_ms: float | None = optional()
    clock_start_unix_s: float | None = optional()  # the same instant on the Unix clock (reports since it was added)


class RestartMoment(Typed):
    """One restart, on the client's clock: when it began, and how long the harness took to do it."""

    at_s: float
    took_s: float


class Bin(Typed):
    """The requests due in one bin of the run (`bin_seconds` wide, starting at `t`): due, ok, failed, ok latency."""

    t: float
    due: int
    ok: int
    failed: int
    p50_ms: float | None  # None: no request of the bin was answered
    max_ms: float | None


class Failure(Typed):
    """A failed request: when it was due, and what went wrong (http_load.py's result: connect, read, ...)."""

    t: float
    result: str


class RestartRun(Typed):
    """One run of a target: the load, the restarts, every failed request, and the timeline folded into bins."""

    repetition: int = 0  # records of one run per target lack it
    server_command: list[str]
    load_command: list[str]
    restarts: list[RestartMoment]
    report: LoadReport
    failures: list[Failure]
    bins: list[Bin]
    alive_at_end: bool
    exit_code: int | None
    stderr_tail: str


class RestartTarget(Typed):
    """One server and how it was restarted (a signal, or stop then start), with its runs."""

    name: str
    title: str
    method: str  # "signal" or "stop-start"
    signal: str | None
    label: str
    source: str  # where the restart method is documented
    runs: list[RestartRun]
    errors: list[RunError]

    @classmethod
    def from_flat(cls, data: dict[str, Any]) -> dict[str, Any]:
        """An old row (its one run's keys beside the target's, or `error`) as a target of one run (module docstring)."""
        if "runs" in data:
            return data
        own = {"name", "title", "method", "signal", "label", "source"}
        run = {key: value for key, value in data.items() if key not in own | {"error"}}
        return {**{key: value for key, value in data.items() if key in own}, "title": data.get("title", data["name"]),
                "runs": [run] if run else [],
                "errors": [{"repetition": 0, "error": data["error"]}] if "error" in data else []}


class RestartScenario(Typed):
    """The plan as it ran (scripts/catalogue/restart/restart.toml): the load, the restarts' moments, the runs."""

    id: str
    title: str
    rate: float
    seconds: float
    delay: float
    restarts: int
    every: float
    moments: list[float]
    repeat: int
    bin_seconds: float
    quick: bool


class RestartRecord(Typed):
    """results/multi-process/restart.json."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "restart"
    scenario: RestartScenario
    environment: Environment
    started_utc: str
    finished_utc: str
    targets: list[RestartTarget]


# --- restart-in-flight.json ---

class Answer(Typed):
    """One request of clients/restart_probe.py, seconds from the restart: its outcome (a status, or closed,
    reset, timeout, refused) and whether the server kept the connection open."""

    outcome: int | str
    keep_alive: bool
    sent_s: float
    ended_s: float
    took_s: float


class IdleConnection(Typed):
    """A kept-alive connection idle at the restart: its first answer, when and how the server closed it, its next."""

    first: Answer
    closed_by_server: str | None  # "closed", "reset", "unexpected bytes" or "before the restart"; None: still open
    closed_at_s: float | None
    next_at_s: float
    reused: bool  # the next request went on the kept connection (else on a new one)
    next: Answer


class ProbeReport(Typed):
    """What the probe saw: the restart's moment (its clock), the idle connections, the requests in flight."""

    restart_at: float
    idle: list[IdleConnection]
    long: list[Answer]


class InFlightRun(Typed):
    """One run: one restart signal, and what the probe's clients saw."""

    repetition: int
    probe_command: list[str]
    server_command: list[str]
    signal_lag_s: float | None = optional()  # from the probe's line to the signal; absent when it never came
    report: ProbeReport | None = optional()
    error: str | None = optional()  # why the run has no report
    alive_at_end: bool
    exit_code: int | None
    stderr_tail: str


class InFlightTarget(Typed):
    """One server and its restart signal (with the arguments added to its command), with its runs."""

    name: str
    title: str
    signal: str
    arguments: list[str]
    label: str
    source: str
    runs: list[InFlightRun]
    errors: list[RunError]

    def reported(self) -> list[InFlightRun]:
        """The runs with a report."""
        return [run for run in self.runs if run.report is not None]


class InFlightScenario(Typed):
    """The [in_flight] plan as it ran: the long requests, the idle connections, when the restart came."""

    id: str
    title: str
    delay: float
    idle: int
    long: int
    restart_after: float
    next_after: list[float]
    repeat: int
    quick: bool


class InFlightRecord(Typed):
    """results/multi-process/restart-in-flight.json."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "restart-in-flight"
    scenario: InFlightScenario
    environment: Environment
    started_utc: str
    finished_utc: str
    targets: list[InFlightTarget]


MultiProcessRecord = BalanceRecord | RestartRecord | InFlightRecord
# The kinds results/multi-process/ holds, by the `kind` their JSON names.
MULTI_PROCESS_KINDS: dict[str, type[Typed]] = {
    "balance": BalanceRecord, "restart": RestartRecord, "restart-in-flight": InFlightRecord}
