"""harness.resources: summing a process group from /proc, with processes that end while we look.

A fake /proc (a directory laid out like it) makes the cases exact; one check on the real /proc
makes sure the layout we read is the kernel's.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from harness.system import resources

GROUP = 4242


def fake_process(proc: Path, pid: int, pgrp: int, command: str, ticks: tuple[int, int, int, int],
                 resident_pages: int) -> None:
    utime, stime, cutime, cstime = ticks
    (proc / str(pid)).mkdir()
    # Fields after the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime ...
    (proc / str(pid) / "stat").write_text(
        f"{pid} ({command}) S 1 {pgrp} {pgrp} 0 -1 0 0 0 0 0 {utime} {stime} {cutime} {cstime} 20 0 1 0\n")
    (proc / str(pid) / "statm").write_text(f"1000 {resident_pages} 100 10 0 500 0\n")


def test_a_group_is_summed_and_other_groups_vanished_processes_and_other_entries_are_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_process(tmp_path, 100, GROUP, "python3", (10, 5, 2, 1), resident_pages=1000)
    fake_process(tmp_path, 101, GROUP, "a name with ) and spaces", (1, 1, 0, 0), resident_pages=24)
    fake_process(tmp_path, 200, GROUP + 1, "someone else", (999, 999, 0, 0), resident_pages=99999)
    (tmp_path / "300").mkdir()  # listed, then gone before we read it: no stat, no statm
    (tmp_path / "301").mkdir()
    (tmp_path / "301" / "stat").mkdir()  # reading it fails with another OSError (EISDIR)
    (tmp_path / "self").mkdir()  # not a process number
    (tmp_path / "meminfo").write_text("MemTotal: 1 kB\n")
    monkeypatch.setattr(resources, "PROC", tmp_path)

    sample = resources.sample_group(GROUP)

    assert sample == resources.GroupSample(rss_bytes=(1000 + 24) * resources.PAGE_BYTES,
                                           cpu_ticks=18 + 2, processes=2)


def test_a_real_group_is_found_in_the_real_proc() -> None:
    with subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
                          stdout=subprocess.PIPE, text=True, start_new_session=True) as child:
        try:
            # Sample only once the interpreter runs: straight after the fork the child is still
            # being exec'd and holds a fraction of a MiB (CI saw 196 KiB).
            assert child.stdout is not None and child.stdout.readline() == "up\n"
            sample = resources.sample_group(child.pid)  # a new session: its pgid is its pid
            assert sample.processes == 1
            assert sample.rss_bytes > 1 << 20  # a Python interpreter holds more than a MiB
        finally:
            child.kill()
            child.wait()
    assert resources.sample_group(child.pid).processes == 0  # gone: nothing left to count


def test_pss_is_summed_when_every_process_of_the_group_has_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_process(tmp_path, 100, GROUP, "parent", (0, 0, 0, 0), resident_pages=1000)
    fake_process(tmp_path, 101, GROUP, "worker", (0, 0, 0, 0), resident_pages=1000)
    for pid, kib in ((100, 3000), (101, 1000)):
        (tmp_path / str(pid) / "smaps_rollup").write_text(f"00400000-7fff [rollup]\nRss: 4000 kB\nPss: {kib} kB\n")
    monkeypatch.setattr(resources, "PROC", tmp_path)
    assert resources.sample_group(GROUP).pss_bytes == 4000 * 1024
    (tmp_path / "101" / "smaps_rollup").unlink()  # one process we cannot read: no PSS rather than a wrong one
    assert resources.sample_group(GROUP).pss_bytes is None


def test_pss_counts_memory_a_forked_group_shares_once_where_rss_counts_it_per_process() -> None:
    """Four processes sharing 64 MiB written before the fork: RSS sums four copies, PSS about one."""
    script = ("import os, time\n"
              "shared = bytearray(64 << 20)\n"
              "for index in range(0, len(shared), 4096): shared[index] = 1  # touch every page\n"
              "for _ in range(3):\n"
              "    if os.fork() == 0: time.sleep(30); os._exit(0)\n"
              "print('up', flush=True); time.sleep(30)\n")
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                          start_new_session=True) as parent:
        try:
            assert parent.stdout is not None and parent.stdout.readline() == "up\n"
            sample = resources.sample_group(parent.pid)
            assert sample.processes == 4
            assert sample.rss_bytes > 4 * (64 << 20)  # each process counts the shared pages
            assert sample.pss_bytes is not None and sample.pss_bytes < 2 * (64 << 20)  # shared pages counted once
        finally:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
