"""Instructions per request under callgrind: the subtraction, the agreement, callgrind's file, the table, a real run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness.model import instruction_counts
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records.instructions_record import InstructionsRecord
from harness.render import instructions_tables
from harness.suites import instructions

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "instructions"
HEADER = "<!-- {source} -->\n"


def test_start_up_and_shutdown_cancel_out() -> None:
    """1,000,000 of start-up and shutdown, 250 a request: 2,000 and 4,000 requests give back 250."""
    assert instruction_counts.per_request(1_000_000 + 2_000 * 250, 1_000_000 + 4_000 * 250, 2_000, 4_000) == 250


@pytest.mark.parametrize(("totals", "requests"), [((10, 20), (4_000, 2_000)), ((10, 20), (2_000, 2_000)),
                                                  ((20, 10), (2_000, 4_000))])
def test_a_pair_that_cannot_be_subtracted_is_refused(totals: tuple[int, int], requests: tuple[int, int]) -> None:
    with pytest.raises(ValueError):
        instruction_counts.per_request(*totals, *requests)


def test_two_measurements_agree_within_two_percent_of_their_mean() -> None:
    assert instruction_counts.relative_difference(99_000, 101_000) == pytest.approx(0.02)
    assert instruction_counts.agree([99_000, 101_000])
    assert not instruction_counts.agree([99_000, 101_100])
    assert instruction_counts.agree([50_000.0])


def test_the_total_is_read_from_callgrinds_file() -> None:
    """A captured callgrind output file (its head and its totals line; the function costs between are cut)."""
    text = (FIXTURES / "callgrind.out").read_text(encoding="utf-8")
    assert instructions.instructions_total(text) == 350_777_730  # `summary:`, what callgrind counted
    assert instructions.instructions_total(text.replace("summary:", "# summary:")) == 350_779_142  # else `totals:`


def test_the_total_is_taken_at_irs_place_among_several_events() -> None:
    assert instructions.instructions_total("events: Dr Ir Dw\nsummary: 5 6 7\nfn=x\n1 5 6 7\ntotals: 5 6 7\n") == 6
    with pytest.raises(instructions.CallgrindOutputError):
        instructions.instructions_total("events: Dr\ntotals: 5\n")
    with pytest.raises(instructions.CallgrindOutputError):
        instructions.instructions_total("events: Ir\nfn=x\n")


def measurement(low_total: int, high_total: int, per_request: float) -> dict[str, Any]:
    return {"runs": [{"requests": 2_000, "instructions": low_total}, {"requests": 4_000, "instructions": high_total}],
            "instructions_per_request": per_request}


def fixture_record() -> dict[str, Any]:
    def row(name: str, group: str, values: list[float], step: int | None = None, python: str | None = None,
            problems: list[str] | None = None) -> dict[str, Any]:
        return {"name": name, "title": name.replace("-", " "), "group": group, "design_name": name, "step": step,
                "file": "servers/x.py", "python": python,
                "python_version": "3.11.7" if python is None else python + ".0", "problems": problems or [],
                "measurements": [measurement(1, 2, value) for value in values]}
    return {
        "schema": 1, "kind": "instructions", "mode": "full", "valgrind": "valgrind-3.19.0",
        "settings": {"requests": [2_000, 4_000], "measurements": 2, "agreement": 0.02},
        "counter": "callgrind's Ir", "wrapper": ["valgrind"],
        "environment": {"cpu_model": "Test CPU", "cpu_count": 2, "cpus_available": 2, "memory_gib": 4.0,
                        "kernel": "6", "os": "Linux", "python": "3.11", "runner": "local",
                        "pinning": {"server_cpu": "0", "load_tool_cpu": "1", "method": "taskset"},
                        "tools": {"valgrind": "valgrind-3.19.0"}, "commit": "0123456789abcdef", "dirty": False},
        "started_utc": "2026-11-25T18:00:00Z", "finished_utc": "2026-11-25T18:30:00Z",
        "rows": [row("step-0", "steps", [100_000, 100_500], step=0), row("step-1", "steps", [80_000, 84_000], step=1),
                 row("asyncio-protocol-keep-alive", "hardened", [100_000, 100_000]),
                 row("hardened", "hardened", [], problems=["server did not start"]),
                 row("v-3.12", "versions", [90_000, 90_000], python="3.12")],
    }


def test_the_table_shows_both_measurements_their_difference_and_flags_one_past_two_percent() -> None:
    page = instructions_tables.instructions_page(InstructionsRecord.from_json(fixture_record(), "fixture"),
                                                 {"step-0": (30.5, "how-fast steps")},
                                                 groups=["steps", "hardened"])
    lines = page.splitlines()
    step_0 = next(line for line in lines if line.startswith("| step 0"))
    assert "**100,250** | 100,000 / 100,500 | 0.50% | 100% | 30.5 (how-fast steps) |" in step_0
    step_1 = next(line for line in lines if line.startswith("| step 1"))
    assert "**82,000** | 80,000 / 84,000 | 4.88% ⚠ over 2% | 82% | – |" in step_1
    assert any("not measured: server did not start" in line for line in lines)
    assert "Python versions" not in page  # asked for two groups only
    assert "differ by at most 4.88% ⚠ more than 2%" in page
    assert "(total(4,000) − total(2,000)) / 2,000" in page and "User space only" in page


def test_rendering_writes_both_pages_and_says_not_measured_before_a_record(tmp_path: Path) -> None:
    results, generated = tmp_path / "results", tmp_path / "generated"
    before = instructions_tables.instructions_files(results, generated, {}, HEADER)
    assert sorted(path.name for path in before) == ["instructions-fast-and-correct.md", "instructions-python-versions.md",
                                                   "instructions.md"]
    assert all("Not measured yet" in text for text in before.values())
    (results / "instructions").mkdir(parents=True)
    (results / instruction_counts.RECORD).write_text(json.dumps(fixture_record()), encoding="utf-8")
    files = instructions_tables.instructions_files(results, generated, {}, HEADER)
    versions = files[generated / "instructions-python-versions.md"]
    assert "| v 3.12 | 3.12.0 | **90,000** | 90,000 / 90,000 | 0.00% | 100% | – |" in versions
    assert "step 0" not in versions and "step 0" in files[generated / "instructions.md"]


def test_an_unknown_row_exits_2_before_anything_starts() -> None:
    answer = subprocess.run([sys.executable, "scripts/bench.py", "instructions", "--row", "no-such-row"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert answer.returncode == 2, answer.stderr
    assert "no row named no-such-row" in answer.stderr and answer.stdout == ""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_real_count_under_callgrind_is_positive_and_plausible(tmp_path: Path) -> None:
    """A small design under callgrind, 20 and 60 requests: tens of thousands of instructions a request, not 0 or 10^9."""
    design = load_catalogue().design(SMALL_DESIGN)
    valgrind = instructions.valgrind_path()
    low = instructions.count_run(design, 20, None, None, tmp_path / "low", valgrind)
    high = instructions.count_run(design, 60, None, None, tmp_path / "high", valgrind)
    assert low.error is None and high.error is None, (low, high)
    assert low.instructions is not None and high.instructions is not None and low.command is not None
    per_request = instruction_counts.per_request(low.instructions, high.instructions, 20, 60)
    assert 5_000 < per_request < 5_000_000, per_request
    assert valgrind in low.command and "--tool=callgrind" in low.command


SMALL_DESIGN = "asyncio-protocol-keep-alive"  # stdlib only: the plain row of the suite itself


def test_the_fast_and_correct_table_puts_both_request_heads_side_by_side_against_nginx() -> None:
    record = fixture_record()

    def chain_row(name: str, step: int | None, heads: str | None, value: float, design: str) -> dict[str, Any]:
        return {"name": name, "title": name, "group": "fast-and-correct", "design_name": design, "step": step,
                "file": "servers/x.py", "python": None, "python_version": "3.11.7", "problems": [],
                "measurements": [measurement(1, 2, value), measurement(1, 2, value)], "request_heads": heads}
    record["rows"] += [chain_row("common", 7, None, 20_000, "fast-and-correct"),
                       chain_row("common", 7, "production", 60_000, "fast-and-correct"),
                       chain_row("NGINX", None, None, 10_000, "nginx-keep-alive"),
                       chain_row("NGINX", None, "production", 15_000, "nginx-keep-alive")]
    table = instructions_tables.chain_table(InstructionsRecord.from_json(record, "fixture"))
    assert "| step 7 | common | **20,000** | 2.0× | **60,000** | 4.0× |" in table
    assert "| reference | NGINX | **10,000** | 1.0× | **15,000** | 1.0× |" in table
    assert table.index("step 7") < table.index("reference")


def test_what_the_fast_and_correct_page_reads_from_the_counts_holds_in_the_record() -> None:
    """docs/designs/fast-and-correct.md's paragraph after the counts, claim by claim, against the committed record."""
    record = instructions_tables.load_instructions(REPO_ROOT / "results" / instruction_counts.RECORD)
    count = {(row.step, row.design_name, row.request_heads): instructions_tables.mean_count(row)
             for row in record.rows if row.group == "fast-and-correct"}
    design = "fast-and-correct"
    heads = (None, "production")

    def step(number: int, shape: str | None) -> float:
        value = count[(number, design, shape)]
        assert value is not None, (number, shape)
        return value

    for number in (2, 3, 5):  # uvloop, responses built once a second, one keep-alive timer per wait
        saved = [step(number - 1, shape) - step(number, shape) for shape in heads]
        assert min(saved) > 0 and max(saved) / min(saved) < 1.3, (number, saved)  # about as many with either head
    assert step(4, None) < 0.5 * step(3, None)  # the common case first: most of the remaining cost off wrk's head
    assert step(4, "production") > 0.9 * step(3, "production")  # almost nothing off the production-shaped heads
    assert all(step(6, shape) >= step(5, shape) for shape in heads)  # remembered heads save nothing, add a little
    nginx = {shape: count[(None, "nginx-keep-alive", shape)] for shape in heads}
    multiples = [step(7, shape) / nginx[shape] for shape in heads]
    assert max(multiples) / min(multiples) < 1.2, multiples  # about the same multiple of nginx's for both heads
    assert step(7, "production") < step(6, "production") / 3  # the first step without the full parser for both
    assert nginx["production"] > nginx[None]  # nginx executes more for the longer heads too
    page = (REPO_ROOT / "docs" / "designs" / "fast-and-correct.md").read_text(encoding="utf-8")
    assert "Which conclusions hold for which request, read from the counts" in page
