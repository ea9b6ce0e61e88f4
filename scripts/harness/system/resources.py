"""Sample a server's process group while it is under load: peak memory, CPU time, process count.

Linux only (reads /proc). A design may be one process, a parent with forked
children, or a master with workers: all share the process group the harness
created, so the sampler sums every process whose pgrp is the server's. CPU time
includes children the group has already reaped (cutime/cstime), so short-lived
forked children are counted too.

Memory is summed two ways. RSS counts every page a process maps, so pages that a
forked worker shares with its parent (the interpreter, imported modules) are counted
once per process: nine prefork processes count them nine times. PSS (proportional
set size, /proc/PID/smaps_rollup) divides each shared page among the processes that
share it, so the sum over a group is the memory the group really costs. Both are
recorded; pages that compare memory use PSS where a record has it and say so.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Self

SAMPLE_INTERVAL_SECONDS = 0.1
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
PROC = Path("/proc")


@dataclass(frozen=True)
class GroupSample:
    rss_bytes: int
    cpu_ticks: int
    processes: int
    pss_bytes: int | None = None  # None where smaps_rollup cannot be read (kernels before 4.14, no permission)


def pss_bytes(pid: str) -> int | None:
    """A process's proportional set size from /proc/PID/smaps_rollup (None if it cannot be read)."""
    try:
        with open(PROC / pid / "smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024  # the kernel writes kB
    except OSError:
        return None
    return None


def sample_group(pgid: int) -> GroupSample:
    """RSS, PSS and CPU ticks (own + reaped children) summed over the process group."""
    rss = ticks = count = 0
    pss: int | None = 0
    # os.listdir, then one try around every read: a process may end between the listing and the
    # read, and /proc then answers ENOENT or ESRCH (ProcessLookupError). Path.glob would stat each
    # entry outside our try, and an ESRCH there once killed the sampler in the middle of a run.
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        try:
            stat = (PROC / entry / "stat").read_text()
            statm = (PROC / entry / "statm").read_text()
        except OSError:
            continue  # the process ended while we looked
        # The command name (field 2) may contain spaces: split after its closing parenthesis.
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) != pgid:  # fields[2] is pgrp (field 5 of stat)
            continue
        utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
        ticks += utime + stime + cutime + cstime
        rss += int(statm.split()[1]) * PAGE_BYTES
        own_pss = pss_bytes(entry)
        pss = None if pss is None or own_pss is None else pss + own_pss
        count += 1
    return GroupSample(rss, ticks, count, pss)


class BackgroundSampler:
    """Calls `sample()` once on entering, every `interval` seconds in a daemon thread, and once more on leaving:
    the lifecycle of every sampler of a running server (GroupSampler here, open_files.DescriptorWatch)."""

    def __init__(self, interval: float, name: str | None = None) -> None:
        self.interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stopping.wait(self.interval):
            self.sample()

    def __enter__(self) -> Self:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self.sample()


class GroupSampler(BackgroundSampler):
    """Samples a process group in a background thread while entered (`with GroupSampler(pgid) as sampler:`)."""

    def __init__(self, pgid: int) -> None:
        super().__init__(SAMPLE_INTERVAL_SECONDS)
        self.pgid = pgid
        self.peak_rss = 0
        self.peak_pss: int | None = 0
        self.peak_processes = 0
        self.first: GroupSample | None = None
        self.last: GroupSample | None = None

    def sample(self) -> None:
        sample = sample_group(self.pgid)
        if sample.processes == 0:
            return
        self.first = self.first or sample
        self.last = sample
        self.peak_rss = max(self.peak_rss, sample.rss_bytes)
        self.peak_pss = None if self.peak_pss is None or sample.pss_bytes is None else max(self.peak_pss,
                                                                                          sample.pss_bytes)
        self.peak_processes = max(self.peak_processes, sample.processes)

    def summary(self, completed_requests: int) -> dict[str, float | int | None]:
        """Peak RSS and PSS (MiB), CPU seconds used during the sampling, and per 1,000 requests."""
        if self.first is None or self.last is None:
            return {"peak_rss_mib": None, "peak_pss_mib": None, "cpu_seconds": None,
                    "cpu_seconds_per_1000_requests": None, "peak_processes": None}
        cpu_seconds = (self.last.cpu_ticks - self.first.cpu_ticks) / CLOCK_TICKS
        per_thousand = cpu_seconds / completed_requests * 1000 if completed_requests else None
        return {"peak_rss_mib": round(self.peak_rss / 2**20, 1),
                "peak_pss_mib": None if self.peak_pss is None else round(self.peak_pss / 2**20, 1),
                "cpu_seconds": round(cpu_seconds, 2),
                "cpu_seconds_per_1000_requests": None if per_thousand is None else round(per_thousand, 3),
                "peak_processes": self.peak_processes}
