"""The hostile suite: what a server facing the internet meets, against every HTTP design.

    cases.py    the cases (scripts/catalogue/hostile/cases.toml) read into Case objects, and
                each case kind: the bytes it sends, how it judges what comes back
    run.py      every case against every design: the probes, fd/thread counts and resources
                measured around each case, a design restarted after it dies, the record
    emfile_settings.py  case 15 against real servers at their defaults and with their own cap on
                connections (`bench.py hostile --emfile-settings`, results/hostile-emfile-settings.json)
    clients/raw_http.py (a layer down) is the client that sends raw bytes and reads what comes back.

`bench.py hostile` builds a `Plan` and calls `measure_plan` (the suites' one shape: run.py's run_suite, or
emfile_settings.py's run_emfile_settings with --emfile-settings); the record is results/hostile.json, which
render/survival.py turns into the tables docs/survive.md includes.

Known limits: a case reads what a client sees, so "closed" means the client saw EOF or
a reset; a server that stops reading but keeps the socket open is "still open" at the
bound. On loopback a 1 MiB response fits in the kernel's send buffer, so the slow
reader (case 14) stalls only servers that keep more than that in flight. Every
connection goes to 127.0.0.1, is bounded in time (the suite's `bound`) and count, and
is closed before the case returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.model.catalogue import Catalogue
from harness.model.records.hostile_record import EmfileSettingsRecord, HostileRecord
from harness.suites.hostile.emfile_settings import run_emfile_settings
from harness.suites.hostile.run import run_suite

__all__ = ["Plan", "measure_plan", "run_suite"]


@dataclass(frozen=True)
class Plan:
    """`bench.py hostile`: only these designs and cases (None: all), quick or full, designs at once, where the record
    goes; or, with emfile_settings, case 15 against the real servers at their defaults and with their own cap."""

    designs: tuple[str, ...] | None = None  # a design, or NAME+nginx behind nginx
    cases: tuple[str, ...] | None = None  # a case, by number or id
    quick: bool = False
    jobs: int | None = None  # default: the suite's `jobs`
    out: Path | None = None  # default: results/ for a complete full run, build/results/ otherwise
    emfile_settings: bool = False


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, HostileRecord | EmfileSettingsRecord]:
    """The cases against the designs (or the emfile settings); the record written atomically, its path and it."""
    if plan.emfile_settings:
        return run_emfile_settings(catalogue, plan.quick, plan.out)
    return run_suite(catalogue, list(plan.designs) if plan.designs else None,
                     list(plan.cases) if plan.cases else None, plan.quick, plan.out, jobs=plan.jobs)
