"""The real servers as they really are: the facts behind their catalogue overrides, tested.

The behaviour suite holds every design to the server contract, allowing a real
server the overrides its catalogue entry documents (stop_signals,
oversized_head_status, malformed_request_status). These tests show that each
override describes the server and is not a convenience: the signals we do not
use really cut requests off, the statuses are what the server really answers.
They also test the two application files directly, and the waitress runner's
reason to exist.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import signal
import subprocess
import sys
import threading
import time
from wsgiref.util import setup_testing_defaults
from wsgiref.validate import validator

import process_table
import pytest
from harness.clients import probe
from harness.model.catalogue import Design
from harness.model.paths import REPO_ROOT
from harness.system import processes

from conftest import CATALOGUE, all_at_once, started
from servers import asgi_app, sequential_sockets, wsgi_app

REAL_SERVERS = ["nginx", "gunicorn-sync", "gunicorn-gevent", "waitress", "uvicorn",
                "granian-asgi", "granian-wsgi", "gunicorn-gthread", "nginx-keep-alive", "gunicorn-gevent-keep-alive",
                "waitress-keep-alive", "uvicorn-keep-alive"]
# The request lines of test_behaviour.py's malformed-line test, by the same ids.
MALFORMED_LINES = {"no-spaces": b"NONSENSE\r\n\r\n", "no-version": b"GET /\r\n\r\n",
                   "garbage-version": b"GET / HTTP/9.9 extra\r\n\r\n"}
HTTP09_ANSWER = 0  # in malformed_request_status: answered as HTTP/0.9, the page with no status line


def design(name: str) -> Design:
    return CATALOGUE.design(name)


def answer_status(host: str, port: int, request: bytes) -> int | None:
    """The status of the answer to `request`, or None when the connection ends without an answer."""
    try:
        raw = probe.exchange(host, port, request)
    except ConnectionResetError:
        return None
    return probe.parse_response(raw).status if raw else None


def stop_during_a_request(server: processes.RunningServer, signum: signal.Signals) -> tuple[int, list[int | None]]:
    """Send one GET, deliver `signum` to the server's group mid-request; return the exit code and the answer."""
    answers: list[int | None] = []
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"  # waitress-serve keeps alive
    # A pre-fork server's socket accepts before its worker has booted, and a worker still booting
    # has no signal handlers yet: one full answer first, so the signal meets a running worker.
    assert answer_status(server.host, server.port, request) == 200
    client = threading.Thread(target=lambda: answers.append(answer_status(server.host, server.port, request)))
    client.start()
    time.sleep(0.4)  # the request is now inside its 1 s simulated call
    os.killpg(server.process.pid, signum)
    exit_code = server.process.wait(timeout=10)
    client.join(timeout=10)
    return exit_code, answers


# --- the two application files, without a server ------------------------------------------------------------


def call_wsgi(method: str) -> tuple[str, list[tuple[str, str]], bytes]:
    """Call servers/wsgi_app.py through wsgiref's PEP 3333 validator, which rejects hop-by-hop headers."""
    environ: dict = {"REQUEST_METHOD": method, "QUERY_STRING": ""}
    setup_testing_defaults(environ)
    started_with: list = []
    result = validator(wsgi_app.make_app(0.0))(environ, lambda status, headers: started_with.extend([status, headers]))
    try:
        body = b"".join(result)
    finally:
        result.close()
    return started_with[0], started_with[1], body


def test_the_wsgi_app_answers_get_with_the_skeletons_page_and_keeps_pep_3333() -> None:
    status, headers, body = call_wsgi("GET")
    assert status == "200 OK"
    assert body == sequential_sockets.BODY
    assert dict(headers) == {"Content-Type": "text/html; charset=utf-8", "Content-Length": str(len(body))}


def test_the_wsgi_app_refuses_other_methods_with_405() -> None:
    status, headers, _ = call_wsgi("POST")
    assert status == "405 Method Not Allowed"
    assert dict(headers)["Allow"] == "GET"


def call_asgi(method: str) -> list[dict]:
    """Run servers/asgi_app.py for one request; return the messages it sent."""
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/", "headers": [], "http_version": "1.1"}
    asyncio.run(asgi_app.app(scope, receive, send))
    return sent


def test_the_asgi_app_answers_get_with_the_skeletons_page_and_asks_to_close() -> None:
    start, body = call_asgi("GET")
    headers = dict(start["headers"])
    assert start["status"] == 200
    assert body["body"] == sequential_sockets.BODY
    assert headers[b"content-length"] == str(len(sequential_sockets.BODY)).encode()
    assert headers[b"connection"] == b"close"


def test_with_app_keep_alive_the_asgi_app_leaves_the_connection_to_the_server(monkeypatch) -> None:
    monkeypatch.setattr(asgi_app, "KEEP_ALIVE", True)  # what APP_KEEP_ALIVE=1 sets at import
    start, body = call_asgi("GET")
    assert start["status"] == 200 and body["body"] == sequential_sockets.BODY
    assert b"connection" not in dict(start["headers"])


def test_app_keep_alive_is_read_from_the_environment_at_import() -> None:
    command = [sys.executable, "-c", "import asgi_app; print(asgi_app.KEEP_ALIVE)"]
    answers = [subprocess.run(command, cwd=REPO_ROOT / "servers", env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=30, check=True).stdout.strip()
               for env in ({"APP_KEEP_ALIVE": "1"}, {"APP_KEEP_ALIVE": "0"})]
    assert answers == ["True", "False"]


def test_the_asgi_app_refuses_other_methods_with_405() -> None:
    start, _ = call_asgi("POST")
    assert start["status"] == 405


def test_both_apps_answer_a_form_posted_to_form_200() -> None:
    """docs/deployment.md's race sends its POSTs here: a 405 there counted as 'not a 502' (issue 31, finding 4)."""
    environ: dict = {"REQUEST_METHOD": "POST", "SCRIPT_NAME": "", "PATH_INFO": "/form", "CONTENT_LENGTH": "4",
                     "CONTENT_TYPE": "application/x-www-form-urlencoded", "QUERY_STRING": ""}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(b"a=12")
    started: list = []
    result = validator(wsgi_app.make_app(0.0))(environ, lambda status, headers: started.extend([status]))
    try:
        body = b"".join(result)
    finally:
        result.close()
    assert started == ["200 OK"] and body == wsgi_app.FORM_RECEIVED
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"a=12", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/form", "headers": [], "http_version": "1.1"}
    asyncio.run(asgi_app.app(scope, receive, send))
    assert sent[0]["status"] == 200 and sent[1]["body"] == asgi_app.FORM_RECEIVED


# --- every real server serves the same bytes ----------------------------------------------------------------


@pytest.mark.parametrize("name", REAL_SERVERS)
def test_every_real_server_serves_the_skeletons_page_byte_for_byte(name: str, tmp_path) -> None:
    with started(design(name), tmp_path) as server:
        response = probe.get(server.host, server.port)
    assert probe.http_problems(response) == []
    assert response.body == sequential_sockets.BODY


# --- the overrides describe the servers ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "signum"), [("nginx", signal.SIGTERM), ("nginx", signal.SIGINT),
                                               ("gunicorn-sync", signal.SIGINT), ("gunicorn-gevent", signal.SIGINT)],
                         ids=["nginx-SIGTERM", "nginx-SIGINT", "gunicorn-sync-SIGINT", "gunicorn-gevent-SIGINT"])
def test_the_signals_left_out_of_stop_signals_cut_the_request_in_flight_off(name: str, signum, tmp_path) -> None:
    """nginx's fast shutdown and Gunicorn's quick shutdown: the waiting client gets no page."""
    assert signum.name not in design(name).stop_signals
    with started(design(name), tmp_path, delay=1.0) as server:
        exit_code, answers = stop_during_a_request(server, signum)
    assert exit_code == 0
    # nginx and gevent close without answering; a sync worker's sys.exit() lands inside the application,
    # which Gunicorn reports as a 500. Either way, not the page.
    assert len(answers) == 1 and answers[0] != 200


def test_uvicorn_stops_gracefully_on_sigterm_but_ends_killed_by_it(tmp_path) -> None:
    """Why uvicorn's stop signal is SIGINT: after a graceful SIGTERM it re-raises the signal on itself."""
    with started(design("uvicorn"), tmp_path, delay=1.0) as server:
        exit_code, answers = stop_during_a_request(server, signal.SIGTERM)
    assert answers == [200]
    assert exit_code == -signal.SIGTERM


@pytest.mark.parametrize("name", ["nginx", "uvicorn"])
def test_the_documented_oversized_head_status_is_what_the_server_answers(name: str, tmp_path) -> None:
    """nginx: 400 "Request Header Or Cookie Too Large"; uvicorn with httptools: no limit at all, so 200."""
    expected = design(name).oversized_head_status
    assert expected != 431
    head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Filler: %s\r\n" % (b"a" * 4000) * 18 + b"\r\n"
    with started(design(name), tmp_path) as server:
        assert answer_status(server.host, server.port, head) == expected


MALFORMED_CASES = [pytest.param(name, case, status, id=f"{name}-{case}")
                   for name in REAL_SERVERS
                   for case, status in design(name).to_json().get("malformed_request_status", {}).items()]


@pytest.mark.parametrize(("name", "case", "expected"), MALFORMED_CASES)
def test_the_documented_answer_to_a_malformed_request_line_is_what_the_server_answers(
        name: str, case: str, expected: int, tmp_path) -> None:
    with started(design(name), tmp_path) as server:
        raw = probe.exchange(server.host, server.port, MALFORMED_LINES[case])
    if expected == HTTP09_ANSWER:
        assert raw == sequential_sockets.BODY  # HTTP/0.9: no status line, no headers, just the page
    else:
        assert probe.parse_response(raw).status == expected


@pytest.mark.parametrize("name", ["gunicorn-sync", "gunicorn-gevent"])
def test_gunicorn_caps_header_lines_and_their_size_not_the_whole_head(name: str, tmp_path) -> None:
    """32 lines of up to 2 KiB: a 33rd tiny header is refused, and so is one 3 KiB header."""
    def request(*headers: bytes) -> bytes:
        return b"GET / HTTP/1.1\r\n" + b"".join(header + b"\r\n" for header in headers) + b"\r\n"

    with started(design(name), tmp_path) as server:
        thirty_two = answer_status(server.host, server.port, request(*[b"X-%d: 1" % i for i in range(32)]))
        thirty_three = answer_status(server.host, server.port, request(*[b"X-%d: 1" % i for i in range(33)]))
        one_large = answer_status(server.host, server.port, request(b"Host: a", b"Cookie: " + b"c" * 3000))
    assert (thirty_two, thirty_three, one_large) == (200, 431, 431)


@pytest.mark.parametrize("name", ["granian-asgi", "granian-wsgi"])
def test_granian_refuses_a_70_kib_head_with_a_48_kib_buffer_but_not_with_64_kib(name: str, tmp_path) -> None:
    """Why the catalogue sets --http1-buffer-size 49152: Granian's only cap is its read buffer."""
    head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + b"X-Filler: %s\r\n" % (b"a" * 1000) * 70 + b"\r\n"
    as_catalogued = design(name)
    assert as_catalogued.command[as_catalogued.command.index("--http1-buffer-size") + 1] == "49152"
    with_64_kib = dataclasses.replace(as_catalogued, command=[
        "65536" if part == "49152" else part for part in as_catalogued.command])
    statuses = []
    for variant in (as_catalogued, with_64_kib):
        with started(variant, tmp_path / str(len(statuses))) as server:
            statuses.append(answer_status(server.host, server.port, head))
    assert statuses == [431, 200]


@pytest.mark.parametrize("name", ["granian-asgi", "granian-wsgi"])
def test_granian_exits_1_when_its_worker_hears_the_stop_signal_before_its_main_process(name: str, tmp_path) -> None:
    """Why the catalogue sets stop_main_process_only for Granian.

    SIGTERM to the whole group reaches the main process and the worker at once. When the worker exits before
    the main process has run its own handler (once in a full test run beside a busy CPU), the main
    process takes the exit for a crash, shuts down by itself and exits 1. Sending the worker its copy first
    makes that happen every time. The main process's copy follows only if it has not stopped within 5 s:
    sent at a fixed 0.3 s, it once reached the main process at the very end of that shutdown, beside a
    busy CPU, and killed it (-15). (The behaviour suite's stop test shows SIGTERM to the main process
    alone stopping it gracefully, with status 0.)
    """
    assert design(name).stop_main_process_only
    with started(design(name), tmp_path) as server:
        assert answer_status(server.host, server.port, b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n") == 200
        workers = process_table.children_of(server.process.pid)
        assert len(workers) == 1, workers  # --workers 1
        os.kill(workers[0].pid, signal.SIGTERM)
        try:
            exit_code = server.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # the group's SIGTERM, reaching the main process after the worker's
            os.kill(server.process.pid, signal.SIGTERM)
            exit_code = server.process.wait(timeout=10)
    log = server.stdout_path.read_text(encoding="utf-8")  # Granian logs to standard output
    assert exit_code == 1, log
    assert "Unexpected exit from worker-1" in log


# --- waitress: the runner, and the pool behind it -------------------------------------------------------------


def simultaneous_statuses(host: str, port: int, count: int) -> tuple[float, list[int | None]]:
    """`count` GETs started together; the wall time until the last answer, and the statuses."""
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    return all_at_once(count, lambda: answer_status(host, port, request))


def test_waitress_runs_as_many_requests_at_once_as_it_has_threads(tmp_path) -> None:
    """Twice THREADS requests of 0.2 s take two rounds, not one and not eight."""
    count = 2 * 4  # THREADS in servers/waitress_server.py
    with started(design("waitress"), tmp_path, delay=0.2) as server:
        elapsed, statuses = simultaneous_statuses(server.host, server.port, count)
    assert statuses == [200] * count
    assert 0.38 < elapsed < 1.2, f"expected two rounds of 0.2 s, took {elapsed:.2f} s"


def test_the_waitress_runner_finishes_queued_requests_too_when_stopped(tmp_path) -> None:
    """SIGTERM while four requests run and four wait for a thread: all eight get the page, then exit 0."""
    with started(design("waitress"), tmp_path, delay=1.0) as server:
        results: list[tuple[float, list[int | None]]] = []
        clients = threading.Thread(target=lambda: results.append(simultaneous_statuses(server.host, server.port, 8)))
        clients.start()
        time.sleep(0.4)
        os.killpg(server.process.pid, signal.SIGTERM)
        exit_code = server.process.wait(timeout=10)
        clients.join(timeout=10)
    assert exit_code == 0
    assert results[0][1] == [200] * 8


def test_waitress_serve_dies_on_sigterm_with_the_request_in_flight(tmp_path) -> None:
    """Why servers/waitress_server.py exists: the stock command has no SIGTERM handler."""
    port = processes.free_port()
    command = [sys.executable, "-m", "waitress", f"--listen=127.0.0.1:{port}", "wsgi_app:app"]
    environment = {**os.environ, "APP_DELAY": "1"}
    with processes.running_server(command, port, tmp_path, env=environment, cwd=REPO_ROOT / "servers") as server:
        exit_code, answers = stop_during_a_request(server, signal.SIGTERM)
    assert exit_code == -signal.SIGTERM
    assert answers == [None]

