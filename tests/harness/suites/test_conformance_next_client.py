"""Behind a proxy that keeps its connections to the design, the conformance suite asks again after every case.

A request hidden in one client's bytes, answered by the design on a connection nginx keeps, waits there for the
next request nginx sends on it: that client gets the hidden request's answer (conformance_cases.judge_next). The
suite sends its first question (a POST the designs refuse) again after each case and compares the answers.
"""

from __future__ import annotations

from harness.render.conformance_tables import code_legend
from harness.suites.conformance.conformance_cases import Judgement, judge_next, load_corpus

PASSED = Judgement("pass", "400")


def test_the_same_answer_as_alone_leaves_the_cell_alone() -> None:
    assert judge_next(PASSED, 405, [405], "eof") == PASSED


def test_a_2xx_for_the_next_client_is_a_smuggled_answer() -> None:
    judged = judge_next(PASSED, 405, [200], "eof")
    assert judged.verdict == "fail"
    assert judged.code == "400 next 200"
    assert "hidden request" in judged.reason


def test_another_difference_is_shown_without_changing_the_verdict() -> None:
    judged = judge_next(PASSED, 405, [502], "eof")
    assert (judged.verdict, judged.code) == ("pass", "400 next 502")
    assert judge_next(PASSED, 405, [], "reset").code == "400 next closed"


def test_every_code_the_check_makes_has_a_legend() -> None:
    for code in ("400 next 200", "200+200 open next 502", "closed next no answer"):
        assert code_legend(code)[-1] == "405 next 200"


def test_the_2025_classes_name_their_source() -> None:
    """Every case of the 2025 desync classes cites the research it comes from, and an RFC 9112/9110 section."""
    cases = {case.id: case for case in load_corpus().cases}
    new = ["chunk-ext-bare-lf", "chunk-ext-bare-cr", "chunk-ext-control", "chunk-data-bare-lf", "chunk-data-bare-cr",
           "chunk-size-overflow", "te-folded", "smuggle-chunk-ext-lf-line-end", "smuggle-chunk-ext-lf-in-ext",
           "smuggle-chunk-data-lf", "smuggle-chunk-size-overflow", "smuggle-te-twice", "smuggle-te-folded",
           "smuggle-0cl-get-body", "smuggle-0cl-early-answer", "smuggle-expect-body", "smuggle-expect-unknown-body",
           "smuggle-cl-list", "smuggle-cl-list-equal"]
    for case_id in new:
        case = cases[case_id]
        assert "https://" in case.source, case_id
        assert case.section.startswith(("RFC 9112", "RFC 9110")), case_id
