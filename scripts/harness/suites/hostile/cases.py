"""The hostile cases: the catalogue (scripts/catalogue/hostile/cases.toml) read into Case objects, and each kind.

A Case is the record's HostileCase (model/records/hostile_record.py): the catalogue's table is read
through it, so a misspelt parameter is refused at load. A case names a `kind`; the kind is one
function here (CASE_KINDS) that opens its connections through clients/raw_http.py, sends its
bytes, reads what comes back and judges it against the case's robust answer, one Variant per
connection or group of connections.
What the harness measures around every case (probes, leaks, a death) is run.py's.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from harness.clients import raw_http
from harness.model.catalogue import CATALOGUE_DIR
from harness.model.records.hostile_record import CaseVariant, EmfileFigures, HostileCase, VariantOutcome
from harness.model.suite_settings import HostileSettings
from harness.suites.case_catalogue import CaseCatalogue, typed_settings
from harness.system import open_files, processes
from harness.system.connections import listen_queue
from harness.system.resources import GroupSampler

CASES_FILE = CATALOGUE_DIR / "hostile" / "cases.toml"


# --- the catalogue of cases -------------------------------------------------------------------

Case = HostileCase  # a case as the catalogue gives it is the case as the record keeps it


@dataclass(frozen=True)
class Suite(CaseCatalogue):
    """The hostile cases; a case is selected by its number or its id."""

    cases: list[Case]
    what: ClassVar[str] = "hostile case"

    def names(self, case: Case) -> set[str]:
        return {str(case.number), case.id}

    def run_settings(self, quick: bool) -> HostileSettings:
        """The settings of a run, typed: the `[suite]` table, with `[suite.quick]` over it for a quick run."""
        return typed_settings(HostileSettings, self.table(quick), CASES_FILE)


def load_suite(path: Path = CASES_FILE) -> Suite:
    """Read the cases; every kind must have an implementation, numbers and ids must be unique."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    settings = dict(data.get("suite", {}))
    quick = settings.pop("quick", {})
    cases = []
    for index, entry in enumerate(data.get("case", [])):
        case = Case.from_json(entry, f"{path}: [[case]] {entry.get('id', index + 1)}")
        if case.kind not in CASE_KINDS:
            raise ValueError(f"{path}: case {case.id!r} has kind {case.kind!r}; known kinds: {', '.join(CASE_KINDS)}")
        cases.append(case)
    for attribute in ("number", "id"):
        values = [getattr(case, attribute) for case in cases]
        if len(set(values)) != len(values):
            raise ValueError(f"{path}: a case {attribute} is listed twice")
    suite = Suite(settings, quick, sorted(cases, key=lambda case: case.number))
    suite.run_settings(quick=False), suite.run_settings(quick=True)  # an unknown setting is an error here, at load
    return suite


# --- the cases ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Target:
    """Where the hostile client connects, and the server behind it (for cases that measure it)."""

    host: str
    port: int
    pgid: int
    settings: HostileSettings
    log: Path | None = None  # the server's stderr, where a case reads what it logged meanwhile (case 15: EMFILE)

    def connect(self, timeout: float = 2.0) -> socket.socket:
        return raw_http.connect(self.host, self.port, timeout)

    def held(self, count: int) -> contextlib.AbstractContextManager[tuple[list[socket.socket], int]]:
        """`count` connections opened at once, and how many never connected; all closed on the way out."""
        return raw_http.held_connections(self.host, self.port, count)


@dataclass
class Variant:
    """One connection's (or one group of connections') outcome within a case."""

    name: str
    passed: bool
    status: str  # what the cell shows: "400", "open", "reset", "0.9", "100→405", "n/a"
    seconds: float | None = None  # time to close, from the last byte sent
    note: str = ""
    applicable: bool = True
    figures: EmfileFigures | None = None  # what case 15 measured, for the renderer

    def to_record(self) -> VariantOutcome:
        return VariantOutcome(name=self.name, passed=self.passed, status=self.status,
                              seconds_to_close=None if self.seconds is None else round(self.seconds, 3),
                              note=self.note, applicable=self.applicable, figures=self.figures)


def status_label(statuses: list[int], reading: raw_http.Reading) -> str:
    if statuses:
        return "→".join("0.9" if status == 0 else str(status) for status in statuses)
    return {"eof": "closed", "reset": "reset", "open": "open"}[reading.ended]


def build_request(variant: CaseVariant) -> bytes:
    if variant.random_bytes is not None:
        return random.Random(9 if variant.seed is None else variant.seed).randbytes(variant.random_bytes)
    if variant.request is None:
        raise ValueError(f"{CASES_FILE}: variant {variant.name!r} has neither `request` nor `random_bytes`")
    filler = (variant.filler or "") * (variant.filler_count or 0)
    return variant.request.replace("{filler}", filler).encode("latin-1")


def exchange_case(target: Target, case: Case) -> list[Variant]:
    """Send each variant's bytes on its own connection, read the answer, judge it."""
    results = []
    for variant in case.variant or []:
        expect = variant.expect if variant.expect is not None else case.expect or []
        accept = variant.accept or []
        answer_within = case.answer_within
        payload = build_request(variant)
        bound = target.settings.bound
        with contextlib.closing(target.connect()) as conn:
            conn.settimeout(bound)
            try:
                interval = case.dribble_interval
                if interval:
                    for index in range(len(payload)):
                        conn.sendall(payload[index:index + 1])
                        time.sleep(interval)
                else:
                    conn.sendall(payload)
                if case.half_close:
                    conn.shutdown(socket.SHUT_WR)
            except OSError as error:
                # The server may refuse before reading it all: a reset then is fine, read what it said.
                note = f"sending stopped: {type(error).__name__}"
            else:
                note = ""
            sent = time.monotonic()
            # A refusal must also close (stop at the close); an accepted request may keep the connection.
            reading = raw_http.read_answer(conn, sent, sent + bound, until_complete=lambda statuses: statuses[-1] < 400)
        statuses, _ = raw_http.responses(reading.data)
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
        if status in accept and status not in expect and variant.note:
            problems.append(variant.note)
        results.append(Variant(variant.name, robust, status_label(statuses, reading), reading.seconds,
                               "; ".join(filter(None, [note, *problems]))))
    return results


def pipelined_case(target: Target, case: Case) -> list[Variant]:
    """N requests in one segment: all answered, or the first answered and the connection closed cleanly."""
    results = []
    bound = target.settings.bound
    for count in [2] if case.counts is None else case.counts:
        request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        with contextlib.closing(target.connect()) as conn:
            conn.sendall(request * count)
            sent = time.monotonic()
            reading = raw_http.read_answer(conn, sent, sent + bound,
                                  until_complete=lambda statuses, count=count: len(statuses) >= count)
        statuses, complete = raw_http.responses(reading.data)
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
    bound = target.settings.bound
    with contextlib.closing(target.connect()) as conn:
        conn.sendall(build_request(CaseVariant(name=case.id, request=case.request)))
        sent = time.monotonic()
        reading = raw_http.read_answer(conn, sent, sent + bound)
    statuses, _ = raw_http.responses(reading.data)
    passed = reading.ended != "open"
    note = "" if passed else f"still open after {bound:g} s"
    return [Variant("stalled body", passed, status_label(statuses, reading), reading.seconds, note)]


def summarise_closes(name: str, readings: dict[socket.socket, raw_http.Reading], refused: int, bound: float) -> Variant:
    closed = [reading for reading in readings.values() if reading.ended != "open"]
    statuses = sorted({status for reading in readings.values() for status in raw_http.responses(reading.data)[0]})
    label = "/".join(str(status) for status in statuses) or ("closed" if closed else "open")
    slowest = max((reading.seconds or 0 for reading in closed), default=None)
    passed = bool(readings) and len(closed) == len(readings)
    note = f"{len(closed)} of {len(readings)} closed within {bound:g} s"
    if refused:
        note += f"; {refused} never connected (listen backlog full)"
    return Variant(name, passed, label, slowest, note)


def slowloris_case(target: Target, case: Case) -> list[Variant]:
    """Many connections, each sending a header line every `interval` s and never the blank line."""
    count = target.settings.slowloris_connections
    bound = target.settings.bound
    with target.held(count) as (connections, refused):
        started = time.monotonic()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        every = 0.5 if case.interval is None else case.interval
        readings = raw_http.watch_closes(connections, started, started + bound, every=every,
                                         send=b"X-Slow: a\r\n")
    return [summarise_closes(f"{count} trickling", readings, refused, bound)]


def accepted_within(port: int, seconds: float) -> bool:
    """Whether the listen queue on `port` empties within `seconds`: every connection made so far was accepted."""
    deadline = time.monotonic() + seconds
    while listen_queue(port) > 0:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


@contextlib.contextmanager
def held_in_batches(target: Target, count: int, batch: int,
                    accept_wait: float) -> Iterator[tuple[list[socket.socket], int, int]]:
    """`count` connections, `batch` at a time, each batch accepted before the next is opened.

    Yields the connections, how many never connected, and how many were still in the listen queue at the end.
    Opened all at once, more connections than the server's backlog overflow its listen queue: the kernel drops
    the handshake's last ACK (the connection reaches accept() 1, 3, 7 s later, when a SYN-ACK is sent again) or
    answers with a SYN cookie whose ACK it then drops (a silent client sends nothing more, so the server never
    learns of it). Either way the client holds a connection the server cannot close on time or at all.
    A server that stops accepting (one connection at a time, all workers busy) gets the rest at once after
    `accept_wait`: waiting longer cannot help it.
    """
    connections: list[socket.socket] = []
    refused = 0
    try:
        while len(connections) + refused < count:
            opened, failed = raw_http.open_many(target.host, target.port, min(batch, count - len(connections) - refused))
            connections += opened
            refused += failed
            if not accepted_within(target.port, accept_wait):
                batch = count
        yield connections, refused, listen_queue(target.port)
    finally:
        for conn in connections:
            conn.close()


def idle_case(target: Target, case: Case) -> list[Variant]:
    """Many connections that send nothing at all; the clock starts once all are held and (if it can) accepted."""
    count = target.settings.idle_connections
    bound = target.settings.bound
    batch = case.batch or count
    with held_in_batches(target, count, batch, case.accept_wait or 1.0) as (connections, refused, waiting):
        started = time.monotonic()
        readings = raw_http.watch_closes(connections, started, started + bound)
    result = summarise_closes(f"{count} silent", readings, refused, bound)
    closes = [reading.seconds for reading in readings.values() if reading.seconds is not None]
    if closes:
        result.note += f"; closes {min(closes):.2f}-{max(closes):.2f} s after the clock started"
    if waiting:
        result.note += f"; {waiting} not yet accepted when the clock started (opened {batch} at a time)"
    return [result]


def reset_case(target: Target, case: Case) -> list[Variant]:
    """Reset right after the request, many times; then reset during the simulated call (the harness counts leaks)."""
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    failures = 0
    for _ in range(target.settings.resets):
        try:
            conn = target.connect()
            conn.sendall(request)
            raw_http.reset(conn)
        except OSError:
            failures += 1
    for _ in range(5 if case.gone_during_call is None else case.gone_during_call):
        try:
            conn = target.connect()
            conn.sendall(request)
            time.sleep(target.settings.delay / 2)  # inside the simulated call
            raw_http.reset(conn)
        except OSError:
            failures += 1
    note = f"{failures} connections could not be made" if failures else ""
    return [Variant(f"{target.settings.resets} resets", True, "reset", None, note)]


def slow_reader_case(target: Target, case: Case) -> list[Variant]:
    """GET /big, read 1 KiB, then read nothing for a while (the probe runs meanwhile); then see what still arrives."""
    size = target.settings.big_bytes
    try:
        with contextlib.closing(target.connect(timeout=5)) as conn:
            conn.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            sent = time.monotonic()
            reading = raw_http.read_answer(conn, sent, sent + 5, until_complete=lambda statuses: True)
        statuses, complete = raw_http.responses(reading.data)
        length = len(reading.data) - reading.data.find(b"\r\n\r\n") - 4
        has_big = complete and statuses == [200] and length == size
    except OSError:
        has_big = False
    if not has_big:
        return [Variant("slow reader", True, "n/a", None, "not applicable: no /big (1 MiB) on this design",
                        applicable=False)]
    bound = target.settings.bound
    conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    with contextlib.closing(conn):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the server must wait for us
        conn.settimeout(5)
        conn.connect((target.host, target.port))
        conn.sendall(b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        sent = time.monotonic()
        first = conn.recv(1024)
        stall = target.settings.slow_reader_stall or bound
        time.sleep(stall)  # the stall: the probe runs meanwhile
        rest = raw_http.read_answer(conn, sent, time.monotonic() + 5)
    received = len(first) + len(rest.data)
    gave_up = received < size
    note = (f"the server gave up: {received:,} of {size:,} bytes sent" if gave_up
            else f"all {size:,} bytes arrived after a {stall:g} s stall (held in kernel buffers or waited for)")
    return [Variant("stalled reader", True, "200", None, note)]


EMFILE_QUESTION = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"  # sent on every held connection after the hold
EMFILE_TEXT = "Too many open files"  # strerror(EMFILE), as Python's tracebacks and the servers' logs print it
# After the case closes the held connections: a worker that raised EMFILE may only exit then (Gunicorn's gthread
# worker waits for its threads, blocked reading those connections), and its supervisor starts another at once.
EXIT_GRACE_SECONDS = 1.0


def emfile_case(target: Target, case: Case) -> list[Variant]:
    """Lower the running server's open-files limit, hold more connections than it allows, measure its CPU meanwhile.

    Every process of the group may open `emfile_headroom` descriptors more than it holds once it is
    answering; the case then holds that many per process plus `emfile_beyond` (at most
    `emfile_connections`), so the rest wait in the backlog, the listener stays readable, and a loop
    that goes back to it after EMFILE spins. The CPU counts only while a process is at its limit.
    With the case's ask_held_within, a GET then goes on every held connection, and the answers are counted.
    Every process of the group is watched from the lowering until EXIT_GRACE_SECONDS after the connections
    close (longer, up to `settle`, while a worker that died has no successor yet): a worker whose accept()
    raised EMFILE and that exited freed its descriptors, so the looks before and after the hold cannot find
    it at its limit; the watch sees it end near its limit (died_at_limit), and the processes started after.
    """
    settings = target.settings
    headroom, hold = settings.emfile_headroom, settings.emfile_hold
    log_from = log_size(target.log)
    try:
        lowered = open_files.lower_group_open_files(target.pgid, headroom)
    except PermissionError as error:  # a process of the group runs as another user (nginx's workers): not ours to lower
        return [Variant("case", False, "n/a", None, f"not measured: the harness may not lower this server's limit "
                        f"({error.strerror}: prlimit on a process of its group)", applicable=False)]
    count = min(settings.emfile_connections, headroom * len(lowered) + settings.emfile_beyond)
    with open_files.DescriptorWatch(target.pgid) as watch:
        with target.held(count) as (connections, refused):
            time.sleep(0.5)  # let the server accept until accept() fails with EMFILE
            at_limit_before = at_limit(lowered)
            with GroupSampler(target.pgid) as sampler:
                time.sleep(hold)
            at_limit_after = at_limit(lowered)
            held_fds, _ = processes.group_counts(target.pgid)
            closed = sum(1 for conn in connections if raw_http.closed_by_peer(conn))  # before we close them ourselves
            started = len(set(processes.group_pids(target.pgid)) - {entry.pid for entry in lowered})
            asked = (raw_http.ask_each(connections, EMFILE_QUESTION, case.ask_held_within)
                     if case.ask_held_within is not None else None)
            cpu = (sampler.last.cpu_ticks - sampler.first.cpu_ticks) / os.sysconf("SC_CLK_TCK") \
                if sampler.first and sampler.last else 0.0
        deadline = time.monotonic() + max(settings.settle, EXIT_GRACE_SECONDS)
        time.sleep(EXIT_GRACE_SECONDS)
        logged = emfile_lines(target.log, log_from)
        while (ended := ended_at_limit(watch.processes(), headroom, logged)) and \
                not successors(watch.processes(), ended) and time.monotonic() < deadline:
            time.sleep(0.1)  # a supervisor replaces a worker when it reaps it
            logged = emfile_lines(target.log, log_from)
    seen = watch.processes()
    died = ended_at_limit(seen, headroom, logged)
    replaced = len(successors(seen, died))
    share = cpu / hold
    busy = share > (0.5 if case.busy_cpu_share is None else case.busy_cpu_share)
    over = min(at_limit_before, at_limit_after)  # at the limit when the measurement began and when it ended
    limits = sorted({entry.limit for entry in lowered}) or [0]
    limit_range = f"{limits[0]}" if len(limits) == 1 else f"{limits[0]}–{limits[-1]}"
    note = (f"{share:.0%} of a CPU for {hold:g} s, {over} of {len(lowered)} processes at their limit before and after"
            + (" (a busy loop)" if busy else "")
            + f"; {len(connections)} connections held, {held_fds} descriptors open; each process's limit lowered, "
              f"once it answered, to what it held + {headroom} ({limit_range})")
    if died:
        note += (f"; {len(died)} process{'es' if len(died) > 1 else ''} ran out of descriptors and ended (the fewest "
                 f"free: {min(entry.least_free or 0 for entry in died)}), {replaced} started after "
                 f"{'it' if len(died) == 1 else 'them'} (a worker replaced)")
    elif not over and not any(entry.least_free == 0 for entry in seen):
        note += "; no process reached its limit: it never accepted past it"
    if logged:
        note += f"; {logged} line{'s' if logged > 1 else ''} of its stderr name{'' if logged > 1 else 's'} EMFILE"
    if refused:
        note += f"; {refused} never connected"
    if closed:
        note += f"; the server closed {closed} of the held connections"
    if started:
        note += f"; {started} process{'es' if started > 1 else ''} started during the hold"
    if asked is not None:
        note += (f"; asked again after the hold, {asked['answered']} held connections answered within "
                 f"{case.ask_held_within:g} s, {asked['closed']} were closed, {asked['silent']} got nothing")
    figures = EmfileFigures(cpu_share=round(share, 3), hold_seconds=hold, processes=len(lowered), at_limit=over,
                            connections_held=len(connections), never_connected=refused, headroom=headroom,
                            closed_by_server=closed, processes_started=started,
                            held_answered=None if asked is None else asked["answered"],
                            held_closed=None if asked is None else asked["closed"],
                            held_silent=None if asked is None else asked["silent"],
                            died_at_limit=len(died), replaced=replaced,
                            emfile_logged=None if target.log is None else logged)
    return [Variant(f"{len(connections)} held", not busy, f"cpu {share:.0%}", None, note, figures=figures)]


def at_limit(lowered: list[open_files.LoweredLimit]) -> int:
    """How many of the processes have no descriptor free (a process that ended does not count)."""
    return sum(1 for entry in lowered if open_files.free_descriptors(entry.pid) == 0)


def ended_at_limit(seen: list[open_files.WatchedProcess], headroom: int,
                   emfile_logged: int) -> list[open_files.WatchedProcess]:
    """The watched processes that ran out of descriptors and then ended.

    Seen with none free; or, while the server's stderr named EMFILE, seen within a quarter of the headroom of its
    limit: the worker had accepted to its limit, and the few it freed as it failed were freed before a look
    (Gunicorn's gthread worker was seen with one free). A process that ends with most of its headroom free (a
    child forked for one connection, a worker stopped normally) is not counted, whatever the log says.
    """
    near = headroom // 4 if emfile_logged else 0
    return [entry for entry in seen
            if entry.ended and entry.least_free is not None and entry.least_free <= near]


def successors(seen: list[open_files.WatchedProcess],
               died: list[open_files.WatchedProcess]) -> list[open_files.WatchedProcess]:
    """The processes first seen after the first of `died` was last seen running: those started to replace it."""
    if not died:
        return []
    since = min(entry.last_alive or entry.first_seen for entry in died)
    return [entry for entry in seen if entry.first_seen > since and entry not in died]


def log_size(path: Path | None) -> int:
    """Where the server's stderr ends now: a case reads what was written after it."""
    try:
        return 0 if path is None else path.stat().st_size
    except FileNotFoundError:
        return 0


def emfile_lines(path: Path | None, offset: int) -> int:
    """Lines the server wrote to its stderr after `offset` that name EMFILE (EMFILE_TEXT)."""
    if path is None:
        return 0
    try:
        with path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return 0
    return sum(1 for line in text.splitlines() if EMFILE_TEXT in line)


def expect_continue_case(target: Target, case: Case) -> list[Variant]:
    """Announce a 10 MiB body with Expect: 100-continue; send it only after 100 (as curl does, or after 1 s)."""
    size = 10 * 2**20 if case.body_bytes is None else case.body_bytes
    wait = 1.0 if case.wait_for_interim is None else case.wait_for_interim
    bound = target.settings.bound
    head = (f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}\r\n"
            "Expect: 100-continue\r\nContent-Type: application/octet-stream\r\n\r\n").encode()
    with contextlib.closing(target.connect()) as conn:
        conn.sendall(head)
        sent = time.monotonic()
        first = raw_http.read_answer(conn, sent, sent + wait, until_complete=lambda statuses: True)
        statuses, _ = raw_http.responses(first.data)
        if statuses and not 100 <= statuses[0] < 200 and statuses[0] >= 400:
            rest = raw_http.read_answer(conn, sent, sent + bound) if first.ended == "open" else first
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
        rest = raw_http.read_answer(conn, sent, deadline, until_complete=lambda statuses: statuses[-1] >= 200)
    all_statuses, _ = raw_http.responses(first.data + rest.data)
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
