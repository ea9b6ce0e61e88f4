"""Free-threaded Python (issue 33): the build refuses clearly, the GIL check reports what the server's processes say,
and the page's tables render the pair of records side by side, flagging a run whose GIL came back on."""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness.model.paths import REPO_ROOT
from harness.model.records.scenario_record import ScenarioRecord
from harness.render import free_threaded
from harness.system import gil_report, launcher

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "free_threaded"
BUILD = REPO_ROOT / "scripts" / "build_free_threaded_python.sh"


def fixture(kind: str) -> dict:
    """A fixture's JSON (a record as the runner writes it), to change before it is read."""
    return json.loads((FIXTURES / f"{kind}.json").read_text())


def typed(data: dict) -> ScenarioRecord:
    return ScenarioRecord.from_json(data, "test record")


# --- the build command ------------------------------------------------------------------------------------------


def fake_apt_get(folder: Path, calls: Path) -> Path:
    """An apt-get on PATH that records that it was called and then fails as one without a network does."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "apt-get"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\necho 'E: Failed to fetch (no network here)' >&2\nexit 100\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def build(cache: Path, path_prefix: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "MANY_CLIENTS_CACHE": str(cache), **env}
    if path_prefix is not None:
        environment["PATH"] = f"{path_prefix}:{environment['PATH']}"
    return subprocess.run([str(BUILD)], capture_output=True, text=True, env=environment, timeout=120, check=False)


def test_the_build_refuses_with_a_clear_error_when_the_source_cannot_be_fetched(tmp_path: Path) -> None:
    calls = tmp_path / "apt-calls"
    result = build(tmp_path / "cache", fake_apt_get(tmp_path / "bin", calls))
    assert result.returncode == 1
    assert "Could not fetch the CPython 3.13.5 source (python3.13_3.13.5.orig.tar.xz)" in result.stderr
    assert "uv python install 3.14t" in result.stderr and "pyenv install 3.14.0t" in result.stderr  # the ways elsewhere
    assert "E: Failed to fetch" in result.stderr  # apt's own words, passed on
    # It asked with a sources file of its own, never the system's, and built nothing.
    asked = calls.read_text()
    assert f"Dir::Etc::SourceList={tmp_path}/cache/cpython-3.13.5/apt/sources.list" in asked
    assert "Dir::Etc::SourceParts=/dev/null" in asked and f"Dir::Cache={tmp_path}/cache/cpython-3.13.5/apt/cache" in asked
    sources = (tmp_path / "cache" / "cpython-3.13.5" / "apt" / "sources.list").read_text()
    assert sources.startswith("deb-src ") and " trixie main" in sources
    assert not (tmp_path / "cache" / "cpython-3.13.5" / "gil").exists()
    assert not (tmp_path / "cache" / "venvs").exists()


def test_the_build_refuses_when_debian_cannot_be_reached(tmp_path: Path) -> None:
    """The real apt-get, pointed at a mirror nothing listens on: the same refusal, within seconds."""
    started = time.monotonic()
    result = build(tmp_path / "cache", MANY_CLIENTS_DEBIAN_MIRROR="http://127.0.0.1:9/debian")
    assert result.returncode == 1 and "Could not fetch the CPython 3.13.5 source" in result.stderr
    assert time.monotonic() - started < 90


def test_the_build_does_nothing_when_both_builds_exist(tmp_path: Path) -> None:
    cache, calls = tmp_path / "cache", tmp_path / "apt-calls"
    for prefix, python, venv in (("gil", "python3.13", "3.13.5"), ("free-threaded", "python3.13t", "3.13.5t")):
        executable = cache / "cpython-3.13.5" / prefix / "bin" / python
        executable.parent.mkdir(parents=True)
        executable.write_text("#!/bin/sh\n")
        executable.chmod(0o755)
        environment = cache / "venvs" / venv
        (environment / "bin").mkdir(parents=True)
        (environment / "bin" / "python").symlink_to(executable)
        (environment / ".installed").touch()
        site_packages = environment / "lib" / "python3.13t" / "site-packages"
        site_packages.mkdir(parents=True)
        gil_report.install_hook(site_packages)
    result = build(cache, fake_apt_get(tmp_path / "bin", calls))
    assert result.returncode == 0 and "already built" in result.stdout
    assert not calls.exists()  # no download, no build


def test_the_build_time_renders_from_the_record_the_script_writes_and_says_so_without_one(tmp_path: Path) -> None:
    assert "*Not shown yet:*" in free_threaded.build_time(tmp_path)
    script = BUILD.read_text(encoding="utf-8")
    writer = script.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]  # the record writer the script runs
    record = tmp_path / "free-threaded" / "build.json"
    subprocess.run([sys.executable, "-", str(record), "3.13.5", "2026-11-28T12:40:00Z", "2026-11-28T12:49:05Z",
                    "4", "241", "262", "38", "0123456789abcdef", str(tmp_path / "cache")], input=writer, text=True,
                   check=True, capture_output=True, timeout=30)
    line = free_threaded.build_time(tmp_path)
    assert "took **9 min 5 s**" in line and "the free-threaded build 262 s" in line and "`0123456789`" in line
    record.write_text(json.dumps({"kind": "scenario"}))
    with pytest.raises(ValueError, match="not a free-threaded build record"):
        free_threaded.build_time(tmp_path)


def test_the_launcher_finds_the_built_environments_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MANY_CLIENTS_CACHE", str(tmp_path))
    with pytest.raises(launcher.InterpreterMissingError, match="make free-threaded-python"):
        launcher.interpreter("3.13.5t")
    python = tmp_path / "venvs" / "3.13.5t" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to(sys.executable)
    assert launcher.interpreter("3.13.5t") == str(python)


# --- the GIL check ----------------------------------------------------------------------------------------------


def report_from(tmp_path: Path, program: str) -> subprocess.CompletedProcess[str]:
    """Run `program` after the hook, as the .pth line runs it, with sys._is_gil_enabled as the program sets it."""
    environment = {**os.environ, gil_report.ENVIRONMENT_VARIABLE: str(tmp_path / "gil")}
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=environment,
                          timeout=30, check=True)


HOOK = ("import os, runpy, sys, time\n"
        "state = {'on': False}\n"
        "sys._is_gil_enabled = lambda: state['on']\n"
        f"exec(compile({gil_report.PTH_LINE.strip()!r}, 'pth', 'exec'))\n")


def test_each_process_reports_the_gil_and_a_change_after_start_up_is_seen(tmp_path: Path) -> None:
    program = HOOK + ("time.sleep(0.3)\n"
                      "child = os.fork()\n"
                      "if child == 0:\n"
                      "    time.sleep(0.3)\n"
                      "    os._exit(0)\n"
                      "os.waitpid(child, 0)\n"
                      "print(open(os.path.join(os.environ['MANY_CLIENTS_GIL_REPORT'], str(os.getpid()))).read())\n"
                      "state['on'] = True  # an import turned it back on\n"
                      "time.sleep(2 * 0.5 + 0.3)\n")
    result = report_from(tmp_path, program)
    assert result.stdout.strip() == "disabled"  # the process said so while the GIL was off
    reports = {path.name: path.read_text() for path in (tmp_path / "gil").iterdir()}
    assert len(reports) == 2  # the parent and its forked child, each under its pid
    assert sorted(reports.values()) == ["disabled", "enabled"]  # the child off; the parent on once it changed
    assert gil_report.read(tmp_path / "gil") == "enabled"  # any process with the GIL on: the run had it on


def test_the_hook_is_silent_without_the_variable_or_without_sys_is_gil_enabled(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-c", gil_report.PTH_LINE], env={k: v for k, v in os.environ.items()
                                                                      if k != gil_report.ENVIRONMENT_VARIABLE},
                   check=True, timeout=30)
    program = f"import sys, time\nexec(compile({gil_report.PTH_LINE.strip()!r}, 'pth', 'exec'))\ntime.sleep(0.3)\n"
    if hasattr(sys, "_is_gil_enabled"):
        program = "import sys\ndel sys._is_gil_enabled\n" + program
    report_from(tmp_path, program)
    assert gil_report.read(tmp_path / "gil") is None  # an interpreter that cannot say says nothing


def test_read_says_disabled_only_when_every_process_said_so(tmp_path: Path) -> None:
    folder = tmp_path / "gil"
    assert gil_report.read(folder) is None
    folder.mkdir()
    (folder / "101").write_text("disabled")
    (folder / ".102.partial").write_text("enabled")  # half-written: not a report
    assert gil_report.read(folder) == "disabled"
    (folder / "102").write_text("enabled")
    assert gil_report.read(folder) == "enabled"


def test_a_free_threaded_build_reports_the_gil_off_inside_a_running_design(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """On the build itself, where it exists here (`make free-threaded-python`): the hook reports from the server."""
    from conftest import CATALOGUE, started

    try:
        python = launcher.interpreter("3.13.5t")
    except launcher.InterpreterMissingError as error:
        pytest.skip(str(error))
    monkeypatch.setattr(sys, "executable", python)
    with started(CATALOGUE.designs["thread-per-connection"], tmp_path):
        time.sleep(gil_report.POLL_SECONDS + 0.5)
        state = gil_report.read(launcher.gil_folder(tmp_path / "thread-per-connection"))
    assert state == "disabled"


# --- the page's tables ------------------------------------------------------------------------------------------


def place(results_dir: Path, workload: str, pair: tuple[str, str], gil_on_in: int = 0) -> dict[str, dict]:
    """The two fixture records as one workload's pair; the free-threaded one's first `gil_on_in` runs had the GIL on."""
    written = {}
    for python, source in zip(pair, ("3.14", "3.14t")):
        data = fixture(source)
        data["scenario"]["id"] = f"free-threaded-{workload}-{python}"
        for design in data["designs"]:
            for index, run in enumerate(design["runs"]):
                run["gil"] = "enabled" if python == pair[0] or index < gil_on_in else "disabled"
        target = results_dir / "free-threaded" / f"free-threaded-{workload}-{python}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(data))
        written[python] = data
    return written


def render(tmp_path: Path) -> dict[Path, str]:
    return free_threaded.free_threaded_files(tmp_path, tmp_path / "generated", "{source}\n")


def test_without_records_every_file_says_so_in_words_and_shows_no_number(tmp_path: Path) -> None:
    files = render(tmp_path)
    assert files[tmp_path / "generated" / "free-threaded.md"].startswith("results/free-threaded/\n*Not measured yet:*")
    workflow = files[tmp_path / "generated" / "free-threaded-3.14-cpu.md"]
    assert "no run of it has come back" in workflow and "req" not in workflow
    assert "Not checked yet" in files[tmp_path / "generated" / "free-threaded-dependencies.md"]


def test_a_pair_renders_side_by_side_with_the_ratio_and_the_gil_state_of_each_cell(tmp_path: Path) -> None:
    import statistics

    written = place(tmp_path, "cpu", ("3.13.5", "3.13.5t"), gil_on_in=1)
    table = render(tmp_path)[tmp_path / "generated" / "free-threaded-3.13-cpu.md"]

    def median(python: str, name: str) -> float:
        design = next(design for design in written[python]["designs"] if design["name"] == name)
        return statistics.median(run["requests_per_second"] for run in design["runs"])

    row = next(line for line in table.splitlines() if line.startswith("| [thread-per-connection](/designs/"))
    ratio = median("3.13.5t", "thread-per-connection") / median("3.13.5", "thread-per-connection")
    assert f"| {ratio:.2f} |" in row
    assert row.endswith("| ⚠ **on** in 1 of 3 runs |")  # the free-threaded build, with its GIL back on: flagged
    assert "3.13.5t / 3.13.5" in table and "round robin" in table
    # The other pair has no record: it says so, with no number.
    assert "no run of it has come back" in render(tmp_path)[tmp_path / "generated" / "free-threaded-3.14-cpu.md"]


def test_the_pair_table_shows_the_cpus_each_build_kept_busy(tmp_path: Path) -> None:
    """CPU time over wall time, per run, the median: the mechanism beside the rate (one CPU under the GIL, two
    without); a cell whose runs did not measure it says '–', never a number."""
    written = place(tmp_path, "cpu", ("3.13.5", "3.13.5t"))
    for python, cpus in (("3.13.5", 0.98), ("3.13.5t", 1.87)):
        for design in written[python]["designs"]:
            for run in design["runs"]:
                if design["name"] == "thread-per-connection":
                    run["server_resources"]["cpu_seconds"] = cpus * run["duration_s"]
                elif python == "3.13.5t":
                    run["server_resources"] = None
        (tmp_path / "free-threaded" / f"free-threaded-cpu-{python}.json").write_text(json.dumps(written[python]))
    table = render(tmp_path)[tmp_path / "generated" / "free-threaded-3.13-cpu.md"]
    rows = {line.split("]")[0].lstrip("| ["): line for line in table.splitlines() if line.startswith("| [")}
    assert "| 0.98 → 1.87 |" in rows["thread-per-connection"]
    assert " → – |" in rows["process-pool"]
    assert "CPUs busy, 3.13.5 → 3.13.5t" in table


def test_a_cell_whose_runs_all_had_the_gil_off_says_so(tmp_path: Path) -> None:
    place(tmp_path, "cpu", ("3.13.5", "3.13.5t"))
    table = render(tmp_path)[tmp_path / "generated" / "free-threaded-3.13-cpu.md"]
    assert "| off (3 of 3 runs) |" in table and "⚠ **on**" not in table


def test_the_answer_gives_the_thread_designs_ratios_from_the_records(tmp_path: Path) -> None:
    place(tmp_path, "cpu", ("3.13.5", "3.13.5t"))
    assert "Not measured yet" in render(tmp_path)[tmp_path / "generated" / "free-threaded.md"]  # hello missing
    place(tmp_path, "hello", ("3.13.5", "3.13.5t"))
    answer = render(tmp_path)[tmp_path / "generated" / "free-threaded.md"]
    records = free_threaded.load(tmp_path)
    expected = free_threaded.ratios(records["cpu"], "3.13.5", "3.13.5t", free_threaded.THREADS)
    assert list(expected) == ["thread-per-connection"]  # the fixture's one thread design
    assert f"the thread designs' medians on 3.13.5t were {expected['thread-per-connection']:.2f}× those" in answer
    # The fixture's runs of 3.14t lie wholly above those of 3.14 for this design: a difference it may claim.
    assert "; more beyond the spread of its runs;" in answer.splitlines()[1]
    assert "the best multi-process design's ([process-pool]" in answer


def test_a_process_per_core_weighs_the_best_thread_design_against_the_best_process_design(tmp_path: Path) -> None:
    """The ratio of medians, whether the runs overlap, and both memories (PSS), from the free-threaded record."""
    written = place(tmp_path, "cpu", ("3.13.5", "3.13.5t"))
    place(tmp_path, "hello", ("3.13.5", "3.13.5t"))
    for design in written["3.13.5t"]["designs"]:
        for run in design["runs"]:
            run["server_resources"]["peak_pss_mib"] = 20.0 if design["name"] == "thread-per-connection" else 90.0
    (tmp_path / "free-threaded" / "free-threaded-cpu-3.13.5t.json").write_text(json.dumps(written["3.13.5t"]))
    line = render(tmp_path)[tmp_path / "generated" / "free-threaded.md"].splitlines()[-1]
    records = free_threaded.load(tmp_path)["cpu"]
    threads = free_threaded.best(records, "3.13.5t", free_threaded.THREADS)
    processes = free_threaded.best(records, "3.13.5t", free_threaded.PROCESSES)
    assert threads is not None and processes is not None
    ratio = threads.cells["3.13.5t"]["rate"]["median"] / processes.cells["3.13.5t"]["rate"]["median"]
    assert f"was {ratio:.2f}× the best multi-process design's ([process-pool]" in line
    assert "the spread of their runs, in 20 MiB of PSS against 90" in line


def test_the_answer_claims_no_difference_where_the_runs_overlap(tmp_path: Path) -> None:
    written = place(tmp_path, "cpu", ("3.13.5", "3.13.5t"))
    place(tmp_path, "hello", ("3.13.5", "3.13.5t"))
    gil_runs = next(d for d in written["3.13.5"]["designs"] if d["name"] == "thread-per-connection")["runs"]
    data = written["3.13.5t"]
    for design in data["designs"]:
        if design["name"] == "thread-per-connection":
            for run, gil_run, factor in zip(design["runs"], gil_runs, (0.99, 1.0, 1.01)):
                run["requests_per_second"] = gil_run["requests_per_second"] * factor  # ranges that overlap
    (tmp_path / "free-threaded" / "free-threaded-cpu-3.13.5t.json").write_text(json.dumps(data))
    answer = render(tmp_path)[tmp_path / "generated" / "free-threaded.md"]
    assert "; within the spread of its runs;" in answer.splitlines()[1]


def test_python_versions_tables_put_each_interpreter_side_by_side_with_the_ratio(tmp_path) -> None:
    from harness.render import python_versions

    sweep_hello = typed({**fixture("3.14"), "designs": []})  # another scenario's record: no table of its own
    records = {"python-3.11-cpu": typed(fixture("3.14")), "python-3.13-cpu": typed(fixture("3.14t")),
               "sweep-hello": sweep_hello}
    files = python_versions.python_versions_files(records, tmp_path / "generated", tmp_path / "plots", "{source}\n")
    table = files[tmp_path / "generated" / "python-versions-cpu.md"]
    assert "| CPython | design | requests/s, median (" in table and "| / 3.11 |" in table
    row = next(line for line in table.splitlines() if line.startswith("| 3.13 | [thread-per-connection](/designs/"))
    assert row.endswith("| 1.80 |") and "(" in row  # the median, its interval, the ratio to the oldest
    assert (tmp_path / "generated" / "python-versions-hello.md") not in files  # no such records: no table
    assert files[tmp_path / "plots" / "python-versions.svg"].startswith("<?xml")


def test_python_versions_name_the_exact_release_the_record_kept_and_carry_the_flags(tmp_path) -> None:
    from harness.render import python_versions

    record = copy.deepcopy(fixture("3.14"))
    design = next(design for design in record["designs"] if design["name"] == "thread-per-connection")
    record["designs"] = [design]
    for run, rate in zip(design["runs"], [100.0, 150.0, 100.0]):
        run["requests_per_second"] = rate  # runs that disagree by 50%: flagged
    record["interpreter"] = {"asked": "3.12", "version": "3.12.1", "gil": "enabled", "executable": "/x"}
    table = python_versions.versions_table("cpu", {"3.12": typed(record)})
    assert "| / 3.12.1 |" in table and "| 3.12.1 | [thread-per-connection]" in table
    assert "⚠ spread 50%" in table


def test_the_dependency_table_flags_a_package_that_turns_the_gil_on_and_says_why_one_did_not_install(
        tmp_path: Path) -> None:
    def check(**fields: object) -> dict:
        return {"version": "1.0", "used_by": "a design", "modules": ["m"], **fields}

    free = {"asked": "3.13.5t", "version": "3.13.5", "gil": "disabled (free-threaded build)", "executable": "/x"}
    record = {"schema": 1, "kind": "gil-dependencies", "started_utc": "s", "finished_utc": "f",
              "lock_file": "requirements.lock", "interpreters": {"3.13.5t": {"interpreter": free, "packages": {
                  "pure": check(installed="wheel", gil_after_import="disabled", installed_version="1.0"),
                  "old-c": check(installed="wheel of an older release", gil_after_import="enabled",
                                 installed_version="0.9", warning="The global interpreter lock (GIL) has been enabled"),
                  "binary-only": check(installed=None, no_wheel="x",
                                       source_build="ERROR: Could not find a version (from versions: none)")}}}}
    (tmp_path / "free-threaded").mkdir()
    (tmp_path / "free-threaded" / "dependencies.json").write_text(json.dumps(record))
    table = render(tmp_path)[tmp_path / "generated" / "free-threaded-dependencies.md"]
    assert "| 3.13.5t (free-threaded) |" in table
    assert "| pure 1.0 | a design | wheel, GIL stays off |" in table
    assert "| old-c 1.0 | a design | wheel of an older release 0.9, ⚠ **turns the GIL on** |" in table
    assert "| binary-only 1.0 | a design | does not install: no wheel, and no source for it |" in table
