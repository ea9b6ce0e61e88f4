"""ApacheBench (ab): command line and parsing.

ab has no machine-readable summary, so the summary lines are read with anchored
regexes; per-request timings come from its machine-readable files: `-e` (CSV of
percentiles, float ms) and `-g` (TSV, one row per request, whole ms).

A known ab bug: `-e` indexes past its array for high percentiles when fewer than
about 50 requests completed, and prints 0.000 there. With 50 or fewer requests we
therefore compute the percentiles ourselves from `-g`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from harness.model.settings import TOOL_READS, ScenarioSettings
from harness.model.stats import latency_summary
from harness.system import processes

SUMMARY_PATTERNS = {
    "complete": r"^Complete requests:\s+(\d+)",
    "failed": r"^Failed requests:\s+(\d+)",
    "non_2xx": r"^Non-2xx responses:\s+(\d+)",
    "requests_per_second": r"^Requests per second:\s+([\d.]+)",
    "duration_s": r"^Time taken for tests:\s+([\d.]+) seconds",
    # The mean of the "Total" connection times (whole ms). Not "Time per request (mean)": that line is
    # concurrency x duration / completed, which in a time-limited run exceeds even the slowest request.
    "mean_ms": r"^Total:\s+\d+\s+(\d+)",
    # Only with -k: how many answers came on a connection kept open. ab falls back to a new connection
    # whenever an answer does not say "Connection: keep-alive", silently: this line is the proof.
    "keep_alive_requests": r"^Keep-Alive requests:\s+(\d+)",
}
FAILED_KINDS = re.compile(r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)")
CSV_RELIABLE_ABOVE = 50


def parse_summary(stdout: str) -> dict[str, Any]:
    """Numbers from ab's text summary; missing optional lines become 0."""
    summary: dict[str, Any] = {}
    for key, pattern in SUMMARY_PATTERNS.items():
        match = re.search(pattern, stdout, re.MULTILINE)
        if match is None and key not in ("non_2xx", "failed", "mean_ms", "keep_alive_requests"):
            raise ValueError(f"ab output has no {key!r} line")
        number = match.group(1) if match else "0"
        summary[key] = float(number) if "." in number or key == "mean_ms" else int(number)
    kinds = FAILED_KINDS.search(stdout)
    connect, receive, length, exceptions = (int(n) for n in kinds.groups()) if kinds else (0, 0, 0, 0)
    summary["failed_by_kind"] = {"connect": connect, "receive": receive, "length": length, "exceptions": exceptions}
    return summary


def parse_percentiles_csv(text: str) -> dict[int, float]:
    """ab -e: 'Percentage served,Time in ms' then one row per percent 0..100."""
    rows = {}
    for line in text.strip().splitlines()[1:]:
        percent, milliseconds = line.split(",")
        rows[int(percent)] = float(milliseconds)
    return rows


def parse_gnuplot_tsv(text: str) -> list[float]:
    """ab -g: one row per request; the 'ttime' column is its total time in whole ms."""
    lines = text.strip().splitlines()
    if not lines:
        return []
    column = lines[0].split("\t").index("ttime")
    return [float(line.split("\t")[column]) for line in lines[1:]]


def latency_from_files(mean_ms: float, complete: int, csv_text: str, tsv_text: str) -> dict[str, float] | None:
    """p50/p90/p99/max from -e when it is reliable, else from -g; mean from the summary."""
    if complete == 0:
        return None
    if complete > CSV_RELIABLE_ABOVE and csv_text.strip():
        table = parse_percentiles_csv(csv_text)
        return {"mean": mean_ms, "p50": table[50], "p90": table[90], "p99": table[99], "max": table[100]}
    latencies = parse_gnuplot_tsv(tsv_text)
    if not latencies:
        return None
    return {**latency_summary(latencies), "mean": mean_ms}


def parse_run(stdout: str, csv_text: str, tsv_text: str) -> dict[str, Any]:
    """One run record from ab's stdout and its -e / -g files."""
    summary = parse_summary(stdout)
    summary["latency_ms"] = latency_from_files(summary.pop("mean_ms"), summary["complete"], csv_text, tsv_text)
    return summary


class ApacheBench:
    name = "ab"
    reads = TOOL_READS['ab']  # the settings it reads: model/settings.py
    keep_alive_version = "HTTP/1.0"  # ab -k asks in HTTP/1.0, with Connection: Keep-Alive
    executable = "ab"
    install_hint = "sudo apt-get install apache2-utils"

    def version(self) -> str:
        first = subprocess.run(["ab", "-V"], capture_output=True, text=True, timeout=10).stdout.splitlines()
        # "This is ApacheBench, Version 2.3 <$Revision: ... $>" -> "ApacheBench 2.3"
        match = re.search(r"ApacheBench, Version (\S+)", first[0]) if first else None
        return f"ApacheBench {match.group(1)}" if match else "ApacheBench (unknown version)"

    def command(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path) -> list[str]:
        command = ["ab"]
        if settings.time_limit:
            command += ["-t", str(settings.time_limit)]  # -t first: it resets -n to 50000
        command += ["-n", str(settings.requests), "-c", str(concurrency)]
        if settings.keep_alive:
            command.append("-k")
        command += [f"-{flag}" for flag in settings.ab_flags or []]  # e.g. "r", "l"
        command += ["-e", str(workdir / "ab.csv"), "-g", str(workdir / "ab.tsv"), url]
        return command

    def run(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
            cpu: str | None) -> dict[str, Any]:
        """Run ab once and return its record (with 'error' set when ab itself failed)."""
        workdir.mkdir(parents=True, exist_ok=True)
        command = self.command(url, concurrency, settings, workdir)
        timeout = float(settings.time_limit or 600) + 60
        completed = processes.run_tool(command, timeout=timeout, cpu=cpu)
        record: dict[str, Any] = {"tool": self.name, "command": command, "concurrency": concurrency,
                                  "keep_alive": bool(settings.keep_alive), "exit_code": completed.returncode,
                                  "load_tool_resources": processes.tool_usage_record(completed)}
        (workdir / "ab.stdout").write_text(completed.stdout)
        try:
            record.update(parse_run(completed.stdout, _read(workdir / "ab.csv"), _read(workdir / "ab.tsv")))
            record["error"] = None if completed.returncode == 0 else completed.stderr.strip()[-500:]
        except ValueError as error:
            record["error"] = f"{error}; ab said: {completed.stderr.strip()[-500:]}"
        return record


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


TOOL = ApacheBench()
