"""Every committed record follows one schema for when it ran: started_utc and finished_utc (issue 20, finding 13).

Scenario records, the suites' own records (hostile, conformance, instructions, restart, balance,
idle connections, how-fast steps and profile) and the second runs in results/rerun/ alike: a
reader compares records by when they ran, and a renderer reads the same two keys everywhere.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from harness.model.records import RESULTS_DIR

UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def record_paths(results_dir: Path = RESULTS_DIR) -> list[Path]:
    return sorted(results_dir.rglob("*.json"))


def schema_problems(record: object) -> list[str]:
    """What is wrong with a record's start and end, if anything (empty when it follows the schema)."""
    if not isinstance(record, dict):
        return ["not a JSON object"]
    problems = [f"no {key}" for key in ("started_utc", "finished_utc") if key not in record]
    problems += [f"a single {key} instead of started_utc and finished_utc" for key in ("measured_at", "date")
                 if key in record]
    if problems:
        return problems
    try:
        started, finished = (datetime.strptime(record[key], UTC_FORMAT) for key in ("started_utc", "finished_utc"))
    except (TypeError, ValueError):
        return [f"started_utc / finished_utc not in the form {UTC_FORMAT}"]
    return [] if started <= finished else ["finished_utc before started_utc"]


def test_the_check_refuses_a_record_with_one_measured_at() -> None:
    assert schema_problems({"measured_at": "2026-11-24T00:00:00Z"}) == ["no started_utc", "no finished_utc",
                                                                        "a single measured_at instead of started_utc "
                                                                        "and finished_utc"]
    assert schema_problems({"started_utc": "2026-11-24T00:00:09Z", "finished_utc": "2026-11-24T00:00:00Z"}) == [
        "finished_utc before started_utc"]
    assert schema_problems({"started_utc": "2026-11-24T00:00:00Z", "finished_utc": "2026-11-24T00:00:01Z"}) == []


@pytest.mark.parametrize("path", record_paths(), ids=lambda path: str(path.relative_to(RESULTS_DIR)))
def test_every_committed_record_says_when_it_started_and_finished(path: Path) -> None:
    assert schema_problems(json.loads(path.read_text(encoding="utf-8"))) == []
