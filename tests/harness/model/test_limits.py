"""What limited a cell (scripts/harness/model/limits.py, issue 31, finding 5): the load tool when its own CPU is at
the limit of its core, the server when the server's is; records without the tool's CPU keep the old rule, labelled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_records import fake_outcome, fake_record, fake_run

from harness.model import limits
from harness.model.paths import REPO_ROOT
from harness.model.stats import spread
from harness.render import cells
from harness.render.how_fast_tables import load_steps, steps_table

SETTINGS = {"requests": 0, "concurrency": [50], "time_limit": 4, "delay": 0, "repeat": 1, "ceiling": "nginx"}


def run(rate: float, tool_cpu: float | None, server_cpu: float, wall: float = 4.0) -> dict[str, Any]:
    """A 4 s run at `rate` req/s; the tool's and the server's CPU seconds over it (None: the tool's not recorded)."""
    keys: dict[str, Any] = {"concurrency": 50, "requests_per_second": rate, "duration_s": wall,
                            "complete": int(rate * wall),
                            "server_resources": {"peak_rss_mib": 20.0, "cpu_seconds": server_cpu,
                                                 "cpu_seconds_per_1000_requests": 0.01, "peak_processes": 1}}
    if tool_cpu is not None:
        keys["load_tool_resources"] = {"cpu_seconds": tool_cpu, "user_seconds": tool_cpu / 2,
                                       "system_seconds": tool_cpu / 2, "wall_seconds": wall}
    return fake_run(**keys)


def cell_of(record: Any, name: str) -> dict[str, Any]:
    runs = record.design(name).runs
    return {"rate": spread([item.requests_per_second for item in runs]), "runs": runs}


def test_a_cell_is_tool_bound_when_the_tools_cpu_is_at_its_limit_whatever_its_share_of_the_ceiling() -> None:
    record = fake_record({"id": "limits"}, SETTINGS, [
        fake_outcome("saturated-tool", [run(100_000, tool_cpu=3.9, server_cpu=2.0)]),
        fake_outcome("saturated-server", [run(99_000, tool_cpu=2.4, server_cpu=3.88)]),
        fake_outcome("waiting", [run(500, tool_cpu=0.1, server_cpu=0.2)]),
    ], ceiling=fake_outcome("nginx", [run(100_000, tool_cpu=3.9, server_cpu=1.0)]))
    ceiling = limits.ceilings(record)[50]
    tool, server, waiting = (limits.limit(record.design(name).runs, record.environment, ceiling)
                             for name in ("saturated-tool", "saturated-server", "waiting"))
    assert tool.tool_bound and not tool.server_bound and tool.tool_busy == pytest.approx(0.975)
    # 99% of the ceiling, yet wrk had a third of its core to spare: the server (97% of its CPU) was the limit.
    assert not server.tool_bound and server.server_bound
    assert not waiting.tool_bound and not waiting.server_bound
    assert cells.rate_flags(cell_of(record, "saturated-tool"), ceiling, record=record) == " ⚠ tool-bound (tool CPU 98%)"
    assert cells.rate_flags(cell_of(record, "saturated-server"), ceiling, record=record) == ""


def test_a_record_without_the_tools_cpu_keeps_the_old_rule_and_says_so() -> None:
    record = fake_record({"id": "old"}, SETTINGS, [fake_outcome("fast", [run(90_000, None, 3.9)])],
                         ceiling=fake_outcome("nginx", [run(100_000, None, 1.0)]))
    ceiling = limits.ceilings(record)[50]
    found = limits.limit(record.design("fast").runs, record.environment, ceiling)
    assert found.old_rule and found.tool_bound and found.ceiling_share == pytest.approx(0.9)
    assert cells.rate_flags(cell_of(record, "fast"), ceiling, record=record) == " ⚠ tool-bound (90% of ceiling)"
    assert "old rule: the tool's CPU was not recorded" in cells.rate_flags(cell_of(record, "fast"), ceiling, True,
                                                                           record=record)


def test_the_ceiling_has_one_definition_that_every_table_asks() -> None:
    """cells, how_fast_tables and sizing_tables compute no ceiling of their own (issue 30's one owner per rule)."""
    for module in ("cells", "how_fast_tables", "sizing_tables"):
        source = (REPO_ROOT / "scripts" / "harness" / "render" / f"{module}.py").read_text(encoding="utf-8")
        assert "TOOL_BOUND_FRACTION *" not in source and ">= TOOL_BOUND_FRACTION" not in source, module
        assert "limits." in source, module


def test_the_steps_table_marks_a_saturated_servers_cpu_per_request_as_only_one_over_its_rate(tmp_path: Path) -> None:
    path = REPO_ROOT / "results" / "fast-and-correct" / "steps.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    for row in data["rows"]:
        for item in row["runs"]:
            item["load_tool_resources"] = {"cpu_seconds": 2.0, "user_seconds": 1.0, "system_seconds": 1.0,
                                           "wall_seconds": 4.0}
    changed = tmp_path / "steps.json"
    changed.write_text(json.dumps(data), encoding="utf-8")
    table = steps_table(load_steps(changed))
    assert "≈ 1/rate: server CPU" in table  # the servers used 91-97% of their CPU
    assert "tool-bound" not in table.split("\n\n")[0]  # wrk at half its core: no row measured wrk


def ceiling_functions(folder: Path) -> list[str]:
    """Every function defined under `folder` whose name speaks of a ceiling, as file:name."""
    import ast
    return sorted(f"{path.name}:{node.name}" for path in folder.glob("*.py")
                  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.FunctionDef) and "ceiling" in node.name)


def test_the_tool_s_ceiling_is_defined_in_model_limits_only(tmp_path: Path) -> None:
    """One owner of the rule (issue 30): render asks model/limits.py for the ceiling and defines none of its own."""
    harness = REPO_ROOT / "scripts" / "harness"
    assert ceiling_functions(harness / "model") == ["limits.py:ceiling_row", "limits.py:ceilings"]
    assert ceiling_functions(harness / "render") == []
    (tmp_path / "cells.py").write_text("def ceilings(record):\n    return {}\n", encoding="utf-8")  # the old wrapper
    assert ceiling_functions(tmp_path) == ["cells.py:ceilings"]  # the guard sees one
