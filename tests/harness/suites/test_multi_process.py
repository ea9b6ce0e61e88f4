"""The restart scenario: its plan is checked, its measurement counts every failed request, its renderer is fed
only by the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness.model.paths import REPO_ROOT
from harness.model.catalogue import UnknownNameError
from harness.model.records import RESULTS_DIR
from harness.model.records.multi_process_records import BalanceRecord, Bin, RestartRecord, RestartTarget
from harness.model.records.scenario_record import ScenarioRecord
from harness.render import multi_process_tables
from harness.suites import balance, restart
from harness.system import processes

from conftest import CATALOGUE, write_restart_plan

PLAN = """
id = "restart"
title = "test"
rate = 200
seconds = 2.5
delay = 0.05
restarts = 2
first_restart = 0.8
every = 0.8

[[target]]
design = "event-loop-workers"
method = "signal"
signal = "SIGHUP"
source = "its docstring"

[[target]]
design = "event-loop-workers"
method = "stop-start"
"""


def test_the_committed_plan_loads_and_names_known_designs() -> None:
    plan = restart.load_plan(catalogue=CATALOGUE)
    assert plan.restarts == 3 and len(plan.moments()) == 3 and plan.repeat >= 3  # spread needs three runs
    assert {target.method for target in plan.targets} == {"signal", "stop-start"}


@pytest.mark.parametrize(("change", "message"), [
    (("every = 0.8", "evry = 0.8"), "unknown key `evry` (did you mean `every`?)"),
    (("rate = 200", 'rate = "fast"'), "(the top-level table).rate: expected number, found str"),
    (('source = "its docstring"', 'sorce = "its docstring"'), ".target[0]: unknown key `sorce` (did you mean `source`?)"),
    (("every = 0.8", "every = 0.8\nrepeat = 0"), "repeat must be a whole number of runs, at least 1"),
    (("every = 0.8", "every = 0.8\n[quick]\nrestart = 1"), "[quick] sets `restart`, which it cannot (did you mean"),
    (('method = "stop-start"', 'method = "restart"'), "method must be one of"),
    (('signal = "SIGHUP"', 'signal = "SIGHOP"'), "needs a signal name"),
    (("every = 0.8", "every = 5"), "not inside the load"),
])
def test_a_wrong_plan_is_refused_naming_the_file(tmp_path, change, message) -> None:
    path = write_restart_plan(tmp_path, PLAN.replace(*change))
    with pytest.raises(restart.RestartPlanError, match="restart.toml") as error:
        restart.load_plan(path, catalogue=CATALOGUE)
    assert message in str(error.value)


def test_an_unknown_design_is_refused(tmp_path) -> None:
    with pytest.raises(UnknownNameError):
        restart.load_plan(write_restart_plan(tmp_path, PLAN.replace('"event-loop-workers"', '"no-such-design"', 1)),
                          catalogue=CATALOGUE)


def test_fold_counts_requests_by_the_bin_they_were_due_in() -> None:
    timeline = [{"intended_start": 0.1, "end": 0.2, "result": "ok"},
                {"intended_start": 0.2, "end": 0.5, "result": "ok"},
                {"intended_start": 0.3, "end": None, "result": "connect"}]
    bins = restart.fold(timeline, seconds=0.5)
    assert bins[0] == Bin(t=0.0, due=2, ok=2, failed=0, p50_ms=200.0, max_ms=300.0)
    assert bins[1].failed == 1 and bins[1].ok == 0 and bins[1].p50_ms is None


@pytest.mark.slow
def test_graceful_reloads_lose_nothing_and_stop_then_start_refuses(tmp_path) -> None:
    path, written = restart.measure_plan(CATALOGUE, restart.Plan(out=tmp_path, plan_path=write_restart_plan(
        tmp_path, PLAN.replace("every = 0.8", "every = 0.8\nrepeat = 2"))))
    record = RestartRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
    graceful, naive = record.targets
    assert [run.repetition for run in graceful.runs] == [0, 1]  # every run kept
    for run in graceful.runs:
        assert run.report.failed == 0 and run.report.complete == 500
        assert len(run.restarts) == 2
        assert sum(entry.due for entry in run.bins) == 500  # every request is in a bin
    # The naive way leaves a moment with no listening socket: refused connections.
    assert all(run.report.failed_by_kind["connect"] > 0 for run in naive.runs)
    assert restart.problems(written) == 0  # lost requests are the measurement, not a failure of the run
    assert all(run.server_command[1].endswith("event_loop_workers.py") for row in record.targets for run in row.runs)

    # The renderer reads only the record: the table says what it measured, run by run.
    files = multi_process_tables.multi_process_files(tmp_path / "generated", tmp_path / "plots", results_dir=tmp_path)
    table = files[tmp_path / "generated" / "restart.md"]
    assert "| event-loop-workers (SIGHUP) | 500 | **0** (0, 0) | 0 / 0 / 0 |" in table
    counts = [run.report.failed for run in naive.runs]
    assert f"({counts[0]:,}, {counts[1]:,}) |" in table
    assert files[tmp_path / "plots" / "restart-timeline.svg"].startswith("<?xml")


def _restart_row(failed: list[int]) -> dict:
    """A target's row as the record keeps it, one run per count of failed requests (the rest from a real run)."""
    committed = json.loads((RESULTS_DIR / "multi-process" / "restart.json").read_text(encoding="utf-8"))
    run = committed["targets"][0]["runs"][0]
    runs = [{**run, "report": {**run["report"], "requests": 100, "failed": count,
                               "failed_by_kind": {"connect": count, "read": 0}, "latency_ms": {"p50": 100.0}},
             "bins": [], "restarts": []} for count in failed]
    return {"name": "x", "title": "x", "method": "signal", "signal": "SIGHUP", "label": "x (SIGHUP)", "source": "",
            "runs": runs, "errors": []}


def test_the_restart_table_shows_every_runs_count_and_flags_a_single_run() -> None:
    def row(data: dict) -> str:
        return multi_process_tables._row(RestartTarget.from_json(data, "row"))

    assert "| x (SIGHUP) | 100 | **4** (9, 4, 0) | 13 / 0 / 0 | 100 / – |" in row(_restart_row([9, 4, 0]))
    assert "**7** ⚠ one run, no spread" in row(_restart_row([7]))
    # A record made before the suite repeated its targets kept its one run in the row: read as one run, flagged too.
    new_row = _restart_row([3])
    old_row = {key: value for key, value in new_row.items() if key not in ("runs", "errors")} | new_row["runs"][0]
    del old_row["repetition"]
    assert "**3** ⚠ one run, no spread" in row(old_row)
    # ... and one whose server did not start kept its error there.
    refused = {key: value for key, value in new_row.items() if key not in ("runs", "errors")} | {"error": "no port"}
    assert "| x (SIGHUP) | – | server did not start: no port |" in row(refused)


def test_a_record_of_another_kind_in_the_multi_process_folder_is_an_error(tmp_path) -> None:
    (tmp_path / "multi-process").mkdir()
    (tmp_path / "multi-process" / "x.json").write_text('{"schema": 1, "scenario": {"id": "x"}, "designs": []}')
    with pytest.raises(ValueError, match="not a record of a kind in"):
        multi_process_tables.load_multi_process_records(tmp_path)


def test_balance_reads_each_workers_count_and_renders_the_busiest_against_the_average(tmp_path) -> None:
    stdout = "Serving on ...\nworker 11 served 30 connections\nreloaded\nworker 12 served 10 connections\n"
    assert balance.served_per_worker(stdout) == [30, 10]
    committed = json.loads((RESULTS_DIR / "multi-process" / "balance.json").read_text(encoding="utf-8"))
    record = BalanceRecord.from_json({**committed, "rows": [{**committed["rows"][0], "name": "event-loop-workers",
                                                              "workers": 2, "served": [30, 10]}]}, "balance")
    table = multi_process_tables.balance_table(record)
    assert "| event-loop-workers | 2 | 30, 10 | 1.50 |" in table


@pytest.mark.slow
def test_balance_counts_every_connection_each_worker_served(tmp_path) -> None:
    row = balance.measure(CATALOGUE, "event-loop-workers-reuseport", 2, 200, tmp_path,
                          processes.NO_PINNING)
    assert len(row.served) == 2 and row.failed == 0
    assert sum(row.served) >= 200  # every request, plus the harness's readiness probe connection


def test_scaling_compares_each_design_on_one_cpu_and_on_two(tmp_path) -> None:
    one = json.loads((REPO_ROOT / "tests" / "fixtures" / "free_threaded" / "3.14.json").read_text())
    two = json.loads((REPO_ROOT / "tests" / "fixtures" / "free_threaded" / "3.14t.json").read_text())
    one["scenario"]["id"], two["scenario"]["id"] = "scaling-cpu-one-cpu", "scaling-cpu-two-cpus"
    files = multi_process_tables.multi_process_files(tmp_path / "generated", tmp_path / "plots", tmp_path, {
        "scaling-cpu-one-cpu": ScenarioRecord.from_json(one), "scaling-cpu-two-cpus": ScenarioRecord.from_json(two)})
    table = files[tmp_path / "generated" / "scaling-cpu.md"]
    row = next(line for line in table.splitlines() if line.startswith("| [thread-per-connection](/designs/"))
    assert row.endswith("| **1.80** |")  # the fixture's second record is 1.8 times the first for this design
    assert "| [process-pool](/designs/process-pool.md" in table and "| **1.00** |" in table
    assert (tmp_path / "generated" / "scaling-hello.md") not in files  # no pair of records, no table
    assert files[tmp_path / "plots" / "scaling.svg"].startswith("<?xml")


def test_a_scaling_cell_whose_runs_disagree_is_flagged(tmp_path) -> None:
    one = json.loads((REPO_ROOT / "tests" / "fixtures" / "free_threaded" / "3.14.json").read_text())
    two = json.loads((REPO_ROOT / "tests" / "fixtures" / "free_threaded" / "3.14t.json").read_text())
    one["scenario"]["id"], two["scenario"]["id"] = "scaling-cpu-one-cpu", "scaling-cpu-two-cpus"
    design = next(design for design in two["designs"] if design["name"] == "thread-per-connection")
    runs = [run for run in design["runs"] if run.get("error") is None]
    for run in runs:
        run["requests_per_second"] = 100.0
    runs[0]["requests_per_second"], runs[-1]["requests_per_second"] = 80.0, 120.0  # range 40% of the median
    table = multi_process_tables.scaling_table(ScenarioRecord.from_json(one), ScenarioRecord.from_json(two))
    row = next(line for line in table.splitlines() if line.startswith("| [thread-per-connection](/designs/"))
    assert "| 100.0 ⚠ 40% |" in row
    other = next(line for line in table.splitlines() if line.startswith("| [process-pool](/designs/"))
    assert "⚠" not in other
