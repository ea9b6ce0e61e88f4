"""The `make check` tier (tests/tiers.py): its list names real tests, and its promise (no process) is enforced."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest
from harness.model.paths import REPO_ROOT

from tests import tiers  # the module the plugin runs as (conftest.py's pytest_plugins)


def test_a_check_tier_test_cannot_start_a_process() -> None:
    """This file is in the tier: each way of starting a process raises here, in `make check` and `make test` alike."""
    with pytest.raises(tiers.StartedAProcess, match="move it out of the tier"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    with pytest.raises(tiers.StartedAProcess):
        os.system("true")
    with pytest.raises(tiers.StartedAProcess):
        os.fork()


def test_every_listed_file_and_test_exists() -> None:
    """A renamed or deleted test leaves no dead entry behind (the tier would shrink without anyone noticing)."""
    test_files = {path.name: path for path in (REPO_ROOT / "tests").rglob("test_*.py")}
    missing = [name for name in tiers.CHECK_FILES if name not in test_files]
    defined: dict[str, set[str]] = {}
    for node_id in tiers.CHECK_TESTS:
        path, function = node_id.split("::")
        if path not in defined:
            source = test_files.get(path)
            tree = ast.parse(source.read_text(encoding="utf-8")) if source else ast.Module(body=[])
            defined[path] = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        if function not in defined[path]:
            missing.append(node_id)
    assert missing == []


def test_a_listed_file_puts_its_tests_in_the_tier(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker(tiers.CHECK) is not None


def test_make_test_runs_every_test_marked_alone() -> None:
    """`make test` runs the `alone` tests from the files its Makefile line names, not by collecting every test."""
    (line,) = [line for line in (REPO_ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
               if "-m alone" in line]
    named = {REPO_ROOT / word for word in line.split() if word.startswith("tests/")}
    marked = {path for path in (REPO_ROOT / "tests").rglob("test_*.py")
              if re.search(r"^\s*@pytest\.mark\.alone\b", path.read_text(encoding="utf-8"), re.MULTILINE)}
    assert marked and marked <= named, f"add {sorted(str(path) for path in marked - named)} to the Makefile's line"


def test_the_tests_conftest_hands_out_first_exist() -> None:
    """A renamed link check would silently stop going first (conftest.py's FIRST names tests by function)."""
    (first,) = [ast.literal_eval(node.value) for node in ast.parse((REPO_ROOT / "conftest.py").read_text()).body
                if isinstance(node, ast.Assign) and [getattr(target, "id", "") for target in node.targets] == ["FIRST"]]
    defined = {node.name for path in (REPO_ROOT / "tests").rglob("test_*.py")
               for node in ast.parse(path.read_text(encoding="utf-8")).body if isinstance(node, ast.FunctionDef)}
    assert first and first <= defined
