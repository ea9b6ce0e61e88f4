"""Render the idle-connections records (results/idle-connections/*.json, written by scripts/bench.py idle).

One row per design: how many idle keep-alive connections it was asked to hold, how many
it kept and still had open after the hold, its process group's RSS before and at the
peak, the difference per connection held, and the latency of a probe client meanwhile.
Reads records only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.model.records import RESULTS_DIR

IDLE_DIR_NAME = "idle-connections"


def load_idle_records(results_dir: Path = RESULTS_DIR) -> list[dict[str, Any]]:
    return [json.loads(path.read_text(encoding="utf-8"))
            for path in sorted((results_dir / IDLE_DIR_NAME).glob("*.json"))]


def _row(record: dict[str, Any]) -> str:
    probe = record["probe"]
    latency = ("–" if probe["median_ms"] is None
               else f"{probe['median_ms']:.1f} / {probe['max_ms']:.1f}")
    per_connection = "–" if record["kib_per_connection"] is None else f"{record['kib_per_connection']:.2f}"
    refused = "; ".join(f"{why} ({count:,})" for why, count in record["connections_refused"].items())
    return (f"| {record['design']} | {record['connections_kept_alive']:,} of {record['connections_asked']:,}"
            f"{' (' + refused + ')' if refused else ''} | {record['connections_open_after_hold']:,} | "
            f"{record['baseline_rss_mib']:.1f} → **{record['peak_rss_mib']:.1f}** | {per_connection} | "
            f"{latency} ({probe['failed']} failed) |")


def idle_table(records: list[dict[str, Any]]) -> str:
    lines = ["| design | idle connections kept | still open after the hold | RSS MiB, before → peak | "
             "KiB per connection | probe ms, median / max |", "|---|--:|--:|--:|--:|--:|",
             *(_row(record) for record in records)]
    first = records[0]
    pinning = first["environment"]["pinning"]
    lines += ["", f"*`scripts/bench.py idle`: connections opened one after another, each asking for `/` once "
              f"and kept open, then held idle for {first['hold_seconds']:g} s while a probe client (a new connection "
              f"each time) asked for `/` every 0.25 s. RSS of the server's whole process group. Server on CPU "
              f"{pinning['server_cpu']}, this script on CPU {pinning['load_tool_cpu']}; "
              f"{first['environment']['cpu_model']}, commit {first['environment']['commit'][:7]}, "
              f"{first['measured_at'][:10]}. Raw records: `results/{IDLE_DIR_NAME}/`.*"]
    return "\n".join(lines) + "\n"


def idle_files(generated_dir: Path, header: str, results_dir: Path = RESULTS_DIR) -> dict[Path, str]:
    records = load_idle_records(results_dir)
    if not records:
        return {}
    return {generated_dir / "idle-connections.md": header.format(source=f"results/{IDLE_DIR_NAME}/")
            + idle_table(records)}
