"""The load tool's own CPU time (issue 31, finding 5): processes.run_tool reaps the tool itself with os.wait4, so every
run can record what the tool used beside what the server used. Starts two small processes (not in the check tier)."""

from __future__ import annotations

import sys

import pytest

from harness.system import processes


def test_the_harness_reaps_a_load_tool_itself_and_keeps_its_cpu_time_exit_code_and_output() -> None:
    """processes.run_tool reaps the tool with os.wait4: its own CPU time, over its wall time, goes into the run."""
    busy = "import sys; sum(range(3_000_000)); print('out'); print('err', file=sys.stderr); sys.exit(3)"
    done = processes.run_tool([sys.executable, "-c", busy], timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    record = processes.tool_usage_record(done)
    assert record is not None and 0 < record["cpu_seconds"] <= record["wall_seconds"] + 0.05
    assert record["cpu_seconds"] == pytest.approx(record["user_seconds"] + record["system_seconds"], abs=0.002)
    stopped = processes.run_tool([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5)
    assert stopped.returncode == -9 and "killed after" in stopped.stderr and stopped.usage is not None
