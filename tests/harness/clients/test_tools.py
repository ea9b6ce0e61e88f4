"""Load-tool adapters: parsing of captured outputs, command lines, and one real run per tool.

The fixtures in tests/fixtures/<tool>/ are real outputs captured on 127.0.0.1
(see each directory's README.md); every expected value below can be checked by
reading the fixture file it comes from.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from harness.model.paths import REPO_ROOT
from harness.clients import tools
from harness.clients.tools import ab, hey, wrk
from scenario_settings import settings_of

from conftest import CATALOGUE, started

FIXTURES = REPO_ROOT / "tests" / "fixtures"
URL = "http://127.0.0.1:8000/"


def fixture(tool: str, name: str) -> str:
    return (FIXTURES / tool / name).read_text()


def ab_run(name: str) -> dict:
    return ab.parse_run(fixture("ab", f"{name}.stdout"), fixture("ab", f"{name}.csv"), fixture("ab", f"{name}.tsv"))


# --- ab ---------------------------------------------------------------------------------------------------------


def test_ab_complete_run_takes_percentiles_from_the_e_file() -> None:
    run = ab_run("complete")
    assert (run["complete"], run["failed"], run["non_2xx"]) == (300, 0, 0)
    assert run["requests_per_second"] == 439.44
    assert run["duration_s"] == 0.683
    # 300 complete > 50: the -e rows 50, 90, 99 and 100; the mean is "Time per request (mean)".
    # mean: the "Total:" row of ab's connection times (whole ms), not "Time per request (mean)"
    assert run["latency_ms"] == {"mean": 22.0, "p50": 22.583, "p90": 23.205, "p99": 23.687, "max": 23.717}


def test_ab_failures_are_split_by_kind_and_non_2xx_kept_apart() -> None:
    run = ab_run("failures")
    assert (run["complete"], run["failed"], run["non_2xx"]) == (100, 66, 20)
    assert run["failed_by_kind"] == {"connect": 0, "receive": 0, "length": 66, "exceptions": 0}
    assert run["requests_per_second"] == 7589.56
    assert run["latency_ms"] == {"mean": 0.0, "p50": 0.456, "p90": 0.614, "p99": 0.877, "max": 0.877}


def test_ab_time_limited_run_with_few_requests_takes_percentiles_from_the_g_file() -> None:
    run = ab_run("time_limited")
    assert (run["complete"], run["failed"]) == (20, 0)
    assert run["requests_per_second"] == 9.94
    assert run["duration_s"] == 2.012
    # 20 complete <= 50: nearest rank over the 20 whole-ms 'ttime' values of the -g file.
    assert {key: run["latency_ms"][key] for key in ("p50", "p90", "p99", "max")} == \
        {"p50": 905.0, "p90": 1006.0, "p99": 1006.0, "max": 1006.0}


def test_ab_mean_latency_is_never_above_the_slowest_request() -> None:
    latency = ab_run("time_limited")["latency_ms"]
    assert latency["mean"] <= latency["max"]


def test_ab_percentile_tables_parse_exactly() -> None:
    table = ab.parse_percentiles_csv(fixture("ab", "complete.csv"))
    assert (len(table), table[0], table[100]) == (101, 2.716, 23.717)
    assert ab.parse_gnuplot_tsv(fixture("ab", "time_limited.tsv"))[:3] == [101.0, 101.0, 201.0]


def test_ab_output_without_a_summary_is_an_error() -> None:
    with pytest.raises(ValueError, match="complete"):
        ab.parse_summary("apr_socket_connect(): Connection refused (111)\n")


@pytest.mark.parametrize(("settings", "expected"), [
    ({"requests": 1000, "time_limit": 10, "keep_alive": False},
     ["ab", "-t", "10", "-n", "1000", "-c", "10"]),
    ({"requests": 1000, "time_limit": 0, "keep_alive": True},
     ["ab", "-n", "1000", "-c", "10", "-k"]),
    ({"requests": 1000, "time_limit": None, "keep_alive": False, "ab_flags": ["r", "l"]},
     ["ab", "-n", "1000", "-c", "10", "-r", "-l"]),
], ids=["time-limit-before-n", "keep-alive", "extra-flags"])
def test_ab_command(settings: dict, expected: list[str], tmp_path: Path) -> None:
    tail = ["-e", str(tmp_path / "ab.csv"), "-g", str(tmp_path / "ab.tsv"), URL]
    assert ab.TOOL.command(URL, 10, settings_of(**settings), tmp_path) == expected + tail


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ab (apache2-utils), which `make test` installs")
def test_ab_takes_one_round_more_than_requests_over_clients(tmp_path: Path) -> None:
    """Why ab -n 1000 -c 10 against a 100 ms call tops out near 99 req/s, not 100 (methodology page).

    Ten requests from ten clients against a server that takes 0.3 s each would take one round
    (0.3 s) if all ten started together; ab takes two. Its rate is therefore n / ((n/c + 1) x call).
    """
    with started(CATALOGUE.design("thread-per-connection"), tmp_path, delay=0.3) as server:
        result = subprocess.run(["ab", "-n", "10", "-c", "10", f"http://{server.host}:{server.port}/"],
                                capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    summary = ab.parse_summary(result.stdout)
    assert summary["complete"] == 10 and summary["failed"] == 0
    assert 0.55 <= summary["duration_s"] < 1.2, f"ab took {summary['duration_s']} s: expected two rounds of 0.3 s"


# --- hey --------------------------------------------------------------------------------------------------------


def test_hey_complete_run() -> None:
    run = hey.parse_run(fixture("hey", "complete.csv"), requests_expected=200)
    assert (run["complete"], run["failed"], run["non_2xx"]) == (200, 0, 0)
    # The first request starts at offset 0.0001 s; the last to end starts at 0.2977 s and takes 0.0109 s.
    assert run["duration_s"] == 0.3085
    assert run["requests_per_second"] == pytest.approx(200 / 0.3085)
    assert run["latency_ms"] == pytest.approx(
        {"mean": 14.9715, "p50": 11.3, "p90": 15.3, "p99": 71.2, "max": 84.6, "mode": 10.5})


def test_hey_writes_no_row_for_a_reset_so_lost_requests_are_counted_from_the_total() -> None:
    # tests/fixtures/hey/reset.csv: 40 requests, every 4th connection reset, every 4th answered 503.
    run = hey.parse_run(fixture("hey", "reset.csv"), requests_expected=40)
    assert (run["complete"], run["failed"], run["non_2xx"]) == (30, 10, 10)
    assert run["latency_ms"]["max"] == 4.3


def test_hey_against_a_closed_port_prints_only_the_header() -> None:
    run = hey.parse_run(fixture("hey", "refused.csv"), requests_expected=20)
    assert (run["complete"], run["failed"], run["requests_per_second"], run["latency_ms"]) == (0, 20, 0.0, None)


def test_hey_stopped_by_the_time_limit_cannot_count_lost_requests() -> None:
    run = hey.parse_run(fixture("hey", "time_limited.csv"), requests_expected=None)
    assert (run["complete"], run["failed"], run["requests_sent"]) == (50, None, None)
    assert run["duration_s"] == 1.0164
    assert run["latency_ms"] == pytest.approx(
        {"mean": 101.502, "p50": 101.3, "p90": 102.5, "p99": 103.6, "max": 103.6, "mode": 101.5})


def test_hey_without_its_csv_header_is_an_error() -> None:
    with pytest.raises(ValueError, match="no CSV header"):
        hey.parse_run("Summary:\n  Total: 0.1 secs\n", requests_expected=10)


@pytest.mark.parametrize(("latencies", "mode"), [
    ([10.2, 10.9, 11.0, 12.5], 10.5),  # [10, 11) holds two
    ([3.0, 3.9, 7.1, 7.2], 3.5),  # a tie goes to the faster bin
    ([0.4], 0.5),
])
def test_hey_mode_is_the_midpoint_of_the_fullest_1_ms_bin(latencies: list[float], mode: float) -> None:
    assert hey.latency_mode(latencies) == mode


@pytest.mark.parametrize(("requests", "concurrency", "sent"), [(200, 10, 200), (25, 10, 20), (2000, 50, 2000)])
def test_hey_sends_a_multiple_of_the_concurrency(requests: int, concurrency: int, sent: int) -> None:
    assert hey.requests_sent(requests, concurrency) == sent


@pytest.mark.parametrize(("settings", "expected"), [
    ({"requests": 2000, "time_limit": None, "keep_alive": False},
     ["hey", "-n", "2000", "-c", "50", "-t", "20", "-disable-keepalive", "-o", "csv", URL]),
    ({"requests": 2000, "time_limit": None, "keep_alive": True, "timeout": 5},
     ["hey", "-n", "2000", "-c", "50", "-t", "5", "-o", "csv", URL]),
    ({"requests": 2000, "time_limit": 10, "keep_alive": False},
     ["timeout", "--signal=INT", "--kill-after=25", "10",
      "hey", "-n", "2000", "-c", "50", "-t", "20", "-disable-keepalive", "-o", "csv", URL]),
], ids=["plain", "keep-alive-and-timeout", "time-limit-as-sigint"])
def test_hey_command(settings: dict, expected: list[str]) -> None:
    assert hey.TOOL.command(URL, 50, settings_of(**settings)) == expected


def test_hey_version_without_dpkg(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("dpkg-query")
    monkeypatch.setattr(hey.processes, "run_tool", missing)
    assert hey.TOOL.version() == "hey (version unknown)"


# --- wrk --------------------------------------------------------------------------------------------------------


def test_wrk_complete_run_reads_the_json_line_not_the_human_summary() -> None:
    run = wrk.parse_run(fixture("wrk", "complete.stdout"))
    assert (run["complete"], run["failed"], run["non_2xx"]) == (905, 0, 0)
    assert run["duration_s"] == 1.00552
    assert run["requests_per_second"] == pytest.approx(905 / 1.00552)
    assert run["latency_ms"] == pytest.approx(
        {"mean": 10.885431, "p50": 10.723, "p90": 11.623, "p99": 12.814, "max": 15.351})


def test_wrk_counts_resets_as_read_errors_and_4xx_5xx_as_status() -> None:
    run = wrk.parse_run(fixture("wrk", "reset.stdout"))
    assert (run["complete"], run["failed"], run["non_2xx"]) == (8951, 2983, 2984)
    assert run["failed_by_kind"] == {"connect": 0, "read": 2983, "write": 0, "timeout": 0}


def test_wrk_timeouts_are_complete_but_left_out_of_the_latency() -> None:
    # A sequential server, 20 connections, --timeout 1s: 19 answers, 10 of them after more than 1 s.
    run = wrk.parse_run(fixture("wrk", "timeouts.stdout"))
    assert (run["complete"], run["failed"], run["failed_by_kind"]["timeout"]) == (19, 10, 10)
    assert run["latency_ms"]["max"] == pytest.approx(903.488)  # under the 1 s timeout


def test_wrk_that_could_not_connect_printed_no_report() -> None:
    assert fixture("wrk", "refused.stderr").startswith("unable to connect to 127.0.0.1:1")
    with pytest.raises(ValueError, match="no report"):
        wrk.parse_run(fixture("wrk", "refused.stdout"))


@pytest.mark.parametrize(("settings", "duration", "extra"), [
    ({"requests": 1000, "time_limit": 10, "keep_alive": False}, "10s", ["-H", "Connection: close"]),
    ({"requests": 1000, "time_limit": 2.5, "keep_alive": True}, "3s", []),
    ({"requests": 1000, "time_limit": 0.2, "keep_alive": True}, "1s", []),
], ids=["connection-close", "rounded-up", "at-least-1s"])
def test_wrk_command(settings: dict, duration: str, extra: list[str]) -> None:
    expected = ["wrk", "-t", "1", "-c", "50", "-d", duration, "--timeout", "20s", *extra,
                "-s", str(wrk.REPORT_SCRIPT), URL]
    assert wrk.TOOL.command(URL, 50, settings_of(**settings)) == expected


def test_wrk_without_a_time_limit_is_a_recorded_error(tmp_path: Path) -> None:
    record = wrk.TOOL.run(URL, 10, settings_of(requests=100, time_limit=None), tmp_path, cpu=None)
    assert record["error"] == "wrk runs for a duration: the scenario needs a time_limit"


# --- every adapter ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "hint"), [("ab", "sudo apt-get install apache2-utils"),
                                            ("hey", "sudo apt-get install hey"),
                                            ("wrk", "sudo apt-get install wrk")])
def test_a_missing_executable_names_the_install_command(name: str, hint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools.shutil, "which", lambda executable: None)
    with pytest.raises(tools.ToolMissingError, match=f"install it with: {hint}$"):
        tools.require_tool(name)


def thread_per_connection(tmp_path: Path):
    return started(CATALOGUE.design("thread-per-connection"), tmp_path, delay=0.01)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("hey") is None, reason="hey is not installed")
def test_hey_real_run(tmp_path: Path) -> None:
    with thread_per_connection(tmp_path) as server:
        url = f"http://{server.host}:{server.port}/"
        record = hey.TOOL.run(url, 5, settings_of(requests=50, keep_alive=False), tmp_path / "run", cpu=None)
        limited = hey.TOOL.run(url, 2, settings_of(requests=100_000, time_limit=0.5), tmp_path / "limited", cpu=None)
    assert record["error"] is None, record
    assert (record["complete"], record["failed"], record["non_2xx"]) == (50, 0, 0)
    assert record["latency_ms"]["p50"] >= 10  # every answer waits the 0.01 s delay
    assert limited["error"] is None and limited["stopped_by_time_limit"], limited
    assert 0 < limited["complete"] < 100_000 and limited["failed"] is None


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_wrk_real_run(tmp_path: Path) -> None:
    with thread_per_connection(tmp_path) as server:
        url = f"http://{server.host}:{server.port}/"
        record = wrk.TOOL.run(url, 5, settings_of(requests=0, time_limit=1, keep_alive=False), tmp_path, cpu=None)
    assert record["error"] is None, record
    assert record["complete"] > 0 and record["failed"] == 0 and record["non_2xx"] == 0
    assert record["latency_ms"]["p50"] >= 10


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_wrk_version_is_its_first_line_without_the_copyright() -> None:
    first = subprocess.run(["wrk", "-v"], capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
    assert wrk.TOOL.version() == first.split(" Copyright")[0]
    assert wrk.TOOL.version().startswith("wrk ")
