"""Measure scenarios that differ in one setting round robin, so slow drift of the machine touches them alike.

A scenario with `interleave = "NAME"` belongs to the group NAME (the Python versions: the same
designs and load, one scenario per CPython). Run together (`bench.py run --scenario NAME`, or
`bench.py run` for every scenario), the group is measured in rounds: in each round, every scenario
in catalogue order (3.11, 3.12, 3.13, then again), every design of it once. Run one after another,
a version measured last would carry whatever the machine did in the last minutes; round robin
spreads that over every version alike. The tool's ceiling is measured once for scenarios whose
settings differ only in `python` (a ceiling design is not a Python server) and kept in each of
their records. Each scenario still writes its own record, atomically, after the last round.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.clients.tools import require_tool
from harness.model.catalogue import Catalogue, Scenario
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.settings import ScenarioSettings
from harness.suites import plan, runner
from harness.suites.runner import DesignOutcome, measure_design_once, scenario_record, write_record
from harness.system import ports, processes
from harness.system.environment import describe_machine, utc_now


def groups(scenarios: list[Scenario]) -> list[list[Scenario]]:
    """The scenarios as they will run: each interleave group together (where its first member was), others alone."""
    ordered: list[list[Scenario]] = []
    by_name: dict[str, list[Scenario]] = {}
    for scenario in scenarios:
        name = scenario.settings(quick=False).interleave
        if name is None:
            ordered.append([scenario])
        elif name in by_name:
            by_name[name].append(scenario)
        else:
            by_name[name] = [scenario]
            ordered.append(by_name[name])
    return ordered


def members(catalogue: Catalogue, name: str) -> list[Scenario]:
    """Every scenario of interleave group `name`, in catalogue order (none if no scenario names it)."""
    return [scenario for scenario in catalogue.scenarios.values() if scenario.settings(quick=False).interleave == name]


def _ceiling_key(settings: ScenarioSettings, tool: str) -> str:
    """Settings that decide a ceiling's run: the same for scenarios that differ only in `python`."""
    return tool + json.dumps(dataclasses.asdict(dataclasses.replace(settings, python=None)), sort_keys=True)


def run_group(catalogue: Catalogue, scenarios: list[Scenario], quick: bool, repeat: int | None,
              out_dir: Path | None, progress: plan.Progress) -> list[tuple[Path, ScenarioRecord]]:
    """Measure a group round robin (see the module's docstring); write and return each scenario's record."""
    runs = []
    for scenario in scenarios:
        settings = plan.scenario_settings(scenario, quick, repeat)
        designs = [catalogue.design(name) for name in scenario.design_names(quick)]
        runs.append((scenario, settings, designs, {design.name: DesignOutcome(design) for design in designs}))
    every_cpu = {settings.server_cpus == "all" for _, settings, _, _ in runs}
    if len(every_cpu) > 1:  # one pinning for the whole group, as one machine set-up for every round
        raise ValueError(f"the scenarios of interleave group {[scenario.id for scenario in scenarios]} disagree on "
                         "server_cpus: a group is measured with one pinning")
    pinning = processes.cpu_pinning(server_on_every_cpu=every_cpu == {True})
    started = utc_now()
    ceilings: dict[str, DesignOutcome] = {}
    for scenario, settings, _, _ in runs:
        key = _ceiling_key(settings, scenario.tool)
        if settings.ceiling and key not in ceilings:
            ceilings[key] = DesignOutcome(catalogue.design(settings.ceiling))
            if not quick:  # the same drain as every design's cell (runner.measure_all says why)
                ports.wait_for_time_wait_drain()
            measure_design_once(ceilings[key], scenario,
                                dataclasses.replace(settings, delay=0.0, work=0, python=None), 0,
                                require_tool(scenario.tool), pinning, progress)
        elif settings.ceiling:
            progress.skip(len(plan.levels(settings)))  # planned for every scenario, measured once
    for repetition in range(max(settings.repeat for _, settings, _, _ in runs)):
        for scenario, settings, designs, outcomes in runs:
            if repetition >= settings.repeat:
                continue
            for design in designs if repetition % 2 == 0 else list(reversed(designs)):
                outcome = outcomes[design.name]
                for size in plan.sizes(settings, design):  # [None] unless a sizing sweep restarts it per count
                    if outcome.status != "ok":
                        progress.skip(len(plan.levels(settings)))
                        continue
                    if not quick:
                        ports.wait_for_time_wait_drain()
                    cells_before = progress.done
                    runner.measure_sized(outcome, size, scenario, plan.design_settings(settings, design), repetition,
                                  require_tool(scenario.tool), pinning, progress, None)
                    progress.skip(len(plan.levels(settings)) - (progress.done - cells_before))
    written = []
    for scenario, settings, designs, outcomes in runs:
        tool = require_tool(scenario.tool)
        environment = describe_machine(pinning, {tool.name: tool.version()})
        ceiling = ceilings.get(_ceiling_key(settings, scenario.tool))
        # One ceiling run for every scenario of the same settings: under the first one's id.
        measured_in = None if ceiling is None else next(other.id for other, other_settings, _, _ in runs
                                                        if _ceiling_key(other_settings, other.tool)
                                                        == _ceiling_key(settings, scenario.tool))
        record = scenario_record(scenario, quick, settings, environment, started,
                                 [outcomes[design.name] for design in designs], ceiling, measured_in,
                                 interleaved_with=[other.id for other, _, _, _ in runs if other.id != scenario.id])
        written.append((write_record(record, quick or repeat is not None, out_dir), record))
    return written


def measure_group(catalogue: Catalogue, plans: list[runner.Plan]) -> list[tuple[Path, ScenarioRecord]]:
    """The scenario suite's plans of one interleave group, measured together round robin (run_group): each record
    written atomically, with its path. The plans share quick, repeat, out and progress (the first one's are used)."""
    first = plans[0]
    return run_group(catalogue, [each.scenario for each in plans], first.quick, first.repeat, first.out,
                     first.progress or plan.Progress([]))
