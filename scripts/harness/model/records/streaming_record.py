"""The streaming suite's record (suites/streaming.py, `bench.py streaming`, results/streaming.json and, for a part of
the plan, results/streaming-<phases>.json): every stream design under every phase that takes it, the server sampled
over time and what the client (clients/sse_client.py) saw."""

from __future__ import annotations

from typing import Any, ClassVar

from harness.model.records.common import Environment
from harness.model.typed import Typed, optional


def _versioned(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (records written before they carried a version) is schema 1 without its `schema` key."""
    return data


class StreamPhase(Typed):
    """One phase of the plan (suites/streaming.py Phase), as it ran."""

    name: str
    streams: int
    seconds: float  # each stream's duration
    interval: float  # seconds between two events of a stream
    event_bytes: int
    slow_readers: int
    stop_after: float | None  # seconds after the streams are open: the stop signal (the stop phases only)
    designs: list[str] | None  # the designs the phase takes
    path: str  # what each stream asked for


class ServerSample(Typed):
    """The server's process group at one moment (every half second): memory, threads, descriptors, a fresh request."""

    t: float  # seconds since the design was checked
    pss_mib: float | None  # None where the kernel gives no PSS
    rss_mib: float
    threads: int
    fds: int
    processes: int
    fresh_ms: float | None  # a fresh GET / on a new connection; None: unanswered within the probe's timeout


class Distribution(Typed):
    """A value over the streams: its least, median, 99th percentile and largest (all None when no stream had one)."""

    min: float | None
    median: float | None
    p99: float | None
    max: float | None


class SlowReader(Typed):
    """One slow client: the bytes it read, and how its stream ended."""

    received_bytes: int
    outcome: str


class StreamClient(Typed):
    """What the client (clients/sse_client.py) saw of one design under one phase."""

    streams_asked: int
    streams_connected: int
    connect_failures: dict[str, int]  # why a stream was not connected -> how many
    connect_seconds: float
    streams_answered: int
    streams_with_events: int
    events: int
    events_per_stream: Distribution
    max_lag_seconds: Distribution  # per stream, its latest event's delay
    outcomes: dict[str, int]  # how the streams ended ("clean", "cut between events", ...) -> how many
    ended_monotonic: Distribution | None = optional()  # when they ended (the stop phases keep it from the signal)
    started_monotonic: float
    timeline: list[list[float]]  # (seconds since the start, events received so far)
    slow_readers: list[SlowReader]
    client_cpu_seconds: float
    client_wall_seconds: float
    event_loop: str
    ended_after_stop_seconds: Distribution | None = optional()  # the stop phases: when they ended, from the signal


class StreamRow(Typed):
    """One design under one phase. A design that failed to start or to answer has its problems and little else."""

    design: str
    phase: str
    server_command: list[str] | None = optional()  # absent when it did not start
    load_command: list[str] | None = optional()
    stop_seconds: float | None = optional()  # the stop phases: signal to the group gone; absent if killed at the cap
    stop_sent_after_open_seconds: float | None = optional()  # the stop phases: when the signal was sent
    server_alive_at_end: bool | None = optional()
    server_exit_code: int | None = optional()
    status: str  # "ok" or "failed"
    problems: list[str] | None = optional()  # why it failed
    samples: list[ServerSample] | None = optional()
    client: StreamClient | None = optional()
    # The figures a table shows (suites/streaming.py summary), on an "ok" row:
    baseline_pss_mib: float | None = optional()  # PSS, else RSS, at the first sample with descriptors
    peak_pss_mib: float | None = optional()
    peak_threads: int | None = optional()
    peak_fds: int | None = optional()
    fresh_ms_median: float | None = optional()
    fresh_ms_max: float | None = optional()
    fresh_failed: int | None = optional()
    fresh_asked: int | None = optional()
    events_expected: int | None = optional()
    client_cpu_share: float | None = optional()  # the client's CPU seconds over its wall seconds

    def stopped(self) -> bool:
        """Whether the stop signal was sent in this row (a stop phase's, measured)."""
        return self.stop_sent_after_open_seconds is not None


class StreamingRecord(Typed):
    """results/streaming.json: the whole plan (or streaming-<phases>.json: the phases named)."""

    SCHEMA: ClassVar[int | None] = 1
    MIGRATIONS: ClassVar[dict[int, Any]] = {0: _versioned}

    schema: int
    suite: str  # "streaming"
    quick: bool
    started_utc: str
    phases: list[StreamPhase]
    slow_path: str  # the slow readers' path, `{seconds}` for the phase's
    stop_cap_seconds: float  # a stop may take this long before SIGKILL
    rows: list[StreamRow]
    finished_utc: str
    environment: Environment

    def phase(self, name: str) -> StreamPhase:
        return next(phase for phase in self.phases if phase.name == name)
