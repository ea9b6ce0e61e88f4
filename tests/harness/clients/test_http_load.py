"""scripts/http_load.py (our load client) and its harness adapter, harness/clients/tools/http_client.py.

Parsing is tested with tables of exact bytes; the failure kinds against tiny
in-process servers that answer wrongly on purpose; the two loops against real
designs started the way the harness starts them. Timing assertions only use
lower bounds the simulated delay guarantees, or ratios far from their limit.
"""

from __future__ import annotations

import asyncio
import json
import math
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import http_load
import pytest
from harness.model.paths import REPO_ROOT
from harness.clients import tools
from harness.clients.tools import http_client
from harness.system import processes
from scenario_settings import settings_of

from conftest import CATALOGUE, started

CLIENT = Path(http_load.__file__)
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "http_client"
RUN_TIMEOUT = 30  # seconds for any client subprocess; the client's own --timeout is lower


def load(url: str, *arguments: str) -> tuple[int, dict[str, Any] | None, str]:
    """Run the client as a reader would; return its exit code, its JSON report (or None) and its stderr."""
    completed = subprocess.run([sys.executable, str(CLIENT), url, "--timeout", "20", *arguments],
                               capture_output=True, text=True, timeout=RUN_TIMEOUT)
    report = json.loads(completed.stdout) if completed.stdout.strip() else None
    return completed.returncode, report, completed.stderr


def url_of(server: processes.RunningServer) -> str:
    return f"http://{server.host}:{server.port}/"


def fixture_json(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


# --- the target URL and the request bytes -----------------------------------------------------------------------


@pytest.mark.parametrize(("url", "connect_host", "port", "request_line", "host_header"), [
    ("http://127.0.0.1:8000/", "127.0.0.1", 8000, b"GET / HTTP/1.1", b"127.0.0.1:8000"),
    ("http://127.0.0.1:8000", "127.0.0.1", 8000, b"GET / HTTP/1.1", b"127.0.0.1:8000"),
    ("http://localhost/a?b=1", "127.0.0.1", 80, b"GET /a?b=1 HTTP/1.1", b"localhost"),
    ("http://[::1]:9/x", "::1", 9, b"GET /x HTTP/1.1", b"[::1]:9"),
], ids=["ipv4", "no-path", "localhost-with-query", "ipv6"])
def test_target_and_request_bytes(url: str, connect_host: str, port: int, request_line: bytes,
                                  host_header: bytes) -> None:
    target = http_load.parse_target(url)
    assert (target.connect_host, target.port) == (connect_host, port)
    assert target.request == request_line + b"\r\nHost: " + host_header + b"\r\nConnection: close\r\n\r\n"


@pytest.mark.parametrize(("url", "message"), [
    ("http://example.com/", "loopback interface only"),
    ("http://127.0.0.2:8000/", "loopback interface only"),
    ("http://0.0.0.0:8000/", "loopback interface only"),
    ("http://10.0.0.1:8000/", "loopback interface only"),
    ("https://127.0.0.1:8000/", "only http://"),
    ("http://127.0.0.1:99999/", "bad port"),
    ("http://127.0.0.1:8000/a b", "without spaces"),
], ids=["name", "other-loopback-address", "any", "private", "https", "port", "space"])
def test_refused_targets(url: str, message: str) -> None:
    with pytest.raises(http_load.BadInputError, match=message):
        http_load.parse_target(url)


def test_a_non_loopback_url_exits_2_before_sending_anything() -> None:
    code, report, stderr = load("http://192.0.2.1:80/", "--requests", "1")
    assert (code, report) == (2, None)
    assert "loopback interface only" in stderr


@pytest.mark.parametrize("arguments", [["--rate", "5", "--concurrency", "3"], ["--max-in-flight", "3"]],
                         ids=["concurrency-in-open-loop", "max-in-flight-in-closed-loop"])
def test_options_of_the_other_loop_are_refused(arguments: list[str]) -> None:
    code, report, stderr = load("http://127.0.0.1:1/", *arguments)
    assert (code, report) == (2, None)
    assert "belongs to" in stderr


# --- the response head ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("head", "expected"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 120\r\nConnection: close", (200, 120)),
    (b"HTTP/1.0 404 Not Found\r\ncontent-length:0", (404, 0)),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5", (200, 5)),
    (b"HTTP/1.1 200 ", (200, None)),
    (b"HTTP/1.1 503", (503, None)),
], ids=["usual", "lower-case-name", "same-length-twice", "empty-reason", "no-reason"])
def test_response_head(head: bytes, expected: tuple[int, int | None]) -> None:
    assert http_load.parse_response_head(head) == expected


@pytest.mark.parametrize("head", [
    b"HTTP/2 200 OK",
    b"HTTP/1.1 20 OK",
    b"hello",
    b"HTTP/1.1 200 OK\r\nno colon here",
    b"HTTP/1.1 200 OK\r\n Content-Length: 5",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6",
], ids=["http2", "two-digit-status", "not-http", "no-colon", "folded-name", "negative-length", "conflicting-length"])
def test_malformed_response_heads(head: bytes) -> None:
    with pytest.raises(http_load.MalformedResponseError):
        http_load.parse_response_head(head)


# --- statistics -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "percent", "expected"), [
    ([1.0, 2.0, 3.0, 4.0], 50, 2.0),  # rank ceil(2.0) = 2
    ([1.0, 2.0, 3.0, 4.0, 5.0], 50, 3.0),  # rank ceil(2.5) = 3
    ([float(n) for n in range(1, 101)], 99, 99.0),
    ([float(n) for n in range(1, 11)], 99, 10.0),  # few values: p99 is the maximum
    ([7.0], 0, 7.0),  # rank at least 1
])
def test_nearest_rank_percentile(values: list[float], percent: float, expected: float) -> None:
    assert http_load.percentile(values, percent) == expected


def test_summary_rounds_to_microseconds_and_is_none_without_values() -> None:
    assert http_load.summary([3.0, 1.0, 2.0, 10.0004]) == {"mean": 4.0, "p50": 2.0, "p90": 10.0, "p99": 10.0,
                                                          "max": 10.0}
    assert http_load.summary([]) is None


# --- the open-files limit ---------------------------------------------------------------------------------------


def fake_limits(monkeypatch: pytest.MonkeyPatch, soft: int, hard: int) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(http_load.resource, "getrlimit", lambda which: (soft, hard))
    monkeypatch.setattr(http_load.resource, "setrlimit", lambda which, limits: calls.append(limits))
    return calls


def test_the_soft_limit_is_raised_when_the_requests_in_flight_need_it(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    calls = fake_limits(monkeypatch, soft=1024, hard=4096)
    limits = http_load.raise_open_files_limit(2000, "requests in flight")
    assert limits == {"soft": 2032, "hard": 4096, "raised_from": 1024}
    assert calls == [(2032, 4096)]
    assert "raised the open-files soft limit from 1024 to 2032" in capsys.readouterr().err


def test_a_hard_limit_too_low_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_limits(monkeypatch, soft=1024, hard=4096)
    with pytest.raises(http_load.OpenFilesLimitError,
                       match=r"10000 requests in flight need about 10032 open files, but the hard limit is 4096"):
        http_load.raise_open_files_limit(10_000, "requests in flight")
    assert calls == []


def test_the_limit_is_left_alone_when_it_suffices(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_limits(monkeypatch, soft=1024, hard=4096)
    limits = http_load.raise_open_files_limit(10, "requests in flight")
    assert limits == {"soft": 1024, "hard": 4096, "raised_from": 1024}
    assert calls == []


def test_open_loop_needs_only_as_many_files_as_requests() -> None:
    args = http_load.build_parser().parse_args(["http://127.0.0.1:1/", "--requests", "60", "--rate", "30"])
    assert http_load.resolve_mode(args) == 60  # not the 10,000 of the default cap
    assert args.max_in_flight == http_load.MAX_IN_FLIGHT


# --- failure kinds, against servers that answer wrongly on purpose ---------------------------------------------


Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


def canned(response: bytes) -> Answer:
    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(response)
        await writer.drain()
    return answer


async def reset(writer: asyncio.StreamWriter) -> None:
    linger_zero = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST instead of FIN
    writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_zero)


def run_against(answer: Answer, requests: int = 3, timeout: float = 5.0) -> list[http_load.Outcome]:
    """Run the closed loop against an in-process server that reads the request head, then `answer`s and closes."""
    async def scenario() -> list[http_load.Outcome]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await reader.readuntil(b"\r\n\r\n")
                await answer(writer)
            except OSError:
                pass  # the client gave up first (an oversized head): nothing to check on this side
            finally:
                writer.close()
                try:
                    await writer.wait_closed()
                except OSError:
                    pass  # the reset case
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            target = http_load.parse_target(f"http://127.0.0.1:{port}/")
            outcomes, _, _, _ = await http_load.run_load(target, requests, 2, None, 0, None, timeout)
        return outcomes

    return asyncio.run(scenario())


@pytest.mark.parametrize(("response", "result", "status"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "ok", 200),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nno length: read until the close", "ok", 200),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", "ok", 200),
    (b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy", "status", 503),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "length", 200),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\ntoo long", "length", 200),
    (b"HTTP/1.1 200 OK\r\nContent-Le", "read", None),
    (b"", "read", None),
    (b"garbage\r\n\r\n", "read", None),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", "read", None),
], ids=["ok", "ok-without-length", "ok-empty", "status", "short-body", "long-body", "cut-head", "closed-silently",
        "not-http", "head-over-64-KiB"])
def test_failure_kinds(response: bytes, result: str, status: int | None) -> None:
    outcomes = run_against(canned(response))
    assert [(outcome.result, outcome.status) for outcome in outcomes] == [(result, status)] * 3
    assert all(outcome.end >= outcome.start for outcome in outcomes)


def test_a_reset_is_a_read_failure() -> None:
    outcomes = run_against(reset)
    assert [outcome.result for outcome in outcomes] == ["read"] * 3


def test_an_unreachable_port_gives_connect_failures_in_the_report() -> None:
    code, report, _ = load(f"http://127.0.0.1:{processes.free_port()}/", "--requests", "6", "--concurrency", "2")
    assert code == 1 and report is not None
    assert (report["complete"], report["failed"], report["skipped"]) == (0, 6, 0)
    assert report["failed_by_kind"] == {"connect": 6, "read": 0, "status": 0, "length": 0, "timeout": 0}
    assert (report["latency_ms"], report["requests_per_second"]) == (None, 0.0)


@pytest.mark.parametrize("mode", [["--concurrency", "3"], ["--rate", "50", "--max-in-flight", "3"]],
                         ids=["closed", "open"])
def test_the_timeout_cancels_everything_and_still_reports(mode: list[str], tmp_path: Path) -> None:
    # A listener that never accepts: the kernel completes the handshakes, nobody ever answers.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        completed = subprocess.run([sys.executable, str(CLIENT), url, "--requests", "10", *mode, "--timeout", "1",
                                    "--timeline", str(tmp_path / "timeline.json")],
                                   capture_output=True, text=True, timeout=RUN_TIMEOUT)
    report = json.loads(completed.stdout)
    assert completed.returncode == 1 and "stopped by the 1 s --timeout" in completed.stderr
    assert report["timed_out"] and report["complete"] == 0
    assert report["failed"] == report["failed_by_kind"]["timeout"] > 0
    assert report["failed"] + report["skipped"] == 10
    entries = json.loads((tmp_path / "timeline.json").read_text())
    assert len(entries) == report["failed"] and all(entry["end"] is None for entry in entries)


def test_ctrl_c_stops_the_run_and_still_reports(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        client = subprocess.Popen([sys.executable, str(CLIENT), url, "--requests", "10", "--concurrency", "2",
                                   "--timeout", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        held = []
        try:
            # Started, and waiting for answers that never come: both connections accepted. A fixed sleep was not
            # enough beside a busy machine: a Ctrl-C before the run has started gives "no report" (exit 130 too).
            silent.settimeout(RUN_TIMEOUT)
            held = [silent.accept()[0] for _ in range(2)]
            client.send_signal(signal.SIGINT)
            stdout, stderr = client.communicate(timeout=RUN_TIMEOUT)
        finally:
            for connection in held:
                connection.close()
            if client.poll() is None:
                client.kill()
                client.communicate()
    report = json.loads(stdout)
    assert client.returncode == 130 and "interrupted" in stderr
    assert report["interrupted"] and not report["timed_out"]
    assert (report["failed_by_kind"]["timeout"], report["skipped"]) == (2, 8)


# --- against real designs ---------------------------------------------------------------------------------------


def in_flight_at_most(entries: list[dict[str, Any]]) -> int:
    """The largest number of requests between their start and their end at one instant."""
    events = sorted([(entry["start"], 1) for entry in entries] + [(entry["end"], -1) for entry in entries],
                    key=lambda event: (event[0], event[1]))  # an end before a start at the same instant
    most = current = 0
    for _, step in events:
        current += step
        most = max(most, current)
    return most


def test_closed_loop_against_threads(tmp_path: Path) -> None:
    with started(CATALOGUE.design("thread-per-connection"), tmp_path, delay=0.1) as server:
        code, report, _ = load(url_of(server), "--requests", "50", "--concurrency", "10",
                               "--timeline", str(tmp_path / "timeline.json"))
    entries = json.loads((tmp_path / "timeline.json").read_text())
    assert code == 0 and report is not None
    assert (report["mode"], report["complete"], report["failed"], report["skipped"]) == ("closed", 50, 0, 0)
    assert {entry["status"] for entry in entries} == {200} and len(entries) == 50
    assert all(entry["end"] - entry["start"] >= 0.1 for entry in entries)  # each waits out the 0.1 s delay
    assert report["latency_ms"]["p50"] >= 100
    assert "service_ms" not in report and "late" not in report
    assert in_flight_at_most(entries) >= 5  # threads: the waits overlap


def test_sequential_timeline_is_a_staircase(tmp_path: Path) -> None:
    delay = 0.1
    with started(CATALOGUE.design("sequential-sockets"), tmp_path, delay=delay) as server:
        code, report, _ = load(url_of(server), "--requests", "20", "--concurrency", "10",
                               "--timeline", str(tmp_path / "timeline.json"))
    entries = json.loads((tmp_path / "timeline.json").read_text())
    assert code == 0 and report is not None and report["complete"] == 20
    # The kernel accepts all ten connections at once, so from the client's side they all start
    # together and wait: that is the queue. The server works on one at a time, so the n-th answer
    # cannot come before n delays have passed since the first request started: a staircase. (Not
    # "consecutive answers one delay apart": a client busy elsewhere reads one answer late and the
    # next on time, which a full run beside a busy loop once did; a late read only raises a step.)
    first_end = min(entry["end"] for entry in entries)
    assert sum(1 for entry in entries if entry["start"] < first_end) >= 5
    first_start = min(entry["start"] for entry in entries)
    ends = sorted(entry["end"] for entry in entries)
    assert all(end - first_start >= (n + 1) * delay * 0.98 for n, end in enumerate(ends)), ends


OPEN_LOOP = ["--requests", "50", "--rate", "50", "--max-in-flight", "10"]
OPEN_LOOP_DELAY = 0.05  # a sequential server then serves 20 requests per second, less than half of the 50 due


def test_open_loop_shows_the_queue_a_closed_loop_hides(tmp_path: Path) -> None:
    with started(CATALOGUE.design("sequential-sockets"), tmp_path, delay=OPEN_LOOP_DELAY) as server:
        code, report, _ = load(url_of(server), *OPEN_LOOP)
    assert code == 0 and report is not None
    assert (report["mode"], report["complete"]) == ("open", 50)
    # Ten requests in flight wait about ten delays each (service time); the schedule runs ahead
    # by 30 requests a second, and latency from the due moment grows with it (about 3x here).
    assert report["latency_ms"]["p99"] >= 2 * report["service_ms"]["p99"]
    assert report["late"] > 0


def test_open_loop_against_threads_keeps_latency_close_to_service_time(tmp_path: Path) -> None:
    with started(CATALOGUE.design("thread-per-connection"), tmp_path, delay=OPEN_LOOP_DELAY) as server:
        code, report, _ = load(url_of(server), *OPEN_LOOP)
    assert code == 0 and report is not None and report["complete"] == 50
    assert report["service_ms"]["p50"] >= OPEN_LOOP_DELAY * 1000
    assert report["latency_ms"]["p99"] < 2 * report["service_ms"]["p99"]


# --- the harness adapter ----------------------------------------------------------------------------------------


URL = "http://127.0.0.1:8000/"


@pytest.mark.parametrize(("settings", "expected"), [
    ({"requests": 1000, "time_limit": None},
     ["--requests", "1000", "--concurrency", "10", "--timeout", "600"]),
    ({"requests": 1000, "time_limit": 10, "keep_alive": True},
     ["--requests", "1000", "--concurrency", "10", "--duration", "10", "--timeout", "70"]),
    ({"requests": 300, "time_limit": 2.5, "rate": 30, "client_timeout": 20},
     ["--requests", "300", "--rate", "30", "--max-in-flight", "10", "--duration", "2.5", "--timeout", "20"]),
], ids=["closed", "time-limit-and-keep-alive-ignored", "open-loop"])
def test_adapter_command(settings: dict[str, Any], expected: list[str], tmp_path: Path) -> None:
    command = http_client.TOOL.command(URL, 10, settings_of(**settings), tmp_path)
    assert command == [sys.executable, str(CLIENT), URL, *expected]


def test_adapter_command_with_a_timeline(tmp_path: Path) -> None:
    command = http_client.TOOL.command(URL, 10, settings_of(requests=5, timeline=True), tmp_path)
    assert command[-2:] == ["--timeline", str(tmp_path / "timeline.json")]


def test_adapter_reads_a_closed_loop_report() -> None:
    # thread-per-connection, delay 0.1 s, 50 requests at c = 10.
    record = http_client.parse_run((FIXTURES / "closed.stdout").read_text())
    assert (record["mode"], record["complete"], record["failed"], record["skipped"]) == ("closed", 50, 0, 0)
    assert record["duration_s"] == 0.521581
    assert record["requests_per_second"] == 95.862
    assert record["latency_ms"] == {"mean": 102.711, "p50": 102.676, "p90": 103.726, "p99": 104.95, "max": 104.95}
    assert (record["service_ms"], record["late"], record["timed_out"]) == (None, None, False)


def test_adapter_reads_an_open_loop_report() -> None:
    # sequential-sockets, delay 0.1 s (10 answers a second), 60 requests due at 30 a second, 10 in flight.
    record = http_client.parse_run((FIXTURES / "open.stdout").read_text())
    assert (record["mode"], record["rate"], record["max_in_flight"], record["complete"]) == ("open", 30.0, 10, 60)
    assert record["latency_ms"]["p99"] == 4085.233  # from the due moment
    assert record["service_ms"]["p99"] == 1013.635  # from the actual start: what a closed-loop tool reports
    assert record["late"] == 46


def test_fixture_timelines_match_their_reports() -> None:
    closed, open_ = fixture_json("closed_timeline.json"), fixture_json("open_timeline.json")
    assert len(closed) == 50 and all(entry["start"] == entry["intended_start"] for entry in closed)
    # Open loop: request i is due at i / 30 s, whenever it could start.
    assert all(math.isclose(entry["intended_start"], entry["index"] / 30, abs_tol=1e-6) for entry in open_)
    late = sum(1 for entry in open_ if entry["start"] - entry["intended_start"] > 0.010)
    assert late == json.loads((FIXTURES / "open.stdout").read_text())["late"]


def test_adapter_reads_failures_and_timeouts() -> None:
    refused = http_client.parse_run((FIXTURES / "refused.stdout").read_text())
    assert (refused["complete"], refused["failed"], refused["failed_by_kind"]["connect"]) == (0, 5, 5)
    timed_out = http_client.parse_run((FIXTURES / "timed_out.stdout").read_text())
    assert timed_out["timed_out"] and timed_out["failed_by_kind"]["timeout"] == 3 and timed_out["skipped"] == 7


@pytest.mark.parametrize("stdout", ["", "usage: http_load.py ...", "[]", '{"tool": "hey"}'])
def test_adapter_without_a_report_is_an_error(stdout: str) -> None:
    with pytest.raises(ValueError):
        http_client.parse_run(stdout)


@pytest.mark.parametrize(("entries", "kept"), [(2000, True), (2001, False)])
def test_adapter_keeps_timelines_of_at_most_2000_requests(entries: int, kept: bool, tmp_path: Path) -> None:
    path = tmp_path / "timeline.json"
    path.write_text(json.dumps([{"index": index} for index in range(entries)]))
    record: dict[str, Any] = {}
    http_client.attach_timeline(record, path)
    assert (record["timeline"] is not None) == kept
    assert ("timeline_note" in record) == (not kept)


def test_adapter_is_found_and_names_its_python() -> None:
    tool = tools.require_tool("http-client")
    assert tool.executable == sys.executable
    assert tool.version() == f"http_load.py (Python {'.'.join(map(str, sys.version_info[:3]))})"


@pytest.mark.slow
def test_adapter_real_runs(tmp_path: Path) -> None:
    with started(CATALOGUE.design("thread-per-connection"), tmp_path, delay=0.01) as server:
        url = url_of(server)
        closed = http_client.TOOL.run(url, 5, settings_of(requests=30, timeline=True), tmp_path / "closed", cpu=None)
        open_ = http_client.TOOL.run(url, 5, settings_of(requests=20, rate=100), tmp_path / "open", cpu=None)
        limited = http_client.TOOL.run(url, 2, settings_of(requests=100_000, time_limit=0.5), tmp_path / "limited",
                                       cpu=None)
    assert closed["error"] is None, closed
    assert (closed["complete"], closed["failed"], closed["keep_alive"], closed["exit_code"]) == (30, 0, False, 0)
    assert len(closed["timeline"]) == 30 and closed["latency_ms"]["p50"] >= 10
    assert open_["error"] is None and open_["mode"] == "open" and open_["complete"] == 20, open_
    assert limited["error"] is None and 0 < limited["complete"] and limited["skipped"] > 0, limited


def test_adapter_records_the_client_timeout_as_the_run_error(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        record = http_client.TOOL.run(url, 2, settings_of(requests=4, client_timeout=1), tmp_path, cpu=None)
    assert record["exit_code"] == 1 and record["timed_out"]
    assert record["error"] == "stopped by its own 1 s timeout: 2 requests unfinished"
