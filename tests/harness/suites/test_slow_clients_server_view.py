"""What the server itself holds while slow clients hold the proxy (issue 24, part 3; docs/deployment.md).

The hostile suite counts, during its slow clients' cases, the established connections on the
server's own port and on nginx's (system/connections.py). In small: one trickling slowloris
client against a thread pool, alone and behind a real nginx. Alone, the server holds its
connection; behind nginx, nginx holds it and the server holds no more than nginx does, for less time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from pathlib import Path
from typing import Any

from harness.model.records.hostile_record import ConnectionsHeld, HostileRecord
from harness.render import deployment_tables
from harness.suites.hostile import cases, run
from harness.system import connections, processes

from conftest import CATALOGUE

SUITE = cases.load_suite()
SLOWLORIS = SUITE.select(["slowloris"])[0]
# One slow client for 2 s; the probe runs meanwhile, as in the suite.
SETTINGS = dataclasses.replace(SUITE.run_settings(quick=True), slowloris_connections=1, bound=2.0, settle=2.0)


def held(tmp_path: Path, behind_nginx: bool) -> ConnectionsHeld:
    design = CATALOGUE.design("thread-pool-queue")
    with run.launched(design, SETTINGS.delay, tmp_path, behind_nginx) as server:
        result = run.run_case(server, SLOWLORIS, SETTINGS)
    assert result.connections_held is not None, result
    return result.connections_held


def test_alone_the_server_holds_the_slow_client(tmp_path: Path) -> None:
    counts = held(tmp_path, behind_nginx=False)
    assert counts.proxy_peak is None
    assert counts.server_peak >= counts.server_before + 1, counts
    assert counts.server_connection_seconds > 0.5, counts  # held for the case's 2 s, not a moment


def test_behind_nginx_the_server_holds_no_more_than_nginx(tmp_path: Path) -> None:
    counts = held(tmp_path, behind_nginx=True)
    assert counts.proxy_peak is not None and counts.proxy_peak >= 1, counts  # the slow client, at nginx
    assert counts.server_peak <= counts.proxy_peak, counts
    # nginx holds the slow client for the whole case; the server at most the probe's request, briefly.
    assert counts.proxy_connection_seconds is not None, counts
    assert counts.server_connection_seconds < counts.proxy_connection_seconds, counts


def test_established_counts_only_the_listeners_side_of_a_connection() -> None:
    port = processes.free_port()
    # The client binds its own port first: a port connect() picks may be shared by another test's connection to
    # another address (Linux reuses a local port across destinations), one bind() picks is this socket's alone.
    own_port = ("127.0.0.1", 0)
    with contextlib.closing(socket.create_server(("127.0.0.1", port))) as listener, \
            contextlib.closing(socket.create_connection(("127.0.0.1", port), source_address=own_port)) as client:
        accepted, _ = listener.accept()
        with contextlib.closing(accepted):
            assert connections.established(port) == 1  # the accepted side; the client's local port is another
            assert connections.established(client.getsockname()[1]) == 1  # and the client's, on its own port


def case_result(case_id: str, number: int, verdict: str, held: dict[str, float | None] | None) -> dict[str, Any]:
    """A slow client's case as the record keeps it; `held` None: a record made before the counts were."""
    return {"case": case_id, "number": number, "verdict": verdict, "robust": verdict == "robust", "survived": True,
            "alive": True, "statuses": ["open"], "seconds_to_close": None, "probe_during": None, "probe_after": None,
            "fds_leaked": 0, "threads_leaked": 0, "fds_before": 4, "threads_before": 1, "peak_rss_mib": None,
            "cpu_seconds": None, "case_seconds": 2.0, "variants": [], "errors": [], "stderr_tail": "",
            **({} if held is None else {"connections_held": {"samples": 40, **held}})}


def design_result(name: str, behind_nginx: bool, results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "design": "uvicorn", "title": "uvicorn", "model": "event loop", "behind_nginx": behind_nginx,
            "status": "ok", "problems": [], "stderr_tail": "", "server_commands": [], "cases": results}


def test_the_table_shows_each_port_and_says_when_a_case_was_not_counted() -> None:
    case = {"title": "t", "robust": "r", "wild": "w", "reference": "ref"}
    environment = {"cpu_model": "cpu", "cpu_count": 2, "cpus_available": 2, "memory_gib": 4.0, "kernel": "6",
                   "os": "Linux", "python": "3.11", "runner": "local",
                   "pinning": {"server_cpu": None, "load_tool_cpu": None, "method": "none"}, "tools": {},
                   "commit": "0123456789ab", "dirty": False}
    record = HostileRecord.from_json({
        "schema": 1, "suite": "hostile", "title": "t", "mode": "full", "command": [],
        "settings": SETTINGS.to_record(jobs=1), "environment": environment,
        "started_utc": "2026-11-26T02:00:00Z", "finished_utc": "2026-11-26T02:01:00Z",
        "cases": [{**case, "number": 10, "id": "slowloris", "kind": "slowloris", "short": "slowloris"},
                  {**case, "number": 14, "id": "slow-reader", "kind": "slow-reader", "short": "slow reader"}],
        "designs": [design_result("uvicorn", False, [
                        case_result("slowloris", 10, "weak", {"server_before": 0, "server_peak": 21, "proxy_peak": None,
                                                              "server_connection_seconds": 219.0,
                                                              "proxy_connection_seconds": None}),
                        case_result("slow-reader", 14, "robust", None)]),  # an older record: no counts
                    design_result("uvicorn+nginx", True, [
                        case_result("slowloris", 10, "weak", {"server_before": 0, "server_peak": 1, "proxy_peak": 21,
                                                              "server_connection_seconds": 0.1,
                                                              "proxy_connection_seconds": 219.2})])]}, "the fixture")
    table = deployment_tables.held_table(record)
    assert "| slowloris | 21 (219.0) | 21 (219.2) | 1 (0.1) |" in table
    assert "| slow reader | not counted | n/a | n/a |" in table
