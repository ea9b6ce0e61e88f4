"""The guide's verdict on the simulated call (render/database_tables.py), from a small record made here.

A real call within 10% of its simulated twin's rate told the truth; the sentence answers per kind of bound
(threads, connections, a connection per request); every rate carries its flags, the second run's included.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from fake_records import fake_outcome, fake_record_json, fake_run
from harness.model.records.scenario_record import ScenarioRecord
from harness.render import database_tables

# Each design's rate at 50 clients (three runs around it); the twins of two real calls, and the calls.
RATES = {"thread-pool-executor": 150.0, "threads-psycopg-pool": 149.0, "asyncio-streams": 450.0,
         "asyncio-asyncpg": 150.0}


def runs(rate: float) -> list[dict[str, Any]]:
    return [fake_run(concurrency=clients, requests_per_second=rate * factor * clients / 50,
                     latency_ms={"p50": 100.0, "p99": 110.0}, complete=300, requests_requested=0, duration_s=2.0)
            for clients in (10, 50) for factor in (0.99, 1.0, 1.01)]


def record() -> dict[str, Any]:
    """The record's JSON, to change before it is read (typed)."""
    return fake_record_json({"id": "database-sleep"},
                            {"concurrency": [10, 50], "repeat": 3, "time_limit": 2},
                            [fake_outcome(name, runs(rate)) for name, rate in RATES.items()],
                            {"commit": "a" * 40, "cpu_model": "cpu", "cpu_count": 2, "kernel": "6", "dirty": False},
                            mode="full", started_utc="2026-11-26T01:00:00Z", finished_utc="2026-11-26T01:04:00Z")


def typed(data: dict[str, Any]) -> ScenarioRecord:
    return ScenarioRecord.from_json(data, "test record")


def test_the_verdict_says_yes_for_the_threads_and_no_for_the_event_loops_with_the_table_behind_it() -> None:
    sentence, table = database_tables.verdict(typed(record()))
    assert "At 50 clients" in sentence
    assert "yes where 16 threads bounded the waits anyway (the thread pools: 1 of 1)" in sentence
    assert "no where only the 16 connections did (the event loops: 0 of 1)" in sentence
    assert "opened its own connection" not in sentence  # no such design in this record: no answer for it
    assert "| **149.0** / **150.0** (" in table and "| 99% |" in table
    assert "| **150.0** / **450.0** (" in table and "| 33% |" in table
    assert "| not measured | – |" in table  # a real call whose cells the record lacks


def test_a_rate_whose_second_run_fell_outside_its_interval_carries_the_repeat_flag() -> None:
    first = record()
    second = copy.deepcopy(first)
    second["started_utc"], second["finished_utc"] = "2026-11-26T01:05:00Z", "2026-11-26T01:09:00Z"
    for design in second["designs"]:
        if design["name"] == "asyncio-asyncpg":
            for run in design["runs"]:
                run["requests_per_second"] *= 0.7
    _, table = database_tables.verdict(typed(first), typed(second))
    assert "**150.0** ⚠ second run 105.0 req/s (−30%) / **450.0**" in table
    agreeing = copy.deepcopy(first) | {"started_utc": "2026-11-26T01:05:00Z", "finished_utc": "2026-11-26T01:09:00Z"}
    assert "⚠ second run " not in database_tables.verdict(typed(first), typed(agreeing))[1]  # the caption's "second run:" only


def test_without_a_record_the_guide_says_how_to_measure_it(tmp_path: Path) -> None:
    files = database_tables.database_files({}, tmp_path, "{source}\n")
    assert "bench.py run --scenario database-sleep" in files[tmp_path / "database" / "guide.md"]


def single_query_record(scenario_id: str, keep_alive: bool, rate: float) -> ScenarioRecord:
    """A database-single-shaped record: one design at 50 clients, with keep-alive or without (and its reason)."""
    settings = {"concurrency": [50], "repeat": 3, "time_limit": 2, "keep_alive": keep_alive, "database": True,
                "path": "/db", **({} if keep_alive else {"closes_connections": "to show what a connection costs"})}
    outcome = fake_outcome("threads-psycopg-pool",
                           [fake_run(concurrency=50, requests_per_second=rate * factor, latency_ms={"p50": 5.0,
                                                                                                     "p99": 9.0},
                                     complete=3000, requests_requested=0, duration_s=2.0)
                            for factor in (0.99, 1.0, 1.01)])
    return typed(fake_record_json({"id": scenario_id}, settings, [outcome], {"commit": "b" * 40},
                                  mode="full", started_utc="2026-11-28T12:00:00Z", finished_utc="2026-11-28T12:01:00Z"))


def test_the_keep_alive_table_sets_each_design_with_kept_connections_beside_a_connection_per_request() -> None:
    """Issue 31: the cost of a connection per request, per design, from the two records; each caption says whether
    wrk kept its connections, and the table waits for both records."""
    kept = single_query_record("database-single", True, 4000.0)
    closed = single_query_record(database_tables.CLOSE_SCENARIO, False, 1000.0)
    table = database_tables.connection_cost_table({"database-single": kept, database_tables.CLOSE_SCENARIO: closed})
    assert "| **4,000** | **1,000** | 4.0× | 9.0 / 9.0 |" in table
    assert "a new TCP connection per request (keep-alive off: to show what a connection costs)" in table
    assert "Not measured yet" in database_tables.connection_cost_table({"database-single": kept})
    assert "wrk keeps its connections open" in database_tables.footer(kept)
    assert "wrk for 2 s, wrk keeps its connections open" in database_tables.queries_table({"database-single": kept})
