"""A CPU quota for one run: a cgroup made for it, a process started inside it, the group removed after.

Theory of operation. A container limited with `docker --cpus` or Kubernetes' `limits.cpu` is a cgroup
whose CPU controller lets its processes run `quota` microseconds of CPU time in every `period`; once
the group has spent its quota, every process in it waits for the next period (a throttled period).
Here the harness makes such a group itself: cgroup v1's cpu controller (cpu.cfs_quota_us,
cpu.cfs_period_us; hybrid hosts mount it under /sys/fs/cgroup/cpu) or, where only the unified
hierarchy exists, cgroup v2 (cpu.max, with the cpu controller enabled for its children). A command
joins the group through `wrapper()` (a shell that writes its own pid into cgroup.procs and execs
the command, so every child starts inside), and `throttling()` reads cpu.stat: periods, throttled
periods, time throttled.

On leaving `quota_group`, whatever happened (an error, Ctrl-C), the processes still in the group are
moved to its parent and the group's directory is removed; a group left non-empty is reported.

Known limits: needs root and a writable cpu controller (QuotaUnavailableError says what is missing);
one level of group, under the hierarchy's root.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


class QuotaUnavailableError(RuntimeError):
    """This machine cannot give a run a CPU quota: no cpu controller, or no right to make a group."""


@dataclass(frozen=True)
class QuotaGroup:
    path: Path
    version: int  # 1 or 2
    quota_us: int
    period_us: int

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def wrapper(self) -> list[str]:
        """A command prefix that starts the command inside this group (its children inherit it)."""
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.procs)]

    def members(self) -> list[int]:
        try:
            return [int(line) for line in self.procs.read_text().split()]
        except FileNotFoundError:
            return []

    def throttling(self) -> dict[str, float]:
        """cpu.stat as periods, throttled periods and seconds throttled (v1: ns; v2: usec)."""
        return read_cpu_stat(self.path / "cpu.stat", self.version)


def read_cpu_stat(path: Path, version: int) -> dict[str, float]:
    """{"periods", "throttled_periods", "throttled_s"} from a cpu.stat file of either version."""
    values = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            values[key] = int(value)
    try:
        throttled_s = values["throttled_time"] / 1e9 if version == 1 else values["throttled_usec"] / 1e6
        return {"periods": values["nr_periods"], "throttled_periods": values["nr_throttled"],
                "throttled_s": round(throttled_s, 4)}
    except KeyError as missing:
        raise QuotaUnavailableError(f"{path} has no {missing}: {path.read_text()[:200]!r}") from None


def controller(root: Path = CGROUP_ROOT) -> tuple[Path, int]:
    """Where to make a CPU group, and the cgroup version; QuotaUnavailableError saying why not."""
    v1 = root / "cpu"
    if (v1 / "cpu.cfs_quota_us").exists():
        if not os.access(v1, os.W_OK):
            raise QuotaUnavailableError(f"{v1}: the cpu controller is there but not writable: run as root")
        return v1, 1
    controllers = root / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        if not os.access(root, os.W_OK):
            raise QuotaUnavailableError(f"{root}: cgroup v2 with the cpu controller, but not writable: run as root")
        return root, 2
    raise QuotaUnavailableError(
        f"no cpu controller to make a quota with: neither {v1}/cpu.cfs_quota_us (cgroup v1) nor 'cpu' in "
        f"{controllers} (cgroup v2). A container usually cannot make cgroups; run on the host as root.")


@contextlib.contextmanager
def quota_group(name: str, quota_us: int, period_us: int, root: Path = CGROUP_ROOT) -> Iterator[QuotaGroup]:
    """A fresh CPU group allowing quota_us per period_us; emptied and removed on exit, whatever happened."""
    if quota_us <= 0 or period_us <= 0:
        raise ValueError(f"quota and period must be positive microseconds, not {quota_us} / {period_us}")
    parent, version = controller(root)
    path = parent / name
    if path.exists():
        raise QuotaUnavailableError(f"{path} exists already (left by another run?): remove it with rmdir first")
    if version == 2:
        subtree = parent / "cgroup.subtree_control"
        if "cpu" not in subtree.read_text().split():
            subtree.write_text("+cpu")
    path.mkdir()
    group = QuotaGroup(path=path, version=version, quota_us=quota_us, period_us=period_us)
    try:
        if version == 1:
            (path / "cpu.cfs_period_us").write_text(str(period_us))
            (path / "cpu.cfs_quota_us").write_text(str(quota_us))
        else:
            (path / "cpu.max").write_text(f"{quota_us} {period_us}")
        yield group
    finally:
        remove(group, parent)


def remove(group: QuotaGroup, parent: Path, timeout: float = 5.0) -> None:
    """Move what is left in the group to its parent, then remove the group (retrying while it empties)."""
    deadline = time.monotonic() + timeout
    while True:
        for pid in group.members():
            with contextlib.suppress(ProcessLookupError, OSError):
                (parent / "cgroup.procs").write_text(str(pid))
        try:
            group.path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:  # EBUSY: a process joined or has not left yet
            if time.monotonic() > deadline:
                raise QuotaUnavailableError(f"could not remove {group.path}: {error}; members {group.members()}") \
                    from error
            time.sleep(0.05)
