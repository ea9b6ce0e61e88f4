"""The quick run of every scenario stays short enough to be run (issue 31, finding 11).

`bench.py run --quick` (`make bench-quick`) checks that every scenario still starts, measures, records and renders.
It was brought to 150 s once and grew back to over 300 as scenarios were added, each quick table costing little on
its own. The plan (plan.scenario_cells: every cell at its time limit, its warm-up and a second of start-up, the
estimate `bench.py run` prints before it starts) is summed here from the catalogue alone, with no process, and must
stay under plan.QUICK_RUN_BUDGET_SECONDS; plan.py says how the quick tables keep it there.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from harness.model.catalogue import Catalogue, load_catalogue
from harness.model.paths import REPO_ROOT
from harness.suites import plan

CATALOGUE_DIR = REPO_ROOT / "scripts" / "catalogue"


def quick_plan(catalogue: Catalogue) -> dict[str, float]:
    """Planned seconds of each scenario a quick run of every scenario runs."""
    return {scenario.id: sum(plan.scenario_cells(catalogue, scenario, None, quick=True, repeat=None))
            for scenario in plan.every_scenario(catalogue, quick=True)}


def test_the_quick_run_of_every_scenario_is_planned_under_its_budget() -> None:
    seconds = quick_plan(load_catalogue())
    largest = sorted(seconds.items(), key=lambda item: -item[1])[:8]
    assert sum(seconds.values()) <= plan.QUICK_RUN_BUDGET_SECONDS, (
        f"the quick run of every scenario is planned at {sum(seconds.values()):.0f} s over {len(seconds)} scenarios, "
        f"more than {plan.QUICK_RUN_BUDGET_SECONDS:.0f} s; the largest: "
        + ", ".join(f"{scenario_id} {planned:.0f} s" for scenario_id, planned in largest))


def test_a_slower_quick_table_breaks_the_budget(tmp_path: Path) -> None:
    # async-101's quick table as it was: its 60 s cap for each of its four designs.
    directory = tmp_path / "catalogue"
    shutil.copytree(CATALOGUE_DIR, directory)
    path = directory / "01-async-101.toml"
    text = path.read_text(encoding="utf-8")
    quick = text.index("[scenario.quick]")
    path.write_text(text[:quick] + text[quick:].replace("\ntime_limit = 2", "\ntime_limit = 60", 1)
                    .replace('designs = ["async-101-naive-sync", "async-101-naive-async"]\n', "", 1),
                    encoding="utf-8")
    seconds = quick_plan(load_catalogue(directory))
    assert seconds["async-101"] == 4 * (60 + plan.CELL_OVERHEAD_SECONDS)
    assert sum(seconds.values()) > plan.QUICK_RUN_BUDGET_SECONDS


def test_a_covered_scenario_is_left_out_of_a_quick_run_of_every_scenario_only() -> None:
    catalogue = load_catalogue()
    covered = [scenario.id for scenario in catalogue.scenarios.values() if scenario.quick.covered_by]
    assert "pipelining-depth-16" in covered
    quick = {scenario.id for scenario in plan.every_scenario(catalogue, quick=True)}
    full = {scenario.id for scenario in plan.every_scenario(catalogue, quick=False)}
    assert full - quick == set(covered)
    for scenario_id in covered:  # each stand-in runs in the quick run, with the same tool
        stand_in = catalogue.scenario(catalogue.scenario(scenario_id).quick.covered_by or "")
        assert stand_in.id in quick and stand_in.tool == catalogue.scenario(scenario_id).tool


@pytest.mark.parametrize(("covered_by", "expected"), [
    ('"pipelining-depth-64"', "quick.covered_by = 'pipelining-depth-64', which is not in the catalogue"),
    ('"pipelining-depth-16"', "which a quick run of every scenario leaves out too"),
    ('"keep-alive"', "which runs hey, not wrk: it cannot stand for it"),
    ('""', "quick.covered_by: expected the id of the scenario whose quick run stands for this one, found ''"),
])
def test_a_covered_by_that_names_no_stand_in_is_refused(tmp_path: Path, covered_by: str, expected: str) -> None:
    directory = tmp_path / "catalogue"
    shutil.copytree(CATALOGUE_DIR, directory)
    path = directory / "11-keep-alive-scenarios.toml"
    old = 'covered_by = "pipelining-depth-4"'
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 2
    path.write_text(text.replace(old, f"covered_by = {covered_by}", 1), encoding="utf-8")
    with pytest.raises(ValueError, match="covered_by") as refused:
        load_catalogue(directory)
    assert expected in str(refused.value)
