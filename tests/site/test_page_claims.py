"""Sentences the pages compute from a record, each checked against the record it reads (issue 31, finding 8).

A claim of this kind ("up to fifty clients every model keeps up", "between uvicorn's and Granian's") is no
number, so no figure carries it; when a re-run changes the record, the test that names the sentence fails
and says which page to re-read.
"""

from __future__ import annotations

import functools
import json
import re
import statistics

from harness.model.paths import REPO_ROOT
from harness.model.records import load_scenario_records
from harness.model.records.scenario_record import ScenarioRecord
from harness.render import streaming_tables

DOCS = REPO_ROOT / "docs"
CALL_S = 0.1  # sweep-io's simulated call
# sweep-io's designs with no fixed number of workers: which-model.md's "every model without a fixed number of workers"
UNBOUNDED = ("thread-per-connection", "epoll-loop", "asyncio-streams", "gunicorn-gevent", "uvicorn", "nginx")
KEEPS_UP = 0.95  # within 5% of the best median at the level


@functools.cache
def committed_records() -> dict[str, ScenarioRecord]:
    """results/ read once per test process (0.45 CPU-s a read): the records are frozen, the tests only read them."""
    return load_scenario_records()


def medians(scenario_id: str, level: int | None = None) -> dict[str, float]:
    """Each design's median requests per second in a committed record, at one concurrency level (None: every run)."""
    found = {}
    for design in committed_records()[scenario_id].designs:
        rates = [run.requests_per_second for run in design.runs
                 if level in (None, run.concurrency) and run.error is None and run.requests_per_second is not None]
        if rates:
            found[design.name] = statistics.median(rates)
    return found


def medians_at(level: int) -> dict[str, float]:
    """sweep-io's medians at `level` of the designs with no fixed number of workers."""
    return {name: rate for name, rate in medians("sweep-io", level).items() if name in UNBOUNDED}


def test_which_model_up_to_fifty_clients_every_unbounded_model_keeps_up_and_at_a_hundred_streams_falls_behind() -> None:
    page = (DOCS / "which-model.md").read_text(encoding="utf-8")
    assert "Up to\nfifty clients every model without a fixed number of workers keeps up" in page
    for level in (1, 10, 50):
        medians = medians_at(level)
        assert set(medians) == set(UNBOUNDED), level
        best = max(medians.values())
        behind = {name: round(rate) for name, rate in medians.items() if rate < KEEPS_UP * best}
        assert not behind, f"which-model.md: at {level} clients {behind} fell behind {best:.0f} req/s"
    hundred = medians_at(100)
    assert hundred["asyncio-streams"] < KEEPS_UP * max(hundred.values()), (
        "which-model.md says asyncio streams answers fewer than the others at a hundred clients")


def test_streaming_a_thread_per_stream_costs_between_uvicorn_and_granian_per_stream() -> None:
    record = streaming_tables.load(REPO_ROOT / "results")
    assert record is not None
    per_stream = {row.design: float(streaming_tables.held_and_per_stream(row)[1])
                  for row in streaming_tables.rows(record, "hold")}
    assert per_stream["sse-uvicorn"] < per_stream["sse-thread-per-connection"] < per_stream["sse-granian"], (
        f"streaming.md places the threads' KiB per stream between uvicorn's and Granian's: {per_stream}")
    assert "above uvicorn's and below Granian's" in (DOCS / "streaming.md").read_text(encoding="utf-8")


SHORTEST_GRACE_S = 5.0  # zero-downtime.md: uvicorn's --timeout-graceful-shutdown and our supervisor's SHUTDOWN_GRACE


def test_zero_downtime_every_request_in_flight_had_less_left_than_the_shortest_graceful_timeout() -> None:
    """'No server lost a request that could finish within its graceful timeout': every long request was answered,
    and ended less than the shortest graceful timeout after the restart signal."""
    record = json.loads((REPO_ROOT / "results" / "multi-process" / "restart-in-flight.json").read_text("utf-8"))
    checked = 0
    for target in record["targets"]:
        for run in target["runs"]:
            for request in run["report"]["long"]:
                assert request["outcome"] == 200, (target["name"], request)
                assert request["sent_s"] + request["took_s"] < SHORTEST_GRACE_S, (target["name"], request)
                checked += 1
    assert checked > 0
    assert "could finish within its graceful timeout" in (DOCS / "zero-downtime.md").read_text(encoding="utf-8")


def test_fast_and_correct_counts_the_rows_of_its_checks_table() -> None:
    page = (DOCS / "designs" / "fast-and-correct.md").read_text(encoding="utf-8")
    said = re.search(r"\n(\w+) checks, cheapest first", page)
    assert said, "the sentence before the checks table"
    table = page[said.end():].split("\n\n")[1]
    rows = [line for line in table.splitlines() if line.startswith("|")][2:]
    words = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
    assert words[said.group(1).lower()] == len(rows), f"'{said.group(1)} checks' above a table of {len(rows)} rows"


def test_conformance_says_behind_a_proxy() -> None:
    assert "in front of a proxy" not in (DOCS / "conformance.md").read_text(encoding="utf-8")


def test_survive_fast_and_correct_and_the_hardened_design_were_robust_in_every_case() -> None:
    """survive.md: 'an event-loop server with strict parsing and timeouts (fast and correct) was robust in every case
    here on its own, as was the hardened design' (and says what that does not cover: TLS, the cost under attack)."""
    record = json.loads((REPO_ROOT / "results" / "hostile.json").read_text(encoding="utf-8"))

    def weak_cases(name: str) -> set[str]:
        design = next(design for design in record["designs"] if design["name"] == name)
        cases = design["cases"].values() if isinstance(design["cases"], dict) else design["cases"]
        ids = [case["id"] for case in record["cases"]]
        return {ids[index] for index, case in enumerate(cases) if case["verdict"] != "robust"}

    assert weak_cases("fast-and-correct") == set()
    assert weak_cases("hardened") == set()
    page = " ".join((DOCS / "survive.md").read_text(encoding="utf-8").split())
    assert "was robust in every case here on its own, as was the [hardened design]" in page
    assert "without TLS" in page


def scaling_ratios() -> dict[str, float]:
    """many-cores.md's CPU-bound table: each design's median on two CPUs over its median on one."""
    one, two = medians("scaling-cpu-one-cpu"), medians("scaling-cpu-two-cpus")
    return {name: two[name] / one[name] for name in one if name in two}


def test_many_cores_one_process_gains_nothing_from_a_second_cpu_and_the_thread_pool_loses_most() -> None:
    """'their ratio stays at or below 1, and the thread pool's falls furthest' (the CPU-bound section)."""
    assert "their ratio stays at\nor below 1, and the thread pool's falls furthest" in (DOCS / "many-cores.md").read_text()
    ratios = scaling_ratios()
    one_process = {name: ratios[name] for name in ("asyncio-streams", "thread-pool-executor")}
    assert max(one_process.values()) <= 1.0, ratios
    assert min(ratios, key=ratios.get) == "thread-pool-executor", ratios
