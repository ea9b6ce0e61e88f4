"""The "How fast can Python go" steps and profile: exact diffs, every step a correct server, deterministic pictures."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys

import pytest
from harness.model import how_fast_steps
from harness.model.paths import REPO_ROOT
from harness.model.records.how_fast_records import ProfileRecord, Saturation, StepsRecord
from harness.render import how_fast_tables
from harness.suites import how_fast as how_fast_cli
from harness.system import processes

from conftest import read_responses

CHAIN = how_fast_steps.HOW_FAST
STEPS = CHAIN.steps()


def test_the_diffs_lead_from_the_first_version_to_the_design_exactly() -> None:
    text = CHAIN.step_source(STEPS[0])
    for step in STEPS[1:]:
        text = how_fast_steps.apply_patch(text, step.patch.read_text(encoding="utf-8"))
    assert text == CHAIN.design_file.read_text(encoding="utf-8")
    assert CHAIN.step_source(STEPS[-1]) == text  # the last step is the design itself


def test_the_first_step_is_the_asyncio_design_and_uvloop_is_one_step() -> None:
    first = CHAIN.step_source(STEPS[0])
    assert "import uvloop" not in first and "asyncio.run(serve_forever(" in first
    assert [step.name for step in STEPS][:2] == ["first-version", "uvloop"]


def test_a_diff_that_does_not_fit_is_refused() -> None:
    patch = "--- a/x\n+++ b/x\n@@ -2,2 +2,2 @@\n two\n-three\n+THREE\n"
    assert how_fast_steps.apply_patch("one\ntwo\nthree\n", patch) == "one\ntwo\nTHREE\n"
    assert how_fast_steps.apply_patch("one\ntwo\nTHREE\n", patch, reverse=True) == "one\ntwo\nthree\n"
    with pytest.raises(how_fast_steps.PatchError):
        how_fast_steps.apply_patch("one\ntwo\nfour\n", patch)


@pytest.mark.parametrize("step", STEPS, ids=lambda step: f"step-{step.number}")
def test_every_step_is_a_correct_keep_alive_server(step: how_fast_steps.Step, tmp_path) -> None:
    path = tmp_path / f"step_{step.number}.py"
    path.write_text(CHAIN.step_source(step, all_steps=STEPS), encoding="utf-8")
    port = processes.free_port()
    command = [sys.executable, str(path), "--host", "127.0.0.1", "--port", str(port), "--delay", "0.02"]
    with processes.running_server(command, port, tmp_path / "logs") as server:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\n"
                         b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answers = read_responses(conn, 3)
            assert conn.recv(65536) == b""  # closed after the request that asked
    assert server.exit_code == 0
    assert [answer.split(b"\r\n")[0] for answer in answers] == [b"HTTP/1.1 200 OK"] * 3
    assert [len(answer.partition(b"\r\n\r\n")[2]) for answer in answers] == [133, 1024 * 1024, 133]
    assert b"Connection: close" in answers[2] and b"Connection: keep-alive" in answers[0]


CATEGORY_CASES = [
    (["main (d.py)", "uv__io_poll (linux.c)", "epoll_pwait (libc.so.6)"], "kernel: waiting for the next request (epoll)"),
    (["send_ready (uvloop_protocol_keep_alive.py)", "UVStream_write (loop.c)", "write (libc.so.6)"],
     "kernel: sending and receiving (write, read)"),
    (["read_requests (uvloop_protocol_keep_alive.py)", "parse_request_head_once (uvloop_protocol_keep_alive.py)"],
     "parsing the request head"),
    (["send_ready (uvloop_protocol_keep_alive.py)", "UVStream_write (loop.c)", "Py_DECREF (object.h)"],
     "event loop (uvloop) and interpreter"),
    (["read_requests (uvloop_protocol_keep_alive.py)", "Py_DECREF (object.h)"], "our protocol: buffer, queue, answer"),
    (["call_done (uvloop_protocol_keep_alive.py)", "cached_response (uvloop_protocol_keep_alive.py)"],
     "building the response"),
    (["start_answer (uvloop_protocol_keep_alive.py)", "gc_collect_main (libpython3.11.so)"], "garbage collector"),
]


@pytest.mark.parametrize(("stack", "expected"), CATEGORY_CASES)
def test_a_sample_is_put_where_its_innermost_frames_say(stack: list[str], expected: str) -> None:
    assert how_fast_tables.category(stack) == expected


def test_stacks_lose_line_numbers_and_addresses_and_merge() -> None:
    raw = ("0x7f12 (libc.so.6);main (d.py:10);write (libc.so.6) 3\n"
           "0x7f99 (libc.so.6);main (d.py:12);write (libc.so.6) 2\n")
    assert how_fast_cli.normalise_stacks(raw) == "[unknown] (libc.so.6);main (d.py);write (libc.so.6) 5\n"


def test_the_flame_graph_is_the_same_picture_for_the_same_profile_whatever_the_order() -> None:
    stacks = how_fast_tables.read_collapsed("a (x.py);b (x.py) 3\na (x.py);c (loop.c) 1\n")
    again = how_fast_tables.read_collapsed("a (x.py);c (loop.c) 1\na (x.py);b (x.py) 3\n")
    svg = how_fast_tables.flame_graph(stacks, "t")
    assert svg == how_fast_tables.flame_graph(again, "t")
    assert svg.count("<rect") == 3 + len(how_fast_tables.CATEGORIES)  # a, b, c, and the legend's squares
    assert "b (x.py): 3 samples (75.0%)" in svg


def test_the_steps_table_shows_each_row_and_its_share_of_nginx(tmp_path) -> None:
    def run(rate: float, cpu: float, complete: int) -> dict:
        return {"tool": "wrk", "command": ["wrk"], "concurrency": 50, "keep_alive": True, "exit_code": 0,
                "complete": complete, "failed": 0, "requests_per_second": rate, "duration_s": 2.0, "latency_ms": None,
                "error": None, "server_resources": {"peak_rss_mib": 20.0, "cpu_seconds": cpu,
                                                    "cpu_seconds_per_1000_requests": None, "peak_processes": 1}}

    def row(name: str, title: str, step: int | None, runs: list[dict], problems: list[str]) -> dict:
        return {"name": name, "title": title, "step": step, "stop_signal": "SIGTERM", "runs": runs,
                "problems": problems}

    record = {
        "schema": 1, "kind": "how-fast-steps", "mode": "quick", "started_utc": "2026-01-01T00:00:00Z",
        "finished_utc": "2026-01-01T00:01:00Z",
        "settings": {"connections": 50, "seconds": 2, "repeat": 2, "relative_to": "nginx-keep-alive"},
        "environment": {"cpu_model": "cpu", "cpu_count": 2, "cpus_available": 2, "memory_gib": 4.0, "kernel": "6",
                        "os": "Linux", "python": "3.11", "runner": "local",
                        "pinning": {"server_cpu": "0", "load_tool_cpu": "1", "method": "taskset"},
                        "tools": {"wrk": "wrk 4.1.0"}, "commit": "0123456789abcdef", "dirty": False},
        "rows": [
            row("step-0", "first version", 0, [run(100, 0.02, 200), run(120, 0.02, 200)], []),
            row("nginx-keep-alive", "NGINX", None, [run(200, 0.01, 400)], []),
            row("granian-asgi", "Granian", None, [], ["did not start"]),
        ],
    }
    table = how_fast_tables.steps_table(StepsRecord.from_json(record, "fixture"))
    assert "| step 0 | first version | **110** (100–120) | 100.0 | 55% |" in table
    assert "| reference | NGINX | **200** (200–200) | 25.0 | 100% |" in table
    assert "not measured: did not start" in table


def test_rendering_writes_the_page_files_from_the_committed_profile(tmp_path) -> None:
    files = how_fast_tables.how_fast_files(REPO_ROOT / "results", tmp_path / "generated", tmp_path / "plots")
    names = sorted(path.name for path in files)
    assert names == ["how-fast-profile.md", "how-fast-steps.md", "how-fast-uvloop-protocol-keep-alive-flamegraph.svg"]
    profile = files[tmp_path / "generated" / "how-fast-profile.md"]
    assert f"{committed_profile().wrk.complete:,} requests" in profile


def committed_profile() -> ProfileRecord:
    path = REPO_ROOT / "results" / "profiles" / "uvloop-protocol-keep-alive.json"
    return ProfileRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


@pytest.mark.parametrize("arguments", [["steps", "--repeat", "0"], ["steps", "--reference", "no-such-design"],
                                       ["profile", "--rate", "0"]])
def test_bad_arguments_exit_2_before_measuring(arguments: list[str]) -> None:
    answer = subprocess.run([sys.executable, "scripts/bench.py", "how-fast", *arguments], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60)
    assert answer.returncode == 2, answer.stderr
    assert answer.stdout == ""  # refused before any table was measured or printed


def test_a_profile_below_saturation_is_refused_and_an_old_one_is_flagged() -> None:
    saturated = Saturation(server_busy=0.95, server_busy_profiled=0.91, rate_of_steps_table=0.97,
                           profiled_requests_per_second=80000.0, steps_table_requests_per_second=117000.0)
    assert how_fast_cli.saturation_problems(saturated) == []
    idle = dataclasses.replace(saturated, server_busy=0.14, rate_of_steps_table=0.08)
    assert how_fast_cli.saturation_problems(idle) == ["the server was busy 14% of the run without the profiler",
                                                      "its rate was 8% of the steps table's"]
    profile = committed_profile()
    old = dataclasses.replace(profile, saturation=None, cpu=dataclasses.replace(profile.cpu, user_seconds=0.61,
                                                                                system_seconds=1.74),
                              wrk=dataclasses.replace(profile.wrk, duration_s=17.0))
    assert how_fast_tables.saturation_line(old).startswith("⚠ **Not at saturation.** The server was on CPU 14%")
    assert "on CPU 95% of the run without the profiler and 91% of the profiled one; its rate was 97%" in (
        how_fast_tables.saturation_line(dataclasses.replace(profile, saturation=saturated)))
