"""The echo suite: every `kind = "echo"` design keeps the echo protocol; the echo load client reports truthfully.

The protocol (servers/*_echo.py): one line in, the same line upper-cased out
after --delay seconds, then a polite close. Servers are started the way the
harness starts them and always stopped. Timing claims use generous bounds: they
assert which side of the line a design is on, not how fast it is.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.clients import echo_probe, probe
from harness.clients.tools import echo as echo_client_tool
from harness.model.catalogue import Design
from harness.model.paths import REPO_ROOT
from harness.system import processes
from scenario_settings import settings_of

from conftest import CATALOGUE, first_line_served, started

ECHO_DESIGNS = [design for design in CATALOGUE.designs.values() if design.kind == "echo"]
GRACEFUL_DESIGNS = [design for design in ECHO_DESIGNS if design.finishes_in_flight]
CLIENT = REPO_ROOT / "scripts" / "echo_client.py"
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "echo_client"
TOO_LONG = b"ERROR line longer than 65536 bytes\n"


@pytest.fixture(params=ECHO_DESIGNS, ids=lambda design: design.name)
def echo_design(request: pytest.FixtureRequest) -> Design:
    return request.param


def test_the_catalogue_has_the_articles_three_echo_designs() -> None:
    assert {design.name for design in ECHO_DESIGNS} >= {"threaded-echo", "asyncio-echo", "minimal-asyncio-echo"}


# --- the protocol -----------------------------------------------------------------------------------------------


def test_a_sentence_comes_back_upper_cased(echo_design: Design, tmp_path) -> None:
    with started(echo_design, tmp_path) as server:
        assert echo_probe.verify_echo(server.host, server.port) == []


@pytest.mark.parametrize(("sent", "expected"), [
    ("grüße aus köln\n".encode(), "GRÜSSE AUS KÖLN\n".encode()),  # ß upper-cases to SS: the line may grow
    (b"not utf-8: \xff\xfe end\r\n", b"NOT UTF-8: \xff\xfe END\r\n"),  # undecodable bytes come back unchanged
    (b"\n", b"\n"),
], ids=["utf-8", "invalid-utf-8", "empty-line"])
def test_the_line_is_upper_cased_as_utf_8_text(echo_design: Design, tmp_path, sent: bytes, expected: bytes) -> None:
    with started(echo_design, tmp_path) as server:
        assert probe.exchange(server.host, server.port, sent) == expected


def test_a_line_sent_one_byte_at_a_time_gets_the_same_answer(echo_design: Design, tmp_path) -> None:
    sentence = echo_probe.SENTENCE
    with started(echo_design, tmp_path) as server:
        trickled = probe.exchange(server.host, server.port, [bytes([byte]) for byte in sentence], pause=0.002)
    assert trickled == sentence.upper()


def test_only_the_first_line_is_answered_and_the_rest_is_drained(echo_design: Design, tmp_path) -> None:
    with started(echo_design, tmp_path) as server:
        # A reset instead of a graceful close would raise ConnectionResetError here.
        received = probe.exchange(server.host, server.port, b"first line\nsecond line\n" + b"x" * 100_000)
    assert received == b"FIRST LINE\n"


@pytest.mark.parametrize("newline", [b"", b"\n"], ids=["no-newline", "newline-too-late"])
def test_an_over_long_line_gets_the_error_line_and_the_server_goes_on(echo_design: Design, tmp_path,
                                                                       newline: bytes) -> None:
    with started(echo_design, tmp_path) as server:
        received = probe.exchange(server.host, server.port, b"a" * (70 * 1024) + newline)
        assert server.alive()
        after = echo_probe.verify_echo(server.host, server.port)
    assert received == TOO_LONG
    assert after == []


def test_a_line_of_exactly_64_kib_is_still_answered(echo_design: Design, tmp_path) -> None:
    line = b"b" * (64 * 1024 - 1) + b"\n"
    with started(echo_design, tmp_path) as server:
        assert probe.exchange(server.host, server.port, line) == line.upper()


def test_a_client_that_half_closes_after_its_line_still_gets_the_answer(echo_design: Design, tmp_path) -> None:
    with started(echo_design, tmp_path, delay=0.2) as server, \
            socket.create_connection((server.host, server.port), timeout=10) as conn:
        conn.sendall(b"half closed\n")
        conn.shutdown(socket.SHUT_WR)  # like `nc -N`: nothing more from us, but we still read
        received = read_until_closed(conn)
    assert received == b"HALF CLOSED\n"


def test_a_client_that_leaves_before_its_newline_gets_nothing_and_the_server_goes_on(echo_design: Design,
                                                                                     tmp_path) -> None:
    with started(echo_design, tmp_path, delay=0.2) as server:
        with socket.create_connection((server.host, server.port), timeout=10) as conn:
            conn.sendall(b"no newline")
            conn.shutdown(socket.SHUT_WR)
            received = read_until_closed(conn)
        with socket.create_connection((server.host, server.port), timeout=10) as conn:
            conn.sendall(b"gone during the work\n")  # then close at once, while the server waits out its delay
        time.sleep(0.4)
        assert server.alive()
        after = echo_probe.verify_echo(server.host, server.port)
    assert received == b""
    assert after == []


def read_until_closed(conn: socket.socket) -> bytes:
    received = bytearray()
    while chunk := conn.recv(65536):
        received += chunk
    return bytes(received)


def test_the_default_host_is_loopback(echo_design: Design) -> None:
    port = processes.free_port()
    assert first_line_served(echo_design.file, port).startswith(f"Serving on tcp://127.0.0.1:{port}/")


# --- stopping ---------------------------------------------------------------------------------------------------

STOP_CASES = [pytest.param(design, signal.Signals[name], id=f"{design.name}-{name}")
              for design in ECHO_DESIGNS for name in design.stop_signals]
IN_FLIGHT_CASES = [case for case in STOP_CASES if case.values[0] in GRACEFUL_DESIGNS]


@pytest.mark.parametrize(("echo_design", "signum"), STOP_CASES)
def test_a_stop_signal_exits_0_and_prints_stopped(echo_design: Design, tmp_path, signum) -> None:
    with started(echo_design, tmp_path) as server:
        os.killpg(server.process.pid, signum)
        exit_code = server.process.wait(timeout=10)
    assert exit_code == 0
    assert server.stdout_path.read_text().splitlines()[-1] == "Stopped"


@pytest.mark.parametrize(("echo_design", "signum"), IN_FLIGHT_CASES)
def test_a_stop_signal_lets_the_reply_in_flight_finish_and_exits_0(echo_design: Design, tmp_path, signum) -> None:
    answers: list[bytes] = []
    with started(echo_design, tmp_path, delay=1.0) as server:
        client = threading.Thread(
            target=lambda: answers.append(probe.exchange(server.host, server.port, b"still answered\n")))
        client.start()
        time.sleep(0.4)  # the line is now inside its 1 s simulated I/O
        signalled = time.monotonic()
        os.killpg(server.process.pid, signum)
        exit_code = server.process.wait(timeout=10)
        stopped_after = time.monotonic() - signalled
        client.join(timeout=10)
    assert exit_code == 0
    assert stopped_after < 5.0
    assert answers == [b"STILL ANSWERED\n"]


@pytest.mark.slow
@pytest.mark.parametrize("echo_design", GRACEFUL_DESIGNS, ids=lambda design: design.name)
def test_a_silent_client_cannot_hold_the_stop_past_the_grace_period(echo_design: Design, tmp_path) -> None:
    with started(echo_design, tmp_path) as server, socket.create_connection((server.host, server.port), timeout=10):
        time.sleep(0.2)  # accepted, and sending nothing
        signalled = time.monotonic()
        os.killpg(server.process.pid, signal.SIGTERM)
        exit_code = server.process.wait(timeout=15)
        stopped_after = time.monotonic() - signalled
    assert exit_code == 0
    assert stopped_after < 8.0  # SHUTDOWN_GRACE (5 s) plus one poll, not CLIENT_TIMEOUT (10 s)


def test_the_asyncio_echo_leaves_no_warnings_behind(tmp_path) -> None:
    """Under -W error: answers, a client leaving mid-work (its task cancelled), and a stop with a reply in flight."""
    design = CATALOGUE.design("asyncio-echo")
    port = processes.free_port()
    command = [sys.executable, "-W", "error", str(REPO_ROOT / design.file),
               "--port", str(port), "--delay", "0.5"]
    with processes.running_server(command, port, tmp_path, cwd=REPO_ROOT) as server:
        assert echo_probe.verify_echo(server.host, server.port) == []
        with socket.create_connection((server.host, server.port), timeout=10) as conn:
            conn.sendall(b"leaving early\n")
        client = threading.Thread(target=probe.exchange, args=(server.host, server.port, b"in flight\n"))
        client.start()
        time.sleep(0.2)
        os.killpg(server.process.pid, signal.SIGINT)
        assert server.process.wait(timeout=10) == 0
        client.join(timeout=10)
    assert server.stderr_tail() == ""


# --- concurrency, through the load client -----------------------------------------------------------------------


def run_client(*arguments: str, limits: tuple[int, int] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """scripts/echo_client.py in a subprocess, optionally under a lowered RLIMIT_NOFILE (soft, hard)."""
    command = [sys.executable, str(CLIENT), *arguments]
    if limits is not None:
        # Lower the limits in a tiny launcher that then becomes the client (exec): no preexec_fn needed.
        launcher = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, "
                    f"{limits!r}); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")
        command = [sys.executable, "-c", launcher, *command[1:]]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


@pytest.mark.parametrize("echo_design", ECHO_DESIGNS, ids=lambda design: design.name)
def test_100_simultaneous_connections_overlap_their_waits(echo_design: Design, tmp_path) -> None:
    """100 lines with a 0.2 s wait each: one after another would take 20 s."""
    with started(echo_design, tmp_path, delay=0.2) as server:
        completed = run_client("--port", str(server.port), "--connections", "100", "--timeout", "30")
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, completed.stderr
    assert (report["answered"], report["wrong"], report["errors"]) == (100, 0, {})
    assert report["duration_s"] < 5.0, f"{echo_design.name} took {report['duration_s']:.2f} s for 100 x 0.2 s"


# --- the load client --------------------------------------------------------------------------------------------


def test_the_client_reports_every_answer_in_json_and_writes_a_timeline(tmp_path) -> None:
    timeline = tmp_path / "timeline.csv"
    with started(CATALOGUE.design("asyncio-echo"), tmp_path, delay=0.1) as server:
        completed = run_client("--port", str(server.port), "--connections", "30", "--timeline", str(timeline))
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, completed.stderr
    assert report["connections"] == report["answered"] == 30
    assert report["mode"] == "closed"
    assert set(report["latency_ms"]) == set(report["connect_ms"]) == {"mean", "p50", "p90", "p99", "max"}
    latency = report["latency_ms"]
    assert 100 <= latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]  # nobody beats the delay
    rows = timeline.read_text().splitlines()
    assert rows[0] == "index,intended_start_s,start_s,connected_s,end_s,result"
    assert len(rows) == 31 and all(row.endswith(",answered") for row in rows[1:])


def test_the_client_open_loop_starts_connections_on_schedule(tmp_path) -> None:
    with started(CATALOGUE.design("asyncio-echo"), tmp_path, delay=0.0) as server:
        completed = run_client("--port", str(server.port), "--connections", "20", "--rate", "100")
    report = json.loads(completed.stdout)
    assert (completed.returncode, report["mode"], report["rate"], report["answered"]) == (0, "open", 100.0, 20)
    assert report["duration_s"] >= 0.19  # the 20th connection is scheduled 0.19 s after the first


@contextlib.contextmanager
def fake_echo_server(reply: bytes | None) -> Iterator[int]:
    """A listener that answers every line with `reply` (lower-case, say), or never answers when None."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            if reply is None:
                held.append(conn)  # keep it open and silent
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(reply)
                conn.shutdown(socket.SHUT_WR)
                conn.recv(65536)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


def test_the_client_counts_wrong_answers_and_exits_1() -> None:
    with fake_echo_server(b"not upper-cased\n") as port:
        completed = run_client("--port", str(port), "--connections", "5")
    report = json.loads(completed.stdout)
    assert completed.returncode == 1
    assert (report["answered"], report["wrong"], report["latency_ms"]) == (0, 5, None)


def test_the_client_counts_refused_connections_by_kind() -> None:
    completed = run_client("--port", str(processes.free_port()), "--connections", "5")
    report = json.loads(completed.stdout)
    assert completed.returncode == 1
    assert report["errors"] == {"ConnectionRefusedError": 5}


def test_the_client_gives_up_at_its_timeout() -> None:
    with fake_echo_server(None) as port:
        started_at = time.monotonic()
        completed = run_client("--port", str(port), "--connections", "5", "--timeout", "1")
        elapsed = time.monotonic() - started_at
    report = json.loads(completed.stdout)
    assert completed.returncode == 1
    assert report["errors"] == {"timeout": 5}
    assert elapsed < 15  # the 1 s timeout plus interpreter start, nowhere near a hang


def test_the_client_raises_its_soft_open_files_limit_when_it_needs_more(tmp_path) -> None:
    with started(CATALOGUE.design("asyncio-echo"), tmp_path, delay=0.0) as server:
        completed = run_client("--port", str(server.port), "--connections", "200", limits=(64, 4096))
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, completed.stderr
    assert report["answered"] == 200
    assert report["open_files"]["raised_from"] == 64
    assert report["open_files"]["soft"] >= 200
    assert "raised the open-files soft limit from 64" in completed.stderr


def test_the_client_refuses_a_host_that_is_not_loopback() -> None:
    completed = run_client("--host", "192.0.2.1", "--port", "8000", "--connections", "1")
    assert completed.returncode == 2
    assert completed.stdout == "" and "loopback interface only" in completed.stderr


def test_the_client_stops_with_exit_2_when_the_hard_limit_is_too_low() -> None:
    completed = run_client("--port", "1", "--connections", "1000", limits=(256, 256))
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert "1000 connections need about" in completed.stderr and "hard limit is 256" in completed.stderr


# --- the probe and the harness adapter ---------------------------------------------------------------------------


@pytest.mark.parametrize(("received", "problem"), [
    (b"HELLO\n", None),
    (b"", "no answer"),
    (b"HELLO", "does not end with a newline"),
    (b"hello\n", "expected"),
], ids=["correct", "nothing", "no-newline", "not-upper-cased"])
def test_the_probe_names_what_is_wrong(received: bytes, problem: str | None) -> None:
    problems = echo_probe.echo_problems(b"hello\n", received)
    assert problems == [] if problem is None else problem in problems[0]


def test_the_probe_reports_a_server_that_is_not_there() -> None:
    problems = echo_probe.verify_echo("127.0.0.1", processes.free_port())
    assert len(problems) == 1 and problems[0].startswith("could not talk to")


def load_fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_the_adapter_maps_a_clean_run_onto_the_common_record() -> None:
    record: dict[str, Any] = echo_client_tool.parse_output(load_fixture("answered.json"))
    assert (record["complete"], record["failed"], record["answered"]) == (20, 0, 20)
    assert set(record["latency_ms"]) == {"mean", "p50", "p90", "p99", "max"}
    assert record["requests_per_second"] > 0 and record["duration_s"] > 0


def test_the_adapter_counts_errors_as_failed_and_complete() -> None:
    record = echo_client_tool.parse_output(load_fixture("refused.json"))
    assert (record["complete"], record["failed"], record["latency_ms"]) == (5, 5, None)
    assert record["failed_by_kind"] == {"wrong": 0, "ConnectionRefusedError": 5}


def test_the_adapter_reads_host_and_port_from_the_runners_url(tmp_path) -> None:
    command = echo_client_tool.TOOL.command("http://127.0.0.1:4321/", 1000, settings_of(time_limit=60), tmp_path)
    assert command[1:] == [str(CLIENT), "--host", "127.0.0.1", "--port", "4321", "--connections", "1000",
                           "--timeout", "60", "--timeline", str(tmp_path / "timeline.csv")]


def test_the_adapter_refuses_output_that_is_not_the_clients_json() -> None:
    with pytest.raises(ValueError, match="no JSON"):
        echo_client_tool.parse_output("Traceback (most recent call last):\n")
