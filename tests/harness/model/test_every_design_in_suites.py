"""Every HTTP design is in both matrices: the conformance corpus and the hostile suite (issue 32, item 4).

The database designs were left out of both (40 of 48 HTTP designs) because the suites started no PostgreSQL;
run_suite now starts a scratch one (launcher.database_for) when a design needs it. A full run covers every HTTP
design, and the committed records show it.
"""

from __future__ import annotations

import json

import pytest
from harness.model.paths import REPO_ROOT
from harness.suites.conformance import conformance_run
from harness.suites.conformance.conformance_cases import load_corpus
from harness.suites.hostile import cases, run
from harness.system import launcher

from conftest import CATALOGUE

HTTP = {design.name for design in CATALOGUE.designs.values() if design.kind == "http"}


def test_there_are_database_designs_to_include() -> None:
    assert any(launcher.needs_database(CATALOGUE.design(name)) for name in HTTP)


def test_a_full_conformance_run_covers_every_http_design_alone_and_behind_nginx() -> None:
    subjects = conformance_run.subjects_for(CATALOGUE, None, load_corpus().run_settings(quick=False))
    assert {subject.design.name for subject in subjects if not subject.behind_nginx} == HTTP
    assert {subject.design.name for subject in subjects if subject.behind_nginx} == HTTP


def test_a_full_hostile_run_covers_every_http_design() -> None:
    subjects = run.subjects_for(CATALOGUE, None, cases.load_suite().run_settings(quick=False))
    assert {subject.design.name for subject in subjects if not subject.behind_nginx} == HTTP


@pytest.mark.parametrize("record", ["conformance.json", "hostile.json"])
def test_the_committed_record_has_every_http_design(record: str) -> None:
    data = json.loads((REPO_ROOT / "results" / record).read_text(encoding="utf-8"))
    measured = {design["design"] for design in data["designs"] if not design["behind_nginx"]}
    assert HTTP <= measured, f"results/{record} lacks {sorted(HTTP - measured)}"
