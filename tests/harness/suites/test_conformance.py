"""The conformance suite: its corpus, the reference parsers on exact bytes, gunicorn's corpus, a short run
against two designs, and the page's renderer (harness/suites/conformance/, render/conformance_tables.py)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from harness.clients import gunicorn_corpus, reference_parsers
from harness.model.catalogue import load_catalogue
from harness.model.records import RESULTS_DIR, write_record_atomic
from harness.model.records.conformance_record import (
    Answer,
    ConformanceDesign,
    ConformanceRecord,
    ConformanceRunSettings,
    GunicornCorpus,
    Parsed,
    ParserAnswer,
)
from harness.render import conformance_grid, conformance_tables
from harness.render.site import GENERATED_DIR
from harness.suites.conformance import run_suite
from harness.suites.conformance.conformance_cases import judge_answer, load_corpus

VALID_GET = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
NO_HOST = b"GET / HTTP/1.1\r\n\r\n"


def test_the_corpus_has_at_least_sixty_cases_with_unique_ids_and_a_section_each() -> None:
    corpus = load_corpus()
    ids = [case.id for case in corpus.cases]
    assert len(ids) >= 60
    assert len(set(ids)) == len(ids)
    assert all(case.section.startswith("RFC ") and case.expect for case in corpus.cases)
    assert {case.group for case in corpus.cases} == {group.id for group in corpus.groups}
    cves = {case.cve for case in corpus.cases if case.cve}
    assert {"CVE-2024-1135", "CVE-2024-6827", "CVE-2022-24761", "CVE-2024-49768", "CVE-2025-43859"} <= cves


def test_the_8k_case_puts_the_invalid_request_on_a_8192_byte_boundary() -> None:
    case = next(case for case in load_corpus().cases if case.id == "smuggle-after-invalid-8k")
    assert case.data.index(b"GET /smuggled") == 8192


@pytest.mark.parametrize("parser", ["h11", "httptools", "hardened"])
def test_every_reference_parser_accepts_a_plain_get(parser: str) -> None:
    verdict = reference_parsers.parsers()[parser](VALID_GET)
    assert (verdict.outcome, verdict.requests, verdict.keep_alive) == ("accept", 1, True)


@pytest.mark.parametrize("parser", ["h11", "hardened"])
def test_h11_and_the_hardened_parser_refuse_a_missing_host(parser: str) -> None:
    verdict = reference_parsers.parsers()[parser](NO_HOST)
    assert (verdict.outcome, verdict.status) == ("reject", 400)


def test_httptools_leaves_host_to_the_server() -> None:
    assert reference_parsers.httptools_verdict(NO_HOST).outcome == "accept"


def test_pipelined_requests_are_counted_and_a_close_stops_the_reading() -> None:
    two = VALID_GET + VALID_GET
    assert {name: verdict.requests for name, verdict in reference_parsers.run_all(two).items()} == \
        {name: 2 for name in reference_parsers.parsers()}
    closing = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" + VALID_GET
    assert all(verdict.requests == 1 and verdict.keep_alive is False
               for verdict in reference_parsers.run_all(closing).values())


def test_a_second_answer_to_a_smuggling_case_fails_it() -> None:
    case = next(case for case in load_corpus().cases if case.id == "smuggle-cl-te")
    assert judge_answer(case, [200, 200], [], "open", False).verdict == "fail"
    assert judge_answer(case, [200], [], "open", False).reason.startswith("accepted, then kept")
    assert judge_answer(case, [200], [], "eof", False).verdict == "lenient"
    assert judge_answer(case, [400], [], "eof", False).verdict == "pass"
    assert judge_answer(case, [], [], "eof", False).verdict == "lenient"  # refused by closing


def test_gunicorn_decoding_follows_its_own_loader() -> None:
    assert gunicorn_corpus.decode(b"GET / HTTP/1.1\\r\\n\nX: a\\tb\\0\\x7F\\r\\n\n\\r\\n\n") == \
        b"GET / HTTP/1.1\r\nX: a\tb\x00\x7f\r\n\r\n"


@pytest.mark.slow
def test_gunicorns_corpus_is_fetched_and_read_by_the_three_parsers() -> None:
    if shutil.which("pip") is None and subprocess.run(["python", "-m", "pip", "--version"], check=False,
                                                      capture_output=True).returncode != 0:
        pytest.skip("no pip to fetch gunicorn's sdist with")
    try:
        requests = gunicorn_corpus.load(gunicorn_corpus.fetch())
    except gunicorn_corpus.CorpusUnavailable as error:
        pytest.skip(f"pip could not reach PyPI for gunicorn's sdist: {error}")
    assert sum(request.valid for request in requests) > 50
    assert sum(not request.valid for request in requests) > 50
    for request in requests:
        verdicts = reference_parsers.run_all(request.data)
        assert {"h11", "httptools", "hardened"} <= verdicts.keys()
        assert all(verdict.outcome in ("accept", "reject", "incomplete") for verdict in verdicts.values())


@pytest.mark.slow
def test_a_short_run_against_two_designs_gives_their_known_verdicts(tmp_path) -> None:
    path, record = run_suite(load_catalogue(), ["hardened", "asyncio-streams"],
                             ["get-1.1", "host-missing", "smuggle-cl-cl"], quick=True, out_dir=tmp_path,
                             log_root=tmp_path / "logs", with_gunicorn_corpus=False)
    assert path == tmp_path / "conformance.json"
    assert ConformanceRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path)) == record
    by_name = {design.name: design.cases for design in record.designs}
    assert by_name["hardened"]["host-missing"].code == "400"
    assert by_name["hardened"]["host-missing"].verdict == "pass"
    assert by_name["asyncio-streams"]["host-missing"].code == "200"
    assert by_name["asyncio-streams"]["host-missing"].verdict == "fail"
    assert {cases["get-1.1"].verdict for cases in by_name.values()} == {"pass"}
    assert record.parsers["host-missing"]["h11"].code == "400"
    assert record.started_utc and record.finished_utc and record.command


def fixture_record() -> ConformanceRecord:
    """A record of three cases against one design, its machine the committed record's."""
    corpus = load_corpus()
    cases = [case for case in corpus.cases if case.id in ("get-1.1", "host-missing", "smuggle-cl-te")]
    answers = {"get-1.1": ([200], "open"), "host-missing": ([200], "open"), "smuggle-cl-te": ([200, 200], "open")}
    design_cases = {case.id: Answer.from_json({**judge_answer(case, statuses, [], ended, False).to_json(),
                                               "ended": ended}) for case in cases
                    for statuses, ended in [answers[case.id]]}
    parsed = Parsed(outcome="accept", requests=1)
    parsers = {case.id: {name: ParserAnswer(verdict="pass", code="200", parsed=parsed)
                         for name in ("h11", "httptools", "hardened")} for case in cases}
    committed = conformance_tables.load_record(RESULTS_DIR)
    assert committed is not None
    return ConformanceRecord(
        schema=1, suite="conformance", title="HTTP/1.1 conformance", mode="quick",
        command=["python", "scripts/bench.py", "conformance"],
        settings=ConformanceRunSettings(bound=2.0, quiet=0.3, delay=0.0, jobs=1, behind_nginx="none"),
        groups=[group.to_record() for group in corpus.groups], cases=[case.to_record() for case in cases],
        environment=committed.environment, started_utc="2026-01-01T00:00:00Z",
        designs=[ConformanceDesign(name="asyncio-streams", design="asyncio-streams", title="t", behind_nginx=False,
                                   get_only=False, status="ok", problems=[], server_commands=[], cases=design_cases)],
        parsers=parsers, gunicorn_corpus=GunicornCorpus(fetched=False, reason="not asked", requests=[]),
        finished_utc="2026-01-01T00:00:09Z")


def test_the_renderer_explains_every_mark_and_gives_a_verdict_per_design(tmp_path) -> None:
    write_record_atomic(tmp_path / "conformance.json", fixture_record())
    files = {path.name: text for path, text in conformance_tables.conformance_files(tmp_path, tmp_path / "gen").items()}
    drawn = conformance_grid.conformance_grid_files(tmp_path, tmp_path / "gen", tmp_path / "plots")
    grid = drawn[tmp_path / "gen" / "conformance-grid.md"]
    assert "asyncio-streams,False,3,smuggle-cl-te,CL.TE,Request smuggling,fail,200+200" in drawn[tmp_path / "plots" / "conformance-matrix.csv"].replace('"', "")
    for mark in ("✔", "≈", "✘", "–"):  # the legend: each mark on its verdict's colour (the survival grid's classes)
        assert f'aria-hidden="true">{mark}</span> **' in grid
    assert "- `200+200`: two answers" in grid and 'title="3. CL.TE: fail, 200+200"' in grid
    compact = drawn[tmp_path / "gen" / "conformance-compact.md"]
    assert "passes 1 of 3; fails no Host → 200, CL.TE → 200+200" in compact
    assert compact.startswith('<!--') and '!!! abstract "The answer"' in compact.splitlines()[1]
    assert "answered `200+200` (`asyncio-streams`): the bytes a front end counted as body (by Content-Length) are " \
           "answered as a request of their own" in files["conformance-smuggling.md"]
    assert "Not fetched in this run" in files["conformance-parsers.md"]


def test_the_committed_conformance_files_match_the_record() -> None:
    """`render --check` for this page's files: what is in docs/_generated is what the record renders to."""
    for path, content in conformance_tables.conformance_files(RESULTS_DIR, GENERATED_DIR).items():
        assert path.read_text(encoding="utf-8") == content, f"stale: {path}; run `python scripts/bench.py render`"


def test_a_second_answer_that_refuses_is_not_called_a_served_request() -> None:
    from harness.render.conformance_tables import attacker_gets

    hidden = "the hidden request is answered as a request of its own"
    assert attacker_gets(Answer(verdict="fail", code="200+200"), hidden) == hidden
    refused = attacker_gets(Answer(verdict="fail", code="200+400"), hidden)
    assert "the hidden request was not served" in refused and "refused the bytes after it with 400" in refused
