"""The tests' tree mirrors what they test (issue 30, item 5): a folder per harness layer, one for the servers, one
for the site, one for the project's own machinery; a test of a harness layer imports that layer."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from harness.model.paths import REPO_ROOT

TESTS = REPO_ROOT / "tests"
LAYERS = sorted(path.name for path in (REPO_ROOT / "scripts" / "harness").iterdir()
                if path.is_dir() and (path / "__init__.py").exists())
# Where a test file may live, and what it tests there.
FOLDERS = {
    "harness": "the harness as a whole: its layers, its suite shape, bad input and interruption",
    **{f"harness/{layer}": f"scripts/harness/{layer}/" for layer in LAYERS},
    "servers": "servers/: the designs as programs, and the server files as teaching text",
    "site": "docs/ and the built site: pages, tables, code blocks, the browser",
    "project": "the project's machinery: the test tiers, the workflows, the benchmark refresh script",
}
# Tests of a harness layer that read it without importing it, and why.
READ_NOT_IMPORTED = {
    "test_standalone_copies.py": "the standalone load clients (scripts/*.py) carry copies of harness helpers; "
                                 "it compares the source texts",
}


def files_of_tests() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def test_every_test_file_is_in_a_folder_that_names_what_it_tests() -> None:
    misplaced = [str(path.relative_to(TESTS)) for path in files_of_tests()
                 if str(path.parent.relative_to(TESTS)) not in FOLDERS]
    assert misplaced == [], f"put each in one of: {', '.join(FOLDERS)}"


def test_every_folder_of_the_tree_holds_tests() -> None:
    """A layer added to scripts/harness/ gets its folder here too; an emptied folder goes."""
    empty = [folder for folder in FOLDERS if not list((TESTS / folder).glob("test_*.py"))]
    assert empty == []


def test_test_file_names_are_unique_across_the_folders() -> None:
    """pytest imports each test file by its name (no packages here), and tests/tiers.py lists files by name."""
    repeated = [name for name, count in Counter(path.name for path in files_of_tests()).items() if count > 1]
    assert repeated == []


def test_a_test_of_a_harness_layer_imports_that_layer() -> None:
    """bench.py counts for the suites: it is how a suite is run."""
    strays = []
    for layer in LAYERS:
        for path in sorted((TESTS / "harness" / layer).glob("test_*.py")):
            modules = imported_modules(path)
            if path.name in READ_NOT_IMPORTED or (layer == "suites" and "bench" in modules):
                continue
            if not any(module == f"harness.{layer}" or module.startswith(f"harness.{layer}.") for module in modules):
                strays.append(f"{path.relative_to(TESTS)} imports no harness.{layer} module")
    assert strays == []
