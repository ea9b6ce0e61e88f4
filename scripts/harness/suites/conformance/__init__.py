"""The conformance suite: a public corpus of exact requests, and what RFC 9112 / RFC 9110 ask of each.

    conformance_cases.py   the corpus (scripts/catalogue/conformance/cases.toml) and the judgement
                           of an answer (a design's, over a socket) or a parse (a reference parser's)
    conformance_run.py     every case to every HTTP design, alone and behind nginx; the reference
                           parsers; gunicorn's own corpus; the record results/conformance.json
    clients/raw_exchange.py, clients/reference_parsers.py and clients/gunicorn_corpus.py (a layer
    down) send the bytes, parse them without sockets, and fetch gunicorn's corpus.

`bench.py conformance` calls `command` (argument parsing: `add_arguments`); render/conformance_tables.py
turns the record into the tables docs/conformance.md includes.

Known limits: a case is judged by what a client sees (statuses, whether the connection closed);
what the application was handed (which Host, which body) is not observed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.model.catalogue import Catalogue
from harness.model.records.conformance_record import ConformanceRecord
from harness.suites.conformance.conformance_run import run_suite

__all__ = ["add_arguments", "run_suite"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--design", action="append", help="only this design, or NAME+nginx behind nginx (repeatable)")
    parser.add_argument("--case", action="append", help="only this case or group of cases, by id (repeatable)")
    parser.add_argument("--quick", action="store_true", help="two designs (hardened, asyncio-streams), none behind nginx")
    parser.add_argument("--jobs", type=int, help="designs run at once (default: the suite's `jobs`)")
    parser.add_argument("--no-gunicorn-corpus", action="store_true",
                        help="skip fetching gunicorn's request corpus with pip")
    parser.add_argument("--out", type=Path, help="directory for conformance.json (default: results/ for a complete "
                                                 "full run, build/results/ otherwise)")


def run(catalogue: Catalogue, args: argparse.Namespace) -> tuple[Path, ConformanceRecord]:
    return run_suite(catalogue, args.design, args.case, args.quick, args.out, jobs=args.jobs,
                     with_gunicorn_corpus=not args.no_gunicorn_corpus)
