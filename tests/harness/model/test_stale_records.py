"""Every committed scenario record was measured with its scenario's settings of today (issue 31, finding 10).

A record older than a change to its scenario (a ceiling added, a request count raised) renders as if it were
today's: its table lacks the flags the new settings make possible (no ceiling: no cell can be tool-bound by the
old rule), and nothing says so. This test compares each record's settings with the catalogue's full-run settings
and names every record that differs, with the keys. Two keys are left out: `ceiling_exempt` and `fixed_count` are
reasons in words (why a scenario measures no ceiling, why its runs end at a count), which the renderer reads from
the catalogue when a record lacks them; they change no number.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.model.catalogue import UnknownNameError, load_catalogue
from harness.model.records import load_scenario_records
from harness.model.records.scenario_record import ScenarioRecord

REASONS_ONLY = {"ceiling_exempt", "fixed_count", "closes_connections"}

# Records that may lag their scenario, each with why it was not re-run. Keep it short: re-running is the fix (issue
# 31's third session re-ran the last four: scaling-cpu-one-cpu, scaling-cpu-two-cpus, keep-alive-1000, sweep-io).
NOT_RE_RUN: dict[str, str] = {}


def stale_keys(record: ScenarioRecord, today: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The settings whose value in the record differs from today's: key -> (recorded, today)."""
    recorded = dataclasses.asdict(record.settings)
    keys = (set(recorded) | set(today)) - REASONS_ONLY
    return {key: (recorded.get(key), today.get(key)) for key in sorted(keys) if recorded.get(key) != today.get(key)}


def stale_records() -> dict[str, dict[str, tuple[Any, Any]]]:
    catalogue = load_catalogue()
    stale = {}
    for scenario_id, record in load_scenario_records().items():
        try:
            scenario = catalogue.scenario(scenario_id)
        except UnknownNameError:
            stale[scenario_id] = {"scenario": (scenario_id, None)}
            continue
        keys = stale_keys(record, dataclasses.asdict(scenario.settings(quick=False)))
        if keys:
            stale[scenario_id] = keys
    return stale


def test_every_committed_record_has_its_scenarios_settings_of_today() -> None:
    stale = {scenario_id: keys for scenario_id, keys in stale_records().items() if scenario_id not in NOT_RE_RUN}
    assert not stale, "records older than their scenario; re-run them (`bench.py run --scenario ID`): " + "; ".join(
        f"results/{scenario_id}.json: " + ", ".join(f"{key} {old!r} -> {new!r}" for key, (old, new) in keys.items())
        for scenario_id, keys in sorted(stale.items()))


def test_every_record_let_off_is_still_stale() -> None:
    """A record re-run since it was let off leaves the list: an excuse must not outlive what it excused."""
    stale = stale_records()
    assert [scenario_id for scenario_id in NOT_RE_RUN if scenario_id not in stale] == []


def test_a_record_without_the_ceiling_its_scenario_declares_is_named() -> None:
    record = load_scenario_records()["peak"]
    today = dataclasses.asdict(load_catalogue().scenario("peak").settings(quick=False))
    assert stale_keys(record, today) == {}
    assert stale_keys(record, {**today, "ceiling": "some-other-design"}) == {
        "ceiling": (record.settings.ceiling, "some-other-design")}
    assert stale_keys(record, {**today, "fixed_count": "a reason"}) == {}  # a reason in words changes no number
