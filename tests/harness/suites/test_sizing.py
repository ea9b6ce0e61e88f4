"""Sizing sweeps (scenario settings sizes / size_arguments) and their rendering (render/sizing_tables.py).

The runner restarts a swept design once per count with its size arguments appended; these tests
check the catalogue's rules for a sweep, the command each count gets, the plan's cell count, and
the renderer's arithmetic on a small record: Little's law beside each cell, memory divided by the
processes actually held, and the generic scenario tables leaving a sweep to its own page.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fake_records import fake_outcome, fake_record, fake_run
from harness.model.catalogue import load_catalogue
from harness.model.records.scenario_record import Outcome, ScenarioRecord
from harness.model.settings import SettingsError, check_sizes
from harness.render import sizing_tables
from harness.suites import plan

CATALOGUE = load_catalogue()


def test_a_sweep_names_only_the_scenarios_designs_each_with_a_size_argument() -> None:
    check_sizes("here", {"prefork": [1, 2]}, {"prefork": ["--workers", "{size}"]}, ["prefork"])
    with pytest.raises(SettingsError, match="not one of its designs"):
        check_sizes("here", {"uvicorn": [1]}, {"uvicorn": ["--workers", "{size}"]}, ["prefork"])
    with pytest.raises(SettingsError, match="no argument with"):
        check_sizes("here", {"prefork": [1]}, {"prefork": ["--workers", "4"]}, ["prefork"])


def test_each_count_appends_its_arguments_after_the_designs_own_and_the_plan_counts_every_count() -> None:
    scenario = CATALOGUE.scenario("sizing-waiting")
    settings = scenario.settings(quick=False)
    prefork = CATALOGUE.design("prefork")
    assert plan.sizes(settings, prefork) == [1, 2, 4, 8, 16]
    command = plan.sized_design(settings, prefork, 4).command
    assert command[:len(prefork.command)] == prefork.command and command[-2:] == ["--workers", "4"]
    assert plan.sized_design(settings, prefork, None) is prefork
    assert plan.sizes(dataclasses.replace(settings, sizes=None), prefork) == [None]
    designs = [CATALOGUE.design(name) for name in scenario.designs]
    counted = sum(len(plan.sizes(settings, design)) for design in designs) * settings.repeat
    assert len(plan.plan_cells(settings, designs, with_ceiling=True)) == counted + 1  # and the ceiling's cell


def run(size: int, rate: float, cpu_per_1000: float, pss: float, processes: int) -> dict[str, Any]:
    return fake_run(size=size, concurrency=64, requests_per_second=rate, complete=int(rate * 3),
                    requests_requested=0, duration_s=3.0,
                    latency_ms={"mean": 64 / rate * 1000, "p50": 100.0, "p99": 120.0},
                    server_resources={"peak_rss_mib": None, "cpu_seconds": None,
                                      "cpu_seconds_per_1000_requests": cpu_per_1000, "peak_pss_mib": pss,
                                      "peak_processes": processes})


PINNING = {"server_cpu": "0,1", "load_tool_cpu": "1", "method": "taskset"}
WAITING = {"delay": 0.1, "concurrency": [64], "repeat": 2, "sizes": {"prefork": [1, 4]}}
PREFORK = fake_outcome("prefork", [run(1, 9.9, 0.5, 20.0, 2), run(1, 9.8, 0.5, 20.0, 2),
                                   run(4, 39.0, 0.5, 50.0, 5), run(4, 39.5, 0.5, 50.0, 5)], model="pre-fork")


def sizing_record(settings: dict[str, Any]) -> ScenarioRecord:
    return fake_record({"id": "sizing-waiting", "title": "Sizing, waiting handler: a test"}, settings, [PREFORK],
                       {"pinning": PINNING, "commit": "0123456789ab"}, started_utc="2026-11-25T21:00:00Z")


RECORD = sizing_record(WAITING)


def test_littles_law_is_the_count_over_the_time_each_request_holds_it_capped_by_the_cpus() -> None:
    assert sizing_tables.littles_law(RECORD, 4, 0.0005) == pytest.approx(4 / 0.1005)
    computing = sizing_record({**WAITING, "delay": 0})
    assert sizing_tables.littles_law(computing, 16, 0.005) == pytest.approx(2 / 0.005)  # the 2 CPUs bind
    threads = Outcome.from_json(fake_outcome("a", [], model="thread pool"))
    loop = Outcome.from_json(fake_outcome("b", [], model="processes + event loops"))
    sized = sizing_record({**WAITING, "size_arguments": {"a": ["--threads", "{size}"], "b": ["--workers", "{size}"]}})
    assert sizing_tables.in_flight(sized, threads, 4, 64) == 4 and sizing_tables.in_flight(sized, threads, 128, 64) == 64
    assert sizing_tables.in_flight(sized, loop, 1, 64) == 64  # an event loop holds every connection
    # One process of one thread keeps one CPU busy, however many the harness lets it use (issue 31, finding 7).
    assert sizing_tables.usable_cpus(sized, loop, 1) == 1 and sizing_tables.usable_cpus(sized, loop, 2) == 2
    assert sizing_tables.usable_cpus(sized, threads, 1) == 2


def test_no_littles_law_bound_is_below_what_was_measured_in_any_committed_sizing_record() -> None:
    """Issue 31, finding 7: uvicorn with one worker was bounded at 19,704 req/s (two CPUs) and gthread with one
    worker at 1,974 (one request at a time, though it runs 16 threads) against 2,110 measured."""
    from harness.model.records import load_scenario_records

    records = load_scenario_records()
    checked = 0
    for scenario_id in sizing_tables.SCENARIOS:
        record = records.get(scenario_id)
        if record is None:
            continue
        for design in record.designs:
            for (size, level), cell in sizing_tables.cells(design).items():
                bound = sizing_tables.littles_law(record, sizing_tables.in_flight(record, design, size, level),
                                                  sizing_tables.cpu_per_request(cell),
                                                  sizing_tables.usable_cpus(record, design, size))
                checked += 1
                assert bound is None or bound >= cell["rate"]["median"], (scenario_id, design.name, size, bound)
    assert checked > 40


def test_the_table_gives_each_count_its_row_with_memory_per_process_held() -> None:
    table = sizing_tables.sizing_table(RECORD)
    assert "| 1 | **9.8** |" in table.replace("9.9", "9.8") or "| 1 | **9.9** |" in table
    assert "50 / 5 = 10.0" in table  # peak PSS of the group over the 5 processes it held
    assert "20 / 2 = 10.0" in table
    assert "39.8" in table  # Little's law at 4: 4 / (0.1 s + 0.5 ms)


def test_the_generic_scenario_tables_leave_a_sizing_sweep_to_its_own_page() -> None:
    assert sizing_tables.is_sizing(RECORD)
    assert not sizing_tables.is_sizing(sizing_record({"delay": 0.1}))
    found = sizing_tables.best(RECORD, "prefork")
    assert found is not None and found[0] == 4  # the smallest count within 90% of the best median


def grid_record(threads: int, rates: dict[int, float]) -> ScenarioRecord:
    """A gthread grid record: --threads fixed, --workers swept over `rates`' keys (rate 0: no run at that count)."""
    runs = [run(workers, rate, 0.5, 30.0 * workers, workers + 1) for workers, rate in rates.items() if rate
            for _ in range(2)]
    return fake_record(
        {"id": f"sizing-gthread-threads-{threads}", "title": "a test"},
        {"delay": 0, "concurrency": [50], "repeat": 2, "time_limit": 2, "sizes": {"gunicorn-gthread": sorted(rates)},
         "size_arguments": {"gunicorn-gthread": ["--threads", str(threads), "--workers", "{size}"]}},
        [fake_outcome("gunicorn-gthread", runs, model="pre-fork + poller + thread pool")],
        {"pinning": PINNING, "commit": "0123456789ab"}, started_utc="2026-11-25T21:00:00Z")


def grid_records() -> dict[str, ScenarioRecord]:
    return {f"sizing-gthread-threads-{threads}": grid_record(threads, {1: 1000.0 + threads, 2: 2000.0 + threads})
            for threads in (1, 4, 16)}


def test_the_gthread_grid_puts_workers_in_rows_and_threads_in_columns() -> None:
    table = sizing_tables.gthread_grid(grid_records())
    assert table is not None
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert rows[0] == "| workers | 1 thread | 4 threads | 16 threads |"
    assert rows[2].startswith("| 1 | **1,001**<br>p99 120 ms<br>30 MiB | **1,004**")  # 1 worker, 1 then 4 threads
    assert rows[3].startswith("| 2 | **2,001**") and rows[3].count("60 MiB") == 3  # the group's PSS at 2 workers
    assert sizing_tables.gthread_grid({}) is None  # not measured yet: the page says so


def test_the_gthread_grid_names_the_record_and_count_it_lacks() -> None:
    records = grid_records()
    records["sizing-gthread-threads-4"] = grid_record(4, {1: 1004.0, 2: 0})  # planned 2 workers, has no run there
    with pytest.raises(sizing_tables.GridError, match=r"sizing-gthread-threads-4\.json has no run .* at 2 workers"):
        sizing_tables.gthread_grid(records)
    del records["sizing-gthread-threads-16"]
    with pytest.raises(sizing_tables.GridError, match=r"no results/sizing-gthread-threads-16\.json"):
        sizing_tables.gthread_grid(records)
