"""The deployment suite's records (suites/deployment.py): the idle-timeout race behind nginx
(results/deployment/proxy-race.json) and servers past their capacity (results/deployment/overload.json).
Each keeps its plan table's settings (model/deployment_plan.py) and every run, a failed one with its error.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.model.deployment_plan import OverloadSettings, RaceSettings
from harness.model.records.common import Environment
from harness.model.records.scenario_record import Latency
from harness.model.typed import Typed, optional


PER = 10_000  # the race's 502s are counted per this many requests (bad_gateway_per_10k)


class DeploymentScenario(Typed):
    """Which plan table ran: its id and title."""

    id: str
    title: str


class RaceResult(Typed):
    """What the race client (clients/idle_race.py) counted: every answer by status, and by the gap's offset."""

    sent: int
    statuses: dict[str, int]  # status -> answers
    errors: dict[str, int]  # no answer: what happened -> requests
    by_offset_ms: dict[str, dict[str, int]]  # the gap's offset from the timeout (ms) -> status -> answers
    duration_s: float

    def answers(self, status: int) -> int:
        """How many requests got this status."""
        return self.statuses.get(str(status), 0)


class RaceRun(Typed):
    """One server, one setting (its default timeout, or the fix), one method: behind nginx, the bursts, the 502s.

    A run whose server did not start keeps only what it was and its error."""

    design: str
    label: str  # "defaults" or "fix"
    method: str
    arguments: list[str] | None = optional()
    timeout_s: float | None = optional()
    source: str | None = optional()
    server_command: list[str] | None = optional()
    proxy_command: list[str] | None = optional()
    load_command: list[str] | None = optional()
    server_alive: bool | None = optional()
    exit_code: int | None = optional()
    result: RaceResult | None = optional()
    bad_gateway_per_10k: float | None = optional()  # None: nothing was sent
    error: str | None = optional()


class CauseRun(Typed):
    """Another cause of 502 reproduced behind the same nginx: each request's status (0: no answer) and seconds."""

    id: str
    cause: str
    design: str
    arguments: list[str]
    delay: float
    server_command: list[str] | None = optional()
    statuses: list[int] | None = optional()
    seconds: list[float] | None = optional()
    error: str | None = optional()

    def answers(self, status: int) -> int:
        return (self.statuses or []).count(status)


class RaceRecord(Typed):
    """results/deployment/proxy-race.json."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "proxy-race"
    scenario: DeploymentScenario
    mode: str  # "full" or "quick"
    settings: RaceSettings
    environment: Environment
    started_utc: str
    finished_utc: str
    runs: list[RaceRun]
    causes: list[CauseRun] | None = optional()  # other causes of 502, each reproduced


class OverloadCell(Typed):
    """vegeta at one rate against one server (clients/tools/vegeta.py); a run vegeta could not make keeps only the
    command and its error. Not scenario.Run: no repetition, resources or warm-up, and the multiple of the capacity."""

    tool: str
    command: list[str]
    concurrency: int  # vegeta's -max-workers
    keep_alive: bool
    exit_code: int | None
    requests_sent: int | None = optional()
    complete: int | None = optional()
    failed: int | None = optional()  # no answer: refused, reset or past the timeout
    failed_by_kind: dict[str, int] | None = optional()
    status_counts: dict[str, int] | None = optional()
    non_2xx: int | None = optional()
    requests_per_second: float | None = optional()  # 2xx answers a second
    duration_s: float | None = optional()
    latency_ms: Latency | None = optional()  # every answer's, from when vegeta sent it
    latency_ms_2xx: Latency | None = optional()
    late_ms: Latency | None = optional()  # how late vegeta sent its requests against the schedule (p50, p99)
    rate: float | None = optional()
    error: str | None = None
    multiple: float | None = optional()  # of the capacity
    load_command: list[str] | None = optional()  # the command as run, pinned
    load_tool_resources: Any = optional()  # vegeta's own CPU and wall time, as the tool adapter reports it

    def answers(self, status: int) -> int:
        """How many requests got this status."""
        return (self.status_counts or {}).get(str(status), 0)


class TimelinePoint(Typed):
    """One second of a server's overload run, by when vegeta sent each request (clients/tools/vegeta.py, timeline)."""

    t_s: float  # seconds from the run's first request
    sent: int
    ok: int  # answered 2xx
    refused: int  # answered otherwise (503)
    failed: int  # no answer: refused, reset or past vegeta's timeout
    p50_ms: float | None  # of the 2xx answers to the requests sent in this second
    p99_ms: float | None
    in_flight_peak: int  # the most requests sent and not yet answered at any instant of the second


class OverloadRun(Typed):
    """One server process through every rate in turn (the ceiling's: nginx at the highest rate alone)."""

    design: str
    arguments: list[str]
    admission: str  # its admission control, in words
    cells: list[OverloadCell]
    server_command: list[str] | None = optional()
    server_alive: bool | None = optional()
    exit_code: int | None = optional()
    error: str | None = optional()  # its server did not start, or died at a rate
    timeline: list[TimelinePoint] | None = optional()  # every rate's requests together, second by second


class OverloadRecord(Typed):
    """results/deployment/overload.json."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "overload"
    scenario: DeploymentScenario
    mode: str  # "full" or "quick"
    settings: OverloadSettings
    environment: Environment
    started_utc: str
    finished_utc: str
    ceiling: OverloadRun
    runs: list[OverloadRun]
