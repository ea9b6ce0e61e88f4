"""bench.py imports a suite or a renderer only for the subcommand that uses it (issue 30, item 5).

The tests and the pages' code blocks start bench.py a couple of hundred times; importing every suite and
renderer at start-up cost about 0.5 CPU-seconds a call. Each case here starts a fresh interpreter (the modules a
pytest process has loaded already would hide an eager import) and reads which harness modules one command loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from harness.model.paths import REPO_ROOT

# Runs bench.main(ARGS) (a --help's exit caught; CHANGE run first), its output dropped, then prints the harness
# modules loaded.
LOADED = """
import contextlib, io, json, sys
sys.path.insert(0, "scripts")
import bench
exec(sys.argv[2])
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        bench.main(json.loads(sys.argv[1]))
    except SystemExit:
        pass
print(json.dumps(sorted(name for name in sys.modules if name.startswith("harness."))))
"""
HEAVY = ("harness.suites", "harness.render", "harness.clients")


def loaded_by(*args: str, change: str = "") -> set[str]:
    """The harness modules loaded by `bench.py ARGS` in a fresh interpreter (after `change`, Python run on bench)."""
    result = subprocess.run([sys.executable, "-c", LOADED, json.dumps(list(args)), change], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=60, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


def heavy(modules: set[str]) -> set[str]:
    return {name for name in modules if name.startswith(HEAVY)}


@pytest.mark.parametrize("args", [["--help"], ["list"], ["scenarios", "--json"], ["run", "--help"],
                                  ["check", "--help"], ["serve", "--help"], ["render", "--help"]])
def test_the_command_line_and_the_catalogue_alone_import_no_suite_renderer_or_client(args: list[str]) -> None:
    assert heavy(loaded_by(*args)) == set()


def test_a_subcommand_imports_its_own_suite_and_no_other() -> None:
    loaded = heavy(loaded_by("how-fast", "steps", "--help"))  # its builder names the chains and the references
    assert "harness.suites.how_fast" in loaded
    assert not {name for name in loaded if name.startswith(("harness.suites.hostile", "harness.suites.conformance",
                                                            "harness.suites.streaming", "harness.render.site"))}


def test_the_check_sees_a_builder_that_imports_a_suite() -> None:
    """The check can fail: `list` whose argument builder imports a suite loads that suite."""
    change = ("import importlib; bench.SUBCOMMANDS['list'] = bench.SUBCOMMANDS['list']._replace("
              "arguments=lambda parser: importlib.import_module('harness.suites.balance'))")
    assert "harness.suites.balance" in heavy(loaded_by("list", change=change))


def test_every_bad_input_error_is_a_class_its_module_defines() -> None:
    """main() catches BAD_INPUT_ERRORS by module and name: a renamed class would turn bad input (2) into a bug (3)."""
    import importlib

    import bench

    for module, names in bench.BAD_INPUT_ERRORS.items():
        for name in names:
            error = getattr(importlib.import_module(module), name, None)
            assert isinstance(error, type) and issubclass(error, Exception), f"{module}.{name}"
