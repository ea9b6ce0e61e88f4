"""What clients see across one restart: kept-alive connections idle at that moment, and long requests in flight.

Theory of operation, in three steps on one clock (time.perf_counter, CLOCK_MONOTONIC on Linux):
  1. open `--idle` connections and send one request on each, HTTP/1.1 without `Connection:
     close`; once answered, each connection is idle and kept open (unless the server said
     `Connection: close`), and a watcher waits on it for the server's close (end of file) or
     a reset, noting the moment;
  2. send `--long` requests, each on a new connection; `--restart-after` seconds later, print
     `restart` on stdout: the harness sends the restart signal as soon as it reads that line;
  3. `--next-after` seconds after that line (a list: the idle connections take the moments in
     turn), each idle connection sends its next request: on the same connection if the server
     has not closed it, else on a new one, as an HTTP client library does when it finds its
     pooled connection closed (urllib3's is_connection_dropped). A connection the server
     closes after the request was sent is a failure no client library can hide without
     resending (`closed`: end of file before a whole answer; `reset`).
Every request's outcome is its status, or `closed`, `reset`, `timeout`, `refused`; every moment is
in seconds from the `restart` line (negative: before it). The report is one JSON object on stdout,
after the `restart` line.

Run:   python scripts/harness/clients/restart_probe.py --port 8000 --idle 2 --long 2 --next-after 1 4
Known limits: loopback only; GET / with answers framed by Content-Length (every design here).
It runs as a subprocess and imports nothing from the harness; read_answer is a copy of
clients/idle_race.py's, held to it by tests/harness/clients/test_standalone_copies.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

TIMEOUT_S = 30.0  # an answer slower than this is counted as a timeout, not waited for


@dataclass
class Answer:
    """One request's outcome: a status or why there was none, and the server's keep-alive verdict."""

    outcome: int | str
    keep: bool = False
    sent: float = 0.0
    ended: float = 0.0

    def to_json(self, origin: float) -> dict[str, Any]:
        return {"outcome": self.outcome, "keep_alive": self.keep, "sent_s": round(self.sent - origin, 3),
                "ended_s": round(self.ended - origin, 3), "took_s": round(self.ended - self.sent, 3)}


@dataclass
class IdleConnection:
    """A kept-alive connection: its first answer, when and how the server closed it, its next request."""

    streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    first: Answer | None = None
    closed_by_server: str | None = None  # "closed" (end of file) or "reset", seen while idle
    closed_at: float | None = None
    watcher: asyncio.Task[None] | None = None
    next_at_s: float = 0.0
    reused: bool = False
    next: Answer | None = None


def request_bytes(host: str, port: int) -> bytes:
    """GET / kept alive: HTTP/1.1 without Connection: close."""
    return f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode("ascii")


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """One answer's status and whether its sender keeps the connection, read by its Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    await reader.readexactly(int(fields.get("content-length", "0")))
    return status, fields.get("connection", "").lower() != "close"


async def exchange(streams: tuple[asyncio.StreamReader, asyncio.StreamWriter], request: bytes) -> Answer:
    """Send one request on open streams and read its answer; the outcome says what happened."""
    reader, writer = streams
    answer = Answer("timeout", sent=time.perf_counter())
    try:
        writer.write(request)
        answer.outcome, answer.keep = await asyncio.wait_for(read_answer(reader), TIMEOUT_S)
    except TimeoutError:
        answer.outcome = "timeout"
    except asyncio.IncompleteReadError:
        answer.outcome = "closed"  # end of file before a whole answer
    except (ConnectionError, OSError):
        answer.outcome = "reset"
    answer.ended = time.perf_counter()
    return answer


async def connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    try:
        return await asyncio.open_connection(host, port)
    except OSError:
        return None


async def fresh_request(host: str, port: int, request: bytes) -> Answer:
    """A request on a new connection, closed after its answer."""
    started = time.perf_counter()
    streams = await connect(host, port)
    if streams is None:
        return Answer("refused", sent=started, ended=time.perf_counter())
    try:
        return await exchange(streams, request)
    finally:
        streams[1].close()


async def watch(connection: IdleConnection) -> None:
    """Wait on an idle connection until the server closes or resets it; note when."""
    assert connection.streams is not None
    try:
        data = await connection.streams[0].read(1)
        connection.closed_by_server = "closed" if not data else "unexpected bytes"
    except (ConnectionError, OSError):
        connection.closed_by_server = "reset"
    connection.closed_at = time.perf_counter()


async def next_request(connection: IdleConnection, host: str, port: int, request: bytes, due: float) -> None:
    """At `due`, the idle connection's next request: on it if still open, else on a new connection."""
    await asyncio.sleep(max(0.0, due - time.perf_counter()))
    if connection.streams is not None and connection.closed_by_server is None:
        assert connection.watcher is not None
        connection.watcher.cancel()  # a read waiting for data: cancelling it consumes nothing
        await asyncio.gather(connection.watcher, return_exceptions=True)
        connection.reused = True
        connection.next = await exchange(connection.streams, request)
    else:
        connection.next = await fresh_request(host, port, request)
    if connection.streams is not None:
        connection.streams[1].close()


async def probe(host: str, port: int, idle: int, long: int, restart_after: float,
                next_after: list[float]) -> dict[str, Any]:
    """The three steps; the report with every moment from the restart line."""
    request = request_bytes(host, port)
    connections = [IdleConnection() for _ in range(idle)]

    async def first(connection: IdleConnection) -> None:
        connection.streams = await connect(host, port)
        if connection.streams is None:
            connection.first = Answer("refused", sent=time.perf_counter(), ended=time.perf_counter())
            return
        connection.first = await exchange(connection.streams, request)
        if connection.first.outcome == 200:  # answered: idle from here; the watcher notes the server's close
            connection.watcher = asyncio.create_task(watch(connection))
        else:
            connection.closed_by_server, connection.closed_at = "before the restart", time.perf_counter()

    await asyncio.gather(*(first(connection) for connection in connections))
    long_tasks = [asyncio.create_task(fresh_request(host, port, request)) for _ in range(long)]
    await asyncio.sleep(restart_after)
    restart_at = time.perf_counter()
    print(f"restart {restart_at:.6f}", flush=True)
    nexts = []
    for index, connection in enumerate(connections):
        connection.next_at_s = next_after[index % len(next_after)]
        nexts.append(next_request(connection, host, port, request, restart_at + connection.next_at_s))
    await asyncio.gather(*nexts)
    long_answers = await asyncio.gather(*long_tasks)
    idle_report = []
    for connection in connections:
        assert connection.first is not None and connection.next is not None
        idle_report.append({
            "first": connection.first.to_json(restart_at),
            "closed_by_server": connection.closed_by_server,
            "closed_at_s": None if connection.closed_at is None else round(connection.closed_at - restart_at, 3),
            "next_at_s": connection.next_at_s, "reused": connection.reused,
            "next": connection.next.to_json(restart_at)})
    return {"restart_at": round(restart_at, 6), "idle": idle_report,
            "long": [answer.to_json(restart_at) for answer in long_answers]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle", type=int, default=2, help="kept-alive connections, idle at the restart")
    parser.add_argument("--long", type=int, default=2, help="requests in flight at the restart")
    parser.add_argument("--restart-after", type=float, default=0.5,
                        help="seconds after the long requests are sent, the restart line")
    parser.add_argument("--next-after", type=float, nargs="+", default=[1.0],
                        help="seconds after the restart line, the idle connections' next requests (taken in turn)")
    args = parser.parse_args(argv)
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        parser.error("loopback only")
    report = asyncio.run(probe(args.host, args.port, args.idle, args.long, args.restart_after, args.next_after))
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
