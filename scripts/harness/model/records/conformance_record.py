"""The conformance suite's record (suites/conformance/conformance_run.py writes it, results/conformance.json):
the corpus of cases it sent, every HTTP design's answer to each (alone and behind nginx), the reference parsers'
reading of the same bytes, and gunicorn's own corpus through those parsers."""

from __future__ import annotations

from typing import ClassVar

from harness.model.records.common import Environment
from harness.model.typed import Typed, optional


class ConformanceRunSettings(Typed):
    """The `[suite]` table of scripts/catalogue/conformance/cases.toml as the run used it (the quick run's design
    list left out), with the designs measured at once that ran."""

    bound: float  # seconds a case waits for an answer
    quiet: float  # seconds of silence after which an answer is taken as complete
    delay: float  # the simulated call every design is started with
    jobs: int  # designs measured at the same time
    behind_nginx: str  # "all": every design also behind nginx (the record's `proxy`); "none"
    proxy: str | None = optional()  # the nginx configuration in front of a design behind nginx (older records: none)


class CaseGroup(Typed):
    """A group of cases (the request line, the fields, smuggling...): one grid or table on the page each."""

    id: str
    title: str


class ConformanceCase(Typed):
    """One case of the corpus: the exact request, what RFC 9112 / RFC 9110 ask of a server that receives it, and
    where. The writer leaves out a setting at its empty default (suites/conformance/conformance_cases.Case)."""

    id: str
    group: str
    short: str  # the column header
    title: str
    request: str  # Latin-1 text, `{filler}` standing for `filler` repeated `filler_count` times
    expect: list[str]  # the answers the RFC asks for: "400", "200", "closed"...
    section: str
    rfc: str  # what the RFC says, in words
    lenient: list[str] | None = optional()  # answers the RFC also allows
    answers: int  # how many answers a conforming server gives
    close_after: bool | None = optional()  # the RFC says the server closes after answering
    no_interim: bool | None = optional()  # no 100 Continue may be sent (an HTTP/1.0 client)
    applies: str  # "any", or "non-get": only designs that answer a POST with something other than 405
    cve: str | None = optional()
    source: str | None = optional()  # the research that made the class known, with its address
    attack: str | None = optional()  # what an attacker gets from a server that fails the case
    parser_expect: list[str] | None = optional()  # what a parser should do, where not `expect`
    filler: str | None = optional()
    filler_count: int | None = optional()
    bytes: int  # the length of the bytes sent, filler expanded


class Answer(Typed):
    """A design's answer to one case: the judgement (a cell of the matrix) and what came back over the socket
    (clients/raw_exchange.Exchange; absent where the case was not sent: n/a, or the design did not start)."""

    verdict: str  # "pass", "lenient", "fail", "n/a"
    code: str  # what the cell shows: "400", "200+200", "closed", "no answer", "GET-only"...
    reason: str | None = optional()  # why it failed, or why it was not run
    statuses: list[int] | None = optional()  # final answers, in order
    interim: list[int] | None = optional()  # 1xx answers
    ended: str | None = optional()  # "eof", "reset", "open" or "refused"
    http_09: bool | None = optional()  # bytes came that are not a status line
    received: int | None = optional()  # bytes received
    head: str | None = optional()  # the first answer's status line
    error: str | None = optional()  # why the connection or the sending failed
    other_version: str | None = optional()  # a status line's version other than HTTP/1.0 and HTTP/1.1
    next_answer: str | None = optional()  # behind nginx: what the next client's request got ("405", "200"...)


class ConformanceDesign(Typed):
    """One design, alone or behind nginx: whether it ran, and its answer to every case, by case id."""

    name: str  # the design's name, with "+nginx" behind nginx
    design: str
    title: str
    behind_nginx: bool
    get_only: bool | None  # answers 405 to a POST; None when it never started
    status: str  # "ok" or "failed"
    problems: list[str]  # "died after case X", "did not start: ..."
    server_commands: list[list[str]]  # one per start
    cases: dict[str, Answer]


class Parsed(Typed):
    """What a reference parser made of a case's bytes (clients/reference_parsers.ParserVerdict, its empty values
    left out)."""

    outcome: str  # "accept", "reject" or "incomplete"
    requests: int  # complete requests read
    status: int | None = optional()  # the status its error names
    keep_alive: bool | None = optional()  # after the last complete request
    detail: str | None = optional()  # the error, or what stopped the reading


class ParserAnswer(Typed):
    """A reference parser on one case, judged as a design's answer is."""

    verdict: str
    code: str
    reason: str | None = optional()
    parsed: Parsed


class CorpusVerdict(Typed):
    """A reference parser on one file of gunicorn's corpus."""

    outcome: str  # "accept", "reject" or "incomplete"
    requests: int
    status: int | None
    detail: str  # cut to 120 characters


class CorpusRequest(Typed):
    """One file of gunicorn's tests/requests/, and what each reference parser made of it, by parser name."""

    name: str  # "valid/001.http"
    valid: bool  # under valid/ (gunicorn accepts it) or invalid/
    needs_setting: bool  # gunicorn reads it so only under a non-default setting
    bytes: int
    parsers: dict[str, CorpusVerdict]


class GunicornCorpus(Typed):
    """Gunicorn's own request corpus through the reference parsers, or why it was not fetched."""

    gunicorn_version: str | None = optional()  # absent when it was not asked for
    fetched: bool
    command: str | None = optional()  # how it was fetched
    reason: str | None = optional()  # why it was not
    requests: list[CorpusRequest]


class ConformanceRecord(Typed):
    """results/conformance.json: the corpus against every HTTP design and the reference parsers (or a quick or
    partial run, in build/results/)."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    suite: str  # "conformance"
    title: str
    mode: str  # "full" or "quick"
    command: list[str]
    settings: ConformanceRunSettings
    groups: list[CaseGroup]
    cases: list[ConformanceCase]  # in the corpus's order: a case's number on the page is its place here
    environment: Environment
    started_utc: str
    designs: list[ConformanceDesign]
    parsers: dict[str, dict[str, ParserAnswer]]  # case id -> parser name -> its answer
    gunicorn_corpus: GunicornCorpus
    finished_utc: str

    def parser_names(self) -> list[str]:
        """The reference parsers, in the record's order."""
        return list(next(iter(self.parsers.values()), {}))

    def placed_designs(self, behind_nginx: bool) -> list[ConformanceDesign]:
        """The designs measured alone, or behind nginx."""
        return [design for design in self.designs if design.behind_nginx == behind_nginx]
