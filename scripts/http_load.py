#!/usr/bin/env python3
# Standalone on purpose: no harness import. tests/harness/clients/test_standalone_copies.py keeps its copied helpers exact.
"""HTTP load client: closed loop (as ab, hey and wrk) or open loop (a fixed schedule), with a timeline.

    python scripts/http_load.py http://127.0.0.1:8000/ --requests 1000 --concurrency 10
    python scripts/http_load.py http://127.0.0.1:8000/ --requests 300 --rate 30      # open loop
    python scripts/http_load.py http://127.0.0.1:8000/ --requests 50 --timeline build/timeline.json

Closed loop (the default) is what ab, hey and wrk do: C workers, each sends a
request, waits for the whole answer, and only then sends its next one. When the
server stalls, the workers stall with it: the requests that real users would
have sent meanwhile are never sent, so their waiting is never measured. This
blind spot is called coordinated omission.

Open loop (--rate R) keeps a fixed schedule instead: request i is due at
t0 + i/R, whether or not earlier ones have finished, and each one runs as its
own task. Its latency is counted from the moment it was *due*, so time spent
waiting behind a slow server is in the figure. At most --max-in-flight requests
are open at once (each one is a socket); a request due while all of them are
busy waits for one and is counted as late, but its clock is already running.
service_ms is the same requests timed from their actual start, which is what
a closed-loop tool reports: the gap between the two is the queueing it hides.
--concurrency belongs to the closed loop and --max-in-flight to the open one;
giving the other loop's option is an error. --duration stops starting new
requests after that many seconds; the ones in flight finish.

Every request opens a new connection (our servers answer `Connection: close`)
and sends `GET <path> HTTP/1.1`, `Host` and `Connection: close`. It reads the
status line and headers (at most 64 KiB), then the body until the server
closes. A request is ok when the status is 200 and exactly Content-Length body
bytes arrived (any body, if the server sent no Content-Length). Its end is the
moment the last body byte arrived.

Output: one JSON object on stdout. requests = complete + failed + skipped:
  complete        ok requests
  failed_by_kind  connect (could not connect), read (reset, closed early, or a
                  malformed or oversized response head), status (answered, not
                  200), length (body shorter or longer than Content-Length),
                  timeout (due, but unfinished when --timeout struck)
  skipped         never due: --duration, --timeout or Ctrl-C ended the run first
  timed_out, interrupted  whether --timeout or Ctrl-C cut the run short
  wall_time_s     from the start of the run to the end of its last request
  requests_per_second  complete / wall_time_s
  latency_ms      mean, p50, p90, p99 (nearest rank) and max over ok requests;
                  in open loop timed from the due moment, with service_ms
                  (from the actual start) and late (started more than
                  late_tolerance_ms after they were due) beside it
--timeline FILE writes a JSON list, one entry per due request: index,
intended_start, start, end (seconds from the run's start; the end of a failed
request is when it failed, null when it never got there), status (the HTTP
status, or null) and result ("ok" or the failure kind); and, for a picture of
who waits where, worker (the closed-loop worker that sent it; null in open
loop), connected (the handshake done: the connection sits in the server's
listen queue from here until the server accepts it), sent (the request
written), first_byte (the first byte of the answer read), closed (our socket
closed after the server's close), local_port (our end of the connection). All
are the client's clocks: the server's own moments (accept, handler start) are
not seen from here; the harness traces them on the server (strace) and matches
a connection to its request by local_port, placing them on this timeline with
clock_start_unix_s, the run's start on the Unix clock.

Exit codes: 0 every due request was ok; 1 some failed, or --timeout struck
(the JSON still says what happened); 2 bad arguments, a host other than the
loopback interface, or an open-files limit too low for the requests in flight;
130 Ctrl-C (the report of what was done so far is still printed).

Known limits: no keep-alive and no chunked decoding (a chunked body is read to
the end but its length is not checked); "localhost" is connected as 127.0.0.1.
The client is one event loop on one core: at a few thousand requests per
second it can become the bottleneck itself. In open loop, `late` shows it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import platform
import re
import resource
import signal
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

# Load tests target the loopback interface only; the value is the address we connect to.
LOOPBACK_HOSTS = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "::1": "::1"}
REQUESTS = 100
CONCURRENCY = 10  # closed loop, as the article's `ab -c 10`
MAX_IN_FLIGHT = 10_000  # open loop: sockets open at once
TIMEOUT = 120.0  # seconds for the whole run
LATE_TOLERANCE = 0.010  # seconds; an open-loop request that starts later than this after it was due is late
MAX_HEAD_BYTES = 64 * 1024  # the longest response head we accept
READ_CHUNK = 65536
FILES_MARGIN = 32  # descriptors beyond one per socket: stdio, the event loop's own, imports
FAILURE_KINDS = ("connect", "read", "status", "length", "timeout")
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3})(?: [^\r\n]*)?")


class BadInputError(Exception):
    """Arguments we refuse before sending anything; the message says why."""


class OpenFilesLimitError(ValueError):
    """The hard open-files limit is lower than a run needs; the message says how to raise it."""


class MalformedResponseError(ValueError):
    """A response head that is not HTTP/1.x."""


@dataclass(frozen=True)
class Target:
    """Where to connect, and the exact bytes of the request to send."""

    url: str
    connect_host: str
    port: int
    request: bytes


@dataclass
class Outcome:
    """What happened to one request; times are perf_counter() seconds, NaN until reached."""

    index: int
    intended_start: float
    start: float = math.nan
    end: float = math.nan
    status: int | None = None
    result: str = "timeout"  # "ok" or a failure kind; stays "timeout" if the run is cut first
    worker: int | None = None  # closed loop: which of the C workers sent it
    connected: float = math.nan  # the client's moments in between, for timeline pictures
    sent: float = math.nan
    first_byte: float = math.nan
    closed: float = math.nan
    local_port: int | None = None  # the server sees it as the peer's port: a server-side trace matches on it


def parse_target(url: str) -> Target:
    """Check the URL points at the loopback interface and build the request bytes."""
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise BadInputError(f"only http:// URLs are supported, got {url!r}")
    host = parts.hostname or ""
    if host not in LOOPBACK_HOSTS:
        raise BadInputError(f"refusing host {host or '(none)'!r}: load tests target the loopback interface only "
                            "(127.0.0.1, localhost or ::1)")
    try:
        port = parts.port or 80
    except ValueError as error:
        raise BadInputError(f"bad port in {url!r}: {error}") from error
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not path.isascii() or any(character.isspace() for character in path):
        raise BadInputError(f"the path must be ASCII without spaces (percent-encode it), got {path!r}")
    authority = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        authority += f":{port}"
    request = f"GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n".encode("ascii")
    return Target(url, LOOPBACK_HOSTS[host], port, request)


def parse_response_head(head: bytes) -> tuple[int, int | None]:
    """Status code and Content-Length (None when absent) of a response head without its blank line."""
    status_line, *header_lines = head.split(b"\r\n")
    match = STATUS_LINE.fullmatch(status_line)
    if match is None:
        raise MalformedResponseError(f"malformed status line {status_line[:80]!r}")
    lengths = set()
    for line in header_lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise MalformedResponseError(f"malformed header line {line[:80]!r}")
        if name.lower() == b"content-length":
            if not value.strip().isdigit():
                raise MalformedResponseError(f"malformed Content-Length {value[:80]!r}")
            lengths.add(int(value))
    if len(lengths) > 1:  # repeated with different values: which body is the real one?
        raise MalformedResponseError(f"conflicting Content-Length values {sorted(lengths)}")
    return int(match.group(1)), lengths.pop() if lengths else None


async def one_request(outcome: Outcome, target: Target) -> None:
    """Connect, send the request, read the whole response, close; the result lands in `outcome`."""
    outcome.start = time.perf_counter()
    if math.isnan(outcome.intended_start):
        outcome.intended_start = outcome.start  # closed loop: a request is due when it is sent
    writer = None
    try:
        try:
            reader, writer = await asyncio.open_connection(target.connect_host, target.port, limit=MAX_HEAD_BYTES)
        except OSError:
            outcome.end, outcome.result = time.perf_counter(), "connect"
            return
        outcome.connected = time.perf_counter()
        outcome.local_port = writer.get_extra_info("sockname")[1]
        writer.write(target.request)
        await writer.drain()
        outcome.sent = time.perf_counter()
        first = await reader.read(1)  # wakes on the answer's first byte: the end of the server's wait
        outcome.first_byte = time.perf_counter()
        if not first:
            raise EOFError("closed before answering")
        head = first + await reader.readuntil(b"\r\n\r\n")
        outcome.status, content_length = parse_response_head(head[:-4])
        received = 0
        if content_length == 0:
            outcome.end = time.perf_counter()
        while chunk := await reader.read(READ_CHUNK):  # Connection: close, so the server closes after the body
            received += len(chunk)
            if content_length is not None and received >= content_length and math.isnan(outcome.end):
                outcome.end = time.perf_counter()  # the last announced byte: the answer is complete
        if math.isnan(outcome.end):
            outcome.end = time.perf_counter()  # no Content-Length, or a short body: the end is the close
        if outcome.status != 200:
            outcome.result = "status"
        elif content_length is not None and received != content_length:
            outcome.result = "length"
        else:
            outcome.result = "ok"
    except (OSError, EOFError, asyncio.LimitOverrunError, MalformedResponseError):
        # A reset, a close before the head ended (IncompleteReadError), a huge or malformed head.
        outcome.end, outcome.result = time.perf_counter(), "read"
    finally:
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass  # a reset while closing changes nothing about the answer we already judged
            outcome.closed = time.perf_counter()


async def closed_loop(outcomes: list[Outcome], tasks: list[asyncio.Task[None]], target: Target, requests: int,
                      concurrency: int, stop_at: float) -> None:
    """C workers, each sending its next request only when its previous one has finished."""
    indices = itertools.count()

    async def worker(number: int) -> None:
        while (index := next(indices)) < requests and time.perf_counter() < stop_at:
            outcome = Outcome(index, intended_start=math.nan, worker=number)  # no schedule: one_request sets it
            outcomes.append(outcome)
            await one_request(outcome, target)

    tasks.extend(asyncio.create_task(worker(number)) for number in range(min(concurrency, requests)))
    await asyncio.gather(*tasks)


async def open_loop(outcomes: list[Outcome], tasks: list[asyncio.Task[None]], target: Target, requests: int,
                    rate: float, max_in_flight: int, started: float, stop_at: float) -> None:
    """Start request i at started + i/rate, whatever the earlier ones are doing; at most max_in_flight open."""
    slots = asyncio.Semaphore(max_in_flight)

    async def when_a_slot_frees(outcome: Outcome) -> None:
        async with slots:  # waiting here makes the request late; its latency clock already runs
            await one_request(outcome, target)

    for index in range(requests):
        intended = started + index / rate
        if intended >= stop_at:
            break
        await asyncio.sleep(max(0.0, intended - time.perf_counter()))
        outcome = Outcome(index, intended_start=intended)
        outcomes.append(outcome)
        tasks.append(asyncio.create_task(when_a_slot_frees(outcome)))
    await asyncio.gather(*tasks)


async def run_load(target: Target, requests: int, concurrency: int, rate: float | None, max_in_flight: int,
                   duration: float | None, timeout: float) -> tuple[list[Outcome], float, float, str | None]:
    """Run every request, or until --duration; return outcomes, start, end, and what cut the run short.

    The last value is None, "timeout" (--timeout struck) or "interrupt" (Ctrl-C): either way every request
    still in flight is cancelled, keeps the result "timeout", and the run is reported.
    """
    outcomes: list[Outcome] = []
    tasks: list[asyncio.Task[None]] = []
    started = time.perf_counter()
    stop_at = started + duration if duration else math.inf
    loop = asyncio.get_running_loop()
    interrupted = asyncio.Event()
    with contextlib.suppress(ValueError, RuntimeError):  # only the main thread can take signals
        loop.add_signal_handler(signal.SIGINT, interrupted.set)
    if rate is None:
        work = asyncio.create_task(closed_loop(outcomes, tasks, target, requests, concurrency, stop_at))
    else:
        work = asyncio.create_task(open_loop(outcomes, tasks, target, requests, rate, max_in_flight, started,
                                             stop_at))
    interrupt = asyncio.create_task(interrupted.wait())
    stopped_by = None
    try:
        async with asyncio.timeout(timeout):
            await asyncio.wait({work, interrupt}, return_when=asyncio.FIRST_COMPLETED)
    except TimeoutError:
        stopped_by = "timeout"
    finally:
        finished = time.perf_counter()
        loop.remove_signal_handler(signal.SIGINT)
        for task in (work, interrupt, *tasks):
            task.cancel()  # no-op for finished ones
        await asyncio.gather(work, interrupt, *tasks, return_exceptions=True)  # their finally blocks close sockets
    error = None if work.cancelled() else work.exception()
    if error is not None:
        raise error  # a bug in the client, not a failed request: show it
    if stopped_by is None and interrupted.is_set():
        stopped_by = "interrupt"
    return sorted(outcomes, key=lambda outcome: outcome.index), started, finished, stopped_by


def percentile(values: Sequence[float], percent: float) -> float:
    """Nearest rank: the smallest value with at least `percent`% of the values at or below it."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)  # linear when `values` is already sorted
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


def latency_summary(latencies_ms: Sequence[float]) -> dict[str, float]:
    """Mean, nearest-rank p50/p90/p99 and max of per-request latencies in milliseconds."""
    ordered = sorted(latencies_ms)
    return {"mean": statistics.fmean(ordered), "p50": percentile(ordered, 50), "p90": percentile(ordered, 90),
            "p99": percentile(ordered, 99), "max": ordered[-1]}


def summary(values_ms: list[float]) -> dict[str, float] | None:
    """latency_summary rounded to the microsecond; None when there are no values."""
    if not values_ms:
        return None
    return {key: round(value, 3) for key, value in latency_summary(values_ms).items()}


def report(outcomes: list[Outcome], started: float, finished: float, stopped_by: str | None,
           args: argparse.Namespace, open_files: dict[str, int]) -> dict[str, Any]:
    """The JSON record of a run."""
    results = Counter(outcome.result for outcome in outcomes)
    ok = [outcome for outcome in outcomes if outcome.result == "ok"]
    wall_time = finished - started
    record: dict[str, Any] = {
        "tool": "http_load.py",
        "url": args.url,
        "mode": "closed" if args.rate is None else "open",
        "requests": args.requests,
        "concurrency": args.concurrency,
        "rate": args.rate,
        "max_in_flight": args.max_in_flight,
        "duration_limit_s": args.duration,
        "timeout_s": args.timeout,
        "complete": len(ok),
        "failed": len(outcomes) - len(ok),
        "failed_by_kind": {kind: results[kind] for kind in FAILURE_KINDS},
        "skipped": args.requests - len(outcomes),
        "timed_out": stopped_by == "timeout",
        "interrupted": stopped_by == "interrupt",
        "wall_time_s": round(wall_time, 6),
        "requests_per_second": round(len(ok) / wall_time, 3) if wall_time > 0 else 0.0,
        # Open loop: from the moment the request was due, so waiting for a slot or behind the server counts.
        "latency_ms": summary([(outcome.end - outcome.intended_start) * 1000 for outcome in ok]),
    }
    if args.rate is not None:
        record["service_ms"] = summary([(outcome.end - outcome.start) * 1000 for outcome in ok])
        # NaN start (still waiting for a slot when the run was cut) compares False: late too.
        record["late"] = sum(1 for outcome in outcomes
                             if not outcome.start - outcome.intended_start <= LATE_TOLERANCE)
        record["late_tolerance_ms"] = LATE_TOLERANCE * 1000
    # CLOCK_MONOTONIC (perf_counter) at the run's start: a harness reading the same clock can place its
    # own events (a server restart) on this run's timeline.
    # The same instant on the Unix clock, which a trace of the server (strace -ttt) prints.
    record.update(keep_alive=False, python=platform.python_version(), open_files=open_files,
                  clock_start_s=round(started, 6), clock_start_unix_s=round(time.time() - (time.perf_counter() - started), 6))
    return record


def timeline(outcomes: list[Outcome], started: float) -> list[dict[str, Any]]:
    """One entry per due request, times in seconds from the run's start (None when never reached)."""
    def seconds(moment: float) -> float | None:
        return None if math.isnan(moment) else round(moment - started, 6)

    return [{"index": outcome.index, "intended_start": seconds(outcome.intended_start),
             "start": seconds(outcome.start), "end": seconds(outcome.end), "status": outcome.status,
             "result": outcome.result, "worker": outcome.worker, "connected": seconds(outcome.connected),
             "sent": seconds(outcome.sent), "first_byte": seconds(outcome.first_byte),
             "closed": seconds(outcome.closed), "local_port": outcome.local_port} for outcome in outcomes]


def write_timeline(path: Path, entries: list[dict[str, Any]]) -> None:
    """A JSON list with one request per line, written beside `path` and renamed over it (never half-written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text("[\n" + ",\n".join(json.dumps(entry) for entry in entries) + "\n]\n", encoding="utf-8")
    temporary.replace(path)


def raise_open_files_limit(sockets: int, what: str) -> dict[str, int]:
    """Make room for `sockets` open at once (`what` they are, for the message) under the soft RLIMIT_NOFILE.

    Raises the soft limit up to the hard one if needed; OpenFilesLimitError when even that is too low.
    Returns the limits then in force and the soft limit before: {"soft", "hard", "raised_from"}.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = sockets + FILES_MARGIN
    if needed <= soft:
        return {"soft": soft, "hard": hard, "raised_from": soft}
    if hard != resource.RLIM_INFINITY and needed > hard:
        raise OpenFilesLimitError(f"{sockets} {what} need about {needed} open files, but the hard limit is {hard} "
                                  f"(soft {soft}). Raise it (`ulimit -Hn {needed}` as root, or LimitNOFILE= in "
                                  "systemd), or ask for fewer.")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    print(f"raised the open-files soft limit from {soft} to {needed} (hard limit {hard})", file=sys.stderr)
    return {"soft": needed, "hard": hard, "raised_from": soft}


def positive(kind: type) -> Any:
    """An argparse type: `kind`, and greater than zero."""
    def parse(text: str) -> Any:
        value = kind(text)
        if not value > 0 or (isinstance(value, float) and math.isinf(value)):
            raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="http://127.0.0.1:PORT/PATH (loopback only)")
    parser.add_argument("--requests", "-n", type=positive(int), default=REQUESTS, help="requests to send")
    parser.add_argument("--concurrency", "-c", type=positive(int),
                        help=f"closed loop: workers, each waiting for its answer (default {CONCURRENCY})")
    parser.add_argument("--rate", type=positive(float), help="open loop: requests started per second, on schedule")
    parser.add_argument("--max-in-flight", type=positive(int),
                        help=f"open loop: requests open at once (default {MAX_IN_FLIGHT})")
    parser.add_argument("--duration", type=positive(float), help="stop starting requests after this many seconds")
    parser.add_argument("--timeout", type=positive(float), default=TIMEOUT,
                        help="seconds for the whole run; then everything unfinished is cancelled (exit 1)")
    parser.add_argument("--timeline", type=Path, help="write one JSON entry per request to this file")
    return parser


def resolve_mode(args: argparse.Namespace) -> int:
    """Fill the defaults of the chosen mode; return how many requests can be in flight at once."""
    if args.rate is None:
        if args.max_in_flight is not None:
            raise BadInputError("--max-in-flight belongs to open loop (--rate); closed loop uses --concurrency")
        args.concurrency = args.concurrency or CONCURRENCY
        return min(args.concurrency, args.requests)
    if args.concurrency is not None:
        raise BadInputError("--concurrency belongs to closed loop; with --rate, cap open requests "
                            "with --max-in-flight")
    args.max_in_flight = args.max_in_flight or MAX_IN_FLIGHT
    return min(args.max_in_flight, args.requests)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        target = parse_target(args.url)
        open_files = raise_open_files_limit(resolve_mode(args), "requests in flight")
    except (BadInputError, OpenFilesLimitError) as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        outcomes, started, finished, stopped_by = asyncio.run(run_load(
            target, args.requests, args.concurrency or 0, args.rate, args.max_in_flight or 0, args.duration,
            args.timeout))
    except KeyboardInterrupt:  # Ctrl-C before the run had started
        print("interrupted: no report", file=sys.stderr)
        return EXIT_INTERRUPTED
    record = report(outcomes, started, finished, stopped_by, args, open_files)
    if args.timeline:
        write_timeline(args.timeline, timeline(outcomes, started))
    print(json.dumps(record, indent=2))
    if stopped_by == "timeout":
        print(f"error: stopped by the {args.timeout:g} s --timeout", file=sys.stderr)
    if stopped_by == "interrupt":
        print("interrupted: the report covers the requests up to Ctrl-C", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK if record["failed"] == 0 and stopped_by is None else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
