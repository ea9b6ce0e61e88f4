"""The hostile suite: what a server facing the internet meets, against every HTTP design.

Theory of operation. The cases are data (scripts/catalogue/hostile/cases.toml); each
names a `kind`, implemented here by one function that opens its connections, sends its
bytes, reads what comes back and judges it against the case's robust answer. Around
every case the harness measures the same things, whatever the case:

- a separate probe client (GET /, 200 within 2 s) sent while the case is under way,
  and another after it: both served means the design *survived*;
- the status each connection got and how long the server took to close it;
- the design's process group before and after: open fds (/proc/PID/fd) and threads
  (/proc/PID/task), summed, so a leak shows as a difference; peak RSS and CPU seconds
  during the case (harness.resources); whether the process is still alive.

A design that dies is a finding: it is recorded with its stderr tail, started again
for the remaining cases, and the run exits 1 at the end. Every connection goes to
127.0.0.1, is bounded in time (the suite's `bound`) and count, and is closed before
the case returns; every server is stopped (process groups, try/finally) before the
next design starts.

Known limits: a case reads what a client sees, so "closed" means the client saw EOF or
a reset; a server that stops reading but keeps the socket open is "still open" at the
bound. On loopback a 1 MiB response fits in the kernel's send buffer, so the slow
reader (case 14) stalls only servers that keep more than that in flight.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import random
import re
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.clients import verify
from harness.model.catalogue import CATALOGUE_DIR, Catalogue, Design, UnknownNameError
from harness.model.records import RESULTS_DIR, SCHEMA_VERSION, SCRATCH_RESULTS_DIR, write_json_atomic
from harness.system import launcher, processes
from harness.system.environment import describe_machine, utc_now
from harness.system.resources import GroupSampler

CASES_FILE = CATALOGUE_DIR / "hostile" / "cases.toml"
RECORD_NAME = "hostile.json"
PROXY_TEMPLATE = "servers/nginx_reverse_proxy.conf"
PROXIED_SUFFIX = "+nginx"  # "sequential-sockets+nginx": the design behind servers/nginx_reverse_proxy.conf
PROBE_REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})")
PROC = Path("/proc")


# --- the catalogue of cases -------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    number: int
    id: str
    title: str
    robust: str
    wild: str
    reference: str
    kind: str
    parameters: dict[str, Any] = field(default_factory=dict)  # everything else the case's table says

    def get(self, key: str, default: Any = None) -> Any:
        return self.parameters.get(key, default)

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "id": self.id, "title": self.title, "robust": self.robust,
                "wild": self.wild, "reference": self.reference, "kind": self.kind, **self.parameters}


@dataclass(frozen=True)
class Suite:
    settings: dict[str, Any]
    quick: dict[str, Any]
    cases: list[Case]

    def run_settings(self, quick: bool) -> dict[str, Any]:
        return {**self.settings, **self.quick} if quick else dict(self.settings)

    def select(self, selectors_: list[str] | None) -> list[Case]:
        """Cases by number or id, in the catalogue's order; every case when none is given."""
        if not selectors_:
            return list(self.cases)
        known = {str(case.number): case for case in self.cases} | {case.id: case for case in self.cases}
        for selector in selectors_:
            if selector not in known:
                raise UnknownNameError("hostile case", selector, [case.id for case in self.cases])
        wanted = {known[selector].id for selector in selectors_}
        return [case for case in self.cases if case.id in wanted]


def load_suite(path: Path = CASES_FILE) -> Suite:
    """Read the cases; every kind must have an implementation, numbers and ids must be unique."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    settings = dict(data.get("suite", {}))
    quick = settings.pop("quick", {})
    cases = []
    for entry in data.get("case", []):
        named = {key: entry[key] for key in ("number", "id", "title", "robust", "wild", "reference", "kind")}
        case = Case(**named, parameters={key: value for key, value in entry.items() if key not in named})
        if case.kind not in CASE_KINDS:
            raise ValueError(f"{path}: case {case.id!r} has kind {case.kind!r}; known kinds: {', '.join(CASE_KINDS)}")
        cases.append(case)
    for attribute in ("number", "id"):
        values = [getattr(case, attribute) for case in cases]
        if len(set(values)) != len(values):
            raise ValueError(f"{path}: a case {attribute} is listed twice")
    return Suite(settings, quick, sorted(cases, key=lambda case: case.number))


# --- talking to a server ----------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Where the hostile client connects, and the server behind it (for cases that measure it)."""

    host: str
    port: int
    pgid: int
    settings: dict[str, Any]


@dataclass
class Reading:
    """What one connection received: the bytes, how it ended, when."""

    data: bytes = b""
    ended: str = "open"  # "eof" (FIN), "reset", or "open" (still open at the bound)
    seconds: float | None = None  # from the last byte sent to the end (None while open)
    first_byte_seconds: float | None = None


def connect(target: Target, timeout: float = 2.0) -> socket.socket:
    conn = socket.create_connection((target.host, target.port), timeout=timeout)
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
        end = rest.find(b"\r\n\r\n")
        if end < 0:
            return statuses + [int(match.group(1))], False
        head, rest = rest[:end].lower(), rest[end + 4:]
        status = int(match.group(1))
        statuses.append(status)
        if 100 <= status < 200:
            continue
        length = re.search(rb"\r\ncontent-length: *(\d+)", head)
        if length is not None:
            size = int(length.group(1))
            if len(rest) < size:
                return statuses, False
            rest = rest[size:]
        elif b"chunked" in head:
            end = rest.find(b"\r\n0\r\n\r\n")
            if end < 0 and not rest.startswith(b"0\r\n\r\n"):
                return statuses, False
            rest = rest[end + 7:] if end >= 0 else rest[5:]
        else:
            return statuses, True  # a body delimited by the close: whatever came is the body
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


def probe(host: str, port: int, timeout: float) -> ProbeResult:
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


# --- the cases --------------------------------------------------------------------------------

@dataclass
class Variant:
    """One connection's (or one group of connections') outcome within a case."""

    name: str
    passed: bool
    status: str  # what the cell shows: "400", "open", "reset", "0.9", "100→405", "n/a"
    seconds: float | None = None  # time to close, from the last byte sent
    note: str = ""
    applicable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "status": self.status,
                "seconds_to_close": None if self.seconds is None else round(self.seconds, 3),
                "note": self.note, "applicable": self.applicable}


def status_label(statuses: list[int], reading: Reading) -> str:
    if statuses:
        return "→".join("0.9" if status == 0 else str(status) for status in statuses)
    return {"eof": "closed", "reset": "reset", "open": "open"}[reading.ended]


def build_request(variant: dict[str, Any]) -> bytes:
    if "random_bytes" in variant:
        return random.Random(variant.get("seed", 9)).randbytes(variant["random_bytes"])
    filler = variant.get("filler", "") * variant.get("filler_count", 0)
    return variant["request"].replace("{filler}", filler).encode("latin-1")


def exchange_case(target: Target, case: Case) -> list[Variant]:
    """Send each variant's bytes on its own connection, read the answer, judge it."""
    results = []
    for variant in case.get("variant", []):
        expect = variant.get("expect", case.get("expect", []))
        accept = variant.get("accept", [])
        answer_within = case.get("answer_within")
        payload = build_request(variant)
        bound = target.settings["bound"]
        with contextlib.closing(connect(target)) as conn:
            conn.settimeout(bound)
            try:
                interval = case.get("dribble_interval")
                if interval:
                    for index in range(len(payload)):
                        conn.sendall(payload[index:index + 1])
                        time.sleep(interval)
                else:
                    conn.sendall(payload)
                if case.get("half_close"):
                    conn.shutdown(socket.SHUT_WR)
            except OSError as error:
                # The server may refuse before reading it all: a reset then is fine, read what it said.
                note = f"sending stopped: {type(error).__name__}"
            else:
                note = ""
            sent = time.monotonic()
            # A refusal must also close (stop at the close); an accepted request may keep the connection.
            reading = read_answer(conn, sent, sent + bound, until_complete=lambda statuses: statuses[-1] < 400)
        statuses, _ = responses(reading.data)
        final = [status for status in statuses if not 100 <= status < 200]
        status = final[-1] if final else None
        robust = status in expect or status in accept
        problems = []
        if not robust:
            problems.append(f"expected {' or '.join(map(str, expect))}")
        if robust and status is not None and status >= 400 and reading.ended == "open":
            robust, _ = False, problems.append("refused but left the connection open")
        if robust and answer_within and (reading.first_byte_seconds or 0) > answer_within:
            robust, _ = False, problems.append(f"answered after {reading.first_byte_seconds:.1f} s: a timeout, "
                                               "not the parser")
        if status in accept and status not in expect and variant.get("note"):
            problems.append(variant["note"])
        results.append(Variant(variant["name"], robust, status_label(statuses, reading), reading.seconds,
                               "; ".join(filter(None, [note, *problems]))))
    return results


def pipelined_case(target: Target, case: Case) -> list[Variant]:
    """N requests in one segment: all answered, or the first answered and the connection closed cleanly."""
    results = []
    bound = target.settings["bound"]
    for count in case.get("counts", [2]):
        request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        with contextlib.closing(connect(target)) as conn:
            conn.sendall(request * count)
            sent = time.monotonic()
            reading = read_answer(conn, sent, sent + bound,
                                  until_complete=lambda statuses, count=count: len(statuses) >= count)
        statuses, complete = responses(reading.data)
        answered = max(0, len(statuses) if complete else len(statuses) - 1)
        if answered >= count and all(status == 200 for status in statuses[:count]):
            passed, note = True, f"all {count} answered"
        elif answered >= 1 and statuses[0] == 200 and reading.ended in ("eof", "reset"):
            passed = True
            note = f"{answered} of {count} answered, then {'closed' if reading.ended == 'eof' else 'reset'}"
        elif reading.ended == "open":
            passed, note = False, f"{answered} of {count} answered, then a hang"
        else:
            passed, note = False, f"{reading.ended} before the first answer"
        results.append(Variant(f"{count} pipelined", passed, f"{answered}×{statuses[0] if statuses else '–'}",
                               reading.seconds, note))
    return results


def body_stall_case(target: Target, case: Case) -> list[Variant]:
    """A head promising 100,000 bytes, 10 of them, then silence: the server must close within its timeout."""
    bound = target.settings["bound"]
    with contextlib.closing(connect(target)) as conn:
        conn.sendall(build_request(case.parameters))
        sent = time.monotonic()
        reading = read_answer(conn, sent, sent + bound)
    statuses, _ = responses(reading.data)
    passed = reading.ended != "open"
    note = "" if passed else f"still open after {bound:g} s"
    return [Variant("stalled body", passed, status_label(statuses, reading), reading.seconds, note)]


def open_many(target: Target, count: int, within: float = 2.0) -> tuple[list[socket.socket], int]:
    """Start `count` connections at once (non-blocking); return the established ones and how many were not."""
    pending: list[socket.socket] = []
    for _ in range(count):
        conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        conn.setblocking(False)
        conn.connect_ex((target.host, target.port))
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
    refused = 0
    for conn in pending:
        if conn not in established and conn.fileno() >= 0:
            conn.close()
            refused += 1
        elif conn not in established:
            refused += 1
    return established, refused


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


def summarise_closes(name: str, readings: dict[socket.socket, Reading], refused: int, bound: float) -> Variant:
    closed = [reading for reading in readings.values() if reading.ended != "open"]
    statuses = sorted({status for reading in readings.values() for status in responses(reading.data)[0]})
    label = "/".join(str(status) for status in statuses) or ("closed" if closed else "open")
    slowest = max((reading.seconds or 0 for reading in closed), default=None)
    passed = bool(readings) and len(closed) == len(readings)
    note = f"{len(closed)} of {len(readings)} closed within {bound:g} s"
    if refused:
        note += f"; {refused} never connected (listen backlog full)"
    return Variant(name, passed, label, slowest, note)


def slowloris_case(target: Target, case: Case) -> list[Variant]:
    """Many connections, each sending a header line every `interval` s and never the blank line."""
    count = target.settings["slowloris_connections"]
    bound = target.settings["bound"]
    connections, refused = open_many(target, count)
    try:
        started = time.monotonic()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        readings = watch_closes(connections, started, started + bound, every=case.get("interval", 0.5),
                                send=b"X-Slow: a\r\n")
    finally:
        for conn in connections:
            conn.close()
    return [summarise_closes(f"{count} trickling", readings, refused, bound)]


def idle_case(target: Target, case: Case) -> list[Variant]:
    """Many connections that send nothing at all."""
    count = target.settings["idle_connections"]
    bound = target.settings["bound"]
    connections, refused = open_many(target, count)
    try:
        started = time.monotonic()
        readings = watch_closes(connections, started, started + bound)
    finally:
        for conn in connections:
            conn.close()
    return [summarise_closes(f"{count} silent", readings, refused, bound)]


def reset_case(target: Target, case: Case) -> list[Variant]:
    """Reset right after the request, many times; then reset during the simulated call (the harness counts leaks)."""
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    failures = 0
    for _ in range(target.settings["resets"]):
        try:
            conn = connect(target)
            conn.sendall(request)
            reset(conn)
        except OSError:
            failures += 1
    for _ in range(case.get("gone_during_call", 5)):
        try:
            conn = connect(target)
            conn.sendall(request)
            time.sleep(target.settings["delay"] / 2)  # inside the simulated call
            reset(conn)
        except OSError:
            failures += 1
    note = f"{failures} connections could not be made" if failures else ""
    return [Variant(f"{target.settings['resets']} resets", True, "reset", None, note)]


def slow_reader_case(target: Target, case: Case) -> list[Variant]:
    """GET /big, read 1 KiB, then read nothing for a while (the probe runs meanwhile); then see what still arrives."""
    size = target.settings["big_bytes"]
    try:
        with contextlib.closing(connect(target, timeout=5)) as conn:
            conn.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            sent = time.monotonic()
            reading = read_answer(conn, sent, sent + 5, until_complete=lambda statuses: True)
        statuses, complete = responses(reading.data)
        length = len(reading.data) - reading.data.find(b"\r\n\r\n") - 4
        has_big = complete and statuses == [200] and length == size
    except OSError:
        has_big = False
    if not has_big:
        return [Variant("slow reader", True, "n/a", None, "not applicable: no /big (1 MiB) on this design",
                        applicable=False)]
    bound = target.settings["bound"]
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with contextlib.closing(conn):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server must wait for us
        conn.settimeout(5)
        conn.connect((target.host, target.port))
        conn.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        sent = time.monotonic()
        first = conn.recv(1024)
        stall = target.settings.get("slow_reader_stall", bound)
        time.sleep(stall)  # the stall: the probe runs meanwhile
        rest = read_answer(conn, sent, time.monotonic() + 5)
    received = len(first) + len(rest.data)
    gave_up = received < size
    note = (f"the server gave up: {received:,} of {size:,} bytes sent" if gave_up
            else f"all {size:,} bytes arrived after a {stall:g} s stall (held in kernel buffers or waited for)")
    return [Variant("stalled reader", True, "200", None, note)]


def emfile_case(target: Target, case: Case) -> list[Variant]:
    """Hold more connections than the server's open-files limit; its CPU must stay low meanwhile."""
    hold = target.settings["emfile_hold"]
    connections, refused = open_many(target, target.settings["emfile_connections"])
    try:
        time.sleep(0.3)  # let the server hit the limit
        with GroupSampler(target.pgid) as sampler:
            time.sleep(hold)
        held_fds, _ = group_counts(target.pgid)
        cpu = (sampler.last.cpu_ticks - sampler.first.cpu_ticks) / os.sysconf("SC_CLK_TCK") \
            if sampler.first and sampler.last else 0.0
    finally:
        for conn in connections:
            conn.close()
    share = cpu / hold
    busy = share > case.get("busy_cpu_share", 0.5)
    note = (f"{share:.0%} of a CPU while {len(connections)} connections were held past the limit"
            + (" (a busy loop)" if busy else ""))
    note += f"; the server held {held_fds} descriptors (limit {target.settings['emfile_nofile']} each process)"
    if refused:
        note += f"; {refused} never connected"
    return [Variant(f"{len(connections)} held", not busy, f"cpu {share:.0%}", None, note)]


def expect_continue_case(target: Target, case: Case) -> list[Variant]:
    """Announce a 10 MiB body with Expect: 100-continue; send it only after 100 (as curl does, or after 1 s)."""
    size, wait = case.get("body_bytes", 10 * 2**20), case.get("wait_for_interim", 1.0)
    bound = target.settings["bound"]
    head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}\r\n"
            "Expect: 100-continue\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    with contextlib.closing(connect(target)) as conn:
        conn.sendall(head)
        sent = time.monotonic()
        first = read_answer(conn, sent, sent + wait, until_complete=lambda statuses: True)
        statuses, _ = responses(first.data)
        if statuses and not 100 <= statuses[0] < 200 and statuses[0] >= 400:
            rest = read_answer(conn, sent, sent + bound) if first.ended == "open" else first
            return [Variant("10 MiB announced", True, status_label(statuses, rest), rest.seconds,
                            "a final refusal without reading the body")]
        interim = bool(statuses) and statuses[0] == 100
        deadline = sent + bound
        chunk = b"x" * 65536
        conn.settimeout(bound)
        body_sent = 0
        with contextlib.suppress(OSError):
            while body_sent < size and time.monotonic() < deadline:
                conn.sendall(chunk)
                body_sent += len(chunk)
        rest = read_answer(conn, sent, deadline, until_complete=lambda statuses: statuses[-1] >= 200)
    all_statuses, _ = responses(first.data + rest.data)
    final = [status for status in all_statuses if status >= 200]
    passed = interim and bool(final)
    note = ("100 Continue, then the final status" if passed else
            "no 100 Continue within 1 s: the client waited, then sent the body" if not interim else "no final status")
    return [Variant("10 MiB announced", passed, status_label(all_statuses, rest), rest.seconds, note)]


CASE_KINDS: dict[str, Callable[[Target, Case], list[Variant]]] = {
    "exchange": exchange_case,
    "pipelined": pipelined_case,
    "body-stall": body_stall_case,
    "slowloris": slowloris_case,
    "idle": idle_case,
    "reset": reset_case,
    "slow-reader": slow_reader_case,
    "emfile": emfile_case,
    "expect-continue": expect_continue_case,
}
OWN_SERVER_KINDS = {"emfile"}  # started apart, with a lowered RLIMIT_NOFILE
NO_PROBE_DURING_KINDS = {"emfile"}  # past the limit no new client can be served: only the probe after counts
LEAKS_FAIL_KINDS = {"reset"}  # "no leaked fd or thread" is this case's robust answer


# --- measuring a case -------------------------------------------------------------------------

def group_counts(pgid: int) -> tuple[int, int]:
    """Open file descriptors and threads, summed over every process of the group."""
    fds = threads = 0
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        try:
            stat = (PROC / entry / "stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[2]) != pgid:
                continue
            fds += len(os.listdir(PROC / entry / "fd"))
            threads += len(os.listdir(PROC / entry / "task"))
        except (OSError, ValueError):
            continue  # it ended while we looked
    return fds, threads


def settled_counts(pgid: int, before: tuple[int, int], settle: float) -> tuple[int, int]:
    """Counts after a case, given up to `settle` s to come back to where they were (threads finish, children exit)."""
    deadline = time.monotonic() + settle
    while True:
        counts = group_counts(pgid)
        if (counts[0] <= before[0] and counts[1] <= before[1]) or time.monotonic() >= deadline:
            return counts
        time.sleep(0.1)


@dataclass
class Server:
    """A started design (maybe behind nginx): where clients go, and the process group to measure."""

    design: Design
    target_host: str
    target_port: int
    process: subprocess.Popen[bytes]
    running: processes.RunningServer
    command: list[str]
    proxy: processes.RunningServer | None = None

    def alive(self) -> bool:
        return self.running.alive() and (self.proxy is None or self.proxy.alive())

    def stderr_tail(self) -> str:
        return self.running.stderr_tail() + (("\n--- nginx in front ---\n" + self.proxy.stderr_tail())
                                             if self.proxy else "")


PROXY_START = threading.Lock()


@contextlib.contextmanager
def launched(design: Design, settings: dict[str, Any], log_dir: Path, behind_nginx: bool = False,
             open_files: int | None = None) -> Iterator[Server]:
    """Start a design the way the harness and tests start it; the one place the suite launches servers.

    With open_files, under a lowered RLIMIT_NOFILE (prlimit); with behind_nginx, with
    servers/nginx_reverse_proxy.conf in front. Every process is stopped on the way out.
    """
    port = processes.free_port()
    wrapper = [] if open_files is None else ["prlimit", f"--nofile={open_files}:{open_files}", "--"]
    with launcher.running_design(design, port, settings["delay"], log_dir, wrapper=wrapper) as server, \
            contextlib.ExitStack() as front:
        proxy = None
        if behind_nginx:
            with PROXY_START:  # reverse_proxy reuses one port per run: one proxy binds it, the next finds it busy
                proxy = front.enter_context(launcher.reverse_proxy(PROXY_TEMPLATE, port, log_dir, None))
        target = proxy or server
        yield Server(design, target.host, target.port, server.process, server, server.command, proxy)


def run_case(server: Server, case: Case, settings: dict[str, Any]) -> dict[str, Any]:
    """One case against a running server, with the probes and the measurements around it."""
    pgid = server.process.pid
    if case.get("short_bound"):  # an answer that takes longer than this is already not "at once"
        settings = {**settings, "bound": min(settings["bound"], settings["short_bound"])}
    target = Target(server.target_host, server.target_port, pgid, settings)
    before = group_counts(pgid)
    started = time.monotonic()
    outcome: list[list[Variant]] = []
    errors: list[str] = []

    def play() -> None:
        try:
            outcome.append(CASE_KINDS[case.kind](target, case))
        except OSError as error:  # the server refused connections outright, or died mid-case
            errors.append(f"{type(error).__name__}: {error}")

    with GroupSampler(pgid) as sampler:
        player = threading.Thread(target=play, name=f"case-{case.id}", daemon=True)
        player.start()
        during = None
        if case.kind not in NO_PROBE_DURING_KINDS:
            player.join(case.get("probe_at", settings["probe_at"]))
            during = probe(target.host, target.port, settings["probe_timeout"])
        player.join(settings["bound"] * 3 + 60)  # every case is bounded well inside this
    elapsed = time.monotonic() - started
    after = probe(target.host, target.port, settings["after_timeout"]) if server.alive() else None
    counts = settled_counts(pgid, before, settings["settle"]) if server.alive() else before
    variants = outcome[0] if outcome else [Variant("case", False, "error", None, "; ".join(errors) or "no outcome")]
    applicable = all(variant.applicable for variant in variants)
    alive = server.alive()
    survived = alive and (during is None or during.served) and after is not None and after.served
    fds_leaked, threads_leaked = counts[0] - before[0], counts[1] - before[1]
    robust = all(variant.passed for variant in variants)
    if case.kind in LEAKS_FAIL_KINDS and (fds_leaked > 0 or threads_leaked > 0):
        robust = False
    resources = sampler.summary(0)
    return {
        "case": case.id,
        "number": case.number,
        "verdict": verdict(applicable, alive, survived, robust),
        "robust": robust,
        "survived": survived,
        "alive": alive,
        "statuses": [variant.status for variant in variants],
        "seconds_to_close": max((variant.seconds for variant in variants if variant.seconds is not None),
                                default=None),
        "probe_during": None if during is None else during.to_json(),
        "probe_after": None if after is None else after.to_json(),
        "fds_leaked": fds_leaked,
        "threads_leaked": threads_leaked,
        "fds_before": before[0],
        "threads_before": before[1],
        "peak_rss_mib": resources["peak_rss_mib"],
        "cpu_seconds": resources["cpu_seconds"],
        "case_seconds": round(elapsed, 2),
        "variants": [variant.to_json() for variant in variants],
        "errors": errors,
        "stderr_tail": "" if alive else server.stderr_tail(),
    }


def verdict(applicable: bool, alive: bool, survived: bool, robust: bool) -> str:
    """One word per cell: n/a, died, stalled (the probe was not served), weak (served, answer not robust), robust."""
    if not applicable:
        return "n/a"
    if not alive:
        return "died"
    if not survived:
        return "stalled"
    return "robust" if robust else "weak"


# --- running designs --------------------------------------------------------------------------

STOPPING = threading.Event()  # set when the run is interrupted: designs running in parallel stop after their case


class SuiteStopped(Exception):
    """Raised inside a design's run when the suite is stopping; its servers are stopped on the way out."""


@dataclass(frozen=True)
class Subject:
    """A design as the suite runs it: alone, or behind nginx."""

    design: Design
    behind_nginx: bool = False

    @property
    def name(self) -> str:
        return self.design.name + (PROXIED_SUFFIX if self.behind_nginx else "")


def warm_up(server: Server) -> None:
    """A few requests first, so lazily started workers and pool threads are not counted as a case's leak."""
    with contextlib.suppress(OSError, ValueError):
        verify.prime(server.target_host, server.target_port)


def run_subject(subject: Subject, cases: list[Case], settings: dict[str, Any], log_root: Path,
                progress: Callable[[str], None]) -> dict[str, Any]:
    """Every case against one design; a design that dies is restarted for the cases after."""
    log_dir = log_root / subject.name
    results: list[dict[str, Any]] = []
    problems: list[str] = []
    stderr_tail = ""
    shared = [case for case in cases if case.kind not in OWN_SERVER_KINDS]
    own = [case for case in cases if case.kind in OWN_SERVER_KINDS]
    remaining = list(shared)
    commands: list[list[str]] = []  # every server command this design ran with, for the record
    starts = 0
    while remaining and starts < 3:  # a design that keeps dying is not started a fourth time
        starts += 1
        try:
            with launched(subject.design, settings, log_dir / f"start-{starts}", subject.behind_nginx) as server:
                commands.append(server.command)
                warm_up(server)
                while remaining:
                    if STOPPING.is_set():
                        raise SuiteStopped
                    case = remaining.pop(0)
                    progress(f"{subject.name}: case {case.number} {case.id}")
                    result = run_case(server, case, settings)
                    results.append(result)
                    if not result["alive"]:
                        problems.append(f"died during case {case.number} ({case.id})")
                        stderr_tail = result["stderr_tail"]
                        break
        except processes.ServerStartError as error:
            problems.append(f"did not start: {error.args[0].splitlines()[0]}")
            stderr_tail = error.stderr_tail
            break
    for case in own:
        if STOPPING.is_set():
            raise SuiteStopped
        progress(f"{subject.name}: case {case.number} {case.id} (RLIMIT_NOFILE {settings['emfile_nofile']})")
        try:
            with launched(subject.design, settings, log_dir / case.id, subject.behind_nginx,
                          open_files=settings["emfile_nofile"]) as server:
                commands.append(server.command)
                warm_up(server)
                result = run_case(server, case, settings)
        except processes.ServerStartError as error:
            problems.append(f"did not start under RLIMIT_NOFILE {settings['emfile_nofile']}: "
                            f"{error.args[0].splitlines()[0]}")
            stderr_tail = error.stderr_tail
            continue
        results.append(result)
        if not result["alive"]:
            problems.append(f"died during case {case.number} ({case.id})")
            stderr_tail = result["stderr_tail"]
    results.sort(key=lambda result: result["number"])
    return {"name": subject.name, "design": subject.design.name, "title": subject.design.title,
            "model": subject.design.model, "behind_nginx": subject.behind_nginx,
            "status": "ok" if not problems else "failed", "problems": problems, "stderr_tail": stderr_tail,
            "server_commands": commands, "cases": results}


def subjects_for(catalogue: Catalogue, names: list[str] | None, settings: dict[str, Any]) -> list[Subject]:
    """The designs a run covers: named ones (NAME or NAME+nginx), else every http design plus the proxied set."""
    http = [design for design in catalogue.designs.values() if design.kind == "http"]
    if not names:
        names = settings.get("designs") or [design.name for design in http]
        names = [*names, *(name + PROXIED_SUFFIX for name in settings.get("behind_nginx", []))]
    subjects = []
    for name in names:
        behind = name.endswith(PROXIED_SUFFIX)
        design = catalogue.design(name.removesuffix(PROXIED_SUFFIX) if behind else name)
        if design.kind != "http":
            raise UnknownNameError("HTTP design", name, [design.name for design in http])
        subjects.append(Subject(design, behind))
    return subjects


def tool_versions() -> dict[str, str]:
    """nginx (the real server and the proxy) and prlimit, as they report themselves."""
    versions = {}
    for name, command in {"nginx": ["nginx", "-v"], "prlimit": ["prlimit", "--version"]}.items():
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=10)
            versions[name] = (result.stderr or result.stdout).strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            versions[name] = f"{name}: not found"
    return versions


def raise_own_open_files_limit() -> None:
    """The client holds hundreds of sockets per case: lift our soft RLIMIT_NOFILE to the hard one."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run_suite(catalogue: Catalogue, design_names: list[str] | None, case_selectors: list[str] | None, quick: bool,
              out_dir: Path | None, suite: Suite | None = None, log_root: Path = launcher.LOG_DIR / "hostile",
              jobs: int | None = None) -> tuple[Path, dict[str, Any]]:
    """Run the cases against the designs and write the record atomically; returns its path and the record."""
    suite = suite or load_suite()
    settings = suite.run_settings(quick)
    cases = suite.select(case_selectors)
    subjects = subjects_for(catalogue, design_names, settings)
    raise_own_open_files_limit()
    STOPPING.clear()
    started, clock = utc_now(), time.monotonic()
    total = len(subjects) * len(cases)
    done = [0]

    lock = threading.Lock()

    def progress(label: str) -> None:
        with lock:
            done[0] += 1
            print(f"[{done[0]}/{total}] {label}  (elapsed {time.monotonic() - clock:.0f} s)", file=sys.stderr,
                  flush=True)

    jobs_run = max(1, min(jobs or settings.get("jobs", 1), len(subjects)))
    with concurrent.futures.ThreadPoolExecutor(jobs_run, thread_name_prefix="design") as pool:
        futures = [pool.submit(run_subject, subject, cases, settings, log_root, progress) for subject in subjects]
        try:
            designs = [future.result() for future in futures]
        except BaseException:
            STOPPING.set()  # Ctrl-C or a bug: every design stops after its current case, and stops its server
            raise
    record = {
        "schema": SCHEMA_VERSION,
        "suite": "hostile",
        "title": "What a real server must survive",
        "mode": "quick" if quick else "full",
        "command": ["python", "scripts/bench.py", *sys.argv[2:]] if sys.argv[1:2] == ["hostile"] else sys.argv,
        "settings": {**{key: value for key, value in settings.items() if key != "designs"}, "jobs": jobs_run},
        "cases": [case.to_json() for case in cases],
        "environment": describe_machine({"server": None, "load": None}, tool_versions()),
        "started_utc": started,
        "finished_utc": utc_now(),
        "designs": designs,
    }
    complete = not quick and design_names is None and case_selectors is None
    path = (out_dir or (RESULTS_DIR if complete else SCRATCH_RESULTS_DIR)) / RECORD_NAME
    write_json_atomic(path, record)
    return path, record
