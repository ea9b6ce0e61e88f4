"""Our asyncio echo load client (scripts/echo_client.py): command line and parsing.

The client prints one JSON object, so nothing is scraped from human output.
One connection carries one sentence, so `concurrency` is both the number of
connections opened at once and the number of requests; the scenario's
`requests` is not used. The runner hands every tool an http:// URL; only its
host and port matter here.

Record mapping: complete = connections that ended (answered, wrong or failed)
before the time limit; failed = wrong answers + errors (connect, reset, early
close, timeout); requests_per_second = answered / duration_s.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness.model.paths import REPO_ROOT
from harness.model.settings import TOOL_READS, ScenarioSettings
from harness.system import processes

CLIENT = REPO_ROOT / "scripts" / "echo_client.py"
GRACE_SECONDS = 30  # beyond the client's own --timeout, before the harness kills it


def parse_output(stdout: str) -> dict[str, Any]:
    """The common record keys from the client's JSON; ValueError when there is no JSON object."""
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError as error:
        raise ValueError(f"echo_client.py printed no JSON ({error})") from None
    if not isinstance(report, dict) or "answered" not in report:
        raise ValueError("echo_client.py printed JSON without an 'answered' count")
    errors = report["errors"]
    unfinished = errors.get("timeout", 0)
    return {
        "complete": report["connections"] - unfinished,
        "failed": report["wrong"] + sum(errors.values()),
        "failed_by_kind": {"wrong": report["wrong"], **errors},
        "answered": report["answered"],
        "connections": report["connections"],
        "requests_per_second": report["connections_per_second"],
        "duration_s": report["duration_s"],
        "latency_ms": report["latency_ms"],
        "connect_ms": report["connect_ms"],
        "open_files": report["open_files"],
    }


class EchoClient:
    name = "echo-client"
    reads = TOOL_READS['echo-client']  # the settings it reads: model/settings.py
    keep_alive_version = None  # one sentence per connection: no keep-alive
    executable = sys.executable or "python3"  # a full path: require_tool finds it without PATH
    install_hint = "nothing to install: it is scripts/echo_client.py, run by the harness's own Python"

    def version(self) -> str:
        return f"echo_client.py (Python {platform.python_version()}, asyncio)"

    def command(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path) -> list[str]:
        address = urlsplit(url)
        if address.hostname is None or address.port is None:
            raise ValueError(f"no host and port in {url!r}")
        command = [self.executable, str(CLIENT), "--host", address.hostname, "--port", str(address.port),
                   "--connections", str(concurrency), "--timeout", f"{float(settings.time_limit or 60):g}",
                   "--timeline", str(workdir / "timeline.csv")]
        if settings.echo_rate:
            command += ["--rate", f"{settings.echo_rate:g}"]
        return command

    def run(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
            cpu: str | None) -> dict[str, Any]:
        """Run the client once and return its record (with 'error' set when the client itself failed)."""
        workdir.mkdir(parents=True, exist_ok=True)
        command = self.command(url, concurrency, settings, workdir)
        timeout = float(settings.time_limit or 60) + GRACE_SECONDS
        completed = processes.run_tool(command, timeout=timeout, cpu=cpu, cwd=REPO_ROOT)
        (workdir / "echo_client.json").write_text(completed.stdout)
        (workdir / "echo_client.stderr").write_text(completed.stderr)
        record: dict[str, Any] = {"tool": self.name, "command": command, "concurrency": concurrency,
                                  "keep_alive": False, "exit_code": completed.returncode,
                                  "load_tool_resources": processes.tool_usage_record(completed),
                                  "requests_requested": concurrency}  # one sentence per connection
        try:
            record.update(parse_output(completed.stdout))
        except (ValueError, KeyError, TypeError) as error:
            record["error"] = f"{error}; echo_client.py said: {completed.stderr.strip()[-500:]}"
            return record
        # Exit code 1 means some answers were wrong or missing: a result, counted in `failed`.
        record["error"] = None if completed.returncode in (0, 1) else completed.stderr.strip()[-500:]
        return record


TOOL = EchoClient()
