"""Describe the machine a run happened on, for every results file."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sysconfig
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
        **git_commit(),
    }, "environment")
