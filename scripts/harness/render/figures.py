"""Named figures: single numbers the prose quotes, computed from the records like the tables.

A page that argues from a number ("the epoll loop answered 17,706 requests a
second") must not type it: the next benchmark run would make it wrong. Instead
the number is a named figure here, a query over one cell of one record
(scenario, design, level, metric), and `bench.py render` writes every figure
into docs/_generated/figures.md as a snippet section of its own:

    <!-- --8<-- [start:hello-epoll-c50-rate] -->
    17,706 req/s
    <!-- --8<-- [end:hello-epoll-c50-rate] -->

A page quotes it on a line of its own inside a paragraph (Markdown joins the
lines), `--8<-- "docs/_generated/figures.md:hello-epoll-c50-rate"`, and
`render --check` fails when a record changes and the file was not re-rendered.

Every value is the median over the cell's repetitions, like the tables' bold
numbers, and carries its unit. A figure whose record, design, level or metric
is missing is an error that names it (FigureError): a page never shows a blank.

A figure carries the flags of the number it quotes, never another's. A requests/s
figure carries the flags its table cell prints (cells.rate_flags: ⚠ spread when the
runs' rates disagreed, ⚠ short runs, ⚠ tool-bound by model/limits.py) and the repeat
flag below. A latency carries the spread of that latency over the runs and the short
runs flag; a CPU time, a memory figure or a process count only the spread of its own
values (a server's CPU seconds are its own whatever limited the rate); a count
(complete, failed) or a duration none (METRIC_FLAGS). A flagged figure renders only
when it is declared `allow_flagged=True`, the page's word that its sentence shows the
flag and claims no more than the number holds; without it rendering fails with a
FigureError naming the figure and the flag, so a flag cannot get lost on the way to prose.

A figure also carries its cell's repeat flag: when results/rerun/ holds a second run
that is a repeat pair of the record, a requests/s figure (repeatability.not_comparable finds nothing: two
consecutive runs of one commit on one kernel, same settings) and run B's median of the
cell lies outside the interval run A's repetitions give its median (the criterion of
the repeatability page, repeatability.Cell.agrees), the figure says so after the number
(' ⚠ second run 3,040 req/s (−30%)'). That flag is carried, never refused: the figure is
still this run's median, and the flag tells the reader the next run put it elsewhere.

A figure also names where it comes from: the record and the day it was measured,
after the number in small type ("17,706 req/s [sweep-hello, 2026-11-24]"). Two
pages that quote the same design from two experiments (a peak run and a pipelining
run, a CPU-bound run and a scaling run) then say so wherever the numbers differ.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.model import limits
from harness.model.records.scenario_record import Outcome, Run, ScenarioRecord
from harness.model.stats import spread
from harness.render.cells import (
    cells_by_level,
    format_rate,
    level_key,
    rate_flags,
    short_run_warning,
    spread_warning,
    summarise_cell,
)
from harness.render.repeatability import compare_cells, not_comparable


class FigureError(ValueError):
    """A figure the pages quote cannot be computed from the records."""


def _median(runs: list[Run], read: Callable[[Run], float | None], what: str) -> float:
    values = [read(run) for run in runs]
    if any(value is None for value in values):
        raise KeyError(what)
    return statistics.median(values)


def _resource(key: str) -> Callable[[Run], float | None]:
    return lambda run: getattr(run.server_resources, key) if run.server_resources else None


def _latency(key: str) -> Callable[[Run], float | None]:
    return lambda run: getattr(run.latency_ms, key) if run.latency_ms else None


def _milliseconds(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 1000 else f"{value:.1f} ms"


# metric -> how to read one run's value (the rate's and the counts' spreads are not read through it)
METRIC_READERS: dict[str, Callable[[Run], float | None]] = {
    "p50": _latency("p50"), "p99": _latency("p99"), "max": _latency("max"),
    "cpu": _resource("cpu_seconds"), "cpu-per-1000": _resource("cpu_seconds_per_1000_requests"),
    "rss": _resource("peak_rss_mib"), "processes": _resource("peak_processes"),
}

# metric -> (how to read it from the cell's runs, how to print the median with its unit)
METRICS: dict[str, tuple[Callable[[list[Run]], float], Callable[[float], str]]] = {
    "rate": (lambda runs: summarise_cell(runs)["rate"]["median"], lambda value: f"{format_rate(value)} req/s"),
    "p50": (lambda runs: _median(runs, _latency("p50"), "latency p50"), _milliseconds),
    "p99": (lambda runs: _median(runs, _latency("p99"), "latency p99"), _milliseconds),
    "max": (lambda runs: _median(runs, _latency("max"), "latency max"), _milliseconds),
    "complete": (lambda runs: _median(runs, lambda run: run.complete, "complete"),
                 lambda value: f"{value:,.0f} responses"),
    "duration": (lambda runs: _median(runs, lambda run: run.duration_s, "duration_s"),
                 lambda value: f"{value:.2f} s"),
    "window": (lambda runs: _median(runs, lambda run: run.time_limit, "time_limit"),
               lambda value: f"{value:g} s"),
    "cpu": (lambda runs: _median(runs, _resource("cpu_seconds"), "server CPU seconds"),
            lambda value: f"{value:.2f} CPU-seconds"),
    "cpu-per-1000": (lambda runs: _median(runs, _resource("cpu_seconds_per_1000_requests"),
                                          "server CPU seconds per 1,000 requests"),
                     lambda value: f"{value:.3f} CPU-seconds per 1,000 requests"),
    "rss": (lambda runs: _median(runs, _resource("peak_rss_mib"), "peak RSS"), lambda value: f"{value:.1f} MiB"),
    "processes": (lambda runs: _median(runs, _resource("peak_processes"), "peak processes"),
                  lambda value: f"{value:,.0f}"),
    "failed": (lambda runs: _median(runs, lambda run: run.failed, "failed"),
               lambda value: f"{value:,.0f} failed"),
}


# metric -> the flags it carries: "rate" (the cell's rate flags: spread of the rate, short runs, tool-bound, and the
# repeat flag), "spread" (the spread of the metric's own values over the runs), "short" (runs under 1 s).
METRIC_FLAGS: dict[str, frozenset[str]] = {
    "rate": frozenset({"rate"}),
    **{metric: frozenset({"spread", "short"}) for metric in ("p50", "p99", "max")},
    **{metric: frozenset({"spread"}) for metric in ("cpu", "cpu-per-1000", "rss", "processes")},
    **{metric: frozenset() for metric in ("complete", "duration", "window", "failed")},
}


@dataclass(frozen=True)
class Figure:
    """One number a page quotes: the median `metric` of one design's cell at one level of one scenario."""

    name: str  # the snippet section: lower case, digits and dashes
    scenario: str
    design: str
    level: float  # the concurrency, or the offered rate in an open-loop rate sweep
    metric: str  # a key of METRICS
    allow_flagged: bool = False  # the page's sentence shows the cell's flag and leans on the number no further

    def _record_and_design(self, records: dict[str, ScenarioRecord]) -> tuple[ScenarioRecord, Outcome, bool]:
        """The record, the design's outcome (or the tool's ceiling's), and whether it is the ceiling."""
        record = records.get(self.scenario)
        if record is None:
            raise FigureError(f"figure {self.name!r}: no record results/{self.scenario}.json")
        design = record.design(self.design)
        if design is not None:
            return record, design, False
        if record.ceiling is not None and record.ceiling.name == self.design:
            return record, record.ceiling, True
        raise FigureError(f"figure {self.name!r}: results/{self.scenario}.json has no design {self.design!r}")

    def cell_runs(self, records: dict[str, ScenarioRecord]) -> list[Run]:
        record, design, _ = self._record_and_design(records)
        runs = cells_by_level(design.runs, level_key(record)).get(self.level)
        if not runs:
            raise FigureError(f"figure {self.name!r}: {self.design!r} in results/{self.scenario}.json has no "
                              f"successful run at level {self.level:g}")
        return runs

    def flag(self, records: dict[str, ScenarioRecord]) -> str:
        """The flags of the number this figure quotes (METRIC_FLAGS), or '': a rate's as its table cell prints
        them (' ⚠ spread 136%', ' ⚠ tool-bound (tool CPU 97%)'), another metric's spread of its own values."""
        record, _, is_ceiling = self._record_and_design(records)
        runs = self.cell_runs(records)
        cell = summarise_cell(runs)
        kinds = METRIC_FLAGS[self.metric]
        if "rate" in kinds:
            ceiling = None if is_ceiling else limits.ceilings(record).get(self.level)
            return rate_flags(cell, ceiling, record=record)
        text = ""
        if "spread" in kinds:
            values = [value for value in (METRIC_READERS[self.metric](run) for run in runs) if value is not None]
            if values and statistics.median(values):
                text += spread_warning(spread(values))
        if "short" in kinds:
            text += short_run_warning(record, cell)
        return text

    def repeat_flag(self, first: ScenarioRecord, second: ScenarioRecord | None) -> str:
        """' ⚠ second run 3,040 req/s (−30%)' when the repeat pair's run B put this cell's median outside run A's
        interval (repeatability.Cell.agrees); '' without a second run, for a pair that is not a repeat pair (the
        repeatability page says why), or when B agrees."""
        if second is None or not_comparable(first, second):
            return ""
        cell = next((cell for cell in compare_cells(first, second)
                     if (cell.design, cell.level) == (self.design, self.level)), None)
        if cell is None or not cell.compared or cell.agrees or cell.first is None or cell.second is None:
            return ""
        change = (cell.second - cell.first) / cell.first
        # Under 1% a whole percent would print 0%: one significant digit then (tight intervals can put so small a
        # change outside them).
        size = f"{abs(change):.0%}" if abs(change) >= 0.01 else f"{abs(change) * 100:.1g}%"
        return f" ⚠ second run {format_rate(cell.second)} req/s ({'−' if change < 0 else '+'}{size})"

    def value(self, records: dict[str, ScenarioRecord], rerun_records: dict[str, ScenarioRecord] | None = None) -> str:
        """The median with its unit and its cell's flag, as the page prints it; a flagged cell needs allow_flagged."""
        if self.metric not in METRICS:
            raise FigureError(f"figure {self.name!r}: unknown metric {self.metric!r} (known: {', '.join(METRICS)})")
        read, show = METRICS[self.metric]
        runs = self.cell_runs(records)
        try:
            shown = show(read(runs))
        except KeyError as missing:
            raise FigureError(f"figure {self.name!r}: the runs of {self.design!r} at level {self.level:g} in "
                              f"results/{self.scenario}.json do not record {missing.args[0]}") from None
        flag = self.flag(records)
        if flag and not self.allow_flagged:
            raise FigureError(f"figure {self.name!r}: {self.design!r} at level {self.level:g} in "
                              f"results/{self.scenario}.json is flagged{flag}; rewrite the sentence so it does not "
                              f"lean on this number and drop the figure, or declare it allow_flagged=True and let "
                              f"the sentence show the flag")
        repeat = "" if "rate" not in METRIC_FLAGS[self.metric] else self.repeat_flag(
            records[self.scenario], (rerun_records or {}).get(self.scenario))
        return shown + flag + repeat

    def citation(self, records: dict[str, ScenarioRecord]) -> str:
        """Which record and which day: shown after the number, so a reader can tell two experiments apart."""
        return f'<small class="figure-source">[{self.scenario}, {records[self.scenario].started_utc[:10]}]</small>'


def _figures(scenario: str, design: str, level: float, metrics: Sequence[str], prefix: str,
             allow_flagged: bool = False) -> list[Figure]:
    return [Figure(f"{prefix}-{metric}", scenario, design, level, metric, allow_flagged) for metric in metrics]


# The figures the site's pages quote, by page topic. Names say scenario, design, level and metric.
# allow_flagged=True: the cell is flagged today and the page's sentence shows the flag (see the module header).
SITE_FIGURES: list[Figure] = [
    # The hello-world sweep: a C server and a Python loop that tie (compare.md, which-model.md).
    # Both tool-bound: compare.md's paragraph is about exactly that, and reads their CPU as the evidence.
    *_figures("sweep-hello", "epoll-loop", 50, ["rate", "cpu", "cpu-per-1000"], "hello-epoll-c50", allow_flagged=True),
    *_figures("sweep-hello", "nginx", 50, ["rate", "cpu", "cpu-per-1000"], "hello-nginx-c50", allow_flagged=True),
    *_figures("sweep-hello", "uvicorn", 1, ["rate"], "hello-uvicorn-c1", allow_flagged=True),
    *_figures("sweep-hello", "asyncio-streams", 1, ["rate"], "hello-streams-c1", allow_flagged=True),
    # The I/O sweep: 100 ms calls, every model, and the edge of a 1 s window.
    # epoll at 1,000 clients: its runs spread over 38% in the re-run of 2026-11-28 (5,710-8,009 req/s; the repeat
    # run 5,885-8,055), its CPU over 48%: the pages show the flags with the figures.
    *_figures("sweep-io", "epoll-loop", 1000, ["rate", "cpu"], "io-epoll-c1000", allow_flagged=True),
    *_figures("sweep-io", "epoll-loop", 1000, ["window"], "io-epoll-c1000"),
    *_figures("sweep-io", "nginx", 1000, ["rate", "cpu"], "io-nginx-c1000", allow_flagged=True),
    *_figures("sweep-io", "uvicorn", 1000, ["rate", "p50", "p99", "cpu"], "io-uvicorn-c1000", allow_flagged=True),
    *_figures("sweep-io", "asyncio-streams", 1000, ["rate", "p50", "p99", "cpu"], "io-streams-c1000",
              allow_flagged=True),
    *_figures("sweep-io", "thread-per-connection", 1000, ["rate", "rss"], "io-threads-c1000"),
    *_figures("sweep-io", "thread-per-connection", 1, ["rate", "complete", "duration", "p50"], "io-threads-c1"),
    *_figures("sweep-io", "thread-per-connection", 10, ["rate", "complete"], "io-threads-c10"),
    *_figures("sweep-io", "thread-pool-executor", 500, ["p50"], "io-pool-c500"),
    # prefork at 1,000 clients: runs from 15 to 74 req/s (⚠ spread 136%); which-model.md quotes 500 instead.
    *_figures("sweep-io", "prefork", 500, ["rate", "rss", "processes"], "io-prefork-c500"),
    *_figures("sweep-io", "epoll-loop", 1000, ["rss"], "io-epoll-c1000"),
    # Ten thousand clients.
    *_figures("sweep-10k", "epoll-loop", 10000, ["rate", "cpu"], "tenk-epoll", allow_flagged=True),
    *_figures("sweep-10k", "nginx", 10000, ["rate", "cpu"], "tenk-nginx", allow_flagged=True),
    *_figures("sweep-10k", "asyncio-streams", 10000, ["rate"], "tenk-streams", allow_flagged=True),
    # Its second run's medians at 10,000 clients fell outside this run's intervals: the figures carry the repeat flag.
    *_figures("async-python-part-1", "threaded-echo", 10000, ["rate", "failed"], "echo-threads-c10000"),
    *_figures("async-python-part-1", "threaded-echo", 10000, ["rss"], "echo-threads-c10000", allow_flagged=True),
    *_figures("async-python-part-1", "asyncio-echo", 10000, ["rate", "failed", "rss"], "echo-asyncio-c10000"),
    # CPU-bound work on two cores: which-model.md's table shows each figure with its flag (the one-CPU designs at
    # 182-202 req/s, the two process designs at 371, so a spread of up to 22% changes no comparison it makes).
    *_figures("cpu-bound", "thread-per-connection", 10, ["rate"], "cpu-threads-c10", allow_flagged=True),
    *_figures("cpu-bound", "asyncio-streams", 10, ["rate"], "cpu-streams-c10", allow_flagged=True),
    *_figures("cpu-bound", "process-pool", 10, ["rate"], "cpu-process-pool-c10", allow_flagged=True),
    *_figures("cpu-bound", "prefork", 10, ["rate"], "cpu-prefork-c10", allow_flagged=True),
    *_figures("cpu-bound", "sequential-sockets", 10, ["rate"], "cpu-sequential-c10", allow_flagged=True),
    # A blocking call the loop cannot await (from-scratch).
    *_figures("from-scratch", "selectors-blocking-sleep", 10, ["rate"], "scratch-blocking-sleep"),
    *_figures("from-scratch", "asyncio-executor", 10, ["rate"], "scratch-executor"),
    *_figures("from-scratch", "asyncio-streams", 10, ["rate"], "scratch-streams"),
    *_figures("from-scratch", "thread-per-connection", 10, ["rate"], "scratch-threads"),
    # Designing servers: straight and behind nginx.
    *_figures("designing-servers", "thread-pool-executor", 50, ["rate", "cpu", "duration"], "designing-thread-pool",
              allow_flagged=True),
    *_figures("designing-servers", "thread-per-connection", 50, ["rate"], "designing-threads", allow_flagged=True),
    *_figures("designing-servers", "sequential-sockets", 50, ["cpu", "duration"], "designing-sequential",
              allow_flagged=True),
    *_figures("designing-servers-behind-nginx", "thread-per-connection", 50, ["rate"], "proxied-threads", allow_flagged=True),
    *_figures("designing-servers-behind-nginx", "thread-pool-executor", 50, ["rate"], "proxied-thread-pool", allow_flagged=True),
    *_figures("designing-servers-behind-nginx", "sequential-sockets", 50, ["rate"], "proxied-sequential", allow_flagged=True),
    *_figures("designing-servers-behind-nginx", "fork-per-connection", 50, ["rate"], "proxied-fork", allow_flagged=True),
    # Open loop: a queue a closed-loop tool does not show.
    *_figures("open-loop", "thread-pool-queue", 160, ["rate", "p50"], "open-pool-160"),
    *_figures("open-loop", "thread-per-connection", 160, ["rate", "p50"], "open-threads-160"),
    # The concurrency-models article: the careful and the naive sequential server.
    *_figures("concurrency-models", "sequential-sockets", 8, ["rate", "cpu", "duration"], "models-sequential",
              allow_flagged=True),
    # A real PostgreSQL (database.md, beside TechEmpower's Round 20): one query, and twenty one after the other.
    *_figures("database-single", "threads-psycopg-pool", 50, ["rate"], "db-single-threads-pool"),
    *_figures("database-single", "uvicorn-asyncpg", 50, ["rate"], "db-single-uvicorn", allow_flagged=True),
    *_figures("database-single", "granian-asyncpg", 50, ["rate"], "db-single-granian", allow_flagged=True),
    *_figures("database-single", "gunicorn-gthread-psycopg", 50, ["rate"], "db-single-gthread", allow_flagged=True),
    *_figures("database-multiple", "uvicorn-asyncpg", 50, ["rate", "p99"], "db-multiple-uvicorn", allow_flagged=True),
    *_figures("database-multiple", "granian-asyncpg", 50, ["rate", "p99"], "db-multiple-granian", allow_flagged=True),
    *_figures("database-multiple", "asyncio-asyncpg", 50, ["rate"], "db-multiple-asyncio-asyncpg", allow_flagged=True),
    *_figures("database-multiple", "gunicorn-gthread-psycopg", 50, ["rate", "p99"], "db-multiple-gthread",
              allow_flagged=True),
    *_figures("database-multiple", "threads-psycopg-pool", 50, ["rate"], "db-multiple-threads-pool"),
    *_figures("database-multiple", "threads-psycopg-pool", 50, ["p99"], "db-multiple-threads-pool", allow_flagged=True),
    *_figures("database-multiple", "thread-per-connection-psycopg", 50, ["p99"], "db-multiple-thread-per-connection",
              allow_flagged=True),
    *_figures("database-multiple", "gevent-psycopg", 50, ["p99"], "db-multiple-gevent", allow_flagged=True),
]


# A table prints a flag as a mark and a word (cells.rate_flags, spread_warning, short_run_warning, repeat_flag); a
# sentence that quotes the number says it in words a newcomer reads (issue 35). Each pattern is one flag's table
# text; methodology.md ("What a flag beside a number means") gives each flag's exact rule.
FLAG_WORDS = [
    (re.compile(r"spread (?P<size>\d+%)"), "varied by {size} across runs"),
    (re.compile(r"tool-bound \(tool CPU (?P<busy>\d+%)\)"), "at the load tool's limit, its CPU {busy} busy"),
    (re.compile(r"tool-bound \((?P<share>\d+%) of ceiling\)"),
     "at the load tool's limit, {share} of the most it reached"),
    (re.compile(r"(?P<seconds>[\d.]+) s runs"), "from runs of only {seconds} s"),
    (re.compile(r"second run (?P<rate>[\d,.]+ req/s) \((?P<change>[−+][\d.]+%)\)"),
     "a second run measured {rate}, {change}, outside this run's range"),
]


def in_words(value: str) -> str:
    """'3,621 req/s ⚠ spread 70% ⚠ second run 4,343 req/s (+20%)' -> '3,621 req/s (⚠ varied by 70% across runs; a
    second run measured 4,343 req/s, +20%)': the figure as a sentence quotes it. A flag without words stops rendering."""
    number, *flags = value.split(" ⚠ ")
    if not flags:
        return value
    said = []
    for flag in flags:
        for pattern, words in FLAG_WORDS:
            match = pattern.fullmatch(flag)
            if match:
                said.append(words.format(**match.groupdict()))
                break
        else:
            raise FigureError(f"the flag {flag!r} has no words for a sentence (render/figures.py FLAG_WORDS)")
    return f"{number} (⚠ {'; '.join(said)})"


def figures_page(records: dict[str, ScenarioRecord], figures: Sequence[Figure] = tuple(SITE_FIGURES),
                 rerun_records: dict[str, ScenarioRecord] | None = None) -> str:
    """Every figure as a snippet section, in the order given, each with its flags (its repeat flag from
    `rerun_records`, results/rerun/); raises FigureError on the first that fails."""
    names = [figure.name for figure in figures]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise FigureError(f"figure names used twice: {', '.join(repeated)}")
    sections = []
    for figure in figures:
        source = f"results/{figure.scenario}.json, {figure.design}, level {figure.level:g}, {figure.metric}"
        sections.append(f"<!-- {source} --8<-- [start:{figure.name}] -->\n"
                        f"{in_words(figure.value(records, rerun_records))} {figure.citation(records)}\n"
                        f"<!-- --8<-- [end:{figure.name}] -->\n")
    return "".join(sections)
