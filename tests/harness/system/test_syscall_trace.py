"""The server's side of a timeline (harness/system/syscall_trace.py): strace's lines read into per-connection moments.

Two excerpts of real traces (tests/fixtures/strace/, from the timeline scenario's run): a thread per
connection (the thread made by clone3 with CLONE_THREAD reads and writes the descriptor its process
accepted; calls split into unfinished and resumed halves) and a process per connection (the parent
accepts, forks and closes its copy; the connection ends with the child's close). Then one small real
run: a design, strace attached, a few requests, every moment found in order.
"""

from __future__ import annotations

import shutil
import time
import urllib.request
from pathlib import Path

import pytest
from harness.model.paths import REPO_ROOT
from harness.model.catalogue import load_catalogue
from harness.system import launcher, ports, processes, syscall_trace

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "strace"


def trace(name: str) -> list[str]:
    return (FIXTURES / f"{name}.strace").read_text().splitlines()


def test_a_thread_reads_and_writes_what_its_process_accepted() -> None:
    found = syscall_trace.connections(trace("thread-per-connection"), {8133: 8133})
    first = next(connection for connection in found if connection.peer_port == 39124)
    assert first.process == 8133 and first.threads == [8165] and first.processes == [8133]
    assert first.accepted == pytest.approx(1795655920.102711 + 0.000014)
    assert first.head_read == pytest.approx(1795655920.104061 + 0.000022)
    assert first.first_written == first.written == pytest.approx(1795655920.204594 + 0.000095)
    assert first.closed == pytest.approx(1795655920.205073)  # a resumed half is stamped when it returned
    split = next(connection for connection in found if connection.peer_port == 39164)  # accept4 unfinished, resumed
    assert split.accepted == pytest.approx(1795655920.106282)
    # The excerpt keeps only the first thread's later lines: the others were accepted and are still open.
    assert [connection.peer_port for connection in found][:3] == [39124, 39134, 39142]
    assert all(connection.closed is None for connection in found if connection is not first)


def test_a_forked_child_holds_the_connection_after_its_parent_closes_its_copy() -> None:
    found = syscall_trace.connections(trace("fork-per-connection"), {8197: 8197})
    first = found[0]
    assert first.peer_port == 39470 and first.process == 8197 and first.processes == [8211]
    assert first.head_read == pytest.approx(1795655921.611253 + 0.000010)
    assert first.written == pytest.approx(1795655921.712074 + 0.000105)
    # the parent's close(4) at .610112 is its copy; the child's close ends the connection
    assert first.closed == pytest.approx(1795655921.712415 + 0.000020)
    second = found[1]  # fd 4 again in the parent: a new connection, not the first one's
    assert second.peer_port == 39474 and second.processes == [8212] and second.closed is None


def test_a_process_that_exits_without_closing_ends_its_connections() -> None:
    lines = [line for line in trace("fork-per-connection") if not line.startswith("8211  1795655921.712415")]
    first = syscall_trace.connections(lines, {8197: 8197})[0]
    assert first.closed == pytest.approx(1795655921.713316)  # its '+++ exited' line


def test_moments_land_on_the_client_timeline_by_port() -> None:
    found = syscall_trace.connections(trace("fork-per-connection"), {8197: 8197})
    run = {"clock_start_unix_s": 1795655921.609, "timeline": [
        {"index": 0, "start": 0.0, "local_port": 39470}, {"index": 1, "start": 0.001, "local_port": 40000}]}
    syscall_trace.add_to_timeline(run, found, ["strace"])
    server = run["timeline"][0]["server"]
    assert server["accepted"] == pytest.approx(0.000249, abs=1e-6)
    assert server["closed"] == pytest.approx(0.103435, abs=1e-6)
    assert server["processes"] == [8211]
    assert "server" not in run["timeline"][1]  # no connection from that port: nothing invented
    assert run["server_trace"]["matched"] == 1 and run["server_trace"]["connections"] == len(found)


def test_connections_accepted_without_an_address_are_matched_in_order() -> None:
    """libuv's accept4(fd, NULL, NULL, ...): no port to match on, so the accept order meets the connect order."""
    lines = [line.replace(', {sa_family=AF_INET, sin_port=htons(39470), sin_addr=inet_addr("127.0.0.1")}, [16]',
                          ", NULL, NULL") for line in trace("fork-per-connection")]
    found = syscall_trace.connections(lines, {8197: 8197})
    assert found[0].peer_port is None and found[1].peer_port == 39474
    run = {"clock_start_unix_s": 1795655921.609, "timeline": [
        {"index": 0, "connected": 0.002, "local_port": 39474}, {"index": 1, "connected": 0.001, "local_port": 50000}]}
    syscall_trace.add_to_timeline(run, found, ["strace"])
    assert run["timeline"][0]["server"]["processes"] == [8212]  # by port
    assert run["timeline"][1]["server"]["processes"] == [8211]  # by order
    assert run["server_trace"]["matched"] == 2 and run["server_trace"]["matched_by_order"] == 1


@pytest.mark.skipif(shutil.which("strace") is None, reason=syscall_trace.INSTALL_HINT)
def test_a_real_design_traced_for_a_few_requests(tmp_path: Path) -> None:
    design = load_catalogue().design("thread-per-connection")
    with launcher.running_design(design, ports.run_port("server", design), 0.0, tmp_path / "server") as server:
        with syscall_trace.SyscallTrace(processes.group_pids(server.process.pid), tmp_path / "server.strace") as traced:
            for _ in range(3):
                with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=10) as answer:
                    assert answer.status == 200
            # each handler thread closes its connection, then ends: wait until only the main thread is left
            # (not for a count taken before: the readiness probe's handler may have been alive then)
            deadline = time.monotonic() + 10
            while processes.group_counts(server.process.pid)[1] > 1 and time.monotonic() < deadline:
                time.sleep(0.02)
        found = traced.connections()
    assert len(found) == 3
    for connection in found:
        assert connection.peer_port is not None and connection.process == server.process.pid
        assert connection.threads and connection.threads[0] != server.process.pid  # a thread of its own
        moments = [connection.accepted, connection.head_read, connection.first_written, connection.closed]
        assert None not in moments and moments == sorted(moments)
