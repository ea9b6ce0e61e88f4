"""The settings of suites that are not load-tool scenarios, typed: what the suite runs with and writes into its
record, and what a renderer reads back (both sides read them, so they live in the model).

HostileSettings is the `[suite]` table of scripts/catalogue/hostile/cases.toml (which says what each
is); it reads a record of any age (from_record): keys it does not know are left out, a required setting
the record lacks reads None. StepsSettings says how a how-fast steps record was measured
(suites/how_fast.py), CountSettings how the instruction counts were made (suites/instructions.py):
both are parts of their typed records (model/records/typed.py), which refuse a key they do not know.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, TypeVar

from harness.model.instruction_counts import AGREEMENT
from harness.model.records.typed import Typed

T = TypeVar("T")


def from_record(kind: type[T], settings: dict[str, Any]) -> T:
    """A record's settings as `kind` (a dataclass), tolerating an old record (module docstring)."""
    known = {setting.name: setting for setting in fields(kind)}  # type: ignore[arg-type]  # kind is a dataclass
    lacking = {name: None for name, setting in known.items() if name not in settings
               and setting.default is MISSING and setting.default_factory is MISSING}
    return kind(**lacking, **{key: value for key, value in settings.items() if key in known})


@dataclass(frozen=True)
class HostileSettings:
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
    designs: list[str] | None = None  # [suite.quick] only: the few designs a quick run measures

    def to_record(self, jobs: int) -> dict[str, Any]:
        """As the record keeps them: every setting but the quick run's designs, and the jobs that ran."""
        return {**{key: value for key, value in asdict(self).items() if key != "designs"}, "jobs": jobs}

    @classmethod
    def from_record(cls, settings: dict[str, Any]) -> HostileSettings:
        return from_record(cls, settings)


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
