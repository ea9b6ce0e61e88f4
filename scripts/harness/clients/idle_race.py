"""The idle-timeout race, as a load: bursts over many kept-alive connections, gaps around a timeout.

Theory of operation: behind a proxy that keeps idle upstream connections (nginx's `keepalive`),
a burst of `connections` requests sent at once makes the proxy hold that many connections to
the server; after the burst every one of them goes idle at nearly the same moment, and the
server's keep-alive timer for each starts then. The next burst comes after a gap of
`gap_s + offset`, the offsets stepping across a window around the server's timeout: at some
offset the proxy reuses a connection just as the server closes it, and a request the proxy
may not retry (POST) comes back 502 Bad Gateway from the proxy. A gap measured from the last
answer of a burst (the moment the proxy's connections went idle, within a millisecond on
loopback) keeps the offsets meaningful on a busy machine, where answers come late.

Every request is counted by the status it got, or by why it got none (`errors`: reset, closed,
timeout). Client connections to the proxy are kept alive too (the proxy's own client timeout
is long), and re-opened when the proxy closes one.

Run:   python scripts/harness/clients/idle_race.py --port 8080 --gap 5 --bursts 10 --method POST
Known limits: loopback only; HTTP/1.1 with Content-Length answers (what nginx sends).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

READ_TIMEOUT_S = 10.0  # an answer slower than this is counted as a timeout, not waited for


@dataclass
class Tally:
    """What every request got: a status, or the reason it got none."""

    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    by_offset: dict[str, Counter[str]] = field(default_factory=dict)  # offset (ms) -> outcome -> count

    def add(self, offset_ms: float, outcome: int | str) -> None:
        if isinstance(outcome, int):
            self.statuses[outcome] += 1
        else:
            self.errors[outcome] += 1
        self.by_offset.setdefault(f"{offset_ms:g}", Counter())[str(outcome)] += 1

    def to_json(self) -> dict[str, object]:
        sent = sum(self.statuses.values()) + sum(self.errors.values())
        return {"sent": sent, "statuses": {str(code): count for code, count in sorted(self.statuses.items())},
                "errors": dict(self.errors),
                "by_offset_ms": {offset: dict(counts) for offset, counts in self.by_offset.items()}}


def request_bytes(method: str, host: str, port: int) -> bytes:
    """One kept-alive request; a POST carries an empty body (Content-Length: 0), as a form with no fields."""
    body_header = "Content-Length: 0\r\n" if method == "POST" else ""
    return f"{method} / HTTP/1.1\r\nHost: {host}:{port}\r\n{body_header}\r\n".encode("ascii")


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """One answer's status and whether its sender keeps the connection, read by its Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    await reader.readexactly(int(fields.get("content-length", "0")))
    return status, fields.get("connection", "").lower() != "close"


class Connection:
    """One client connection to the proxy, re-opened when it is gone."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def exchange(self, request: bytes) -> int | str:
        """Send one request and read its answer: the status, or why there was none."""
        try:
            if self.streams is None:
                self.streams = await asyncio.open_connection(self.host, self.port)
            reader, writer = self.streams
            writer.write(request)
            status, keep = await asyncio.wait_for(read_answer(reader), READ_TIMEOUT_S)
        except TimeoutError:
            self.close()
            return "timeout"
        except (ConnectionError, asyncio.IncompleteReadError, OSError) as error:
            self.close()
            return "closed" if isinstance(error, asyncio.IncompleteReadError) else "reset"
        if not keep:
            self.close()
        return status

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def race(host: str, port: int, connections: int, bursts: int, gap_s: float, offsets_ms: list[float],
               method: str) -> Tally:
    """`bursts` bursts of `connections` requests; burst i follows the last answer by gap + offsets[i % len]."""
    tally = Tally()
    clients = [Connection(host, port) for _ in range(connections)]
    request = request_bytes(method, host, port)
    try:
        for burst in range(bursts + 1):
            offset = offsets_ms[(burst - 1) % len(offsets_ms)] if burst else 0.0
            outcomes = await asyncio.gather(*(client.exchange(request) for client in clients))
            if burst:  # the first burst only opens the proxy's upstream connections: not counted
                for outcome in outcomes:
                    tally.add(offset, outcome)
            if burst < bursts:
                next_offset = offsets_ms[burst % len(offsets_ms)]
                await asyncio.sleep(max(0.0, gap_s + next_offset / 1000))
    finally:
        for client in clients:
            client.close()
    return tally


def offsets_around(window_ms: float, step_ms: float) -> list[float]:
    """Offsets from -window to +window in steps, nearest the timeout first, alternating sides."""
    steps = int(window_ms // step_ms)
    offsets = [0.0]
    for index in range(1, steps + 1):
        offsets += [index * step_ms, -index * step_ms]
    return offsets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--bursts", type=int, default=10)
    parser.add_argument("--gap", type=float, required=True, help="seconds between a burst's last answer and the next")
    parser.add_argument("--window-ms", type=float, default=20.0)
    parser.add_argument("--step-ms", type=float, default=2.0)
    parser.add_argument("--method", choices=["GET", "POST"], default="POST")
    args = parser.parse_args(argv)
    started = time.monotonic()
    tally = asyncio.run(race(args.host, args.port, args.connections, args.bursts, args.gap,
                             offsets_around(args.window_ms, args.step_ms), args.method))
    json.dump({**tally.to_json(), "duration_s": round(time.monotonic() - started, 3)}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
