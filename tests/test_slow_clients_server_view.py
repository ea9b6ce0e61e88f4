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

from harness.render import deployment_tables
from harness.suites.hostile import cases, run
from harness.system import connections, processes

from conftest import CATALOGUE

SUITE = cases.load_suite()
SLOWLORIS = SUITE.select(["slowloris"])[0]
# One slow client for 2 s; the probe runs meanwhile, as in the suite.
SETTINGS = dataclasses.replace(SUITE.run_settings(quick=True), slowloris_connections=1, bound=2.0, settle=2.0)


def held(tmp_path: Path, behind_nginx: bool) -> dict[str, float | None]:
    design = CATALOGUE.design("thread-pool-queue")
    with run.launched(design, SETTINGS.delay, tmp_path, behind_nginx) as server:
        result = run.run_case(server, SLOWLORIS, SETTINGS)
    return result["connections_held"]


def test_alone_the_server_holds_the_slow_client(tmp_path: Path) -> None:
    counts = held(tmp_path, behind_nginx=False)
    assert counts["proxy_peak"] is None
    assert counts["server_peak"] >= counts["server_before"] + 1, counts
    assert counts["server_connection_seconds"] > 0.5, counts  # held for the case's 2 s, not a moment


def test_behind_nginx_the_server_holds_no_more_than_nginx(tmp_path: Path) -> None:
    counts = held(tmp_path, behind_nginx=True)
    assert counts["proxy_peak"] >= 1, counts  # the slow client, at nginx
    assert counts["server_peak"] <= counts["proxy_peak"], counts
    # nginx holds the slow client for the whole case; the server at most the probe's request, briefly.
    assert counts["server_connection_seconds"] < counts["proxy_connection_seconds"], counts


def test_established_counts_only_the_listeners_side_of_a_connection() -> None:
    port = processes.free_port()
    with contextlib.closing(socket.create_server(("127.0.0.1", port))) as listener, \
            contextlib.closing(socket.create_connection(("127.0.0.1", port))) as client:
        accepted, _ = listener.accept()
        with contextlib.closing(accepted):
            assert connections.established(port) == 1  # the accepted side; the client's local port is another
            assert connections.established(client.getsockname()[1]) == 1  # and the client's, on its own port


def test_the_table_shows_each_port_and_says_when_a_case_was_not_counted() -> None:
    record = {"cases": [{"id": "slowloris", "short": "slowloris"}, {"id": "slow-reader", "short": "slow reader"}],
              "settings": dataclasses.asdict(SETTINGS), "environment": {"commit": "0123456789ab"},
              "started_utc": "2026-11-26T02:00:00Z", "mode": "full",
              "designs": [{"name": "uvicorn", "design": "uvicorn", "behind_nginx": False, "cases": [
                              {"case": "slowloris", "verdict": "weak", "connections_held": {
                                  "server_before": 0, "server_peak": 21, "proxy_peak": None,
                                  "server_connection_seconds": 219.0, "proxy_connection_seconds": None}},
                              {"case": "slow-reader", "verdict": "robust"}]},  # an older record: no counts
                          {"name": "uvicorn+nginx", "design": "uvicorn", "behind_nginx": True, "cases": [
                              {"case": "slowloris", "verdict": "weak", "connections_held": {
                                  "server_before": 0, "server_peak": 1, "proxy_peak": 21,
                                  "server_connection_seconds": 0.1, "proxy_connection_seconds": 219.2}}]}]}
    table = deployment_tables.held_table(record)
    assert "| slowloris | 21 (219.0) | 21 (219.2) | 1 (0.1) |" in table
    assert "| slow reader | not counted | n/a | n/a |" in table
