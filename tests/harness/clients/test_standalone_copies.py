"""The standalone load clients carry exact copies of the harness's helpers, and the copies never drift.

scripts/http_load.py and scripts/echo_client.py run as subprocesses (the tool adapters start
them) and are meant to be copied and run alone, so they import nothing from the harness: they
carry copies of its percentile, its latency summary and its open-files helper instead. These
tests hold each copy to the harness's text, name by name (a constant by its value, since its
comment may speak of the file's own sockets).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from harness.model.paths import REPO_ROOT
from python_source import top_level_names

STANDALONE = ["scripts/http_load.py", "scripts/echo_client.py"]
# The harness module that holds the one true copy -> the names each standalone file copies from it.
SHARED = {"scripts/harness/model/stats.py": ["percentile", "latency_summary"],
          "scripts/harness/system/open_files.py": ["FILES_MARGIN", "OpenFilesLimitError", "raise_open_files_limit"]}
COPIES = [(file, module, name) for file in STANDALONE for module, names in SHARED.items() for name in names]
# The probes the deployment and restart suites run as subprocesses: the restart probe reads answers as the race's does.
PROBES = ["scripts/harness/clients/idle_race.py", "scripts/harness/clients/restart_probe.py"]
COPIES.append(("scripts/harness/clients/restart_probe.py", "scripts/harness/clients/idle_race.py", "read_answer"))


def definitions(text: str) -> dict[str, str]:
    """name -> comparable text: a function or class as written, a constant as its value (comments may differ)."""
    found = {}
    for name, source in top_level_names(ast.parse(text), text).items():
        node = ast.parse(source).body[0]
        found[name] = ast.unparse(node.value) if isinstance(node, ast.Assign) else source
    return found


def read(path: str) -> str:
    return (REPO_ROOT / path).read_text(encoding="utf-8")


@pytest.mark.parametrize(("copy_file", "shared_file", "name"), COPIES,
                         ids=[f"{Path(file).stem}-{name}" for file, _, name in COPIES])
def test_each_standalone_copy_is_the_harness_text(copy_file: str, shared_file: str, name: str) -> None:
    copy = definitions(read(copy_file)).get(name)
    assert copy is not None, f"{copy_file} has no {name}: copy it from {shared_file}"
    assert copy == definitions(read(shared_file))[name], \
        f"{name} in {copy_file} differs from {shared_file}: change the harness's, then copy it over"


@pytest.mark.parametrize("file", STANDALONE + PROBES)
def test_a_standalone_file_imports_nothing_from_the_harness(file: str) -> None:
    tree = ast.parse(read(file))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not [module for module in imported if module.split(".")[0] == "harness"]


def test_an_edited_copy_is_caught() -> None:
    """The teeth: a one-character change inside a copied function shows."""
    text = read("scripts/http_load.py")
    edited = text.replace("percent / 100 * len(ordered)", "percent / 101 * len(ordered)")
    assert edited != text
    assert definitions(edited)["percentile"] != definitions(read("scripts/harness/model/stats.py"))["percentile"]
    assert definitions(edited)["latency_summary"] == definitions(text)["latency_summary"]
