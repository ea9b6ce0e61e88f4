"""Records are read and written through typed classes (issue 19, item 4): every committed record loads through
the class its data names and gives back the same data; a record of the wrong shape is refused with the key and
where it is; old schema versions are migrated on reading and newer ones refused."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from harness.model.records import RESULTS_DIR
from harness.model.records.how_fast_records import StepsRecord
from harness.model.records.kinds import record_class
from harness.model.records.scenario_record import (EXTRAS_BY_TOOL, HttpClientExtras, Run, RunnerExtras,
                                                   ScenarioRecord, WrkExtras)
from harness.model.typed import RecordShapeError, Typed, migrate, optional
from harness.model.settings import LOAD_TOOLS, TOOL_READS


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
    kind = record_class(data)
    record = kind.from_json(data, str(path))
    # An older schema's data is compared as its migrations bring it up: nothing it held is lost on the way.
    expected = data if kind.SCHEMA is None else migrate(kind, data, str(path)) if "schema" in data else record.to_json()
    assert same_data(expected, record.to_json())


def leaves(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """Every non-null value under a key, wherever it is nested: (its key, its JSON)."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from leaves(item, name)
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        for item in value:
            yield from leaves(item, key)
    elif value is not None:
        yield key, json.dumps(value)


FLAT_RUNS = [path for path in sorted(RESULTS_DIR.rglob("*.json")) if record_class(json.loads(path.read_text(
    encoding="utf-8"))) in (ScenarioRecord, StepsRecord) and json.loads(path.read_text(encoding="utf-8"))["schema"] < 2]


@pytest.mark.parametrize("path", FLAT_RUNS or [None], ids=lambda path: str(path and path.relative_to(RESULTS_DIR)))
def test_reading_a_record_of_flat_runs_only_moves_their_keys(path: Path | None) -> None:
    """Schema 1 -> 2 put each run's tool values under `extras` and the runner's under `runner`: every value is
    still there, under the same key (the round trip above compares the migrated data, so it cannot see a loss)."""
    if path is None:
        pytest.skip("no committed record has flat runs any more")
    data = json.loads(path.read_text(encoding="utf-8"))
    written = record_class(data).from_json(data, str(path)).to_json()
    assert Counter(leaves({**data, "schema": None})) == Counter(leaves({**written, "schema": None}))


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
    with pytest.raises(RecordShapeError, match=r"run\.latency_ms\.p99: expected number, found str"):
        Run.from_json(a_run(latency_ms={"p99": "3 ms"}), "run")
    with pytest.raises(RecordShapeError, match=r"run: missing key `concurrency`"):
        Run.from_json({key: value for key, value in a_run().items() if key != "concurrency"}, "run")


def test_optional_keys_are_written_only_when_set_and_an_int_stays_an_int() -> None:
    run = Run.from_json(a_run(), "run")
    assert "runner" not in run.to_json() and run.runner is None and run.get("warm_up") is None
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


def test_a_run_keeps_at_most_20_own_fields_and_each_tool_its_extras() -> None:
    """Issue 30: `Run` is what every run has (53 fields before, the union of every tool's extras); a tool's own
    values are in its extras class, one per load tool the catalogue knows, and no value's name is in two parts."""
    own = {item.name for item in dataclasses.fields(Run)}
    assert len(own) <= 20, sorted(own)
    assert set(EXTRAS_BY_TOOL) == set(TOOL_READS) == set(LOAD_TOOLS)  # every load tool has its extras class, only those
    runner = {item.name for item in dataclasses.fields(RunnerExtras)}
    for kind in EXTRAS_BY_TOOL.values():
        extras = {item.name for item in dataclasses.fields(kind)}
        assert not extras & (own | runner), (kind.__name__, extras & (own | runner))


def test_a_tool_report_lands_in_its_parts_and_reads_back_by_name() -> None:
    report = a_run(tool="http-client", rate=20.0, mode="open", late=3, timeline=[{"start": 0.0}],
                   server_command=["python", "server.py"], time_wait_before=4, size=2)
    run = Run.from_report(report, "run")
    assert run.extras == HttpClientExtras(rate=20.0, mode="open", late=3, timeline=[{"start": 0.0}])
    assert run.runner == RunnerExtras(server_command=["python", "server.py"], time_wait_before=4, size=2)
    assert (run.get("rate"), run.get("size"), run.get("concurrency"), run.get("late_ms")) == (20.0, 2, 10, None)
    written = run.to_json()
    assert written["extras"]["rate"] == 20.0 and "rate" not in written and written["runner"]["size"] == 2
    assert Run.from_json(written, "again") == run
    with pytest.raises(AttributeError, match="no run has a value `rat`"):
        run.get("rat")


def test_another_tools_value_or_a_misspelt_one_in_a_report_is_refused() -> None:
    with pytest.raises(RecordShapeError, match=r"run: unknown key `rate`"):  # wrk reports no offered rate
        Run.from_report(a_run(rate=20.0), "run")
    with pytest.raises(RecordShapeError, match=r"did you mean `requests_per_second`"):
        Run.from_report(a_run(requests_per_secnd=1.0), "run")
    with pytest.raises(RecordShapeError, match=r"run\.extras: no record for 'nc' \(known: ab, echo-client"):
        Run.from_json(a_run(tool="nc", extras={"bytes": 1}), "run")
    with pytest.raises(RecordShapeError, match="a hey run with wrk's extras"):
        Run(tool="hey", concurrency=1, extras=WrkExtras(bytes=1))


def test_a_flat_run_of_schema_1_is_read_into_its_parts() -> None:
    data = json.loads((RESULTS_DIR / "peak.json").read_text(encoding="utf-8"))
    flat = {**data, "schema": 1, "ceiling": None, "designs": [{**data["designs"][0], "runs": [
        a_run(non_2xx=0, bytes=2048, failed_by_kind={"connect": 0}, repetition=1, time_wait_before=3,
              warm_up={"seconds": 1, "command": None, "requests_per_second": None, "failed": None, "error": None})]}]}
    run = ScenarioRecord.from_json(flat).designs[0].runs[0]
    assert run.extras == WrkExtras(bytes=2048, failed_by_kind={"connect": 0}) and run.non_2xx == 0
    assert run.runner is not None and run.runner.time_wait_before == 3 and run.get("warm_up").seconds == 1
    assert ScenarioRecord.from_json(flat).to_json()["schema"] == ScenarioRecord.SCHEMA == 2
