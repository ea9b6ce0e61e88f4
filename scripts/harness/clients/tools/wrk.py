"""wrk: command line and parsing of the JSON line printed by wrk_report.lua.

wrk runs for a duration (-d) with a fixed number of open connections (-c)
spread over threads (-t); it has no request count, so the scenario's
`requests` is ignored and `time_limit` is the duration, rounded up to whole
seconds (wrk 4.1 rejects fractions such as 1500ms). One thread: the load tool
gets one pinned core, and more threads would only share it.

Our Lua script's done() prints a marker line and one JSON line (requests,
duration and latency in microseconds, wrk's error counters); we never read
wrk's human summary. What the counters mean, checked on wrk 4.1.0 (see
tests/fixtures/wrk/):

- complete = responses received, any status ("requests" in wrk's words).
- non_2xx = wrk's "status" errors, which are responses with status > 399.
- failed = connect + read + write + timeout. A server that resets shows up as
  read errors; "timeout" counts responses that arrived later than --timeout:
  they are in `complete` but *not* in the latency statistics. wrk's default
  timeout is 2 s, which would silently drop every slow request from the
  percentiles, so we pass the same 20 s hey uses unless `timeout` is set.
- latency is measured from writing the request to the full response, so unlike
  ab's and hey's it leaves out the TCP connect of a new connection.
- If wrk cannot connect at start-up it prints "unable to connect" and exits 1:
  recorded as the run's error.

Pipelining: with `pipeline_depth` N > 1, wrk_pipeline.lua writes N requests at
once on each connection and waits for their N answers before the next batch;
wrk counts every answer but times batches: one sample per batch, from its write
to its last answer. So a pipelined run's latency is per batch, and the record
says so (`latency_per_batch_of`: N). wrk's own summary of it is wrong: after
the run, wrk 4.1.0 "corrects" its histogram for coordinated omission
(stats_correct in its stats.c) with an interval of duration / (responses /
connections), a per-request interval; every batch sample of about N intervals
then gets N - 1 synthetic samples below it, some below the histogram's minimum,
where its percentile walk never reaches them (its p90 and p99 came out 0). The
correction is exact arithmetic on the histogram, so `batch_latency_ms` undoes
it from the histogram wrk_pipeline.lua prints, and summarises the batches. A
check that it worked: the batches recovered equal the answers / N (less the
batches cut by the end of the run), and their mean is what Little's law gives
a closed loop, connections x N / rate (tests/harness/clients/test_keep_alive_scenarios.py).

Keep-alive: wrk keeps connections open and reconnects whenever a response says
`Connection: close`, which our designs always do; wrk counts no error for it.
Without keep_alive we also send `Connection: close`, so servers that could keep
the connection alive close it too, and every request pays for a new connection.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.model.settings import TOOL_READS, ScenarioSettings
from harness.model.stats import latency_summary
from harness.system import processes

REPORT_SCRIPT = Path(__file__).with_name("wrk_report.lua")
PIPELINE_SCRIPT = Path(__file__).with_name("wrk_pipeline.lua")  # pipeline_depth > 1: batches of requests
REPORT_MARKER = "wrk_report.lua: json follows"  # printed by wrk_report.lua right before its JSON line
# `header_statistic`: wrk_header_report.lua also summarises one response header (X-Pool-Wait-Us) after the report.
HEADER_SCRIPT = Path(__file__).with_name("wrk_header_report.lua")
HEADER_MARKER = "wrk_header_report.lua: json follows"
# `request_heads = "production"`: every request a production-shaped head, each unique (production_heads.txt).
PRODUCTION_HEADS_SCRIPT = Path(__file__).with_name("wrk_production_heads.lua")
HISTOGRAM_MARKER = "wrk_pipeline.lua: histogram follows"  # then [[microseconds, count], ...], wrk's buckets
DEFAULT_TIMEOUT_S = 20  # the same per-request timeout as hey's default
THREADS = 1
FAILED_KINDS = ("connect", "read", "write", "timeout")


def json_after(stdout: str, marker: str, what: str, script: str) -> Any:
    """The JSON line (`what`: a report, a histogram) one of our Lua scripts printed right after its marker line."""
    lines = stdout.splitlines()
    if marker not in lines:
        raise ValueError(f"wrk printed no {what} from {script}")
    position = lines.index(marker)
    if position + 1 >= len(lines):
        raise ValueError(f"{script}'s marker has no JSON line after it")
    return json.loads(lines[position + 1])


def parse_report(stdout: str) -> dict[str, Any]:
    """The run's report: requests, duration and latency in microseconds, wrk's error counters."""
    report: dict[str, Any] = json_after(stdout, REPORT_MARKER, "report", "wrk_report.lua")
    return report


def parse_header_statistic(stdout: str) -> dict[str, Any]:
    """The header's count, mean, percentiles and max (wrk_header_report.lua)."""
    statistic: dict[str, Any] = json_after(stdout, HEADER_MARKER, "header statistic", "wrk_header_report.lua")
    return statistic


def parse_run(stdout: str) -> dict[str, Any]:
    """One run's numbers from wrk's stdout."""
    report = parse_report(stdout)
    errors, latency, duration_s = report["errors"], report["latency_us"], report["duration_us"] / 1e6
    recorded = report["requests"] - errors["timeout"]  # requests that made it into the latency statistics
    return {
        "complete": report["requests"],
        "failed": sum(errors[kind] for kind in FAILED_KINDS),
        "non_2xx": errors["status"],
        "failed_by_kind": {kind: errors[kind] for kind in FAILED_KINDS},
        "duration_s": duration_s,
        "requests_per_second": report["requests"] / duration_s if duration_s > 0 else 0.0,
        "bytes": report["bytes"],
        "latency_ms": {key: latency[key] / 1000 for key in ("mean", "p50", "p90", "p99", "max")}
        if recorded > 0 else None,
    }


def parse_histogram(stdout: str) -> list[tuple[int, int]]:
    """wrk's non-empty latency buckets as wrk_pipeline.lua printed them: (microseconds, count)."""
    buckets = json_after(stdout, HISTOGRAM_MARKER, "histogram", "wrk_pipeline.lua")
    return [(int(value), int(count)) for value, count in buckets]


def correction_interval(responses: int, duration_us: int, connections: int) -> int | None:
    """The interval wrk 4.1.0 corrects its histogram with (wrk.c): duration / (responses / connections), in µs."""
    per_connection = responses // connections
    return duration_us // per_connection if per_connection > 0 else None


def uncorrected(buckets: list[tuple[int, int]], interval: int | None) -> dict[int, int]:
    """The histogram before wrk's correction, from the buckets wrk shows after it (its minimum and up).

    A bucket at m above one interval holds its own samples plus one synthetic sample for every
    sample at m + k intervals (k >= 1) that was at least two intervals long; walking down from the
    top, those are already known, so each bucket's own count is what is left. Exact, since wrk's
    correction never adds to a bucket above the one it reads.
    """
    if interval is None:
        return dict(buckets)
    above: dict[int, int] = {}  # per residue modulo the interval: samples >= 2 intervals seen so far
    original: dict[int, int] = {}
    for value, count in sorted(buckets, reverse=True):
        own = count - (above.get(value % interval, 0) if value > interval else 0)
        if own < 0:
            raise ValueError(f"the histogram is not one wrk corrected with an interval of {interval} µs")
        if own:
            original[value] = own
        if value >= 2 * interval:
            above[value % interval] = above.get(value % interval, 0) + own
    return original


def batch_latency_ms(stdout: str, connections: int) -> tuple[dict[str, float], int]:
    """A pipelined run's latency per batch (mean, p50, p90, p99, max in ms) and how many batches were timed."""
    report = parse_report(stdout)
    interval = correction_interval(report["requests"], report["duration_us"], connections)
    batches = uncorrected(parse_histogram(stdout), interval)
    if not batches:
        raise ValueError("wrk timed no batch")
    samples_ms = [value / 1000 for value, count in batches.items() for _ in range(count)]  # latency_summary sorts
    return latency_summary(samples_ms), len(samples_ms)


def duration_seconds(time_limit: float) -> int:
    """wrk takes whole seconds: round the time limit up, to at least 1."""
    return max(1, math.ceil(time_limit))


class Wrk:
    name = "wrk"
    reads = TOOL_READS['wrk']  # the settings it reads: model/settings.py
    keep_alive_version = "HTTP/1.1"  # how it asks to keep a connection: the verifier asks the same way
    executable = "wrk"
    install_hint = "sudo apt-get install wrk"

    def version(self) -> str:
        # `wrk -v` prints "wrk 4.1.0 [epoll] Copyright ..." and the usage, and exits 1.
        try:
            answer = processes.run_tool(["wrk", "-v"], timeout=10)
        except OSError:
            return "wrk (version unknown)"
        first = answer.stdout.splitlines()[0] if answer.stdout.strip() else ""
        return first.split(" Copyright")[0].strip() or "wrk (version unknown)"

    def command(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path | None = None) -> list[str]:
        timeout = settings.timeout or DEFAULT_TIMEOUT_S
        command = ["wrk", "-t", str(settings.wrk_threads or THREADS), "-c", str(concurrency),
                   "-d", f"{duration_seconds(settings.time_limit)}s", "--timeout", f"{timeout:g}s"]
        if not settings.keep_alive:
            command += ["-H", "Connection: close"]
        depth = int(settings.pipeline_depth or 1)
        if depth > 1:  # wrk hands what follows `--` to the script's init()
            return command + ["-s", str(PIPELINE_SCRIPT), url, "--", str(depth)]
        if settings.request_heads == "production":
            return command + ["-s", str(PRODUCTION_HEADS_SCRIPT), url]
        if settings.header_statistic:  # the header's name reaches every wrk thread's Lua through the environment
            return ["env", f"WRK_HEADER={settings.header_statistic}", *command, "-s", str(HEADER_SCRIPT), url]
        return command + ["-s", str(REPORT_SCRIPT), url]

    def run(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
            cpu: str | None) -> dict[str, Any]:
        """Run wrk once and return its record (with 'error' set when wrk itself failed)."""
        workdir.mkdir(parents=True, exist_ok=True)
        record: dict[str, Any] = {"tool": self.name, "command": None, "concurrency": concurrency,
                                  "keep_alive": bool(settings.keep_alive), "exit_code": None}
        if not settings.time_limit:
            record["error"] = "wrk runs for a duration: the scenario needs a time_limit"
            return record
        command = record["command"] = self.command(url, concurrency, settings)
        limit = duration_seconds(settings.time_limit) + float(settings.timeout or DEFAULT_TIMEOUT_S) + 30
        try:
            completed = processes.run_tool(command, timeout=limit, cpu=cpu)
        except OSError as error:
            record["error"] = f"could not start wrk: {error}"
            return record
        (workdir / "wrk.stdout").write_text(completed.stdout)
        record["exit_code"] = completed.returncode
        record["load_tool_resources"] = processes.tool_usage_record(completed)
        if completed.returncode != 0:
            record["error"] = completed.stderr.strip()[-500:] or f"wrk exited with code {completed.returncode}"
            return record
        try:
            record.update(parse_run(completed.stdout))
            record["error"] = None
            if settings.header_statistic:  # e.g. {"header": "X-Pool-Wait-Us", "count": ..., "p99": ...}
                record["header_statistic"] = parse_header_statistic(completed.stdout)
            depth = int(settings.pipeline_depth or 1)
            if depth > 1:  # timed per batch, and wrk's own summary of the batches is wrong (module header)
                record["latency_ms"], record["batches_timed"] = batch_latency_ms(completed.stdout, concurrency)
                record["latency_per_batch_of"] = depth
        except (ValueError, KeyError, TypeError) as error:  # a report wrk_report.lua could not fill
            record["error"] = f"{error!r}; wrk said: {completed.stderr.strip()[-500:]}"
        return record


TOOL = Wrk()
