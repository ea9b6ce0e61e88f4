"""The harness's shape: layers as folders with imports pointing down, one launcher, one renderer registry.

scripts/harness/ is model/ (catalogue, settings, records), system/ (processes, ports, resources,
the launcher), clients/ (probes, load tools), suites/ (plan, measure, write a record) and render/
(records in, pages out). Each check here is a function over a tree of files, run on the real one
and on a small broken one, so each is shown to fail when its rule is broken.
"""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from harness.model.catalogue import DEFAULT_COMMAND, Catalogue, load_catalogue
from harness.model.paths import REPO_ROOT
from harness.model.settings import TOOL_READS
from harness.render import site
from harness.suites import balance, idle
from harness.system import launcher, processes

HARNESS = REPO_ROOT / "scripts" / "harness"
# What each layer may import (itself included). render reads records: it needs the model alone.
ALLOWED = {
    "model": {"model"},
    "system": {"model", "system"},
    "clients": {"model", "system", "clients"},
    "suites": {"model", "system", "clients", "suites"},
    "render": {"model", "render"},
}
# Starting a design is the launcher's alone: these calls anywhere else build or start one by hand.
LAUNCHING_CALLS = {"running_server", "server_command"}
LAUNCHER = Path("system") / "launcher.py"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) for every import in a file, `from harness.x import y` giving harness.x.y too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def layer_violations(root: Path) -> list[str]:
    """Imports from a layer above (or beside) a module's own, and modules outside every layer."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative == Path("__init__.py"):
            continue
        layer = relative.parts[0]
        if layer not in ALLOWED:
            problems.append(f"{relative}: not in a layer ({', '.join(ALLOWED)})")
            continue
        for line, module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "harness" and len(parts) > 1 and parts[1] in ALLOWED and parts[1] not in ALLOWED[layer]:
                problems.append(f"{relative}:{line}: the {layer} layer imports {module} (from {parts[1]})")
    return problems


def launches_outside_the_launcher(root: Path) -> list[str]:
    """Calls that build or start a design's command anywhere but system/launcher.py."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative == LAUNCHER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in LAUNCHING_CALLS:
                    problems.append(f"{relative}:{node.lineno}: calls {name}(); start designs through the launcher")
    return problems


def test_every_harness_module_imports_only_its_own_layer_and_those_below() -> None:
    assert layer_violations(HARNESS) == []
    assert {path.name for path in HARNESS.iterdir() if path.suffix == ".py"} == {"__init__.py"}  # nothing loose


def test_the_layer_check_fails_on_an_upward_import(tmp_path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "records.py").write_text("from harness.render import site\n")
    (tmp_path / "render").mkdir()
    (tmp_path / "render" / "tables.py").write_text("from harness.suites.runner import run\nfrom harness.model import x\n")
    (tmp_path / "loose.py").write_text("")
    assert layer_violations(tmp_path) == [
        "loose.py: not in a layer (model, system, clients, suites, render)",
        "model/records.py:1: the model layer imports harness.render (from render)",
        "model/records.py:1: the model layer imports harness.render.site (from render)",
        "render/tables.py:1: the render layer imports harness.suites.runner (from suites)",
        "render/tables.py:1: the render layer imports harness.suites.runner.run (from suites)",
    ]


def test_scripts_outside_the_harness_do_not_touch_sys_path_except_the_entry_point() -> None:
    touching = sorted(str(path.relative_to(REPO_ROOT)) for path in (REPO_ROOT / "scripts").rglob("*.py")
                      if "sys.path" in path.read_text(encoding="utf-8"))
    assert touching == ["scripts/bench.py"]


FRESH_IMPORTS = """
import importlib, sys
failed = []
for name in sys.argv[1:]:
    for loaded in [module for module in sys.modules if module == "harness" or module.startswith("harness.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ImportError as error:
        failed.append(f"{name}: {error}")
print("\\n".join(failed))
"""


def test_every_harness_module_imports_first_on_its_own() -> None:
    """A module imported before any other harness module (as a test file or a notebook may) loads: no import cycle
    hides behind the order other imports happen to come in (harness.model.deployment_plan once did not)."""
    names = ["harness." + ".".join(path.relative_to(HARNESS).with_suffix("").parts).removesuffix(".__init__")
             for path in sorted(HARNESS.rglob("*.py")) if "__pycache__" not in path.parts]
    result = subprocess.run([sys.executable, "-c", FRESH_IMPORTS, *names], cwd=REPO_ROOT / "scripts",
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "", result.stdout


def test_no_two_harness_modules_share_a_name() -> None:
    names = [path.stem for path in (REPO_ROOT / "scripts").rglob("*.py") if path.stem != "__init__"]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_only_the_launcher_builds_or_starts_a_design() -> None:
    assert launches_outside_the_launcher(HARNESS) == []
    bench = REPO_ROOT / "scripts" / "bench.py"
    assert "running_server(" not in bench.read_text() and "server_command(" not in bench.read_text()


def test_the_launcher_check_fails_on_a_suite_that_starts_a_server_itself(tmp_path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "sizing.py").write_text(
        "def measure(design, port):\n"
        "    command = launcher.server_command(design, port, 0.0, WORK)\n"
        "    with processes.running_server(command, port, WORK) as server:\n"
        "        return server\n")
    (tmp_path / "system").mkdir()
    (tmp_path / "system" / "launcher.py").write_text("def f():\n    return server_command(1)\n")  # allowed there
    assert launches_outside_the_launcher(tmp_path) == [
        "suites/sizing.py:2: calls server_command(); start designs through the launcher",
        "suites/sizing.py:3: calls running_server(); start designs through the launcher",
    ]


def test_every_load_tool_adapter_has_its_settings_in_the_model() -> None:
    from harness.clients.tools import TOOLS

    assert set(TOOLS) == set(TOOL_READS)
    assert all(tool.reads is TOOL_READS[name] for name, tool in TOOLS.items())


def test_the_renderer_registry_lists_each_renderer_once_and_makes_every_generated_file(
        rendered: dict[Path, str]) -> None:
    assert len(site.RENDERERS) == len(set(site.RENDERERS))
    # `rendered` is the registry's whole render (expected_files refuses a file claimed by two renderers: the test
    # below); the committed generated files (render --check keeps them equal to it) are exactly what it made.
    assert set(rendered) == site.generated_paths(site.GENERATED_DIR)


def test_a_file_claimed_by_two_renderers_is_refused() -> None:
    with pytest.raises(RuntimeError, match="free_threaded_files renders files another renderer already made"):
        site.expected_files(renderers=[site.free_threaded_files, site.free_threaded_files])


# --- Suites honour what a design declares about stopping -------------------------------------------------

STOP_FIXTURE = "tests/fixtures/servers/stop_through_main_process.py"


def stop_fixture_catalogue(main_process_only: bool) -> Catalogue:
    """The real catalogue plus one design that exits 1 when its workers hear the stop signal directly."""
    catalogue = load_catalogue()
    base = catalogue.design("event-loop-workers")
    fixture = dataclasses.replace(base, name="stop-through-main-process", file=STOP_FIXTURE,
                                  command=list(DEFAULT_COMMAND), stop_signals=["SIGTERM"],
                                  stop_main_process_only=main_process_only, config_template=None)
    return Catalogue({**catalogue.designs, fixture.name: fixture}, catalogue.scenarios)


def test_the_fixture_fails_when_its_whole_group_is_signalled(tmp_path) -> None:
    """The teeth of the two tests below: signalled as a group, the fixture exits 1."""
    design = stop_fixture_catalogue(main_process_only=False).design("stop-through-main-process")
    with launcher.running_design(design, processes.free_port(), 0.0, tmp_path,
                                 extra_arguments=["--workers", "2"]) as server:
        pass
    assert server.exit_code == 1, server.stderr_tail()
    assert "Unexpected exit from worker" in server.stderr_tail()


def test_the_balance_suite_stops_a_design_through_its_main_process(tmp_path) -> None:
    catalogue = stop_fixture_catalogue(main_process_only=True)
    row = balance.measure(catalogue, "stop-through-main-process", 2, 40, tmp_path,
                          processes.NO_PINNING)
    assert row.exit_code == 0, (tmp_path / "stop-through-main-process-2" / "server.stderr").read_text()
    assert len(row.served) == 2  # both workers reported: each was told by the main process
    assert row.requests_ok == 40


def test_the_idle_suite_stops_a_design_through_its_main_process(tmp_path) -> None:
    catalogue = stop_fixture_catalogue(main_process_only=True)
    record = idle.measure(catalogue, "stop-through-main-process", 5, 0.3, [], tmp_path)
    assert record.server_exit_code == 0, (tmp_path / "server.stderr").read_text()
    assert record.probe.failed == 0


def test_bench_serve_stops_a_design_through_its_main_process(tmp_path) -> None:
    design = stop_fixture_catalogue(main_process_only=True).design("stop-through-main-process")
    port = processes.free_port()
    process = launcher.started_design(design, port, 0.0, tmp_path)
    try:
        processes.wait_until_listening(process, port, tmp_path / "no-log-in-the-foreground")
    finally:
        status = launcher.stop_design(process, design)
    assert status == 0


def test_the_generated_files_header_is_defined_once() -> None:
    """One owner for the line every generated file opens with (it was defined in ten render modules, two wordings)."""
    marker = "generated by `python scripts/bench.py render`"
    owners = [path.relative_to(REPO_ROOT).as_posix() for path in (REPO_ROOT / "scripts").rglob("*.py")
              if marker in path.read_text(encoding="utf-8")]
    assert owners == ["scripts/harness/render/generated_header.py"]
