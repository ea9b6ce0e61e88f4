"""`bench.py idle` (harness/suites/idle.py): the record it writes, and the input it refuses."""

from __future__ import annotations

import json
import resource
import shutil
from pathlib import Path

import bench
import pytest


def run(tmp_path, *args: str) -> tuple[int, dict | None]:
    output = tmp_path / "record.json"
    code = bench.main(["idle", *args, "--output", str(output)])
    return code, json.loads(output.read_text()) if output.exists() else None


def test_a_keep_alive_design_holds_every_connection_and_the_probe_is_served(tmp_path) -> None:
    code, record = run(tmp_path, "hardened", "--connections", "100", "--hold", "0.6")
    assert code == 0
    assert record["connections_kept_alive"] == record["connections_open_after_hold"] == 100
    assert record["connections_refused"] == {}
    assert record["peak_rss_mib"] >= record["baseline_rss_mib"] > 0
    assert record["probe"]["requests"] >= 1 and record["probe"]["failed"] == 0
    assert record["server_alive_after"] is True
    assert record["server_command"][-1] != "--keep-alive-timeout"  # nothing appended when not asked


def test_server_args_reach_the_design(tmp_path) -> None:
    code, record = run(tmp_path, "hardened", "--connections", "5", "--hold", "0.3",
                       "--server-args", "--keep-alive-timeout 60")
    assert code == 0 and record["server_command"][-2:] == ["--keep-alive-timeout", "60"]


def test_a_design_that_closes_holds_none_and_the_record_says_why(tmp_path) -> None:
    code, record = run(tmp_path, "asyncio-streams", "--connections", "20", "--hold", "0.3")
    assert code == 0
    assert record["connections_kept_alive"] == 0 and record["kib_per_connection"] is None
    assert record["connections_refused"] == {"the answer said Connection: close": 20}


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
    shutil.copy(Path(__file__).parent / "fixtures" / "idle" / "hardened.json", tmp_path / "idle-connections")
    table = idle_tables.idle_files(tmp_path / "generated", "{source}\n", tmp_path)[
        tmp_path / "generated" / "idle-connections.md"]
    assert "| hardened | 10,000 of 10,000 | 10,000 | 24.2 → **47.8** | 2.42 | 1.0 / 4.9 (0 failed) |" in table
