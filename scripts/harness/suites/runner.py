"""Measure a scenario: for each design, start it, verify it, load it, stop it, record.

Order of a cell: start the server (pinned to one CPU) -> wait until it listens ->
verify its answer (a wrong answer is recorded as failed, never measured) -> prime
it with a few requests -> warm it up (the scenario's `warm_up`: the same load for a
few seconds, not counted) -> run the load tool (pinned to the other CPU) -> check it
is still alive and the run lasted long enough (a run under settings.MIN_RUN_SECONDS,
outside a `fixed_count` experiment, is an error: never a number) -> stop it (SIGTERM
to the process group) and record its exit code.
Repetitions alternate the order of designs, so slow drift of the machine does not
always favour the same design. A scenario with `database = true` runs inside a scratch
PostgreSQL (system/postgres.py), started before its first cell and stopped after its last;
every design gets its DSN, which those whose command takes `{database}` use. The record is
written once, atomically,
after the last cell: an interrupted run leaves the previous record untouched.

Starting a design is launcher.py's job, ports and TIME_WAIT are ports.py's, the
plan and the progress lines plan.py's, the checks before measuring verify.py's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.clients import pipelining as pipelining_check
from harness.clients import verify
from harness.clients.tools import ToolMissingError, require_tool
from harness.model.catalogue import Catalogue, Design, Scenario
from harness.model.records import record_path, write_record_atomic
from harness.model.records.common import Environment
from harness.model.records.scenario_record import (DatabaseRun, Interpreter, Outcome, Run, RunnerExtras,
                                                   ScenarioRecord)
from harness.model.settings import MIN_RUN_SECONDS, ScenarioSettings
from harness.suites import plan
from harness.system import gil_report, launcher, ports, postgres, processes, syscall_trace
from harness.system.environment import describe_machine, utc_now
from harness.system.resources import GroupSampler


@dataclass
class DesignOutcome:
    """What one design did across the whole scenario."""

    design: Design
    status: str = "ok"
    problems: list[str] = field(default_factory=list)
    stderr_tail: str = ""
    server_exit_codes: list[int | None] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)  # each checked against the record's Run as it is added
    verified: dict[str, Any] = field(default_factory=dict)  # what the checks before measuring proved

    def fail(self, problem: str, stderr_tail: str = "", status: str = "failed") -> None:
        """Record a failure ("failed"), or a refusal ("refused": it cannot do what the scenario asks)."""
        self.status = status
        self.problems.append(problem)
        self.stderr_tail = stderr_tail or self.stderr_tail

    def to_outcome(self, **extra: Any) -> Outcome:
        """The record's typed outcome."""
        return Outcome(name=self.design.name, title=self.design.title, model=self.design.model,
                       reproduces=self.design.reproduces, status=self.status, problems=self.problems,
                       verified=self.verified, stderr_tail=self.stderr_tail,
                       server_exit_codes=self.server_exit_codes,
                       runs=self.runs, **extra)


def announce(role: str, command: list[str]) -> None:
    """Print a command line as it runs (as vmbench does), so any cell can be re-run by hand."""
    print(f"    {role}: {shlex.join(command)}", file=sys.stderr, flush=True)


def warm_up_run(tool: Any, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
                load_cpu: str | None) -> dict[str, Any] | None:
    """The scenario's `warm_up`: the same load for that many seconds, not counted; what ran and its rate."""
    seconds = settings.warm_up
    if not seconds:
        return None
    warm_settings = dataclasses.replace(settings, time_limit=seconds)
    announce("warm-up", processes.pinned(tool.command(url, concurrency, warm_settings, workdir / "warm-up"), load_cpu))
    run = tool.run(url, concurrency, warm_settings, workdir / "warm-up", load_cpu)
    return {"seconds": seconds, "command": processes.pinned(run["command"], load_cpu) if run.get("command") else None,
            "requests_per_second": run.get("requests_per_second"), "failed": run.get("failed"),
            "error": run.get("error")}


def too_short(run: dict[str, Any], settings: ScenarioSettings) -> str | None:
    """Why a measured run is too short to be a number (under MIN_RUN_SECONDS), or None.

    An article's fixed-count experiment (`fixed_count`) ends at its count however soon; a run that
    answered nothing is left as it is (its failures are the finding).
    """
    duration = run.get("duration_s")
    if settings.fixed_count or not run.get("complete") or duration is None or duration >= MIN_RUN_SECONDS:
        return None
    return (f"the run lasted {duration:.2f} s ({run['complete']:,} requests), under the {MIN_RUN_SECONDS:g} s a "
            "measured run needs (scripts/catalogue/README.md: runs of at least 1 s)")


def measure_design_once(outcome: DesignOutcome, scenario: Scenario, settings: ScenarioSettings, repetition: int,
                        tool: Any, pinning: processes.CpuPinning, progress: plan.Progress,
                        database: str | None = None) -> None:
    """Start one design, verify it, run every concurrency level once, stop it."""
    design = outcome.design
    keep_alive, pipelining = bool(settings.keep_alive), bool(settings.pipelining)
    refused = verify.refusal(design, f"scenario {scenario.id!r}", keep_alive, pipelining)
    if refused:  # its catalogue entry says it cannot: not even started
        outcome.fail(refused, status="refused")
        return
    port = ports.run_port("server", design)
    log_dir = launcher.LOG_DIR / scenario.id / design.name / f"repetition-{repetition}"
    try:
        with launcher.running_design(design, port, settings.delay, log_dir, cpu=pinning.server,
                                     work=settings.work, python=settings.python,
                                     database=database,
                                     extra_arguments=settings.server_arguments) as server, \
                contextlib.ExitStack() as front:
            commands = {"server_command": server.command}
            target = server
            if settings.proxy:
                target = front.enter_context(launcher.reverse_proxy(settings.proxy, server.port, log_dir,
                                                                    pinning.server))
                commands["proxy_command"] = target.command
            if settings.network_delay_ms:  # a slow network path between the tool and the design
                target = front.enter_context(launcher.delayed_path(target.port, settings.network_delay_ms,
                                                                   log_dir, pinning.load))
                commands["delay_proxy_command"] = target.command
            verification = verify.verify(design, target.host, target.port, keep_alive, pipelining,
                                         tool.keep_alive_version or "HTTP/1.1")
            if not verification.problems and (settings.pipeline_depth or 1) > 1:  # pipelined load: in order?
                verification.problems.extend(pipelining_check.verify_pipelining(target.host, target.port))
            if verification.problems:
                outcome.fail("; ".join(verification.problems) if verification.refused
                             else "verification failed: " + "; ".join(verification.problems),
                             server.stderr_tail(), status="refused" if verification.refused else "failed")
                return
            outcome.verified = verification.proven
            url = f"http://{target.host}:{target.port}{settings.path}"
            for label, concurrency, overrides in plan.levels(settings):
                level_settings = dataclasses.replace(settings, **overrides)
                # Before every level, not once: a tool stopped by a time limit can leave requests queued
                # at a sequential server, which would otherwise be served during the next level.
                if design.kind in verify.HTTP_KINDS:
                    verify.prime(target.host, target.port, keep_alive)
                progress.step(f"{scenario.id}: {design.name} {label} repetition {repetition + 1}/{settings.repeat}")
                workdir = log_dir / label.replace("=", "")
                for role in ("server", "proxy", "delay_proxy"):  # under every cell's line: each cell can be re-run from its own
                    if f"{role}_command" in commands:
                        announce(role, commands[f"{role}_command"])
                warm_up = warm_up_run(tool, url, concurrency, level_settings, workdir, pinning.load)
                announce("load", processes.pinned(tool.command(url, concurrency, level_settings, workdir),
                                                  pinning.load))
                time_wait_before, overflows_before = ports.time_wait_sockets(), ports.time_wait_overflows()
                with GroupSampler(server.process.pid) as sampler:
                    run = tool.run(url, concurrency, level_settings, workdir, pinning.load)
                if level_settings.timeline and not run.get("error") and server.alive():
                    run["traced"] = traced_run(tool, url, concurrency, level_settings, workdir / "traced", pinning,
                                               server.process.pid)
                overflows_after = ports.time_wait_overflows()
                run.setdefault("requests_requested", level_settings.requests)  # an adapter may know better
                # Whether the server's processes held the GIL, asked inside them after the run (system/gil_report.py).
                gil = gil_report.read(launcher.gil_folder(log_dir))
                if gil is not None:
                    run["gil"] = gil
                # Exactly what ran: the tool's command as the shell sees it (pinned), and the server's.
                run.update(commands, load_command=processes.pinned(run["command"], pinning.load)
                           if run.get("command") else None)
                run.update(repetition=repetition, warm_up=warm_up, time_wait_before=time_wait_before,
                           time_wait_overflows=None if None in (overflows_before, overflows_after)
                           else overflows_after - overflows_before,
                           time_limit=level_settings.time_limit,
                           server_resources=sampler.summary(run.get("complete") or 0))
                short = None if run.get("error") else too_short(run, level_settings)
                if short:
                    run["error"] = short  # kept in the record, with its numbers; no table shows it as one
                # Typed now, not when the record is written: a key the record does not know stops the run at its
                # first cell (exit 3, a bug), instead of after every cell of the scenario has been measured.
                outcome.runs.append(Run.from_report(run, f"{design.name}.runs[{len(outcome.runs)}]"))
                if not server.alive():
                    outcome.fail(f"server died during the run (exit code {server.process.returncode})",
                                 server.stderr_tail())
                    return
                if short:
                    outcome.fail(f"at {label}: {short}")
                    return
                if run.get("error"):
                    outcome.fail(f"load tool failed at c={concurrency}: {run['error']}", server.stderr_tail())
                    return
        outcome.server_exit_codes.append(server.exit_code)
        if server.exit_code != 0:
            outcome.fail(f"server exited with code {server.exit_code} on {design.stop_signal.name} (expected 0)",
                         server.stderr_tail())
    except processes.ServerStartError as error:
        outcome.fail(f"server did not start: {error.args[0].splitlines()[0]}", error.stderr_tail)
    except (launcher.InterpreterMissingError, launcher.DatabaseMissingError,
            syscall_trace.TraceAttachError) as error:  # recorded; the run goes on
        outcome.fail(str(error))


# What a traced run keeps: its timeline with the server's moments, and enough to see how much slower it was.
TRACED_KEYS = ("timeline", "server_trace", "clock_start_unix_s", "complete", "failed", "requests_per_second",
               "latency_ms", "duration_s", "error")


def traced_run(tool: Any, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
               pinning: processes.CpuPinning, pgid: int) -> dict[str, Any]:
    """The same load once more, the server's system calls traced (system/syscall_trace.py): the timeline player's run.

    Apart from the measured run, because strace stops the server at every traced call: the record's rates and
    latencies stay the untraced run's, and this run's own say how much slower tracing made it."""
    with syscall_trace.SyscallTrace(processes.group_pids(pgid), workdir / "server.strace", pinning.server) as trace:
        traced = tool.run(url, concurrency, settings, workdir, pinning.load)
    syscall_trace.add_to_timeline(traced, trace.connections(), trace.command)
    return {key: traced.get(key) for key in TRACED_KEYS}


@dataclass(frozen=True)
class Plan:
    """`bench.py run`, one scenario: only these designs (None: the scenario's), quick or full, repetitions (None: the
    scenario's), where the record goes (None: results/ for a complete full run, build/results/ otherwise), and the
    progress shared by every scenario of the run (None: this scenario's own)."""

    scenario: Scenario
    designs: tuple[str, ...] | None = None
    quick: bool = False
    repeat: int | None = None
    out: Path | None = None
    progress: plan.Progress | None = None


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, ScenarioRecord]:
    """Every cell of the scenario (run_scenario); the record written atomically, its path and it."""
    return run_scenario(catalogue, plan.scenario, list(plan.designs) if plan.designs is not None else None,
                        plan.quick, plan.repeat, plan.out, plan.progress)


def run_scenario(catalogue: Catalogue, scenario: Scenario, design_names: list[str] | None, quick: bool,
                 repeat: int | None, out_dir: Path | None,
                 progress: plan.Progress | None = None) -> tuple[Path, ScenarioRecord]:
    """Run every cell of a scenario and write its record; returns the path and the record."""
    settings = plan.scenario_settings(scenario, quick, repeat)
    designs = [catalogue.design(name) for name in (design_names or scenario.design_names(quick))]
    tool = require_tool(scenario.tool)
    if settings.timeline:  # the server's side of a timeline is traced (system/syscall_trace.py)
        try:
            syscall_trace.strace_path()
        except syscall_trace.StraceMissingError as error:
            raise ToolMissingError(str(error)) from error
    pinning = processes.cpu_pinning(server_on_every_cpu=settings.server_cpus == "all")
    environment = describe_machine(pinning, {tool.name: tool.version()})
    outcomes = {design.name: DesignOutcome(design) for design in designs}
    ceiling = DesignOutcome(catalogue.design(settings.ceiling)) if settings.ceiling else None
    progress = progress or plan.Progress(plan.plan_cells(settings, designs, ceiling is not None))
    started = utc_now()
    with contextlib.ExitStack() as stack:
        cluster = (stack.enter_context(postgres.scratch_cluster(cpu=pinning.server)) if settings.database
                   else None)
        measure_all(catalogue, scenario, designs, outcomes, ceiling, settings, quick, tool, pinning, progress,
                    cluster.dsn if cluster else None)
    # exactly how the database ran: its version's programs and every changed setting
    record = scenario_record(scenario, quick, settings, environment, started,
                             [outcomes[design.name] for design in designs], ceiling,
                             database_command=cluster.command if cluster is not None else None,
                             database=database_run(cluster) if cluster is not None else None)
    return write_record(record, quick or design_names is not None or repeat is not None, out_dir), record


# Two CPUs, no third: PostgreSQL goes on the server's. The load tool keeps its CPU to itself, as when its ceiling
# was measured, and every cycle the database spends for a design (a backend forked per connection included) is
# charged to that design's CPU, as on a small machine that runs both.
DATABASE_PLACEMENT = ("pinned with the server (taskset): PostgreSQL and its backends share the server's CPU; the load "
                      "tool has the other CPU to itself")


def database_run(cluster: postgres.ScratchCluster) -> DatabaseRun:
    """What the record says of the scratch PostgreSQL: its version, where it ran, how designs logged in."""
    return DatabaseRun(version=cluster.version, cpu=cluster.cpu, placement=DATABASE_PLACEMENT if cluster.cpu else
                       "not pinned: PostgreSQL shared every CPU with the server and the load tool (fewer than 2 CPUs "
                       "or no taskset)", authentication=postgres.AUTHENTICATION)


def scenario_record(scenario: Scenario, quick: bool, settings: ScenarioSettings, environment: Environment,
                    started: str, outcomes: list[DesignOutcome], ceiling: DesignOutcome | None,
                    ceiling_measured_in: str | None = None, **extra: Any) -> ScenarioRecord:
    """A scenario's record: what ran, where, when, and every design's runs (finished now). `extra`: the record's
    optional parts (database_command, interleaved_with); the exact CPython is asked here when the scenario chose one."""
    return ScenarioRecord(
        scenario=scenario,
        mode="quick" if quick else "full",
        settings=settings,
        environment=environment,
        started_utc=started,
        finished_utc=utc_now(),
        designs=[outcome.to_outcome() for outcome in outcomes],
        ceiling=None if ceiling is None else ceiling.to_outcome(delay=0.0, measured_in=ceiling_measured_in),
        interpreter=(Interpreter.from_json(launcher.describe_interpreter(settings.python), "interpreter")
                     if settings.python else None),
        **extra)


def write_record(record: ScenarioRecord, partial: bool, out_dir: Path | None) -> Path:
    """Write a record atomically: to out_dir, else results/ for a complete full run, build/results/ otherwise."""
    path = record_path(f"{record.id}.json", record.mode != "full" or partial, out_dir)
    write_record_atomic(path, record)
    return path


def measure_all(catalogue: Catalogue, scenario: Scenario, designs: list[Design], outcomes: dict[str, DesignOutcome],
                ceiling: DesignOutcome | None, settings: ScenarioSettings, quick: bool, tool: Any,
                pinning: processes.CpuPinning, progress: plan.Progress, database: str | None) -> None:
    """The tool's ceiling first (if any), then every design, repetition by repetition, in alternating order."""
    if ceiling is not None:
        # The tool's ceiling: the fastest server we have, with no simulated call, same tool and parameters. After the
        # same TIME_WAIT drain as every design's cell: measured first, it could otherwise pay for connections the
        # scenario before it left behind (the hello sweep's single ceiling run read 11,655 req/s at 50 clients, its own
        # NGINX rows 20,167; model/limits.ceilings takes the higher of the two).
        if not quick:
            ports.wait_for_time_wait_drain()
        measure_design_once(ceiling, scenario, dataclasses.replace(settings, delay=0.0, work=0), 0, tool, pinning,
                            progress)
    for repetition in range(settings.repeat):
        order = designs if repetition % 2 == 0 else list(reversed(designs))
        for design in order:
            outcome = outcomes[design.name]
            for size in plan.sizes(settings, design):  # [None] unless a sizing sweep restarts it once per count
                if outcome.status != "ok":
                    progress.skip(len(plan.levels(settings)))  # skipped cells still count as done
                    continue
                if not quick:  # a quick run trades this care for time
                    ports.wait_for_time_wait_drain()
                cells_before = progress.done
                measure_sized(outcome, size, scenario, plan.design_settings(settings, design), repetition, tool,
                              pinning, progress, database)
                # A design that failed part-way leaves the rest of its levels unrun: count them as done.
                progress.skip(len(plan.levels(settings)) - (progress.done - cells_before))


def measure_sized(outcome: DesignOutcome, size: int | None, scenario: Scenario, settings: ScenarioSettings,
                  repetition: int, tool: Any, pinning: processes.CpuPinning, progress: plan.Progress,
                  database: str | None) -> None:
    """measure_design_once at one count of a sizing sweep: its runs say their `size`, and join the design's."""
    if size is None:
        measure_design_once(outcome, scenario, settings, repetition, tool, pinning, progress, database)
        return
    sized = DesignOutcome(plan.sized_design(settings, outcome.design, size))
    measure_design_once(sized, scenario, settings, repetition, tool, pinning, progress, database)
    outcome.runs += [dataclasses.replace(run, runner=dataclasses.replace(run.runner or RunnerExtras(), size=size))
                     for run in sized.runs]
    outcome.server_exit_codes += sized.server_exit_codes
    outcome.verified = sized.verified or outcome.verified
    for problem in sized.problems:
        outcome.fail(f"at size {size}: {problem}", sized.stderr_tail, status=sized.status)
