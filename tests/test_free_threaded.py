"""The free-threaded comparison renders the runner's records when both exist, and plain words otherwise."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

from harness.model.records.scenario_record import ScenarioRecord
from harness.render import free_threaded

FIXTURES = Path(__file__).parent / "fixtures" / "free_threaded"


def fixture(kind: str) -> dict:
    """A fixture's JSON (a record as the runner writes it), to change before it is read."""
    return json.loads((FIXTURES / f"{kind}.json").read_text())


def typed(data: dict) -> ScenarioRecord:
    return ScenarioRecord.from_json(data, "test record")


def place(results_dir: Path, *kinds: str) -> None:
    for kind in kinds:
        target = results_dir / "free-threaded" / kind / "cpu-bound.json"
        target.parent.mkdir(parents=True)
        shutil.copy(FIXTURES / f"{kind}.json", target)


def test_without_records_the_page_says_the_run_has_not_happened_and_shows_no_number(tmp_path) -> None:
    text = free_threaded.free_threaded_table(tmp_path)
    assert text.startswith("*Not measured yet.*") and "missing: 3.14, 3.14t" in text
    assert "req/s" not in text and not any(character.isdigit() for character in text.split("missing")[0]
                                            .replace("3.14", "").replace("3.14t", ""))


def test_with_one_record_it_names_the_missing_interpreter(tmp_path) -> None:
    place(tmp_path, "3.14")
    assert "missing: 3.14t)" in free_threaded.free_threaded_table(tmp_path)


def test_with_both_records_each_cell_is_the_median_of_its_runs_side_by_side(tmp_path) -> None:
    place(tmp_path, "3.14", "3.14t")
    text = free_threaded.free_threaded_table(tmp_path)
    records = {kind: typed(fixture(kind)) for kind in ("3.14", "3.14t")}

    def median(kind: str, name: str) -> float:
        design = records[kind].design(name)
        assert design is not None
        return statistics.median(run.requests_per_second for run in design.runs)

    gil, free = median("3.14", "thread-per-connection"), median("3.14t", "thread-per-connection")
    row = next(line for line in text.splitlines() if line.startswith("| thread-per-connection |"))
    assert f"| {free / gil:.2f} |" in row
    assert "disabled (free-threaded build)" in text and "github-actions" in text


def test_python_versions_tables_put_each_interpreter_side_by_side_with_the_ratio(tmp_path) -> None:
    from harness.render import python_versions

    sweep_hello = typed({**fixture("3.14"), "designs": []})  # another scenario's record: no table of its own
    records = {"python-3.11-cpu": typed(fixture("3.14")), "python-3.13-cpu": typed(fixture("3.14t")),
               "sweep-hello": sweep_hello}
    files = python_versions.python_versions_files(records, tmp_path / "generated", tmp_path / "plots", "{source}\n")
    table = files[tmp_path / "generated" / "python-versions-cpu.md"]
    assert "| CPython | design | requests/s, median (" in table and "| / 3.11 |" in table
    row = next(line for line in table.splitlines() if line.startswith("| 3.13 | [thread-per-connection](/designs/"))
    assert row.endswith("| 1.80 |") and "(" in row  # the median, its interval, the ratio to the oldest
    assert (tmp_path / "generated" / "python-versions-hello.md") not in files  # no such records: no table
    assert files[tmp_path / "plots" / "python-versions.svg"].startswith("<?xml")


def test_python_versions_name_the_exact_release_the_record_kept_and_carry_the_flags(tmp_path) -> None:
    from harness.render import python_versions

    record = fixture("3.14")
    design = next(design for design in record["designs"] if design["name"] == "thread-per-connection")
    record["designs"] = [design]
    for run, rate in zip(design["runs"], [100.0, 150.0, 100.0]):
        run["requests_per_second"] = rate  # runs that disagree by 50%: flagged
    record["interpreter"] = {"asked": "3.12", "version": "3.12.1", "gil": "enabled", "executable": "/x"}
    table = python_versions.versions_table("cpu", {"3.12": typed(record)})
    assert "| / 3.12.1 |" in table and "| 3.12.1 | [thread-per-connection]" in table
    assert "⚠ spread 50%" in table
