"""The restart suite's plan, typed: scripts/catalogue/restart/restart.toml (the file says what each setting is
for). suites/restart.py reads the top-level table through RestartPlan and its `[in_flight]` table through
InFlightPlan (`from_json`, model/typed.py), so a key the class does not know is refused with the nearest
known one, and a value of the wrong type is named; what the classes cannot say (a method of METHODS, a signal
this system has, a design the catalogue has, the moments inside the load) the suite checks after reading.
"""

from __future__ import annotations

import dataclasses

from harness.model.typed import Typed

METHODS = ("signal", "stop-start")  # send the documented signal to the process we started; or stop it, start it again


class RestartPlanTarget(Typed):
    """A `[[target]]`: a design, and how it is restarted."""

    design: str
    method: str  # one of METHODS
    signal: str | None = None  # the signal's name, for method "signal"
    source: str = ""  # where the method is documented

    @property
    def label(self) -> str:
        return f"{self.design} ({self.signal})" if self.method == "signal" else f"{self.design} (stop, then start)"


class RestartPlan(Typed):
    """The file's top-level table: the open-loop load, the restarts' moments, the runs per target, the targets."""

    id: str
    title: str
    rate: float  # requests a second, on schedule
    seconds: float  # of load
    delay: float  # every request's simulated call, seconds
    restarts: int
    first_restart: float  # seconds into the load
    every: float  # seconds between restarts
    repeat: int = 1  # runs per target, taking turns with the other targets
    target: list[RestartPlanTarget] = dataclasses.field(default_factory=list)

    @property
    def targets(self) -> list[RestartPlanTarget]:
        return self.target

    def moments(self) -> list[float]:
        """Seconds into the load at which each restart is started."""
        return [self.first_restart + index * self.every for index in range(self.restarts)]


class InFlightPlanTarget(Typed):
    """An `[[in_flight.target]]`: a design, the arguments added to its command, and its restart signal."""

    design: str
    signal: str
    arguments: list[str] = dataclasses.field(default_factory=list)  # after the design's own (a later option wins)
    source: str = ""  # where the signal's graceful restart is documented

    @property
    def label(self) -> str:
        return " ".join([self.design, *self.arguments, f"({self.signal})"])


class InFlightPlan(Typed):
    """The `[in_flight]` table: one restart per run, with requests in flight and kept-alive connections idle."""

    id: str
    title: str
    delay: float  # every request's simulated call: the long requests, and the idle connections' first and next
    idle: int  # kept-alive connections idle at the restart
    long: int  # requests in flight at the restart
    restart_after: float  # seconds after the long requests were sent
    next_after: list[float]  # seconds after the restart, the idle connections' next requests (taken in turn)
    repeat: int = 1
    target: list[InFlightPlanTarget] = dataclasses.field(default_factory=list)

    @property
    def targets(self) -> list[InFlightPlanTarget]:
        return self.target
