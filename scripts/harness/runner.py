"""Run a scenario: for each design, start it, verify it, load it, stop it, record.

Order of a cell: start the server (pinned to one CPU) -> wait until it listens ->
verify its answer (a wrong answer is recorded as failed, never measured) -> prime
it with a few requests -> run the load tool (pinned to the other CPU) -> check it
is still alive -> stop it (SIGTERM to the process group) and record its exit code.
Repetitions alternate the order of designs, so slow drift of the machine does not
always favour the same design. The scenario's record is written once, atomically,
after the last cell: an interrupted run leaves the previous record untouched.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import echo_probe, probe, processes
from harness.catalogue import REPO_ROOT, Catalogue, Design, Scenario, UnknownNameError
from harness.environment import describe_machine, utc_now
from harness.resources import GroupSampler
from harness.records import RESULTS_DIR, SCHEMA_VERSION, results_path, wall_seconds, write_json_atomic
from harness.tools import require_tool

LOG_DIR = REPO_ROOT / "build" / "logs"
SCRATCH_RESULTS_DIR = REPO_ROOT / "build" / "results"
PRIMER_REQUESTS = 3
VERIFIERS = {"http": probe.verify_http, "naive-http": probe.verify_naive_http, "echo": echo_probe.verify_echo}
HTTP_KINDS = {"http", "naive-http"}  # primed before measuring; an echo connection costs nothing to warm up


def fill_template(template: str, workdir: Path, **values: str) -> Path:
    """Write a config template into workdir with its @TOKENS@ replaced (@HOST@ from host=..., and so on)."""
    text = (REPO_ROOT / template).read_text(encoding="utf-8")
    for name, value in {**values, "workdir": str(workdir), "repo": str(REPO_ROOT)}.items():
        text = text.replace(f"@{name.upper()}@", value)
    config = workdir / Path(template).name
    config.write_text(text, encoding="utf-8")
    return config


def write_config(design: Design, port: int, delay: float, host: str, workdir: Path) -> Path | None:
    """Fill a real server's config template with this run's port, delay and scratch directory."""
    if design.config_template is None:
        return None
    return fill_template(design.config_template, workdir, host=host, port=str(port), delay=f"{delay:g}",
                         delay_ms=str(round(delay * 1000)))


PROXY_COMMAND = ["nginx", "-c", "{config}", "-p", "{workdir}", "-e", "stderr"]


@contextlib.contextmanager
def reverse_proxy(template: str, upstream_port: int, log_dir: Path, cpu: str | None) -> Iterator[processes.RunningServer]:
    """nginx in front of a design (scenario option `proxy`), pinned to the design's CPU."""
    port = run_port("proxy")
    workdir = log_dir / "proxy"
    workdir.mkdir(parents=True, exist_ok=True)
    config = fill_template(template, workdir, host=processes.LOOPBACK, port=str(port),
                           upstream=f"{processes.LOOPBACK}:{upstream_port}")
    command = [part.format(config=config, workdir=workdir) for part in PROXY_COMMAND]
    with processes.running_server(command, port, workdir, cpu=cpu, stop_signal=signal.SIGQUIT) as proxy:
        yield proxy


class UnsupportedWorkError(ValueError):
    """Simulated CPU work (--work N) asked of a design that cannot do it: bad input, like an unknown name."""


def work_arguments(design: Design, work: int) -> list[str]:
    """`--work N` when work is asked (N > 0) of a design that supports it; nothing when none is asked."""
    if work < 0:
        raise UnsupportedWorkError(f"--work takes a number of iterations, 0 or more, not {work}")
    if work == 0:
        return []
    if not design.supports_work:
        raise UnsupportedWorkError(f"design {design.name!r} cannot simulate CPU work (--work {work}): its "
                                   "catalogue entry does not say supports_work = true")
    return ["--work", str(work)]


def server_command(design: Design, port: int, delay: float, workdir: Path,
                   host: str = processes.LOOPBACK, work: int = 0) -> list[str]:
    """Fill the design's command template (and its config file, if it has one); add --work N if asked."""
    extra = work_arguments(design, work)  # refused before anything is written
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(design, port, delay, host, workdir)
    values = {"python": sys.executable, "file": str(REPO_ROOT / design.file), "host": host,
              "port": str(port), "delay": f"{delay:g}", "config": str(config or ""), "workdir": str(workdir)}
    return [part.format(**values) for part in design.command] + extra


def prime(host: str, port: int) -> None:
    """A few requests before measuring, so first-request costs (imports, caches) are not timed.

    Sent at once, not one after another: a concurrent design answers them in one simulated call
    (0.1 s, not 0.3 s, before each of a sweep's levels), and a sequential one still answers them
    only after any requests left queued by the previous level. An error in any of them is raised.
    """
    request = f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()  # keep-alive designs close too
    with concurrent.futures.ThreadPoolExecutor(PRIMER_REQUESTS) as pool:
        answers = [pool.submit(probe.exchange, host, port, request, timeout=10) for _ in range(PRIMER_REQUESTS)]
    for answer in answers:
        answer.result()


def time_wait_sockets() -> int | None:
    """TCP sockets in TIME_WAIT right now (from /proc/net/sockstat), recorded beside each run."""
    try:
        with open("/proc/net/sockstat", encoding="ascii") as sockstat:
            for line in sockstat:
                if line.startswith("TCP:"):
                    fields = line.split()
                    return int(fields[fields.index("tw") + 1])
    except (OSError, ValueError):
        pass
    return None


# Closed connections linger 60 s in TIME_WAIT, on the server's side (our servers close first).
# There is at most one per client port: a new connection from the same client port to the same
# server port replaces it. So on one server port their number is bounded by the client's
# ephemeral port range (about 28,000), however long the run. That is why every design in a run
# listens on the same port (run_port): a fresh port per design would add a port's worth per
# design and fill the kernel's table (net.ipv4.tcp_max_tw_buckets) within a few designs. Past
# that size the kernel stops keeping closed connections at all, and the next design would run
# on a kernel that behaves differently; the records count such overflows per cell. The drain
# wait below is the safety net: it waits only while the table is more than half full.
_run_ports: dict[str, int] = {}


def run_port(role: str = "server", design: Design | None = None) -> int:
    """The port every design in this run listens on (one per role), or a fresh one if it is taken."""
    if design is not None and not design.reuses_address:
        return processes.free_port()  # it could not bind a port that holds TIME_WAIT connections
    port = _run_ports.get(role)
    if port is not None:
        try:
            processes.ensure_port_free(port)
        except processes.PortBusyError:
            port = None  # something else listens there now
    if port is None:
        port = _run_ports[role] = processes.free_port()
    return port


def time_wait_overflows() -> int | None:
    """How often the kernel has found its TIME_WAIT table full since boot (TcpExt TCPTimeWaitOverflow)."""
    try:
        with open("/proc/net/netstat", encoding="ascii") as netstat:
            rows = [line.split() for line in netstat]
    except OSError:
        return None
    for names, values in zip(rows[::2], rows[1::2]):
        if names and names[0] == "TcpExt:" and "TCPTimeWaitOverflow" in names:
            return int(values[names.index("TCPTimeWaitOverflow")])
    return None


TIME_WAIT_MAX_BUCKETS_FILE = Path("/proc/sys/net/ipv4/tcp_max_tw_buckets")
TIME_WAIT_MAX_WAIT_SECONDS = 30.0


def time_wait_drain_threshold(max_buckets_file: Path = TIME_WAIT_MAX_BUCKETS_FILE) -> int:
    """Half the kernel's TIME_WAIT table (32,768 when the kernel does not say its size)."""
    try:
        return int(max_buckets_file.read_text(encoding="ascii")) // 2
    except (OSError, ValueError):
        return 32_768


def wait_for_time_wait_drain(below: int | None = None, max_wait: float = TIME_WAIT_MAX_WAIT_SECONDS) -> None:
    """Between designs, if the kernel's TIME_WAIT table is more than half full, let it empty (bounded wait)."""
    below = time_wait_drain_threshold() if below is None else below
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        count = time_wait_sockets()
        if count is None or count < below:
            return
        time.sleep(0.5)


def plan_run(catalogue: Catalogue, runs: list[tuple[Scenario, list[str] | None]], quick: bool,
             repeat: int | None) -> Progress:
    """One progress display for several scenarios: (scenario, design names or None for all) each."""
    planned: list[float] = []
    for scenario, design_names in runs:
        settings = scenario_settings(scenario, quick, repeat)
        designs = [catalogue.design(name) for name in (design_names or scenario.designs)]
        cells = plan_cells(settings, designs, with_ceiling=bool(settings.get("ceiling")))
        factor = past_speed(catalogue, RESULTS_DIR if not quick else SCRATCH_RESULTS_DIR, scenario.id)
        planned += [seconds * factor for seconds in cells]
    return Progress(planned)


def past_speed(catalogue: Catalogue, results_dir: Path, scenario_id: str) -> float:
    """How the last recorded run of a scenario compared with its own plan (1.0 when unknown).

    Time limits are upper bounds (ab stops at n requests, often long before its cap), so a plan
    made of them overestimates; the last record says by how much.
    """
    try:
        record = json.loads(results_path(scenario_id, results_dir).read_text(encoding="utf-8"))
        wall = wall_seconds(record)
        designs = [catalogue.design(design["name"]) for design in record["designs"]]
        planned = sum(plan_cells(record["settings"], designs, with_ceiling=bool(record.get("ceiling"))))
    except (OSError, ValueError, KeyError, TypeError, UnknownNameError):
        return 1.0
    return wall / planned if planned > 0 and wall > 0 else 1.0


def scenario_settings(scenario: Scenario, quick: bool, repeat: int | None = None) -> dict[str, Any]:
    """The settings a run of this scenario uses (quick overrides, and --repeat when given)."""
    settings = scenario.settings(quick)
    if repeat is not None:
        settings["repeat"] = repeat
    return settings


@dataclass
class DesignOutcome:
    """What one design did across the whole scenario."""

    design: Design
    status: str = "ok"
    problems: list[str] = field(default_factory=list)
    stderr_tail: str = ""
    server_exit_codes: list[int | None] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)

    def fail(self, problem: str, stderr_tail: str = "") -> None:
        self.status = "failed"
        self.problems.append(problem)
        self.stderr_tail = stderr_tail or self.stderr_tail

    def to_json(self) -> dict[str, Any]:
        return {"name": self.design.name, "title": self.design.title, "model": self.design.model,
                "reproduces": self.design.reproduces, "status": self.status, "problems": self.problems,
                "stderr_tail": self.stderr_tail, "server_exit_codes": self.server_exit_codes, "runs": self.runs}


class Progress:
    """One line per cell on stderr: what runs, how far along, and an estimate of the time left.

    The plan is an estimate of every cell's seconds (its time limit plus start-up), made before
    anything runs and spanning every scenario of the run; as cells finish, the estimate for the
    rest is scaled by how the finished cells compared with their own estimates.
    """

    def __init__(self, planned_cells: list[float]) -> None:
        self.planned = planned_cells
        self.done, self.done_estimate, self.started = 0, 0.0, time.monotonic()

    def step(self, label: str) -> None:
        elapsed = time.monotonic() - self.started
        rest = sum(self.planned[self.done:])
        scale = elapsed / self.done_estimate if self.done_estimate else 1.0
        print(f"[{self.done + 1}/{len(self.planned)}] {label}  "
              f"(elapsed {_clock(elapsed)}, about {_clock(rest * scale)} left)", file=sys.stderr, flush=True)
        self.skip(1)

    def skip(self, cells: int) -> None:
        """Count cells as done (run, or skipped because their design already failed)."""
        self.done_estimate += sum(self.planned[self.done:self.done + cells])
        self.done = min(self.done + cells, len(self.planned))


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


CELL_OVERHEAD_SECONDS = 1.0  # starting, verifying and priming a design, and the tool's own start
UNTIMED_CELL_SECONDS = 10.0  # the guess for a cell with no time limit


def levels(settings: dict[str, Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """The cells of one repetition: (label, concurrency, setting overrides).

    Usually one per concurrency level; `time_limit_at` (concurrency level -> seconds) gives some
    levels a longer time limit than the scenario's. An open-loop scenario whose `rate` is a list
    sweeps the offered rate instead, at its one concurrency level (the cap on requests in flight);
    with `schedule_seconds`, each rate schedules rate x schedule_seconds requests.
    """
    rates = settings.get("rate")
    if not isinstance(rates, list):
        longer = settings.get("time_limit_at") or {}
        return [(f"c={concurrency}", concurrency,
                 {"time_limit": longer[str(concurrency)]} if str(concurrency) in longer else {})
                for concurrency in settings["concurrency"]]
    cap = settings["concurrency"][0]
    cells = []
    for rate in rates:
        overrides: dict[str, Any] = {"rate": rate}
        if settings.get("schedule_seconds"):
            overrides["requests"] = max(1, round(rate * settings["schedule_seconds"]))
        cells.append((f"rate={rate:g}", cap, overrides))
    return cells


def design_settings(settings: dict[str, Any], design: Design) -> dict[str, Any]:
    """The scenario's settings for one design: a blocking design may get a shorter time limit.

    `time_limit_blocking` (a scenario option) caps designs whose catalogue says concurrent = false:
    they answer one request at a time, and a few seconds show their rate as well as a minute.
    """
    if not design.concurrent and settings.get("time_limit_blocking"):
        return {**settings, "time_limit": settings["time_limit_blocking"]}
    return settings


def plan_cells(settings: dict[str, Any], designs: list[Design], with_ceiling: bool) -> list[float]:
    """Estimated seconds of every cell of a scenario, in the order they will run."""
    def cell(design_specific: dict[str, Any]) -> float:
        limit = design_specific.get("time_limit")
        return (float(limit) if limit else UNTIMED_CELL_SECONDS) + CELL_OVERHEAD_SECONDS

    def cells(design_specific: dict[str, Any]) -> list[float]:
        return [cell({**design_specific, **overrides}) for _, _, overrides in levels(design_specific)]

    planned = cells(settings) if with_ceiling else []
    for _ in range(settings["repeat"]):
        for design in designs:
            planned += cells(design_settings(settings, design))
    return planned


def measure_design_once(outcome: DesignOutcome, scenario: Scenario, settings: dict[str, Any], repetition: int,
                        tool: Any, pinning: dict[str, str | None], progress: Progress) -> None:
    """Start one design, verify it, run every concurrency level once, stop it."""
    design = outcome.design
    port = run_port("server", design)
    log_dir = LOG_DIR / scenario.id / design.name / f"repetition-{repetition}"
    try:
        command = server_command(design, port, settings["delay"], log_dir, work=settings.get("work", 0))
        with processes.running_server(command, port, log_dir, cpu=pinning["server"], cwd=REPO_ROOT,
                                      stop_signal=design.stop_signal) as server, \
                contextlib.ExitStack() as front:
            target = server
            if settings.get("proxy"):
                target = front.enter_context(reverse_proxy(settings["proxy"], server.port, log_dir, pinning["server"]))
            problems = VERIFIERS[design.kind](target.host, target.port)
            if problems:
                outcome.fail("verification failed: " + "; ".join(problems), server.stderr_tail())
                return
            url = f"http://{target.host}:{target.port}/"
            for label, concurrency, overrides in levels(settings):
                level_settings = {**settings, **overrides}
                # Before every level, not once: a tool stopped by a time limit can leave requests queued
                # at a sequential server, which would otherwise be served during the next level.
                if design.kind in HTTP_KINDS:
                    prime(target.host, target.port)
                progress.step(f"{scenario.id}: {design.name} {label} repetition {repetition + 1}/{settings['repeat']}")
                time_wait_before, overflows_before = time_wait_sockets(), time_wait_overflows()
                with GroupSampler(server.process.pid) as sampler:
                    run = tool.run(url, concurrency, level_settings, log_dir / label.replace("=", ""), pinning["load"])
                overflows_after = time_wait_overflows()
                run.setdefault("requests_requested", level_settings["requests"])  # an adapter may know better
                run.update(repetition=repetition, time_wait_before=time_wait_before,
                           time_wait_overflows=None if None in (overflows_before, overflows_after)
                           else overflows_after - overflows_before,
                           time_limit=level_settings.get("time_limit"),
                           server_resources=sampler.summary(run.get("complete") or 0))
                outcome.runs.append(run)
                if not server.alive():
                    outcome.fail(f"server died during the run (exit code {server.process.returncode})",
                                 server.stderr_tail())
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


def run_scenario(catalogue: Catalogue, scenario: Scenario, design_names: list[str] | None, quick: bool,
                 repeat: int | None, out_dir: Path | None,
                 progress: Progress | None = None) -> tuple[Path, dict[str, Any]]:
    """Run every cell of a scenario and write its record; returns the path and the record."""
    settings = scenario_settings(scenario, quick, repeat)
    designs = [catalogue.design(name) for name in (design_names or scenario.designs)]
    tool = require_tool(scenario.tool)
    pinning = processes.cpu_pinning(server_on_every_cpu=settings.get("server_cpus") == "all")
    environment = describe_machine(pinning, {tool.name: tool.version()})
    outcomes = {design.name: DesignOutcome(design) for design in designs}
    ceiling = DesignOutcome(catalogue.design(settings["ceiling"])) if settings.get("ceiling") else None
    progress = progress or Progress(plan_cells(settings, designs, ceiling is not None))
    started = utc_now()
    if ceiling is not None:
        # The tool's ceiling: the fastest server we have, with no simulated call, same tool and parameters.
        measure_design_once(ceiling, scenario, {**settings, "delay": 0.0, "work": 0}, 0, tool, pinning, progress)
    for repetition in range(settings["repeat"]):
        order = designs if repetition % 2 == 0 else list(reversed(designs))
        for design in order:
            outcome = outcomes[design.name]
            if outcome.status == "failed":
                progress.skip(len(levels(settings)))  # skipped cells still count as done
                continue
            if not quick:  # a quick run trades this care for time
                wait_for_time_wait_drain()
            cells_before = progress.done
            measure_design_once(outcome, scenario, design_settings(settings, design), repetition, tool, pinning,
                                progress)
            # A design that failed part-way leaves the rest of its levels unrun: count them as done.
            progress.skip(len(levels(settings)) - (progress.done - cells_before))
    record = {
        "schema": SCHEMA_VERSION,
        "scenario": scenario.to_json(),
        "mode": "quick" if quick else "full",
        "settings": settings,
        "environment": environment,
        "started_utc": started,
        "finished_utc": utc_now(),
        "designs": [outcomes[design.name].to_json() for design in designs],
        "ceiling": None if ceiling is None else {**ceiling.to_json(), "delay": 0.0},
    }
    complete_run = not quick and design_names is None and repeat is None
    target_dir = out_dir or (RESULTS_DIR if complete_run else SCRATCH_RESULTS_DIR)
    path = results_path(scenario.id, target_dir)
    write_json_atomic(path, record)
    return path, record
