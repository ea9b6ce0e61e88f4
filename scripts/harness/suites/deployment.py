"""Deploying it, measured: the idle-timeout race behind nginx, and servers past their capacity.

Both read scripts/catalogue/17-deployment.toml (`[race]` and `[overload]`) and write one record
each (results/deployment/proxy-race.json and overload.json), atomically, after the last run.

race: for each target, a run per method with the server's keep-alive timeout at its default,
and a POST run with the fix (its timeout above nginx's 60 s); each run starts the design pinned
to the server's CPU, nginx with upstream keep-alive in front of it on the same CPU, and
scripts/harness/clients/idle_race.py on the other CPU: users on kept connections, each idle
between requests for a time drawn across the server's timeout, for the plan's duration. The
record keeps every answer by status and by the lull before it, and the 502s per 10,000 requests.

overload: for each target (a design and the arguments that set its admission control), one
server and vegeta (clients/tools/vegeta.py) at each multiple of the capacity in turn, the last
multiple back at half, back to back: each rate starts when the one before has sent its last
request, whatever is still in flight (a queue left by the rate before meets the next one). The
record keeps each rate's answers by status, latency of every answer and of the 2xx answers
alone, how late vegeta ran against its schedule, and the run's timeline: second by second, what
was sent, served and refused, the 2xx answers' p50 and p99, and the most requests in flight
(sent, not yet answered). The tool's ceiling is nginx at the highest rate, measured first.

Known limits: one run per cell (a race is counted over many requests; an overload run is a
picture of a queue growing); the 502s are counted at the client, the only place they are seen.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from harness.clients import idle_race
from harness.clients.tools import require_tool, vegeta
from harness.model.catalogue import CATALOGUE_DIR, Catalogue
from harness.model.deployment_plan import OverloadPlan, RaceCause, RacePlan
from harness.model.paths import REPO_ROOT
from harness.model.records import RESULTS_DIR, SCRATCH_RESULTS_DIR, write_record_atomic
from harness.model.records.deployment_records import (
    PER,
    CauseRun,
    DeploymentScenario,
    OverloadCell,
    OverloadRecord,
    OverloadRun,
    RaceRecord,
    RaceResult,
    RaceRun,
    TimelinePoint,
)
from harness.model.typed import RecordShapeError, Typed
from harness.model.settings import ScenarioSettings
from harness.system import launcher, ports, processes
from harness.system.environment import describe_machine, utc_now

PLAN_PATH = CATALOGUE_DIR / "17-deployment.toml"
IDLE_RACE = REPO_ROOT / "scripts" / "harness" / "clients" / "idle_race.py"
RECORD_DIR = RESULTS_DIR / "deployment"  # beside, not among, the scenario records of results/
PlanT = TypeVar("PlanT", RacePlan, OverloadPlan)


class DeploymentPlanError(ValueError):
    """17-deployment.toml is wrong: bad input (exit 2); the message names the file and the key."""


@dataclass(frozen=True)
class Target:
    design: str
    arguments: list[str]  # what the run adds to the design's command
    label: str  # "defaults", "fix", or the admission control it sets
    method: str = "GET"
    timeout_s: float = 0.0
    source: str = ""


def read_section(name: str, kind: type[PlanT], quick: bool, path: Path = PLAN_PATH,
                 error_type: type[ValueError] = DeploymentPlanError) -> PlanT:
    """One table of the plan, typed, with its `quick` overrides applied when asked; DeploymentPlanError (or
    `error_type`, for another plan read the same way) naming the file and the key for a key the table's class does
    not know, a value of the wrong type, or a missing setting."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise error_type(f"{path}: {error}") from error
    if name not in data:
        raise error_type(f"{path}: no [{name}] table")
    section = dict(data[name])
    overrides = section.pop("quick", {})
    unknown = sorted(set(overrides) - set(section))
    if unknown:
        raise error_type(f"{path}: [{name}.quick] sets {', '.join(unknown)}, which [{name}] does not have")
    try:
        return kind.from_json({**section, **overrides} if quick else section, f"{path} [{name}]")
    except RecordShapeError as error:
        raise error_type(str(error)) from error


def race_targets(plan: RacePlan, catalogue: Catalogue) -> list[Target]:
    """Every server's runs: each method at its defaults, then POST with the fix."""
    targets = []
    for entry in plan.target:
        catalogue.design(entry.design)  # unknown: UnknownNameError, exit 2
        common = {"design": entry.design, "timeout_s": float(entry.timeout_s), "source": entry.source}
        targets += [Target(arguments=entry.defaults, label="defaults", method=method, **common)
                    for method in (plan.methods if entry.methods is None else entry.methods)]
        targets.append(Target(arguments=entry.fix, label="fix", method="POST", **common))
    return targets


def race_command(port: int, target: Target, plan: RacePlan) -> list[str]:
    """The race's load: users on kept connections, each idle between requests for a draw across the timeout."""
    low, high = target.timeout_s * (1 - plan.idle_spread), target.timeout_s * (1 + plan.idle_spread)
    return [sys.executable, str(IDLE_RACE), "--port", str(port), "--gap", f"{target.timeout_s:g}",
            "--users", str(plan.users), "--duration", f"{plan.duration_s:g}", "--idle-min", f"{low:g}",
            "--idle-max", f"{high:g}", "--method", target.method, "--path", plan.path]


@contextlib.contextmanager
def proxied(catalogue: Catalogue, target: Target, delay: float, log_dir: Path, proxy: str | None,
            cpu: str | None) -> Iterator[tuple[processes.RunningServer, processes.RunningServer | None]]:
    """The design (with the target's arguments) and, when asked, nginx in front of it; both stopped on exit."""
    design = catalogue.design(target.design)
    with launcher.running_design(design, ports.run_port("server", design), delay, log_dir, cpu=cpu,
                                 extra_arguments=target.arguments) as server, contextlib.ExitStack() as stack:
        front = stack.enter_context(launcher.reverse_proxy(proxy, server.port, log_dir, cpu)) if proxy else None
        yield server, front


def race_run(catalogue: Catalogue, target: Target, plan: RacePlan, log_dir: Path,
             pinning: processes.CpuPinning) -> RaceRun:
    """One run of the race: the design behind nginx, the bursts, every answer counted."""
    with proxied(catalogue, target, 0.0, log_dir, plan.proxy, pinning.server) as (server, proxy):
        assert proxy is not None
        command = race_command(proxy.port, target, plan)
        load_command = processes.pinned(command, pinning.load)
        print(f"  server: {' '.join(server.command)}\n  load:   {' '.join(load_command)}", flush=True)
        timeout = plan.duration_s + idle_race.READ_TIMEOUT_S + 60
        completed = processes.run_tool(command, timeout=timeout, cpu=pinning.load, cwd=REPO_ROOT)
        server_alive = server.alive()
    run = RaceRun(design=target.design, label=target.label, method=target.method, arguments=target.arguments,
                  timeout_s=target.timeout_s, source=target.source, server_command=server.command,
                  proxy_command=proxy.command, load_command=load_command, server_alive=server_alive,
                  exit_code=server.exit_code)
    try:
        result = RaceResult.from_json(json.loads(completed.stdout), "idle_race.py's report")
    except (json.JSONDecodeError, RecordShapeError) as error:
        reason = completed.stderr.strip()[-400:] or str(error)
        return replace(run, error=f"the race client printed no report: {reason}")
    bad_gateway = result.answers(502)
    per_10k = round(bad_gateway * PER / result.sent, 1) if result.sent else None
    print(f"  {bad_gateway} of {result.sent} got 502 ({per_10k} per {PER:,})", flush=True)
    return replace(run, result=result, bad_gateway_per_10k=per_10k)


def cause_run(catalogue: Catalogue, cause: RaceCause, plan: RacePlan, pinning: processes.CpuPinning) -> CauseRun:
    """Another cause of 502: the server behind the same nginx, `requests` GETs one after another, each one's status."""
    target = Target(design=cause.design, arguments=cause.arguments, label=cause.id)
    log_dir = launcher.LOG_DIR / plan.id / f"cause-{cause.id}"
    run = CauseRun(id=cause.id, cause=cause.cause, design=cause.design, arguments=cause.arguments, delay=cause.delay)
    statuses, seconds = [], []
    try:
        with proxied(catalogue, target, cause.delay, log_dir, plan.proxy, pinning.server) as (server, proxy):
            assert proxy is not None
            print(f"  server: {' '.join(server.command)}", flush=True)
            for _ in range(cause.requests):
                began = time.monotonic()
                statuses.append(ask_once(proxy.port, cause.delay + CAUSE_SLACK_S))
                seconds.append(round(time.monotonic() - began, 3))
            command = server.command
    except processes.ServerStartError as error:
        return replace(run, error=str(error))
    print(f"  {cause.id}: statuses {statuses}", flush=True)
    return replace(run, server_command=command, statuses=statuses, seconds=seconds)


CAUSE_SLACK_S = 30.0  # a cause's request waits this long past its call for an answer


def ask_once(port: int, timeout: float) -> int:
    """One GET / through nginx on a new connection: the status, or 0 when none came."""
    connection = http.client.HTTPConnection(processes.LOOPBACK, port, timeout=timeout)
    try:
        connection.request("GET", "/")
        answer = connection.getresponse()
        answer.read()
        return answer.status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        connection.close()


def run_race(catalogue: Catalogue, quick: bool, design_names: list[str] | None,
             out_dir: Path | None) -> tuple[Path, RaceRecord]:
    """Every race target (or the named designs'); write results/proxy-race.json; return its path and it."""
    plan = read_section("race", RacePlan, quick)
    targets = [t for t in race_targets(plan, catalogue) if not design_names or t.design in design_names]
    pinning = processes.cpu_pinning()
    started, runs = utc_now(), []
    for target in targets:
        print(f"{plan.id}: {target.design} {target.label} {target.method}", flush=True)
        log_dir = launcher.LOG_DIR / plan.id / f"{target.design}-{target.label}-{target.method}"
        try:
            run = race_run(catalogue, target, plan, log_dir, pinning)
        except processes.ServerStartError as error:  # recorded; the next target still runs
            run = RaceRun(design=target.design, label=target.label, method=target.method, error=str(error))
        runs.append(run)
    causes = []
    for cause in plan.cause if not design_names else [c for c in plan.cause if c.design in design_names]:
        print(f"{plan.id}: cause {cause.id} ({cause.design} {' '.join(cause.arguments)})", flush=True)
        causes.append(cause_run(catalogue, cause, plan, pinning))
    record = RaceRecord(kind="proxy-race", scenario=DeploymentScenario(id=plan.id, title=plan.title),
                        mode="quick" if quick else "full", settings=plan.settings(),
                        environment=describe_machine(pinning, {"nginx": nginx_version()}),
                        started_utc=started, finished_utc=utc_now(), runs=runs, causes=causes or None)
    return write_record(record, plan.id, quick or bool(design_names), out_dir), record


def overload_targets(plan: OverloadPlan, catalogue: Catalogue) -> list[Target]:
    """The servers past capacity, each with the arguments that set its admission control."""
    targets = []
    for entry in plan.target:
        catalogue.design(entry.design)
        targets.append(Target(design=entry.design, arguments=entry.arguments, label=entry.admission))
    return targets


def overload_run(catalogue: Catalogue, target: Target, plan: OverloadPlan, log_dir: Path,
                 pinning: processes.CpuPinning, rates: list[float], delay: float) -> OverloadRun:
    """One server through every rate back to back (the same process: does it recover when the load drops?).

    Each rate's vegeta starts when the one before has sent its last request, not when its last answer came: the
    requests still queued from the rate before meet the next rate's, as they would in service."""
    tool = require_tool("vegeta")
    error = None
    started: list[tuple[float, float | None, Path, Future[dict[str, Any]]]] = []
    with proxied(catalogue, target, delay, log_dir, None, pinning.server) as (server, _), \
            ThreadPoolExecutor(max_workers=len(rates)) as pool:
        url = f"http://{server.host}:{server.port}/"
        start = time.monotonic()
        for index, rate in enumerate(rates):
            settings = ScenarioSettings.for_tool(plan.schedule_seconds, plan.max_in_flight, rate=rate,
                                                 schedule_seconds=plan.schedule_seconds, timeout=plan.timeout)
            workdir = log_dir / f"{index}-rate{rate:g}"
            print(f"  rate {rate:g}/s: {' '.join(tool.command(url, plan.max_in_flight, settings, workdir))}",
                  flush=True)
            multiple = plan.multiples[index] if index < len(plan.multiples) else None
            started.append((rate, multiple, workdir,
                            pool.submit(tool.run, url, plan.max_in_flight, settings, workdir, pinning.load)))
            while time.monotonic() < start + (index + 1) * plan.schedule_seconds and server.alive():
                time.sleep(0.05)
            if not server.alive():
                error = f"the server died at {rate:g} requests/s: {server.stderr_tail()[-400:]}"
                break
        cells = [replace(OverloadCell.from_json(job.result(), f"vegeta's run of {target.design} at {rate:g}/s"),
                         multiple=multiple, load_command=processes.pinned(job.result()["command"], pinning.load))
                 for rate, multiple, _, job in started]
        server_alive = server.alive()
    return OverloadRun(design=target.design, arguments=target.arguments, admission=target.label, cells=cells,
                       server_command=server.command, error=error, server_alive=server_alive,
                       exit_code=server.exit_code, timeline=run_timeline([workdir for _, _, workdir, _ in started]))


def run_timeline(workdirs: list[Path]) -> list[TimelinePoint] | None:
    """Every rate's requests together, second by second from the first one sent (vegeta.timeline)."""
    rows = [row for workdir in workdirs if (workdir / "results.csv").exists()
            for row in vegeta.parse_csv((workdir / "results.csv").read_text())]
    if not rows:
        return None
    points = vegeta.timeline(rows, min(row["sent_ns"] for row in rows))
    return [TimelinePoint.from_json(point, "vegeta.timeline") for point in points]


def run_overload(catalogue: Catalogue, quick: bool, design_names: list[str] | None,
                 out_dir: Path | None) -> tuple[Path, OverloadRecord]:
    """nginx at the top rate (the tool's ceiling), then every target through the rates; write results/overload.json."""
    plan = read_section("overload", OverloadPlan, quick)
    rates = plan.rates
    targets = [t for t in overload_targets(plan, catalogue) if not design_names or t.design in design_names]
    pinning = processes.cpu_pinning()
    started = utc_now()
    ceiling_target = Target(design=plan.ceiling, arguments=[], label="the tool's ceiling")
    print(f"{plan.id}: ceiling {ceiling_target.design} at {max(rates):g}/s", flush=True)
    ceiling = overload_run(catalogue, ceiling_target, plan, launcher.LOG_DIR / plan.id / "ceiling",
                           pinning, [max(rates)], 0.0)
    runs = []
    for index, target in enumerate(targets):
        print(f"{plan.id}: {target.design} {' '.join(target.arguments)}", flush=True)
        log_dir = launcher.LOG_DIR / plan.id / f"{index}-{target.design}"
        try:
            run = overload_run(catalogue, target, plan, log_dir, pinning, rates, plan.delay)
        except processes.ServerStartError as error:
            run = OverloadRun(design=target.design, arguments=target.arguments, admission=target.label, cells=[],
                              error=str(error))
        runs.append(run)
    record = OverloadRecord(
        kind="overload", scenario=DeploymentScenario(id=plan.id, title=plan.title),
        mode="quick" if quick else "full", settings=plan.settings(),
        environment=describe_machine(pinning, {"vegeta": require_tool("vegeta").version()}),
        started_utc=started, finished_utc=utc_now(), ceiling=ceiling, runs=runs)
    return write_record(record, plan.id, quick or bool(design_names), out_dir), record


def problems(record: RaceRecord | OverloadRecord) -> int:
    """Runs with a problem (the record keeps why): a server that would not start or died, a load that failed."""
    if isinstance(record, RaceRecord):
        return (sum(bool(run.error) or not run.server_alive for run in record.runs)
                + sum(bool(cause.error) for cause in record.causes or []))
    return sum(bool(run.error) or any(cell.error for cell in run.cells) for run in record.runs)


def nginx_version() -> str:
    answer = processes.run_tool(["nginx", "-v"], timeout=10)
    return answer.stderr.strip().removeprefix("nginx version: ") or "nginx (version unknown)"


def write_record(record: Typed, record_id: str, partial: bool, out_dir: Path | None) -> Path:
    """results/deployment/<id>.json for a complete full run, build/results/ otherwise (or --out)."""
    path = (out_dir or (SCRATCH_RESULTS_DIR if partial else RECORD_DIR)) / f"{record_id}.json"
    write_record_atomic(path, record)
    return path


@dataclass(frozen=True)
class Plan:
    """`bench.py deployment race|overload`: which part, only these designs' targets (None: all), quick or full, where."""

    part: Literal["race", "overload"]
    designs: tuple[str, ...] | None = None
    quick: bool = False
    out: Path | None = None  # default: results/deployment/ for a complete full run, build/results/ otherwise


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, RaceRecord | OverloadRecord]:
    """The race or the overload run; the record written atomically, its path and it."""
    run = run_race if plan.part == "race" else run_overload
    return run(catalogue, plan.quick, list(plan.designs) if plan.designs else None, plan.out)
