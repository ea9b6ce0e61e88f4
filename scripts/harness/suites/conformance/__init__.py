"""The conformance suite: a public corpus of exact requests, and what RFC 9112 / RFC 9110 ask of each.

    conformance_cases.py   the corpus (scripts/catalogue/conformance/cases.toml) and the judgement
                           of an answer (a design's, over a socket) or a parse (a reference parser's)
    conformance_run.py     every case to every HTTP design, alone and behind nginx; the reference
                           parsers; gunicorn's own corpus; the record results/conformance.json
    clients/raw_exchange.py, clients/reference_parsers.py and clients/gunicorn_corpus.py (a layer
    down) send the bytes, parse them without sockets, and fetch gunicorn's corpus.

`bench.py conformance` builds a `Plan` and calls `measure_plan`; render/conformance_tables.py
turns the record into the tables docs/conformance.md includes.

Known limits: a case is judged by what a client sees (statuses, whether the connection closed);
what the application was handed (which Host, which body) is not observed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.model.catalogue import Catalogue
from harness.model.records.conformance_record import ConformanceRecord
from harness.suites.conformance.conformance_run import run_suite

__all__ = ["Plan", "measure_plan", "run_suite"]


@dataclass(frozen=True)
class Plan:
    """`bench.py conformance`: only these designs and cases (None: all), quick or full, designs at once, whether to
    fetch gunicorn's corpus, where the record goes."""

    designs: tuple[str, ...] | None = None  # a design, or NAME+nginx behind nginx
    cases: tuple[str, ...] | None = None  # a case or a group of cases, by id
    quick: bool = False
    jobs: int | None = None  # default: the suite's `jobs`
    gunicorn_corpus: bool = True
    out: Path | None = None  # default: results/ for a complete full run, build/results/ otherwise


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, ConformanceRecord]:
    """Every case against every design and parser; the record written atomically, its path and it."""
    return run_suite(catalogue, list(plan.designs) if plan.designs else None,
                     list(plan.cases) if plan.cases else None, plan.quick, plan.out, jobs=plan.jobs,
                     with_gunicorn_corpus=plan.gunicorn_corpus)
