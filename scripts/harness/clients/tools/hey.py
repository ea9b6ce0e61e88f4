"""hey: command line and parsing of its per-request CSV (`-o csv`).

hey prints no summary in CSV mode, only one row per response: response-time,
DNS+dialup, DNS, Request-write, Response-delay, Response-read (all in seconds,
four decimals, so 0.1 ms resolution), status-code, and offset (seconds from
hey's start to the moment the request began). Everything is computed from it:

- complete: rows, whatever their status; non_2xx: rows whose status is not 2xx.
- failed: requests that got no response at all. hey writes *no row* for them
  (connection refused, reset, timeout: checked against a closed port and a
  server that resets, see tests/fixtures/hey/), so they are counted as
  requests sent minus rows. hey sends exactly (n // c) * c requests when it
  runs to the end: each of its c workers sends n // c.
- duration_s: from the earliest request start (offset) to the latest response
  end (offset + response-time). Timing the subprocess instead would add hey's
  start-up and its report; hey's own summary times nearly the same span.
- requests_per_second: complete / duration_s, as ab and hey's summary count it.
- latency_ms: mean, p50/p90/p99 (nearest rank), max, and the mode, defined on a
  histogram of 1 ms bins starting at 0 ms: the midpoint of the fullest bin (the
  faster bin wins a tie). "Designing Python Web Servers" reports mean / mode /
  worst latency from hey; this is our reproducible definition of its mode.

Time limit: hey's own `-z` ignores `-n`. To stop at n requests or after t
seconds, whichever comes first (as ab -t with -n does), we keep `-n` and let
coreutils `timeout` send SIGINT after t: hey handles SIGINT exactly as `-z`
does (workers stop after their request in flight, the report is printed), and
`timeout` then exits 124. Known limit: after such a stop the number of requests
sent is unknown, so requests that got no response cannot be counted: `failed`
is then None ("not measured"), never a guessed 0.

Keep-alive: hey reuses connections unless `-disable-keepalive`; our designs
answer `Connection: close`, so without it hey reconnects anyway.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.model.settings import TOOL_READS, ScenarioSettings
from harness.model.stats import latency_summary
from harness.system import processes

CSV_HEADER = ["response-time", "DNS+dialup", "DNS", "Request-write", "Response-delay", "Response-read",
              "status-code", "offset"]
DEFAULT_TIMEOUT_S = 20  # hey's own default per-request timeout, written out so the record shows it
TIMED_OUT_EXIT = 124  # what coreutils `timeout` returns when it had to send the signal
MODE_BIN_MS = 1.0


def parse_csv(text: str) -> list[dict[str, float]]:
    """hey -o csv: one dict per response row; an empty list when no request got an answer."""
    lines = text.strip().splitlines()
    if not lines or lines[0].split(",") != CSV_HEADER:
        raise ValueError("hey printed no CSV header (expected " + ",".join(CSV_HEADER) + ")")
    return [{name: float(value) for name, value in zip(CSV_HEADER, row, strict=True)}
            for row in csv.reader(io.StringIO("\n".join(lines[1:])))]


def latency_mode(latencies_ms: Sequence[float], bin_ms: float = MODE_BIN_MS) -> float:
    """Midpoint of the fullest bin of width bin_ms (bins start at 0 ms; ties go to the faster bin)."""
    counts = Counter(math.floor(value / bin_ms) for value in latencies_ms)
    fullest = min(counts, key=lambda index: (-counts[index], index))
    return (fullest + 0.5) * bin_ms


def requests_sent(requests: int, concurrency: int) -> int:
    """What hey sends when it runs to the end: each of its c workers sends n // c requests."""
    return (requests // concurrency) * concurrency


def parse_run(csv_text: str, requests_expected: int | None) -> dict[str, Any]:
    """One run's numbers from hey's CSV; requests_expected is None when the time limit stopped hey."""
    rows = parse_csv(csv_text)
    complete = len(rows)
    non_2xx = sum(1 for row in rows if not 200 <= row["status-code"] < 300)
    failed = None if requests_expected is None else requests_expected - complete
    record: dict[str, Any] = {"complete": complete, "failed": failed, "non_2xx": non_2xx,
                              "requests_sent": requests_expected, "requests_per_second": 0.0,
                              "duration_s": 0.0, "latency_ms": None}
    if rows:
        start = min(row["offset"] for row in rows)
        end = max(row["offset"] + row["response-time"] for row in rows)
        latencies = [round(row["response-time"] * 1000, 1) for row in rows]  # hey prints 0.1 ms steps
        record["duration_s"] = round(end - start, 4)
        record["requests_per_second"] = complete / record["duration_s"] if record["duration_s"] > 0 else 0.0
        record["latency_ms"] = {**latency_summary(latencies), "mode": latency_mode(latencies)}
    return record


class Hey:
    name = "hey"
    reads = TOOL_READS['hey']  # the settings it reads: model/settings.py
    keep_alive_version = "HTTP/1.1"  # how it asks to keep a connection: the verifier asks the same way
    executable = "hey"
    install_hint = "sudo apt-get install hey"

    def version(self) -> str:
        # hey has no --version flag; the Debian package knows what it installed.
        try:
            answer = processes.run_tool(["dpkg-query", "-W", "-f=${Version}", "hey"], timeout=10)
        except OSError:
            return "hey (version unknown)"
        version = answer.stdout.strip() if answer.returncode == 0 else ""
        return f"hey {version}" if version else "hey (version unknown)"

    def command(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path | None = None) -> list[str]:
        timeout = settings.timeout or DEFAULT_TIMEOUT_S
        command: list[str] = []
        if settings.time_limit:
            # SIGINT after the limit stops hey like -z would, but keeps -n; a hey that ignores it
            # (requests in flight can take up to the request timeout) is killed after that plus 5 s.
            command += ["timeout", "--signal=INT", f"--kill-after={timeout + 5:g}", f"{settings.time_limit:g}"]
        command += ["hey", "-n", str(settings.requests), "-c", str(concurrency), "-t", f"{timeout:g}"]
        if not settings.keep_alive:
            command.append("-disable-keepalive")
        command += ["-o", "csv", url]
        return command

    def run(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
            cpu: str | None) -> dict[str, Any]:
        """Run hey once and return its record (with 'error' set when hey itself failed)."""
        workdir.mkdir(parents=True, exist_ok=True)
        command = self.command(url, concurrency, settings)
        record: dict[str, Any] = {"tool": self.name, "command": command, "concurrency": concurrency,
                                  "keep_alive": bool(settings.keep_alive), "exit_code": None,
                                  "stopped_by_time_limit": False}
        time_limit = float(settings.time_limit or 600)
        timeout = float(settings.timeout or DEFAULT_TIMEOUT_S)
        try:
            completed = processes.run_tool(command, timeout=time_limit + 2 * timeout + 30, cpu=cpu)
        except OSError as error:
            record["error"] = f"could not start hey: {error}"
            return record
        (workdir / "hey.csv").write_text(completed.stdout)
        record["exit_code"] = completed.returncode
        record["load_tool_resources"] = processes.tool_usage_record(completed)
        stopped = bool(settings.time_limit) and completed.returncode == TIMED_OUT_EXIT
        record["stopped_by_time_limit"] = stopped
        if completed.returncode != 0 and not stopped:
            record["error"] = _first_line(completed.stderr) or f"hey exited with code {completed.returncode}"
            return record
        expected = None if stopped else requests_sent(settings.requests, concurrency)
        try:
            record.update(parse_run(completed.stdout, expected))
            record["error"] = None
        except ValueError as error:
            record["error"] = f"{error}; hey said: {completed.stderr.strip()[-500:]}"
        return record


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


TOOL = Hey()
