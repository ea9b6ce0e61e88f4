"""The settings of suites that are not load-tool scenarios, typed: what the suite runs with and writes into its
record, and what a renderer reads back (both sides read them, so they live in the model).

HostileSettings is the `[suite]` table of scripts/catalogue/hostile/cases.toml (which says what each
is), StepsSettings says how a how-fast steps record was measured (suites/how_fast.py), CountSettings how
the instruction counts were made (suites/instructions.py). Each is a typed part of its record
(model/typed.py), read strictly: a key it does not know is refused, naming the nearest one, and so is a record
that lacks a setting without a default. A new setting therefore comes with a default, or with a step in its record
kind's MIGRATIONS, or the committed records stop loading.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from harness.model.instruction_counts import AGREEMENT
from harness.model.typed import Typed, optional


class HostileSettings(Typed):
    """The `[suite]` table of scripts/catalogue/hostile/cases.toml, in its order."""

    delay: float
    probe_timeout: float
    probe_at: float
    after_timeout: float
    answer_within: float
    bound: float
    short_bound: float
    jobs: int
    settle: float
    idle_connections: int
    slowloris_connections: int
    resets: int
    emfile_headroom: int
    emfile_beyond: int
    emfile_connections: int
    emfile_hold: float
    big_bytes: int
    slow_reader_stall: float | None = None  # None: the case's bound
    behind_nginx: list[str] = field(default_factory=list)
    designs: list[str] | None = optional()  # [suite.quick] only: the few designs a quick run measures

    def to_json(self) -> dict[str, Any]:
        """As the record keeps them: every setting but the quick run's designs (`jobs`: the jobs that ran)."""
        return {key: value for key, value in super().to_json().items() if key != "designs"}

    def to_record(self, jobs: int) -> dict[str, Any]:
        """As a record keeps them after a run of that many jobs."""
        return {**self.to_json(), "jobs": jobs}


class StepsSettings(Typed):
    """How a how-fast steps record was measured: wrk's connections, seconds per run, runs per row, and its rows'
    reference (`relative_to`) and tool ceiling (the row, and the scenario whose ceiling design it is)."""

    connections: int
    seconds: float
    repeat: int
    delay: float = 0.0
    keep_alive: bool = True
    relative_to: str | None = None
    ceiling: str | None = None
    ceiling_scenario: str | None = None  # None: a record made before its rows carried flags (render/cells.py)
    request_heads: str | None = None  # None: wrk's one-header GET; "production": clients/tools/production_heads.txt


class CountSettings(Typed):
    """How the instruction counts were made: two request counts (their difference is per request), so many
    measurements of each, one kept-alive connection, no simulated call; two measurements agree within `agreement`."""

    requests: list[int]
    measurements: int
    connections: int = 1
    keep_alive: bool = True
    delay: float = 0.0
    agreement: float = AGREEMENT
