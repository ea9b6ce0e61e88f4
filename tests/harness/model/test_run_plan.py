"""How a run is laid out: its cells (concurrency levels or offered rates), per-design time
limits, the plan behind the progress display, and an open-loop rate sweep end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_records import fake_outcome, fake_record_json
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT
from harness.render import site
from harness.suites import plan
from harness.system import ports
from scenario_settings import settings_of

BENCH = [sys.executable, str(REPO_ROOT / "scripts" / "bench.py")]
CATALOGUE = load_catalogue()


def test_a_closed_loop_scenario_has_one_cell_per_concurrency_level() -> None:
    cells = plan.levels(settings_of(concurrency=[1, 10, 50], requests=100))
    assert cells == [("c=1", 1, {}), ("c=10", 10, {}), ("c=50", 50, {})]


def test_an_open_loop_rate_list_sweeps_the_rate_at_one_in_flight_cap() -> None:
    cells = plan.levels(settings_of(concurrency=[1000], rate=[20, 80, 160], schedule_seconds=2, requests=0))
    assert cells == [("rate=20", 1000, {"rate": 20, "requests": 40}),
                     ("rate=80", 1000, {"rate": 80, "requests": 160}),
                     ("rate=160", 1000, {"rate": 160, "requests": 320})]


def test_a_single_rate_keeps_the_concurrency_levels() -> None:
    assert plan.levels(settings_of(concurrency=[1000], rate=80, requests=400)) == [("c=1000", 1000, {})]


def test_only_blocking_designs_get_the_shorter_time_limit() -> None:
    settings = settings_of(time_limit=11, time_limit_blocking=4)
    blocking, concurrent = CATALOGUE.design("sequential-sockets"), CATALOGUE.design("thread-per-connection")
    assert plan.design_settings(settings, blocking).time_limit == 4
    assert plan.design_settings(settings, concurrent).time_limit == 11
    assert plan.design_settings(settings_of(time_limit=11), blocking).time_limit == 11  # no cap set: none applied


def test_the_plan_counts_every_cell_of_every_repetition_and_the_ceiling() -> None:
    designs = [CATALOGUE.design("sequential-sockets"), CATALOGUE.design("thread-per-connection")]
    settings = settings_of(concurrency=[1, 10], repeat=3, time_limit=11, time_limit_blocking=4)
    planned = plan.plan_cells(settings, designs, with_ceiling=True)
    overhead = plan.CELL_OVERHEAD_SECONDS
    assert len(planned) == 2 + 3 * 2 * 2  # the ceiling's two levels, then repetitions x designs x levels
    assert planned.count(4 + overhead) == 3 * 2  # the blocking design's cells, under its own limit
    assert planned.count(11 + overhead) == 2 + 3 * 2


def test_the_plan_of_the_whole_catalogue_uses_five_repetitions_in_full_and_one_in_quick() -> None:
    for scenario in CATALOGUE.scenarios.values():
        full, quick = plan.scenario_settings(scenario, quick=False), plan.scenario_settings(scenario, quick=True)
        assert quick.repeat == 1, scenario.id
        # The timeline is a picture of one run, not a statistic; every other cell is repeated five times,
        # peak fifteen (its two consecutive runs must agree within 5%: see its catalogue entry). Fewer, each
        # stated on its page: the database scenarios and the vegeta cross-check three (a PostgreSQL start per
        # design, and a 12-minute budget), the sizing sweeps two (one run per count of a long grid), and the
        # open-loop sizing run one (a schedule per rate).
        # peak-production-heads three (thirteen keep-alive designs, nginx and its own ceiling: about six minutes).
        fewer = {"timeline": 1, "peak": 15, "sizing-open-loop": 1, "open-loop-vegeta": 3, "peak-production-heads": 3}
        # The free-threaded pairs three (six scenarios of up to nine designs on two builds, near 15 minutes).
        expected = fewer.get(scenario.id, 3 if scenario.id.startswith(("database-", "free-threaded-")) else
                             2 if scenario.id.startswith("sizing-") else 5)
        assert full.repeat == expected, scenario.id


def test_progress_scales_the_estimate_by_how_the_finished_cells_compared(capsys: pytest.CaptureFixture[str],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 100.0, 120.0])  # start; first step at once; second step 20 s later
    monkeypatch.setattr(plan.time, "monotonic", lambda: next(clock))
    progress = plan.Progress([10.0, 10.0, 10.0])
    progress.step("first")
    progress.step("second")  # one cell of 10 s estimated took 20 s: the two left will take about 40 s
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[1/3] first") and "about 0:30 left" in lines[0]
    assert lines[1].startswith("[2/3] second") and "elapsed 0:20" in lines[1] and "about 0:40 left" in lines[1]
    progress.skip(5)  # skipping past the end cannot count more cells than planned
    assert progress.done == 3


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
def test_an_open_loop_rate_sweep_records_one_run_per_rate(tmp_path: Path) -> None:
    result = subprocess.run([*BENCH, "run", "--scenario", "open-loop", "--quick", "--design", "asyncio-streams",
                             "--out", str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    assert "[1/2] open-loop: asyncio-streams rate=20" in result.stderr
    assert "[2/2] open-loop: asyncio-streams rate=160" in result.stderr
    record = json.loads((tmp_path / "open-loop.json").read_text())
    runs = record["designs"][0]["runs"]
    # The quick settings schedule one second of each rate: 20 and 160 requests.
    assert [(run["extras"]["rate"], run["requests_requested"], run["concurrency"]) for run in runs] == [
        (20, 20, 1000), (160, 160, 1000)]
    assert all(run["extras"]["mode"] == "open" and run["failed"] == 0 for run in runs)
    assert [run["complete"] for run in runs] == [20, 160]


def test_one_plan_spans_every_scenario_of_a_run() -> None:
    from_scratch, sweep = CATALOGUE.scenario("from-scratch"), CATALOGUE.scenario("sweep-io")
    progress = plan.plan_run(CATALOGUE, [(from_scratch, None), (sweep, ["nginx"])], quick=True, repeat=None)
    quick_sweep_levels = len(sweep.settings(quick=True).concurrency)
    # from-scratch's quick designs (no ceiling: exempt), then sweep-io's ceiling and the one design named.
    assert len(progress.planned) == len(from_scratch.design_names(quick=True)) + 2 * quick_sweep_levels


def test_a_quick_run_measures_the_few_designs_its_quick_table_names() -> None:
    from_scratch = CATALOGUE.scenario("from-scratch")
    chosen = from_scratch.design_names(quick=True)
    assert chosen == from_scratch.quick.designs and set(chosen) < set(from_scratch.designs)
    assert from_scratch.design_names(quick=False) == from_scratch.designs
    assert from_scratch.to_json()["quick"]["designs"] == chosen  # the record says which
    full = plan.plan_run(CATALOGUE, [(from_scratch, None)], quick=False, repeat=1)
    quick = plan.plan_run(CATALOGUE, [(from_scratch, None)], quick=True, repeat=None)
    assert (len(full.planned), len(quick.planned)) == (len(from_scratch.designs), len(chosen))
    named = plan.plan_run(CATALOGUE, [(from_scratch, ["stdlib-http-server"])], quick=True, repeat=None)
    assert len(named.planned) == 1  # --design names any of the scenario's designs, quick or not


def test_the_time_left_is_corrected_by_how_the_last_recorded_run_compared_with_its_plan(tmp_path: Path) -> None:
    settings = {"requests": 0, "concurrency": [10], "time_limit": 9, "delay": 0, "keep_alive": False, "repeat": 2}
    record = fake_record_json({"id": "from-scratch"}, settings, [fake_outcome("thread-per-connection", [])],
                              started_utc="2026-01-01T00:00:00Z", finished_utc="2026-01-01T00:00:05Z")
    (tmp_path / "from-scratch.json").write_text(json.dumps(record))
    # Planned: 2 cells of 9 + 1 s = 20 s; the record took 5 s: the scenario runs at a quarter of its plan.
    assert plan.past_speed(CATALOGUE, tmp_path, "from-scratch") == pytest.approx(0.25)
    assert plan.past_speed(CATALOGUE, tmp_path, "no-record-yet") == 1.0
    (tmp_path / "broken.json").write_text("{")
    assert plan.past_speed(CATALOGUE, tmp_path, "broken") == 1.0


def test_the_time_wait_threshold_is_half_the_kernel_table(tmp_path: Path) -> None:
    size = tmp_path / "tcp_max_tw_buckets"
    size.write_text("131072\n")
    assert ports.time_wait_drain_threshold(size) == 65536
    assert ports.time_wait_drain_threshold(tmp_path / "missing") == 32_768


def test_the_wait_ends_at_once_below_the_threshold_and_is_bounded_above_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "time_wait_sockets", lambda: 100)
    started = time.monotonic()
    ports.wait_for_time_wait_drain(below=1000, max_wait=5)
    assert time.monotonic() - started < 0.5
    monkeypatch.setattr(ports, "time_wait_sockets", lambda: 5000)
    started = time.monotonic()
    ports.wait_for_time_wait_drain(below=1000, max_wait=1.2)
    assert 1.0 <= time.monotonic() - started < 3


def test_time_limit_at_lengthens_only_the_levels_it_names() -> None:
    settings = settings_of(concurrency=[10, 500, 1000], time_limit=1, time_limit_at={"500": 2, "1000": 3}, repeat=1)
    assert plan.levels(settings) == [("c=10", 10, {}), ("c=500", 500, {"time_limit": 2}),
                                       ("c=1000", 1000, {"time_limit": 3})]
    overhead = plan.CELL_OVERHEAD_SECONDS
    planned = plan.plan_cells(settings, [CATALOGUE.design("thread-per-connection")], with_ceiling=False)
    assert planned == [1 + overhead, 2 + overhead, 3 + overhead]


def test_the_caption_names_the_longer_levels() -> None:
    assert site.longer_levels_label(settings_of(time_limit_at={"500": 2, "1000": 2})) == " (2 s at 500 and 1,000)"
    assert site.longer_levels_label(settings_of(time_limit_at={"500": 2, "1000": 3})) == " (2 s at 500; 3 s at 1,000)"
    assert site.longer_levels_label(settings_of()) == ""
