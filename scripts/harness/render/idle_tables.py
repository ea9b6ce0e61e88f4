"""Render the idle-connections records (results/idle-connections/*.json, written by scripts/bench.py idle).

One row per design: how many idle keep-alive connections it was asked to hold, how many
it kept, still held when the hold began and after it, its process group's memory (PSS)
before and at the peak, the difference per connection held when the hold began, and the
latency of a probe client meanwhile. A row whose server closed connections before or
during the hold says so. Reads records only.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.model.records import RESULTS_DIR
from harness.model.records.idle_record import IdleRecord

IDLE_DIR_NAME = "idle-connections"


def load_idle_records(results_dir: Path = RESULTS_DIR) -> list[IdleRecord]:
    return [IdleRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
            for path in sorted((results_dir / IDLE_DIR_NAME).glob("*.json"))]


def _held_note(record: IdleRecord) -> str:
    """Why the connections held differ from those opened: closed before the hold, or during it."""
    kept, at_start, after = (record.connections_kept_alive, record.connections_open_at_hold_start,
                             record.connections_open_after_hold)
    notes = []
    if at_start < kept:
        notes.append(f"⚠ {kept - at_start:,} closed by the server while the rest were opened "
                     f"({record.opening_seconds:g} s): its keep-alive timeout is shorter")
    if after < at_start:
        notes.append(f"⚠ {at_start - after:,} closed during the hold: the peak may count some it no longer held")
    return "; ".join(notes)


def _row(record: IdleRecord) -> str:
    probe = record.probe
    latency = "–" if probe.median_ms is None else f"{probe.median_ms:.1f} / {probe.max_ms or 0:.1f}"
    per_connection = "–" if record.kib_per_connection is None else f"{record.kib_per_connection:.2f}"
    refused = "; ".join(f"{why} ({count:,})" for why, count in record.connections_refused.items())
    note = _held_note(record)
    return (f"| {record.design} | {record.connections_kept_alive:,} of {record.connections_asked:,}"
            f"{' (' + refused + ')' if refused else ''} | {record.connections_open_at_hold_start:,} → "
            f"{record.connections_open_after_hold:,}{' ' + note if note else ''} | "
            f"{_mib(record.baseline_mib())} → **{_mib(record.peak_mib())}** | {per_connection} | "
            f"{latency} ({probe.failed} failed) |")


def _mib(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def idle_table(records: list[IdleRecord]) -> str:
    metrics = {record.memory_metric for record in records}
    metric = metrics.pop() if len(metrics) == 1 else "PSS or RSS (see each record's memory_metric)"
    lines = ["| design | idle connections kept | held when the hold began → after it | "
             f"{metric} MiB, before → peak | KiB per connection held | probe ms, median / max |",
             "|---|--:|--:|--:|--:|--:|", *(_row(record) for record in records)]
    first = records[0]
    pinning = first.environment.pinning
    lines += ["", f"*`scripts/bench.py idle`: connections opened one after another, each asking for `/` once "
              f"and kept open, then held idle for {first.hold_seconds:g} s while a probe client (a new connection "
              f"each time) asked for `/` every 0.25 s. {metric} of the server's whole process group; KiB per "
              "connection divides the growth by the connections the server still held when the hold began. "
              f"Server on CPU {pinning.server_cpu}, this script on CPU {pinning.load_tool_cpu}; "
              f"{first.environment.cpu_model}, commit {first.environment.commit[:7]}, "
              f"{first.started_utc[:10]}. Raw records: `results/{IDLE_DIR_NAME}/`.*"]
    return "\n".join(lines) + "\n"


def idle_files(generated_dir: Path, header: str, results_dir: Path = RESULTS_DIR) -> dict[Path, str]:
    records = load_idle_records(results_dir)
    if not records:
        return {}
    return {generated_dir / "idle-connections.md": header.format(source=f"results/{IDLE_DIR_NAME}/")
            + idle_table(records)}
