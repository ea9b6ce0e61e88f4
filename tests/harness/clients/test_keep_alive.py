"""Keep-alive: the harness proves a design keeps the connection open before measuring it with keep-alive on.

A scenario with keep_alive = true measures only designs whose catalogue entry says
keep_alive = true and that then answer several requests on one connection; the others
are refused (recorded, never measured). The designs here are in tests/fixtures/keep_alive/:
a tiny keep-alive server, and sequential-sockets twice, declared and undeclared (it closes).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness.clients import probe, verify
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT

from conftest import CATALOGUE, started

KEEP_ALIVE_CATALOGUE_DIR = REPO_ROOT / "tests" / "fixtures" / "keep_alive"
KEEP_ALIVE_CATALOGUE = load_catalogue(KEEP_ALIVE_CATALOGUE_DIR)
BENCH = [sys.executable, str(REPO_ROOT / "scripts" / "bench.py")]


def run_fixture_scenario(scenario: str, out: Path, *design: str) -> subprocess.CompletedProcess[str]:
    """bench.py run of one of this file's fixture scenarios (tests/fixtures/keep_alive/), its record into `out`."""
    chosen = ["--design", *design] if design else []
    return subprocess.run([*BENCH, "--catalogue", str(KEEP_ALIVE_CATALOGUE_DIR), "run", "--scenario", scenario,
                           *chosen, "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)

CLOSING = (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 9\r\nDate: x\r\n"
           b"Connection: close\r\n\r\n<h1>x</h1")
KEEPING = CLOSING.replace(b"Connection: close\r\n", b"")


@pytest.mark.parametrize(("raw", "keep_alive", "expected"), [
    (CLOSING, False, []),
    (KEEPING, False, ["no Connection: close"]),
    (KEEPING, True, []),
    (CLOSING, True, ["Connection: close, asked to keep alive"]),
])
def test_the_contract_asks_for_connection_close_only_in_close_mode(raw, keep_alive, expected) -> None:
    assert probe.http_problems(probe.parse_response(raw), keep_alive=keep_alive) == expected


@pytest.mark.parametrize("pipelined", [False, True], ids=["one-after-another", "pipelined"])
def test_a_keep_alive_server_answers_three_requests_on_one_connection(tmp_path: Path, pipelined: bool) -> None:
    with started(KEEP_ALIVE_CATALOGUE.design("keeps-alive"), tmp_path) as server:
        begun = time.monotonic()
        closed, problems = probe.verify_http_keep_alive(server.host, server.port, pipelined=pipelined)
        elapsed = time.monotonic() - begun
    assert (closed, problems) == (False, [])
    assert elapsed < 2  # read by Content-Length: never waiting for a close that does not come


def test_a_design_that_closes_is_caught_after_its_first_answer(tmp_path: Path) -> None:
    with started(CATALOGUE.design("sequential-sockets"), tmp_path) as server:
        closed, problems = probe.verify_http_keep_alive(server.host, server.port)
    assert closed
    assert problems and "did not keep the connection open for 3 requests" in problems[0]
    assert "after answer 1" in problems[0]


def test_a_design_that_does_not_declare_keep_alive_is_refused_by_name() -> None:
    closes, keeps = KEEP_ALIVE_CATALOGUE.design("closes"), KEEP_ALIVE_CATALOGUE.design("keeps-alive")
    message = verify.refusal(closes, "scenario 'keep-alive-test'", keep_alive=True)
    assert message is not None and "'closes'" in message and "'keep-alive-test'" in message
    assert "keep_alive = true" in message
    assert verify.refusal(closes, "scenario 'keep-alive-test'", keep_alive=False) is None
    assert verify.refusal(keeps, "scenario 'keep-alive-test'", keep_alive=True, pipelining=True) is None
    assert "pipelining = true" in verify.refusal(CATALOGUE.design("asyncio-streams"), "s", False, pipelining=True)


def test_the_keep_alive_primer_reads_by_length_and_does_not_wait_for_a_close(tmp_path: Path) -> None:
    with started(KEEP_ALIVE_CATALOGUE.design("keeps-alive"), tmp_path) as server:
        begun = time.monotonic()
        verify.prime(server.host, server.port, keep_alive=True)
        assert time.monotonic() - begun < 2  # the close-mode primer would wait out its 10 s timeout here


@pytest.mark.skipif(shutil.which("hey") is None, reason="needs hey, which `make test` installs")
def test_a_keep_alive_scenario_refuses_designs_that_close_and_measures_the_one_that_keeps(tmp_path: Path) -> None:
    result = run_fixture_scenario("keep-alive-test", tmp_path)
    assert result.returncode == 1, result.stderr  # like any failed design
    assert "FAILED in keep-alive-test: closes (refused), claims-but-closes (refused)" in result.stderr
    record = json.loads((tmp_path / "keep-alive-test.json").read_text())
    by_name = {design["name"]: design for design in record["designs"]}

    undeclared = by_name["closes"]
    assert undeclared["status"] == "refused" and undeclared["runs"] == [] and undeclared["server_exit_codes"] == []
    assert "does not declare keep_alive = true" in undeclared["problems"][0]

    liar = by_name["claims-but-closes"]
    assert liar["status"] == "refused" and liar["runs"] == []  # started, caught closing, never measured
    assert "'claims-but-closes' closes when asked for keep_alive" in liar["problems"][0]

    keeps = by_name["keeps-alive"]
    assert keeps["status"] == "ok", keeps["problems"]
    assert keeps["verified"] == {"answer": True, "keep_alive": True, "keep_alive_requests": 3,
                                 "http_version": "HTTP/1.1"}
    run = keeps["runs"][0]
    assert run["keep_alive"] is True and "-disable-keepalive" not in run["command"]
    assert run["complete"] == 200 and run["failed"] == 0


@pytest.mark.skipif(shutil.which("hey") is None, reason="needs hey, which `make test` installs")
def test_every_run_records_and_prints_the_exact_server_and_load_commands(tmp_path: Path) -> None:
    result = run_fixture_scenario("keep-alive-test", tmp_path, "keeps-alive")
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "keep-alive-test.json").read_text())["designs"][0]["runs"][0]
    server, load = run["runner"]["server_command"], run["runner"]["load_command"]
    assert str(REPO_ROOT / "tests/fixtures/keep_alive/keep_alive_server.py") in server and "--port" in server
    assert load[-len(run["command"]):] == run["command"] and load[0] in ("taskset", "hey")
    assert "proxy_command" not in run["runner"]  # no proxy in this scenario
    assert f"server: {shlex.join(server)}" in result.stderr and f"load: {shlex.join(load)}" in result.stderr


@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk, which `make test` installs")
def test_a_warm_up_runs_the_same_load_first_and_is_recorded_apart(tmp_path: Path) -> None:
    result = run_fixture_scenario("warm-up-test", tmp_path)
    assert result.returncode == 0, result.stderr
    run = json.loads((tmp_path / "warm-up-test.json").read_text())["designs"][0]["runs"][0]
    warm_up = run["runner"]["warm_up"]
    assert warm_up["seconds"] == 1 and warm_up["requests_per_second"] > 0 and warm_up["failed"] == 0
    assert warm_up["command"][warm_up["command"].index("-d") + 1] == "1s"
    warm_line, load_line = (result.stderr.index(f"warm-up: {shlex.join(warm_up['command'])}"),
                            result.stderr.index(f"load: {shlex.join(run['runner']['load_command'])}"))
    assert warm_line < load_line  # announced, and run, before the measured load
    assert run["complete"] > 0 and run["duration_s"] < 1.5  # the measured run is the second second alone


@pytest.mark.parametrize(("name", "closed", "problem"), [
    ("keeps-alive", False, None),
    ("forgets-http10", True, "no Connection: keep-alive in answer to an HTTP/1.0 keep-alive request"),
])
def test_http10_keep_alive_needs_the_servers_connection_keep_alive(tmp_path: Path, name, closed, problem) -> None:
    with started(KEEP_ALIVE_CATALOGUE.design(name), tmp_path) as server:
        assert probe.verify_http_keep_alive(server.host, server.port) == (False, [])  # HTTP/1.1 is fine for both
        found_closed, problems = probe.verify_http_keep_alive(server.host, server.port, http_version="HTTP/1.0")
    assert found_closed is closed
    assert (problems[0].endswith(problem) if problem else problems == [])


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ab (apache2-utils), which `make test` installs")
def test_an_ab_scenario_verifies_keep_alive_the_way_ab_asks_for_it(tmp_path: Path) -> None:
    result = run_fixture_scenario("keep-alive-ab", tmp_path)
    assert result.returncode == 1, result.stderr
    record = json.loads((tmp_path / "keep-alive-ab.json").read_text())
    by_name = {design["name"]: design for design in record["designs"]}
    assert by_name["forgets-http10"]["status"] == "refused" and by_name["forgets-http10"]["runs"] == []
    keeps = by_name["keeps-alive"]
    assert keeps["status"] == "ok" and keeps["verified"]["http_version"] == "HTTP/1.0"
    assert "-k" in keeps["runs"][0]["command"] and keeps["runs"][0]["complete"] == 200
    assert keeps["runs"][0]["extras"]["keep_alive_requests"] == 200  # ab's count: every answer on a kept connection
