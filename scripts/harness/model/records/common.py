"""Parts every record kind shares: the machine a record was measured on."""

from __future__ import annotations

from typing import Any

from harness.model.records.typed import Typed, optional


class Pinning(Typed):
    """Which CPU the server and the load tool were held to, and how (system/processes.cpu_pinning)."""

    server_cpu: str | None
    load_tool_cpu: str | None
    method: str


class Environment(Typed):
    """What a reader needs to weigh a number: CPU, memory, kernel, Python, tools, pinning and commit
    (system/environment.describe_machine)."""

    cpu_model: str
    cpu_count: int
    cpus_available: int
    memory_gib: float
    kernel: str
    os: str
    python: str
    runner: str  # "local" or "github-actions"
    pinning: Pinning
    tools: dict[str, Any]  # tool name -> its version line (a string), or a table of versions
    commit: str
    dirty: bool
    gil: str | None = optional()  # records before free-threaded builds were considered lack it
