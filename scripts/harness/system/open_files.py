"""Room for many sockets at once: lift our own soft open-files limit (RLIMIT_NOFILE) towards the hard one.

Every socket a client holds is a file descriptor, and the soft limit is often 1024. A process
may raise its own soft limit up to the hard limit without privileges; past the hard limit only
root (`ulimit -Hn`, LimitNOFILE= in systemd) can help, so a run that needs more is refused
before it starts, with a message that says so.

scripts/http_load.py and scripts/echo_client.py carry copies of FILES_MARGIN,
OpenFilesLimitError and raise_open_files_limit (they run without the harness);
tests/harness/clients/test_standalone_copies.py keeps the copies identical to these.

The other way round, for the hostile suite's case 15: lower_group_open_files lowers the limit of a
server that is already running and answering (prlimit(2), as `prlimit --pid` does), so the case
measures the server as its own start-up left it (a server that raises its own limit at start, or
sizes a table from it, is not helped by a limit set before it started); free_descriptors says
whether a process is at its limit, and DescriptorWatch samples that for every process of the group
while the case runs, so a worker that reaches its limit and exits (its descriptors freed, its pid
gone) between two looks is still seen: its fewest free descriptors, and that it ended.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from dataclasses import dataclass, replace

from harness.system import processes
from harness.system.resources import BackgroundSampler

FILES_MARGIN = 32  # descriptors beyond one per socket: stdio, the event loop's own, imports


class OpenFilesLimitError(ValueError):
    """The hard open-files limit is lower than a run needs; the message says how to raise it."""


def raise_open_files_limit(sockets: int, what: str) -> dict[str, int]:
    """Make room for `sockets` open at once (`what` they are, for the message) under the soft RLIMIT_NOFILE.

    Raises the soft limit up to the hard one if needed; OpenFilesLimitError when even that is too low.
    Returns the limits then in force and the soft limit before: {"soft", "hard", "raised_from"}.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = sockets + FILES_MARGIN
    if needed <= soft:
        return {"soft": soft, "hard": hard, "raised_from": soft}
    if hard != resource.RLIM_INFINITY and needed > hard:
        raise OpenFilesLimitError(f"{sockets} {what} need about {needed} open files, but the hard limit is {hard} "
                                  f"(soft {soft}). Raise it (`ulimit -Hn {needed}` as root, or LimitNOFILE= in "
                                  "systemd), or ask for fewer.")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    print(f"raised the open-files soft limit from {soft} to {needed} (hard limit {hard})", file=sys.stderr)
    return {"soft": needed, "hard": hard, "raised_from": soft}


@dataclass(frozen=True)
class LoweredLimit:
    """One process's open-files limit as lower_group_open_files left it."""

    pid: int
    held: int  # descriptors it had open when its limit was lowered
    limit: int  # RLIMIT_NOFILE, soft and hard


def open_descriptors(pid: int) -> list[int]:
    """The descriptor numbers a process has open (/proc/PID/fd)."""
    return [int(entry) for entry in os.listdir(f"/proc/{pid}/fd")]


def lower_group_open_files(pgid: int, headroom: int) -> list[LoweredLimit]:
    """Lower RLIMIT_NOFILE, soft and hard, of every process of a running group to what it holds plus `headroom`.

    The hard limit too, so the server cannot raise it back. Processes it forks later inherit the
    lowered limit. A process that ended meanwhile is skipped.
    """
    lowered = []
    for pid in processes.group_pids(pgid):
        try:
            held = len(open_descriptors(pid))
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (held + headroom, held + headroom))
        except (ProcessLookupError, FileNotFoundError):
            continue
        lowered.append(LoweredLimit(pid, held, held + headroom))
    return lowered


def free_descriptors(pid: int) -> int | None:
    """How many more descriptors the process may open now (0: at its limit, accept() fails with EMFILE); None if gone.

    A new descriptor takes the lowest free number, and the kernel refuses one numbered at or above
    the soft limit: what is free is the numbers below the limit that are not in use.
    """
    try:
        soft, _ = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        return soft - sum(1 for number in open_descriptors(pid) if number < soft)
    except (ProcessLookupError, FileNotFoundError):
        return None


WATCH_INTERVAL_SECONDS = 0.05  # a worker that dies at its limit may free its descriptors within milliseconds


@dataclass(frozen=True)
class WatchedProcess:
    """One process of a watched group, as DescriptorWatch saw it (times are time.monotonic())."""

    pid: int
    first_seen: float
    last_alive: float | None  # the last sample that found it running; None: only ever seen ended
    least_free: int | None  # the fewest descriptors it had free in any sample; None: never read
    ended: bool  # gone, or a zombie its parent has not reaped yet


def running(pid: int) -> bool:
    """Whether the process exists and has not ended (a zombie, state Z or X, has ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            stat = file.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


class DescriptorWatch(BackgroundSampler):
    """Every process of a group, sampled every WATCH_INTERVAL_SECONDS in a thread while entered: free descriptors,
    start, end."""

    def __init__(self, pgid: int, interval: float = WATCH_INTERVAL_SECONDS) -> None:
        super().__init__(interval, name=f"descriptors-{pgid}")
        self.pgid = pgid
        self._seen: dict[int, WatchedProcess] = {}
        self._lock = threading.Lock()

    def sample(self) -> None:
        """One look at every process of the group, and at every one seen before that is no longer in it."""
        now = time.monotonic()
        listed = set(processes.group_pids(self.pgid))
        with self._lock:
            for pid in listed | set(self._seen):
                seen = self._seen.get(pid) or WatchedProcess(pid, now, None, None, False)
                try:
                    free = free_descriptors(pid) if pid in listed and running(pid) else None
                except PermissionError:  # another user's process: nothing to learn about it
                    continue
                if free is None:
                    seen = replace(seen, ended=True)
                elif not seen.ended:  # a pid reused after the end would be another process: keep the first
                    least = free if seen.least_free is None else min(seen.least_free, free)
                    seen = replace(seen, last_alive=now, least_free=least)
                self._seen[pid] = seen

    def processes(self) -> list[WatchedProcess]:
        """Every process seen so far, in the order first seen."""
        with self._lock:
            return sorted(self._seen.values(), key=lambda seen: (seen.first_seen, seen.pid))
