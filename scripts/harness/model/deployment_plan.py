"""The deployment suite's plan, typed: the `[race]` and `[overload]` tables of scripts/catalogue/17-deployment.toml
(the file says what each setting is for). suites/deployment.py reads a table through its class (`RacePlan.from_json`,
model/typed.py), so a key the class does not know is refused with the nearest known one, and a value of the
wrong type is named; the records keep the settings (records/deployment_records.py) and the renderer reads them back.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from harness.model.typed import Typed

T = TypeVar("T", bound=Typed)


def settings_of(kind: type[T], plan: Typed, **extra: object) -> T:
    """The part of a plan that `kind` (a class the plan's class derives from) declares, and `extra` beside it."""
    return kind(**{item.name: getattr(plan, item.name) for item in dataclasses.fields(kind) if item.name not in extra},
                **extra)


class RaceTarget(Typed):
    """A `[[race.target]]`: one server, its keep-alive timeout at the default written out, and the fix."""

    design: str
    timeout_s: float  # the server's keep-alive timeout: each burst's gap is this plus an offset
    defaults: list[str]  # the arguments that set it at its default, so the command line says what ran
    fix: list[str]  # the arguments that raise it above nginx's 60 s
    methods: list[str] | None = None  # this server's methods instead of the table's
    source: str = ""  # where its default is documented


class RaceCause(Typed):
    """A `[[race.cause]]`: another common cause of a 502 behind nginx, reproduced: a server, its arguments, the
    simulated call of every request, and how many requests are sent one after another."""

    id: str
    cause: str  # in words
    design: str
    arguments: list[str]
    delay: float
    requests: int
    source: str = ""


class RaceSettings(Typed):
    """The `[race]` table's settings, its targets apart: what the proxy-race record keeps."""

    id: str
    title: str
    proxy: str  # nginx's configuration in front of every server (upstream keep-alive)
    users: int  # each on its own kept connection to nginx: a request, then idle
    duration_s: float  # how long the users send, per run
    idle_spread: float  # each idle is drawn uniformly from timeout x (1 - spread) to timeout x (1 + spread)
    path: str  # where the requests go (the apps answer a POST 200 at /form)
    methods: list[str]


class RacePlan(RaceSettings):
    """The whole `[race]` table: its settings and its servers."""

    target: list[RaceTarget] = dataclasses.field(default_factory=list)
    cause: list[RaceCause] = dataclasses.field(default_factory=list)

    def settings(self) -> RaceSettings:
        return settings_of(RaceSettings, self)


class OverloadTarget(Typed):
    """An `[[overload.target]]`: a server, and the arguments that set its admission control (said in words)."""

    design: str
    arguments: list[str]
    admission: str


class OverloadTable(Typed):
    """The `[overload]` table's settings, its targets apart."""

    id: str
    title: str
    delay: float  # every request's simulated call, seconds
    capacity: float  # requests a second every target can serve (16 at once / delay)
    multiples: list[float]  # of the capacity, offered in turn; the last one back at half (recovery)
    schedule_seconds: float  # how long vegeta offers each rate
    max_in_flight: int  # vegeta's -max-workers
    timeout: float  # vegeta's per-request timeout, seconds
    ceiling: str  # the design measured first at the highest rate: the tool's ceiling


class OverloadSettings(OverloadTable):
    """What the overload record keeps: the table's settings, and the rates they offered."""

    rates: list[float]  # capacity x each multiple, in the order offered


class OverloadPlan(OverloadTable):
    """The whole `[overload]` table: its settings and its servers."""

    target: list[OverloadTarget] = dataclasses.field(default_factory=list)

    @property
    def rates(self) -> list[float]:
        """The offered rates, requests a second, in the order they run."""
        return [round(self.capacity * multiple, 3) for multiple in self.multiples]

    def settings(self) -> OverloadSettings:
        return settings_of(OverloadSettings, self, rates=self.rates)
