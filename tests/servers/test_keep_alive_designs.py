"""The keep-alive designs: many requests per connection, pipelining in order, and every way a connection ends.

Each design runs as the harness runs it (its own process group, a free loopback
port) and is always stopped. The ordering promise is also tested without
sockets or clocks: the asyncio protocol is fed ten pipelined requests and
their timers are fired in reverse, as if the last request's call finished first.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import socket
import time

import pytest
from harness.model.paths import REPO_ROOT

from conftest import CATALOGUE, started
from python_source import differing_lines

KEEP_ALIVE_DESIGNS = ["asyncio-protocol-keep-alive", "uvloop-protocol-keep-alive",
                      "thread-per-connection-keep-alive", "gevent-thread-per-connection"]
BIG_BYTES = 1024 * 1024
PAGE_MARK = b"<h1>Hello from a Python server</h1>"


def module_constant(path: str, name: str) -> float:
    """A constant's value read from a server file without importing it (the gevent file patches on import)."""
    tree = ast.parse((REPO_ROOT / path).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and [target.id for target in node.targets if isinstance(target, ast.Name)] == [name]:
            return ast.literal_eval(node.value)
    raise LookupError(f"{name} not in {path}")


class Client:
    """One connection that reads responses one at a time, by their Content-Length."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.conn = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.conn.sendall(data)

    def _fill(self) -> None:
        chunk = self.conn.recv(1 << 20)
        if not chunk:
            raise EOFError("the server closed the connection")
        self.buffer += chunk

    def response(self) -> tuple[int, dict[str, str], bytes]:
        """The next whole response: status, lower-cased headers, body."""
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("iso-8859-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        length = int(headers["content-length"])
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(status_line.split()[1]), headers, body

    def closed_within(self, seconds: float) -> float | None:
        """Seconds until the server closes (end of file or reset), or None if it is still open after `seconds`."""
        started_at = time.monotonic()
        self.conn.settimeout(seconds)
        try:
            while self.conn.recv(65536):
                pass
        except TimeoutError:
            return None
        except ConnectionResetError:
            pass
        return time.monotonic() - started_at

    def close(self) -> None:
        self.conn.close()


def get(path: str = "/", version: str = "1.1", connection: str | None = None) -> bytes:
    header = f"Connection: {connection}\r\n" if connection else ""
    return f"GET {path} HTTP/{version}\r\nHost: 127.0.0.1\r\n{header}\r\n".encode("ascii")


@pytest.fixture(params=KEEP_ALIVE_DESIGNS)
def design(request: pytest.FixtureRequest):
    return CATALOGUE.design(request.param)


def test_the_catalogue_says_they_keep_alive_and_pipeline(design) -> None:
    assert design.keep_alive is True and design.pipelining is True


def test_several_requests_on_one_connection_then_connection_close_closes_it(design, tmp_path) -> None:
    with started(design, tmp_path, delay=0.01) as server:
        client = Client(server.port)
        try:
            for _ in range(3):
                client.send(get())
                status, headers, body = client.response()
                assert (status, headers["connection"]) == (200, "keep-alive")
                assert PAGE_MARK in body
            client.send(get(connection="close"))
            status, headers, _ = client.response()
            assert (status, headers["connection"]) == (200, "close")
            assert client.closed_within(3.0) is not None
        finally:
            client.close()


def test_ten_pipelined_requests_in_one_segment_are_answered_in_order(design, tmp_path) -> None:
    paths = ["/", "/big"] * 5  # answers of very different sizes: any reordering shows in the lengths
    requests = b"".join(get(path) for path in paths[:-1]) + get(paths[-1], connection="close")
    with started(design, tmp_path, delay=0.05) as server:
        client = Client(server.port)
        try:
            client.send(requests)
            answers = [client.response() for _ in paths]
            closed = client.closed_within(3.0)
        finally:
            client.close()
    assert [status for status, _, _ in answers] == [200] * 10
    assert [len(body) for _, _, body in answers] == [len(answers[0][2]), BIG_BYTES] * 5
    assert PAGE_MARK in answers[0][2]
    assert [headers["connection"] for _, headers, _ in answers] == ["keep-alive"] * 9 + ["close"]
    assert closed is not None


def test_http_1_0_closes_unless_asked_to_keep_alive_as_ab_k_asks(design, tmp_path) -> None:
    with started(design, tmp_path) as server:
        plain = Client(server.port)
        kept = Client(server.port)
        try:
            plain.send(get(version="1.0"))
            assert plain.response()[1]["connection"] == "close"
            assert plain.closed_within(3.0) is not None
            for _ in range(2):
                kept.send(get(version="1.0", connection="Keep-Alive"))  # ab -k sends exactly this token
                status, headers, _ = kept.response()
                assert (status, headers["connection"]) == (200, "keep-alive")
            assert kept.closed_within(0.5) is None  # still open after answering
        finally:
            plain.close()
            kept.close()


def test_an_idle_connection_is_closed_after_the_keep_alive_timeout(design, tmp_path) -> None:
    idle_timeout = module_constant(design.file, "KEEP_ALIVE_TIMEOUT")
    with started(design, tmp_path) as server:
        client = Client(server.port)
        try:
            client.send(get())
            assert client.response()[0] == 200
            closed_after = client.closed_within(idle_timeout + 3.0)
        finally:
            client.close()
    assert closed_after is not None, "the idle connection was still open"
    assert closed_after > idle_timeout - 1.0  # not closed at once either


def test_a_client_that_half_closes_after_its_requests_gets_every_answer(design, tmp_path) -> None:
    with started(design, tmp_path, delay=0.05) as server:
        client = Client(server.port)
        try:
            client.send(get() + get())
            client.conn.shutdown(socket.SHUT_WR)  # like `nc -N`: the requests, then end of file
            answers = [client.response()[0] for _ in range(2)]
            assert client.closed_within(3.0) is not None
        finally:
            client.close()
    assert answers == [200, 200]


def test_a_malformed_request_after_a_good_one_is_refused_in_order_and_closes(design, tmp_path) -> None:
    with started(design, tmp_path, delay=0.05) as server:
        client = Client(server.port)
        try:
            client.send(get() + b"NONSENSE\r\n\r\n" + get())
            statuses = [client.response()[0] for _ in range(2)]
            assert client.closed_within(3.0) is not None  # the request after the bad one is never answered
        finally:
            client.close()
    assert statuses == [200, 400]


def test_the_gevent_file_is_the_thread_file_plus_two_lines() -> None:
    assert differing_lines("servers/thread_per_connection_keep_alive.py", "servers/gevent_thread_per_connection.py") == [
        "+ from gevent import monkey  # first, before any other import, so every later one gets the patched modules",
        "+ monkey.patch_all()  # socket, time.sleep, threading, signal... now switch greenlets instead of blocking",
    ]


def test_the_uvloop_file_is_the_asyncio_file_but_for_uvloop_lines() -> None:
    assert differing_lines("servers/asyncio_protocol_keep_alive.py", "servers/uvloop_protocol_keep_alive.py",
                           code_only=True) == [
        "+ import uvloop  # the one library this file is about: the same program on another event loop",
        "-     asyncio.run(serve_forever(args.host, args.port, args.delay, args.work))",
        "+     uvloop.run(serve_forever(args.host, args.port, args.delay, args.work))",
    ]
    # The docstrings may differ, and must: each names its own event loop and starts its own file.
    docstring = ast.get_docstring(ast.parse((REPO_ROOT / "servers" / "uvloop_protocol_keep_alive.py").read_text()))
    assert "uvloop" in docstring.splitlines()[0]
    assert "\nRun:   python servers/uvloop_protocol_keep_alive.py " in docstring


# Without sockets or clocks: the protocol object, a transport that records writes, timers we fire by hand.

def load_asyncio_design():
    spec = importlib.util.spec_from_file_location("asyncio_protocol_keep_alive",
                                                  REPO_ROOT / "servers" / "asyncio_protocol_keep_alive.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RecordingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.eof_written = False

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def write_eof(self) -> None:
        self.eof_written = True

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class HandTimers:
    """Stands in for the loop's call_later: records the callbacks so the test decides when each call ends."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: list[tuple[object, tuple]] = []

    def call_later(self, delay: float, callback, *args) -> asyncio.TimerHandle:
        self.pending.append((callback, args))
        return asyncio.TimerHandle(self.loop.time() + delay, lambda: None, (), self.loop)

    def time(self) -> float:
        return self.loop.time()


def test_answers_leave_in_request_order_even_when_later_calls_finish_first() -> None:
    design = load_asyncio_design()

    async def scenario() -> tuple[list[list[bytes]], bool]:
        protocol = design.KeepAliveProtocol(0.1, 0, set())
        timers = protocol.loop = HandTimers(asyncio.get_running_loop())
        transport = RecordingTransport()
        protocol.connection_made(transport)
        paths = [f"/?n={number}" for number in range(9)] + ["/big"]
        protocol.data_received(b"".join(get(path) for path in paths))  # ten requests in one segment
        assert len(timers.pending) == 10
        seen = []
        for callback, args in reversed(timers.pending):  # the last request's call finishes first
            callback(*args)
            seen.append(list(transport.written))
        return seen, transport.eof_written

    seen, eof_written = asyncio.run(scenario())
    assert all(written == [] for written in seen[:-1])  # nothing leaves while the first answer is not ready
    (everything,) = seen[-1]  # then all ten leave together, in one write
    bodies_in_order = everything.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert len(bodies_in_order) == 10
    assert all(PAGE_MARK in answer for answer in bodies_in_order[:9])
    assert bodies_in_order[9].endswith(b"x" * BIG_BYTES)
    assert not eof_written  # every request asked to keep the connection: it stays open


def test_remembered_heads_are_capped_in_number_and_size() -> None:
    design = load_asyncio_design()
    design._parsed_heads.clear()
    small = b"GET / HTTP/1.1\r\nHost: x"
    large = small + b"\r\nX-Filler: " + b"a" * design.MAX_REMEMBERED_HEAD_BYTES
    assert design.parse_request_head(small) == design.parse_request_head(large) == ("GET", b"/", True)
    assert list(design._parsed_heads) == [small]  # the large head was parsed, not kept
    for number in range(design.MAX_PARSED_HEADS + 5):
        design.parse_request_head(b"GET /%d HTTP/1.1" % number)
    assert len(design._parsed_heads) <= design.MAX_PARSED_HEADS
    with pytest.raises(design.RequestError):
        design.parse_request_head(b"NONSENSE")
    assert b"NONSENSE" not in design._parsed_heads
