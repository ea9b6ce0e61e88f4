"""Open many server-sent-event streams at once, count each stream's events, and say how each ended.

    python scripts/harness/clients/sse_client.py --port 8000 --streams 1000 \
        --path '/events?interval=0.1&duration=15&size=64' [--slow 20 --slow-read-bytes 4096 --slow-read-every 0.1]

Theory of operation: one asyncio process (uvloop when installed) opens --streams connections,
--connect-parallel at a time (a listen backlog of 128 drops a burst of thousands of SYNs, and
a dropped SYN is retried only after a second), each sending one GET for --path. A Protocol, not
a StreamReader, receives the bytes (one callback per segment, the cheapest way asyncio has),
so the client keeps up with more events than the servers it measures send. Events are counted
by the blank line that ends each one (`\\n\\n`), which neither a close-delimited body nor chunked
framing produces anywhere else. An event's lag is when it arrived minus when it was due: the
request's send time plus its number times the interval (every design sends event 0 at once).
--slow more connections read slowly: a receive buffer of --slow-rcvbuf bytes, and
--slow-read-bytes read every --slow-read-every seconds; they are counted apart.

How a stream ended, from its last bytes: `clean` (a close-delimited body that ends after a whole
event, or a chunked body's last chunk), `cut between events` (chunked, closed after a whole
event but without the last chunk), `truncated` (closed inside an event), `reset` (the
connection was reset), `no answer` (closed before a response head), `open` (still open when
--timeout ran out). End times are time.monotonic(), the system's clock, so the harness can
compare them with when it sent a signal.

Standard library only (uvloop optional): the harness runs this file as a subprocess pinned to the
load tool's CPU, and prints one JSON object on stdout. `verify_stream` is the check the harness
runs before measuring a design of kind "stream".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import socket
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

CONNECT_TIMEOUT = 3.0  # a SYN dropped by a full backlog is retried after 1 s, then 3 s: give it one retry
END_OF_EVENT = b"\n\n"
LAST_CHUNK = b"0\r\n\r\n"
TAIL_BYTES = 8  # what we keep of the last bytes received, to tell how a stream ended
TIMELINE_STEP = 0.5  # seconds between two samples of the events received so far


def request_bytes(host: str, port: int, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode("ascii")


class StreamCounter(asyncio.Protocol):
    """One stream: sends the request, counts events as segments arrive, records how and when it ended."""

    def __init__(self, request: bytes, interval: float, totals: list[int]) -> None:
        self.request, self.interval, self.totals = request, interval, totals
        self.head = b""
        self.head_done = False
        self.status = 0
        self.chunked = False
        self.tail = b""
        self.events = 0
        self.max_lag = 0.0
        self.sent_at = 0.0
        self.ended_at: float | None = None
        self.outcome = "open"
        self.transport: asyncio.BaseTransport | None = None
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.sent_at = time.monotonic()
        self.transport = transport
        transport.write(self.request)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if not self.head_done:
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end == -1:
                return
            head, data = self.head[:end].lower(), self.head[end + 4:]
            self.head_done = True
            self.status = int(head.split(b" ", 2)[1]) if head.startswith(b"http/1.") else 0
            self.chunked = b"transfer-encoding: chunked" in head
        counted = (self.tail[-1:] + data).count(END_OF_EVENT)  # one byte back: an end split between segments
        if counted:
            self.events += counted
            self.totals[0] += counted
            self.max_lag = max(self.max_lag, now - (self.sent_at + (self.events - 1) * self.interval))
        self.tail = (self.tail + data)[-TAIL_BYTES:]
        if self.chunked and self.tail.endswith(LAST_CHUNK):
            self._end(None)  # the body is complete: a server that keeps the connection need not close it for us
            if self.transport is not None:
                self.transport.close()

    def eof_received(self) -> bool:
        self._end(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)

    def _end(self, exc: Exception | None) -> None:
        if self.ended_at is not None:
            return
        self.ended_at = time.monotonic()
        self.outcome = ("reset" if exc is not None else "no answer" if not self.head_done else ending(self.tail,
                                                                                                    self.chunked))
        if not self.done.done():
            self.done.set_result(None)


def ending(tail: bytes, chunked: bool) -> str:
    """How a body that the server closed ended, from its last bytes."""
    if chunked:
        if tail.endswith(LAST_CHUNK):
            return "clean"
        return "cut between events" if tail.endswith(END_OF_EVENT + b"\r\n") else "truncated"
    return "clean" if tail.endswith(END_OF_EVENT) or not tail else "truncated"


async def open_stream(host: str, port: int, request: bytes, interval: float, totals: list[int],
                      gate: asyncio.Semaphore, counters: list[StreamCounter], refused: dict[str, int]) -> None:
    """One stream, connected under the gate, kept in `counters`; or counted in `refused` with why not."""
    loop = asyncio.get_running_loop()
    async with gate:
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                _, counter = await loop.create_connection(lambda: StreamCounter(request, interval, totals), host, port)
        except (OSError, TimeoutError) as error:
            why = f"connect: {type(error).__name__}"
            refused[why] = refused.get(why, 0) + 1
            return
    counters.append(counter)


async def slow_reader(host: str, port: int, request: bytes, rcvbuf: int, read_bytes: int, every: float,
                      until: float) -> dict[str, Any]:
    """A client that reads `read_bytes` every `every` seconds through a small receive buffer, until `until`."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)  # before connect: it sets the window offered
    sock.setblocking(False)
    received, outcome = 0, "open"
    try:
        await asyncio.wait_for(loop.sock_connect(sock, (host, port)), CONNECT_TIMEOUT)
        await loop.sock_sendall(sock, request)
        while time.monotonic() < until:
            await asyncio.sleep(every)
            try:
                chunk = sock.recv(read_bytes)
            except BlockingIOError:
                continue
            if not chunk:
                outcome = "ended"
                break
            received += len(chunk)
    except OSError as error:
        outcome = f"error: {type(error).__name__}"
    finally:
        sock.close()
    return {"received_bytes": received, "outcome": outcome}


def distribution(values: list[float], digits: int = 3) -> dict[str, float | None]:
    if not values:
        return {"min": None, "median": None, "p99": None, "max": None}
    ordered = sorted(values)
    return {"min": round(ordered[0], digits), "median": round(statistics.median(ordered), digits),
            "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], digits),
            "max": round(ordered[-1], digits)}


@dataclass(frozen=True)
class StreamLoad:
    """What one run opens: the command line's values (see the module's docstring)."""

    port: int
    host: str = "127.0.0.1"
    streams: int = 100
    path: str = "/events"
    interval: float = 0.1  # the interval the path asks for (for the lag)
    connect_parallel: int = 100
    timeout: float = 60.0  # seconds after which streams still open count as open
    slow: int = 0  # slow readers, beside the streams
    slow_path: str = "/events"
    slow_rcvbuf: int = 4096
    slow_read_bytes: int = 4096
    slow_read_every: float = 0.1


async def run(args: StreamLoad) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    request = request_bytes(args.host, args.port, args.path)
    totals = [0]
    gate = asyncio.Semaphore(args.connect_parallel)
    started = time.monotonic()
    deadline = started + args.timeout
    slow = [asyncio.create_task(slow_reader(args.host, args.port, request_bytes(args.host, args.port, args.slow_path),
                                            args.slow_rcvbuf, args.slow_read_bytes, args.slow_read_every, deadline))
            for _ in range(args.slow)]
    counters: list[StreamCounter] = []
    refused: dict[str, int] = {}
    opening = asyncio.gather(*(open_stream(args.host, args.port, request, args.interval, totals, gate, counters,
                                           refused) for _ in range(args.streams)))
    # Opening may not outlast its own budget: a server that stops accepting (a full backlog) would
    # otherwise keep us connecting, CONNECT_TIMEOUT per hundred, long after the streams should have ended.
    open_until = min(deadline, started + CONNECT_TIMEOUT + args.streams / 200)
    timeline: list[tuple[float, int]] = []
    while not opening.done() and time.monotonic() < open_until:
        await asyncio.wait([opening], timeout=TIMELINE_STEP)
        timeline.append((round(time.monotonic() - started, 2), totals[0]))
    if not opening.done():
        opening.cancel()
        refused["not connected within the opening time"] = args.streams - len(counters) - sum(refused.values())
    with contextlib.suppress(asyncio.CancelledError):
        await opening
    connected_at = time.monotonic()
    pending = {counter.done for counter in counters}
    while pending and time.monotonic() < deadline:
        _, pending = await asyncio.wait(pending, timeout=min(TIMELINE_STEP, max(0.0, deadline - time.monotonic())))
        timeline.append((round(time.monotonic() - started, 2), totals[0]))
    slow_results = await asyncio.gather(*slow)
    outcomes: dict[str, int] = {}
    for counter in counters:
        outcomes[counter.outcome] = outcomes.get(counter.outcome, 0) + 1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    ended = [counter.ended_at for counter in counters if counter.ended_at is not None]
    result = {
        "streams_asked": args.streams,
        "streams_connected": len(counters),
        "connect_failures": refused,
        "connect_seconds": round(connected_at - started, 2),
        "streams_answered": sum(1 for counter in counters if counter.status == 200),
        "streams_with_events": sum(1 for counter in counters if counter.events),
        "events": totals[0],
        "events_per_stream": distribution([counter.events for counter in counters], 1),
        "max_lag_seconds": distribution([counter.max_lag for counter in counters if counter.events]),
        "outcomes": outcomes,
        "ended_monotonic": distribution(ended, 3),
        "started_monotonic": round(started, 3),
        "timeline": timeline,  # (seconds since start, events received so far)
        "slow_readers": slow_results,
        "client_cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "client_wall_seconds": round(time.monotonic() - started, 2),
        "event_loop": type(loop).__module__.split(".")[0],
    }
    for transport_owner in counters:
        if transport_owner.ended_at is None:
            transport_owner.done.cancel()
    return result


def verify_stream(host: str, port: int) -> list[str]:
    """The check before measuring a stream design: GET / is the page, and a short stream brings its events."""
    problems = []
    with socket.create_connection((host, port), timeout=5) as conn:
        conn.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode("ascii"))
        page = read_all(conn, time.monotonic() + 5)
    if not page.startswith(b"HTTP/1.1 200") or b"<h1>Hello from a Python server</h1>" not in page:
        problems.append(f"GET / is not the page: {page[:80]!r}")
    with socket.create_connection((host, port), timeout=5) as conn:
        conn.sendall(request_bytes(host, port, "/events?interval=0.05&duration=0.2&size=64"))
        stream = read_all(conn, time.monotonic() + 5)
    head, _, body = stream.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or b"text/event-stream" not in head.lower():
        problems.append(f"GET /events is not an event stream: {head[:120]!r}")
    elif body.count(END_OF_EVENT) != 4:
        problems.append(f"GET /events?interval=0.05&duration=0.2 brought {body.count(END_OF_EVENT)} events, not 4")
    return problems


def read_all(conn: socket.socket, deadline: float) -> bytes:
    """One answer: until the server closes, its Content-Length is complete or its last chunk came (or the deadline)."""
    received = b""
    while (remaining := deadline - time.monotonic()) > 0 and not complete(received):
        conn.settimeout(remaining)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        received += chunk
    return received


def complete(answer: bytes) -> bool:
    """Whether an answer kept open by its server is whole: its Content-Length, or a chunked body's last chunk."""
    head, found, body = answer.partition(b"\r\n\r\n")
    if not found:
        return False
    for line in head.lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return b"transfer-encoding: chunked" in head.lower() and body.endswith(b"\r\n" + LAST_CHUNK)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--path", default="/events")
    parser.add_argument("--interval", type=float, default=0.1, help="the interval the path asks for (for the lag)")
    parser.add_argument("--connect-parallel", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds after which streams still open count as open")
    parser.add_argument("--slow", type=int, default=0, help="slow readers, beside the streams")
    parser.add_argument("--slow-path", default="/events")
    parser.add_argument("--slow-rcvbuf", type=int, default=4096)
    parser.add_argument("--slow-read-bytes", type=int, default=4096)
    parser.add_argument("--slow-read-every", type=float, default=0.1)
    args = StreamLoad(**vars(parser.parse_args(argv)))
    try:
        import uvloop  # the fastest loop at hand: the client must not be what limits the events
    except ImportError:
        result = asyncio.run(run(args))
    else:
        result = uvloop.run(run(args))
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
