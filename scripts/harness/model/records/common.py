"""Parts every record kind shares: the machine a record was measured on."""

from __future__ import annotations

from typing import Any

from harness.model.typed import Typed, optional


class Pinning(Typed):
    """Which CPU the server and the load tool were held to, and how (system/processes.cpu_pinning)."""

    server_cpu: str | None
    load_tool_cpu: str | None
    method: str


class CpuTopology(Typed):
    """How the CPUs the record ran on share cores, as this machine sees them (system/environment.cpu_topology).

    A guest of a hypervisor sees the topology it is given: two vCPUs it lists on separate cores may still be
    two hardware threads of one physical core on the host, so `siblings_possible` is True there too.
    """

    threads_per_core: int | None  # lscpu's "Thread(s) per core"
    thread_siblings: dict[str, str]  # CPU number -> its thread_siblings_list (/sys/devices/system/cpu)
    core_ids: dict[str, str]  # CPU number -> its core_id
    hypervisor: str | None  # lscpu's "Hypervisor vendor"; None on bare metal
    siblings_possible: bool  # whether the server's and the load tool's CPUs can be SMT siblings of one core


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
    topology: CpuTopology | None = optional()  # records before it was recorded lack it: not known
