"""The conformance corpus (scripts/catalogue/conformance/cases.toml) read into Case objects, and judged.

A case is exact bytes and what RFC 9112 / RFC 9110 ask of a server that receives them. The same
judgement applies to what a live design answered over a socket (`judge_answer`) and to what a
reference parser made of the bytes without one (`judge_parser`), so the page can put the two side
by side. A judgement is one of three words: "pass" (the RFC's answer), "lenient" (an answer the RFC
also allows, such as accepting a bare LF, or refusing by closing without a status) and "fail", with
the reason in words when it failed.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

from harness.model.catalogue import CATALOGUE_DIR
from harness.model.records.conformance_record import CaseGroup, ConformanceCase, ConformanceRunSettings
from harness.model.typed import Typed
from harness.suites.case_catalogue import CaseCatalogue, typed_settings

CASES_FILE = CATALOGUE_DIR / "conformance" / "cases.toml"
ACCEPTED = {"200", "405"}  # the request was read as a request: the page, or GET-only's refusal of the method
NO_ANSWER, CLOSED, HTTP_09 = "no answer", "closed", "0.9"
REQUIRED = ("id", "group", "short", "title", "request", "expect", "section", "rfc")


@dataclass(frozen=True)
class Case:
    id: str
    group: str
    short: str
    title: str
    request: str  # as written in the catalogue (Latin-1 text); `data` is the bytes sent
    expect: list[str]
    section: str
    rfc: str
    lenient: list[str] = field(default_factory=list)
    answers: int = 1
    close_after: bool = False
    no_interim: bool = False
    applies: str = "any"  # "any", or "non-get": only designs that answer a POST with something other than 405
    cve: str = ""
    source: str = ""  # the research that made the class known, with its address
    attack: str = ""
    parser_expect: list[str] = field(default_factory=list)  # what a parser should do, where not `expect`
    filler: str = ""
    filler_count: int = 0

    @property
    def data(self) -> bytes:
        """The exact bytes: {filler} expanded, every character one byte (Latin-1)."""
        return self.request.replace("{filler}", self.filler * self.filler_count).encode("latin-1")

    @property
    def smuggling(self) -> bool:
        return self.group == "smuggling"

    def to_record(self) -> ConformanceCase:
        """The case as the record keeps it: a setting at its empty default left out, and the length of its bytes."""
        return ConformanceCase(id=self.id, group=self.group, short=self.short, title=self.title, request=self.request,
                               expect=self.expect, section=self.section, rfc=self.rfc, lenient=self.lenient or None,
                               answers=self.answers, close_after=self.close_after or None,
                               no_interim=self.no_interim or None, applies=self.applies, cve=self.cve or None,
                               source=self.source or None, attack=self.attack or None, parser_expect=self.parser_expect or None,
                               filler=self.filler or None, filler_count=self.filler_count or None, bytes=len(self.data))


@dataclass(frozen=True)
class Group:
    id: str
    title: str

    def to_record(self) -> CaseGroup:
        return CaseGroup(id=self.id, title=self.title)


@dataclass(frozen=True)
class Corpus(CaseCatalogue):
    """The conformance corpus; a case is selected by its id or by its group's."""

    cases: list[Case]
    groups: list[Group] = field(default_factory=list)
    what: ClassVar[str] = "conformance case or group"

    def names(self, case: Case) -> set[str]:
        return {case.id, case.group}

    def run_settings(self, quick: bool) -> ConformanceSettings:
        """The settings of a run, typed: the `[suite]` table, with `[suite.quick]` over it for a quick run."""
        return typed_settings(ConformanceSettings, self.table(quick), CASES_FILE)


class ConformanceSettings(Typed):
    """The `[suite]` table of scripts/catalogue/conformance/cases.toml, in its order."""

    bound: float  # seconds a case waits for an answer
    quiet: float  # seconds of silence after which an answer is taken as complete
    delay: float  # the simulated call every design is started with
    jobs: int  # designs measured at the same time
    behind_nginx: str = "none"  # "all": every design also behind the proxy of suites/subjects.PROXY_TEMPLATE
    designs: list[str] | None = None  # [suite.quick] only: the few designs a quick run measures

    def to_record(self, jobs: int, proxy: str) -> ConformanceRunSettings:
        """As the record keeps them: every setting but the quick run's designs, the jobs that ran, and the proxy."""
        return ConformanceRunSettings(bound=self.bound, quiet=self.quiet, delay=self.delay, jobs=jobs,
                                      behind_nginx=self.behind_nginx, proxy=proxy)


def load_corpus(path: Path = CASES_FILE) -> Corpus:
    """Read the corpus; ids unique, every case in a known group, every required key there."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    settings = dict(data.get("suite", {}))
    quick = settings.pop("quick", {})
    groups = [Group(entry["id"], entry["title"]) for entry in data.get("group", [])]
    group_ids = {group.id for group in groups}
    cases = []
    for entry in data.get("case", []):
        missing = [key for key in REQUIRED if key not in entry]
        if missing:
            raise ValueError(f"{path}: case {entry.get('id', '?')!r} lacks {', '.join(missing)}")
        if entry["group"] not in group_ids:
            raise ValueError(f"{path}: case {entry['id']!r} is in unknown group {entry['group']!r}")
        try:
            case = Case(**entry)
        except TypeError as error:  # an unknown key: a typo would silently do nothing
            raise ValueError(f"{path}: case {entry['id']!r}: {error}") from None
        case.data  # noqa: B018 - a character above U+00FF cannot be sent as one byte: fail at load
        cases.append(case)
    ids = [case.id for case in cases]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: a case id is listed twice")
    corpus = Corpus(settings, quick, cases, groups)
    corpus.run_settings(quick=False), corpus.run_settings(quick=True)  # an unknown setting is an error here, at load
    return corpus


# --- judging --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judgement:
    verdict: str  # "pass", "lenient", "fail", "n/a"
    code: str  # what the cell shows: "400", "200+200", "closed", "no answer", "0.9"
    reason: str = ""  # why it failed, in words

    def to_json(self) -> dict[str, str]:
        return {key: value for key, value in asdict(self).items() if value or key != "reason"}  # no empty reason


def status_verdict(case: Case, code: str, expected: list[str] | None = None) -> str:
    """pass when the code is the RFC's answer, lenient when the RFC also allows it, fail otherwise."""
    expect = expected or case.expect
    if code in expect:
        return "pass"
    if code in case.lenient:
        return "lenient"
    if code == CLOSED and any(int(status) >= 400 for status in expect if status.isdigit()):
        return "lenient"  # refused without saying why: no request served, but no status either
    return "fail"


def judge_answer(case: Case, statuses: list[int], interim: list[int], ended: str, http_09: bool,
                 other_version: str = "") -> Judgement:
    """What a design answered over a socket: final statuses in order, 1xx ones, how the connection ended,
    and the version its status line claimed when that was neither HTTP/1.0 nor HTTP/1.1."""
    if http_09:
        code = HTTP_09
    elif statuses:
        code = "+".join(str(status) for status in statuses)
    else:
        code = CLOSED if ended in ("eof", "reset") else NO_ANSWER
    first = HTTP_09 if http_09 else (str(statuses[0]) if statuses else code)
    verdict = status_verdict(case, first)
    reason = "" if verdict != "fail" else f"answered {first}, the RFC asks for {' or '.join(case.expect)}"
    if first == NO_ANSWER and verdict == "fail":
        reason = "no answer and the connection left open: waiting for bytes a conforming server would not wait for"
    if len(statuses) > case.answers:
        verdict, reason = "fail", (f"answered {len(statuses)} requests where a conforming server sees "
                                   f"{case.answers}: the bytes after the first were served as a request")
    elif case.close_after and first in ACCEPTED and ended == "open":
        verdict, reason = "fail", "accepted, then kept the connection open where the RFC says close"
        code += " open"
    if other_version:
        verdict, reason = "fail", (f"answered with {other_version} in its status line: a server sends the highest "
                                   "version it conforms to, not the client's (RFC 9110 §2.5)")
        code += f" as {other_version}"
    if case.no_interim and interim:
        verdict, reason = "fail", "sent 100 Continue to an HTTP/1.0 client"
        code = "100→" + code
    return Judgement(verdict, code, reason)


def judge_next(judgement: Judgement, alone: int | None, statuses: list[int], ended: str) -> Judgement:
    """Behind a proxy that keeps its connections to the design: the next client's request (the method probe again,
    on a new connection, after the case) must get the answer it gets on its own (`alone`). A 2xx instead is the
    answer to a request hidden in the case's bytes, left on the connection nginx keeps to the design and handed to
    the next client; any other difference is shown in the cell and does not change the verdict."""
    seen = str(statuses[0]) if statuses else (CLOSED if ended in ("eof", "reset") else NO_ANSWER)
    if alone is None or seen == str(alone):
        return judgement
    code = f"{judgement.code} next {seen}"
    if statuses and 200 <= statuses[0] < 300:
        return Judgement("fail", code, f"the next client's request (answered {alone} on its own) got {seen}: the "
                                       "answer to the hidden request, left on the connection nginx keeps to the design")
    return Judgement(judgement.verdict, code, judgement.reason)


def judge_parser(case: Case, outcome: str, requests: int, status: int | None, keep_alive: bool | None) -> Judgement:
    """What a reference parser made of the bytes: accepted (as "200"), refused with a status, or waiting."""
    code = "200" if outcome == "accept" else (str(status) if outcome == "reject" else NO_ANSWER)
    verdict = status_verdict(case, code, case.parser_expect or None)
    reason = "" if verdict != "fail" else (
        "waits for more bytes" if code == NO_ANSWER else f"{'accepts' if code == '200' else 'refuses with ' + code}, "
                                                          f"the RFC asks for {' or '.join(case.expect)}")
    if requests > case.answers:
        verdict, reason = "fail", f"reads {requests} requests where a conforming parser reads {case.answers}"
        code = "+".join(["200"] * requests)
    elif case.close_after and outcome == "accept" and keep_alive:
        verdict, reason = "fail", "accepts and keeps the connection open where the RFC says close"
        code += " open"
    return Judgement(verdict, code, reason)
