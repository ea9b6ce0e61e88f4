"""Records are read and written through typed classes (issue 19, item 4): every committed record loads through
the class its data names and gives back the same data; a record of the wrong shape is refused with the key and
where it is; old schema versions are migrated on reading and newer ones refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from harness.model.records import RESULTS_DIR
from harness.model.records.kinds import record_class
from harness.model.records.scenario_record import Run, ScenarioRecord
from harness.model.records.typed import RecordShapeError, Typed, optional


def same_data(written: Any, read_back: Any) -> bool:
    """Equal as a reader sees them: key order aside, and a key holding null the same as a key left out."""
    if isinstance(written, dict) and isinstance(read_back, dict):
        written = {key: value for key, value in written.items() if value is not None}
        read_back = {key: value for key, value in read_back.items() if value is not None}
        return written.keys() == read_back.keys() and all(same_data(value, read_back[key])
                                                            for key, value in written.items())
    if isinstance(written, list) and isinstance(read_back, list):
        return len(written) == len(read_back) and all(map(same_data, written, read_back))
    return written == read_back and type(written) is type(read_back)


@pytest.mark.parametrize("path", sorted(RESULTS_DIR.rglob("*.json")), ids=lambda path: str(path.relative_to(RESULTS_DIR)))
def test_every_committed_record_reads_through_its_class_and_back(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    record = record_class(data).from_json(data, str(path))
    assert same_data(data if record.SCHEMA is None or "schema" in data else record.to_json(), record.to_json())


def a_run(**changes: Any) -> dict[str, Any]:
    run = {"tool": "wrk", "command": ["wrk"], "concurrency": 10, "keep_alive": True, "exit_code": 0, "complete": 100,
           "failed": 0, "requests_per_second": 100.0, "duration_s": 1.0,
           "latency_ms": {"mean": 1.0, "p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0}, "error": None}
    return {**run, **changes}


def test_a_misspelt_key_is_refused_with_where_it_is_and_the_key_meant() -> None:
    with pytest.raises(RecordShapeError, match=r"run: unknown key `requests_per_secnd` \(did you mean "
                                               r"`requests_per_second`\?\)"):
        Run.from_json(a_run(requests_per_secnd=1.0), "run")


def test_a_value_of_the_wrong_type_is_refused_with_its_path() -> None:
    with pytest.raises(RecordShapeError, match=r"run\.latency_ms\.p99: expected float, found str"):
        Run.from_json(a_run(latency_ms={"p99": "3 ms"}), "run")
    with pytest.raises(RecordShapeError, match=r"run: missing key `concurrency`"):
        Run.from_json({key: value for key, value in a_run().items() if key != "concurrency"}, "run")


def test_optional_keys_are_written_only_when_set_and_an_int_stays_an_int() -> None:
    run = Run.from_json(a_run(), "run")
    assert "warm_up" not in run.to_json() and run.warm_up is None
    assert run.to_json()["requests_per_second"] == 100.0 and Run.from_json(a_run(duration_s=3), "r").duration_s == 3
    assert Run.from_json(run.to_json(), "again") == run


class Versioned(Typed):
    """A toy record kind at schema 3: version 1 called `rate` `speed`; version 2 lacked `unit`."""

    SCHEMA: ClassVar[int | None] = 3
    MIGRATIONS: ClassVar[dict[int, Any]] = {
        1: lambda data: {("rate" if key == "speed" else key): value for key, value in data.items()},
        2: lambda data: {**data, "unit": "req/s"},
    }
    schema: int
    rate: float
    unit: str
    note: str | None = optional()


def test_old_schema_versions_are_migrated_and_newer_ones_refused() -> None:
    assert Versioned.from_json({"schema": 1, "speed": 5}).to_json() == {"schema": 3, "rate": 5, "unit": "req/s"}
    with pytest.raises(RecordShapeError, match="schema 4 is newer than this harness reads"):
        Versioned.from_json({"schema": 4, "rate": 5, "unit": "x"})
    with pytest.raises(RecordShapeError, match="no schema version"):
        Versioned.from_json({"rate": 5, "unit": "x"})


def test_a_scenario_record_knows_its_outcomes() -> None:
    data = json.loads((RESULTS_DIR / "peak.json").read_text(encoding="utf-8"))
    record = ScenarioRecord.from_json(data)
    assert record.id == "peak" and record.settings.keep_alive is True
    assert [outcome.name for outcome in record.outcomes()][-1] == data["ceiling"]["name"]
    assert record.designs[0].runs[0].latency_ms is not None


def test_a_record_made_now_carries_the_schema_its_class_writes() -> None:
    assert Versioned(rate=1.0, unit="x").schema == 3  # no writer passes it: the class's SCHEMA is the default
    assert Versioned(rate=1.0, unit="x").to_json()["schema"] == 3
