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

import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import echo_probe, probe, processes
from harness.catalogue import REPO_ROOT, Catalogue, Design, Scenario
from harness.environment import describe_machine, utc_now
from harness.resources import GroupSampler
from harness.records import RESULTS_DIR, SCHEMA_VERSION, results_path, write_json_atomic
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
    port = processes.free_port()
    workdir = log_dir / "proxy"
    workdir.mkdir(parents=True, exist_ok=True)
    config = fill_template(template, workdir, host=processes.LOOPBACK, port=str(port),
                           upstream=f"{processes.LOOPBACK}:{upstream_port}")
    command = [part.format(config=config, workdir=workdir) for part in PROXY_COMMAND]
    with processes.running_server(command, port, workdir, cpu=cpu, stop_signal=signal.SIGQUIT) as proxy:
        yield proxy


def server_command(design: Design, port: int, delay: float, workdir: Path,
                   host: str = processes.LOOPBACK) -> list[str]:
    """Fill the design's command template (and its config file, if it has one)."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(design, port, delay, host, workdir)
    values = {"python": sys.executable, "file": str(REPO_ROOT / design.file), "host": host,
              "port": str(port), "delay": f"{delay:g}", "config": str(config or ""), "workdir": str(workdir)}
    return [part.format(**values) for part in design.command]


def prime(host: str, port: int) -> None:
    """A few requests before measuring, so first-request costs (imports, caches) are not timed."""
    for _ in range(PRIMER_REQUESTS):
        probe.exchange(host, port, f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode(), timeout=10)


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


# Closed connections linger 60 s in TIME_WAIT. Ours are on the server side (the servers close
# first) and on the previous design's port, so a few thousand cannot affect the next design;
# tens of thousands (after 100,000 requests) cost the kernel memory and lookups: wait for those.
TIME_WAIT_DRAIN_BELOW = 10_000
TIME_WAIT_MAX_WAIT_SECONDS = 10.0  # Linux keeps TIME_WAIT 60 s: wait for most of it to go, not all


def wait_for_time_wait_drain(below: int = TIME_WAIT_DRAIN_BELOW,
                             max_wait: float = TIME_WAIT_MAX_WAIT_SECONDS) -> None:
    """Between designs, let the previous design's closed connections leave TIME_WAIT (bounded wait)."""
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        count = time_wait_sockets()
        if count is None or count < below:
            return
        time.sleep(0.5)


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
    """One line per cell on stderr: what runs, how far along, and an estimate of the time left."""

    def __init__(self, total_cells: int, estimate_per_cell: float) -> None:
        self.total, self.done, self.started = total_cells, 0, time.monotonic()
        self.estimate_per_cell = estimate_per_cell

    def step(self, label: str) -> None:
        elapsed = time.monotonic() - self.started
        per_cell = elapsed / self.done if self.done else self.estimate_per_cell
        left = per_cell * (self.total - self.done)
        print(f"[{self.done + 1}/{self.total}] {label}  (elapsed {_clock(elapsed)}, about {_clock(left)} left)",
              file=sys.stderr, flush=True)
        self.done += 1


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


def measure_design_once(outcome: DesignOutcome, scenario: Scenario, settings: dict[str, Any], repetition: int,
                        tool: Any, pinning: dict[str, str | None], progress: Progress) -> None:
    """Start one design, verify it, run every concurrency level once, stop it."""
    design = outcome.design
    port = processes.free_port()
    log_dir = LOG_DIR / scenario.id / design.name / f"repetition-{repetition}"
    try:
        with processes.running_server(server_command(design, port, settings["delay"], log_dir), port, log_dir,
                                      cpu=pinning["server"], cwd=REPO_ROOT,
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
            for concurrency in settings["concurrency"]:
                # Before every level, not once: a tool stopped by a time limit can leave requests queued
                # at a sequential server, which would otherwise be served during the next level.
                if design.kind in HTTP_KINDS:
                    prime(target.host, target.port)
                progress.step(f"{scenario.id}: {design.name} c={concurrency} repetition {repetition + 1}/{settings['repeat']}")
                time_wait_before = time_wait_sockets()
                with GroupSampler(server.process.pid) as sampler:
                    run = tool.run(url, concurrency, settings, log_dir / f"c{concurrency}", pinning["load"])
                run.setdefault("requests_requested", settings["requests"])  # an adapter may know better
                run.update(repetition=repetition, time_wait_before=time_wait_before, time_limit=settings.get("time_limit"),
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
                 repeat: int | None, out_dir: Path | None) -> tuple[Path, dict[str, Any]]:
    """Run every cell of a scenario and write its record; returns the path and the record."""
    settings = scenario.settings(quick)
    if repeat is not None:
        settings["repeat"] = repeat
    designs = [catalogue.design(name) for name in (design_names or scenario.designs)]
    tool = require_tool(scenario.tool)
    pinning = processes.cpu_pinning()
    environment = describe_machine(pinning, {tool.name: tool.version()})
    outcomes = {design.name: DesignOutcome(design) for design in designs}
    ceiling = DesignOutcome(catalogue.design(settings["ceiling"])) if settings.get("ceiling") else None
    cells = (len(designs) * settings["repeat"] + (1 if ceiling else 0)) * len(settings["concurrency"])
    progress = Progress(cells, estimate_per_cell=float(settings.get("time_limit") or 10) + 1)
    started = utc_now()
    if ceiling is not None:
        # The tool's ceiling: the fastest server we have, with no simulated call, same tool and parameters.
        measure_design_once(ceiling, scenario, {**settings, "delay": 0.0}, 0, tool, pinning, progress)
    for repetition in range(settings["repeat"]):
        order = designs if repetition % 2 == 0 else list(reversed(designs))
        for design in order:
            outcome = outcomes[design.name]
            if outcome.status == "failed":
                progress.done += len(settings["concurrency"])  # skipped cells still count as done
                continue
            if not quick:  # a quick run trades this care for time
                wait_for_time_wait_drain()
            measure_design_once(outcome, scenario, settings, repetition, tool, pinning, progress)
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
