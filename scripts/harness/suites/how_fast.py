"""How fast can Python go: measure every optimisation step of a design, and profile the fastest.

    python scripts/bench.py how-fast steps [--chain NAME] [--quick] [--repeat N] [--seconds S] [--reference NAME ...]
    python scripts/bench.py how-fast profile [--quick] [--seconds S] [--rate HZ]

`steps` rebuilds each step's server of a chain (model/how_fast_steps.py: `how-fast`,
the default, from servers/uvloop_protocol_keep_alive.py and scripts/how_fast/;
`fast-and-correct` from servers/fast_and_correct.py and scripts/fast_and_correct/),
and measures every step and the reference servers in one run, the same way: the
server alone on CPU 0 with no simulated call, checked with the HTTP contract, then
wrk with 50 keep-alive connections on CPU 1, the server's CPU time sampled
meanwhile. Repetitions alternate the order of the rows. The tool's ceiling is the
`peak` scenario's (the design it names is one of the rows), so the table flags the
rows within 80% of it as the peak table does. `profile` samples the fastest design
with py-spy (native frames included) while wrk loads it, and keeps the collapsed
stacks, wrk's numbers and the kernel's count of user and system time.

A full run writes the chain's record (results/how-fast/steps.json,
results/fast-and-correct/steps.json) or results/profiles/; --quick writes the same
files under build/results/ (shorter runs, one repetition). `python scripts/bench.py
render` turns them into the pages' tables and flame graph.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Literal

from harness.clients import probe, verify
from harness.clients.tools import ToolMissingError, require_tool
from harness.clients.tools.wrk import parse_run
from harness.model import how_fast_steps
from harness.model.catalogue import Catalogue, Design, UnknownNameError, load_catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records import RESULTS_DIR, SCRATCH_RESULTS_DIR, write_record_atomic
from harness.model.records.how_fast_records import (
    ProfileCommands,
    ProfileCpu,
    ProfileRecord,
    Saturation,
    StepsRecord,
    StepsRow,
    StepsRun,
    WrkSummary,
)
from harness.model.records.scenario_record import ServerResources
from harness.model.settings import ScenarioSettings
from harness.model.suite_settings import StepsSettings
from harness.system import launcher, processes
from harness.system.environment import describe_machine, utc_now
from harness.system.resources import CLOCK_TICKS, GroupSampler

CONNECTIONS = 50
DEFAULT_REFERENCES = {  # by chain: the `peak` scenario's rivals; fast and correct is about its share of nginx's rate
    how_fast_steps.HOW_FAST.name: ["nginx-keep-alive", "uvicorn-keep-alive", "granian-asgi"],
    how_fast_steps.FAST_AND_CORRECT.name: ["nginx-keep-alive"],
}
CEILING_SCENARIO = "peak"  # the steps are measured as this scenario measures, so its tool ceiling is theirs
# With production-shaped heads (--request-heads production), as this scenario measures: wrk's Lua builds every head.
CEILING_SCENARIO_BY_HEADS = {None: CEILING_SCENARIO, "production": "peak-production-heads"}


@dataclasses.dataclass(frozen=True)
class RunLength:
    """How long the steps are measured: seconds per run, runs per row (alternating the rows' order)."""

    seconds: float
    repeat: int


FULL = RunLength(seconds=4, repeat=4)  # nine rows: about 2.5 minutes in all
QUICK = RunLength(seconds=2, repeat=1)
PROFILE_SECONDS = {"full": 15, "quick": 3}
PROFILE_RATE_HZ = 250  # samples a second; py-spy unwinding native frames cannot keep up with 1,000


def results_root(quick: bool) -> Path:
    return SCRATCH_RESULTS_DIR if quick else RESULTS_DIR


def work_dir_for(chain: how_fast_steps.Chain) -> Path:
    """Where a chain's step files are written (build/how-fast/ for the how-fast chain, as before)."""
    return REPO_ROOT / "build" / chain.name


@dataclasses.dataclass
class PlannedRow:
    """A row being measured: the design its server starts from, and its runs and problems so far (row() is the
    record's row)."""

    name: str
    title: str
    step: int | None  # None: a reference server
    design: Design
    file: str | None = None  # a step's server file, from the repository's root
    runs: list[StepsRun] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    server_command: list[str] | None = None

    def row(self) -> StepsRow:
        return StepsRow(name=self.name, title=self.title, step=self.step, file=self.file,
                        stop_signal=self.design.stop_signal.name, runs=self.runs, problems=self.problems,
                        server_command=self.server_command)


def step_rows(chain: how_fast_steps.Chain, work_dir: Path) -> list[PlannedRow]:
    """One row per step: its server file written under work_dir, started as the chain's design's catalogue entry."""
    final = load_catalogue().design(chain.design_name)
    rows = []
    all_steps = chain.steps()
    for step in all_steps:
        path = work_dir / f"step-{step.number}-{step.name}.py"
        path.write_text(chain.step_source(step, all_steps=all_steps), encoding="utf-8")
        file = str(path.relative_to(REPO_ROOT))
        design = dataclasses.replace(final, name=f"step-{step.number}", title=step.name.replace("-", " "), file=file)
        rows.append(PlannedRow(name=design.name, title=design.title, step=step.number, design=design, file=file))
    return rows


def reference_rows(names: list[str], explicit: bool, work_dir: Path) -> list[PlannedRow]:
    """The reference servers, started by their catalogue entries; a default one missing is left out with a note."""
    catalogue = load_catalogue()
    rows = []
    for name in names:
        try:
            design = catalogue.design(name)
        except UnknownNameError:
            if explicit:
                raise
            print(f"note: reference {name!r} is not in the catalogue here; left out", file=sys.stderr)
            continue
        rows.append(PlannedRow(name=name, title=design.title, step=None, design=design))
    return rows


def measure_row(row: PlannedRow, seconds: int, pinning: processes.CpuPinning, log_dir: Path,
                request_heads: str | None = None) -> StepsRun:
    """Start the row's server, check its answer, prime it, run wrk once, stop it; the run (its `error` says what
    went wrong)."""
    tool = require_tool("wrk")
    port = processes.free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    design = row.design
    where = f"{row.name}: wrk's run"
    with launcher.running_design(design, port, 0.0, log_dir, cpu=pinning.server) as server:
        row.server_command = server.command
        problems = probe.verify_http(server.host, server.port)
        if problems:
            return failed_run("verification failed: " + "; ".join(problems))
        verify.prime(server.host, server.port)
        settings = ScenarioSettings.for_tool(seconds, CONNECTIONS, keep_alive=True, request_heads=request_heads)
        with GroupSampler(server.process.pid) as sampler:
            run = StepsRun.from_report(tool.run(f"http://{server.host}:{server.port}/", CONNECTIONS, settings,
                                                log_dir / "wrk", pinning.load), where)
        resources = ServerResources.from_json(sampler.summary(run.complete or 0), f"{where}: server resources")
    error = run.error
    if server.exit_code != 0 and not error:
        error = f"server exited with code {server.exit_code} after {design.stop_signal.name} (expected 0)"
    return dataclasses.replace(run, server_resources=resources, server_exit_code=server.exit_code, error=error)


def failed_run(error: str) -> StepsRun:
    """A run that did not happen: only its error (a row's problem, never one of its runs)."""
    return StepsRun(tool="wrk", command=None, concurrency=CONNECTIONS, keep_alive=True, exit_code=None, complete=None,
                    failed=None, requests_per_second=None, duration_s=None, latency_ms=None, error=error)


def ceiling_design() -> str:
    """The design whose rate is the tool's ceiling here: the one CEILING_SCENARIO names."""
    return load_catalogue().scenario(CEILING_SCENARIO).settings(quick=False).ceiling or ""


def with_ceiling(chain: how_fast_steps.Chain, references: list[str]) -> tuple[list[str], str]:
    """The reference names with the ceiling's design added if no row runs it yet, and the ceiling row's name.

    When the chain's last step is that design (how-fast), that step's row is the ceiling.
    """
    ceiling = ceiling_design()
    if chain.design_name == ceiling:
        return references, f"step-{len(chain.steps()) - 1}"
    return (references if ceiling in references else references + [ceiling]), ceiling


class NothingWrittenError(RuntimeError):
    """The profile refused to write a record (the design answered wrongly, or the server was not saturated): exit 1."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """`bench.py how-fast steps|profile`: which part, quick or full, and the part's own settings."""

    part: Literal["steps", "profile"]
    quick: bool = False
    seconds: int | None = None  # of wrk per run (steps), of sampling (profile); default by quick or full
    chain: str = how_fast_steps.HOW_FAST.name  # steps: which design's steps
    repeat: int | None = None  # steps: repetitions of every row
    request_heads: str | None = None  # steps: "production" for production-shaped heads; None: wrk's one-header GET
    references: tuple[str, ...] | None = None  # steps: designs beside the steps (None: DEFAULT_REFERENCES)
    rate: int = PROFILE_RATE_HZ  # profile: samples per second


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, StepsRecord | ProfileRecord]:
    """The steps (their record) or the profile (its collapsed stacks' path, and its record beside them)."""
    if plan.part == "steps":
        return measure_steps(plan)
    return measure_profile(catalogue, plan)


def measure_steps(plan: Plan) -> tuple[Path, StepsRecord]:
    """Measure every step and reference row of the chain, alternating their order; the record written, its path."""
    chain = how_fast_steps.CHAINS[plan.chain]
    length = QUICK if plan.quick else FULL
    seconds, repeat = plan.seconds or length.seconds, plan.repeat or length.repeat
    tool = require_tool("wrk")
    work_dir = work_dir_for(chain)
    work_dir.mkdir(parents=True, exist_ok=True)
    names, ceiling_row = with_ceiling(chain, list(plan.references or DEFAULT_REFERENCES[chain.name]))
    references = reference_rows(names, bool(plan.references), work_dir)
    rows = step_rows(chain, work_dir) + references
    pinning = processes.cpu_pinning()
    environment = describe_machine(pinning, {"wrk": tool.version()})
    started = utc_now()
    for repetition in range(repeat):
        order = rows if repetition % 2 == 0 else list(reversed(rows))
        for row in order:
            if row.problems:
                continue  # it failed once: not measured again
            print(f"[{repetition + 1}/{repeat}] {row.name} ({row.title})", file=sys.stderr, flush=True)
            try:
                run = measure_row(row, seconds, pinning,
                                  launcher.LOG_DIR / chain.name / row.name / f"repetition-{repetition}",
                                  plan.request_heads)
            except processes.ServerStartError as error:
                run = failed_run(f"server did not start: {error.args[0].splitlines()[0]}")
            if run.error:
                row.problems.append(run.error)
            else:
                row.runs.append(dataclasses.replace(run, repetition=repetition))
    relative_to = next((row.name for row in references if row.name.startswith("nginx")), None)
    record = StepsRecord(
        kind="how-fast-steps",
        chain=chain.name,
        mode="quick" if plan.quick else "full",
        settings=StepsSettings(connections=CONNECTIONS, seconds=seconds, repeat=repeat, relative_to=relative_to,
                               ceiling=ceiling_row if any(row.name == ceiling_row for row in rows) else None,
                               ceiling_scenario=CEILING_SCENARIO_BY_HEADS[plan.request_heads],
                               request_heads=plan.request_heads),
        environment=environment,
        started_utc=started,
        finished_utc=utc_now(),
        rows=[row.row() for row in rows],
    )
    path = results_root(plan.quick) / chain.record_for(plan.request_heads)
    write_record_atomic(path, record)
    return path, record


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def normalise_stacks(raw: str) -> str:
    """py-spy's raw output with line numbers dropped and equal stacks merged, sorted: one line per stack."""
    merged: dict[str, int] = {}
    for line in raw.splitlines():
        if not line.strip():
            continue
        frames, _, count = line.rpartition(" ")
        cleaned = ";".join(_without_line(frame) for frame in frames.split(";"))
        merged[cleaned] = merged.get(cleaned, 0) + int(count)
    return "".join(f"{stack} {count}\n" for stack, count in sorted(merged.items()))


def _without_line(frame: str) -> str:
    """'name (file.py:123)' -> 'name (file.py)'; a bare address '0x7f.. (libc.so.6)' -> '[unknown] (libc.so.6)'."""
    if frame.startswith("0x"):
        return "[unknown]" + frame[frame.find(" ("):] if " (" in frame else "[unknown]"
    if frame.endswith(")") and ":" in frame:
        head, _, tail = frame.rpartition(":")
        if tail[:-1].isdigit():
            return head + ")"
    return frame


SATURATED_BUSY = 0.8  # the server must spend this share of the time on CPU, with and without the profiler
SATURATED_RATE = 0.9  # and the run without the profiler must reach this share of the steps table's rate


def wrk_summary(stdout: str) -> WrkSummary:
    """What the profile keeps of wrk's report (clients/tools/wrk.py parse_run): its fields of WrkSummary."""
    report = parse_run(stdout)
    return WrkSummary.from_json({item.name: report.get(item.name) for item in dataclasses.fields(WrkSummary)}, "wrk")


def last_step_rate() -> float | None:
    """The median rate of the how-fast steps table's last step (its committed record); None without one."""
    steps_path = RESULTS_DIR / how_fast_steps.HOW_FAST.record
    if not steps_path.exists():
        return None
    record = StepsRecord.from_json(json.loads(steps_path.read_text(encoding="utf-8")), str(steps_path))
    steps = [row for row in record.rows if row.step is not None]
    if not steps:
        return None
    last = max(steps, key=lambda row: row.step or 0)
    rates = [run.requests_per_second for run in last.runs if run.requests_per_second is not None]
    return statistics.median(rates) if rates else None


def saturation(after: tuple[float, float], before: tuple[float, float], wrk: WrkSummary,
               profiled_after: tuple[float, float], profiled_before: tuple[float, float], sampling_seconds: float,
               profiled_wrk: WrkSummary) -> Saturation:
    """How busy the server was in both runs, and the clean run's rate against the steps table's last step."""
    busy = (sum(after) - sum(before)) / wrk.duration_s if wrk.duration_s else 0.0
    profiled_busy = (sum(profiled_after) - sum(profiled_before)) / sampling_seconds if sampling_seconds else 0.0
    steps_rate = last_step_rate()
    return Saturation(server_busy=round(busy, 3), server_busy_profiled=round(profiled_busy, 3),
                      profiled_requests_per_second=profiled_wrk.requests_per_second,
                      steps_table_requests_per_second=steps_rate,
                      rate_of_steps_table=(round(wrk.requests_per_second / steps_rate, 3)
                                           if steps_rate and wrk.requests_per_second is not None else None))


def saturation_problems(measured: Saturation) -> list[str]:
    """Why a profile does not describe a saturated server; empty when it does."""
    problems = []
    if measured.server_busy < SATURATED_BUSY:
        problems.append(f"the server was busy {measured.server_busy:.0%} of the run without the profiler")
    if measured.server_busy_profiled < SATURATED_BUSY:
        problems.append(f"it was busy {measured.server_busy_profiled:.0%} of the profiled run")
    ratio = measured.rate_of_steps_table
    if ratio is not None and ratio < SATURATED_RATE:
        problems.append(f"its rate was {ratio:.0%} of the steps table's")
    return problems


def measure_profile(catalogue: Catalogue, plan: Plan) -> tuple[Path, ProfileRecord]:
    """Profile the fastest design under wrk; the path of the collapsed stacks and the record written beside them
    (NothingWrittenError: it answered wrongly, or a full run was not at saturation)."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise ToolMissingError("py-spy is not installed: .venv/bin/pip install -r requirements.lock")
    tool = require_tool("wrk")
    seconds = plan.seconds or PROFILE_SECONDS["quick" if plan.quick else "full"]
    pinning = processes.cpu_pinning()
    port = processes.free_port()
    log_dir = launcher.LOG_DIR / "how-fast" / "profile"
    fastest = catalogue.design(how_fast_steps.PROFILE_NAME)
    load_command = tool.command(f"http://{processes.LOOPBACK}:{port}/", CONNECTIONS,
                                ScenarioSettings.for_tool(seconds + 2, CONNECTIONS, keep_alive=True))
    started = utc_now()
    with launcher.running_design(fastest, port, 0.0, log_dir, cpu=pinning.server) as server:
        server_command = server.command
        problems = probe.verify_http(server.host, server.port)
        if problems:
            raise NothingWrittenError("the design answered wrongly: " + "; ".join(problems))
        verify.prime(server.host, server.port)
        # First without the profiler: its stops cost the server time, so the CPU per request is measured apart.
        before = cpu_seconds(server.process.pid)
        clean = processes.run_tool(processes.pinned(load_command, pinning.load), timeout=seconds + 40)
        after = cpu_seconds(server.process.pid)
        with tempfile.TemporaryDirectory() as scratch:
            raw_path = Path(scratch) / "raw.txt"
            profiler_command = [py_spy, "record", "--native", "--rate", str(plan.rate), "--duration",
                                str(seconds), "--format", "raw", "--output", str(raw_path), "--pid",
                                str(server.process.pid)]
            load = subprocess.Popen(processes.pinned(load_command, pinning.load), stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, start_new_session=True, text=True)
            try:
                time.sleep(1.0)  # wrk has connected and the server is busy before sampling starts
                profiled_before = cpu_seconds(server.process.pid)
                sampling_started = time.monotonic()
                subprocess.run(processes.pinned(profiler_command, pinning.load), check=True, capture_output=True,
                               timeout=seconds + 30)
                profiled_after = cpu_seconds(server.process.pid)
                sampling_seconds = time.monotonic() - sampling_started
                profiled_stdout, _ = load.communicate(timeout=seconds + 30)
            finally:
                if load.poll() is None:
                    os.killpg(load.pid, signal.SIGKILL)
                    load.wait()
            raw = raw_path.read_text(encoding="utf-8")
    wrk = wrk_summary(clean.stdout)
    version = subprocess.run([py_spy, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    measured = saturation(after, before, wrk, profiled_after, profiled_before, sampling_seconds,
                          wrk_summary(profiled_stdout))
    meta = ProfileRecord(
        kind="profile",
        mode="quick" if plan.quick else "full",
        design=how_fast_steps.PROFILE_NAME,
        profiler=version,
        rate_hz=plan.rate,
        seconds=seconds,
        connections=CONNECTIONS,
        started_utc=started,
        finished_utc=utc_now(),
        environment=describe_machine(pinning, {"wrk": tool.version(), "py-spy": version}),
        commands=ProfileCommands(server=server_command, load=processes.pinned(load_command, pinning.load),
                                 profiler=processes.pinned(profiler_command[:-1] + ["<server pid>"], pinning.load)),
        cpu=ProfileCpu(user_seconds=round(after[0] - before[0], 2), system_seconds=round(after[1] - before[1], 2),
                       note="the server's own CPU time over a wrk run without the profiler, before the profiled one"),
        wrk=wrk,
        saturation=measured,
    )
    problems = saturation_problems(measured)
    if problems and not plan.quick:
        raise NothingWrittenError("not at saturation, so the profile would describe a server that mostly waits: "
                                  + "; ".join(problems) + ". Nothing was written: run it again on a quiet machine.")
    target = results_root(plan.quick) / how_fast_steps.PROFILES_DIR
    target.mkdir(parents=True, exist_ok=True)
    stacks_path = target / f"{how_fast_steps.PROFILE_NAME}.collapsed"
    with tempfile.NamedTemporaryFile("w", dir=target, delete=False, encoding="utf-8") as handle:
        handle.write(normalise_stacks(raw))
    os.chmod(handle.name, 0o644)  # a record is for everyone to read (the temporary file was private)
    os.replace(handle.name, stacks_path)
    write_record_atomic(target / f"{how_fast_steps.PROFILE_NAME}.json", meta)
    return stacks_path, meta
