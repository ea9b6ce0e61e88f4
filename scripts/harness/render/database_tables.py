"""Render the real-database records (issue 21): the real call beside the simulated one, the short queries, the pool.

Reads records only (suites/runner.py measures them, in a scratch PostgreSQL). Three tables:

- database-real-vs-simulated.md: from `database-sleep`, each design that makes the 100 ms call
  for real (SELECT pg_sleep(0.1)) beside the design whose simulated call it replaces (SIMULATED_TWIN),
  per client count: both rates, the real one as a share of the simulated one, both p99s.
- database-queries.md: `database-single` and `database-multiple` (TechEmpower's single and multiple
  queries) side by side, with the p99 of each answer's wait for a pool connection (X-Pool-Wait-Us).
- database-pool.md: the `database-pool-N` records, one row per pool size and client count: the rate,
  the cap N / 0.1 s that the pool puts on it, the latency and the wait for a connection.
- database/keep-alive.md: `database-single` (wrk keeps its connections) beside `database-single-close` (the same
  query, a new connection per request): what a connection per request costs each design (issue 31).

verdict.md answers the guide's question, did the simulated call tell the truth?, in one plain sentence
(database.md includes it under its table); guide.md, which the guide pages include, adds a small table
at the most clients (each real call, what bounds its overlapping waits, its rate beside its twin's).
Every rate carries its flags (cells.rate_label, and in the guide's table the repeat flag when
results/rerun/ holds a second run of the record: figures.Figure.repeat_flag); a record not yet made
leaves a line saying so.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from harness.model import limits
from harness.model.records.scenario_record import ScenarioRecord
from harness.render.cells import cells_by_level, format_rate, rate_label, summarise_cell
from harness.render.figures import Figure
from harness.render.presentation import design_link, wide_table

SLEEP_SCENARIO = "database-sleep"
QUERY_SCENARIOS = {"database-single": "single query (GET /db)", "database-multiple": "20 queries (GET /queries)"}
POOL_SIZES = (5, 10, 20)  # the database-pool-N scenarios: the budget is 20 connections, the largest pool
POOL_SCENARIO = "database-pool-{size}"
CLOSE_SCENARIO = "database-single-close"  # database-single with keep-alive off: a connection per request
# The design each real-call design grows from: the same model with the call simulated (a sleep or a timer).
SIMULATED_TWIN = {
    "threads-psycopg-pool": "thread-pool-executor",
    "thread-per-connection-psycopg": "thread-per-connection",
    "gevent-psycopg": "gevent-thread-per-connection",
    "asyncio-asyncpg": "asyncio-streams",
    "asyncio-psycopg-pool": "asyncio-streams",
    "gunicorn-gthread-psycopg": "gunicorn-gthread",
    "uvicorn-asyncpg": "uvicorn",
    "granian-asyncpg": "granian-asgi",
}
TRUTHFUL_SHARE = 0.9  # a real call within 10% of the simulated one's rate: the simulation told the truth
# What caps the waits each real-call design overlaps (its file's constants, as database.md describes them),
# and how the verdict's sentence names the designs so bounded.
THREADS, CONNECTIONS, PER_REQUEST = "16 threads, 16 connections", "16 connections", "none; a new connection per request"
WAITS_BOUNDED_BY = {
    "threads-psycopg-pool": THREADS,
    "thread-per-connection-psycopg": PER_REQUEST,
    "gevent-psycopg": PER_REQUEST,
    "asyncio-asyncpg": CONNECTIONS,
    "asyncio-psycopg-pool": CONNECTIONS,
    "gunicorn-gthread-psycopg": THREADS,
    "uvicorn-asyncpg": CONNECTIONS,
    "granian-asyncpg": CONNECTIONS,
}
BOUND_PHRASES = {THREADS: "where 16 threads bounded the waits anyway (the thread pools: {count})",
                 CONNECTIONS: "where only the 16 connections did (the event loops: {count})",
                 PER_REQUEST: "where every request opened its own connection ({count})"}


def cells(record: ScenarioRecord) -> dict[tuple[str, float], dict[str, Any]]:
    """Every measured cell of a record, summarised, by (design, clients)."""
    return {(design.name, level): summarise_cell(runs) for design in record.designs
            for level, runs in cells_by_level(design.runs).items()}


def latency(cell: dict[str, Any] | None, key: str) -> str:
    value = (cell or {}).get("latency", {}).get(key)
    return "–" if value is None else (f"{value:,.0f}" if value >= 100 else f"{value:.1f}")


def pool_wait_ms(cell: dict[str, Any] | None, key: str) -> str:
    """The median over the cell's runs of each run's X-Pool-Wait-Us statistic `key`, in ms ('–' if none)."""
    values = [getattr(run.get("header_statistic"), key) for run in (cell or {}).get("runs", [])
              if run.get("header_statistic") and getattr(run.get("header_statistic"), key) is not None]
    if not values:
        return "–"
    middle = statistics.median(values) / 1000
    return f"{middle:,.0f}" if middle >= 100 else f"{middle:.1f}"


def footer(record: ScenarioRecord) -> str:
    """Where the numbers come from: the record, its commit, the database's version, the runs."""
    settings = record.settings
    # database_command is the scratch cluster's command line as it ran (a list of its parts; free-form in the record).
    postgres = next((part for part in record.database_command or [] if part.endswith("/postgres")), "PostgreSQL")
    connections = ("wrk keeps its connections open" if settings.keep_alive else "a new TCP connection per request "
                   "(keep-alive off: " + (settings.closes_connections or "no reason given") + ")")
    where = (f"{record.database.version.removeprefix('postgres ')}, {record.database.placement}, "
             f"{record.database.authentication}" if record.database else
             "PostgreSQL's CPU and version not recorded (a record from before issue 31)")
    return (f"Median of {settings.repeat} run(s) per cell, wrk for {settings.time_limit:g} s, {connections}; server "
            f"pinned to one CPU and wrk to the other; PostgreSQL `{postgres}`: {where}, with the settings the "
            f"record keeps (`database_command`); commit `{record.environment.commit[:10]}`, "
            f"{record.mode} run. Raw record: `results/{record.id}.json`.\n")


def answer_and(record: ScenarioRecord) -> str:
    """How a request of this record ends: the connection kept for the next one, or closed."""
    return ("answer the same 133-byte page{rows}, and keep the connection for the client's next request"
            if record.settings.keep_alive else "answer the same 133-byte page{rows}, and close")


def real_vs_simulated(record: ScenarioRecord | None) -> str:
    """Each real-call design beside its simulated twin, per client count."""
    if record is None:
        return f"*Not measured yet: `python scripts/bench.py run --scenario {SLEEP_SCENARIO}`.*\n"
    found = cells(record)
    names = [design.name for design in record.designs]
    rows = [("| Real call (pg_sleep) | Simulated twin | Clients | Req/s real / simulated | Real ÷ simulated | "
             "p99 ms real / simulated |"), "|---|---|---|---|---|---|"]
    for real in (name for name in names if name in SIMULATED_TWIN):
        twin = SIMULATED_TWIN[real]
        for clients in record.settings.concurrency:
            real_cell, twin_cell = found.get((real, clients)), found.get((twin, clients))
            if real_cell is None or twin_cell is None:
                rows.append(f"| {design_link(real)} | {design_link(twin)} | {clients} | not measured | – | – |")
                continue
            share = real_cell["rate"]["median"] / twin_cell["rate"]["median"]
            rows.append(f"| {design_link(real)} | {design_link(twin)} | {clients} | "
                        f"{flagged_rate(record, None, real, clients, real_cell)} / "
                        f"{flagged_rate(record, None, twin, clients, twin_cell)} | "
                        f"{share:.0%} | {latency(real_cell, 'p99')} / {latency(twin_cell, 'p99')} |")
    work = ("Work per request: read and parse the request head; the real design sends `SELECT pg_sleep(0.1)` on a "
            "database connection (from its pool of 16, or its own) and waits for the row, the twin waits 0.1 s itself "
            "(a sleep or a timer); both " + answer_and(record).format(rows="") + ".")
    return "\n".join(rows) + "\n\n" + work + " " + footer(record)


def queries_table(records: dict[str, ScenarioRecord]) -> str:
    """database-single and database-multiple side by side, with the wait for a pool connection."""
    present = {scenario: records[scenario] for scenario in QUERY_SCENARIOS if scenario in records}
    if not present:
        return "*Not measured yet: `python scripts/bench.py run --scenario database-single` (and `database-multiple`).*\n"
    found = {scenario: cells(record) for scenario, record in present.items()}
    names: list[str] = []
    for record in present.values():
        names += [design.name for design in record.designs if design.name not in names]
    header = ["Design"]
    for scenario, title in QUERY_SCENARIOS.items():
        if scenario in present:
            header += [f"{title}: req/s", "p99 ms", "pool wait p99 ms"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in names:
        row = [design_link(name)]
        for scenario, record in present.items():
            clients = record.settings.concurrency[0]
            cell = found[scenario].get((name, clients))
            row += ([rate_label(cell, record=record), latency(cell, "p99"), pool_wait_ms(cell, "p99")] if cell
                    else ["not measured", "–", "–"])
        rows.append("| " + " | ".join(row) + " |")
    first = next(iter(present.values()))
    work = (f"{first.settings.concurrency[0]} clients. Work per request: read and parse the request head; one "
            "`SELECT id, randomnumber FROM world WHERE id = $1` (single) or twenty of them one after the other "
            "(multiple) on one database connection, random ids from 1 to 10,000; "
            "answer the same 133-byte page, the rows in a header. Pool wait: the time the request waited "
            "for a free connection (the header `X-Pool-Wait-Us`, summarised by wrk); – for the designs with no pool "
            "(a new database connection per request).")
    # Each record's own footer: the two may differ (one re-measured, keep-alive on, beside an older one).
    same = len({(record.settings.keep_alive, record.environment.commit) for record in present.values()}) == 1
    footers = footer(first) if same else " ".join(
        f"{QUERY_SCENARIOS[scenario][:1].upper()}{QUERY_SCENARIOS[scenario][1:]}: {footer(record)}"
        for scenario, record in present.items())
    return "\n".join(rows) + "\n\n" + work + " " + footers


def pool_table(records: dict[str, ScenarioRecord]) -> str:
    """One row per pool size and client count: rate against the pool's cap, latency, wait for a connection."""
    present = {size: records[POOL_SCENARIO.format(size=size)] for size in POOL_SIZES
               if POOL_SCENARIO.format(size=size) in records}
    if not present:
        return "*Not measured yet: `python scripts/bench.py run --scenario database-pool-20` (and -5, -10).*\n"
    rows = ["| Pool | Clients | Req/s | Cap: pool ÷ 0.1 s | p50 / p99 ms | Wait for a connection p50 / p99 ms |",
            "|---|---|---|---|---|---|"]
    for size, record in present.items():
        found = cells(record)
        for clients in record.settings.concurrency:
            cell = found.get((record.designs[0].name, clients))
            if cell is None:
                rows.append(f"| {size} | {clients} | not measured | – | – | – |")
                continue
            cap = size / record.settings.delay
            rows.append(f"| {size} | {clients} | {rate_label(cell, record=record)} | {format_rate(cap)} | "
                        f"{latency(cell, 'p50')} / {latency(cell, 'p99')} | "
                        f"{pool_wait_ms(cell, 'p50')} / {pool_wait_ms(cell, 'p99')} |")
    first = next(iter(present.values()))
    design = first.designs[0].name
    work = (f"{design_link(design)}, one process, its pool of 5, 10 or 20 connections (`--pool-size`; 20 is the "
            "budget). Work per request: read and parse the request head, wait for a free connection, send "
            "`SELECT pg_sleep(0.1)` and wait for the row, " + answer_and(first).format(rows="") + ".")
    return "\n".join(rows) + "\n\n" + work + " " + footer(first)


def connection_cost_table(records: dict[str, ScenarioRecord]) -> str:
    """database-single beside database-single-close, per design: the rate with connections kept and with a new
    connection per request, their ratio, both p99s."""
    kept, closed = records.get("database-single"), records.get(CLOSE_SCENARIO)
    if kept is None or closed is None:
        return (f"*Not measured yet: `python scripts/bench.py run --scenario {CLOSE_SCENARIO}` (and "
                "`database-single`).*\n")
    found_kept, found_closed = cells(kept), cells(closed)
    clients = kept.settings.concurrency[0]
    rows = ["| Design | Req/s, connections kept | Req/s, a new connection per request | Kept ÷ new | "
            "p99 ms kept / new |", "|---|---|---|---|---|"]
    for name in [design.name for design in kept.designs]:
        on, off = found_kept.get((name, clients)), found_closed.get((name, clients))
        if on is None or off is None:
            rows.append(f"| {design_link(name)} | not measured | – | – | – |")
            continue
        ratio = on["rate"]["median"] / off["rate"]["median"]
        rows.append(f"| {design_link(name)} | {rate_label(on, record=kept)} | {rate_label(off, record=closed)} | "
                    f"{ratio:.1f}× | {latency(on, 'p99')} / {latency(off, 'p99')} |")
    work = (f"{clients} clients, `GET /db`. A new connection per request: `results/{CLOSE_SCENARIO}.json`, wrk "
            "sending `Connection: close`; connections kept: `results/database-single.json`.")
    return "\n".join(rows) + "\n\n" + work + " " + footer(closed)


def flagged_rate(record: ScenarioRecord, rerun: ScenarioRecord | None, name: str, clients: float,
                 cell: dict[str, Any]) -> str:
    """A cell's median with every flag a quoted figure carries: spread, short runs, tool-bound, second run."""
    ceiling = limits.ceilings(record).get(clients)
    repeat = Figure(f"{name}-c{clients:g}", SLEEP_SCENARIO, name, clients, "rate").repeat_flag(record, rerun)
    return rate_label(cell, ceiling, record=record) + repeat


def verdict(record: ScenarioRecord | None, rerun: ScenarioRecord | None = None) -> tuple[str, str]:
    """Did the simulated call tell the truth? A plain sentence, and a table of each real call beside its twin at the
    most clients: what bounds its waits, both rates (flagged), the share."""
    if record is None:
        return f"*Not measured yet: `python scripts/bench.py run --scenario {SLEEP_SCENARIO}`.*\n", ""
    found = cells(record)
    clients = max(record.settings.concurrency)
    truthful: dict[str, list[bool]] = {bound: [] for bound in BOUND_PHRASES}  # per bound: each design's yes or no
    rows = ["| Real call | Its waits bounded by | Req/s real / simulated twin | Real ÷ simulated |",
            "|---|---|---|---|"]
    for real, twin in SIMULATED_TWIN.items():
        real_cell, twin_cell = found.get((real, clients)), found.get((twin, clients))
        if not real_cell or not twin_cell:
            rows.append(f"| {design_link(real)} | {WAITS_BOUNDED_BY[real]} | not measured | – |")
            continue
        share = real_cell["rate"]["median"] / twin_cell["rate"]["median"]
        truthful[WAITS_BOUNDED_BY[real]].append(share >= TRUTHFUL_SHARE)
        rows.append(f"| {design_link(real)} | {WAITS_BOUNDED_BY[real]} | "
                    f"{flagged_rate(record, rerun, real, clients, real_cell)} / "
                    f"{flagged_rate(record, rerun, twin, clients, twin_cell)} ({design_link(twin)}) | {share:.0%} |")
    answers = []
    for bound, verdicts in truthful.items():
        if verdicts:
            word = "yes" if all(verdicts) else "no" if not any(verdicts) else "for some"
            answers.append(f"{word} " + BOUND_PHRASES[bound].format(count=f"{sum(verdicts)} of {len(verdicts)}"))
    sentence = (f"**Did the simulated call tell the truth?** At {clients} clients, counting a real call within "
                f"{1 - TRUTHFUL_SHARE:.0%} of its simulated twin's rate as the truth: " + "; ".join(answers) + ".")
    caption = (f"*{clients} clients, each request one 100 ms wait: PostgreSQL's `pg_sleep(0.1)` through the design's "
               f"driver, or the twin's own sleep. Median of {record.settings.repeat} runs of "
               f"{record.settings.time_limit:g} s (`results/{SLEEP_SCENARIO}.json`, "
               f"{record.started_utc[:10]}); the whole table, at every client count, is on "
               "[the database page](/database.md#the-measurement)."
               + (" ⚠ second run: the run straight after this one, of the same commit, put the median outside the "
                  "interval of this run's repetitions; the flag gives its median." if rerun else "") + "*")
    return sentence + "\n", "\n".join(rows) + "\n\n" + caption + "\n"


def database_files(records: dict[str, ScenarioRecord], generated_dir: Path, header: str,
                   rerun_records: dict[str, ScenarioRecord] | None = None) -> dict[Path, str]:
    """The database page's three tables and the guide's verdict (its figures flagged by results/rerun/ too)."""
    directory = generated_dir / "database"
    sleep = records.get(SLEEP_SCENARIO)
    rerun = (rerun_records or {}).get(SLEEP_SCENARIO)
    sentence, table = verdict(sleep, rerun)
    verdict_source = f"results/{SLEEP_SCENARIO}.json" + (f", results/rerun/{SLEEP_SCENARIO}.json" if rerun else "")
    return {
        directory / "real-vs-simulated.md": header.format(source=f"results/{SLEEP_SCENARIO}.json")
        + wide_table(real_vs_simulated(sleep)),
        directory / "queries.md": header.format(source="results/database-single.json, results/database-multiple.json")
        + wide_table(queries_table(records)),
        directory / "pool.md": header.format(source="results/database-pool-*.json") + pool_table(records),
        directory / "keep-alive.md": header.format(
            source=f"results/database-single.json, results/{CLOSE_SCENARIO}.json") + wide_table(
            connection_cost_table(records)),
        directory / "verdict.md": header.format(source=verdict_source) + sentence,
        # The guide pages (which-model.md, compare.md): the sentence and the table behind it.
        directory / "guide.md": header.format(source=verdict_source) + sentence + "\n" + table,
    }
