"""The database scenarios measure the reader's set-up (issue 31, finding 2), and their records say how.

A database scenario that closes the connection after every answer makes each short query pay a TCP connect and
close: exactly the work around the query that the page says dominates, and the main reason our figures sat far
below TechEmpower's, whose clients keep connections open. So a scenario with `database = true` keeps connections
alive (wrk's default), or says in `closes_connections` why it does not, and a committed record measured with
keep-alive off must carry that reason. Each record also says where PostgreSQL ran (the CPU it shared), which
version it was, and how the designs authenticated. Starts no process: records and the catalogue only.
"""

from __future__ import annotations

import dataclasses

import pytest
from harness.model.catalogue import load_catalogue
from harness.model.records import load_scenario_records
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.settings import ScenarioSettings

CATALOGUE = load_catalogue()
RECORDS = load_scenario_records()
# Records measured before these guards, each with why it is not re-measured yet. Keep it short: re-running is the fix.
AWAITING: dict[str, str] = {
    "timeline": "a picture of each request's moments, not a rate; measured before PostgreSQL was pinned",
}
DATABASE_RECORDS = {name: record for name, record in RECORDS.items() if record.settings.database}
CHECKED = sorted(name for name in DATABASE_RECORDS if name not in AWAITING)


def closes_without_reason(settings: ScenarioSettings) -> bool:
    """A database run with keep-alive off that does not say why."""
    return bool(settings.database) and not settings.keep_alive and not (settings.closes_connections or "").strip()


def record_problems(record: ScenarioRecord) -> list[str]:
    """What a database record fails to say about its PostgreSQL: version, CPU placement, authentication."""
    database = record.database
    if database is None:
        return [f"{record.id}: no `database` (PostgreSQL's version, CPU and authentication)"]
    problems = []
    if not database.version.startswith("postgres (PostgreSQL) "):
        problems.append(f"{record.id}: version {database.version!r}")
    if database.cpu != record.environment.pinning.server_cpu:
        problems.append(f"{record.id}: PostgreSQL on CPU {database.cpu}, the server on "
                        f"{record.environment.pinning.server_cpu}: the page says they share one")
    if not database.placement.strip():
        problems.append(f"{record.id}: no placement in words")
    if "scram-sha-256" not in database.authentication:
        problems.append(f"{record.id}: authentication {database.authentication!r}, not scram-sha-256")
    return problems


def test_there_are_database_scenarios_and_records() -> None:
    """Sanity for the tests below: they look at something."""
    assert len([scenario for scenario in CATALOGUE.scenarios.values() if scenario.settings(False).database]) >= 5
    assert len(DATABASE_RECORDS) >= 5
    assert all(reason.strip() for reason in AWAITING.values())


@pytest.mark.parametrize("scenario_id", sorted(scenario.id for scenario in CATALOGUE.scenarios.values()
                                               if scenario.settings(False).database))
def test_every_database_scenario_keeps_connections_alive_or_says_why(scenario_id: str) -> None:
    for quick in (False, True):
        settings = CATALOGUE.scenarios[scenario_id].settings(quick)
        assert not closes_without_reason(settings), (
            f"{scenario_id}{' (quick)' if quick else ''}: keep_alive is false and `closes_connections` does not say "
            "why: every request would pay a TCP connection (set keep_alive = true, or give the reason)")


@pytest.mark.parametrize("scenario_id", CHECKED)
def test_every_database_record_was_measured_with_keep_alive_or_says_why(scenario_id: str) -> None:
    assert not closes_without_reason(DATABASE_RECORDS[scenario_id].settings), (
        f"results/{scenario_id}.json was measured with keep-alive off and no `closes_connections` reason")


@pytest.mark.parametrize("scenario_id", CHECKED)
def test_every_database_record_names_postgresqls_version_cpu_and_authentication(scenario_id: str) -> None:
    assert record_problems(DATABASE_RECORDS[scenario_id]) == []


def test_the_guards_refuse_the_bad_cases() -> None:
    """The mistakes themselves, made on a real record: keep-alive off without a reason; no PostgreSQL placement."""
    record = DATABASE_RECORDS[sorted(DATABASE_RECORDS)[0]]
    closing = dataclasses.replace(record.settings, keep_alive=False, closes_connections=None)
    assert closes_without_reason(closing)
    assert not closes_without_reason(dataclasses.replace(closing, closes_connections="the twins close"))
    assert not closes_without_reason(dataclasses.replace(closing, keep_alive=True))
    assert not closes_without_reason(dataclasses.replace(closing, database=False))
    unplaced = ScenarioRecord.from_json({**record.to_json(), "database": None}, "a record without `database`")
    assert record_problems(unplaced) == [f"{record.id}: no `database` (PostgreSQL's version, CPU and authentication)"]
