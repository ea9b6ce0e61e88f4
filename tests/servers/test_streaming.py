"""The stream designs (servers/sse_*.py, servers/asgi_sse_app.py) behave as docs/streaming.md says.

Every stream design answers the page and a short stream (the check before measuring); events come
on schedule for a few streams at once; a slow reader costs the drain design a bounded amount of
memory and the no-drain design much more; a stop ends open streams cleanly between two events.
Bounds are generous (a busy shared machine slows everything): what is asserted is the shape, not
a timing. The streaming renderer is run on a small record made here.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from harness.clients import sse_client
from harness.model.records import write_json_atomic
from harness.render import streaming_tables
from harness.suites import streaming
from harness.system.resources import sample_group

from conftest import CATALOGUE, started

STREAM_DESIGNS = [design for design in CATALOGUE.designs.values() if design.kind == "stream"]
MIB = 2**20


def test_the_renderer_knows_every_stream_design_in_table_order() -> None:
    assert tuple(design.name for design in STREAM_DESIGNS) == streaming_tables.STREAM_DESIGNS


@pytest.mark.parametrize("design", STREAM_DESIGNS, ids=lambda design: design.name)
def test_every_stream_design_answers_the_page_and_a_short_stream(design, tmp_path: Path) -> None:
    with started(design, tmp_path) as server:
        assert sse_client.verify_stream(server.host, server.port) == []


def read_stream(host: str, port: int, path: str) -> tuple[float, bytes]:
    """Seconds until the server ended the stream, and everything it sent."""
    with socket.create_connection((host, port), timeout=10) as conn:
        began = time.monotonic()
        conn.sendall(sse_client.request_bytes(host, port, path))
        body = sse_client.read_all(conn, began + 15)
    return time.monotonic() - began, body


@pytest.mark.parametrize("name", ["sse-thread-per-connection", "sse-asyncio-streams"])
def test_a_few_streams_at_once_each_get_their_events_on_schedule(name: str, tmp_path: Path) -> None:
    """Five streams of ten events 0.1 s apart: each lasts about a second (not five), and gets all ten."""
    results: list[tuple[float, bytes]] = []
    with started(CATALOGUE.design(name), tmp_path) as server:
        threads = [threading.Thread(target=lambda: results.append(
            read_stream(server.host, server.port, "/events?interval=0.1&duration=1&size=64"))) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
    assert len(results) == 5
    for seconds, body in results:
        head, _, events = body.partition(b"\r\n\r\n")
        assert b"text/event-stream" in head
        assert events.count(b"\n\n") == 10 and events.endswith(b"\n\n"), events[-80:]
        assert 0.8 <= seconds < 4.0, f"a stream of ten events 0.1 s apart took {seconds:.2f} s"


def slow_readers(host: str, port: int, count: int) -> list[socket.socket]:
    """Clients that ask for a heavy stream and never read: a 4 KiB receive buffer, then nothing."""
    readers = []
    for _ in range(count):
        conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn.connect((host, port))
        conn.sendall(sse_client.request_bytes(host, port, "/events?interval=0.005&duration=20&size=65536"))
        readers.append(conn)
    return readers


def test_drain_bounds_a_slow_readers_memory_and_no_drain_does_not(tmp_path: Path) -> None:
    """Four readers that take nothing of 12.5 MiB/s each: within 3 s, the design without drain holds tens of MiB
    more; the drain design holds about 64 KiB each (plus the kernel's buffers, which PSS does not count)."""
    growth: dict[str, float] = {}
    with started(CATALOGUE.design("sse-asyncio-streams"), tmp_path) as drain, \
            started(CATALOGUE.design("sse-asyncio-no-drain"), tmp_path) as no_drain:
        servers = {"drain": drain, "no-drain": no_drain}
        before = {name: sample_group(server.process.pid).pss_bytes for name, server in servers.items()}
        if None in before.values():
            pytest.skip("PSS cannot be read here (/proc/PID/smaps_rollup)")
        readers = [conn for server in servers.values() for conn in slow_readers(server.host, server.port, 4)]
        try:
            time.sleep(3)
            for name, server in servers.items():
                growth[name] = (sample_group(server.process.pid).pss_bytes - before[name]) / MIB
        finally:
            for conn in readers:
                conn.close()
    assert growth["drain"] < 16, growth
    assert growth["no-drain"] > growth["drain"] + 24, growth


@pytest.mark.parametrize("name", ["sse-thread-per-connection", "sse-thread-pool", "sse-asyncio-streams"])
def test_a_stop_ends_an_open_stream_cleanly_between_two_events(name: str, tmp_path: Path) -> None:
    design = CATALOGUE.design(name)
    outcome: list[tuple[float, bytes]] = []
    with started(design, tmp_path) as server:
        reader = threading.Thread(target=lambda: outcome.append(
            read_stream(server.host, server.port, "/events?interval=0.1&duration=30&size=64")))
        reader.start()
        time.sleep(1.0)
        server.process.send_signal(design.stop_signal)
        stopped_at = time.monotonic()
        server.process.wait(timeout=10)
        took = time.monotonic() - stopped_at
        reader.join(timeout=10)
    assert server.exit_code == 0
    assert took < 5, f"the stop took {took:.1f} s with one stream open"
    seconds, body = outcome[0]
    _, _, events = body.partition(b"\r\n\r\n")
    assert events.endswith(b"\n\n") and events.count(b"\n\n") >= 3, events[-80:]
    assert seconds < 10


def fixture_record(tmp_path: Path) -> Path:
    """A small record in the shape bench.py streaming writes, for every phase."""
    client = {"streams_asked": 10, "streams_connected": 10, "connect_failures": {}, "connect_seconds": 0.1,
              "streams_answered": 10, "streams_with_events": 10, "events": 95,
              "events_per_stream": {"min": 9, "median": 9.5, "p99": 10, "max": 10},
              "max_lag_seconds": {"min": 0.0, "median": 0.01, "p99": 0.02, "max": 0.02},
              "outcomes": {"clean": 10}, "started_monotonic": 100.0, "timeline": [[0.5, 45], [1.0, 95]],
              "slow_readers": [{"received_bytes": 2**20, "outcome": "open"}], "client_cpu_seconds": 0.2,
              "client_wall_seconds": 1.0, "event_loop": "asyncio",
              "ended_after_stop_seconds": {"min": 0.05, "median": 0.06, "p99": 0.1, "max": 0.1}}
    sample = {"t": 0.5, "pss_mib": 20.0, "rss_mib": 30.0, "threads": 1, "fds": 4, "processes": 1,
              "fresh_ms": 1.0}
    row = {"status": "ok", "client": client,
           "samples": [sample, {**sample, "t": 1.0, "pss_mib": 22.0, "threads": 11, "fds": 14}],
           "baseline_pss_mib": 20.0, "peak_pss_mib": 22.0, "peak_threads": 11, "peak_fds": 14,
           "fresh_ms_median": 1.0, "fresh_ms_max": 2.0, "fresh_failed": 0, "fresh_asked": 2,
           "events_expected": 100, "client_cpu_share": 0.2, "stop_seconds": 0.2}
    phases = [{"name": name, "streams": 10, "seconds": 1, "interval": 0.1, "event_bytes": 64, "slow_readers": 1,
               "stop_after": 0.5, "designs": None, "path": "/events?interval=0.1&duration=1&size=64"}
              for name in ("hold", "hold-10k", "slow", "stop")]
    # No `schema`: the committed records were written before it (schema 0), and read as they are.
    record = {"suite": "streaming", "quick": False, "phases": phases, "slow_path": "/events?duration={seconds:g}",
              "stop_cap_seconds": 25, "started_utc": "2026-11-25T21:00:00Z", "finished_utc": "2026-11-25T21:05:00Z",
              "environment": {"cpu_model": "cpu", "cpu_count": 2, "cpus_available": 2, "memory_gib": 4.0,
                              "kernel": "6", "os": "Linux", "python": "3.11", "runner": "local",
                              "pinning": {"server_cpu": "0", "load_tool_cpu": "1", "method": "taskset"},
                              "tools": {}, "commit": "abcdef0123", "dirty": False},
              "rows": [{**row, "design": name, "phase": phase["name"]} for phase in phases
                       for name in ("sse-asyncio-streams", "sse-thread-pool")]
              + [{"design": "sse-granian", "phase": "hold", "status": "failed", "problems": ["did not start"]}]}
    write_json_atomic(tmp_path / "streaming.json", record)
    return tmp_path


def test_the_renderer_draws_every_table_and_the_plot_from_a_record(tmp_path: Path) -> None:
    results = fixture_record(tmp_path / "results")
    files = streaming_tables.streaming_files(results, tmp_path / "generated", tmp_path / "plots", "{source}\n")
    by_name = {path.name: text for path, text in files.items()}
    # Held at once: 14 descriptors at the peak, 4 before the streams; 2 MiB more over 10 streams.
    assert "| sse-thread-pool | 10 of 10 | 10 | 11 | 20.0 → **22.0** | 204.8 |" in by_name["streaming-hold-cost.md"]
    assert "| sse-granian | failed: did not start |" in by_name["streaming-hold-cost.md"]
    assert "| sse-asyncio-streams | 95% | 0.01 / 0.02 | 1.0 / 2.0 | 0 of 2 |" in by_name["streaming-hold-timing.md"]
    assert "10 clean" in by_name["streaming-stop.md"]
    assert "seconds since the slow clients began" in by_name["streaming-slow-memory.svg"] or \
        "<svg" in by_name["streaming-slow-memory.svg"]
    assert set(streaming_tables.STREAM_DESIGNS) <= {name.removesuffix(".md") for name in by_name}


def test_the_bounded_stops_sit_beside_the_defaults_from_their_own_record(tmp_path: Path) -> None:
    """`bench.py streaming --phase stop-timeout` writes streaming-stop-timeout.json; the table reads the bound from
    each row's server command and says which rows have no record yet."""
    results = fixture_record(tmp_path / "results")
    main = json.loads((results / "streaming.json").read_text(encoding="utf-8"))
    stop_row = next(row for row in main["rows"] if row["phase"] == "stop")
    main["rows"].append({**stop_row, "design": "sse-uvicorn", "server_command": ["python", "-m", "uvicorn"]})
    write_json_atomic(results / "streaming.json", main)
    files = streaming_tables.streaming_files(results, tmp_path / "generated", tmp_path / "plots", "{source}\n")
    before = {path.name: text for path, text in files.items()}["streaming-stop-timeout.md"]
    assert "| sse-uvicorn | none (the default) | 0.20 | 10 clean | 0.06 – 0.10 | – |" in before
    assert "| sse-uvicorn-stop-timeout | – | not measured yet |" in before
    bounded = {**main, "phases": [{**main["phases"][-1], "name": "stop-timeout"}],
               "rows": [{**stop_row, "design": "sse-uvicorn-stop-timeout", "phase": "stop-timeout",
                         "server_exit_code": 0, "stop_seconds": 5.1,
                         "server_command": ["python", "-m", "uvicorn", "--timeout-graceful-shutdown", "5"],
                         "client": {**stop_row["client"], "outcomes": {"cut between events": 10}}}]}
    write_json_atomic(results / streaming_tables.STOP_TIMEOUT_RECORD, bounded)
    files = streaming_tables.streaming_files(results, tmp_path / "generated", tmp_path / "plots", "{source}\n")
    by_name = {path.name: text for path, text in files.items()}
    assert ("| sse-uvicorn-stop-timeout | `--timeout-graceful-shutdown 5` | 5.10 | 10 cut between events | "
            "0.06 – 0.10 | 0 |") in by_name["streaming-stop-timeout.md"]
    assert "results/streaming-stop-timeout.json" in by_name["sse-uvicorn-stop-timeout.md"]


def test_a_partial_run_names_its_record_after_its_phases_and_refuses_unknown_ones() -> None:
    assert streaming.record_name(None) == "streaming.json"
    assert streaming.record_name(["stop-timeout"]) == "streaming-stop-timeout.json"
    assert [phase.name for phase in streaming.chosen_phases(False, ["stop-timeout"])] == ["stop-timeout"]
    with pytest.raises(streaming.BadInputError, match="unknown phases: nope"):
        streaming.chosen_phases(False, ["nope"])
    # The bounded twins run in their phase only: anywhere else they would repeat sse-uvicorn and sse-granian.
    assert all(set(phase.designs).isdisjoint(streaming.STOP_TIMEOUT_DESIGNS) for phase in streaming.PHASES
               if phase.name != "stop-timeout")


def test_without_a_record_every_file_says_not_measured(tmp_path: Path) -> None:
    files = streaming_tables.streaming_files(tmp_path, tmp_path / "generated", tmp_path / "plots", "{source}\n")
    assert files and all("Not measured yet" in text for text in files.values())
    assert json.dumps(sorted(path.name for path in files))  # names only; no plot without a record
