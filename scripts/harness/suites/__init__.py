"""Suites: each measurement the harness makes. Imports the model, the system and the clients; none renders.

Every suite has one shape, `Suite` below: a module with

    Plan            a frozen dataclass: what one run of the suite measures, from the command line's values
                    (names, --quick, --out, ...), plain typed fields, no argparse
    measure_plan    measure_plan(catalogue, plan) -> (path, record): measure what the plan says, write the
                    record atomically, return where it went and the typed record

and nothing else that bench.py calls. bench.py (the only command line) turns argv into a Plan, calls
measure_plan, prints from the record and chooses the exit code; no `argparse.Namespace` goes below it.
The suites, each with its subcommand:

    run             runner            one scenario of the catalogue: every design, every level, its ceiling
                                      (interleave.measure_group measures several scenarios' plans round robin)
    restart         restart           restarts under steady load, every request recorded
    balance         balance           how evenly event-loop workers share connections
    gil-dependencies gil_dependencies which dependencies install on each CPython, and which turn the GIL on
    hostile         hostile           hostile clients against every HTTP design
    how-fast        how_fast          the how-fast steps, or a profile of the fastest design
    idle            idle              many idle keep-alive connections held: memory and latency
    instructions    instructions      instructions per request under callgrind
    conformance     conformance       RFC 9112 conformance cases against every HTTP design and three parsers
    deployment      deployment        behind nginx (the idle-timeout race) and past capacity
    recipe          recipe            the recipe's configurations on the real stack; a CPU quota
    streaming       streaming         server-sent-event streams: held, slow readers, a stop

tests/harness/test_suite_shape.py keeps this list, the suites' shape and bench.py's table of subcommands in step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar

from harness.model.catalogue import Catalogue

PlanT = TypeVar("PlanT", contravariant=True)
RecordT = TypeVar("RecordT", covariant=True)


class Suite(Protocol[PlanT, RecordT]):
    """The one shape of a suite module (see the module's docstring)."""

    def measure_plan(self, catalogue: Catalogue, plan: PlanT) -> tuple[Path, RecordT]:
        """Measure what the plan says, write the record atomically; its path and the record."""
        ...
