"""Responses that stream: many server-sent-event streams at once, slow readers, and a stop with streams open.

    python scripts/bench.py streaming [--quick] [--design NAME ...] [--phase NAME ...] [--out results]

Theory of operation: the plan is data (PHASES below, `--quick` shrinks it). For every design of
kind "stream" in the catalogue (scripts/catalogue/15-streaming.toml) and every phase that takes
it, the design is started through the launcher (pinned to the first CPU, its own process
group), checked (clients/sse_client.py verify_stream: the page, and a short stream of four
events), and loaded by clients/sse_client.py, a subprocess pinned to the second CPU. While the
client runs, this process samples the server's process group every SAMPLE_STEP seconds: PSS and
RSS (system/resources.py), threads and open descriptors (/proc/PID/task and fd, system/processes.py
group_counts), and the latency of a fresh short request (GET /, a new connection, PROBE_TIMEOUT at
most; it runs on neither pinned CPU's load alone, so it measures the server's attention).

Phases:
- `hold`: STREAMS streams at once (the client opens them 100 at a time), one 64-byte event every
  100 ms each, for HOLD_SECONDS; `hold-10k` the same with 10,000 streams, for the event loops.
- `slow`: SLOW_READERS clients that read 4 KiB every 100 ms through a 4 KiB receive buffer, from
  streams of 16 KiB events every 10 ms (1.6 MB/s each, 40 times what they read): the server's
  memory over time says whether it buffers what they do not take (no backpressure) or waits.
- `stop`: STOP_STREAMS streams; STOP_AFTER seconds after they are open, the design's graceful
  stop signal (as the harness always stops it); how long until its process group is gone
  (STOP_CAP at most, then SIGKILL, recorded), and how each client's stream ended.
- `stop-timeout`: the same stop for uvicorn and Granian with their stop bounded (STOP_TIMEOUT_DESIGNS:
  --timeout-graceful-shutdown, --workers-kill-timeout), whose streams outlast the bound. These
  designs differ from sse-uvicorn and sse-granian by that one setting, so no other phase takes them.

`--phase NAME` measures only the phases named; the record is then `streaming-NAME.json` (names joined
by "-"), so that a partial run never replaces the whole record.

The record (results/streaming.json, `"suite": "streaming"`, model/records/streaming_record.py) is written in one
atomic write; a design that fails to start or to answer is recorded as failed and the others go on (exit 1).
Exit codes: 0 every design measured; 1 one or more failed; 2 bad input.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.clients import probe, verify
from harness.model.catalogue import Catalogue, Design
from harness.model.paths import REPO_ROOT
from harness.model.records import write_record_atomic
from harness.model.records.streaming_record import (
    Distribution,
    ServerSample,
    StreamClient,
    StreamingRecord,
    StreamPhase,
    StreamRow,
)
from harness.system import environment, launcher, open_files, processes
from harness.system.resources import sample_group

CLIENT = Path(__file__).resolve().parents[1] / "clients" / "sse_client.py"
RECORD_NAME = "streaming.json"
LOG_DIR = REPO_ROOT / "build" / "streaming-logs"
SAMPLE_STEP = 0.5  # seconds between two samples of the server (memory, threads, a fresh request)
PROBE_TIMEOUT = 2.0  # a fresh request not answered within this counts as failed
MIB = 2**20
EVENT_LOOPS = ("sse-asyncio-streams", "sse-asyncio-no-drain", "sse-uvicorn", "sse-granian")
AT_DEFAULTS = ("sse-thread-per-connection", "sse-thread-pool", *EVENT_LOOPS)  # our designs; the servers at defaults
STOP_TIMEOUT_DESIGNS = ("sse-uvicorn-stop-timeout", "sse-granian-stop-timeout")


@dataclass(frozen=True)
class Phase:
    """One measurement applied to each of its designs."""

    name: str
    streams: int
    seconds: float  # each stream's duration (the query's duration=)
    interval: float = 0.1
    event_bytes: int = 64
    slow_readers: int = 0
    stop_after: float | None = None  # seconds after the streams are open: send the stop signal
    designs: tuple[str, ...] = AT_DEFAULTS

    def path(self) -> str:
        return f"/events?interval={self.interval:g}&duration={self.seconds:g}&size={self.event_bytes}"

    def as_run(self) -> StreamPhase:
        """The phase as the record keeps it."""
        return StreamPhase(name=self.name, streams=self.streams, seconds=self.seconds, interval=self.interval,
                           event_bytes=self.event_bytes, slow_readers=self.slow_readers, stop_after=self.stop_after,
                           designs=list(self.designs), path=self.path())


SLOW_PATH = "/events?interval=0.01&duration={seconds:g}&size=16384"
STOP_CAP = 25.0  # seconds a stop may take before SIGKILL
PHASES = [
    Phase("hold", streams=1000, seconds=15),
    Phase("hold-10k", streams=10_000, seconds=15, designs=EVENT_LOOPS),
    Phase("slow", streams=0, seconds=10, slow_readers=20),
    Phase("stop", streams=100, seconds=15, stop_after=3),
    # The streams have 12 s left at the stop, more than the designs' 5 s bound: the bound is what ends them.
    Phase("stop-timeout", streams=100, seconds=15, stop_after=3, designs=STOP_TIMEOUT_DESIGNS),
]
QUICK_PHASES = [
    Phase("hold", streams=100, seconds=3),
    Phase("hold-10k", streams=500, seconds=3, designs=EVENT_LOOPS),
    Phase("slow", streams=0, seconds=3, slow_readers=5),
    Phase("stop", streams=20, seconds=6, stop_after=1.5),
    Phase("stop-timeout", streams=20, seconds=10, stop_after=1.5, designs=STOP_TIMEOUT_DESIGNS),
]


class BadInputError(ValueError):
    """Input refused before anything starts (exit 2)."""


def stream_designs(catalogue: Catalogue, names: list[str] | None) -> list[Design]:
    designs = [design for design in catalogue.designs.values() if design.kind == "stream"]
    if names:
        unknown = [name for name in names if name not in {design.name for design in designs}]
        if unknown:
            raise BadInputError(f"not stream designs: {', '.join(unknown)}; stream designs: "
                                f"{', '.join(design.name for design in designs)}")
        designs = [design for design in designs if design.name in names]
    return designs


def fresh_request_ms(host: str, port: int) -> float | None:
    """Milliseconds for a fresh GET / (a new connection) to be answered; None if it failed or took too long."""
    started = time.monotonic()
    try:
        response = probe.get(host, port, timeout=PROBE_TIMEOUT)
    except (OSError, ValueError):
        return None
    return round((time.monotonic() - started) * 1000, 2) if response.status == 200 else None


def client_command(phase: Phase, port: int) -> list[str]:
    # Streams end after `seconds`; a little more for opening them (or for a stop that waits for them). Streams
    # still open then count as open: a thread pool serves 16 at a time, and nothing waits for the rest.
    # Slow readers read until the timeout: their streams' duration, and two seconds more.
    timeout = phase.seconds + (2 if not phase.streams else 10 + phase.streams / 1000)
    return [sys.executable, str(CLIENT), "--port", str(port), "--streams", str(phase.streams),
            "--path", phase.path(), "--interval", f"{phase.interval:g}", "--timeout", f"{timeout:g}",
            "--slow", str(phase.slow_readers), "--slow-path", SLOW_PATH.format(seconds=phase.seconds),
            "--slow-rcvbuf", "4096", "--slow-read-bytes", "4096", "--slow-read-every", "0.1"]


class ClientRun:
    """The client in a thread (processes.run_tool keeps it in its own group, with a hard timeout)."""

    def __init__(self, command: list[str], timeout: float, cpu: str | None) -> None:
        self.command, self.timeout, self.cpu = command, timeout, cpu
        self.result: dict[str, Any] | None = None
        self.error = ""
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        completed = processes.run_tool(self.command, self.timeout, cpu=self.cpu)
        try:
            self.result = json.loads(completed.stdout)
        except ValueError:
            self.error = f"exit {completed.returncode}: {completed.stderr[-500:]}"


def sample(pgid: int, host: str, port: int, started: float) -> ServerSample:
    group = sample_group(pgid)
    fds, threads = processes.group_counts(pgid)
    return ServerSample(t=round(time.monotonic() - started, 2),
                        pss_mib=None if group.pss_bytes is None else round(group.pss_bytes / MIB, 1),
                        rss_mib=round(group.rss_bytes / MIB, 1), threads=threads, fds=fds, processes=group.processes,
                        fresh_ms=fresh_request_ms(host, port))


def wait_until_gone(server: processes.RunningServer, cap: float) -> float | None:
    """Seconds until the server's whole process group has exited; None when it was still there after cap."""
    started = time.monotonic()
    while time.monotonic() - started < cap:
        server.process.poll()
        if sample_group(server.process.pid).processes == 0:
            return round(time.monotonic() - started, 2)
        time.sleep(0.05)
    return None


@dataclasses.dataclass
class Stop:
    """The stop of a stop phase, once sent: when (monotonic), how long until the group was gone (None: killed at
    STOP_CAP), and when after the design was checked."""

    sent: float
    seconds: float | None
    after_open_seconds: float


def measure_design(design: Design, phase: Phase, pinning: processes.CpuPinning) -> StreamRow:
    """One design under one phase: the samples over time, the client's counts, and for `stop` the stop."""
    port = processes.free_port()
    with launcher.running_design(design, port, 0.0, LOG_DIR / design.name, cpu=pinning.server,
                                 stop_grace=STOP_CAP) as server:
        problems = verify.verify(design, server.host, server.port).problems
        if problems:
            return StreamRow(design=design.name, phase=phase.name, server_command=server.command, status="failed",
                             problems=problems)
        started = time.monotonic()
        samples = [sample(server.process.pid, server.host, server.port, started)]
        command = client_command(phase, port)
        client = ClientRun(command, phase.seconds + STOP_CAP + 60, pinning.load)  # a hard cap: the client ends first
        client.thread.start()
        stop: Stop | None = None
        while client.thread.is_alive():
            time.sleep(SAMPLE_STEP)
            if not server.alive() or (stop is not None):
                continue
            samples.append(sample(server.process.pid, server.host, server.port, started))
            # Open: the server holds a descriptor per stream (or ten seconds passed: some were refused).
            opened = samples[-1].fds >= phase.streams or time.monotonic() - started >= (phase.stop_after or 0) + 10
            if phase.stop_after is not None and opened and time.monotonic() - started >= phase.stop_after:
                sent = time.monotonic()
                processes.send_stop_signal(server.process, design.stop_signal, not design.stop_main_process_only)
                stop = Stop(sent=sent, seconds=wait_until_gone(server, STOP_CAP),
                            after_open_seconds=round(sent - started, 2))
        client.thread.join()
        alive_at_end = server.alive()
    row = StreamRow(design=design.name, phase=phase.name, server_command=server.command,
                    load_command=processes.pinned(command, pinning.load),
                    stop_seconds=stop.seconds if stop else None,
                    stop_sent_after_open_seconds=stop.after_open_seconds if stop else None,
                    server_alive_at_end=alive_at_end, server_exit_code=server.exit_code, status="ok", samples=samples)
    if client.result is None:
        return dataclasses.replace(row, status="failed", problems=[f"the client failed: {client.error}"])
    seen = StreamClient.from_json(client.result, f"{design.name} {phase.name}: the client's report")
    if stop is not None and seen.ended_monotonic is not None:
        # When the streams ended, from the signal rather than on the client's clock.
        seen = dataclasses.replace(seen, ended_monotonic=None,
                                   ended_after_stop_seconds=since(seen.ended_monotonic, stop.sent))
    return dataclasses.replace(row, client=seen, **summary(samples, seen, phase))


def since(moments: Distribution, start: float) -> Distribution:
    """A distribution of moments (monotonic seconds) as seconds after start."""
    def after(value: float | None) -> float | None:
        return None if value is None else round(value - start, 2)
    return Distribution(min=after(moments.min), median=after(moments.median), p99=after(moments.p99),
                        max=after(moments.max))


def summary(samples: list[ServerSample], client: StreamClient, phase: Phase) -> dict[str, Any]:
    """The figures a table shows (StreamRow's fields, by name): peaks over the samples, and what the client saw."""
    measured = [item for item in samples if item.fds]
    fresh = [item.fresh_ms for item in measured[1:] if item.fresh_ms is not None]
    failed = sum(1 for item in measured[1:] if item.fresh_ms is None)
    memory = [item.pss_mib if item.pss_mib is not None else item.rss_mib for item in measured]
    expected = client.streams_connected * round(phase.seconds / phase.interval) if phase.streams else 0
    return {
        "baseline_pss_mib": memory[0] if memory else None,
        "peak_pss_mib": max(memory) if memory else None,
        "peak_threads": max((item.threads for item in measured), default=None),
        "peak_fds": max((item.fds for item in measured), default=None),
        "fresh_ms_median": round(statistics.median(fresh), 1) if fresh else None,
        "fresh_ms_max": round(max(fresh), 1) if fresh else None,
        "fresh_failed": failed, "fresh_asked": len(measured) - 1,
        "events_expected": expected,
        "client_cpu_share": round(client.client_cpu_seconds / client.client_wall_seconds, 2)
        if client.client_wall_seconds else None,
    }


def chosen_phases(quick: bool, names: list[str] | None) -> list[Phase]:
    """The plan's phases, or those named (in the plan's order); an unknown name is bad input."""
    phases = QUICK_PHASES if quick else PHASES
    if not names:
        return phases
    unknown = sorted(set(names) - {phase.name for phase in phases})
    if unknown:
        raise BadInputError(f"unknown phases: {', '.join(unknown)}; phases: {', '.join(phase.name for phase in phases)}")
    return [phase for phase in phases if phase.name in names]


def record_name(phase_names: list[str] | None) -> str:
    """streaming.json for the whole plan; streaming-<phases>.json for a part of it."""
    if not phase_names:
        return RECORD_NAME
    ordered = [phase.name for phase in PHASES if phase.name in phase_names]
    return f"streaming-{'-'.join(ordered)}.json"


def measure(catalogue: Catalogue, names: list[str] | None, quick: bool,
            phase_names: list[str] | None = None) -> StreamingRecord:
    designs = stream_designs(catalogue, names)
    phases = chosen_phases(quick, phase_names)
    # Each end of a stream is a descriptor in its own process (the client, the server): both inherit this limit.
    open_files.raise_open_files_limit(max(phase.streams + phase.slow_readers for phase in phases) + 100, "streams")
    pinning = processes.cpu_pinning()
    started = environment.utc_now()
    rows: list[StreamRow] = []
    for phase in phases:
        for design in designs:
            if design.name not in phase.designs:
                continue
            print(f"[streaming] {phase.name}: {design.name}", file=sys.stderr, flush=True)
            try:
                row = measure_design(design, phase, pinning)
            except processes.ServerStartError as error:
                row = StreamRow(design=design.name, phase=phase.name, status="failed",
                                problems=[f"did not start: {error}"])
            rows.append(row)
    return StreamingRecord(suite="streaming", quick=quick, started_utc=started,
                           phases=[phase.as_run() for phase in phases], slow_path=SLOW_PATH,
                           stop_cap_seconds=STOP_CAP, rows=rows, finished_utc=environment.utc_now(),
                           environment=environment.describe_machine(pinning, {}))


@dataclass(frozen=True)
class Plan:
    """`bench.py streaming`: the designs and phases (None: all), quick or full, the record's directory."""

    designs: tuple[str, ...] | None = None
    phases: tuple[str, ...] | None = None
    quick: bool = False
    out: Path = REPO_ROOT / "build"  # the site's record is in results/


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, StreamingRecord]:
    """Measure, write the record atomically (streaming.json, or streaming-PHASES.json for a part); it and its path."""
    phases = list(plan.phases) if plan.phases else None
    record = measure(catalogue, list(plan.designs) if plan.designs else None, plan.quick, phases)
    output = (plan.out / record_name(phases)).resolve()
    write_record_atomic(output, record)
    return output, record
