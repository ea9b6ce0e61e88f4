#!/usr/bin/env python3
# Standalone on purpose: no harness import. tests/harness/clients/test_standalone_copies.py keeps its copied helpers exact.
"""Echo load client: open N connections at once, send one sentence on each, check every reply.

    python scripts/echo_client.py --port 8000 --connections 1000
    python scripts/echo_client.py --port 8000 --connections 10000 --timeline build/timeline.csv
    python scripts/echo_client.py --port 8000 --connections 2000 --rate 1000   # open loop

Each connection connects, sends SENTENCE + "\\n", reads one line, checks that it
is the sentence upper-cased, and closes (the protocol of servers/*_echo.py).
By default all N connections start together (closed loop: each latency is timed
from its own start). With --rate R they start on a fixed schedule, R per second,
whatever the server does (open loop: each latency is timed from the moment the
schedule said to start, so a server that falls behind shows it).

Output: one JSON object on stdout:
  connections, answered, wrong, errors {kind: count}, duration_s (from the
  first start until every connection is closed), connections_per_second
  (answered / duration_s), latency_ms and connect_ms ({mean, p50, p90, p99,
  max}, or null when nothing was answered), mode, rate, loop, python,
  open_files {soft, hard, raised_from}.
`errors` counts exception names (ConnectionRefusedError, ...), "closed_early"
(end of file before a whole line), and "timeout" (unfinished at --timeout).

Exit codes: 0 every connection answered correctly; 1 some were not;
2 bad arguments (a host that is not loopback, too), or the open-files limit is
too low for N connections. Load tests target the loopback interface only.

N connections need N file descriptors at once, plus a few. If the soft
RLIMIT_NOFILE is too low the client raises it, up to the hard limit; past the
hard limit it stops with exit code 2 (raise it with `ulimit -Hn`, as root).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import ipaddress
import json
import math
import platform
import resource
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
PORT = 8000
SENTENCE = "many clients at once, and every one of them gets an answer"
TIMEOUT = 60.0  # seconds for the whole run; whatever is unfinished then counts as "timeout"
FILES_MARGIN = 32  # descriptors beyond one per socket: stdio, the event loop's own, imports
READ_LIMIT = 64 * 1024 + 1024  # the longest reply line we accept (the servers cap lines at 64 KiB)
EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT = 0, 1, 2


class OpenFilesLimitError(ValueError):
    """The hard open-files limit is lower than a run needs; the message says how to raise it."""


@dataclass
class Outcome:
    """What happened to one connection; times are perf_counter() seconds."""

    index: int
    intended_start: float
    start: float = math.nan
    connected: float = math.nan
    end: float = math.nan
    result: str = "timeout"  # "answered", "wrong", an exception name, "closed_early" or "timeout"


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


async def one_connection(outcome: Outcome, host: str, port: int, line: bytes, expected: bytes) -> None:
    """Connect, send the line, read the reply line, check it, close; the result lands in `outcome`."""
    outcome.start = time.perf_counter()
    writer = None
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=READ_LIMIT)
        outcome.connected = time.perf_counter()
        writer.write(line)
        reply = await reader.readuntil(b"\n")
        outcome.end = time.perf_counter()
        outcome.result = "answered" if reply == expected else "wrong"
    except asyncio.IncompleteReadError:
        outcome.result = "closed_early"  # end of file before a whole line
    except (OSError, asyncio.LimitOverrunError) as error:
        outcome.result = type(error).__name__
    finally:
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass  # a reset while closing changes nothing about the answer we checked


async def run_connections(outcomes: list[Outcome], host: str, port: int, rate: float | None,
                          timeout: float) -> tuple[float, float]:
    """Start every connection (all at once, or on the --rate schedule); return when the run started and ended."""
    line = SENTENCE.encode() + b"\n"
    expected = SENTENCE.upper().encode() + b"\n"
    started = time.perf_counter()
    tasks: list[asyncio.Task[None]] = []
    try:
        async with asyncio.timeout(timeout):
            for outcome in outcomes:
                if rate is not None:
                    outcome.intended_start = started + outcome.index / rate
                    await asyncio.sleep(max(0.0, outcome.intended_start - time.perf_counter()))
                else:
                    outcome.intended_start = started
                tasks.append(asyncio.create_task(one_connection(outcome, host, port, line, expected)))
            await asyncio.gather(*tasks)
    except TimeoutError:
        pass  # the unfinished keep result "timeout"; asyncio.timeout has cancelled what it was waiting on
    finished = time.perf_counter()  # every connection closed, or the timeout struck
    for task in tasks:
        task.cancel()  # no-op for finished ones
    await asyncio.gather(*tasks, return_exceptions=True)
    return started, finished


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


def report(outcomes: list[Outcome], started: float, finished: float, args: argparse.Namespace, loop_name: str,
           open_files: dict[str, int]) -> dict[str, Any]:
    """The JSON record of a run."""
    results = Counter(outcome.result for outcome in outcomes)
    answered = [outcome for outcome in outcomes if outcome.result == "answered"]
    duration = finished - started
    # Open loop: latency from the intended start, so time spent behind schedule is counted.
    latencies = [(outcome.end - (outcome.intended_start if args.rate else outcome.start)) * 1000
                 for outcome in answered]
    connects = [(outcome.connected - outcome.start) * 1000 for outcome in outcomes if not math.isnan(outcome.connected)]
    return {
        "tool": "echo_client.py",
        "host": args.host,
        "port": args.port,
        "connections": len(outcomes),
        "answered": results.pop("answered", 0),
        "wrong": results.pop("wrong", 0),
        "errors": dict(sorted(results.items())),
        "duration_s": duration,
        "connections_per_second": len(answered) / duration if duration > 0 else 0.0,
        "latency_ms": latency_summary(latencies) if latencies else None,
        "connect_ms": latency_summary(connects) if connects else None,
        "mode": "open" if args.rate else "closed",
        "rate": args.rate,
        "timeout_s": args.timeout,
        "loop": loop_name,
        "python": platform.python_version(),
        "open_files": open_files,
    }


def write_timeline(path: Path, outcomes: list[Outcome], started: float) -> None:
    """One CSV row per connection, seconds from the run's start (empty when it never got there)."""
    def seconds(moment: float) -> str:
        return "" if math.isnan(moment) else f"{moment - started:.6f}"

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        table = csv.writer(handle)
        table.writerow(["index", "intended_start_s", "start_s", "connected_s", "end_s", "result"])
        for outcome in outcomes:
            table.writerow([outcome.index, seconds(outcome.intended_start), seconds(outcome.start),
                            seconds(outcome.connected), seconds(outcome.end), outcome.result])


def loopback(host: str) -> str:
    """Accept only the loopback interface: a load test must not leave the machine."""
    try:
        if host == "localhost" or ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"refusing {host!r}: load tests target the loopback interface only")


def positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", type=loopback, default=HOST, help="127.0.0.1, ::1 or localhost")
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--connections", type=positive(int), default=100, help="connections, one sentence each")
    parser.add_argument("--rate", type=positive(float), help="open loop: start this many connections per second")
    parser.add_argument("--timeout", type=positive(float), default=TIMEOUT, help="seconds for the whole run")
    parser.add_argument("--timeline", type=Path, help="write one CSV row per connection to this file")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop instead of asyncio's own loop")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        open_files = raise_open_files_limit(args.connections, "connections")
    except OpenFilesLimitError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    loop_factory = None
    loop_name = "asyncio"
    if args.uvloop:
        try:
            import uvloop
        except ImportError:
            print("error: --uvloop needs uvloop (pip install uvloop)", file=sys.stderr)
            return EXIT_BAD_INPUT
        loop_factory, loop_name = uvloop.new_event_loop, f"uvloop {uvloop.__version__}"
    outcomes = [Outcome(index, math.nan) for index in range(args.connections)]
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        started, finished = runner.run(run_connections(outcomes, args.host, args.port, args.rate, args.timeout))
    record = report(outcomes, started, finished, args, loop_name, open_files)
    if args.timeline:
        write_timeline(args.timeline, outcomes, started)
    print(json.dumps(record, indent=2))
    return EXIT_OK if record["answered"] == record["connections"] else EXIT_WRONG


if __name__ == "__main__":
    sys.exit(main())
