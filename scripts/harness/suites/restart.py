"""Zero downtime, measured: restart a server several times under steady load and record every request.

For each target of scripts/catalogue/restart/restart.toml: start the design (pinned
like every measurement), start our open-loop client (scripts/http_load.py, pinned to
the other CPU) at a fixed rate with a timeline of every request, and at fixed moments
restart the server: either send the signal its documentation names for a graceful
restart to the process the harness started, or, the naive way, stop it (its graceful
stop) and start it again. When the load ends the server is stopped, and the record
keeps, per target: every failed request (when it was due, what went wrong: connect =
refused, read = reset or closed early, ...), the restart moments on the client's clock,
and the timeline folded into BIN_SECONDS bins (requests due, ok, failed, median and
worst latency) so the record stays small.

Each target runs `repeat` times (three in a full run), the targets taking turns (every
target once, then every target again), so a drift of the machine touches them alike; the record
keeps every run, and the page shows the spread of the failed requests across them.

The `[in_flight]` table of the same file is a second measurement (`bench.py restart --in-flight`,
results/multi-process/restart-in-flight.json): one restart per run, with kept-alive connections
idle and long requests in flight at that moment (clients/restart_probe.py says what it sends);
the record keeps what each of those clients saw, with every moment from the restart.

Known limits: the moments are the harness's, taken on the same CLOCK_MONOTONIC as the client's
(both processes read it through time.perf_counter on Linux).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from harness.model.catalogue import CATALOGUE_DIR, Catalogue, UnknownNameError
from harness.model.paths import REPO_ROOT
from harness.model.records import (
    MULTI_PROCESS_DIR_NAME,
    record_path,
    write_record_atomic,
)
from harness.model.records.multi_process_records import (
    Bin,
    Failure,
    InFlightRecord,
    InFlightRun,
    InFlightScenario,
    InFlightTarget,
    LoadReport,
    ProbeReport,
    RestartMoment,
    RestartRecord,
    RestartRun,
    RestartScenario,
    RestartTarget,
    RunError,
)
from harness.model.typed import RecordShapeError
from harness.model.restart_plan import METHODS, InFlightPlan, InFlightPlanTarget, RestartPlan, RestartPlanTarget
from harness.system import launcher, processes
from harness.system.environment import describe_machine, utc_now

PLAN_PATH = CATALOGUE_DIR / "restart" / "restart.toml"
HTTP_LOAD = REPO_ROOT / "scripts" / "http_load.py"
BIN_SECONDS = 0.25
PlanT = TypeVar("PlanT", RestartPlan, InFlightPlan)


class RestartPlanError(ValueError):
    """The restart scenario's file is wrong: bad input (exit 2), the message names the file and the key."""


def read_plan_table(path: Path, table: dict[str, Any], kind: type[PlanT], quick: bool, where: str) -> PlanT:
    """A table of the plan read through its class, with its [quick] table's settings applied when asked; an unknown
    key (in the table, its targets or its [quick] table) or a value of the wrong type is a RestartPlanError."""
    table = dict(table)
    overrides = table.pop("quick", {})
    settable = [item.name for item in dataclasses.fields(kind) if item.name != "target"]
    for key in overrides:
        if key not in settable:
            near = difflib.get_close_matches(key, settable, n=1)
            raise RestartPlanError(f"{path} {where}: [quick] sets `{key}`, which it cannot"
                                   + (f" (did you mean `{near[0]}`?)" if near else f"; it can set {', '.join(settable)}"))
    try:
        plan = kind.from_json({**table, **overrides} if quick else table, f"{path} {where}")
    except RecordShapeError as error:
        raise RestartPlanError(str(error)) from error
    if plan.repeat < 1:
        raise RestartPlanError(f"{path} {where}: repeat must be a whole number of runs, at least 1; got {plan.repeat}")
    return plan


def check_design(design: str, catalogue: Catalogue | None) -> None:
    """UnknownNameError (exit 2) for a design the catalogue does not have."""
    if catalogue is not None and design not in catalogue.designs:
        raise UnknownNameError("design", design, sorted(catalogue.designs))


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise RestartPlanError(f"{path}: {error}") from error


def load_plan(path: Path = PLAN_PATH, quick: bool = False, catalogue: Catalogue | None = None) -> RestartPlan:
    """Read and check the plan: unknown keys, unknown designs, a method without its signal are errors."""
    data = read_toml(path)
    data.pop("in_flight", None)  # the second measurement's table: load_in_flight_plan reads it
    plan = read_plan_table(path, data, RestartPlan, quick, "(the top-level table)")
    for target in plan.targets:
        if target.method not in METHODS:
            raise RestartPlanError(f"{path}: target {target.design!r}: method must be one of {sorted(METHODS)}")
        if target.method == "signal" and not hasattr(signal.Signals, str(target.signal)):
            raise RestartPlanError(f"{path}: target {target.design!r}: method signal needs a signal name, "
                                   f"got {target.signal!r}")
        check_design(target.design, catalogue)
    if plan.moments() and plan.moments()[-1] >= plan.seconds:
        raise RestartPlanError(f"{path}: the last restart ({plan.moments()[-1]:g} s) is not inside the load "
                               f"({plan.seconds:g} s)")
    return plan


def load_command(port: int, plan: RestartPlan, timeline: Path) -> list[str]:
    """Our open-loop client: rate x seconds requests on schedule, every one on the timeline."""
    return [sys.executable, str(HTTP_LOAD), f"http://{processes.LOOPBACK}:{port}/", "--rate", f"{plan.rate:g}",
            "--requests", str(round(plan.rate * plan.seconds)), "--timeout", f"{plan.seconds + 30:g}",
            "--timeline", str(timeline)]


@contextlib.contextmanager
def started_client(command: list[str], cpu: str | None, log_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """The load client in its own process group; always stopped."""
    with open(log_dir / "client.stderr", "w", encoding="utf-8") as stderr:
        client = subprocess.Popen(processes.pinned(command, cpu), stdout=subprocess.PIPE, stderr=stderr, text=True,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield client
    finally:
        if client.poll() is None:
            processes.stop_process_group(client, grace=1.0)  # type: ignore[arg-type]


def fold(timeline: list[dict[str, Any]], seconds: float) -> list[Bin]:
    """Requests by the BIN_SECONDS bin they were due in: due, ok, failed, p50 and max latency (ms) of the ok.

    The timeline is http_load.py's (`--timeline`), one entry per request: a tool's output, read as it writes it."""
    bins: list[Bin] = []
    count = int(seconds / BIN_SECONDS) + 1
    by_bin: list[list[dict[str, Any]]] = [[] for _ in range(count)]
    for entry in timeline:
        by_bin[min(int(entry["intended_start"] / BIN_SECONDS), count - 1)].append(entry)
    for index, entries in enumerate(by_bin):
        latencies = [(entry["end"] - entry["intended_start"]) * 1000 for entry in entries if entry["result"] == "ok"]
        bins.append(Bin(t=round(index * BIN_SECONDS, 3), due=len(entries), ok=len(latencies),
                        failed=len(entries) - len(latencies),
                        p50_ms=round(statistics.median(latencies), 2) if latencies else None,
                        max_ms=round(max(latencies), 2) if latencies else None))
    return bins


def restart_server(target: RestartPlanTarget, stack: contextlib.ExitStack, server: processes.RunningServer,
                   start: Any) -> processes.RunningServer:
    """Restart the way the target says; return the server now running (a new one for stop-start)."""
    if target.method == "signal":
        os.kill(server.process.pid, signal.Signals[target.signal])  # type: ignore[index]
        return server
    stack.close()  # the server's graceful stop, then its group is gone
    return stack.enter_context(start())


def measure_target(catalogue: Catalogue, plan: RestartPlan, target: RestartPlanTarget, port: int, log_dir: Path,
                   pinning: processes.CpuPinning, repetition: int = 0) -> RestartRun:
    """One run of a target: start it, load it, restart it at each moment, stop it; one run of its row."""
    design = catalogue.design(target.design)
    workdir = log_dir / f"{design.name}-{target.method}" / f"repetition-{repetition}"
    workdir.mkdir(parents=True, exist_ok=True)
    command = launcher.design_command(design, port, plan.delay, workdir)
    timeline_path = workdir / "timeline.json"
    client_command = load_command(port, plan, timeline_path)
    print(f"  server: {' '.join(processes.pinned(command, pinning.server))}", flush=True)
    print(f"  load:   {' '.join(processes.pinned(client_command, pinning.load))}", flush=True)

    def start() -> contextlib.AbstractContextManager[processes.RunningServer]:
        return launcher.running_design(design, port, plan.delay, workdir, cpu=pinning.server)

    restarts: list[tuple[float, float]] = []  # seconds from the load's start on the harness's clock, and taken
    server_alive = True
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(start())
        with started_client(client_command, pinning.load, workdir) as client:
            began = time.perf_counter()
            for moment in plan.moments():
                time.sleep(max(0.0, began + moment - time.perf_counter()))
                at = time.perf_counter()
                server = restart_server(target, stack, server, start)
                restarts.append((at - began, time.perf_counter() - at))
            stdout, _ = client.communicate(timeout=plan.seconds + 40)
        server_alive = server.alive()
    report = LoadReport.from_json(json.loads(stdout), "http_load.py's report")
    timeline = json.loads(timeline_path.read_text(encoding="utf-8"))
    # Place the restarts on the client's clock: both read CLOCK_MONOTONIC; the client reports its start.
    offset = began - report.clock_start_s
    failures = [Failure(t=round(entry["intended_start"], 3), result=entry["result"])
                for entry in timeline if entry["result"] != "ok"]
    return RestartRun(repetition=repetition, server_command=command, load_command=client_command,
                      restarts=[RestartMoment(at_s=round(round(at, 3) + offset, 3), took_s=round(took, 3))
                                for at, took in restarts],
                      report=report, failures=failures, bins=fold(timeline, plan.seconds), alive_at_end=server_alive,
                      exit_code=server.exit_code, stderr_tail=server.stderr_tail()[-800:])


TargetT = TypeVar("TargetT", RestartPlanTarget, InFlightPlanTarget)
RunT = TypeVar("RunT", RestartRun, InFlightRun)


@dataclass
class Turns(Generic[RunT]):
    """One target's runs, and the runs that gave no measurement (RunError)."""

    runs: list[RunT] = field(default_factory=list)
    errors: list[RunError] = field(default_factory=list)


def take_turns(plan_id: str, repeat: int, targets: list[TargetT], measure: Callable[[TargetT, int], RunT],
               error_of: Callable[[RunT], str | None] = lambda run: None) -> list[Turns[RunT]]:
    """Measure every target once, then again, `repeat` times (drift touches them alike): each target's turns.

    A server that will not start, or a run whose `error_of` says why it measured nothing, is kept in the target's
    errors (the second kept in its runs as well); the turns go on.
    """
    turns: list[Turns[RunT]] = [Turns() for _ in targets]
    for repetition in range(repeat):
        for target, turn in zip(targets, turns):
            print(f"{plan_id}: {target.label}, run {repetition + 1}/{repeat}", flush=True)
            try:
                run = measure(target, repetition)
            except processes.ServerStartError as error:
                print(f"  server failed: {error}", file=sys.stderr, flush=True)
                turn.errors.append(RunError(repetition=repetition, error=str(error)))
                continue
            error = error_of(run)
            if error is not None:
                turn.errors.append(RunError(repetition=repetition, error=error))
            turn.runs.append(run)
    return turns


def run_restart(catalogue: Catalogue, quick: bool, design_names: list[str] | None,
                out_dir: Path | None, plan_path: Path = PLAN_PATH) -> tuple[Path, RestartRecord]:
    """Every target (or those of the named designs); write the record; return its path and it."""
    plan = load_plan(plan_path, quick=quick, catalogue=catalogue)
    targets = [target for target in plan.targets if not design_names or target.design in design_names]
    if design_names:
        for name in design_names:
            catalogue.design(name)  # unknown name: UnknownNameError, exit 2
    pinning = processes.cpu_pinning()
    started = utc_now()
    log_dir = launcher.LOG_DIR / "restart"

    def measure(target: RestartPlanTarget, repetition: int) -> RestartRun:
        run = measure_target(catalogue, plan, target, processes.free_port(), log_dir, pinning, repetition)
        print(f"  {run.report.failed} failed of {run.report.requests}", flush=True)
        return run

    turns = take_turns(plan.id, plan.repeat, targets, measure)
    rows = [RestartTarget(name=target.design, title=catalogue.design(target.design).title, method=target.method,
                          signal=target.signal, label=target.label, source=target.source, runs=turn.runs,
                          errors=turn.errors) for target, turn in zip(targets, turns)]
    record = RestartRecord(
        kind="restart",
        scenario=RestartScenario(id=plan.id, title=plan.title, rate=plan.rate, seconds=plan.seconds, delay=plan.delay,
                                 restarts=plan.restarts, every=plan.every, moments=plan.moments(),
                                 repeat=plan.repeat, bin_seconds=BIN_SECONDS, quick=quick),
        environment=describe_machine(pinning, {"http_load.py": "ours (scripts/http_load.py)"}),
        started_utc=started, finished_utc=utc_now(), targets=rows)
    path = record_path(f"{MULTI_PROCESS_DIR_NAME}/{plan.id}.json", quick or bool(design_names), out_dir)
    write_record_atomic(path, record)
    return path, record



# --- One restart with kept-alive connections idle and long requests in flight (the [in_flight] table) ---

PROBE = REPO_ROOT / "scripts" / "harness" / "clients" / "restart_probe.py"


def load_in_flight_plan(path: Path = PLAN_PATH, quick: bool = False,
                        catalogue: Catalogue | None = None) -> InFlightPlan:
    """Read and check the [in_flight] table: unknown keys, unknown designs, bad signals are errors naming the file."""
    table = read_toml(path).get("in_flight")  # a TOML table, read through InFlightPlan below
    if table is None:
        raise RestartPlanError(f"{path}: no [in_flight] table")
    plan = read_plan_table(path, table, InFlightPlan, quick, "[in_flight]")
    for target in plan.targets:
        if not hasattr(signal.Signals, target.signal):
            raise RestartPlanError(f"{path}: in_flight target {target.design!r} needs a signal name, "
                                   f"got {target.signal!r}")
        check_design(target.design, catalogue)
    if plan.restart_after >= plan.delay:
        raise RestartPlanError(f"{path}: [in_flight] restart_after ({plan.restart_after:g} s) must fall while the "
                               f"long requests ({plan.delay:g} s) are in flight")
    return plan


def probe_command(port: int, plan: InFlightPlan) -> list[str]:
    return [sys.executable, str(PROBE), "--port", str(port), "--idle", str(plan.idle), "--long", str(plan.long),
            "--restart-after", f"{plan.restart_after:g}", "--next-after", *(f"{value:g}" for value in plan.next_after)]


def read_line(stream: Any, timeout: float) -> str:
    """One line from a pipe, or '' when none came within `timeout` (the probe died or hangs)."""
    readable, _, _ = select.select([stream], [], [], timeout)
    return stream.readline() if readable else ""


def measure_in_flight(catalogue: Catalogue, plan: InFlightPlan, target: InFlightPlanTarget, port: int, log_dir: Path,
                      pinning: processes.CpuPinning, repetition: int = 0) -> InFlightRun:
    """One run: start the design, let the probe open its connections, restart at its line, record what it saw."""
    design = catalogue.design(target.design)
    workdir = log_dir / f"{design.name}-in-flight" / f"repetition-{repetition}"
    workdir.mkdir(parents=True, exist_ok=True)
    command = probe_command(port, plan)
    pinned_probe = processes.pinned(command, pinning.load)
    signal_lag_s, report, error = None, None, None
    with launcher.running_design(design, port, plan.delay, workdir, cpu=pinning.server,
                                 extra_arguments=target.arguments) as server:
        print(f"  server: {' '.join(server.command)}\n  probe:  {' '.join(pinned_probe)}", flush=True)
        with started_client(command, pinning.load, workdir) as client:
            assert client.stdout is not None
            line = read_line(client.stdout, plan.delay + 30)
            if not line.startswith("restart "):
                error = f"the probe never reached the restart: {line!r}"
            else:
                os.kill(server.process.pid, signal.Signals[target.signal])
                signal_lag_s = round(time.perf_counter() - float(line.split()[1]), 4)
                try:
                    stdout, _ = client.communicate(timeout=2 * plan.delay + max(plan.next_after) + 60)
                    report = ProbeReport.from_json(json.loads(stdout), "restart_probe.py's report")
                except (subprocess.TimeoutExpired, json.JSONDecodeError) as problem:
                    error = f"the probe gave no report: {problem}"
        alive_at_end = server.alive()
    return InFlightRun(repetition=repetition, probe_command=pinned_probe, server_command=server.command,
                       signal_lag_s=signal_lag_s, report=report, error=error, alive_at_end=alive_at_end,
                       exit_code=server.exit_code, stderr_tail=server.stderr_tail()[-800:])


def run_restart_in_flight(catalogue: Catalogue, quick: bool, design_names: list[str] | None,
                          out_dir: Path | None, plan_path: Path = PLAN_PATH) -> tuple[Path, InFlightRecord]:
    """Every [in_flight] target `repeat` times, taking turns; write the record; return its path and it."""
    plan = load_in_flight_plan(plan_path, quick=quick, catalogue=catalogue)
    for name in design_names or []:
        catalogue.design(name)  # unknown name: UnknownNameError, exit 2
    targets = [target for target in plan.targets if not design_names or target.design in design_names]
    pinning = processes.cpu_pinning()
    started = utc_now()
    log_dir = launcher.LOG_DIR / plan.id
    turns = take_turns(plan.id, plan.repeat, targets, lambda target, repetition: measure_in_flight(
        catalogue, plan, target, processes.free_port(), log_dir, pinning, repetition), lambda run: run.error)
    rows = [InFlightTarget(name=target.design, title=catalogue.design(target.design).title, signal=target.signal,
                           arguments=target.arguments, label=target.label, source=target.source, runs=turn.runs,
                           errors=turn.errors) for target, turn in zip(targets, turns)]
    record = InFlightRecord(
        kind="restart-in-flight",
        scenario=InFlightScenario(id=plan.id, title=plan.title, delay=plan.delay, idle=plan.idle, long=plan.long,
                                  restart_after=plan.restart_after, next_after=plan.next_after, repeat=plan.repeat,
                                  quick=quick),
        environment=describe_machine(
            pinning, {"restart_probe.py": "ours (scripts/harness/clients/restart_probe.py)"}),
        started_utc=started, finished_utc=utc_now(), targets=rows)
    path = record_path(f"{MULTI_PROCESS_DIR_NAME}/{plan.id}.json", quick or bool(design_names), out_dir)
    write_record_atomic(path, record)
    return path, record


def problems(record: RestartRecord | InFlightRecord) -> int:
    """Targets' problems: a server that would not start, a client that ran out of time (restart only). Failed requests
    are the measurement (the naive restart is expected to lose some), not a problem."""
    if isinstance(record, InFlightRecord):
        return sum(len(row.errors) for row in record.targets)
    return sum(len(row.errors) + sum(1 for run in row.runs if run.report.timed_out) for row in record.targets)


@dataclass(frozen=True)
class Plan:
    """`bench.py restart`: the restarts under load, or the one restart with requests in flight (restart.toml's
    [in_flight]); only these designs' targets (None: all), quick or full, where the record goes."""

    designs: tuple[str, ...] | None = None
    quick: bool = False
    in_flight: bool = False
    out: Path | None = None  # default: results/ for a full run of every target, build/results/ otherwise
    plan_path: Path = PLAN_PATH  # the targets, as data


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, RestartRecord | InFlightRecord]:
    """Every target (or the named designs'), taking turns; the record written atomically, its path and it."""
    run = run_restart_in_flight if plan.in_flight else run_restart
    return run(catalogue, plan.quick, list(plan.designs) if plan.designs else None, plan.out, plan.plan_path)
