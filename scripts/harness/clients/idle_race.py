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

A second shape, closer to real traffic (`--users`): that many users, each on its own kept-alive
connection to the proxy, each sending a request, reading its answer, then staying idle for a time
drawn uniformly between `--idle-min` and `--idle-max` seconds (a window across the server's
timeout), for `--duration` seconds. nginx hands each request the idle upstream connection it
freed last, so a race needs every connection it holds to have been idle about as long as the
server's timeout: how often that happens depends on the users' number and their idle times, and
the record counts it as a rate, and by the lull before each request (`by_offset_ms`: the time
since any user last got an answer, minus `--gap`: 5 ms buckets within 50 ms of it, 500 ms beyond).

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
import random
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


FORM = b"name=race&value=1"  # a POST's body: a small form, which the apps answer 200 at /form


def request_bytes(method: str, host: str, port: int, path: str = "/") -> bytes:
    """One kept-alive request; a POST carries a small form (Content-Length set), as a browser sends one."""
    body = FORM if method == "POST" else b""
    body_header = (f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n"
                   if method == "POST" else "")
    return f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\n{body_header}\r\n".encode("ascii") + body


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
               method: str, path: str = "/") -> Tally:
    """`bursts` bursts of `connections` requests; burst i follows the last answer by gap + offsets[i % len]."""
    tally = Tally()
    clients = [Connection(host, port) for _ in range(connections)]
    request = request_bytes(method, host, port, path)
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


async def users(host: str, port: int, count: int, duration_s: float, idle_s: tuple[float, float], gap_s: float,
                method: str, path: str, seed: int) -> Tally:
    """`count` users for duration_s, each: a request on its own kept connection, then idle for a uniform draw."""
    tally = Tally()
    request = request_bytes(method, host, port, path)
    generator = random.Random(seed)
    deadline = time.monotonic() + duration_s
    last_answer = [time.monotonic()]  # when any user last got an answer: nginx freed an upstream connection then

    async def user(client: Connection) -> None:
        await asyncio.sleep(generator.uniform(0, idle_s[1]))  # users arrive spread out, not in one burst
        while time.monotonic() < deadline:
            lull = time.monotonic() - last_answer[0]  # how long the connection nginx freed last has been idle
            outcome = await client.exchange(request)
            last_answer[0] = time.monotonic()
            tally.add(lull_bucket_ms(lull - gap_s), outcome)
            await asyncio.sleep(generator.uniform(*idle_s))

    clients = [Connection(host, port) for _ in range(count)]
    try:
        await asyncio.gather(*(user(client) for client in clients))
    finally:
        for client in clients:
            client.close()
    return tally


def lull_bucket_ms(offset_s: float) -> float:
    """The lull's distance from the timeout, in ms: to 5 ms within 50 ms of it (where the race is), else to 500 ms."""
    offset_ms = offset_s * 1000
    step = 5 if abs(offset_ms) < 50 else 500
    return round(offset_ms / step) * step


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
    parser.add_argument("--path", default="/", help="the request's path (the apps answer a POST 200 at /form)")
    parser.add_argument("--users", type=int, help="users idle between requests instead of bursts (see above)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds the users send for")
    parser.add_argument("--idle-min", type=float, help="each user's idle time is drawn between these (seconds)")
    parser.add_argument("--idle-max", type=float)
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.users:
        if args.idle_min is None or args.idle_max is None or not 0 <= args.idle_min <= args.idle_max:
            parser.error("--users needs 0 <= --idle-min <= --idle-max")
        tally = asyncio.run(users(args.host, args.port, args.users, args.duration, (args.idle_min, args.idle_max),
                                  args.gap, args.method, args.path, args.seed))
    else:
        tally = asyncio.run(race(args.host, args.port, args.connections, args.bursts, args.gap,
                                 offsets_around(args.window_ms, args.step_ms), args.method, args.path))
    json.dump({**tally.to_json(), "duration_s": round(time.monotonic() - started, 3)}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
