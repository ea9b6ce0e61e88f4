"""`bench.py idle` (harness/suites/idle.py): the record it writes, and the input it refuses."""

from __future__ import annotations

import dataclasses
import json
import resource
import shutil
from pathlib import Path

import bench
import pytest
from harness.model.paths import REPO_ROOT
from harness.model.records.idle_record import IdleRecord

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "idle" / "hardened.json"  # written before records had a schema


def run(tmp_path, *args: str) -> tuple[int, IdleRecord | None]:
    """bench.py idle's exit code, and the record it wrote read through its class (None: it wrote none)."""
    output = tmp_path / "record.json"
    code = bench.main(["idle", *args, "--output", str(output)])
    return code, IdleRecord.from_json(json.loads(output.read_text()), str(output)) if output.exists() else None


def test_a_keep_alive_design_holds_every_connection_and_the_probe_is_served(tmp_path) -> None:
    code, record = run(tmp_path, "hardened", "--connections", "100", "--hold", "0.6")
    assert code == 0 and record is not None and record.schema == IdleRecord.SCHEMA
    assert record.connections_kept_alive == record.connections_open_at_hold_start == 100
    assert record.connections_open_after_hold == 100 and record.memory_metric == "PSS"
    assert record.connections_refused == {}
    assert record.peak_rss_mib >= record.baseline_rss_mib > 0
    assert record.probe.requests >= 1 and record.probe.failed == 0
    assert record.server_alive_after is True
    assert record.server_command[-1] != "--keep-alive-timeout"  # nothing appended when not asked


def test_server_args_reach_the_design(tmp_path) -> None:
    code, record = run(tmp_path, "hardened", "--connections", "5", "--hold", "0.3",
                       "--server-args", "--keep-alive-timeout 60")
    assert code == 0 and record is not None and record.server_command[-2:] == ["--keep-alive-timeout", "60"]


def test_a_design_that_closes_holds_none_and_the_record_says_why(tmp_path) -> None:
    code, record = run(tmp_path, "asyncio-streams", "--connections", "20", "--hold", "0.3")
    assert code == 0 and record is not None
    assert record.connections_kept_alive == 0 and record.kib_per_connection is None
    assert record.connections_refused == {"the answer said Connection: close": 20}


@pytest.mark.parametrize("args", [
    pytest.param(["no-such-design"], id="unknown-design"),
    pytest.param(["asyncio-echo"], id="not-http"),
    pytest.param(["hardened", "--connections", "0"], id="no-connections"),
    pytest.param(["hardened", "--server-args", "'unbalanced"], id="bad-server-args"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args: list[str]) -> None:
    assert run(tmp_path, *args) == (2, None)


def test_more_connections_than_the_hard_limit_allows_exit_2(tmp_path) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    assert run(tmp_path, "hardened", "--connections", str(hard)) == (2, None)


def test_the_idle_table_is_read_from_the_records(tmp_path) -> None:
    from harness.render import idle_tables

    assert idle_tables.idle_files(tmp_path / "generated", "{source}\n", tmp_path) == {}  # no record, no table
    (tmp_path / "idle-connections").mkdir()
    shutil.copy(FIXTURE, tmp_path / "idle-connections")
    table = idle_tables.idle_files(tmp_path / "generated", "{source}\n", tmp_path)[
        tmp_path / "generated" / "idle-connections.md"]
    assert "| hardened | 1,000 of 1,000 | 1,000 → 1,000 | 17.4 → **19.7** | 2.39 | 0.9 / 0.9 (0 failed) |" in table
    assert "| PSS MiB, before → peak | KiB per connection held |" in table


def test_a_server_that_closed_connections_before_or_during_the_hold_is_flagged(tmp_path) -> None:
    from harness.render import idle_tables

    record = dataclasses.replace(IdleRecord.from_json(json.loads(FIXTURE.read_text()), str(FIXTURE)),
                                 connections_kept_alive=1000, connections_open_at_hold_start=600,
                                 connections_open_after_hold=0, opening_seconds=64.5)
    row = idle_tables.idle_table([record]).splitlines()[2]
    assert "| 600 → 0 ⚠ 400 closed by the server while the rest were opened (64.5 s)" in row
    assert "⚠ 600 closed during the hold" in row


def test_memory_per_connection_divides_by_the_connections_held_when_the_hold_began(tmp_path) -> None:
    """A 1 s keep-alive timeout and a 2.5 s hold: every connection is closed during the hold, none before it."""
    code, record = run(tmp_path, "hardened", "--connections", "300", "--hold", "2.5",
                       "--server-args", "--keep-alive-timeout 1")
    assert code == 0 and record is not None
    assert record.connections_open_at_hold_start == 300 and record.connections_open_after_hold == 0
    peak, baseline = record.peak_mib(), record.baseline_mib()
    assert peak is not None and baseline is not None
    growth_kib = (peak - baseline) * 1024
    # The MiB fields are rounded to 0.1 MiB, so the growth they give is known to about 0.1 MiB: 0.35 KiB over 300.
    assert record.kib_per_connection == pytest.approx(growth_kib / 300, abs=0.1 * 1024 / 300 + 0.01)
    assert record.started_utc <= record.finished_utc
