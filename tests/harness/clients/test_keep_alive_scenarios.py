"""The keep-alive scenarios' parts: the pipelining check, the slow-path proxy, wrk's pipelining,
the keep-alive verdict and the CPU-per-request column.

Records under tests/fixtures/keep_alive/ are frozen quick runs of keep-alive-slow-path-on,
keep-alive-slow-path-off and peak (results/ is refreshed by the benchmarks; these stay put).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import socket
import time
from typing import Any

import pytest
from harness.clients import pipelining, probe
from harness.clients.tools import wrk
from harness.model.paths import REPO_ROOT
from harness.model.records.scenario_record import ScenarioRecord
from harness.render import keep_alive_verdict, site
from harness.system import launcher
from scenario_settings import settings_of

from conftest import CATALOGUE, HTTP_DESIGNS, started

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "keep_alive"
PAGE = b"<!doctype html><h1>Hello</h1>"


def fixture(name: str) -> dict[str, Any]:
    """A fixture record's JSON, to change before it is read (typed)."""
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def typed(data: dict[str, Any]) -> ScenarioRecord:
    """The record the renderers read, checked by its class."""
    return ScenarioRecord.from_json(data, "test record")


def response(body: bytes = PAGE, status: str = "200 OK") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Length: %d\r\nContent-Type: text/html\r\n\r\n%s" % (status.encode(), len(body), body)


# --- the pipelining check, on exact bytes -------------------------------------------------------------------


def test_ten_pipelined_requests_go_out_in_one_write_and_only_the_last_asks_to_close() -> None:
    payload = pipelining.pipelined_requests("127.0.0.1", 8000, 10)
    requests = payload.split(b"\r\n\r\n")[:-1]
    assert len(requests) == 10
    assert [b"Connection: close" in request for request in requests] == [False] * 9 + [True]
    assert [request.split(b" ")[1] for request in requests] == [b"/?pipelined=%d" % index for index in range(10)]


@pytest.mark.parametrize(("raw", "problem"), [
    (response() * 10, None),
    (response(), "1 framed responses to 10 pipelined requests"),
    (response() * 9 + response(b"oops", "500 Internal Server Error"), "response 10 is status 500"),
    (response() * 10 + b"HTTP/1.1 200", "12 bytes after the last framed response"),
    (response() * 5 + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
     "5 framed responses to 10"),
    (b"", "0 framed responses to 10"),
])
def test_the_pipelining_check_counts_frames_and_statuses(raw: bytes, problem: str | None) -> None:
    problems = pipelining.pipelining_problems(raw, 10)
    if problem is None:
        assert problems == []
    else:
        assert any(found.startswith(problem) for found in problems), problems


PIPELINING = [design for design in HTTP_DESIGNS if design.pipelining]
KEEP_ALIVE = [design for design in HTTP_DESIGNS if design.keep_alive]


@pytest.mark.parametrize("design", PIPELINING, ids=lambda design: design.name)
def test_every_design_that_declares_pipelining_answers_ten_pipelined_requests_in_order(design, tmp_path) -> None:
    with started(design, tmp_path) as server:
        assert pipelining.verify_pipelining(server.host, server.port) == []


@pytest.mark.parametrize("name", ["uvicorn", "thread-per-connection"])
def test_a_design_that_closes_after_each_answer_fails_the_pipelining_check(name: str, tmp_path) -> None:
    with started(CATALOGUE.design(name), tmp_path) as server:
        assert pipelining.verify_pipelining(server.host, server.port) == ["1 framed responses to 10 pipelined requests"]


def answers_on_one_connection(host: str, port: int, count: int) -> list[str]:
    """Send `count` GETs one after another on one connection; the Connection header of each answer."""
    seen = []
    with socket.create_connection((host, port), timeout=5) as conn:
        buffered = b""
        for _ in range(count):
            conn.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            while b"\r\n\r\n" not in buffered:
                buffered += conn.recv(65536)
            head, _, buffered = buffered.partition(b"\r\n\r\n")
            headers = probe.parse_response(head + b"\r\n\r\n").headers
            while len(buffered) < int(headers["content-length"]):
                buffered += conn.recv(65536)
            buffered = buffered[int(headers["content-length"]):]
            seen.append(headers.get("connection", "").lower())
            if seen[-1] == "close":
                break
    return seen


@pytest.mark.parametrize("design", KEEP_ALIVE, ids=lambda design: design.name)
def test_every_design_that_declares_keep_alive_answers_three_requests_on_one_connection(design, tmp_path) -> None:
    with started(design, tmp_path) as server:
        assert "close" not in answers_on_one_connection(server.host, server.port, 3)


# --- the slow path ---------------------------------------------------------------------------------------------


def timed_get(conn: socket.socket, host: str) -> float:
    """One GET on an open connection; seconds until its whole answer arrived."""
    started_at = time.monotonic()
    conn.sendall(f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    received = b""
    while b"</html>" not in received:
        chunk = conn.recv(65536)
        assert chunk, "the connection closed before the answer was complete"
        received += chunk
    return time.monotonic() - started_at


def test_the_delay_proxy_costs_two_round_trips_on_a_new_connection_and_one_after(tmp_path) -> None:
    one_way = 0.05
    with started(CATALOGUE.design("nginx-keep-alive"), tmp_path) as server, \
            launcher.delayed_path(server.port, one_way * 1000, tmp_path, None) as proxy:
        with socket.create_connection((proxy.host, proxy.port), timeout=5) as conn:  # instant on loopback
            first = timed_get(conn, proxy.host)
            second = timed_get(conn, proxy.host)
    assert 4 * one_way <= first < 4 * one_way + 0.15, first  # handshake (2 legs) + request + answer
    assert 2 * one_way <= second < 2 * one_way + 0.15, second  # request + answer


def test_the_delay_proxy_forwards_the_servers_close(tmp_path) -> None:
    with started(CATALOGUE.design("thread-per-connection"), tmp_path) as server, \
            launcher.delayed_path(server.port, 10, tmp_path, None) as proxy:
        response = probe.get(proxy.host, proxy.port)  # reads until the close arrives through the proxy
    assert probe.http_problems(response) == []


# --- wrk's pipelining -------------------------------------------------------------------------------------------


def test_wrk_pipelines_with_its_own_script_and_passes_the_depth_after_a_double_dash() -> None:
    settings = settings_of(time_limit=1, keep_alive=True)
    plain = wrk.TOOL.command("http://127.0.0.1:8000/", 50, settings)
    piped = wrk.TOOL.command("http://127.0.0.1:8000/", 50, dataclasses.replace(settings, pipeline_depth=16))
    assert plain[-3:] == ["-s", str(wrk.REPORT_SCRIPT), "http://127.0.0.1:8000/"]
    assert piped[-5:] == ["-s", str(wrk.PIPELINE_SCRIPT), "http://127.0.0.1:8000/", "--", "16"]


def wrk_correction(histogram: dict[int, int], interval: int) -> dict[int, int]:
    """wrk 4.1.0's stats_correct (src/stats.c), written again: each sample of n >= 2 intervals adds one
    synthetic sample at n - k intervals for every k that keeps it above one interval."""
    result = dict(histogram)
    for value, count in sorted(histogram.items()):
        synthetic = value - interval
        while value >= 2 * interval and count and synthetic > interval:
            result[synthetic] = result.get(synthetic, 0) + count
            synthetic -= interval
    return result


def test_undoing_wrks_correction_gives_back_the_histogram_it_measured() -> None:
    generator = random.Random(7)
    measured: dict[int, int] = {}
    for _ in range(5_000):  # batch times around 16 intervals of 160 µs, with a tail
        value = int(generator.lognormvariate(7.8, 0.35))
        measured[value] = measured.get(value, 0) + 1
    shown = {value: count for value, count in wrk_correction(measured, 160).items() if value >= min(measured)}
    assert sum(shown.values()) > 5 * sum(measured.values())  # what wrk summarised: mostly synthetic samples
    assert wrk.uncorrected(sorted(shown.items()), 160) == measured
    assert wrk.uncorrected(sorted(measured.items()), None) == measured  # a run too short to be corrected
    with pytest.raises(ValueError, match="not one wrk corrected"):
        wrk.uncorrected([(740, 1), (900, 5)], 160)  # five samples of 900 µs would have added five at 740


def test_a_pipelined_wrk_run_times_batches_as_littles_law_says(tmp_path) -> None:
    """Closed loop: each connection always has one batch in flight, so the mean batch time is connections x depth / rate."""
    design = CATALOGUE.design("nginx-keep-alive")
    connections, depth = 8, 4
    with started(design, tmp_path) as server:
        url = f"http://{server.host}:{server.port}/"
        run = wrk.TOOL.run(url, connections, settings_of(time_limit=1, keep_alive=True, pipeline_depth=depth),
                           tmp_path / "wrk", None)
    assert run["error"] is None
    assert run["complete"] > 0 and run["failed"] == 0 and run["non_2xx"] == 0
    assert run["latency_per_batch_of"] == depth
    # Every full batch is timed once; the batches the end of the run cut are not.
    assert run["complete"] / depth - connections <= run["batches_timed"] <= run["complete"] / depth
    cycle_ms = connections * depth / run["requests_per_second"] * 1000  # Little's law: time per batch, gaps included
    latency = run["latency_ms"]
    assert 0.3 * cycle_ms <= latency["mean"] <= 1.1 * cycle_ms
    assert latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"] and latency["p99"] > 0


# --- the verdict and the CPU column ---------------------------------------------------------------------------


def scaled(record: dict[str, Any], factor: float) -> dict[str, Any]:
    """A copy of a record whose every rate is multiplied by `factor`."""
    copied = copy.deepcopy(record)
    for design in copied["designs"]:
        for run in design["runs"]:
            run["requests_per_second"] *= factor
    return copied


def test_the_verdict_follows_its_rule_on_the_measured_gain_and_level() -> None:
    on, off = fixture("keep-alive-slow-path-on"), fixture("keep-alive-slow-path-off")
    article_nginx = on["scenario"]["published"]["figures"]["designing-servers/nginx"]
    at_article_level = scaled(on, article_nginx / keep_alive_verdict.median_rates(typed(on))["nginx-keep-alive"])

    def verdict(on_record: dict[str, Any], off_record: dict[str, Any]) -> str:
        return keep_alive_verdict.verdict_page({"keep-alive-slow-path-on": typed(on_record),
                                                "keep-alive-slow-path-off": typed(off_record)})

    assert "holds in part" in verdict(at_article_level, off)  # the fixture's gain is about 2x, the article's 8x
    assert "**The hypothesis holds**" in verdict(at_article_level, scaled(off, 0.1))  # a 20x gain
    assert "does not hold" in verdict(scaled(at_article_level, 0.5), off)


def test_the_verdict_waits_for_both_records() -> None:
    page = keep_alive_verdict.verdict_page({"keep-alive-slow-path-on": typed(fixture("keep-alive-slow-path-on"))})
    assert page.startswith("*Not measured yet")


def test_the_cpu_column_divides_the_servers_cpu_seconds_by_the_requests_it_answered() -> None:
    record = fixture("peak")
    run = record["designs"][0]["runs"][0]
    expected = run["server_resources"]["cpu_seconds"] / run["complete"] * 1e6
    table = site.scenario_table(typed(record))
    header = next(line for line in table.splitlines() if line.startswith("| Design"))
    cells = [cell.strip() for cell in header.split("|")]
    column = cells.index("CPU µs / request")  # the narrow table; the one under "Every column" has it too
    first_row = next(line for line in table.splitlines() if line.startswith(f"| [{record['designs'][0]['name']}]("))
    assert [cell.strip() for cell in first_row.split("|")][column] == f"{expected:,.0f}"
    assert "CPU µs" not in site.scenario_table(typed(fixture("keep-alive-slow-path-on")))


# --- runs shorter than a second, in a record made before the rule ---------------------------------------------


def test_a_record_made_before_the_one_second_rule_shows_its_short_runs_with_a_flag() -> None:
    """The committed keep-alive record: hey sent 2,000 requests in about 0.07 s. Shown, and flagged."""
    record = copy.deepcopy(fixture("peak"))
    record["scenario"]["id"] = "keep-alive"  # not a fixed-count experiment in the catalogue
    first = record["designs"][0]
    first["runs"].append({**first["runs"][0], "duration_s": 0.12})
    for design in record["designs"]:
        design["runs"][0]["duration_s"] = 0.07
    table = site.scenario_table(typed(record))
    narrow, full = [line for line in table.splitlines() if f"[{first['name']}](" in line]
    assert "⚠ 0.07 s runs" in narrow  # the shortest
    assert "⚠ runs of 0.07–0.12 s, under 1 s" in full
    record["settings"]["fixed_count"] = "the article's experiment"  # a record that says it is one
    assert " s runs" not in site.scenario_table(typed(record))
    del record["settings"]["fixed_count"]
    record["scenario"]["id"] = "designing-servers"  # older than the key: the catalogue says it is one
    assert " s runs" not in site.scenario_table(typed(record))
