"""http-client: our own asyncio load client, scripts/http_load.py, run as a subprocess.

Why our own: ab, hey and wrk are closed-loop tools (each connection waits for its
answer before sending the next), which hides the time requests would have spent
queueing (coordinated omission). http_load.py can also run open loop, on a fixed
schedule, and it records every request's start and end for timeline pictures.

It runs like every other tool: pinned, time-bounded and reaped by
`processes.run_tool`, and we read the one JSON object it prints; it has the
record's keys already (complete, failed, failed_by_kind, requests_per_second,
latency_ms), and `wall_time_s` becomes `duration_s`.

Settings:
- requests, concurrency: `--requests`, and `--concurrency` in closed loop.
- time_limit: `--duration` (no new requests after it; the ones in flight finish).
- rate (optional): open loop at that many requests per second. The scenario's
  concurrency level is then the cap on requests open at once
  (`--max-in-flight`), like the connections of wrk2; the record adds
  service_ms and late.
- timeline (bool): the client writes workdir/timeline.json, and the record
  carries that list when it has at most TIMELINE_MAX_ENTRIES entries (records
  stay small); otherwise it says where the file is. The record also keeps
  clock_start_unix_s (the run's start on the Unix clock): the runner traces the
  server's system calls during a timeline run (system/syscall_trace.py) and
  places them on the timeline with it.
- client_timeout (optional): the client's own `--timeout`; by default the time
  limit plus a minute, or ten minutes without one.

What counts as an error of the run: no JSON (bad arguments, exit 2, a crash),
or a run the client had to cut at its own timeout (a design that hangs under
load is not measured). Failed requests are data, as ab's failed count is:
exit code 1 with a report is not an error.

keep_alive is always False: the client opens a new connection per request and
sends `Connection: close`; the record says so even if a scenario asks otherwise.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any

from harness.model.paths import REPO_ROOT
from harness.model.settings import TOOL_READS, ScenarioSettings
from harness.system import processes

CLIENT = REPO_ROOT / "scripts" / "http_load.py"
TIMELINE_MAX_ENTRIES = 2000
RECORD_KEYS = ("complete", "failed", "failed_by_kind", "skipped", "requests_per_second", "latency_ms", "mode",
               "rate", "max_in_flight", "service_ms", "late", "late_tolerance_ms", "timed_out")
KEEP_ALIVE_NOTE = "http_load.py opens a new connection per request and sends Connection: close"
KILL_MARGIN_S = 30  # past the client's own timeout, run_tool kills it


def client_timeout(settings: ScenarioSettings) -> float:
    """The client's --timeout: as set, else the time limit plus a minute, else ten minutes."""
    if settings.client_timeout:
        return float(settings.client_timeout)
    return float(settings.time_limit) + 60 if settings.time_limit else 600.0


def parse_run(stdout: str) -> dict[str, Any]:
    """The record's numbers from the JSON object http_load.py prints; ValueError when there is none."""
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError as error:
        raise ValueError(f"http_load.py printed no JSON report ({error})") from error
    if not isinstance(report, dict) or report.get("tool") != "http_load.py":
        raise ValueError("http_load.py's output is not its report")
    record = {key: report.get(key) for key in RECORD_KEYS}
    record["duration_s"] = report["wall_time_s"]
    return record


def attach_timeline(record: dict[str, Any], path: Path) -> None:
    """Put the per-request list into the record, unless it is too long (then only where it is)."""
    if not path.exists():
        record["timeline"] = None
        return
    entries = json.loads(path.read_text(encoding="utf-8"))
    if len(entries) <= TIMELINE_MAX_ENTRIES:
        record["timeline"] = entries
    else:
        record["timeline"] = None
        record["timeline_note"] = f"{len(entries)} entries > {TIMELINE_MAX_ENTRIES}: see {path}"


class HttpClient:
    name = "http-client"
    reads = TOOL_READS['http-client']  # the settings it reads: model/settings.py
    keep_alive_version = None  # it never keeps a connection
    executable = sys.executable  # the client is a script run by this very interpreter
    install_hint = "nothing to install: scripts/http_load.py needs only the Python standard library"

    def version(self) -> str:
        return f"http_load.py (Python {platform.python_version()})"

    def command(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path) -> list[str]:
        command = [self.executable, str(CLIENT), url, "--requests", str(settings.requests)]
        if settings.rate:
            command += ["--rate", f"{settings.rate:g}", "--max-in-flight", str(concurrency)]
        else:
            command += ["--concurrency", str(concurrency)]
        if settings.time_limit:
            command += ["--duration", f"{settings.time_limit:g}"]
        command += ["--timeout", f"{client_timeout(settings):g}"]
        if settings.timeline:
            command += ["--timeline", str(workdir / "timeline.json")]
        return command

    def run(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
            cpu: str | None) -> dict[str, Any]:
        """Run http_load.py once and return its record (with 'error' set when the run itself failed)."""
        workdir.mkdir(parents=True, exist_ok=True)
        command = self.command(url, concurrency, settings, workdir)
        record: dict[str, Any] = {"tool": self.name, "command": command, "concurrency": concurrency,
                                  "keep_alive": False, "keep_alive_note": KEEP_ALIVE_NOTE, "exit_code": None}
        try:
            completed = processes.run_tool(command, timeout=client_timeout(settings) + KILL_MARGIN_S, cpu=cpu,
                                           cwd=REPO_ROOT)
        except OSError as error:
            record["error"] = f"could not start http_load.py: {error}"
            return record
        (workdir / "http_load.stdout").write_text(completed.stdout)
        record["exit_code"] = completed.returncode
        record["load_tool_resources"] = processes.tool_usage_record(completed)
        try:
            record.update(parse_run(completed.stdout))
        except ValueError as error:
            record["error"] = f"{error}; it said: {completed.stderr.strip()[-500:]}"
            return record
        if settings.timeline:
            attach_timeline(record, workdir / "timeline.json")
            # where the run's start lies on the Unix clock: a trace of the server is placed on the timeline with it
            record["clock_start_unix_s"] = json.loads(completed.stdout).get("clock_start_unix_s")
        record["error"] = (f"stopped by its own {client_timeout(settings):g} s timeout: "
                           f"{record['failed_by_kind']['timeout']} requests unfinished"
                           if record["timed_out"] else None)
        return record


TOOL = HttpClient()
