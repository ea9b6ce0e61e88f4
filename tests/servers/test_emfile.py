"""A full file table: the designs with their own accept loop pause accepting instead of spinning or stalling.

Every connection holds a file descriptor. Past the open-files limit, accept() fails with
EMFILE, yet the client stays in the backlog, so the listener stays readable: a loop that
goes straight back to select() (or the library's loop, in socketserver) fails again at once,
forever, at a full CPU. A loop whose accept task dies on the error stops accepting for good.
Each design here stops watching the listener for ACCEPT_BACKOFF instead, keeps serving what
it holds, and accepts again after it (hostile case 15, issue 22).

Each test starts the real server file (suites/subjects.py's launched, as the hostile suite does),
lowers its open-files limit once it answers to what it holds + HEADROOM (system/open_files.py,
as hostile case 15 does), holds more connections than that, measures the server's CPU while they
are held, then closes some and checks that a new client is answered and the held ones too.
"""

from __future__ import annotations

import contextlib
import socket
import time

import psutil
import pytest
from harness.clients import probe
from harness.model.catalogue import Design
from harness.suites.subjects import launched
from harness.system.open_files import lower_group_open_files

from conftest import CATALOGUE

HEADROOM = 56  # descriptors the server may open beyond those it holds when its limit is lowered
HELD = 80  # connections opened and held: more than the server can accept; the rest wait in its backlog (128)
CLOSED = 40  # then closed: more descriptors freed than clients left in the backlog, so a new client fits
MEASURED_FOR = 1.5  # seconds of CPU measured while the file table is full
BUSY_SHARE = 0.3  # of one CPU: a spinning loop takes about all of one (still half of one beside a busy loop)
ANSWERED_WITHIN = 5.0  # seconds: a paused listener is watched again ACCEPT_BACKOFF (0.5 s) later
REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

# The designs whose accept loop is their own (or socketserver's) and that hold many connections at once.
PAUSING = [CATALOGUE.design(name) for name in
           ("selectors-blocking-sleep", "selectors-timer", "epoll-loop", "asyncio-sock-api", "threading-tcpserver")]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used so far, all its threads together."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def answer_on(conn: socket.socket) -> probe.RawResponse:
    """Send a plain GET on a connection opened earlier and read the answer until the server closes."""
    conn.settimeout(ANSWERED_WITHIN)
    conn.sendall(REQUEST)
    raw = b""
    while chunk := conn.recv(65536):
        raw += chunk
    return probe.parse_response(raw)


@pytest.mark.parametrize("design", PAUSING, ids=lambda design: design.name)
def test_out_of_file_descriptors_the_server_pauses_accepting_then_recovers(design: Design, tmp_path) -> None:
    with launched(design, 0.0, tmp_path) as server:
        host, port, pid = server.target_host, server.target_port, server.process.pid
        lower_group_open_files(pid, HEADROOM)
        with contextlib.ExitStack() as held_open:
            held = [held_open.enter_context(socket.create_connection((host, port), timeout=5)) for _ in range(HELD)]
            time.sleep(0.5)  # the server accepts until accept() fails with EMFILE
            before = cpu_seconds(pid)
            time.sleep(MEASURED_FOR)
            busy_share = (cpu_seconds(pid) - before) / MEASURED_FOR
            assert server.alive(), f"{design.name} died out of descriptors:\n{server.running.stderr_tail()}"

            for conn in held[:CLOSED]:  # the earliest, accepted ones: the server reads EOF and frees their descriptors
                conn.close()
            asked = time.monotonic()
            fresh = probe.get(host, port, timeout=ANSWERED_WITHIN)  # queued behind the held clients still waiting
            fresh_after = time.monotonic() - asked
            earlier = [answer_on(conn).status for conn in held[CLOSED:]]  # accepted before the limit or after it
    assert busy_share < BUSY_SHARE, f"{design.name} used {busy_share:.0%} of a CPU out of descriptors: a busy loop"
    assert fresh.status == 200 and b"<h1>Hello from a Python server</h1>" in fresh.body, fresh
    assert fresh_after < ANSWERED_WITHIN
    assert earlier == [200] * (HELD - CLOSED), f"{design.name}: the held connections got {earlier}"
    print(f"{design.name}: {busy_share:.0%} of a CPU out of descriptors; a new client answered "
          f"{fresh_after:.2f} s after {CLOSED} closed")
