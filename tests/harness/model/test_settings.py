"""Scenario settings are checked when the catalogue loads: unknown, mistyped or unread keys are errors.

Each case writes a one-scenario catalogue whose only fault is the one named, and runs
`bench.py scenarios` on it as a reader would: exit 2, and a message naming the key,
the scenario and the file.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from harness.clients import tools
from harness.model import settings
from harness.model.catalogue import CATALOGUE_DIR, Scenario, load_catalogue, read_entries
from harness.model.paths import REPO_ROOT
from scenario_settings import DESIGN_TABLE
from harness.model.records.scenario_record import ScenarioRecord

BENCH = [sys.executable, str(REPO_ROOT / "scripts" / "bench.py")]
SCENARIO = {"id": '"s"', "title": '"t"', "tool": '"ab"', "requests": "10", "concurrency": "[1]",
            "time_limit": "1", "delay": "0", "repeat": "1", "designs": '["sequential-sockets"]',
            "ceiling_exempt": '"a test"', "fixed_count": '"a test"'}


def write_catalogue(directory: Path, quick: str = "", drop: tuple[str, ...] = (), **changes: str) -> Path:
    entry = {**{key: value for key, value in SCENARIO.items() if key not in drop}, **changes}
    body = "\n".join(f"{key} = {value}" for key, value in entry.items())
    path = directory / "catalogue.toml"
    path.write_text(f"{DESIGN_TABLE}\n[[scenario]]\n{body}\n" + (f"\n[scenario.quick]\n{quick}\n" if quick else ""),
                    encoding="utf-8")
    return path


def refused(directory: Path) -> str:
    result = subprocess.run([*BENCH, "--catalogue", str(directory), "scenarios"], capture_output=True, text=True,
                            timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr
    return result.stderr


def test_the_unchanged_test_scenario_is_valid(tmp_path: Path) -> None:
    write_catalogue(tmp_path)
    assert load_catalogue(tmp_path).scenario("s").settings(quick=False).keep_alive is False


def test_a_misspelt_key_is_named_with_its_scenario_its_file_and_the_likely_key(tmp_path: Path) -> None:
    path = write_catalogue(tmp_path, time_limt="3")
    message = refused(tmp_path)
    assert "unknown setting 'time_limt'" in message and "did you mean 'time_limit'" in message
    assert f"{path}: scenario 's'" in message


def test_a_misspelt_key_in_the_quick_table_is_caught_too(tmp_path: Path) -> None:
    write_catalogue(tmp_path, quick="reapeat = 1")
    assert "unknown setting 'quick.reapeat'" in refused(tmp_path)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("concurrency", "10", "concurrency = 10, expected: non-empty list of integers"),
    ("concurrency", "[]", "concurrency = [], expected: non-empty list of integers"),
    ("concurrency", "[1, true]", "concurrency = [1, True], expected: non-empty list of integers"),
    ("keep_alive", '"yes"', "keep_alive = 'yes', expected: boolean"),
    ("repeat", "1.5", "repeat = 1.5, expected: integer"),
    ("delay", "false", "delay = False, expected: number"),
    ("server_cpus", '"0"', "server_cpus = '0', expected: \"all\""),
    ("server_cpus", '"two"', "server_cpus = 'two', expected: \"all\""),
    ("time_limit_at", "{ ten = 2 }", "time_limit_at = {'ten': 2}, expected: table of concurrency level -> number"),
    ("sizes", '{ sequential-sockets = [] }',
     "sizes = {'sequential-sockets': []}, expected: table of design name -> non-empty list of integers"),
])
def test_a_value_of_the_wrong_type_is_an_error(tmp_path: Path, key: str, value: str, expected: str) -> None:
    write_catalogue(tmp_path, **{key: value})
    assert expected in refused(tmp_path)


def test_a_setting_the_scenarios_tool_does_not_read_is_an_error(tmp_path: Path) -> None:
    write_catalogue(tmp_path, timeout="5")  # hey's and wrk's per-request timeout; ab has none
    message = refused(tmp_path)
    assert "sets 'timeout', which its tool 'ab' does not read" in message and "ab_flags" in message


def test_keep_alive_with_a_tool_that_always_closes_is_an_error(tmp_path: Path) -> None:
    write_catalogue(tmp_path, tool='"http-client"', keep_alive="true")
    assert "its tool 'http-client' cannot keep connections alive" in refused(tmp_path)


def test_a_missing_required_setting_an_unknown_tool_and_an_unknown_ceiling_are_errors(tmp_path: Path) -> None:
    write_catalogue(tmp_path, drop=("delay",))
    assert "missing required setting(s) 'delay'" in refused(tmp_path)
    write_catalogue(tmp_path, tool='"siege"')
    assert "unknown tool 'siege'" in refused(tmp_path)
    write_catalogue(tmp_path, drop=("ceiling_exempt",), ceiling='"ngnix"')
    assert "names design 'ngnix', which is not in the catalogue" in refused(tmp_path)


def test_every_tool_reads_only_known_settings_and_every_tool_setting_has_a_reader() -> None:
    read_somewhere = set().union(*(tool.reads for tool in tools.TOOLS.values()))
    assert read_somewhere <= settings.SETTINGS.keys()
    tool_settings = {setting.name for setting in settings.SETTINGS.values() if setting.reader == settings.TOOL}
    assert tool_settings <= read_somewhere


def test_the_typed_settings_and_the_table_of_settings_cannot_drift() -> None:
    """SETTINGS is read off ScenarioSettings' fields: each setting's type is its field's annotation, and it is
    required exactly when the field has no default."""
    fields = {field.name: field for field in dataclasses.fields(settings.ScenarioSettings)}
    assert list(fields) == list(settings.SETTINGS)
    hints = typing.get_type_hints(settings.ScenarioSettings, include_extras=True)
    for name, setting in settings.SETTINGS.items():
        assert setting.type == hints[name], name
        assert setting.required == (fields[name].default is dataclasses.MISSING
                                    and fields[name].default_factory is dataclasses.MISSING), name


def test_every_scenario_gives_typed_settings_that_its_record_gives_back() -> None:
    """Full and quick (the quick table replaced in); a record keeps what the scenario set, and reads back equal."""
    for scenario in load_catalogue().scenarios.values():
        full, quick = scenario.settings(quick=False), scenario.settings(quick=True)
        assert quick == dataclasses.replace(full, **scenario.quick.settings), scenario.id
        for variant in (full, quick):
            assert settings.ScenarioSettings.from_json(variant.to_json(), lenient=True) == variant, scenario.id
    for _, entry in read_entries(CATALOGUE_DIR)[1]:  # the keys the scenario sets, as the catalogue writes them
        written = load_catalogue().scenario(entry["id"]).settings(quick=False).to_json()
        assert set(written) <= (entry.keys() - settings.NAME_KEYS) | settings.ALWAYS_RECORDED, entry["id"]


def readme_rows() -> dict[str, list[str]]:
    """The catalogue README's table of settings: name -> its cells after the name."""
    readme = (REPO_ROOT / "scripts" / "catalogue" / "README.md").read_text(encoding="utf-8")
    rows = [[cell.strip() for cell in line.strip("|").split(" | ")] for line in readme.splitlines()
            if line.startswith("| `")]
    return {cells[0].strip("`"): cells[1:] for cells in rows}


def test_the_readme_lists_every_setting() -> None:
    """The type column is type_name of the setting's annotation (", required" where it is), so it cannot drift."""
    rows = readme_rows()
    assert [name for name in settings.SETTINGS if name not in rows] == []
    assert {name: rows[name][0].replace("`", "") for name in settings.SETTINGS} == {
        name: setting.type_name + (", required" if setting.required else "")
        for name, setting in settings.SETTINGS.items()}


# --- what a scenario must measure: the tool's ceiling, and runs of a second or more ---------------------

def test_a_scenario_without_a_ceiling_or_a_reason_for_none_is_an_error(tmp_path: Path) -> None:
    path = write_catalogue(tmp_path, drop=("ceiling_exempt",))
    message = refused(tmp_path)
    assert f"{path}: scenario 's': measures no tool ceiling" in message and "ceiling_exempt" in message
    write_catalogue(tmp_path, ceiling='"sequential-sockets"')
    assert "sets both ceiling and ceiling_exempt" in refused(tmp_path)
    write_catalogue(tmp_path, drop=("ceiling_exempt",), ceiling='"sequential-sockets"')
    assert load_catalogue(tmp_path).scenario("s").settings(quick=False).ceiling == "sequential-sockets"


@pytest.mark.parametrize("key", ["ceiling_exempt", "fixed_count"])
def test_an_exemption_must_say_why(tmp_path: Path, key: str) -> None:
    write_catalogue(tmp_path, **{key: '"  "'})
    assert f"{key} must say why" in refused(tmp_path)


def test_a_quick_run_cannot_drop_the_ceiling_or_the_run_length_rule(tmp_path: Path) -> None:
    write_catalogue(tmp_path, quick='fixed_count = "faster"')
    assert "quick.fixed_count is not allowed" in refused(tmp_path)


@pytest.mark.parametrize(("tool", "changes", "quick", "expected"), [
    # The keep-alive scenario as it was: hey sends 2,000 requests in about 0.1 s, long before its 4 s limit.
    ("hey", {"requests": "2000", "time_limit": "4", "keep_alive": "true"}, "",
     "hey stops after requests = 2,000, which it can send in 0.02 s"),
    ("ab", {"requests": "1000000", "time_limit": "0.5"}, "", "a time limit of 0.5 s"),
    ("ab", {"requests": "1000000", "time_limit": "5"}, "time_limit = 0.5", "quick: a time limit of 0.5 s"),
    ("ab", {"requests": "1000000", "time_limit": "5", "time_limit_blocking": "0.5"}, "", "a time limit of 0.5 s"),
    ("wrk", {"requests": "0", "time_limit": "1", "time_limit_at": "{ 10 = 0.5 }"}, "", "a time limit of 0.5 s"),
    ("http-client", {"requests": "30", "time_limit": "10"}, "", "http-client runs until it has sent its requests"),
    ("http-client", {"requests": "0", "time_limit": "3", "rate": "[20, 160]", "schedule_seconds": "0.5"}, "",
     "an open-loop schedule of 0.5 s"),
    ("echo-client", {"requests": "0", "time_limit": "15"}, "", "echo-client runs until it has sent its requests"),
])
def test_a_scenario_whose_runs_can_end_under_a_second_is_an_error(tmp_path: Path, tool: str, changes: dict[str, str],
                                                                   quick: str, expected: str) -> None:
    path = write_catalogue(tmp_path, quick=quick, drop=("fixed_count",), tool=f'"{tool}"', **changes)
    message = refused(tmp_path)
    assert f"{path}: scenario 's': {expected}" in message, message
    assert "fixed_count" in message  # the way out, for an article's fixed-count experiment


@pytest.mark.parametrize(("tool", "changes", "quick"), [
    ("hey", {"requests": "1000000", "time_limit": "3", "keep_alive": "true"}, "time_limit = 1.1"),
    ("ab", {"requests": "1000000", "time_limit": "5"}, "time_limit = 1"),
    ("wrk", {"requests": "0", "time_limit": "1", "time_limit_at": "{ 10 = 2 }"}, "time_limit_at = {}"),
    ("http-client", {"requests": "0", "time_limit": "3", "rate": "[20, 160]", "schedule_seconds": "2"},
     "schedule_seconds = 1"),
])
def test_a_duration_bound_scenario_needs_no_exemption(tmp_path: Path, tool: str, changes: dict[str, str],
                                                       quick: str) -> None:
    write_catalogue(tmp_path, quick=quick, drop=("fixed_count",), tool=f'"{tool}"', **changes)
    assert load_catalogue(tmp_path).scenario("s").tool == tool


def test_a_fixed_count_experiment_may_run_for_less_than_a_second(tmp_path: Path) -> None:
    write_catalogue(tmp_path, tool='"hey"', requests="2000", time_limit="0.5")
    assert load_catalogue(tmp_path).scenario("s").settings(quick=False).fixed_count == "a test"


def test_quick_designs_are_a_few_of_the_scenarios_own(tmp_path: Path) -> None:
    write_catalogue(tmp_path, quick='designs = ["sequential-sockets"]')
    scenario = load_catalogue(tmp_path).scenario("s")
    assert scenario.design_names(quick=True) == ["sequential-sockets"]
    assert not hasattr(scenario.settings(quick=True), "designs")  # a name, not a setting
    write_catalogue(tmp_path, quick='designs = ["thread-per-connection"]')
    assert "quick.designs = ['thread-per-connection'], expected: a non-empty list of the scenario's own designs" \
        in refused(tmp_path)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("title", "3", "scenario 's'.title: expected string, found int 3"),
    ("article", "[]", "scenario 's'.article: expected string, found list []"),
    ("published", '"yes"', "scenario 's'.published: expected an object, found str"),
    ("designs", '"sequential-sockets"', "scenario 's'.designs: expected a list, found str"),
])
def test_a_scenarios_own_key_of_the_wrong_type_is_an_error_naming_it(tmp_path: Path, key: str, value: str,
                                                                       expected: str) -> None:
    """The names beside the settings are typed too (catalogue.Scenario, read by typed.py), not only present."""
    path = write_catalogue(tmp_path, **{key: value})
    assert f"{path}: {expected}" in refused(tmp_path)


def test_a_quick_that_is_not_a_table_is_an_error_naming_it(tmp_path: Path) -> None:
    path = write_catalogue(tmp_path)
    path.write_text(path.read_text(encoding="utf-8") + 'quick = "short"\n', encoding="utf-8")  # the scenario's last key
    assert f"{path}: scenario 's'.quick: expected a JSON object (QuickTable), found str" in refused(tmp_path)


@pytest.mark.parametrize(("drop", "quick", "expected"), [
    ("title", "", "scenario 's': missing key `title` (Scenario needs it)"),
    ("id", "", "scenario '(no id)': missing key `id` (Scenario needs it)"),
    ("", "designs = []", "scenario 's'.quick.designs: expected non-empty list of the scenario's own designs, found []"),
    ("", 'covered_by = " "', "scenario 's'.quick.covered_by: expected the id of the scenario whose quick run stands "
                              "for this one, found ' '"),
    ("", "covered_by = 3", "scenario 's'.quick.covered_by: expected the id of the scenario whose quick run stands "
                           "for this one, found int 3"),
])
def test_a_missing_name_or_a_bad_quick_name_is_an_error_naming_it(tmp_path: Path, drop: str, quick: str,
                                                                  expected: str) -> None:
    path = write_catalogue(tmp_path, quick=quick, drop=(drop,))
    assert f"{path}: {expected}" in refused(tmp_path)


def test_the_scenario_names_are_the_scenarios_fields_and_a_record_keeps_the_same_class() -> None:
    """settings.NAME_KEYS (what is not a setting) cannot drift from catalogue.Scenario's fields; a record's entry is a
    Scenario, so the catalogue and the records read a scenario table with one class."""
    assert settings.NAME_KEYS == {field.name for field in dataclasses.fields(Scenario)} - {"full_settings"}
    assert typing.get_type_hints(ScenarioRecord)["scenario"] is Scenario


def test_every_scenario_of_the_site_measures_a_ceiling_or_says_why_not() -> None:
    """And exempts only what the README names: a fixed count only with an article's figures, or a picture."""
    for scenario in load_catalogue().scenarios.values():
        full = scenario.settings(quick=False)
        assert (full.ceiling is None) != (full.ceiling_exempt is None), scenario.id
        if full.fixed_count:
            assert scenario.published or full.timeline, scenario.id
