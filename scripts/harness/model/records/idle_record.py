"""The idle-connections record (suites/idle.py, `bench.py idle`, results/idle-connections/<design>.json): one design
holding many idle keep-alive connections, its memory and a probe client's latency meanwhile."""

from __future__ import annotations

from typing import Any, ClassVar

from harness.model.records.common import Environment
from harness.model.typed import Typed


def _named(data: dict[str, Any]) -> dict[str, Any]:
    """Schema 0 (records written before they carried a version) lacked only their kind's name."""
    return {"kind": "idle-connections", **data}


class IdleProbe(Typed):
    """The probe client during the hold: a fresh connection asking for / every 0.25 s."""

    requests: int  # answered
    failed: int
    median_ms: float | None  # None when none was answered
    max_ms: float | None


class IdleRecord(Typed):
    """One design's idle-connections run: connections asked, kept, still held at the hold's start and end; its process
    group's memory before and at the peak; the growth per connection held; the probe's latency."""

    SCHEMA: ClassVar[int | None] = 1
    MIGRATIONS: ClassVar[dict[int, Any]] = {0: _named}

    schema: int
    kind: str  # "idle-connections"
    design: str
    server_command: list[str]
    connections_asked: int
    connections_kept_alive: int
    connections_refused: dict[str, int]  # why each that did not stay open did not -> how many
    connections_open_at_hold_start: int  # the denominator of kib_per_connection: connections actually held
    connections_open_after_hold: int
    opening_seconds: float
    hold_seconds: float
    baseline_rss_mib: float
    peak_rss_mib: float
    baseline_pss_mib: float | None  # None where the kernel gives no PSS
    peak_pss_mib: float | None
    memory_metric: str  # "PSS" or "RSS": what kib_per_connection is the growth of
    kib_per_connection: float | None  # None when no connection was held
    probe: IdleProbe
    server_alive_after: bool
    server_exit_code: int | None  # after its graceful stop: 0 expected
    started_utc: str
    finished_utc: str
    environment: Environment

    def baseline_mib(self) -> float | None:
        """The memory before the connections, in memory_metric."""
        return self.baseline_pss_mib if self.memory_metric == "PSS" else self.baseline_rss_mib

    def peak_mib(self) -> float | None:
        """The memory at its peak during the hold, in memory_metric."""
        return self.peak_pss_mib if self.memory_metric == "PSS" else self.peak_rss_mib
