"""The Python versions run round robin (issue 20, finding 9): every version once, then again, one ceiling per workload.

The measurement itself is replaced by a recorder (no server starts): what is checked is the order
the cells run in, which scenario's record each run lands in, and what each record says about it.
"""

from __future__ import annotations

import dataclasses

import json
from pathlib import Path
from typing import Any

import pytest
from harness.model.records.scenario_record import Run
from harness.model.settings import ScenarioSettings
from harness.suites import interleave, plan, runner

from conftest import CATALOGUE


def test_the_python_versions_form_one_group_in_catalogue_order() -> None:
    members = [scenario.id for scenario in interleave.members(CATALOGUE, "python-versions")]
    assert members == [f"python-3.{minor}-{workload}" for workload in ("hello", "cpu") for minor in (11, 12, 13)]
    grouped = [group for group in interleave.groups(list(CATALOGUE.scenarios.values())) if len(group) > 1]
    assert [[scenario.id for scenario in group] for group in grouped][0] == members
    # The other groups: the free-threaded pairs, each one workload on a build with the GIL and one without.
    for group in grouped[1:]:
        settings = [scenario.settings(quick=False) for scenario in group]
        assert len(group) == 2 and settings[1].python == settings[0].python + "t", [s.id for s in group]
        assert dataclasses.replace(settings[0], python=None) == dataclasses.replace(settings[1], python=None)
    for scenario in interleave.members(CATALOGUE, "python-versions"):
        assert scenario.settings(quick=False).time_limit >= 5  # windows of at least 5 s


def test_a_group_runs_round_robin_and_measures_each_ceiling_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[tuple[str, str, int]] = []

    def measure(outcome: Any, scenario: Any, settings: ScenarioSettings, repetition: int, *args: Any,
                **kwargs: Any) -> None:
        order.append((scenario.id, outcome.design.name, repetition))
        # The interpreter the run was asked for, where a real tool's run keeps its command.
        outcome.runs.append(Run(tool="recorder", concurrency=settings.concurrency[0], requests_per_second=100.0,
                                command=[f"python{settings.python}"]))

    monkeypatch.setattr(interleave, "measure_design_once", measure)  # the ceilings
    monkeypatch.setattr(interleave.runner, "measure_design_once", measure)  # the designs, through measure_sized
    monkeypatch.setattr(interleave.ports, "wait_for_time_wait_drain", lambda: None)
    scenarios = interleave.members(CATALOGUE, "python-versions")
    progress = plan.plan_run(CATALOGUE, [(scenario, None) for scenario in scenarios], quick=False, repeat=2)
    written = interleave.measure_group(CATALOGUE, [runner.Plan(scenario, None, quick=False, repeat=2, out=tmp_path,
                                                               progress=progress) for scenario in scenarios])

    ceilings = [entry for entry in order if entry[1] == "nginx"]
    assert [entry[0] for entry in ceilings] == ["python-3.11-hello", "python-3.11-cpu"]  # once per workload
    designs = [entry for entry in order if entry[1] != "nginx"]
    ids = [scenario.id for scenario in scenarios]
    assert [(entry[0], entry[2]) for entry in designs] == [(scenario_id, repetition) for repetition in (0, 1)
                                                           for scenario_id in ids]
    for path, record in written:
        assert json.loads(path.read_text(encoding="utf-8")) == record.to_json()
        assert record.interleaved_with == [other for other in ids if other != record.id]
        asked = record.settings.python
        assert asked is not None and record.interpreter is not None and record.ceiling is not None
        assert [run.command for design in record.designs for run in design.runs] == [[f"python{asked}"]] * 2
        assert record.interpreter.asked == asked  # the release the interpreter reports, or why it is missing
        assert record.interpreter.version is None or record.interpreter.version.startswith(asked + ".")
        assert record.ceiling.measured_in in ("python-3.11-hello", "python-3.11-cpu")
        assert record.started_utc <= record.finished_utc
