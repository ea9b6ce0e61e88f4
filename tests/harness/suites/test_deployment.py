"""Deploying it (docs/deployment.md): the idle-timeout race and admission control, each reproduced in small.

The race: the hardened design behind nginx with upstream keep-alive, its keep-alive timeout
shortened to a fraction of a second (the same race as at 5 s, many more tries a second), loaded by
scripts/harness/clients/idle_race.py with gaps around that timeout. With the server's timeout
shorter than nginx's, some POST gets 502 from nginx; with it longer (the fix), none does. The
tries are many and the assertion is "at least one", so a busy machine only moves where in the
window the 502s fall.

Admission control: the hardened design with --max-connections 4 and a 1 s call, sent ten
requests at once: the ones past the cap get 503 before any 200 can have been answered (the call
alone takes a second), which is what "503 at once" means; no timing bound tighter than that.

Also: vegeta's CSV parsed (clients/tools/vegeta.py), the plan's quick table checked, and the
renderer on small records.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.clients import idle_race
from harness.clients.tools import vegeta
from harness.model.catalogue import load_catalogue
from harness.model.deployment_plan import OverloadPlan, RacePlan
from harness.model.paths import REPO_ROOT
from harness.model.records import RESULTS_DIR
from harness.model.records.deployment_records import OverloadRecord, RaceRecord, RaceResult
from harness.render import deployment_tables
from harness.suites import deployment
from harness.system import connections, launcher, ports, processes

PROXY = "servers/nginx_upstream_keep_alive.conf"
SHORT_TIMEOUT = 0.3  # seconds: the hardened design's keep-alive timeout in the small race
RACE_TRIES = 3  # race runs with the short timeout before giving up on seeing a 502


@contextlib.contextmanager
def hardened_behind_nginx(tmp_path: Path, *arguments: str) -> Iterator[int]:
    """The hardened design with these arguments, nginx with upstream keep-alive in front; yields nginx's port."""
    design = load_catalogue().design("hardened")
    with launcher.running_design(design, ports.run_port("server", design), 0.0, tmp_path / "server",
                                 extra_arguments=list(arguments)) as server, \
            launcher.reverse_proxy(PROXY, server.port, tmp_path / "proxy", None) as proxy:
        yield proxy.port


def race(port: int, gap: float, bursts: int) -> RaceResult:
    """The race client, run as the suite runs it; its report."""
    command = [sys.executable, str(deployment.IDLE_RACE), "--port", str(port), "--gap", f"{gap:g}",
               "--connections", "40", "--bursts", str(bursts), "--window-ms", "20", "--step-ms", "2",
               "--method", "POST", "--path", "/form"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert completed.returncode == 0, completed.stderr
    return RaceResult.from_json(json.loads(completed.stdout), "idle_race.py's report")


def test_a_server_timeout_shorter_than_the_proxys_gives_502s_and_a_longer_one_none(tmp_path: Path) -> None:
    bad_gateway = 0
    for attempt in range(RACE_TRIES):
        with hardened_behind_nginx(tmp_path / f"short-{attempt}", "--keep-alive-timeout", f"{SHORT_TIMEOUT:g}") as port:
            report = race(port, SHORT_TIMEOUT, bursts=25)
        bad_gateway = report.answers(502)
        if bad_gateway:
            break
    assert bad_gateway >= 1, f"no 502 in {RACE_TRIES} runs of 25 bursts: {report}"
    with hardened_behind_nginx(tmp_path / "fix", "--keep-alive-timeout", "65") as port:
        fixed = race(port, SHORT_TIMEOUT, bursts=25)
    assert fixed.answers(502) == 0 and not fixed.errors, fixed
    assert fixed.sent == 25 * 40 == fixed.answers(200)  # the form is answered 200, not 405


LISTENING, TIME_WAIT = "0A", "06"  # states in the kernel's TCP tables (system/connections.py)


def ask(port: int, answers: list[tuple[float, bytes]], began: float) -> None:
    """One GET on its own connection: when its answer's status line came, and the line."""
    with socket.create_connection((processes.LOOPBACK, port), timeout=10) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        line = client.makefile("rb").readline()
    answers.append((time.monotonic() - began, line))


def held_by_nobody(port: int) -> bool:
    """No connection on the server's port but its listening socket (and connections gone to TIME_WAIT)."""
    return all(fields[3] in (LISTENING, TIME_WAIT) for fields in connections.sockets_on(port))


def test_past_the_cap_the_hardened_design_answers_503_before_any_request_is_served(tmp_path: Path) -> None:
    design = load_catalogue().design("hardened")
    answers: list[tuple[float, bytes]] = []
    with launcher.running_design(design, ports.run_port("server", design), 1.0, tmp_path,
                                 extra_arguments=["--max-connections", "4"]) as server:
        # The launcher's readiness probe holds one of the four slots until the server has closed it: on a busy
        # machine that can still be so when the burst arrives (a fresh-clone run beside a busy loop served 3).
        deadline = time.monotonic() + 10
        while not held_by_nobody(server.port) and time.monotonic() < deadline:
            time.sleep(0.02)
        began = time.monotonic()
        threads = [threading.Thread(target=ask, args=(server.port, answers, began)) for _ in range(10)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    refused = [at for at, line in answers if b" 503 " in line]
    served = [at for at, line in answers if b" 200 " in line]
    assert len(answers) == 10 and len(refused) + len(served) == 10, answers
    assert len(served) >= 4 and len(refused) >= 1, answers
    assert max(refused) < min(served), "a 503 came after a 200: it waited instead of being refused at once"
    assert min(served) >= 1.0  # the call itself: a 503 before this was refused without waiting for it


VEGETA_CSV = (  # two rows in `vegeta encode --to csv`'s format: a 200 and a refused connection
    '1764104400000000000,200,101500000,0,133,"",PGh0bWw+,,0,GET,http://127.0.0.1:8000/,\n'
    '1764104400100000000,0,0,0,0,"Get ""http://127.0.0.1:8000/"": dial tcp 127.0.0.1:8000: connect: '
    'connection refused",,,1,GET,http://127.0.0.1:8000/,\n')


def test_vegeta_csv_captured_from_vegeta_itself() -> None:
    """tests/fixtures/vegeta/: a closed port (no answer), and the capped hardened design at 480/s (200s and 503s)."""
    fixtures = REPO_ROOT / "tests" / "fixtures" / "vegeta"
    refused = vegeta.parse_run((fixtures / "refused.csv").read_text(), rate=2)
    assert refused["complete"] == 0 and refused["failed"] == 2 and refused["failed_by_kind"] == {"refused": 2}
    capped = vegeta.parse_run((fixtures / "hardened-capped.csv").read_text(), rate=480)
    assert capped["status_counts"] == {"200": 3, "503": 3} and capped["non_2xx"] == 3
    assert capped["latency_ms_2xx"]["p50"] > 100  # a served request waited for the 100 ms call
    assert capped["latency_ms"]["p50"] < capped["latency_ms_2xx"]["p50"]  # the 503s did not


def test_vegeta_csv_gives_status_latency_and_lateness() -> None:
    record = vegeta.parse_run(VEGETA_CSV, rate=10)
    assert record["requests_sent"] == 2 and record["complete"] == 1 and record["failed"] == 1
    assert record["failed_by_kind"] == {"refused": 1}
    assert record["status_counts"] == {"200": 1}
    assert record["latency_ms_2xx"]["p50"] == pytest.approx(101.5)
    assert record["late_ms"]["p99"] == pytest.approx(0.0)  # the second request went out on schedule, 100 ms in
    with pytest.raises(ValueError, match="columns"):
        vegeta.parse_csv("1,200,3\n")


def test_the_race_offsets_start_at_the_timeout_and_step_outwards() -> None:
    assert idle_race.offsets_around(4, 2) == [0.0, 2.0, -2.0, 4.0, -4.0]
    assert idle_race.request_bytes("POST", "h", 1, "/form") == (
        b"POST /form HTTP/1.1\r\nHost: h:1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        b"Content-Length: 17\r\n\r\nname=race&value=1")
    assert idle_race.lull_bucket_ms(0.0123) == 10 and idle_race.lull_bucket_ms(-0.7) == -500


def test_the_plans_quick_table_may_only_override(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text('[race]\nbursts = 20\n[race.quick]\nburst = 4\n', encoding="utf-8")
    with pytest.raises(deployment.DeploymentPlanError, match="burst"):
        deployment.read_section("race", RacePlan, quick=True, path=plan)
    assert deployment.read_section("race", RacePlan, quick=False, path=deployment.PLAN_PATH).methods == ["POST", "GET"]
    quick = deployment.read_section("overload", OverloadPlan, quick=True, path=deployment.PLAN_PATH)
    assert quick.multiples == [0.5, 3.0, 0.5] and quick.rates == [80.0, 480.0, 80.0]
    assert deployment.read_section("race", RacePlan, quick=True, path=deployment.PLAN_PATH).duration_s < 60


@pytest.mark.parametrize(("change", "message"), [
    (("idle_spread = 0.5", "idle_spead = 0.5"), r"\[race\]: unknown key `idle_spead` \(did you mean `idle_spread`\?\)"),
    (("timeout_s = 5", "timeout = 5"), r"\[race\]\.target\[1\]: unknown key `timeout` \(did you mean `timeout_s`\?\)"),
    (("users = 4", 'users = "4"'), r"\[race\]\.users: expected integer, found str"),
    (('proxy = "servers/nginx_upstream_keep_alive.conf"\n', ""), r"\[race\]: missing key `proxy`"),
])
def test_a_wrong_key_or_value_in_a_plan_table_is_refused_naming_it(tmp_path: Path, change, message) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(deployment.PLAN_PATH.read_text(encoding="utf-8").replace(*change, 1), encoding="utf-8")
    with pytest.raises(deployment.DeploymentPlanError, match=message):
        deployment.read_section("race", RacePlan, quick=False, path=plan)


def test_the_race_table_counts_502s_per_10000() -> None:
    committed = json.loads((RESULTS_DIR / "deployment" / "proxy-race.json").read_text(encoding="utf-8"))
    record = RaceRecord.from_json({**committed, "mode": "quick", "runs": [
        {"design": "hardened", "label": "defaults", "method": "POST", "arguments": ["--x", "5"],
         "result": {"sent": 400, "statuses": {"200": 398, "502": 2}, "errors": {},
                    "by_offset_ms": {"10": {"502": 2, "200": 8}, "-1000": {"200": 390}}, "duration_s": 1.0},
         "bad_gateway_per_10k": 50.0},
        {"design": "uvicorn", "label": "fix", "method": "POST", "error": "server did not start"}]}, "race")
    table = deployment_tables.race_table(record)
    assert "| 400 | 398 | 2 | **50** | 180 | 10 (2) | 0 |" in table
    assert round(deployment_tables.upper_bound(0, 100) * 10_000) == 370  # none in 100: up to 3.7% still possible
    assert "| POST | failed: server did not start |" in table
    assert "Not measured yet" in deployment_tables.race_table(None)


def vegeta_row(sent_ms: float, latency_ms: float, status: int = 200) -> dict[str, int]:
    return {"sent_ns": int(sent_ms * 1e6), "latency_ns": int(latency_ms * 1e6), "status": status, "error": "",
            "seq": 0}


def test_the_overload_timeline_counts_each_second_and_what_is_in_flight() -> None:
    """A queue: one request a second, each answered 1.5 s later, so from the second second two are in flight;
    a refusal (503) and a request never answered are counted apart, and a second with no event keeps its count."""
    rows = [vegeta_row(0, 1500), vegeta_row(1000, 1500), vegeta_row(2000, 5, 503), vegeta_row(2100, 4000, 0)]
    points = vegeta.timeline(rows, 0)
    assert [point["sent"] for point in points] == [1, 1, 2, 0, 0, 0, 0]
    assert [point["ok"] for point in points[:3]] == [1, 1, 0]
    assert (points[2]["refused"], points[2]["failed"]) == (1, 1)
    assert points[0]["p99_ms"] == pytest.approx(1500) and points[2]["p99_ms"] is None
    assert [point["in_flight_peak"] for point in points] == [1, 2, 2, 1, 1, 1, 1]


def test_every_rate_past_capacity_runs_at_least_30_s_back_to_back() -> None:
    """Issue 31: two seconds past capacity showed a burst, not overload. The plan and the committed record both
    offer every rate above capacity for 30 s or more, and the record has a timeline for every server (a
    queue's growth, or a cap's holding, second by second)."""
    plan = deployment.read_section("overload", OverloadPlan, quick=False, path=deployment.PLAN_PATH)
    assert plan.schedule_seconds >= 30 and any(multiple > 1 for multiple in plan.multiples)
    assert plan.max_in_flight >= max(plan.rates) * plan.timeout  # vegeta never waits for the server
    record = OverloadRecord.from_json(json.loads((RESULTS_DIR / "deployment" / "overload.json").read_text()), "o")
    assert record.settings.schedule_seconds >= 30, "results/deployment/overload.json ran its rates under 30 s"
    assert all(run.timeline for run in record.runs), "a server of results/deployment/overload.json has no timeline"


def test_the_tradeoff_gives_every_server_and_what_the_uncapped_ones_held() -> None:
    committed = json.loads((RESULTS_DIR / "deployment" / "overload.json").read_text(encoding="utf-8"))
    record = OverloadRecord.from_json(committed, "overload")
    text = deployment_tables.overload_tradeoff(record)
    assert text.count("\n- ") + text.startswith("- ") == len(record.runs)
    assert "requests in flight at 0.5×" in text and "at 1× their count rose from" in text
    assert "Not measured yet" in deployment_tables.overload_tradeoff(None)


def test_the_race_is_a_rate_of_served_posts_and_gets_for_every_server() -> None:
    """Issue 31, finding 4: the committed race ran each server for 60 s or more under the stated traffic, its POSTs
    were answered 200 (not 405, which counted as 'no 502' before), and every server ran GETs too."""
    record = RaceRecord.from_json(json.loads((RESULTS_DIR / "deployment" / "proxy-race.json").read_text()), "race")
    designs = {run.design for run in record.runs}
    for design in designs:
        runs = [run for run in record.runs if run.design == design and run.result is not None]
        assert {run.method for run in runs if run.label == "defaults"} == {"POST", "GET"}, design
        assert record.settings.duration_s * len(runs) >= 60, design
        for run in runs:
            assert run.result.answers(405) == 0, f"{design} {run.method}: answered 405"
            assert run.result.answers(200) > 0.9 * run.result.sent, f"{design} {run.method}: not served"
    causes = record.causes or []
    assert causes and all(cause.statuses and 200 not in cause.statuses for cause in causes), \
        "another cause of a failed answer behind nginx is not reproduced"
