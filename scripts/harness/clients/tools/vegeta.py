"""vegeta: the constant-rate (open-loop) load tool, `vegeta attack` then `vegeta encode --to csv`.

Why vegeta: it sends requests on a fixed schedule whatever the server does (open loop), so a
server past its capacity shows its queue in the latency instead of slowing the tool down
(coordinated omission), and it is the field's tool for exactly that. Installed by
scripts/install_vegeta.sh (`make install`) into .venv/bin.

`vegeta encode --to csv` writes one row per request: timestamp (Unix ns, when the request was
sent), status code (0: no answer), latency (ns), bytes out, bytes in, error, body (base64),
attack name, sequence number, method, URL, headers. Everything is computed from it:

- complete: requests with an answer (any status); failed: requests with none (code 0: refused,
  reset, timed out), by the error vegeta gives (`failed_by_kind`, the first words of it).
- status_counts: answers by status; latency_ms: over every answer; latency_ms_2xx: over 2xx
  answers only (a fast 503 is not a served request).
- duration_s: from the first request sent to the last answer; requests_per_second: 2xx answers
  a second over it (what the server served, not what it was offered).
- late_ms: how late vegeta sent its requests against its own schedule (request `seq` due at
  first + seq / rate), p50 and p99: near 0 when the tool kept the offered rate.
- timeline(rows, origin): second by second (by when each request was sent), what was sent, served,
  refused and never answered, the p50 and p99 of the 2xx answers, and the most requests in flight
  at once (sent and not yet answered: in the server, its queue, or the kernel's backlog). Rows of
  several runs at once may be given: their timestamps are the clock's, so runs that overlap count
  together.

Settings: rate (requests a second; a list sweeps it, suites/plan.py), schedule_seconds (how long
each rate is offered: vegeta's -duration), concurrency (vegeta's -max-workers, the cap on
requests in flight), time_limit (the schedule when there is no schedule_seconds), timeout
(per request, default 30 s as vegeta's own). Connections are not kept alive (-keepalive=false),
as with our own open-loop client, so both can be compared on the same designs.
"""

from __future__ import annotations

import csv
import io
import math
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from harness.model.settings import TOOL_READS, ScenarioSettings
from harness.model.stats import latency_summary
from harness.system import processes

VERSION = "v12.13.0"  # scripts/install_vegeta.sh installs this one
DEFAULT_TIMEOUT_S = 30  # vegeta's own default per-request timeout, written out so the record shows it
CSV_COLUMNS = 12  # timestamp, code, latency, bytes out, bytes in, error, body, attack, seq, method, url, headers


def executable() -> str:
    """vegeta from the venv (where make install puts it), else from PATH."""
    beside = Path(sys.executable).with_name("vegeta")
    return str(beside) if beside.exists() else (shutil.which("vegeta") or str(beside))


def parse_csv(text: str) -> list[dict[str, Any]]:
    """vegeta encode --to csv: one dict per request, in sequence order."""
    rows = []
    for line_number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row:
            continue
        if len(row) != CSV_COLUMNS:
            raise ValueError(f"vegeta CSV line {line_number} has {len(row)} columns, expected {CSV_COLUMNS}")
        rows.append({"sent_ns": int(row[0]), "status": int(row[1]), "latency_ns": int(row[2]), "error": row[5],
                     "seq": int(row[8])})
    return sorted(rows, key=lambda row: row["seq"])


def error_kind(error: str) -> str:
    """A short class for vegeta's error text: refused, reset, timeout, eof, or the text's last words."""
    lowered = error.lower()
    for kind, marker in (("refused", "connection refused"), ("reset", "connection reset"),
                         ("timeout", "timeout"), ("timeout", "deadline exceeded"), ("eof", "eof")):
        if marker in lowered:
            return kind
    return lowered.rsplit(":", 1)[-1].strip()[:40] or "unknown"


def parse_run(text: str, rate: float | None) -> dict[str, Any]:
    """One run's numbers from vegeta's CSV (the keys every adapter returns, and vegeta's extras)."""
    rows = parse_csv(text)
    answered = [row for row in rows if row["status"]]
    served = [row for row in answered if 200 <= row["status"] < 300]
    record: dict[str, Any] = {
        "requests_sent": len(rows), "complete": len(answered), "failed": len(rows) - len(answered),
        "failed_by_kind": dict(Counter(error_kind(row["error"]) for row in rows if not row["status"])),
        "status_counts": {str(code): count for code, count in sorted(Counter(r["status"] for r in answered).items())},
        "non_2xx": len(answered) - len(served), "requests_per_second": 0.0, "duration_s": 0.0,
        "latency_ms": None, "latency_ms_2xx": None, "late_ms": None, "rate": rate}
    if not rows:
        return record
    first = rows[0]["sent_ns"]
    end = max(row["sent_ns"] + row["latency_ns"] for row in rows)
    record["duration_s"] = round((end - first) / 1e9, 4)
    record["requests_per_second"] = len(served) / record["duration_s"] if record["duration_s"] > 0 else 0.0
    if answered:
        record["latency_ms"] = latency_summary([row["latency_ns"] / 1e6 for row in answered])
    if served:
        record["latency_ms_2xx"] = latency_summary([row["latency_ns"] / 1e6 for row in served])
    if rate:
        late = sorted(max(0.0, (row["sent_ns"] - first) / 1e6 - row["seq"] * 1000 / rate) for row in rows)
        record["late_ms"] = {"p50": round(late[len(late) // 2], 3),
                             "p99": round(late[max(0, math.ceil(len(late) * 0.99) - 1)], 3)}
    return record


def timeline(rows: list[dict[str, Any]], origin_ns: int, bin_s: float = 1.0) -> list[dict[str, Any]]:
    """Per `bin_s` from origin_ns (by send time): sent, ok (2xx), refused (other answers), failed (none), p50/p99 ms of
    the 2xx answers, and in_flight_peak: the most requests sent and not yet answered at any instant of the bin."""
    if not rows:
        return []
    width = int(bin_s * 1e9)
    ends = [row["sent_ns"] + row["latency_ns"] for row in rows]
    bins = max(max(ends), max(row["sent_ns"] for row in rows)) - origin_ns
    points: list[dict[str, Any]] = [{"t_s": round(index * bin_s, 3), "sent": 0, "ok": 0, "refused": 0, "failed": 0,
                                     "p50_ms": None, "p99_ms": None, "in_flight_peak": 0}
                                    for index in range(bins // width + 1)]
    served: list[list[float]] = [[] for _ in points]
    for row in rows:
        index = (row["sent_ns"] - origin_ns) // width
        point = points[index]
        point["sent"] += 1
        if not row["status"]:
            point["failed"] += 1
        elif 200 <= row["status"] < 300:
            point["ok"] += 1
            served[index].append(row["latency_ns"] / 1e6)
        else:
            point["refused"] += 1
    for point, latencies in zip(points, served, strict=True):
        if latencies:
            summary = latency_summary(latencies)
            point["p50_ms"], point["p99_ms"] = summary["p50"], summary["p99"]
    # In flight: +1 when sent, -1 when answered (an answer and a send at the same instant: the answer first). A bin
    # starts at the count the one before ended with, so a bin with no event still shows what was in flight.
    events = sorted([(row["sent_ns"], 1) for row in rows] + [(end, -1) for end in ends])
    in_flight, current = 0, 0
    for at, change in events:
        index = min(len(points) - 1, max(0, (at - origin_ns) // width))
        while current < index:
            current += 1
            points[current]["in_flight_peak"] = in_flight
        in_flight += change
        points[index]["in_flight_peak"] = max(points[index]["in_flight_peak"], in_flight)
    return points


def schedule_seconds(settings: ScenarioSettings) -> float:
    """How long vegeta offers its rate: schedule_seconds when set, else the time limit."""
    return float(settings.schedule_seconds or settings.time_limit)


class Vegeta:
    name = "vegeta"
    reads = TOOL_READS["vegeta"]  # the settings it reads: model/settings.py
    keep_alive_version = None  # -keepalive=false: a new connection per request, as our open-loop client
    install_hint = "scripts/install_vegeta.sh (run by make install): go install github.com/tsenart/vegeta/v12@" + VERSION

    @property
    def executable(self) -> str:
        return executable()

    def version(self) -> str:
        return f"vegeta {VERSION} (go install; its -version is empty when built so)"

    def command(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path) -> list[str]:
        rate = settings.rate
        if not rate or isinstance(rate, list):
            raise ValueError("vegeta needs one offered rate per run (the scenario's `rate`)")
        timeout = settings.timeout or DEFAULT_TIMEOUT_S
        return [self.executable, "attack", f"-rate={rate:g}/1s", f"-duration={schedule_seconds(settings):g}s",
                f"-max-workers={concurrency}", "-keepalive=false", f"-timeout={timeout:g}s",
                f"-targets={workdir / 'targets.txt'}", f"-output={workdir / 'results.bin'}"]

    def run(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
            cpu: str | None) -> dict[str, Any]:
        """Attack at the scenario's rate, encode to CSV, and return the record ('error' set when vegeta failed)."""
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "targets.txt").write_text(f"GET {url}\n", encoding="ascii")
        command = self.command(url, concurrency, settings, workdir)
        record: dict[str, Any] = {"tool": self.name, "command": command, "concurrency": concurrency,
                                  "keep_alive": False, "exit_code": None}
        limit = schedule_seconds(settings) + float(settings.timeout or DEFAULT_TIMEOUT_S) + 30
        try:
            attack = processes.run_tool(command, timeout=limit, cpu=cpu)
            record["exit_code"] = attack.returncode
            record["load_tool_resources"] = processes.tool_usage_record(attack)
            if attack.returncode != 0:
                record["error"] = attack.stderr.strip()[-300:] or f"vegeta exited with code {attack.returncode}"
                return record
            encoded = processes.run_tool([self.executable, "encode", "--to", "csv", str(workdir / "results.bin")],
                                         timeout=60, cpu=cpu)
        except OSError as error:
            record["error"] = f"could not start vegeta ({self.install_hint}): {error}"
            return record
        (workdir / "results.csv").write_text(encoded.stdout)
        try:
            record.update(parse_run(encoded.stdout, float(settings.rate)))
            record["error"] = None if encoded.returncode == 0 else encoded.stderr.strip()[-300:]
        except ValueError as error:
            record["error"] = str(error)
        return record


TOOL = Vegeta()
