"""Settings are read typed: no code in scripts/ reads a setting by a string key (issue 19, item 4).

A scenario's settings are a ScenarioSettings (model/settings.py), the hostile and conformance
suites' their own dataclasses, and every record's stored settings are read back typed with the record
(model/records/: ScenarioRecord.settings is a ScenarioSettings). This test walks every module's syntax tree and fails on
`X["key"]` or `X.get("key")` where X is named for settings (`settings`, `level_settings`,
`target.settings`, `record["settings"]`): the kind of read that let a misspelt key read None.

And they are read by one checker (model/typed.py, issue 30 item 3): a scenario's settings, a suite's `[suite]` table
and a record's settings alike, strictly (a misspelt key names the nearest one) or, for a record of any age, leniently;
a type is said in words by one function, type_name.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import pytest
from harness.model import settings
from harness.model.paths import REPO_ROOT
from harness.model.suite_settings import HostileSettings
from harness.model.typed import NON_EMPTY, RecordShapeError, type_name
from harness.suites.case_catalogue import typed_settings
from harness.suites.hostile.cases import load_suite

SCRIPTS = REPO_ROOT / "scripts"
# Renderers that may still read a record's settings by a string key, each with why. None now: every suite's
# settings have typed classes (model/suite_settings.py, model/deployment_plan.py, the records' own). An entry added
# here must still need its exception (the last test).
OTHER_SUITES_RECORDS: dict[str, str] = {}


def names_settings(node: ast.expr) -> bool:
    """`settings`, `level_settings`, `target.settings` or `record["settings"]`."""
    if isinstance(node, ast.Name):
        return node.id.endswith("settings")
    if isinstance(node, ast.Attribute):
        return node.attr.endswith("settings")
    return isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == "settings"


def string_key_reads(source: str, filename: str) -> list[str]:
    """'line: key' for every settings[...] or settings.get(...) with a literal string key in the source."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        key = None
        if isinstance(node, ast.Subscript) and names_settings(node.value) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and names_settings(node.func.value) and node.args and isinstance(node.args[0], ast.Constant)):
            key = node.args[0].value
        if isinstance(key, str):
            found.append(f"{node.lineno}: {key}")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def reads_by_file() -> dict[str, list[str]]:
    reads = {}
    for path in sorted(SCRIPTS.rglob("*.py")):
        found = string_key_reads(path.read_text(encoding="utf-8"), str(path))
        if found:
            reads[str(path.relative_to(REPO_ROOT))] = found
    return reads


def test_the_check_finds_each_kind_of_string_key_read() -> None:
    source = ("settings['delay']\nlevel_settings.get('rate')\ntarget.settings['bound']\n"
              "record['settings']['repeat']\nsettings.delay\nrecord['settings']\nrow['settings_note']\n")
    assert string_key_reads(source, "example.py") == ["1: delay", "2: rate", "3: bound", "4: repeat"]


def test_no_setting_is_read_by_a_string_key() -> None:
    unexpected = {path: found for path, found in reads_by_file().items() if path not in OTHER_SUITES_RECORDS}
    assert unexpected == {}, "read the typed settings' attributes instead (settings.delay; record.settings.delay)"


def test_every_exception_is_still_needed() -> None:
    assert sorted(OTHER_SUITES_RECORDS.keys() - reads_by_file().keys()) == []


# --- one checker: the scenario settings, the suites' tables and the records' settings --------------------------

def test_a_records_settings_are_read_leniently_and_the_catalogues_strictly() -> None:
    """A record older than a setting's removal, or than its becoming required, still loads; a catalogue table (or
    anything read strictly) names the key it does not know and the key it lacks; the values are checked either way."""
    old = {"concurrency": [1], "time_limit": 1, "delay": 0, "keep_alive": False, "repeat": 1,
           "retired_setting": 3}
    read = settings.ScenarioSettings.from_json(old, lenient=True)
    assert (read.work, read.requests, read.concurrency) == (0, None, [1])
    with pytest.raises(RecordShapeError, match=r"unknown key `retired_setting`"):
        settings.ScenarioSettings.from_json(old)
    with pytest.raises(RecordShapeError, match=r"missing key `requests`"):
        settings.ScenarioSettings.from_json({key: value for key, value in old.items() if key != "retired_setting"})
    with pytest.raises(RecordShapeError, match=r"concurrency: expected non-empty list of integers, found \[\]"):
        settings.ScenarioSettings.from_json({**old, "concurrency": []}, lenient=True)


@pytest.mark.parametrize(("annotation", "words"), [
    (int, "integer"), (float | None, "number"), (list[str], "list of strings"),
    (typing.Annotated[list[int], NON_EMPTY], "non-empty list of integers"), (typing.Literal["all"], '"all"'),
    (dict[settings.DesignName, list[str]], "table of design name -> list of strings"),
    (settings.SETTINGS["rate"].type, "number or non-empty list of numbers"),
])
def test_a_type_is_said_in_words_by_one_function(annotation: typing.Any, words: str) -> None:
    assert type_name(annotation) == words


def test_a_suite_table_and_a_records_suite_settings_are_read_by_the_same_checker() -> None:
    """The hostile suite's `[suite]` table: a misspelt key names the nearest, a value of the wrong type is refused
    (it was not checked before); its record keeps every setting but the quick run's designs, and reads back."""
    table = load_suite().table(quick=True)
    where = Path("cases.toml")
    with pytest.raises(RecordShapeError, match=r"^cases\.toml: \[suite\]: unknown key `bund` \(did you mean `bound`"):
        typed_settings(HostileSettings, {**table, "bund": 2.0}, where)
    with pytest.raises(RecordShapeError, match=r"^cases\.toml: \[suite\]\.jobs: expected integer, found str 'two'"):
        typed_settings(HostileSettings, {**table, "jobs": "two"}, where)
    quick = typed_settings(HostileSettings, table, where)
    assert quick.designs and "designs" not in quick.to_json()
    assert HostileSettings.from_json(quick.to_json()) == dataclasses.replace(quick, designs=None)
    with pytest.raises(RecordShapeError, match=r"unknown key `emfile_hld` \(did you mean `emfile_hold`\?\)"):
        HostileSettings.from_json({**quick.to_json(), "emfile_hld": 1.0})
