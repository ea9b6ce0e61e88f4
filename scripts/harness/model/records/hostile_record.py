"""The hostile suite's record (suites/hostile/run.py writes it; results/hostile.json, and the slow clients' cases
again in results/deployment/slow-clients/hostile.json): the cases as the catalogue gave them, every design's
answer to each, and what was measured around it.

The cases' own table (scripts/catalogue/hostile/cases.toml) is read through HostileCase too, so a misspelt
parameter there fails when the suite loads, not when a case quietly falls back to its default.
"""

from __future__ import annotations

from typing import ClassVar

from harness.model.records.common import Environment
from harness.model.typed import Typed, optional
from harness.model.suite_settings import HostileSettings


class CaseVariant(Typed):
    """One connection a case of kind `exchange` opens: what it sends, and the statuses that are its robust answer."""

    name: str
    request: str | None = optional()  # the bytes, latin-1; `{filler}` stands for filler × filler_count
    filler: str | None = optional()
    filler_count: int | None = optional()
    random_bytes: int | None = optional()  # instead of a request: this many random bytes
    seed: int | None = optional()  # of the random bytes (9 when absent)
    expect: list[int] | None = optional()  # the robust statuses (the case's `expect` when absent)
    accept: list[int] | None = optional()  # also passes, with the note said beside it
    note: str | None = optional()


class HostileCase(Typed):
    """A case as the catalogue gives it: what it is, its robust answer, where it is met and cited, its kind (the
    function in suites/hostile/cases.py that plays it) and that kind's parameters (each only where a case has it)."""

    number: int
    id: str
    title: str
    robust: str  # the robust answer, in words
    wild: str  # who does this in the wild
    reference: str  # its RFC or CVE
    kind: str
    short: str | None = optional()  # the column's name in the matrix (the id when absent)
    short_bound: bool | None = optional()  # the answer must come within the suite's short_bound, not its bound
    probe_at: float | None = optional()  # seconds into the case for the probe (the suite's probe_at when absent)
    dribble_interval: float | None = optional()  # exchange: send a byte every this many seconds
    half_close: bool | None = optional()  # exchange: shut the sending side after the request
    answer_within: float | None = optional()  # exchange: a later answer is a timeout, not the parser
    expect: list[int] | None = optional()  # exchange: the robust statuses of every variant without its own
    variant: list[CaseVariant] | None = optional()  # exchange: its connections
    request: str | None = optional()  # body-stall: the head and the first bytes of the body
    counts: list[int] | None = optional()  # pipelined: requests per segment, one connection each
    interval: float | None = optional()  # slowloris: seconds between header lines
    batch: int | None = optional()  # idle: connections opened at once, each batch accepted before the next is opened
    accept_wait: float | None = optional()  # idle: how long a batch may wait to be accepted (then the rest go at once)
    gone_during_call: int | None = optional()  # reset: resets during the simulated call
    busy_cpu_share: float | None = optional()  # emfile: more than this share of a CPU is a busy loop
    body_bytes: int | None = optional()  # expect-continue: the body announced
    wait_for_interim: float | None = optional()  # expect-continue: seconds to wait for 100 before sending
    # emfile: after the hold, a GET on every held connection, answers counted for this many seconds (absent: not asked)
    ask_held_within: float | None = optional()

    @property
    def column(self) -> str:
        """The case's short name in a table's header."""
        return self.short or self.id


class Probe(Typed):
    """The separate well-behaved client's GET / (clients/raw_http.well_behaved_get): its status, or why none."""

    status: int | None
    seconds: float
    error: str

    @property
    def served(self) -> bool:
        return self.status == 200


class EmfileFigures(Typed):
    """What case 15 (EMFILE) measured while it held connections past the server's lowered open-files limit."""

    cpu_share: float  # of one CPU, while the connections were held
    hold_seconds: float
    processes: int  # in the server's group, each with its limit lowered
    at_limit: int  # of those, at their limit before and after the hold
    connections_held: int
    never_connected: int
    headroom: int  # descriptors each process could open beyond what it held
    # At the end of the hold, before the case closed them: held connections the server had closed (EOF or reset), so
    # their clients lost them; and processes of the group that were not there when the limit was lowered (a worker
    # that died and was started again). Absent in records measured before they were counted.
    closed_by_server: int | None = optional()
    processes_started: int | None = optional()
    # With the case's ask_held_within: a GET on every held connection after the hold, and what came back in time:
    # a status line, a close before one, or nothing (the clients a server at its limit leaves waiting).
    held_answered: int | None = optional()
    held_closed: int | None = optional()
    held_silent: int | None = optional()
    # Watched every 50 ms from the lowering until a grace after the case closed the connections (suites/hostile/
    # cases.py): processes that ran out of descriptors and ended (a worker whose accept() raised EMFILE; its freed
    # descriptors hide it from at_limit), the processes that appeared after such an end (its supervisor replacing
    # it), and the lines of the server's stderr naming EMFILE meanwhile. Absent in records measured before.
    died_at_limit: int | None = optional()
    replaced: int | None = optional()
    emfile_logged: int | None = optional()


class VariantOutcome(Typed):
    """One connection's (or group of connections') outcome within a case (suites/hostile/cases.Variant)."""

    name: str
    passed: bool
    status: str  # what the cell shows: "400", "open", "reset", "0.9", "100→405", "cpu 97%", "n/a"
    seconds_to_close: float | None  # from the last byte sent; None: not closed, or nothing to time
    note: str
    applicable: bool
    figures: EmfileFigures | None = optional()  # case 15's measurements


class ConnectionsHeld(Typed):
    """During a slow clients' case: established connections on the server's port and, behind nginx, on nginx's."""

    server_before: int
    server_peak: int
    proxy_peak: int | None  # None: no proxy in front
    samples: int
    server_connection_seconds: float  # each sample's count times the time it covers, summed
    proxy_connection_seconds: float | None


class CaseResult(Typed):
    """One case against one design: the verdict, the probes, and what was measured around the case."""

    case: str  # the case's id
    number: int
    verdict: str  # robust, weak, stalled, died or n/a (suites/hostile/run.verdict)
    robust: bool
    survived: bool
    alive: bool
    statuses: list[str]  # each variant's status, in order
    seconds_to_close: float | None  # the slowest variant's
    probe_during: Probe | None  # None: the case sends no probe during it (emfile)
    probe_after: Probe | None  # None: the server was dead
    fds_leaked: int
    threads_leaked: int
    fds_before: int
    threads_before: int
    peak_rss_mib: float | None  # None: the sampler saw no sample
    cpu_seconds: float | None
    case_seconds: float
    variants: list[VariantOutcome]
    errors: list[str]
    stderr_tail: str  # the server's, when it died in this case
    connections_held: ConnectionsHeld | None = optional()  # slow clients' cases only (suites/hostile/run.py)

    @property
    def figures(self) -> EmfileFigures | None:
        """Case 15's figures, where its first variant measured them."""
        return self.variants[0].figures if self.variants else None


class DesignResult(Typed):
    """Every case against one design (alone, or behind nginx: `name` is then NAME+nginx)."""

    name: str
    design: str  # the catalogue's design
    title: str
    model: str
    behind_nginx: bool
    status: str  # "ok", or "failed": it died or did not start (`problems` says which)
    problems: list[str]
    stderr_tail: str
    server_commands: list[list[str]]  # every command the design was started with
    cases: list[CaseResult]

    def result(self, case_id: str) -> CaseResult | None:
        """This design's result in a case, if it ran."""
        return next((result for result in self.cases if result.case == case_id), None)

    def verdict(self, case_id: str) -> str | None:
        result = self.result(case_id)
        return None if result is None else result.verdict


class HostileRecord(Typed):
    """results/hostile.json: every case against every design (build/results/ for a quick or partial run)."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    suite: str  # "hostile"
    title: str
    mode: str  # "full" or "quick"
    command: list[str]
    settings: HostileSettings
    cases: list[HostileCase]
    environment: Environment
    started_utc: str
    finished_utc: str
    designs: list[DesignResult]
    proxy: str | None = optional()  # the nginx configuration in front of a design behind nginx (older records: none)

    def case(self, case_id: str) -> HostileCase | None:
        return next((case for case in self.cases if case.id == case_id), None)


class EmfileSetting(Typed):
    """A real server's own setting that caps the connections it holds (scripts/catalogue/hostile/emfile-settings.toml),
    as its documentation states it, and the arguments that set it on our runner."""

    server: str
    design: str  # the catalogue's design it is measured on
    setting: str
    source: str  # its documentation
    default: str  # the default, in the documentation's words
    value: str  # the value measured
    arguments: list[str]  # appended to the design's command
    why: str  # why this value


class EmfileSettingRun(Typed):
    """Case 15 against one server, at its defaults (no arguments) or with the setting."""

    arguments: list[str]
    command: list[str] | None  # None: it did not start
    result: CaseResult | None  # None: it did not start
    problem: str | None = optional()  # why there is no result
    # Around the whole case, probe after included: the server's stderr lines that name EMFILE ("Too many open
    # files"), and the processes of its group at the end that were not there before the case (workers replaced).
    emfile_logged: int | None = optional()
    processes_replaced: int | None = optional()


class EmfileSettingRow(Typed):
    """One setting: case 15 at the server's defaults and with the setting, one after the other in one run."""

    setting: EmfileSetting
    default: EmfileSettingRun
    with_setting: EmfileSettingRun


class EmfileSettingsRecord(Typed):
    """results/hostile-emfile-settings.json (suites/hostile/emfile_settings.py; build/results/ for a quick run)."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "emfile-settings"
    mode: str  # "full" or "quick"
    settings: HostileSettings
    case: HostileCase  # case 15 as the catalogue gave it
    environment: Environment
    started_utc: str
    finished_utc: str
    rows: list[EmfileSettingRow]
