"""Every process in /proc, read from each one's stat file: who is whose child, in which group, in what state.

Not /proc/PID/task/PID/children: the kernel documents that file as reliable only while the
children are stopped or frozen, and a read during a reap once listed no child at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessState:
    pid: int
    state: str  # one letter, as in ps: R running, S sleeping, Z zombie, ...
    parent: int
    group: int


def all_processes() -> list[ProcessState]:
    """Every process in /proc right now (those that vanish while we read are skipped)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
        fields = stat.rsplit(")", 1)[1].split()
        found.append(ProcessState(int(entry), fields[0], int(fields[1]), int(fields[2])))
    return found


def children_of(pid: int) -> list[ProcessState]:
    return [process for process in all_processes() if process.parent == pid]


def members_of_group(group: int) -> list[ProcessState]:
    return [process for process in all_processes() if process.group == group]
