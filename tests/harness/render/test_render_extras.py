"""Rendering beyond the scenario tables: memory per connection, open-loop rate sweeps, two runs compared.

The records are frozen copies in tests/fixtures/render/ (results/ is refreshed by
every benchmark run, so exact numbers cannot be asserted against it):
sweep-io.json is results/sweep-io.json cut to three designs and three levels,
open-loop-rates.json is results/open-loop.json with `rate` made a list and
invented per-rate values, and the others are unmodified copies.
"""

from __future__ import annotations

import csv
import json
import statistics
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fake_records import fake_outcome, fake_record, fake_run, fixture, typed
from harness.model import limits
from harness.model.records import load_scenario_records, rerun_dir
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.stats import median_interval, spread
from harness.render import cells, memory, multi_process_tables, plots, repeatability, site
from harness.render.cells import cells_by_level, level_key, spread_warning



def record(name: str) -> ScenarioRecord:
    return typed(fixture(name))


def write_record(directory: Path, record: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{record['scenario']['id']}.json").write_text(json.dumps(record), encoding="utf-8")


def least_squares_slope(xs: list[float], ys: list[float]) -> float:
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    return (sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys))
            / sum((x - mean_x) ** 2 for x in xs))


# Memory per open connection

def test_memory_per_connection_is_the_slope_of_median_peak_rss_against_connections() -> None:
    lines = {line.design.name: line for line in memory.memory_lines(record("sweep-io"), [])}
    threads = lines["thread-per-connection"]
    # Peak RSS of the three repetitions: c=1 13.9 ×3, c=100 16.1 ×3, c=1000 22.4, 22.3, 23.0 MiB.
    assert threads.points == [(1, 13.9, "sweep-io"), (100, 16.1, "sweep-io"), (1000, 22.4, "sweep-io")]
    expected = least_squares_slope([1, 100, 1000], [13.9 * 1024, 16.1 * 1024, 22.4 * 1024])
    assert threads.kib_per_connection == pytest.approx(expected) == pytest.approx(8.100, abs=0.001)
    assert lines["prefork"].kib_per_connection == pytest.approx(1.484, abs=0.001)
    assert lines["epoll-loop"].kib_per_connection == pytest.approx(1.193, abs=0.001)
    assert (threads.processes, lines["prefork"].processes) == (1, 9)


def test_the_memory_table_shows_slope_rss_at_both_ends_processes_and_levels() -> None:
    page = memory.memory_page({"sweep-io": record("sweep-io")})
    assert ('| [thread-per-connection](/designs/thread-per-connection.md "A thread per connection") | **8.1** | '
            "13.9 (c=1) | 22.4 (c=1,000) | 1 | 1, 100, 1,000 |") in page
    assert "| **1.5** | 103.5 (c=1) | 105.9 (c=1,000) | 9 |" in page
    assert "`prefork` run as several processes (at most 9)" in page
    assert "each answer closes its connection" in page  # keep-alive is off in this record
    assert "Raw record: `results/sweep-io.json`" in page


def test_a_one_level_record_joins_the_sweep_only_when_measured_alike() -> None:
    sweep, ten_thousand = fixture("sweep-io"), fixture("sweep-10k")

    page = memory.memory_page({"sweep-io": typed(sweep), "sweep-10k": typed(ten_thousand)})  # as committed: other commit
    assert "`sweep-10k` (c=10,000) is not combined: measured at commit `cdd9b90ef3`" in page
    assert "| **1.2** | 14.0 (c=1) | 15.2 (c=1,000) | 1 | 1, 100, 1,000 |" in page

    ten_thousand["environment"]["commit"] = sweep["environment"]["commit"]
    joined = memory.memory_page({"sweep-io": typed(sweep), "sweep-10k": typed(ten_thousand)})
    assert "`sweep-10k` (c=10,000) is combined for `epoll-loop`:" in joined
    expected = least_squares_slope([1, 100, 1000, 10000], [value * 1024 for value in (14.0, 14.2, 15.2, 21.6)])
    assert f"| **{expected:.1f}** | 14.0 (c=1) | 21.6 (c=10,000) | 1 | 1, 100, 1,000 + 10,000 (`sweep-10k`) |" in joined
    assert "| **8.1** | 13.9 (c=1) | 22.4 (c=1,000) |" in joined  # a design sweep-10k lacks is unchanged

    ten_thousand["settings"]["delay"] = 0
    assert "is not combined: a 0 s call there, 0.1 s here" in memory.memory_page(
        {"sweep-io": typed(sweep), "sweep-10k": typed(ten_thousand)})


def with_pss(record: dict[str, Any], share: float) -> dict[str, Any]:
    """Every sampled run gets a peak PSS of `share` times its RSS (as if a part of its pages were shared)."""
    for design in record["designs"]:
        for run in design["runs"]:
            if (run.get("server_resources") or {}).get("peak_rss_mib") is not None:
                run["server_resources"]["peak_pss_mib"] = round(run["server_resources"]["peak_rss_mib"] * share, 1)
    return record


def test_a_record_with_pss_is_shown_in_pss_and_an_older_one_says_it_is_rss() -> None:
    old = memory.memory_page({"sweep-io": record("sweep-io")})
    assert "| Peak RSS at lowest c, MiB |" in old and "this record predates PSS sampling" in old

    sweep = with_pss(fixture("sweep-io"), 0.5)
    page = memory.memory_page({"sweep-io": typed(sweep)})
    assert "| Peak PSS at lowest c, MiB |" in page and "Peak RSS" not in page
    assert "their peak PSS is the sum over the process tree, each shared page divided" in page
    assert "| **0.7** | 51.8 (c=1) | 53.0 (c=1,000) | 9 |" in page  # prefork: half its RSS, 1.5 -> 0.7 KiB

    ten_thousand = fixture("sweep-10k")  # no PSS: not joined to a PSS sweep, whatever else matches
    ten_thousand["environment"]["commit"] = sweep["environment"]["commit"]
    assert "is not combined: memory as RSS there, PSS here" in memory.memory_page(
        {"sweep-io": typed(sweep), "sweep-10k": typed(ten_thousand)})


def test_records_without_two_levels_make_no_memory_table() -> None:
    records = {"sweep-10k": record("sweep-10k"), "open-loop": record("open-loop-rates")}
    assert not memory.is_sweep(records["open-loop"])  # four offered rates, one concurrency
    assert memory.memory_page(records).startswith("*Not measured yet")


# Open-loop rate sweeps

def test_a_rate_sweep_groups_cells_by_offered_rate() -> None:
    data = fixture("open-loop-rates")
    prefork = typed(data).designs[0]
    cells = cells_by_level(prefork.runs, level_key(typed(data)))
    assert sorted(cells) == [20, 40, 80, 160]
    assert [run.requests_per_second for run in cells[160]] == [79.5, 79.7]

    data["settings"]["rate"] = 80  # one rate: cells are by concurrency again, as for the committed records
    assert list(cells_by_level(prefork.runs, level_key(typed(data)))) == [1000]


PREFORK = '[prefork](/designs/prefork.md "Pre-forked worker processes sharing one socket")'


def test_a_rate_sweep_table_has_a_row_per_offered_rate() -> None:
    table = site.scenario_table(record("open-loop-rates"))
    # The table a reader sees first: median, p50 / p99, failures.
    assert table.startswith("| Design | Offered rate (req/s) | Req/s | p50 / p99 ms | Failed |")
    assert f"\n| {PREFORK} | 160 | **79.6** | 1,040 / 2,050 | 0 |\n" in table
    # Every column, behind the toggle (indented under it): model, min–max, p90 and max, completed.
    assert ("\n    | Design | Model | Offered rate (req/s) | Requests/s, median (min–max) | "
            "Latency p50 / p90 / p99 / max (ms) | Failed | Completed |") in table
    assert (f"\n    | {PREFORK} | pre-fork, sequential workers | 160 | "
            "**79.6** (79.5–79.7) | 1,040 / 1,545 / 2,050 / 2,070 | 0 | 320 of 320 |") in table
    assert '| [thread-per-connection](/designs/thread-per-connection.md "A thread per connection") | 20 | **19.8** |' in table
    assert len([line for line in table.splitlines() if line.startswith("| [")]) == 3 * 4
    assert len([line for line in table.splitlines() if line.startswith("    | [")]) == 3 * 4
    assert "in open loop at 20, 40, 80, 160 requests/s offered, at most 1,000 in flight" in table
    assert "2 s of scheduled requests per rate" in table


def test_one_offered_rate_renders_as_before() -> None:
    data = fixture("open-loop-rates")
    data["settings"]["rate"] = 80
    one_rate = typed(data)
    table = site.scenario_table(one_rate)
    assert table.startswith("| Design | Req/s | p50 / p99 ms | Failed |")
    assert "\n    | Design | Model | Requests/s, median (min–max) |" in table
    assert "at concurrency 1000" in table and "requests/s offered" not in table
    assert "open-loop-open-loop-latency.svg" not in plots.scenario_plots(one_rate)


def test_the_open_loop_plot_draws_p50_and_p99_against_offered_rate() -> None:
    figure = plots.open_loop_latency_figure(record("open-loop-rates"))
    try:
        p50, p99 = figure.axes
        assert [axes.get_title(loc="left") for axes in (p50, p99)] == ["p50 latency", "p99 latency"]
        for axes in (p50, p99):
            assert (axes.get_xscale(), axes.get_yscale()) == ("log", "log")
            assert axes.get_xlabel() == "offered rate, requests/s (log scale)"
        assert p50.get_ylabel() == "latency from the scheduled start, ms (log scale)"
        lines = {line.get_label(): line for line in p99.get_lines()}
        assert list(lines["prefork"].get_xdata()) == [20, 40, 80, 160]
        # Medians of the two repetitions' p99: (104+106)/2, (108+110)/2, (137+141)/2, (2010+2090)/2.
        assert list(lines["prefork"].get_ydata()) == [105, 109, 139, 2050]
        assert list(lines["simulated call"].get_ydata()) == [100, 100]
        legend = [text.get_text() for text in p99.get_legend().get_texts()]
        assert legend == ["prefork", "thread-per-connection", "asyncio-streams", "simulated call"]
    finally:
        plots.plt.close(figure)


def test_the_open_loop_plot_is_deterministic_and_rendered_with_the_others() -> None:
    rates = record("open-loop-rates")
    made = plots.scenario_plots(rates)
    assert "open-loop-open-loop-latency.svg" in made
    assert made["open-loop-open-loop-latency.svg"] == plots.open_loop_latency_plot(rates)
    assert "<dc:date>" not in made["open-loop-open-loop-latency.svg"]


# Two runs compared

def scaled(record: dict[str, Any], design_name: str, factor: float) -> None:
    """Multiply one design's requests/s in every run by `factor` (so its median too)."""
    design = next(design for design in record["designs"] if design["name"] == design_name)
    for run in design["runs"]:
        run["requests_per_second"] *= factor


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """results/ with two records; results/rerun/ with a perturbed second run of both."""
    results = tmp_path / "results"
    for name in ("concurrency-models", "async-101"):
        write_record(results, fixture(name))
    second = fixture("concurrency-models")
    second["started_utc"], second["finished_utc"] = "2026-11-22T14:31:37Z", "2026-11-22T14:36:00Z"
    scaled(second, "prefork", 1.25)  # outside 10%
    scaled(second, "thread-pool-queue", 1.05)  # inside
    scaled(second, "epoll-loop", 1.5)  # tool-bound: shown, not counted
    other_machine = fixture("async-101")
    other_machine["environment"]["cpu_count"] = 4
    for record in (second, other_machine):
        write_record(rerun_dir(results), record)
    return results, second, other_machine


def test_the_second_run_in_results_rerun_is_not_a_scenario(two_runs: tuple[Path, Any, Any]) -> None:
    results, _, _ = two_runs
    assert sorted(load_scenario_records(results)) == ["async-101", "concurrency-models"]
    assert load_scenario_records(results)["concurrency-models"].started_utc == "2026-11-22T12:31:37Z"  # run A's
    assert load_scenario_records(results / "no-such-directory") == {}


def test_cells_are_compared_by_relative_difference_and_tool_bound_ones_left_out(
        two_runs: tuple[Path, Any, Any]) -> None:
    _, second, _ = two_runs
    first = record("concurrency-models")
    cells = {cell.design: cell for cell in repeatability.compare_cells(first, typed(second))}
    assert list(cells) == ["sequential-sockets", "prefork", "thread-pool-queue", "epoll-loop"]
    first_prefork = statistics.median(run.requests_per_second for run in first.designs[1].runs)
    assert cells["prefork"].first == pytest.approx(first_prefork)
    assert cells["prefork"].second == pytest.approx(first_prefork * 1.25)
    assert cells["prefork"].difference == pytest.approx(0.25)
    assert cells["sequential-sockets"].difference == 0 and cells["sequential-sockets"].agrees
    # 5% apart, yet outside the min–max of A's five repetitions: A's own runs say B is not where A put it.
    assert cells["thread-pool-queue"].difference == pytest.approx(0.05) and not cells["thread-pool-queue"].agrees
    assert cells["epoll-loop"].tool_bound_in == ["A", "B"] and not cells["epoll-loop"].compared
    assert repeatability.summary(list(cells.values())) == (
        "3 cells compared (not tool-bound, three repetitions or more), 1 with run B's median inside run A's interval")


def test_the_repeatability_page_counts_lists_and_refuses_what_it_cannot_compare(
        two_runs: tuple[Path, Any, Any]) -> None:
    results, _, _ = two_runs
    page = repeatability.repeatability_page(load_scenario_records(results), load_scenario_records(rerun_dir(results)))
    counted = ("3 cells compared (not tool-bound, three repetitions or more), 1 with run B's median inside run A's "
               "interval")
    assert page.startswith(f"**Overall: {counted}.**")
    assert ("| `concurrency-models` | `dbf8699fc4`, 2026-11-22T12:31:37Z – 12:36:00Z, full | "
            f"`dbf8699fc4`, 2026-11-22T14:31:37Z – 14:36:00Z, full | {counted} |") in page
    assert "not compared: different machines: AMD EPYC, 2 CPUs and AMD EPYC, 4 CPUs" in page
    outside = next(line for line in page.splitlines() if line.startswith("- `prefork` at c=8: 9,843 ("))
    assert outside.endswith(") then 12,304 req/s (25.0% apart)")
    rows = {row[1]: row for row in csv.reader(repeatability.cells_csv(
        load_scenario_records(results), load_scenario_records(rerun_dir(results))).splitlines()[1:])}
    assert rows["prefork"][0] == "concurrency-models" and rows["prefork"][5:] == ["25.0%", "⚠ B outside A's interval"]
    assert rows["epoll-loop"][5:] == ["50.0%", "tool-bound in A and B: not counted"]
    assert "| `prefork` |" not in page  # every cell is in the download, not on the page


def test_a_quick_or_failed_second_run_is_said_so() -> None:
    first, second = record("concurrency-models"), consecutive_repeat(fixture("concurrency-models"))
    second["mode"] = "quick"
    assert repeatability.not_comparable(first, typed(second)) == ["run B is a quick run"]

    second = fixture("concurrency-models")
    second["designs"][1].update(status="failed", problems=["server did not start"], runs=[])
    cells = {cell.design: cell for cell in repeatability.compare_cells(first, typed(second))}
    assert cells["prefork"].second is None and not cells["prefork"].compared
    failed = next(row for row in repeatability.cell_rows(first, list(cells.values())) if row[0] == "prefork")
    assert failed[1] == "8" and failed[3:] == ["", "", "not measured in B (failed)"]


def test_one_scenarios_agreement_names_the_largest_difference_and_who_is_outside_the_target(
        two_runs: tuple[Path, Any, Any]) -> None:
    results, _, _ = two_runs
    first_run, second_run = load_scenario_records(results), load_scenario_records(rerun_dir(results))
    sentence, landing = repeatability.scenario_agreement(first_run, second_run, "concurrency-models", 0.05).split(
        ". Run A's medians")
    # Every measured cell counts here, the tool-bound epoll-loop (50% apart) too.
    assert "the largest difference between a server's two medians is 50.0% (`epoll-loop`)" in sentence
    assert "2 of 4 servers more than 5% apart: `prefork` 9,843 then 12,304 (25.0%), `epoll-loop`" in sentence
    assert "`thread-pool-queue`" not in sentence  # 5.0% apart: inside the target
    # Five runs each: A's interval is its min–max, and only a B that moved by more than A's runs did falls out.
    assert landing.endswith("run B's median lies inside A's for 1 of 4 servers: not `prefork`, `thread-pool-queue`, "
                            "`epoll-loop`.\n")
    wide = repeatability.scenario_agreement(first_run, second_run, "concurrency-models", 0.60)
    assert "every one of the 4 servers within 60%. Run A's medians are known to within their min–max" in wide
    assert "cannot be compared: different machines" in repeatability.scenario_agreement(
        first_run, second_run, "async-101", 0.05)
    assert "Not measured yet: no `peak.json` in results/ and results/rerun/" in repeatability.scenario_agreement(
        first_run, second_run, "peak", 0.05)


def consecutive_repeat(record: dict[str, Any]) -> dict[str, Any]:
    """The same record as run B, started a minute after run A finished."""
    finished = datetime.fromisoformat(record["finished_utc"].replace("Z", "+00:00"))
    duration = finished - datetime.fromisoformat(record["started_utc"].replace("Z", "+00:00"))
    started = finished + timedelta(minutes=1)
    record["started_utc"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    record["finished_utc"] = (started + duration).strftime("%Y-%m-%dT%H:%M:%SZ")
    return record


@pytest.mark.parametrize(("change", "reason"), [
    (lambda b: b["environment"].update(commit="0123456789abcdef"), "different commits: dbf8699 then 0123456"),
    (lambda b: b["environment"].update(dirty=True), "a run with uncommitted changes"),
    (lambda b: b["environment"].update(kernel="6.1.0-other"), "different kernels: "),
    (lambda b: b.update(started_utc="2026-11-20T10:00:00Z"), "run B started (2026-11-20T10:00:00Z) before run A"),
    (lambda b: b.update(started_utc="2026-11-24T10:00:00Z"), "h after run A finished (consecutive runs are at most"),
])
def test_only_two_consecutive_runs_of_one_commit_on_one_kernel_are_a_repeat_pair(change, reason) -> None:
    first, second = record("concurrency-models"), consecutive_repeat(fixture("concurrency-models"))
    assert repeatability.not_comparable(first, typed(second)) == []  # the true repeat pair is compared
    change(second)
    reasons = repeatability.not_comparable(first, typed(second))
    assert any(reason in text for text in reasons), reasons
    page = repeatability.repeatability_page({"concurrency-models": first}, {"concurrency-models": typed(second)})
    assert page.startswith("**Overall: 0 cells compared") and "not compared: " in page


def test_a_cell_of_one_repetition_has_no_interval_and_is_not_counted() -> None:
    first, second = fixture("concurrency-models"), typed(consecutive_repeat(fixture("concurrency-models")))
    for design in first["designs"]:
        design["runs"] = design["runs"][:1]
    cells = repeatability.compare_cells(typed(first), second)
    assert all(cell.interval is None and not cell.compared for cell in cells)
    assert any(row[-1] == "fewer than 3 repetitions in A: no interval, not counted"
               for row in repeatability.cell_rows(typed(first), cells))


def test_without_a_second_run_the_page_says_so(tmp_path: Path) -> None:
    write_record(tmp_path / "results", fixture("async-101"))
    files = site.expected_files(tmp_path / "results", tmp_path / "generated")
    page = files[tmp_path / "generated" / "repeatability.md"]
    assert "Not measured yet: no second run is recorded in `results/rerun/`" in page


def test_render_check_sees_a_new_second_run_and_a_changed_sweep(tmp_path: Path) -> None:
    results, generated = tmp_path / "results", tmp_path / "generated"
    for name in ("sweep-io", "open-loop-rates"):
        write_record(results, fixture(name))
    written = site.write_all(results, generated)
    assert generated / "memory-per-connection.md" in written
    assert tmp_path / "generated-plots" / "open-loop-open-loop-latency.svg" in written
    assert site.stale_files(results, generated) == []

    write_record(rerun_dir(results), consecutive_repeat(fixture("sweep-io")))
    # The compared cells' table and its download (issue 35 moved the 202-row table to a CSV) both change.
    assert sorted(site.stale_files(results, generated)) == sorted([
        f"stale: {generated / 'repeatability.md'}", f"stale: {tmp_path / 'generated-plots' / 'repeatability-cells.csv'}"])
    site.write_all(results, generated)
    # The same numbers twice: every cell (3 designs × 3 levels) agrees exactly.
    assert ("9 cells compared (not tool-bound, three repetitions or more), 9 with run B's median inside run A's "
            "interval") in (generated / "repeatability.md").read_text()

    grown = fixture("sweep-io")
    for run in grown["designs"][0]["runs"][2:6:3]:  # two of the three repetitions at c=1000: the median moves
        run["server_resources"]["peak_rss_mib"] = 40.0
    write_record(results, grown)
    assert site.stale_files(results, generated) == [f"stale: {generated / 'memory-per-connection.md'}",
                                                      f"stale: {tmp_path / 'generated-plots' / 'sweep-io-memory.svg'}"]


def test_the_environment_table_says_how_long_each_scenario_and_the_whole_run_took() -> None:
    records = {name: record(name) for name in ("async-101", "concurrency-models")}
    table = site.environment_table(records)
    # async-101 ran 12:30:41 to 12:31:37 (56 s); concurrency-models 12:31:37 to 12:36:00 (4 min 23 s).
    assert "| 56 s |" in table and "| 4 min 23 s |" in table
    assert "took 5 min 19 s in all" in table


def test_the_environment_table_says_how_long_a_load_tool_ran_ceiling_included() -> None:
    records = {name: fixture(name) for name in ("async-101", "concurrency-models")}
    for record in records.values():
        for design in record["designs"]:
            for run in design["runs"]:
                run["duration_s"] = 2.0
        design["runs"][0]["duration_s"] = None  # a failed cell has no duration: it counts as 0
    ceiling = records["concurrency-models"]["designs"][0]
    records["concurrency-models"]["ceiling"] = {**ceiling, "runs": [{**ceiling["runs"][0], "duration_s": 30.0}]}
    cells = {name: sum(len(design["runs"]) for design in record["designs"]) for name, record in records.items()}
    expected = {name: 2.0 * (count - 1) for name, count in cells.items()}
    expected["concurrency-models"] += 30.0
    table = site.environment_table({name: typed(data) for name, data in records.items()})
    rows = {name: next(line for line in table.splitlines() if line.startswith(f"| `{name}` |")) for name in records}
    for name, seconds in expected.items():
        assert rows[name].endswith(f"| {site.format_duration(seconds)} |"), (name, rows[name])
    assert f"A load tool was running for {site.format_duration(sum(expected.values()))} of it" in table


def test_the_completed_column_names_the_limit_each_design_ran_under() -> None:
    """A blocking design may run under the scenario's time_limit_blocking: its row names that limit."""
    data = fixture("concurrency-models")
    for run in data["designs"][0]["runs"]:
        run.update(time_limit=4, complete=20000)
    models = typed(data)
    blocking = models.designs[0]
    assert "of 100,000" not in site.design_rows(models, blocking, with_name=False)[0]  # behind the toggle
    rows = site.design_rows(models, blocking, with_name=False, every_column=True)
    assert "20,000 of 100,000 (4 s limit)" in rows[0]
    assert f"({models.settings.time_limit:g} s limit)" not in rows[0]


def slowed_repetition(record: dict[str, Any], repetition: int, factor: float) -> None:
    """Multiply every design's requests/s in one repetition by `factor`: a machine disturbed for a while."""
    for design in record["designs"]:
        for run in design["runs"]:
            if run["repetition"] == repetition:
                run["requests_per_second"] *= factor


def test_a_repetition_slow_for_every_design_is_flagged_as_the_machine() -> None:
    first, slowed = record("concurrency-models"), fixture("concurrency-models")
    slowed_repetition(slowed, repetition=1, factor=0.7)
    second = typed(slowed)
    speeds = repeatability.repetition_speeds(first, second)
    assert speeds["A"] == pytest.approx([1.0, 1.0, 1.0], abs=0.03)
    assert speeds["B"][1] == pytest.approx(0.7, abs=0.03)
    assert speeds["B"][0] == pytest.approx(1.0, abs=0.03) and speeds["B"][2] == pytest.approx(1.0, abs=0.03)
    line = repeatability.speeds_line(first, second)
    assert "⚠ More than 10% off across their cells: run B's repetition 2 (70%)." in line


def test_one_design_that_varies_does_not_move_a_repetitions_speed() -> None:
    first, varied = record("concurrency-models"), fixture("concurrency-models")
    prefork = next(design for design in varied["designs"] if design["name"] == "prefork")
    for run in prefork["runs"]:
        if run["repetition"] == 1:
            run["requests_per_second"] *= 0.5  # one design, one repetition: its cell moves, the median does not
    second = typed(varied)
    speeds = repeatability.repetition_speeds(first, second)
    assert all(speed == pytest.approx(1.0, abs=0.03) for values in speeds.values() for speed in values)
    assert "⚠" not in repeatability.speeds_line(first, second)
    assert repeatability.speeds_line(first, second).startswith("Speed of each repetition")


def test_the_spread_flag_marks_runs_that_disagree_by_more_than_a_tenth_in_every_table() -> None:
    steady = spread([1920.0, 1990.0, 2000.0, 2050.0, 2100.0])  # five runs: the interval is min–max, 9%
    unsteady = spread([1800.0, 1900.0, 2000.0, 2200.0, 2500.0])  # 35%
    assert spread_warning(steady) == "" and spread_warning(steady, word="") == ""
    assert spread_warning(unsteady) == " ⚠ spread 35%"
    assert site.rate_label({"rate": unsteady}) == "**2,000** ⚠ spread 35%"
    assert site.rate_label({"rate": unsteady}, every_column=True) == "**2,000** (1,800–2,500) ⚠ spread 35%"
    assert multi_process_tables.flagged_median(unsteady) == "2,000 ⚠ 35%"  # its column says what the number is
    assert multi_process_tables.flagged_median(steady) == "2,000"


def test_with_more_runs_the_flag_and_the_brackets_give_the_medians_interval_not_the_extremes() -> None:
    # Fifteen runs, one very slow and one very fast: min–max is 50% of the median, but the median
    # lies between the 4th lowest and the 4th highest (96%), 1,950–2,050: 5%, not flagged.
    runs = [1500.0, 1900.0, 1940.0, 1950.0, 1960.0, 1980.0, 1990.0, 2000.0,
            2010.0, 2020.0, 2040.0, 2050.0, 2060.0, 2100.0, 2500.0]
    rate = spread(runs)
    assert (rate["interval_low"], rate["interval_high"]) == (1950.0, 2050.0)
    assert spread_warning(rate) == ""
    assert site.rate_label({"rate": rate}, every_column=True) == "**2,000** (1,950–2,050)"


@pytest.mark.parametrize(("count", "k", "confidence"), [
    (1, 1, 0.0), (3, 1, 0.75), (5, 1, 1 - 2 / 32), (15, 4, 1 - 2 * (1 + 15 + 105 + 455) / 2 ** 15)])
def test_the_medians_interval_is_the_narrowest_pair_of_order_statistics_that_holds_it_93_percent_of_the_time(
        count: int, k: int, confidence: float) -> None:
    runs = [float(value) for value in range(count, 0, -1)]  # given in any order: count, ..., 2, 1
    assert median_interval(runs) == (k, count + 1 - k, pytest.approx(confidence))
    with pytest.raises(ValueError):
        median_interval([])


def test_the_tools_ceiling_is_the_most_it_reached_at_a_level_not_only_against_the_ceiling_design() -> None:
    """A design the tool drove past the ceiling run shows the tool can go that fast: the ceiling is its rate, no cell
    reads above 100%, and a cell that was near the ceiling run but is far from the faster design is not tool-bound."""
    settings = {"requests": 0, "concurrency": [50], "time_limit": 2, "delay": 0, "repeat": 1, "ceiling": "nginx"}
    record = fake_record({"id": "ceilings"}, settings,
                         [fake_outcome("fast", [fake_run(concurrency=50, requests_per_second=150.0)]),
                          fake_outcome("slow", [fake_run(concurrency=50, requests_per_second=110.0)])],
                         ceiling=fake_outcome("nginx", [fake_run(concurrency=50, requests_per_second=100.0)]))
    ceiling = limits.ceilings(record)[50]
    assert ceiling == 150.0
    fast, slow = ({"rate": spread([rate]), "runs": []} for rate in (150.0, 110.0))
    assert cells.rate_flags(fast, ceiling) == " ⚠ tool-bound (100% of ceiling)"  # no tool CPU: the old rule
    assert cells.rate_flags(slow, ceiling) == ""  # 73% of what the tool reached; 110% of the ceiling run alone
