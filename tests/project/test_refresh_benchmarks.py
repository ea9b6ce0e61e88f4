"""scripts/refresh_benchmarks.sh (make bench, bench.yml): which failures it goes past, and its exit code.

The script is run with a stand-in for Python that logs each bench.py step and exits with the
code the test chose for it, so these tests take milliseconds and measure nothing.
"""

import importlib.util
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "refresh_benchmarks.sh"
ALL_STEPS = ["scripts/bench.py run", "scripts/bench.py run --out results/rerun", "scripts/bench.py hostile",
             "scripts/bench.py restart", "scripts/bench.py restart --in-flight", "scripts/bench.py balance",
             "scripts/bench.py how-fast steps", "scripts/bench.py how-fast steps --chain fast-and-correct",
             "scripts/bench.py streaming", "scripts/bench.py conformance", "scripts/bench.py deployment race",
             "scripts/bench.py deployment overload", "scripts/bench.py instructions", "scripts/bench.py render"]


def refresh(tmp_path: Path, exit_codes: list[int]) -> tuple[int, list[str]]:
    """Run the script with a fake interpreter whose n-th call exits with exit_codes[n]."""
    log = tmp_path / "calls.log"
    fake_python = tmp_path / "python"
    codes = " ".join(str(code) for code in exit_codes)
    fake_python.write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {log}\n'
        f"codes=({codes})\n"
        f'exit "${{codes[$(( $(wc -l < {log}) - 1 ))]}}"\n'
    )
    fake_python.chmod(0o755)
    finished = subprocess.run([str(SCRIPT), str(fake_python)], cwd=REPO_ROOT, capture_output=True, text=True,
                              timeout=30)
    calls = log.read_text().splitlines() if log.exists() else []
    return finished.returncode, calls


def test_every_step_is_a_command_bench_py_takes():
    """The stand-in interpreter below runs nothing, so a step bench.py would refuse (exit 2: `deployment` without its
    part did) is caught here: each parses with bench.py's own parser."""
    spec = importlib.util.spec_from_file_location("bench", REPO_ROOT / "scripts" / "bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    parser = bench.build_parser()
    for step in ALL_STEPS:
        script, *arguments = step.split()
        assert script == "scripts/bench.py"
        assert parser.parse_args(arguments).handler is not None, step


def test_every_step_runs_and_success_exits_0(tmp_path):
    assert refresh(tmp_path, [0] * len(ALL_STEPS)) == (0, ALL_STEPS)


@pytest.mark.parametrize("failing_step", range(len(ALL_STEPS)))
def test_a_failed_design_does_not_stop_the_refresh_but_is_reported_at_the_end(tmp_path, failing_step):
    codes = [0] * len(ALL_STEPS)
    codes[failing_step] = 1  # bench.py's code for "a design failed; its record was written"
    assert refresh(tmp_path, codes) == (1, ALL_STEPS)


@pytest.mark.parametrize("code", [2, 3, 130, 137])
def test_bad_input_a_harness_bug_an_interruption_or_a_kill_stops_at_once(tmp_path, code):
    assert refresh(tmp_path, [code] + [0] * (len(ALL_STEPS) - 1)) == (code, ALL_STEPS[:1])
    # Also from a later step: the tables are not rendered from half a refresh.
    (tmp_path / "calls.log").unlink()
    assert refresh(tmp_path, [0, 0, code] + [0] * (len(ALL_STEPS) - 3)) == (code, ALL_STEPS[:3])
