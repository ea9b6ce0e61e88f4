"""The hostile suite's settings, typed: what suites/hostile runs with and what render/survival.py reads back.

They live in the model because both sides read them: the suite from the `[suite]` table of
scripts/catalogue/hostile/cases.toml (which says what each is), a renderer from a record's `settings`.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any


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
        """A hostile record's settings, whatever its age: a setting it lacks (older than the setting) reads None."""
        known = {setting.name: setting for setting in fields(cls)}
        lacking = {name: None for name, setting in known.items() if name not in settings
                   and setting.default is MISSING and setting.default_factory is MISSING}
        return cls(**lacking, **{key: value for key, value in settings.items() if key in known})
