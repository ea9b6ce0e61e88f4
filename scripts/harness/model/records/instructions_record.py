"""The instruction counts' record (suites/instructions.py, results/instructions/instructions.json): instructions per
request under callgrind, two measurements per row (the arithmetic is model/instruction_counts.py)."""

from __future__ import annotations

from typing import ClassVar

from harness.model.records.common import Environment
from harness.model.typed import Typed, optional
from harness.model.suite_settings import CountSettings


class CountRun(Typed):
    """One run of a server under callgrind answering `requests` GET / on one keep-alive connection (its heads are
    the row's `request_heads`)."""

    requests: int
    exchange_seconds: float | None = optional()  # absent when the server did not start
    server_exit_code: int | None = optional()
    command: list[str] | None = optional()  # the server's, valgrind's wrapper included
    instructions: int | None = optional()  # callgrind's Ir total, every process of the server; absent when not read
    error: str | None = optional()  # what went wrong (the row is then not measured further)


class Measurement(Typed):
    """One measurement of a row: a run with the low request count, then one with the high, and what one request cost."""

    runs: list[CountRun]
    instructions_per_request: float


class CountRow(Typed):
    """One row: a how-fast step, the plain or hardened design, or a design on another CPython."""

    name: str
    title: str
    group: str  # "steps", "hardened", "versions" or "fast-and-correct" (suites/instructions.py GROUPS)
    design_name: str
    step: int | None  # the step's number (how-fast or fast-and-correct chain); None for other rows
    file: str
    python: str | None  # the CPython asked for ("3.12"); None: the harness's own
    measurements: list[Measurement]
    problems: list[str]
    python_version: str | None = optional()  # as the interpreter said itself; absent when it could not run
    # "production": clients/production_heads.py's heads, each unique; absent: wrk's one-header GET, the same each time
    request_heads: str | None = optional()


class InstructionsRecord(Typed):
    """results/instructions/instructions.json (or a quick or partial run, in build/results/)."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "instructions"
    mode: str  # "full" or "quick"
    settings: CountSettings
    counter: str  # what is counted, in words
    valgrind: str  # its version line
    wrapper: list[str]  # the command before every server's (its log directory elided)
    environment: Environment
    started_utc: str
    finished_utc: str
    rows: list[CountRow]
