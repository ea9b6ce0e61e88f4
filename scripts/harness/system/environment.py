"""Describe the machine a run happened on, for every results file."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

from harness.model.paths import REPO_ROOT
from harness.model.records.common import Environment
from harness.system.processes import CpuPinning


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit() -> dict[str, Any]:
    """The commit the code came from, and whether the work tree differed from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--", "servers", "scripts"))
    except (OSError, subprocess.SubprocessError):
        return {"commit": "unknown", "dirty": None}
    return {"commit": commit or "unknown", "dirty": dirty}


def cpu_topology(pinning: CpuPinning) -> dict[str, Any]:
    """Threads per core, each CPU's thread siblings and core id, the hypervisor, and whether the server's and the
    load tool's CPUs can be SMT siblings (model/records/common.CpuTopology)."""
    siblings, cores = {}, {}
    for cpu in sorted(os.sched_getaffinity(0)):
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            siblings[str(cpu)] = (topology / "thread_siblings_list").read_text().strip()
            cores[str(cpu)] = (topology / "core_id").read_text().strip()
        except OSError:
            continue  # not exposed (a container without /sys): the record says what it could read
    fields = lscpu_fields()
    threads = fields.get("Thread(s) per core", "")
    hypervisor = fields.get("Hypervisor vendor") or None
    shared = any(pinning.load in cpu_list(siblings.get(cpu, ""))
                 for cpu in cpu_list(pinning.server or "") if pinning.load and cpu != pinning.load)
    return {"threads_per_core": int(threads) if threads.isdigit() else None, "thread_siblings": siblings,
            "core_ids": cores, "hypervisor": hypervisor,
            # A guest cannot see the host's cores: its vCPUs may be two threads of one physical core.
            "siblings_possible": shared or hypervisor is not None or not siblings}


def cpu_list(text: str) -> set[str]:
    """The CPUs of a kernel CPU list ("0", "0-3", "0,2-3")."""
    cpus = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cpus.update(str(cpu) for cpu in range(int(low), int(high or low) + 1))
    return cpus


def lscpu_fields() -> dict[str, str]:
    """lscpu's 'Name: value' lines ({} when lscpu is missing)."""
    try:
        answer = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10,
                                env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return {}
    return {name.strip(): value.strip() for name, _, value in
            (line.partition(":") for line in answer.stdout.splitlines()) if value}


def describe_machine(pinning: CpuPinning, tool_versions: dict[str, str]) -> Environment:
    """CPU, kernel, Python, tools, pinning and commit: what a reader needs to weigh a number (every record's
    `environment`, typed: a key the record class does not know fails here)."""
    runner = "github-actions" if os.environ.get("GITHUB_ACTIONS") == "true" else "local"
    return Environment.from_json({
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0)),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        # The servers run on this interpreter too ({python} in the catalogue): a free-threaded build has no GIL.
        "gil": "disabled (free-threaded build)" if sysconfig.get_config_var("Py_GIL_DISABLED") else "enabled",
        "runner": runner,
        "pinning": {
            "server_cpu": pinning.server,
            "load_tool_cpu": pinning.load,
            "method": "taskset" if pinning.server is not None else "none (fewer than 2 CPUs or no taskset)",
        },
        "tools": tool_versions,
        "topology": cpu_topology(pinning),
        **git_commit(),
    }, "environment")
