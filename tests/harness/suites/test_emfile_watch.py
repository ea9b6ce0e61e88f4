"""Hostile case 15's reading of the processes it watched (suites/hostile/cases.py): which ones died at their limit,
which were started after them. Tables of watched processes, as system/open_files.DescriptorWatch leaves them; none of
these starts a process (tests/harness/suites/test_hostile.py runs the case against a worker that dies and is replaced).
"""

from __future__ import annotations

from pathlib import Path

from harness.suites.hostile import cases
from harness.system.open_files import WatchedProcess

HEADROOM = 64


def watched(pid: int, first_seen: float, last_alive: float | None, least_free: int | None,
            ended: bool) -> WatchedProcess:
    return WatchedProcess(pid, first_seen, last_alive, least_free, ended)


SUPERVISOR = watched(1, 0.0, 5.0, 60, False)
GTHREAD_WORKER = watched(2, 0.0, 3.6, 1, True)  # one descriptor freed as it failed, gone after the close
REPLACEMENT = watched(3, 3.7, 5.0, 58, False)
FORKED_CHILD = watched(4, 0.2, 0.4, 62, True)  # a child forked for one connection, done with it


def test_a_worker_seen_near_its_limit_that_ended_died_there_when_the_log_names_emfile() -> None:
    seen = [SUPERVISOR, GTHREAD_WORKER, REPLACEMENT]
    died = cases.ended_at_limit(seen, HEADROOM, emfile_logged=2)
    assert died == [GTHREAD_WORKER]
    assert cases.successors(seen, died) == [REPLACEMENT]
    assert cases.ended_at_limit(seen, HEADROOM, emfile_logged=0) == []  # one free, and no log line: not proven


def test_a_process_seen_with_no_descriptor_free_that_ended_died_there_whatever_the_log() -> None:
    exhausted = watched(2, 0.0, 0.3, 0, True)
    assert cases.ended_at_limit([SUPERVISOR, exhausted], HEADROOM, emfile_logged=0) == [exhausted]
    assert cases.successors([SUPERVISOR, exhausted], [exhausted]) == []  # nothing started after it


def test_children_that_end_with_their_headroom_free_and_live_processes_did_not_die_at_the_limit() -> None:
    at_limit_alive = watched(5, 0.0, 5.0, 0, False)  # at its limit and still running: the quiet class, not this one
    seen = [SUPERVISOR, FORKED_CHILD, at_limit_alive, watched(6, 0.5, 0.6, 63, True)]
    assert cases.ended_at_limit(seen, HEADROOM, emfile_logged=5) == []
    assert cases.successors(seen, []) == []


def test_emfile_lines_counts_only_what_the_server_wrote_after_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "server.stderr"
    log.write_text("OSError: [Errno 24] Too many open files (before the case)\n", encoding="utf-8")
    offset = cases.log_size(log)
    with log.open("a", encoding="utf-8") as appended:
        appended.write("Traceback (most recent call last):\nOSError: [Errno 24] Too many open files\n"
                       "[Errno 24] Too many open files\nworker 12 exited with code 1\n")
    assert cases.emfile_lines(log, offset) == 2
    assert cases.emfile_lines(log, 0) == 3
    assert cases.emfile_lines(None, 0) == 0 and cases.log_size(tmp_path / "missing") == 0
