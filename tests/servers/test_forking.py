"""Process designs of "Designing Python Web Servers": children, zombies, pools, and bounded stops.

The behaviour suite checks the HTTP contract of every design; these tests look
at what it cannot see from a socket: the processes behind the port. They read
/proc (Linux), so they are skipped elsewhere. Every server is started the way
the harness starts it and always stopped; the checks on leftover processes run
before the harness's own clean-up (SIGKILL to the group) could hide them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from harness.clients import probe
from harness.system import launcher, processes
from process_table import children_of, members_of_group

from conftest import CATALOGUE, started

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")

FORKING_DESIGNS = ["fork-per-connection", "naive-fork-per-connection", "forking-tcpserver"]
# Designs from this article whose stop waits SHUTDOWN_GRACE (5 s), then cuts what is left.
GRACEFUL_DESIGNS = ["socketserver-tcp", "fork-per-connection", "forking-tcpserver", "threading-tcpserver",
                    "process-pool", "thread-pool-executor"]
SHUTDOWN_GRACE = 5.0
REAP_WAIT = 3.0  # the designs reap between accepts or every POLL_INTERVAL (0.5 s); generous


def wait_until(condition, timeout: float) -> bool:
    """Poll `condition` every 50 ms until it holds or `timeout` passes; return whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def gets_in_background(host: str, port: int, count: int) -> tuple[list[threading.Thread], list[int]]:
    """Start `count` GET requests at once in threads; return the threads and the list their statuses go to."""
    statuses: list[int] = []
    threads = [threading.Thread(target=lambda: statuses.append(probe.get(host, port, timeout=20).status))
               for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, statuses


def test_the_zombie_check_sees_a_zombie() -> None:
    """The helper itself: a child that exits unreaped shows up as Z under its parent."""
    child = subprocess.Popen(["true"])  # exits at once; a zombie until we wait for it
    try:
        became_zombie = wait_until(
            lambda: [process.state for process in children_of(os.getpid()) if process.pid == child.pid] == ["Z"], 5)
    finally:
        child.wait(timeout=5)
    assert became_zombie
    assert child.pid not in [process.pid for process in children_of(os.getpid())]


@pytest.mark.parametrize("name", FORKING_DESIGNS)
def test_no_zombies_are_left_after_many_requests(name: str, tmp_path) -> None:
    with started(CATALOGUE.design(name), tmp_path) as server:
        statuses = [probe.get(server.host, server.port).status for _ in range(30)]
        # Every child has answered and exited; the server reaps between accepts or on its poll.
        all_reaped = wait_until(lambda: children_of(server.process.pid) == [], REAP_WAIT)
        left = children_of(server.process.pid)
    assert statuses == [200] * 30
    assert all_reaped, f"children still there: {left}"


@pytest.mark.parametrize("name", FORKING_DESIGNS)
def test_each_connection_in_flight_has_its_own_child(name: str, tmp_path) -> None:
    """The article doubted that ForkingTCPServer forks per client: three slow requests, three children."""
    with started(CATALOGUE.design(name), tmp_path, delay=1.0) as server:
        threads, statuses = gets_in_background(server.host, server.port, 3)
        three = wait_until(lambda: len(children_of(server.process.pid)) == 3, 0.8)  # inside their 1 s calls
        during = children_of(server.process.pid)
        for thread in threads:
            thread.join(timeout=20)
    assert three, f"expected 3 children while 3 requests wait, saw {during}"
    assert statuses == [200] * 3


def test_the_pool_keeps_its_workers_and_forks_no_more(tmp_path) -> None:
    design = CATALOGUE.design("process-pool")
    port = processes.free_port()
    command = [*launcher.server_command(design, port, 0.0, tmp_path), "--workers", "3"]
    with processes.running_server(command, port, tmp_path, cwd=launcher.REPO_ROOT) as server:
        # The port can be ready a moment before the parent has forked all three: wait for them.
        wait_until(lambda: len(children_of(server.process.pid)) >= 3, 5.0)
        before = sorted(child.pid for child in children_of(server.process.pid))
        statuses = [probe.get(server.host, server.port).status for _ in range(20)]
        after = sorted(child.pid for child in children_of(server.process.pid))
    assert statuses == [200] * 20
    assert len(before) == 3
    assert after == before  # the same three processes answered everything


def refused(host: str, port: int) -> bool:
    """Whether a new connection to the port is refused right now (nothing listens)."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True


@pytest.mark.parametrize("name", ["fork-per-connection", "forking-tcpserver", "process-pool"])
def test_sigterm_to_the_parent_alone_refuses_new_clients_and_lets_the_child_answer(name: str, tmp_path) -> None:
    """`kill PID` reaches only the parent (the harness signals the whole group).

    While the child finishes, the port must refuse new clients: a child's copy of
    the listening socket would keep it open, queuing clients nobody will answer.
    """
    with started(CATALOGUE.design(name), tmp_path, delay=2.0) as server:
        threads, statuses = gets_in_background(server.host, server.port, 1)
        time.sleep(0.4)  # the request is now inside its 2 s call, in a child
        os.kill(server.process.pid, signal.SIGTERM)
        # The parent notices within POLL_INTERVAL (0.5 s); the child still has a second or more to go.
        refused_during_the_stop = wait_until(lambda: refused(server.host, server.port), 1.2)
        exit_code = server.process.wait(timeout=10)
        for thread in threads:
            thread.join(timeout=10)
        survivors = members_of_group(server.process.pid)
    assert refused_during_the_stop
    assert exit_code == 0
    assert statuses == [200]
    assert survivors == []


@pytest.mark.parametrize("name", GRACEFUL_DESIGNS)
def test_a_silent_client_cannot_hold_the_stop_past_the_grace(name: str, tmp_path) -> None:
    """A client that connects and says nothing: the stop waits SHUTDOWN_GRACE, then exits 0 and leaves nothing."""
    with started(CATALOGUE.design(name), tmp_path) as server:
        with socket.create_connection((server.host, server.port)) as silent:
            time.sleep(0.3)  # accepted, and its handler is now waiting for a request (HEAD_TIMEOUT: 10 s)
            signalled = time.monotonic()
            os.killpg(server.process.pid, signal.SIGTERM)
            exit_code = server.process.wait(timeout=SHUTDOWN_GRACE + 5)
            stopped_after = time.monotonic() - signalled
            survivors = members_of_group(server.process.pid)
            silent.settimeout(2)
            try:
                closed = silent.recv(1) == b""
            except ConnectionResetError:
                closed = True
    assert exit_code == 0
    assert stopped_after < SHUTDOWN_GRACE + 2.5  # not the 10 s the client could otherwise take
    assert survivors == [], f"left behind after the stop: {survivors}"
    assert closed, "the silent client's connection is still open after the server exited"
