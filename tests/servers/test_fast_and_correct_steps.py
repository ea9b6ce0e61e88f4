"""The fast-and-correct chain of steps: exact diffs from the hardened design, every step strict and runnable.

servers/fast_and_correct.py is the last step of a chain (model/how_fast_steps.py, FAST_AND_CORRECT):
step 0 is servers/hardened_event_loop.py byte for byte, and each diff in scripts/fast_and_correct/
adds one idea. Every step must still pass the public conformance corpus through its parser (and its
fast path, once it has one) and must run as a keep-alive server that refuses what the parser refuses.
The step table the page includes is rendered from the chain's record, with its flags.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from harness.clients.reference_parsers import design_parser_verdict
from harness.model import how_fast_steps
from harness.model.paths import REPO_ROOT
from harness.model.records.how_fast_records import StepsRecord
from harness.render import how_fast_tables, site
from harness.suites.conformance.conformance_cases import judge_parser, load_corpus
from harness.system import processes

from conftest import read_responses

CHAIN = how_fast_steps.FAST_AND_CORRECT
STEPS = CHAIN.steps()
HARDENED = REPO_ROOT / "servers" / "hardened_event_loop.py"
WRK = b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n"  # what wrk sends, again and again


def docstring_end(text: str) -> int:
    """Where a server file's module docstring ends (the index after its closing quotes and newline)."""
    assert text.startswith('"""')
    return text.index('"""\n', 3) + 4


def test_step_0_is_the_hardened_design_byte_for_byte() -> None:
    assert STEPS[0].name == "the-hardened-design"
    assert CHAIN.step_source(STEPS[0]) == HARDENED.read_text(encoding="utf-8")


def test_the_diffs_lead_from_the_hardened_design_to_fast_and_correct_exactly() -> None:
    text = HARDENED.read_text(encoding="utf-8")
    for step in STEPS[1:]:
        text = how_fast_steps.apply_patch(text, step.patch.read_text(encoding="utf-8"))
        assert text == CHAIN.step_source(step, all_steps=STEPS)  # forwards and backwards agree at every step
    assert text == CHAIN.design_file.read_text(encoding="utf-8")


def test_the_first_diff_carries_exactly_the_docstring_and_every_later_one_leaves_it_alone() -> None:
    """Step 1 is step 0 under the design's own docstring; no step about an optimisation touches the docstring."""
    sources = [CHAIN.step_source(step, all_steps=STEPS) for step in STEPS]
    assert STEPS[1].name == "its-own-docstring"
    assert sources[1][docstring_end(sources[1]):] == sources[0][docstring_end(sources[0]):]
    assert sources[1][:docstring_end(sources[1])] != sources[0][:docstring_end(sources[0])]
    final_docstring = sources[-1][:docstring_end(sources[-1])]
    assert all(source[:docstring_end(source)] == final_docstring for source in sources[1:])
    assert len(set(sources)) == len(sources)  # every diff changes something


def load_step(step: how_fast_steps.Step, directory: Path) -> ModuleType:
    """A step's server file, imported as a module (its server never starts): its parser and fast path."""
    path = directory / f"fast_and_correct_step_{step.number}.py"
    path.write_text(CHAIN.step_source(step, all_steps=STEPS), encoding="utf-8")
    name = f"_fast_and_correct_step_{step.number}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.mark.parametrize("step", STEPS, ids=lambda step: f"step-{step.number}-{step.name}")
def test_every_step_passes_the_conformance_corpus_through_its_parser_and_fast_path(step, tmp_path) -> None:
    """The public corpus as exact bytes, no socket; where a step has a fast path, it answers only what the parser accepts."""
    module = load_step(step, tmp_path)
    fast_path = getattr(module, "common_request", None)
    assert (fast_path is not None) == (step.number >= 4)  # the common case first is step 4
    failures, cases = [], load_corpus().cases
    for case in cases:
        verdict = design_parser_verdict(module, step.name, case.data)
        judgement = judge_parser(case, verdict.outcome, verdict.requests, verdict.status, verdict.keep_alive)
        if judgement.verdict == "fail":
            failures.append(f"{case.id}: {judgement.reason}")
        if fast_path is not None and fast_path(case.data) is not None:
            assert (verdict.outcome, verdict.requests) == ("accept", 1), case.id
    assert len(cases) >= 60
    assert failures == []


@pytest.mark.parametrize("step", STEPS, ids=lambda step: f"step-{step.number}-{step.name}")
def test_every_step_runs_answers_keep_alive_and_refuses_two_hosts(step, tmp_path) -> None:
    """Started as the benchmark starts it (no simulated call, so the fast path answers where there is one)."""
    path = tmp_path / f"step_{step.number}.py"
    path.write_text(CHAIN.step_source(step, all_steps=STEPS), encoding="utf-8")
    port = processes.free_port()
    command = [sys.executable, str(path), "--host", "127.0.0.1", "--port", str(port), "--delay", "0"]
    with (processes.running_server(command, port, tmp_path / "logs") as server,
          socket.create_connection(("127.0.0.1", port), timeout=10) as conn):
        answers = []
        for _ in range(3):  # one request per segment: the common case, when the step has it
            conn.sendall(WRK)
            answers += read_responses(conn, 1)
        conn.sendall(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")
        answers += read_responses(conn, 1)
        assert conn.recv(65536) == b""  # closed after the refusal
    assert server.exit_code == 0
    assert [answer.split(b"\r\n")[0] for answer in answers] == [b"HTTP/1.1 200 OK"] * 3 + [b"HTTP/1.1 400 Bad Request"]
    assert not any(b"Connection: close" in answer for answer in answers[:3])  # the connection stayed open for them


def test_a_diff_that_no_longer_fits_the_design_fails_loudly_naming_its_file(tmp_path) -> None:
    """A design edited under a diff: the chain refuses to build the earlier steps instead of guessing."""
    design = CHAIN.design_file.read_text(encoding="utf-8")
    edited = design.replace("    uvloop.run(serve_forever(", "    uvloop.run(  serve_forever(")
    assert edited != design
    with pytest.raises(how_fast_steps.PatchError, match=r"scripts/fast_and_correct/02-uvloop\.patch: hunk at line"):
        CHAIN.step_source(STEPS[0], design_text=edited)


@pytest.mark.parametrize(("patch", "message"), [
    ("", "no hunk"),
    ("--- a/x\n+++ b/x\n", "no hunk"),
    ("--- a/x\n+++ b/x\n@@ -2,2 +2,2 @@\n two\n-three\n", "its header says 2 and 2"),  # truncated
    ("--- a/x\n+++ b/x\n@@ -2,2 +2,2 @@\n two\n*three\n+THREE\n", "is not a diff line"),
])
def test_a_broken_diff_is_refused_not_applied_as_nothing(patch: str, message: str) -> None:
    with pytest.raises(how_fast_steps.PatchError, match=message):
        how_fast_steps.apply_patch("one\ntwo\nthree\n", patch)


def record_run(rate: float, cpu: float, complete: int) -> dict:
    return {"tool": "wrk", "command": ["wrk"], "concurrency": 50, "keep_alive": True, "exit_code": 0,
            "complete": complete, "failed": 0, "requests_per_second": rate, "duration_s": 4.0, "latency_ms": None,
            "error": None, "server_resources": {"peak_rss_mib": 20.0, "cpu_seconds": cpu,
                                                "cpu_seconds_per_1000_requests": None, "peak_processes": 1}}


def steps_row(name: str, title: str, step: int | None, runs: list[dict]) -> dict:
    return {"name": name, "title": title, "step": step, "stop_signal": "SIGTERM", "runs": runs, "problems": []}


def fixture_record(ceiling: str | None = "uvloop-protocol-keep-alive") -> dict:
    settings = {"connections": 50, "seconds": 4, "repeat": 2, "relative_to": "nginx-keep-alive"}
    if ceiling != "old":
        settings |= {"ceiling": ceiling, "ceiling_scenario": "peak"}
    return {
        "schema": 1, "kind": "how-fast-steps", "chain": "fast-and-correct", "mode": "full",
        "started_utc": "2026-01-01T00:00:00Z", "finished_utc": "2026-01-01T00:05:00Z", "settings": settings,
        "environment": {"cpu_model": "cpu", "cpu_count": 2, "cpus_available": 2, "memory_gib": 4.0, "kernel": "6",
                        "os": "Linux", "python": "3.11", "runner": "local",
                        "pinning": {"server_cpu": "0", "load_tool_cpu": "1", "method": "taskset"},
                        "tools": {"wrk": "wrk 4.1.0"}, "commit": "0123456789abcdef", "dirty": False},
        "rows": [
            steps_row("step-0", "the hardened design", 0,
                      [record_run(30_000, 1.0, 30_000), record_run(40_000, 1.0, 30_000)]),
            steps_row("step-6", "parsed heads remembered", 6,
                      [record_run(99_000, 0.8, 100_000), record_run(101_000, 0.8, 100_000)]),
            steps_row("nginx-keep-alive", "NGINX", None, [record_run(100_000, 0.9, 100_000)]),
            steps_row("uvloop-protocol-keep-alive", "uvloop", None, [record_run(90_000, 0.9, 90_000)]),
        ],
    }


def steps_table(ceiling: str | None = "uvloop-protocol-keep-alive") -> str:
    """The steps table of fixture_record(ceiling), read as the renderer reads a record."""
    return how_fast_tables.steps_table(StepsRecord.from_json(fixture_record(ceiling), "fixture"))


def test_the_steps_table_flags_spread_and_rows_near_the_tools_ceiling() -> None:
    table = steps_table()
    assert "| step 0 | the hardened design | **35,000** (30,000–40,000) ⚠ spread 29% | 33.3 | 35% |" in table
    # The ceiling row (uvloop, 90,000) was outrun: the tool's ceiling is the fastest row's rate, and no share tops 100%.
    assert "| step 6 | parsed heads remembered | **100,000** (99,000–101,000) ⚠ tool-bound (100% of ceiling) | 8.0 | 100% |" in table
    assert "| reference | uvloop | **90,000** (90,000–90,000) ⚠ tool-bound (90% of ceiling) | 10.0 | 90% |" in table
    assert "the highest median wrk reached in this run, the step-6 row's (parsed heads remembered, 100,000 req/s)" in table
    assert "measured beside uvloop-protocol-keep-alive, the design the `peak` scenario" in table


def test_a_record_without_a_ceiling_row_flags_spread_only_and_says_so() -> None:
    table = steps_table(ceiling=None)
    assert "⚠ spread 29%" in table and "⚠ tool-bound" not in table.split("\n\n")[0]
    assert "no ceiling was measured, so no row is flagged tool-bound" in table


def test_a_record_made_before_flags_renders_as_it_always_did() -> None:
    table = steps_table(ceiling="old")
    assert "⚠" not in table and "| step 0 | the hardened design | **35,000** (30,000–40,000) | 33.3 | 35% |" in table


def test_the_registry_renders_the_chains_table_for_the_page_from_a_record(tmp_path) -> None:
    record_path = tmp_path / "results" / CHAIN.record
    record_path.parent.mkdir(parents=True)
    record_path.write_text(json.dumps(fixture_record()), encoding="utf-8")
    inputs = site.RenderInput(results_dir=tmp_path / "results", generated_dir=tmp_path / "generated",
                              scenario_records={}, rerun_scenario_records={}, design_names=[], scenario_ids=[],
                              figures=[])
    assert site.fast_and_correct_steps_files in site.RENDERERS
    files = site.fast_and_correct_steps_files(inputs)
    production = tmp_path / "generated" / "fast-and-correct-steps-production-heads.md"
    assert list(files) == [tmp_path / "generated" / "fast-and-correct-steps.md", production]
    assert "results/fast-and-correct/steps.json" in files[tmp_path / "generated" / "fast-and-correct-steps.md"]
    assert "| step 6 | parsed heads remembered |" in files[tmp_path / "generated" / "fast-and-correct-steps.md"]
    assert "Not measured yet" in files[production] and "--request-heads production" in files[production]
    page = (REPO_ROOT / "docs" / "designs" / "fast-and-correct.md").read_text(encoding="utf-8")
    assert '--8<-- "docs/_generated/fast-and-correct-steps.md"' in page
    assert '--8<-- "docs/_generated/fast-and-correct-steps-production-heads.md"' in page


def test_an_unknown_chain_exits_2_before_measuring() -> None:
    answer = subprocess.run([sys.executable, "scripts/bench.py", "how-fast", "steps", "--chain", "no-such-chain"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert answer.returncode == 2, answer.stderr
    assert answer.stdout == "" and "no-such-chain" in answer.stderr


def test_the_committed_record_has_a_row_for_every_step_and_nginx_in_the_same_run() -> None:
    """The page's table is rendered from a record of this chain: every step, NGINX and the ceiling, measured."""
    record = how_fast_tables.load_steps(REPO_ROOT / "results" / CHAIN.record)
    assert record.chain == CHAIN.name and not record.environment.dirty
    names = [row.name for row in record.rows]
    assert names[:len(STEPS)] == [f"step-{step.number}" for step in STEPS]
    assert {record.settings.relative_to, record.settings.ceiling} <= set(names)
    assert all(row.runs and not row.problems for row in record.rows)
    tables = how_fast_tables.steps_files(CHAIN, REPO_ROOT / "results", REPO_ROOT / "docs" / "_generated").values()
    assert len(tables) == 2  # wrk's one-header GET, and production-shaped heads
    assert all(f"| step {step.number} | {step.name.replace('-', ' ')} |" in table for step in STEPS for table in tables)
