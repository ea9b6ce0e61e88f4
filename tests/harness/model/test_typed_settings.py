"""Settings are read typed: no code in scripts/ reads a setting by a string key (issue 19, item 4).

A scenario's settings are a ScenarioSettings (model/settings.py), the hostile and conformance
suites' their own dataclasses, and every record's stored settings are read back typed with the record
(model/records/: ScenarioRecord.settings is a ScenarioSettings). This test walks every module's syntax tree and fails on
`X["key"]` or `X.get("key")` where X is named for settings (`settings`, `level_settings`,
`target.settings`, `record["settings"]`): the kind of read that let a misspelt key read None.
"""

from __future__ import annotations

import ast

from harness.model.paths import REPO_ROOT

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
