"""The hostile suite's run: every case against every design, with the same measurements around each, one record.

Around every case (cases.py) the run measures the same things, whatever the case:

- a separate probe client (GET /, 200 within 2 s) sent while the case is under way,
  and another after it: both served means the design *survived*;
- the status each connection got and how long the server took to close it;
- the design's process group before and after: open fds (/proc/PID/fd) and threads
  (/proc/PID/task), summed, so a leak shows as a difference; peak RSS and CPU seconds
  during the case (system/resources.py); whether the process is still alive;
- during the slow clients' cases (SERVER_VIEW_KINDS), the most established connections the
  server's own port held, and nginx's when it is in front (system/connections.py): what the
  proxy's buffering leaves the server to hold.

A design that dies is a finding: it is recorded with its stderr tail, started again
for the remaining cases, and the run exits 1 at the end. Designs run `jobs` at a time,
each with its own port, process group and log directory; every server is stopped
(process groups, try/finally) before its design's run returns, and the record is
written to results/ (a complete run) or build/ in one atomic write.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from harness.clients import raw_http, verify
from harness.model.catalogue import Catalogue, UnknownNameError
from harness.model.records import record_path, write_record_atomic
from harness.model.records.hostile_record import CaseResult, ConnectionsHeld, DesignResult, HostileRecord, Probe
from harness.model.suite_settings import HostileSettings
from harness.suites.hostile.cases import CASE_KINDS, Case, Suite, Target, Variant, load_suite
from harness.suites.subjects import PROXIED_SUFFIX, PROXY_TEMPLATE, Server, Subject, launched, tool_versions
from harness.system import launcher, processes
from harness.system.connections import peak_connections
from harness.system.environment import describe_machine, utc_now
from harness.system.open_files import raise_open_files_limit
from harness.system.resources import GroupSampler

RECORD_NAME = "hostile.json"
OWN_SERVER_KINDS = {"emfile"}  # started apart: the case lowers the running server's RLIMIT_NOFILE for good
NO_PROBE_DURING_KINDS = {"emfile"}  # past the limit no new client can be served: only the probe after counts
LEAKS_FAIL_KINDS = {"reset"}  # "no leaked fd or thread" is this case's robust answer
SERVER_VIEW_KINDS = {"slowloris", "slow-reader"}  # slow clients: count the connections the server itself holds


# --- measuring a case -------------------------------------------------------------------------

def settled_counts(pgid: int, before: tuple[int, int], settle: float) -> tuple[int, int]:
    """Counts after a case, given up to `settle` s to come back to where they were (threads finish, children exit)."""
    deadline = time.monotonic() + settle
    while True:
        counts = processes.group_counts(pgid)
        if (counts[0] <= before[0] and counts[1] <= before[1]) or time.monotonic() >= deadline:
            return counts
        time.sleep(0.1)


def run_case(server: Server, case: Case, settings: HostileSettings) -> CaseResult:
    """One case against a running server, with the probes and the measurements around it."""
    pgid = server.process.pid
    if case.short_bound:  # an answer that takes longer than this is already not "at once"
        settings = dataclasses.replace(settings, bound=min(settings.bound, settings.short_bound))
    target = Target(server.target_host, server.target_port, pgid, settings, server.running.stderr_path)
    before = processes.group_counts(pgid)
    started = time.monotonic()
    outcome: list[list[Variant]] = []
    errors: list[str] = []

    def play() -> None:
        try:
            outcome.append(CASE_KINDS[case.kind](target, case))
        except OSError as error:  # the server refused connections outright, or died mid-case
            errors.append(f"{type(error).__name__}: {error}")

    ports = [server.running.port, *([server.target_port] if server.proxy else [])]
    watched = peak_connections(ports) if case.kind in SERVER_VIEW_KINDS else contextlib.nullcontext()
    with GroupSampler(pgid) as sampler, watched as held:
        player = threading.Thread(target=play, name=f"case-{case.id}", daemon=True)
        player.start()
        during = None
        if case.kind not in NO_PROBE_DURING_KINDS:
            player.join(settings.probe_at if case.probe_at is None else case.probe_at)
            during = raw_http.well_behaved_get(target.host, target.port, settings.probe_timeout)
        player.join(settings.bound * 3 + 60)  # every case is bounded well inside this
    elapsed = time.monotonic() - started
    after = raw_http.well_behaved_get(target.host, target.port, settings.after_timeout) if server.alive() else None
    counts = settled_counts(pgid, before, settings.settle) if server.alive() else before
    variants = outcome[0] if outcome else [Variant("case", False, "error", None, "; ".join(errors) or "no outcome")]
    applicable = all(variant.applicable for variant in variants)
    alive = server.alive()
    survived = alive and (during is None or during.served) and after is not None and after.served
    fds_leaked, threads_leaked = counts[0] - before[0], counts[1] - before[1]
    robust = all(variant.passed for variant in variants)
    if case.kind in LEAKS_FAIL_KINDS and (fds_leaked > 0 or threads_leaked > 0):
        robust = False
    resources = sampler.summary(0)  # a dict of system/resources.py's, not a record: its figures are copied below
    return CaseResult(
        case=case.id,
        number=case.number,
        verdict=verdict(applicable, alive, survived, robust),
        robust=robust,
        survived=survived,
        alive=alive,
        statuses=[variant.status for variant in variants],
        seconds_to_close=max((variant.seconds for variant in variants if variant.seconds is not None), default=None),
        probe_during=None if during is None else Probe.from_json(during.to_json(), "probe during"),
        probe_after=None if after is None else Probe.from_json(after.to_json(), "probe after"),
        fds_leaked=fds_leaked,
        threads_leaked=threads_leaked,
        fds_before=before[0],
        threads_before=before[1],
        peak_rss_mib=resources["peak_rss_mib"],
        cpu_seconds=resources["cpu_seconds"],
        case_seconds=round(elapsed, 2),
        variants=[variant.to_record() for variant in variants],
        errors=errors,
        stderr_tail="" if alive else server.stderr_tail(),
        connections_held=None if held is None else ConnectionsHeld(  # established, on each port, during the case
            server_before=held.before[server.running.port], server_peak=held.peak[server.running.port],
            proxy_peak=held.peak[server.target_port] if server.proxy else None, samples=held.samples,
            server_connection_seconds=round(held.connection_seconds[server.running.port], 2),
            proxy_connection_seconds=round(held.connection_seconds[server.target_port], 2) if server.proxy else None),
    )


def verdict(applicable: bool, alive: bool, survived: bool, robust: bool) -> str:
    """One word per cell: n/a, died, stalled (the probe was not served), weak (served, answer not robust), robust."""
    if not applicable:
        return "n/a"
    if not alive:
        return "died"
    if not survived:
        return "stalled"
    return "robust" if robust else "weak"


# --- running designs --------------------------------------------------------------------------

STOPPING = threading.Event()  # set when the run is interrupted: designs running in parallel stop after their case


class SuiteStopped(Exception):
    """Raised inside a design's run when the suite is stopping; its servers are stopped on the way out."""


def warm_up(server: Server) -> None:
    """A few requests first, so lazily started workers and pool threads are not counted as a case's leak."""
    with contextlib.suppress(OSError, ValueError):
        verify.prime(server.target_host, server.target_port)


def run_subject(subject: Subject, cases: list[Case], settings: HostileSettings, log_root: Path,
                progress: Callable[[str], None], database: str | None = None) -> DesignResult:
    """Every case against one design; a design that dies is restarted for the cases after."""
    log_dir = log_root / subject.name
    results: list[CaseResult] = []
    problems: list[str] = []
    stderr_tail = ""
    shared = [case for case in cases if case.kind not in OWN_SERVER_KINDS]
    own = [case for case in cases if case.kind in OWN_SERVER_KINDS]
    remaining = list(shared)
    commands: list[list[str]] = []  # every server command this design ran with, for the record
    starts = 0
    while remaining and starts < 3:  # a design that keeps dying is not started a fourth time
        starts += 1
        try:
            with launched(subject.design, settings.delay, log_dir / f"start-{starts}", subject.behind_nginx,
                          database) as server:
                commands.append(server.command)
                warm_up(server)
                while remaining:
                    if STOPPING.is_set():
                        raise SuiteStopped
                    case = remaining.pop(0)
                    progress(f"{subject.name}: case {case.number} {case.id}")
                    result = run_case(server, case, settings)
                    results.append(result)
                    if not result.alive:
                        problems.append(f"died during case {case.number} ({case.id})")
                        stderr_tail = result.stderr_tail
                        break
        except processes.ServerStartError as error:
            problems.append(f"did not start: {error.args[0].splitlines()[0]}")
            stderr_tail = error.stderr_tail
            break
    for case in own:
        if STOPPING.is_set():
            raise SuiteStopped
        progress(f"{subject.name}: case {case.number} {case.id} (RLIMIT_NOFILE lowered while it runs)")
        try:
            with launched(subject.design, settings.delay, log_dir / case.id, subject.behind_nginx, database) as server:
                commands.append(server.command)
                warm_up(server)
                result = run_case(server, case, settings)
        except processes.ServerStartError as error:
            problems.append(f"did not start for case {case.number}: {error.args[0].splitlines()[0]}")
            stderr_tail = error.stderr_tail
            continue
        results.append(result)
        if not result.alive:
            problems.append(f"died during case {case.number} ({case.id})")
            stderr_tail = result.stderr_tail
    results.sort(key=lambda result: result.number)
    return DesignResult(name=subject.name, design=subject.design.name, title=subject.design.title,
                        model=subject.design.model, behind_nginx=subject.behind_nginx,
                        status="ok" if not problems else "failed", problems=problems, stderr_tail=stderr_tail,
                        server_commands=commands, cases=results)


def subjects_for(catalogue: Catalogue, names: list[str] | None, settings: HostileSettings) -> list[Subject]:
    """The designs a run covers: named ones (NAME or NAME+nginx), else every http design plus the proxied set."""
    http = [design for design in catalogue.designs.values() if design.kind == "http"]
    if not names:  # the database designs too: run_suite starts a scratch PostgreSQL for them
        names = settings.designs or [design.name for design in http]
        names = [*names, *(name + PROXIED_SUFFIX for name in settings.behind_nginx)]
    subjects = []
    for name in names:
        behind = name.endswith(PROXIED_SUFFIX)
        design = catalogue.design(name.removesuffix(PROXIED_SUFFIX) if behind else name)
        if design.kind != "http":
            raise UnknownNameError("HTTP design", name, [design.name for design in http])
        subjects.append(Subject(design, behind))
    return subjects


def most_connections_held(settings: HostileSettings) -> int:
    """The most connections one design's case holds at once (idle, slowloris, emfile); each is a descriptor here."""
    return max(settings.idle_connections, settings.slowloris_connections, settings.emfile_connections)


def run_suite(catalogue: Catalogue, design_names: list[str] | None, case_selectors: list[str] | None, quick: bool,
              out_dir: Path | None, suite: Suite | None = None, log_root: Path = launcher.LOG_DIR / "hostile",
              jobs: int | None = None) -> tuple[Path, HostileRecord]:
    """Run the cases against the designs and write the record atomically; returns its path and the record."""
    suite = suite or load_suite()
    settings = suite.run_settings(quick)
    cases = suite.select(case_selectors)
    subjects = subjects_for(catalogue, design_names, settings)
    jobs_run = max(1, min(jobs or settings.jobs, len(subjects)))
    raise_open_files_limit(jobs_run * most_connections_held(settings), "connections")
    STOPPING.clear()
    started, clock = utc_now(), time.monotonic()
    total = len(subjects) * len(cases)
    done = [0]

    lock = threading.Lock()

    def progress(label: str) -> None:
        with lock:
            done[0] += 1
            print(f"[{done[0]}/{total}] {label}  (elapsed {time.monotonic() - clock:.0f} s)", file=sys.stderr,
                  flush=True)

    with launcher.database_for([subject.design for subject in subjects]) as database, \
            concurrent.futures.ThreadPoolExecutor(jobs_run, thread_name_prefix="design") as pool:
        futures = [pool.submit(run_subject, subject, cases, settings, log_root, progress, database)
                   for subject in subjects]
        try:
            designs = [future.result() for future in futures]
        except BaseException:
            STOPPING.set()  # Ctrl-C or a bug: every design stops after its current case, and stops its server
            raise
    record = HostileRecord(
        suite="hostile",
        title="What a real server must survive",
        mode="quick" if quick else "full",
        command=["python", "scripts/bench.py", *sys.argv[2:]] if sys.argv[1:2] == ["hostile"] else sys.argv,
        settings=dataclasses.replace(settings, jobs=jobs_run),  # the record keeps the jobs that ran
        cases=cases,
        environment=describe_machine(processes.NO_PINNING, tool_versions()),
        started_utc=started,
        finished_utc=utc_now(),
        designs=designs,
        proxy=PROXY_TEMPLATE,
    )
    complete = not quick and design_names is None and case_selectors is None
    path = record_path(RECORD_NAME, not complete, out_dir)
    write_record_atomic(path, record)
    return path, record
