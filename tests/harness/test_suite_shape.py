"""One suite shape, one table of subcommands, and the docstrings that list them (issue 30, item 1).

bench.py's SUBCOMMANDS is the one table (name -> help, parser builder, handler); its docstring's usage
lines, harness/__init__.py's list and suites/__init__.py's table of suites must name what the table
holds; every suite module has a frozen `Plan` and `measure_plan(catalogue, plan) -> (path, record)`;
and no `argparse` reaches below bench.py, except the clients that are programs of their own (a
subprocess with its own command line). Starts no process.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from harness.model.paths import REPO_ROOT

HARNESS = REPO_ROOT / "scripts" / "harness"
# Not suites: they measure nothing (or only check one design) and write no record.
NOT_SUITES = {"list", "scenarios", "serve", "check", "render", "new-design"}
# Programs of their own, run as subprocesses: their command line is theirs, parsed in their main().
OWN_PROGRAMS = {"clients/sse_client.py", "clients/restart_probe.py", "clients/idle_race.py", "system/delay_proxy.py"}


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_for_shape", REPO_ROOT / "scripts" / "bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


BENCH = load_bench()


def usage_names(docstring: str) -> list[str]:
    """The subcommands bench.py's docstring shows, in order: each `python scripts/bench.py NAME` line."""
    return re.findall(r"^\s+python scripts/bench\.py ([a-z-]+)", docstring, re.M)


def harness_names(docstring: str) -> list[str]:
    """The subcommands harness/__init__.py's drawing lists, between 'subcommands (' and ')'."""
    found = re.search(r"subcommands \(([^)]*)\)", docstring)
    assert found, "harness/__init__.py no longer lists the subcommands"
    return [name.strip(" │\n") for name in re.split(r",\s*(?:│\s*)?", found.group(1).replace("\n", " "))]


def suite_lines(docstring: str) -> dict[str, str]:
    """suites/__init__.py's table: subcommand -> the module under harness.suites that measures it."""
    table = docstring.split("The suites, each with its subcommand:")[1].split("tests/harness/test_suite_shape.py")[0]
    return dict(re.findall(r"^\s{4}([a-z-]+)\s+([a-z_]+)\s", table, re.M))


def test_the_docstring_lists_every_subcommand_of_the_table_in_its_order() -> None:
    assert usage_names(BENCH.__doc__) == list(BENCH.SUBCOMMANDS)


def test_the_harness_docstring_lists_every_subcommand() -> None:
    assert harness_names(sys.modules["harness"].__doc__ or "") == list(BENCH.SUBCOMMANDS)


def test_the_suites_docstring_names_every_suite_subcommand_and_its_module() -> None:
    suites = importlib.import_module("harness.suites")
    assert set(suite_lines(suites.__doc__ or "")) == set(BENCH.SUBCOMMANDS) - NOT_SUITES


@pytest.mark.parametrize("subcommand", sorted(set(BENCH.SUBCOMMANDS) - NOT_SUITES))
def test_every_suite_has_the_one_shape(subcommand: str) -> None:
    name = suite_lines(importlib.import_module("harness.suites").__doc__ or "")[subcommand]
    module = importlib.import_module(f"harness.suites.{name}")
    plan = getattr(module, "Plan", None)
    assert dataclasses.is_dataclass(plan) and plan.__dataclass_params__.frozen, f"{name}.Plan: a frozen dataclass"
    measure = getattr(module, "measure_plan", None)
    assert callable(measure), f"{name} has no measure_plan"
    signature = inspect.signature(measure)
    assert list(signature.parameters) == ["catalogue", "plan"], f"{name}.measure_plan{signature}"
    assert str(signature.parameters["plan"].annotation) == "Plan"
    assert str(signature.return_annotation).startswith("tuple[Path, "), f"{name}.measure_plan{signature}"


def test_no_argparse_below_bench_py() -> None:
    below = sorted(str(path.relative_to(HARNESS)) for path in HARNESS.rglob("*.py")
                   if re.search(r"^\s*(import argparse|from argparse)", path.read_text(encoding="utf-8"), re.M))
    assert below == sorted(OWN_PROGRAMS)
    for program in OWN_PROGRAMS:  # theirs stays in their main(): nothing else takes a Namespace
        text = (HARNESS / program).read_text(encoding="utf-8")
        assert "Namespace" not in text, program


def test_the_table_is_what_the_parser_offers() -> None:
    parser = BENCH.build_parser()
    for name, subcommand in BENCH.SUBCOMMANDS.items():
        required = {"serve": ["x"], "check": ["x"], "idle": ["x"], "new-design": ["x", "--grows-from", "y"],
                    "how-fast": ["steps"], "deployment": ["race"], "recipe": ["check"]}.get(name, [])
        assert parser.parse_args([name, *required]).handler is subcommand.handler


def test_a_shape_guard_fails_on_a_suite_without_the_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard can fail: a suite whose measure_plan takes its own arguments is refused."""
    import harness.suites.balance as balance

    def measure_plan(catalogue: object, quick: bool, out: Path | None) -> Path:
        raise AssertionError("never called")

    monkeypatch.setattr(balance, "measure_plan", measure_plan)
    with pytest.raises(AssertionError, match="measure_plan"):
        test_every_suite_has_the_one_shape("balance")
