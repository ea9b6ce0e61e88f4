"""A client that sends raw bytes and reads back whatever comes: for requests no well-behaved client sends.

The hostile suite (suites/hostile/) talks to servers through this module. It sends
exactly the bytes it is given, at the pace it is given, and reports what came back
as it arrived (`Reading`): the bytes, whether the server closed (FIN), reset, or
left the connection open until our deadline, and when. `responses` then reads the
statuses out of those bytes however the server framed them: a Content-Length
(clients/probe.split_response, the harness's one framing by length), chunked, a body
ended by the close, an interim 1xx, or an HTTP/0.9 answer with no status line at all.
For many connections at once it opens them without blocking (`held_connections`)
and watches which the server closes (`watch_closes`), sending a byte now and then if
asked (slowloris).

Known limits: every connection is to an address we were given (the suite gives
127.0.0.1) and bounded by a deadline; "closed" means the client saw EOF or a reset,
so a server that stops reading but keeps the socket is "open" at the deadline.
"""

from __future__ import annotations

import contextlib
import re
import selectors
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from harness.clients import probe

STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})")
PROBE_REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


@dataclass
class Reading:
    """What one connection received: the bytes, how it ended, when."""

    data: bytes = b""
    ended: str = "open"  # "eof" (FIN), "reset", or "open" (still open at the bound)
    seconds: float | None = None  # from the last byte sent to the end (None while open)
    first_byte_seconds: float | None = None


def connect(host: str, port: int, timeout: float = 2.0) -> socket.socket:
    """A connection that sends each write at once (no Nagle delay): a dribble arrives as dribbled."""
    conn = socket.create_connection((host, port), timeout=timeout)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def responses(data: bytes) -> tuple[list[int], bool]:
    """The statuses of the responses in `data`, in order, and whether the last one is complete.

    0 stands for an HTTP/0.9 answer (bytes that are not a status line: the page alone).
    """
    statuses: list[int] = []
    rest = data
    while rest:
        match = STATUS_LINE.match(rest)
        if match is None:
            return (statuses or [0]), bool(statuses)
        status = int(match.group(1))
        end = rest.find(b"\r\n\r\n")
        if end < 0:
            return statuses + [status], False
        statuses.append(status)
        head, body = rest[:end].lower(), rest[end + 4:]
        if 100 <= status < 200:
            rest = body
            continue
        try:
            framed = probe.split_response(rest)
        except ValueError:  # no Content-Length (or a head probe cannot parse): chunked, or ended by the close
            if b"chunked" not in head:
                return statuses, True  # whatever came is the body
            end = body.find(b"\r\n0\r\n\r\n")
            if end < 0 and not body.startswith(b"0\r\n\r\n"):
                return statuses, False
            rest = body[end + 7:] if end >= 0 else body[5:]
            continue
        if framed is None:
            return statuses, False
        rest = framed[1]
    return statuses, bool(statuses)


def read_answer(conn: socket.socket, sent_at: float, deadline: float,
                until_complete: Callable[[list[int]], bool] | None = None) -> Reading:
    """Read until the server closes, resets or the deadline; stop early once `until_complete` says so."""
    reading = Reading()
    received = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            break
        except OSError:
            reading.ended, reading.seconds = "reset", time.monotonic() - sent_at
            break
        if reading.first_byte_seconds is None and chunk:
            reading.first_byte_seconds = time.monotonic() - sent_at
        if not chunk:
            reading.ended, reading.seconds = "eof", time.monotonic() - sent_at
            break
        received += chunk
        if until_complete is not None:
            statuses, complete = responses(bytes(received))
            if complete and until_complete(statuses):
                break
    reading.data = bytes(received)
    return reading


def reset(conn: socket.socket) -> None:
    """Close with SO_LINGER 0: the kernel sends RST instead of FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def closed_by_peer(conn: socket.socket) -> bool:
    """Whether the server has closed this connection (EOF or reset waiting on it), looked at without waiting and
    without taking anything from it; a connection with data waiting (an answer) is not counted as closed."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing to read
    except OSError:
        return True  # reset (ECONNRESET) or otherwise gone


def ask_each(connections: list[socket.socket], request: bytes, within: float) -> dict[str, int]:
    """Send `request` on every connection at once, then wait up to `within` s: how many got a status line
    ("answered"), were closed or reset before one ("closed"), or got nothing ("silent")."""
    counts = {"answered": 0, "closed": 0, "silent": 0}
    received: dict[socket.socket, bytes] = {}
    for conn in connections:
        try:
            conn.sendall(request)
            received[conn] = b""
        except OSError:  # already reset, or its send side shut
            counts["closed"] += 1
    deadline = time.monotonic() + within
    with selectors.DefaultSelector() as selector:
        for conn in received:
            selector.register(conn, selectors.EVENT_READ)
        while selector.get_map() and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                conn = key.fileobj
                try:
                    chunk = conn.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                received[conn] += chunk
                if STATUS_LINE.match(received[conn]) or not chunk:
                    counts["answered" if STATUS_LINE.match(received[conn]) else "closed"] += 1
                    selector.unregister(conn)
        counts["silent"] += len(selector.get_map())
    return counts


def open_many(host: str, port: int, count: int, within: float = 2.0) -> tuple[list[socket.socket], int]:
    """Start `count` connections at once (non-blocking); return the established ones and how many were not."""
    pending: list[socket.socket] = []
    for _ in range(count):
        conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        conn.setblocking(False)
        conn.connect_ex((host, port))
        pending.append(conn)
    established: list[socket.socket] = []
    with selectors.DefaultSelector() as selector:
        for conn in pending:
            selector.register(conn, selectors.EVENT_WRITE)
        deadline = time.monotonic() + within
        while len(established) < len(pending) and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=max(0.0, deadline - time.monotonic())):
                conn = key.fileobj
                selector.unregister(conn)
                if conn.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    established.append(conn)
                else:
                    conn.close()
    for conn in pending:
        if conn not in established:
            conn.close()  # a second close of a refused one does nothing
    return established, len(pending) - len(established)


@contextlib.contextmanager
def held_connections(host: str, port: int, count: int) -> Iterator[tuple[list[socket.socket], int]]:
    """`count` connections opened at once (open_many), every one closed on the way out."""
    connections, refused = open_many(host, port, count)
    try:
        yield connections, refused
    finally:
        for conn in connections:
            conn.close()


def watch_closes(connections: list[socket.socket], started: float, deadline: float,
                 every: float | None = None, send: bytes = b"") -> dict[socket.socket, Reading]:
    """Wait for the server to close each connection (EOF or reset), optionally sending `send` every `every` s."""
    readings = {conn: Reading() for conn in connections}
    open_ones = set(connections)
    next_send = time.monotonic() + (every or 0)
    with selectors.DefaultSelector() as selector:
        for conn in connections:
            selector.register(conn, selectors.EVENT_READ)
        while open_ones and time.monotonic() < deadline:
            timeout = deadline - time.monotonic()
            if every:
                timeout = min(timeout, max(0.0, next_send - time.monotonic()))
            for key, _ in selector.select(timeout=max(0.0, timeout)):
                conn = key.fileobj
                try:
                    chunk = conn.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk, readings[conn].ended = b"", "reset"
                readings[conn].data += chunk
                if not chunk:
                    readings[conn].ended = readings[conn].ended if readings[conn].ended == "reset" else "eof"
                    readings[conn].seconds = time.monotonic() - started
                    selector.unregister(conn)
                    open_ones.discard(conn)
            if every and time.monotonic() >= next_send:
                next_send += every
                for conn in list(open_ones):
                    try:
                        conn.send(send)
                    except BlockingIOError:
                        pass
                    except OSError:
                        readings[conn].ended, readings[conn].seconds = "reset", time.monotonic() - started
                        selector.unregister(conn)
                        open_ones.discard(conn)
    return readings


@dataclass
class ProbeResult:
    status: int | None
    seconds: float
    error: str = ""

    @property
    def served(self) -> bool:
        return self.status == 200

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "seconds": round(self.seconds, 3), "error": self.error}


def well_behaved_get(host: str, port: int, timeout: float) -> ProbeResult:
    """One well-behaved GET /: its status, or the reason it got none, within `timeout`."""
    started = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(PROBE_REQUEST)
            reading = read_answer(conn, started, started + timeout, until_complete=lambda statuses: True)
    except OSError as error:
        return ProbeResult(None, time.monotonic() - started, f"{type(error).__name__}: {error}")
    statuses, complete = responses(reading.data)
    if not complete:
        return ProbeResult(None, time.monotonic() - started, f"no complete answer within {timeout:g} s")
    return ProbeResult(statuses[0], time.monotonic() - started)
