"""Hold many idle keep-alive connections to a design; measure its memory and one active client's latency.

    python scripts/bench.py idle DESIGN [--connections 10000] [--hold 5] [--server-args "..."]
                                        [--output build/idle-connections/DESIGN.json]

Theory of operation: the design is started as the harness starts it (its own process
group, the server pinned to the first CPU and this script to the second when there
are two; see system/launcher.py), with --server-args appended to its command (for a design whose keep-alive
timeout is shorter than the time it takes to open them all, e.g.
`--server-args "--keep-alive-timeout 60"` for the hardened design). We then open the
connections one after another, each asking for / once without Connection: close and
reading the answer by its Content-Length: a connection whose answer does not say
close is an idle keep-alive connection from then on. When all are open we count how
many the server still holds (a keep-alive timeout shorter than the opening closes the
first ones); for --hold seconds we sample the RSS and PSS of the server's process
group every 100 ms (system/resources.py) and time a probe client (a fresh connection,
GET /, Connection: close) every 250 ms; at the end we count again. The record gives
the memory before and at its peak, the difference per connection open when the hold
began (PSS where the kernel gives it, else RSS: `memory_metric`), and the probe's
latencies; it is written atomically (by default under build/, never results/).

Open files: each connection is a descriptor here and one in the server. This script
raises its own soft limit as far as the connections need (system/open_files.py) and refuses
(exit 2) a count the hard limit cannot hold; a design must raise its own (the hardened
design does, at start).

Exit codes: 0 a record was written; 2 bad input (unknown design, not an HTTP design,
more connections than the open-files limit allows, bad --server-args); 1 the design
failed to start or to answer.
"""

from __future__ import annotations

import socket
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from harness.clients import probe
from harness.model.catalogue import Catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records import write_record_atomic
from harness.model.records.idle_record import IdleProbe, IdleRecord
from harness.system import environment, launcher, open_files, processes
from harness.system.resources import GroupSampler, sample_group

DEFAULT_OUTPUT_DIR = REPO_ROOT / "build" / "idle-connections"
PROBE_INTERVAL_SECONDS = 0.25
CONNECT_TIMEOUT_SECONDS = 10.0
MIB = 2**20


class BadInputError(ValueError):
    """Input the script refuses before starting anything (exit 2)."""


def open_keep_alive_connection(host: str, port: int) -> tuple[socket.socket | None, str]:
    """One connection that asked for / and got an answer that keeps it open; else None and why."""
    conn = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS)
    try:
        conn.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode("ascii"))
        reader = probe.ResponseReader(conn, time.monotonic() + CONNECT_TIMEOUT_SECONDS)
        response = probe.parse_response(reader.next_response())
    except (OSError, ValueError) as error:
        conn.close()
        return None, f"{type(error).__name__}: {error}"
    if response.status != 200:
        conn.close()
        return None, f"status {response.status}"
    if response.headers.get("connection", "").lower() == "close":
        conn.close()
        return None, "the answer said Connection: close"
    conn.setblocking(False)
    return conn, ""


def still_open(conn: socket.socket) -> bool:
    """True while the server has neither closed nor reset an idle connection."""
    try:
        return conn.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def timed_probe(host: str, port: int) -> float | None:
    """Milliseconds for one fresh GET / (Connection: close) to be answered; None if it failed."""
    started = time.monotonic()
    try:
        response = probe.get(host, port, timeout=5)
    except (OSError, ValueError):
        return None
    return (time.monotonic() - started) * 1000 if response.status == 200 else None


def probe_summary(latencies: list[float], failed: int) -> IdleProbe:
    """The probe's answers during the hold: how many, how many failed, their median and largest latency."""
    if not latencies:
        return IdleProbe(requests=0, failed=failed, median_ms=None, max_ms=None)
    return IdleProbe(requests=len(latencies), failed=failed, median_ms=round(statistics.median(latencies), 2),
                     max_ms=round(max(latencies), 2))


def measure(catalogue: Catalogue, design_name: str, connections: int, hold: float, server_args: list[str],
            log_dir: Path) -> IdleRecord:
    """Start the design, open the connections, hold them while sampling; return the record."""
    design = catalogue.design(design_name)
    if design.kind != "http":
        raise BadInputError(f"design {design_name!r} is a {design.kind} design, not an HTTP one")
    open_files.raise_open_files_limit(connections, "connections")
    pinning = processes.cpu_pinning()
    port = processes.free_port()
    command = launcher.design_command(design, port, 0.0, log_dir, extra_arguments=server_args)
    held: list[socket.socket] = []
    refused: dict[str, int] = {}
    with launcher.running_design(design, port, 0.0, log_dir, cpu=pinning.server,
                                 extra_arguments=server_args) as server:
        started_utc = environment.utc_now()
        baseline = sample_group(server.process.pid)
        opening_started = time.monotonic()
        try:
            for _ in range(connections):
                try:
                    conn, why = open_keep_alive_connection(server.host, server.port)
                except OSError as error:
                    conn, why = None, f"connect: {error.strerror or error}"
                if conn is None:
                    refused[why] = refused.get(why, 0) + 1
                else:
                    held.append(conn)
            opening_seconds = time.monotonic() - opening_started
            # The denominator of the memory per connection: what the server still holds when the hold
            # (and the sampling of its peak) begins, not what was opened. A keep-alive timeout shorter
            # than the opening took has closed the first ones already.
            open_at_hold_start = sum(still_open(conn) for conn in held)
            latencies: list[float] = []
            failed_probes = 0
            with GroupSampler(server.process.pid) as sampler:
                hold_until = time.monotonic() + hold
                while time.monotonic() < hold_until:
                    latency = timed_probe(server.host, server.port)
                    if latency is None:
                        failed_probes += 1
                    else:
                        latencies.append(latency)
                    time.sleep(PROBE_INTERVAL_SECONDS)
            open_at_end = sum(still_open(conn) for conn in held)
        finally:
            for conn in held:
                conn.close()
        alive = server.alive()
    use_pss = sampler.peak_pss is not None and baseline.pss_bytes is not None
    peak, before = (sampler.peak_pss, baseline.pss_bytes) if use_pss else (sampler.peak_rss, baseline.rss_bytes)
    extra_mib = (peak - before) / MIB
    return IdleRecord(
        kind="idle-connections",
        design=design.name,
        server_command=command,
        connections_asked=connections,
        connections_kept_alive=len(held),
        connections_refused=refused,  # why each that did not stay open did not, and how many
        connections_open_at_hold_start=open_at_hold_start,
        connections_open_after_hold=open_at_end,
        opening_seconds=round(opening_seconds, 2),
        hold_seconds=hold,
        baseline_rss_mib=round(baseline.rss_bytes / MIB, 1),
        peak_rss_mib=round(sampler.peak_rss / MIB, 1),
        baseline_pss_mib=round(baseline.pss_bytes / MIB, 1) if use_pss else None,
        peak_pss_mib=round(sampler.peak_pss / MIB, 1) if use_pss else None,
        memory_metric="PSS" if use_pss else "RSS",  # what kib_per_connection is the difference of
        # (peak - before) / the connections open when the hold began: connections actually held.
        kib_per_connection=round(extra_mib * 1024 / open_at_hold_start, 2) if open_at_hold_start else None,
        probe=probe_summary(latencies, failed_probes),
        server_alive_after=alive,
        server_exit_code=server.exit_code,  # after its graceful stop: 0 expected
        started_utc=started_utc,
        finished_utc=environment.utc_now(),
        environment=environment.describe_machine(pinning, {}),
    )


@dataclass(frozen=True)
class Plan:
    """`bench.py idle`: the design, how many connections, how long they are held, its extra arguments, the record."""

    design: str
    connections: int = 10_000
    hold: float = 5.0  # seconds held idle while sampling
    server_args: tuple[str, ...] = ()  # appended to the design's command
    output: Path | None = None  # default build/idle-connections/DESIGN.json

    def __post_init__(self) -> None:
        if self.connections < 1 or self.hold <= 0:
            raise BadInputError("--connections must be at least 1 and --hold more than 0")


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, IdleRecord]:
    """Measure, write the record atomically; its path and the record."""
    output = (plan.output or DEFAULT_OUTPUT_DIR / f"{plan.design}.json").resolve()
    # The server's logs and config go under build/ whatever --output says: never beside a record in results/.
    record = measure(catalogue, plan.design, plan.connections, plan.hold, list(plan.server_args),
                     DEFAULT_OUTPUT_DIR / f"{plan.design}-logs")
    write_record_atomic(output, record)
    return output, record
