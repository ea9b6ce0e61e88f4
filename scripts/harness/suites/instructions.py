"""Instructions per request, counted by valgrind's callgrind: a cost measure that machine noise does not move.

    python scripts/bench.py instructions [--quick] [--row NAME ...]

Wall-clock rates on a small shared VM move 5-9% from one run to the next, which hides the
differences between two versions of a server that the how-fast page is about. Counting
instructions does not depend on what else the machine is doing. For each row (a design, a
how-fast step, or a design on another CPython), the suite starts the server under

    env PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=<log dir>/callgrind.out.%p --dump-line=no

through the launcher, sends it a fixed number of GET / requests on ONE keep-alive connection,
one after another (clients/probe.py's keep-alive reader checks every answer), stops it with its
graceful signal, and reads the run's total from the `summary:` line of callgrind's output file.
It does this with N1 and then N2 requests; the difference over N2 - N1 is one request's cost,
start-up and shutdown cancelled (model/instruction_counts.py). The whole pair is measured twice,
and the record keeps both, so the page can show that they agree (within 2%).

What is counted: instructions executed in user space by the server process (valgrind runs the
program on a synthetic CPU and sees no kernel code), every thread of it (callgrind's default, one
total for the process); Python designs here are one process, and the launcher's taskset and
valgrind exec into it, so --trace-children is not needed. Not counted: the kernel's share of each
request (the socket reads and writes), which on a hello-world page is large. One connection, one
request at a time, means each request pays a whole turn of the event loop; under wrk's 50
connections one turn serves several, so the count per request is higher here than the CPU time
per request under load would suggest. The comparison between rows is what the number is for.

PYTHONHASHSEED=0: with a random seed per process, start-up alone (about 300 million instructions)
moved by hundreds of thousands between runs, which the subtraction cannot cancel (each run has its
own); with one seed, start-ups differ by a few tens of thousands. Every row runs with the same seed.

Known limits: valgrind runs Python about 50 times slower, so servers get READY_TIMEOUT_SECONDS to
start; a timer that fires once a second (the Date header) costs in proportion to the run's wall
time, not its requests, and leaks a few instructions into the difference.
A full run writes results/instructions/instructions.json; --quick or --row writes under build/results/.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness.clients import probe
from harness.clients.production_heads import ProductionHeads
from harness.clients.tools import ToolMissingError
from harness.model import instruction_counts
from harness.model.catalogue import Catalogue, Design
from harness.model.how_fast_steps import FAST_AND_CORRECT, HOW_FAST, PROFILE_NAME
from harness.model.paths import REPO_ROOT
from harness.model.records import RESULTS_DIR, SCRATCH_RESULTS_DIR, write_record_atomic
from harness.model.records.instructions_record import CountRow, CountRun, InstructionsRecord, Measurement
from harness.model.suite_settings import CountSettings
from harness.suites import how_fast
from harness.system import launcher, processes
from harness.system.environment import describe_machine, utc_now


@dataclass(frozen=True)
class CountPlan:
    """What a row counts: instructions for two request counts (their difference is per request), so many times."""

    requests: tuple[int, int]
    measurements: int


FULL = CountPlan(requests=(2_000, 4_000), measurements=2)
QUICK = CountPlan(requests=(200, 400), measurements=2)
PLAIN_AND_HARDENED = ["asyncio-protocol-keep-alive", "hardened"]  # the same Protocol, with and without every limit
# uvloop is installed in the harness's virtual environment only, not in pyenv's interpreters; the asyncio
# Protocol design is the uvloop one on asyncio's loop, and runs on every CPython as it is.
VERSIONS_DESIGN = "asyncio-protocol-keep-alive"
VERSIONS = ["3.11", "3.12", "3.13"]
GROUPS = {"steps": "the how-fast steps (uvloop Protocol design)", "hardened": "hardened vs plain",
          "versions": "Python versions",
          "fast-and-correct": "the fast-and-correct steps and nginx, with wrk's head and with production-shaped heads"}
NGINX = "nginx-keep-alive"  # beside the fast-and-correct steps: its master and its worker, counted together
REQUEST_HEADS = (None, "production")  # wrk's one-header GET; clients/production_heads.py's heads, each unique
READY_TIMEOUT_SECONDS = 180.0  # python + uvloop imported under valgrind: tens of seconds on a 2-CPU VM
STOP_GRACE_SECONDS = 120.0  # shutdown under valgrind, then callgrind writes its file; SIGKILL would lose it
EXCHANGE_TIMEOUT_SECONDS = 900.0
WORK_DIR = REPO_ROOT / "build" / "instructions"
EVENTS = re.compile(r"^events:\s*(.+)$", re.MULTILINE)
TOTALS = re.compile(r"^(totals|summary):\s*(.+)$", re.MULTILINE)


class UnknownRowError(LookupError):
    """--row names no row of the suite: bad input, like an unknown design."""


class CallgrindOutputError(ValueError):
    """callgrind's output file is missing, or has no total of instructions (Ir)."""


def valgrind_path() -> str:
    """valgrind's path; ToolMissingError (bad input, exit 2) saying how to install it."""
    found = shutil.which("valgrind")
    if not found:
        raise ToolMissingError("valgrind is not installed: scripts/install_system_packages.sh (apt-get install valgrind)")
    return found


def valgrind_version(valgrind: str) -> str:
    return subprocess.run([valgrind, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def valgrind_wrapper(valgrind: str, out_dir: Path) -> list[str]:
    """The wrapper before the design's command: callgrind, one output file per process id, no per-line data."""
    return ["env", "PYTHONHASHSEED=0", valgrind, "--tool=callgrind", f"--callgrind-out-file={out_dir}/callgrind.out.%p", "--dump-line=no",
            "--trace-children=no"]


def instructions_total(text: str) -> int:
    """The Ir total of a callgrind output file: its `summary:` line (else `totals:`), at the `events:` index of Ir."""
    events = EVENTS.search(text)
    if not events:
        raise CallgrindOutputError("no `events:` line in callgrind's output")
    names = events.group(1).split()
    if "Ir" not in names:
        raise CallgrindOutputError(f"callgrind counted {names}, not Ir")
    totals = {kind: line.split() for kind, line in TOTALS.findall(text)}
    values = totals.get("summary") or totals.get("totals")  # summary: what was counted; totals: the file's sum
    if not values:
        raise CallgrindOutputError("no `totals:` or `summary:` line in callgrind's output")
    return int(values[names.index("Ir")])


def python_version(python: str | None) -> str:
    """The full version of the interpreter a row runs on ("3.12.1")."""
    executable = launcher.interpreter(python) if python else sys.executable
    return subprocess.run([executable, "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def answers_problems(answers: list[bytes], expected: int) -> list[str]:
    """What is wrong with the answers of one run: too few, or one that breaks the contract (the first three named)."""
    problems = [] if len(answers) == expected else [f"{len(answers)} answers to {expected} requests"]
    for number, answer in enumerate(answers, 1):
        found = probe.http_problems(probe.parse_response(answer), keep_alive=True)
        problems += [f"answer {number}: {problem}" for problem in found]
        if len(problems) >= 3:
            break
    return problems


def count_run(design: Design, requests: int, python: str | None, cpu: str | None, log_dir: Path,
              valgrind: str, request_heads: str | None = None) -> CountRun:
    """Start the design under callgrind, send `requests` GET / on one keep-alive connection, stop it, read its total
    (the sum over its processes: nginx forks a worker, which callgrind follows into a file of its own)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_dir.chmod(0o1777)  # nginx's worker runs as nobody: its callgrind file must be writable here, or it is lost
    for old in log_dir.glob("callgrind.out.*"):
        old.unlink()  # a file left by an earlier run must not be read as this one's
    port = processes.free_port()
    with launcher.running_design(design, port, 0.0, log_dir, cpu=cpu, python=python,
                                 wrapper=valgrind_wrapper(valgrind, log_dir), ready_timeout=READY_TIMEOUT_SECONDS,
                                 stop_grace=STOP_GRACE_SECONDS) as server:
        if request_heads == "production":  # each head unique, the templates in turn (clients/production_heads.py)
            heads = ProductionHeads(f"{server.host}:{server.port}")
            sent = [heads.head(number) for number in range(requests)]
        else:
            sent = [probe.keep_alive_request(server.host, server.port, "HTTP/1.1")] * requests
        began = time.monotonic()
        answers = probe.exchange_on_one_connection(server.host, server.port, sent, timeout=EXCHANGE_TIMEOUT_SECONDS)
        seconds = time.monotonic() - began
        command = server.command
    problems = answers_problems(answers, requests)
    if server.exit_code != 0:
        problems.append(f"server exited with code {server.exit_code} after {design.stop_signal.name} (expected 0)")
    outputs = sorted(log_dir.glob("callgrind.out.*"))
    instructions = None
    if not outputs:
        problems.append(f"no callgrind output file in {log_dir}")
    else:  # one per process: a Python design's one, or nginx's master and worker
        instructions = sum(instructions_total(output.read_text(encoding="utf-8", errors="replace"))
                           for output in outputs)
    return CountRun(requests=requests, exchange_seconds=round(seconds, 2), server_exit_code=server.exit_code,
                    command=command, instructions=instructions, error="; ".join(problems) or None)


@dataclasses.dataclass
class PlannedRow:
    """A row being counted: the design its server starts from, and its measurements and problems so far (row() is
    the record's row)."""

    name: str
    title: str
    group: str  # a key of GROUPS
    design_name: str
    step: int | None
    file: str
    python: str | None  # the CPython asked for; None: the harness's own
    design: Design
    measurements: list[Measurement] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    python_version: str | None = None
    request_heads: str | None = None  # a value of REQUEST_HEADS

    def row(self) -> CountRow:
        return CountRow(name=self.name, title=self.title, group=self.group, design_name=self.design_name,
                        step=self.step, file=self.file, python=self.python, measurements=self.measurements,
                        problems=self.problems, python_version=self.python_version,
                        request_heads=self.request_heads)


def measure_row(row: PlannedRow, requests: tuple[int, int], measurements: int, cpu: str | None,
                valgrind: str) -> None:
    """Every measurement of one row (a run with N1 requests, then one with N2), into row.measurements."""
    low, high = requests
    for measurement in range(measurements):
        runs = []
        for count in (low, high):
            print(f"  {row.name}: measurement {measurement + 1}/{measurements}, {count:,} requests",
                  file=sys.stderr, flush=True)
            log_dir = launcher.LOG_DIR / "instructions" / row.name / f"measurement-{measurement}-{count}"
            try:
                run = count_run(row.design, count, row.python, cpu, log_dir, valgrind, row.request_heads)
            except (processes.ServerStartError, probe.ClosedEarlyError, OSError, ValueError) as error:
                run = CountRun(requests=count, error=f"{type(error).__name__}: {str(error).splitlines()[0]}")
            runs.append(run)
            if run.error or run.instructions is None:
                row.problems.append(run.error or "no instruction count")
                return
        totals = [run.instructions or 0 for run in runs]  # both counted: the loop above returned otherwise
        row.measurements.append(Measurement(runs=runs, instructions_per_request=round(
            instruction_counts.per_request(totals[0], totals[1], low, high), 1)))


def plan_rows(catalogue: Catalogue) -> list[PlannedRow]:
    """Every row: the how-fast steps, plain and hardened, the versions design on each CPython, and the
    fast-and-correct steps and nginx with both request heads."""
    work_dir = how_fast.work_dir_for(HOW_FAST)
    work_dir.mkdir(parents=True, exist_ok=True)
    rows = [PlannedRow(name=step.name, title=step.title, group="steps", design_name=PROFILE_NAME, step=step.step,
                       file=step.file or step.design.file, python=None, design=step.design)
            for step in how_fast.step_rows(HOW_FAST, work_dir)]
    for name in PLAIN_AND_HARDENED:
        design = catalogue.design(name)
        rows.append(PlannedRow(name=name, title=design.title, group="hardened", design_name=name, step=None,
                               file=design.file, python=None, design=design))
    design = catalogue.design(VERSIONS_DESIGN)
    for version in VERSIONS:
        rows.append(PlannedRow(name=f"{VERSIONS_DESIGN}-python-{version}", title=f"{design.title}, CPython {version}",
                               group="versions", design_name=VERSIONS_DESIGN, step=None, file=design.file,
                               python=version, design=design))
    chain_dir = how_fast.work_dir_for(FAST_AND_CORRECT)
    chain_dir.mkdir(parents=True, exist_ok=True)
    nginx = catalogue.design(NGINX)
    for heads in REQUEST_HEADS:
        suffix = f"-{heads}-heads" if heads else ""
        rows += [PlannedRow(name=f"fast-and-correct-{step.name}{suffix}", title=step.title, group="fast-and-correct",
                            design_name=FAST_AND_CORRECT.design_name, step=step.step,
                            file=step.file or step.design.file, python=None, design=step.design, request_heads=heads)
                 for step in how_fast.step_rows(FAST_AND_CORRECT, chain_dir)]
        rows.append(PlannedRow(name=f"{NGINX}{suffix}", title=nginx.title, group="fast-and-correct", design_name=NGINX,
                               step=None, file=nginx.file, python=None, design=nginx, request_heads=heads))
    return rows


@dataclass(frozen=True)
class Plan:
    """`bench.py instructions`: quick (fewer requests, into build/results/) or full, and only these rows (None: all)."""

    quick: bool = False
    rows: tuple[str, ...] | None = None  # step-0 ... step-5, fast-and-correct-step-7, ...; into build/results/


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, InstructionsRecord]:
    """Measure the rows (all, or those named); the record written atomically, its path and it."""
    quick, names = plan.quick, plan.rows
    counts = QUICK if quick else FULL
    valgrind = valgrind_path()
    rows = plan_rows(catalogue)
    if names:
        unknown = sorted(set(names) - {row.name for row in rows})
        if unknown:
            raise UnknownRowError(f"no row named {', '.join(unknown)}; rows: {', '.join(row.name for row in rows)}")
        rows = [row for row in rows if row.name in names]
    pinning = processes.cpu_pinning()  # the server alone on one CPU; the count does not depend on it
    version = valgrind_version(valgrind)
    started = utc_now()
    for row in rows:
        print(f"{row.name} ({row.title})", file=sys.stderr, flush=True)
        try:
            row.python_version = python_version(row.python)
        except (launcher.InterpreterMissingError, subprocess.SubprocessError) as error:
            row.problems.append(str(error))
            continue
        measure_row(row, counts.requests, counts.measurements, pinning.server, valgrind)
    record = InstructionsRecord(
        kind="instructions",
        mode="quick" if quick else "full",
        settings=CountSettings(requests=list(counts.requests), measurements=counts.measurements),
        counter="callgrind's Ir: instructions executed in user space by the server process (all its threads); "
                "the kernel's work is not counted",
        valgrind=version,
        wrapper=valgrind_wrapper("valgrind", Path("<log dir>")),
        environment=describe_machine(pinning, {"valgrind": version}),
        started_utc=started,
        finished_utc=utc_now(),
        rows=[row.row() for row in rows],
    )
    root = SCRATCH_RESULTS_DIR if quick or names else RESULTS_DIR
    path = root / instruction_counts.RECORD
    write_record_atomic(path, record)
    return path, record
