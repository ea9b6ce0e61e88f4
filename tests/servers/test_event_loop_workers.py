"""Event-loop workers under a supervisor: reloads lose nothing, dead workers come back, crashes back off.

The behaviour suite (test_behaviour.py) already checks the HTTP contract of both
catalogue entries; these tests check what the supervisor adds. Every server is
started in its own process group on a free loopback port and always stopped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from harness.clients import probe
from harness.model.paths import REPO_ROOT
from harness.suites import balance
from harness.system import processes
from process_table import children_of

from conftest import CATALOGUE, started

SERVER = REPO_ROOT / "servers" / "event_loop_workers.py"
HTTP_LOAD = REPO_ROOT / "scripts" / "http_load.py"
SHARINGS = ["event-loop-workers", "event-loop-workers-reuseport"]


def parent_pid(server: processes.RunningServer) -> int:
    """The supervisor is the process the harness started (no shell in between)."""
    return server.process.pid


def worker_pids(parent: int) -> set[int]:
    """The supervisor's live workers: its children, zombies (exited, not yet reaped) left out."""
    return {child.pid for child in children_of(parent) if child.state != "Z"}


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def forked_workers(parent: int) -> set[int]:
    """The workers, once forked: the port answers connects as soon as the parent listens, before its first fork."""
    wait_for(lambda: worker_pids(parent))
    return worker_pids(parent)


def open_loop_load(port: int, rate: int, seconds: float) -> dict:
    """Our open-loop client: every request on schedule, each failure classified (connect, read, ...)."""
    result = subprocess.run(
        [sys.executable, str(HTTP_LOAD), f"http://127.0.0.1:{port}/", "--rate", str(rate),
         "--requests", str(int(rate * seconds)), "--timeout", str(seconds + 20)],
        capture_output=True, text=True, timeout=seconds + 30, check=False)
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("name", SHARINGS)
def test_three_reloads_under_load_lose_no_request(name: str, tmp_path) -> None:
    with started(CATALOGUE.designs[name], tmp_path, delay=0.05) as server:
        parent = parent_pid(server)
        first_generation = forked_workers(parent)
        report: dict = {}
        load = threading.Thread(target=lambda: report.update(open_loop_load(server.port, rate=200, seconds=4)))
        load.start()
        try:
            for _ in range(3):
                time.sleep(0.8)
                os.kill(parent, signal.SIGHUP)
        finally:
            load.join(timeout=40)
        stdout = server.stdout_path.read_text()
        assert stdout.count("reloaded:") == 3
        assert not worker_pids(parent) & first_generation  # every worker was replaced
    logs = f"stdout:\n{server.stdout_path.read_text()}\nstderr:\n{server.stderr_path.read_text()}"
    assert report["failed"] == 0, f"{report['failed_by_kind']}\n{logs}"
    assert report["complete"] == 800, logs
    # Every retired worker reported what it served before it left: nothing was cut off.
    served = sum(balance.served_per_worker(server.stdout_path.read_text()))
    assert served >= 800, logs
    assert server.exit_code == 0


@pytest.mark.parametrize("name", SHARINGS)
def test_a_killed_worker_is_replaced(name: str, tmp_path) -> None:
    with started(CATALOGUE.designs[name], tmp_path) as server:
        parent = parent_pid(server)
        before = forked_workers(parent)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        # Replaced means a new worker in the victim's place, not merely the victim gone: a killed worker is a
        # zombie until the supervisor reaps it, and a stop that came first would never restart it.
        wait_for(lambda: len(worker_pids(parent)) == len(before) and worker_pids(parent) - before)
        assert victim not in {child.pid for child in children_of(parent)}  # reaped, not left a zombie
        assert probe.get(server.host, server.port).status == 200
        assert "restarting in" in server.stderr_path.read_text()


def test_stop_leaves_no_worker_behind(tmp_path) -> None:
    with started(CATALOGUE.designs["event-loop-workers"], tmp_path) as server:
        workers = forked_workers(parent_pid(server))  # the port answers before the first fork
    assert server.exit_code == 0
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()]  # stopped and reaped, not orphaned


PATCHED_SERVER = """
import asyncio, os, sys
sys.path.insert(0, {servers!r})
import event_loop_workers as server

real_worker_loop = server.worker_loop
{patch}
server.worker_loop = worker_loop
sys.argv = ["event_loop_workers.py", "--port", {port!r}, "--workers", "1"]
server.main()
"""


def patched_server(tmp_path: Path, patch: str, port: int | None = None) -> Path:
    """A script that runs event_loop_workers.py, one worker, with `patch` defining its worker_loop."""
    script = tmp_path / "patched_server.py"
    script.write_text(PATCHED_SERVER.format(servers=str(REPO_ROOT / "servers"), patch=patch, port=str(port or 0)))
    return script


CRASH_AT_START = """
async def worker_loop(*args):
    raise RuntimeError("this worker cannot start")
"""


def test_a_worker_that_crashes_at_start_is_restarted_with_growing_pauses(tmp_path) -> None:
    script = patched_server(tmp_path, CRASH_AT_START)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        time.sleep(2.0)
    finally:
        processes.stop_process_group(process)
    _, stderr = process.communicate(timeout=5)
    pauses = [float(value) for value in re.findall(r"restarting in ([0-9.]+) s", stderr)]
    # 0.2, 0.4, 0.8 s ... : a handful of forks in two seconds, not thousands.
    assert 3 <= len(pauses) <= 6, stderr
    assert pauses == sorted(pauses) and pauses[1] == 2 * pauses[0]
    assert process.returncode == 0


FAIL_ONCE_BROKEN = """
async def worker_loop(*args):
    if os.path.exists({broken!r}):
        raise RuntimeError("the new code does not start")
    return await real_worker_loop(*args)
"""


def test_a_reload_whose_new_workers_fail_keeps_the_old_ones(tmp_path) -> None:
    port = processes.free_port()
    broken = tmp_path / "broken"
    script = patched_server(tmp_path, FAIL_ONCE_BROKEN.format(broken=str(broken)), port)
    with processes.running_server([sys.executable, str(script)], port, tmp_path / "logs") as server:
        (old,) = forked_workers(server.process.pid)
        # Serving first: a worker forked but not yet in its loop when `broken` appears fails like the new ones
        # (a fresh-clone run beside a busy loop saw no worker left).
        assert probe.get(server.host, server.port).status == 200
        broken.touch()
        os.kill(server.process.pid, signal.SIGHUP)
        wait_for(lambda: "reload failed" in server.stderr_path.read_text())
        assert worker_pids(server.process.pid) == {old}
        assert probe.get(server.host, server.port).status == 200
    assert server.exit_code == 0


NEVER_STOPS = """
async def worker_loop(*args):
    await asyncio.sleep(3600)  # SIGTERM stays held back (it is masked from the fork until a loop takes it)
"""


def test_a_worker_that_outlives_the_grace_is_killed_and_named(tmp_path) -> None:
    port = processes.free_port()
    script = patched_server(tmp_path, NEVER_STOPS, port)
    with processes.running_server([sys.executable, str(script)], port, tmp_path / "logs") as server:
        (stubborn,) = forked_workers(server.process.pid)
    assert f"workers [{stubborn}] still running" in server.stderr_path.read_text()
    assert not Path(f"/proc/{stubborn}").exists()  # killed and reaped: no orphan left
    assert server.exit_code == 0


# The parent's own SIGTERM to a worker that the group-wide one has already stopped, arriving just
# after asyncio.run has closed the loop (and so put back SIGTERM's default action).
SECOND_SIGTERM_AFTER_THE_LOOP = """
import signal
real_run = asyncio.run
def run(main):
    served = real_run(main)
    os.kill(os.getpid(), signal.SIGTERM)
    return served
asyncio.run = run
worker_loop = real_worker_loop
"""


def test_a_second_sigterm_while_stopping_does_not_cut_the_workers_report(tmp_path) -> None:
    port = processes.free_port()
    script = patched_server(tmp_path, SECOND_SIGTERM_AFTER_THE_LOOP, port)
    with processes.running_server([sys.executable, str(script)], port, tmp_path / "logs") as server:
        (worker,) = forked_workers(server.process.pid)
        assert probe.get(server.host, server.port).status == 200
    assert f"worker {worker} served 2 connections" in server.stdout_path.read_text()  # the check's and ours
    assert server.exit_code == 0
