"""The recipe suite's plan, typed: the `[check]` and `[quota]` tables of scripts/catalogue/18-recipe.toml (the file
says what each setting is for). suites/recipe.py reads a table through its class (model/typed.py), so an
unknown key or a value of the wrong type is refused naming the file and the key; the records keep the tables whole.
"""

from __future__ import annotations

from harness.model.deployment_recipe import RecipeInputs
from harness.model.typed import Typed, optional


class CheckPlan(Typed):
    """`[check]`: the reader's inputs for this machine, and how the two configurations are loaded."""

    id: str
    title: str
    cores: int
    rate: float
    cpu_ms: float
    wait_ms: float
    max_connections: int
    reserved: int
    longest_s: float
    proxy: bool
    multiples: list[float]  # of the rate, offered in turn to the same server
    schedule_seconds: float
    warmup_seconds: float | None = optional()  # the sized rate offered first, kept apart and not judged
    counter_example: bool | None = optional()  # also run the threads plan without worker_connections
    repeat: int
    max_in_flight: int
    timeout: float
    proxy_config: str
    ceiling: str

    def inputs(self) -> RecipeInputs:
        return RecipeInputs(cores=self.cores, rate=self.rate, cpu_ms=self.cpu_ms, wait_ms=self.wait_ms,
                            max_connections=self.max_connections, reserved=self.reserved, longest_s=self.longest_s,
                            proxy=self.proxy)

    @property
    def rates(self) -> list[float]:
        return [round(self.rate * multiple, 3) for multiple in self.multiples]


class QuotaPlan(Typed):
    """`[quota]`: the group's quota, the server and its worker counts, the load."""

    id: str
    title: str
    design: str
    quota_us: int
    period_us: int
    workers: list[int]
    sized_by: list[str]  # one per worker count: how that count was reached
    connections: int
    seconds: float
    repeat: int
