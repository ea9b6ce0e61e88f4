"""How many CPUs a server may use: the supervisor's default worker count (servers/event_loop_workers.py).

usable_cpus() is the affinity mask capped by the cgroup CPU quota. The parser is tested on fixture
trees (cgroup v2's cpu.max, v1's cfs files, a container that sees its own cgroup as the root); the
whole function in a real process under `taskset -c 0` and, where this machine lets us create one, in
a real cgroup with a quota. This development machine mounts cgroups in hybrid mode: the cpu
controller is a v1 hierarchy, so its cgroup v2 tree has no cpu.max to write and the v2 test skips
saying so, while the v1 test runs (as root).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from harness.model.paths import REPO_ROOT

SUPERVISOR = REPO_ROOT / "servers" / "event_loop_workers.py"
PRINT_USABLE = ("import importlib.util; spec = importlib.util.spec_from_file_location('s', {path!r}); "
                "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
                "print(module.usable_cpus())")


def supervisor() -> ModuleType:
    spec = importlib.util.spec_from_file_location("event_loop_workers_under_test", SUPERVISOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_proc(tmp_path: Path, cgroup: str, mountinfo: list[str]) -> str:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("".join(line + "\n" for line in mountinfo))
    return str(proc)


def v2_tree(tmp_path: Path, limits: dict[str, str]) -> str:
    root = tmp_path / "cgroup2"
    for relative, cpu_max in limits.items():
        directory = root / relative
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "cpu.max").write_text(cpu_max + "\n")
    return str(root)


@pytest.mark.parametrize(("limits", "expected"), [
    ({"app/web": "max 100000"}, None),  # no quota: the affinity decides
    ({"app/web": "200000 100000"}, 2),  # docker --cpus 2
    ({"app/web": "150000 100000"}, 2),  # 1.5 CPUs' worth: rounded up
    ({"app/web": "50000 100000"}, 1),  # half a CPU still gets one worker
    ({"app": "100000 100000", "app/web": "400000 100000"}, 1),  # a parent's quota binds its child
], ids=["unlimited", "two", "one-and-a-half", "half", "parent-binds"])
def test_the_cgroup_v2_quota_is_read_from_cpu_max_rounded_up(tmp_path: Path, limits: dict[str, str],
                                                              expected: int | None) -> None:
    root = v2_tree(tmp_path, limits)
    proc = fake_proc(tmp_path, "0::/app/web\n", [f"30 23 0:26 / {root} rw,relatime shared:4 - cgroup2 cgroup2 rw"])
    assert supervisor().cgroup_cpu_quota(proc) == expected


def test_a_container_sees_its_own_cgroup_as_the_mount_root(tmp_path: Path) -> None:
    """Without a cgroup namespace, /proc/self/cgroup names the host's path and the mount's root is that path."""
    root = v2_tree(tmp_path, {"": "300000 100000"})
    proc = fake_proc(tmp_path, "0::/docker/abc\n",
                     [f"30 23 0:26 /docker/abc {root} rw,relatime - cgroup2 cgroup2 rw"])
    assert supervisor().cgroup_cpu_quota(proc) == 3


def test_the_cgroup_v1_quota_is_read_from_the_cfs_files(tmp_path: Path) -> None:
    directory = tmp_path / "cpu" / "job"
    directory.mkdir(parents=True)
    (directory / "cpu.cfs_quota_us").write_text("250000\n")
    (directory / "cpu.cfs_period_us").write_text("100000\n")
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    proc = fake_proc(tmp_path, "4:memory:/job\n1:cpu:/job\n0::/\n",
                     [f"40 23 0:30 / {tmp_path / 'cpu'} rw - cgroup cgroup rw,cpu",
                      f"41 23 0:31 / {tmp_path / 'memory'} rw - cgroup cgroup rw,memory"])
    assert supervisor().cgroup_cpu_quota(proc) == 3


def test_no_cgroup_files_means_no_quota(tmp_path: Path) -> None:
    assert supervisor().cgroup_cpu_quota(str(tmp_path / "missing")) is None


def usable_in(command_prefix: list[str]) -> int:
    """usable_cpus() as a fresh process started under command_prefix computes it."""
    completed = subprocess.run([*command_prefix, sys.executable, "-c", PRINT_USABLE.format(path=str(SUPERVISOR))],
                               capture_output=True, text=True, timeout=30, check=True)
    return int(completed.stdout)


@pytest.mark.skipif(not shutil.which("taskset"), reason="taskset (util-linux) is not installed")
def test_a_reduced_affinity_gives_one_worker_per_allowed_cpu() -> None:
    assert usable_in(["taskset", "-c", "0"]) == 1
    assert usable_in([]) == min(len(os.sched_getaffinity(0)), supervisor().cgroup_cpu_quota() or 10**6)


def cgroup_mounts() -> dict[str, str]:
    """Where this machine mounts cgroup v2 ("2") and the v1 cpu controller ("1"), if anywhere."""
    found = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for fields in map(str.split, mountinfo):
            kind, options = fields[fields.index("-") + 1], fields[-1].split(",")
            if kind == "cgroup2":
                found["2"] = fields[4]
            elif kind == "cgroup" and "cpu" in options:
                found["1"] = fields[4]
    return found


@contextlib.contextmanager
def child_cgroup(mount_point: str) -> Iterator[Path]:
    """A fresh cgroup under the mount point, removed afterwards; skips the test when we may not create one."""
    directory = Path(mount_point) / f"sizing-test-{uuid.uuid4().hex[:8]}"
    try:
        directory.mkdir()
    except OSError as error:
        pytest.skip(f"this machine does not let us create a cgroup under {mount_point}: {error}")
    try:
        yield directory
    finally:
        with contextlib.suppress(OSError):
            directory.rmdir()  # empty again: its one process has exited


def in_cgroup(directory: Path) -> list[str]:
    """A prefix that moves the shell into the cgroup, then runs the command in its place."""
    return ["sh", "-c", f'echo $$ > {directory / "cgroup.procs"} && exec "$@"', "sh"]


def test_a_real_cgroup_v2_quota_caps_the_worker_count() -> None:
    mount_point = cgroup_mounts().get("2")
    if mount_point is None:
        pytest.skip("no cgroup v2 hierarchy is mounted on this machine")
    with child_cgroup(mount_point) as directory:
        if not (directory / "cpu.max").exists():
            pytest.skip("this machine's cgroup v2 hierarchy has no cpu controller (hybrid mode: cpu is a v1 "
                        "hierarchy), so a v2 cgroup here cannot hold a CPU quota; the parser is tested on fixtures")
        (directory / "cpu.max").write_text("100000 100000\n")
        assert usable_in(in_cgroup(directory)) == 1


def test_a_real_cgroup_v1_quota_caps_the_worker_count() -> None:
    mount_point = cgroup_mounts().get("1")
    if mount_point is None:
        pytest.skip("no cgroup v1 cpu hierarchy on this machine (pure cgroup v2: the v2 test covers it)")
    with child_cgroup(mount_point) as directory:
        try:
            (directory / "cpu.cfs_quota_us").write_text("50000\n")  # half a CPU's time per 100 ms period
        except OSError as error:
            pytest.skip(f"this machine does not let us set a CPU quota: {error}")
        assert usable_in(in_cgroup(directory)) == 1
