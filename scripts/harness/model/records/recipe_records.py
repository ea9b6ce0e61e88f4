"""The recipe suite's records (suites/recipe.py): the recipe's two configurations on the real stack
(results/deployment/recipe-check.json) and workers against a CPU quota (results/deployment/cpu-quota.json)."""

from __future__ import annotations

from typing import Any, ClassVar

from harness.model.recipe_plan import CheckPlan, QuotaPlan
from harness.model.records.common import Environment
from harness.model.records.deployment_records import OverloadCell
from harness.model.records.scenario_record import Latency
from harness.model.typed import Typed, optional


COUNTER_EXAMPLE = "threads-without-worker-connections"  # the threads plan less its worker_connections line


class CheckRun(Typed):
    """One configuration, one fresh server and proxy, through every rate in turn."""

    model: str  # "threads" (Gunicorn gthread), "event-loop" (uvicorn), or COUNTER_EXAMPLE
    repeat: int
    config: str  # what the recipe printed: gunicorn.conf.py's text or the uvicorn command line
    server_command: list[str] | None = optional()
    proxy_command: list[str] | None = optional()
    warmup: OverloadCell | None = optional()  # the sized rate for the plan's warmup_seconds, right after the start
    cells: list[OverloadCell]
    server_alive: bool | None = optional()
    error: str | None = optional()


class CheckRecord(Typed):
    """results/deployment/recipe-check.json."""

    SCHEMA: ClassVar[int | None] = 1
    schema: int
    kind: str  # "recipe-check"
    mode: str
    plan: CheckPlan
    recipe: dict[str, Any]  # deployment_recipe.recipe() of the plan's inputs, as computed at the run
    environment: Environment
    started_utc: str
    finished_utc: str
    database_command: list[str] | None = optional()
    ceiling: list[OverloadCell]
    runs: list[CheckRun]


class QuotaRun(Typed):
    """One worker count, one fresh group and server, one wrk run."""

    workers: int
    sized_by: str
    repeat: int
    usable_cpus: int | None = optional()  # servers/event_loop_workers.py usable_cpus(), run inside the group
    cpu_count: int | None = optional()  # os.cpu_count() inside the group: what a default reads
    server_command: list[str] | None = optional()
    load_command: list[str] | None = optional()
    requests_per_second: float | None = optional()
    latency_ms: Latency | None = optional()
    errors: int | None = optional()
    periods: int | None = optional()  # cpu.stat over the load run: CFS periods ...
    throttled_periods: int | None = optional()  # ... those in which the group ran out of quota ...
    throttled_s: float | None = optional()  # ... and the time its processes waited for the next period
    error: str | None = optional()


class QuotaRecord(Typed):
    """results/deployment/cpu-quota.json."""

    SCHEMA: ClassVar[int | None] = 1
    schema: int
    kind: str  # "cpu-quota"
    mode: str
    plan: QuotaPlan
    cgroup_version: int
    environment: Environment
    started_utc: str
    finished_utc: str
    runs: list[QuotaRun]
