"""The conformance suite's run: every case's bytes to every HTTP design, alone and behind nginx, and
to the three reference parsers; one record, results/conformance.json.

Each design is started once (through the launcher, as every suite starts it; no simulated delay),
asked one `POST /` to learn whether it is GET-only (a 405: then the cases that need a non-GET
method are not applicable), and sent every case on a fresh connection (clients/raw_exchange.py).
A design that stops answering is started again for the cases after it, at most twice. Behind
nginx, the design sits behind nginx as the site recommends it (subjects.PROXY_TEMPLATE: client keep-alive,
HTTP/1.1 and kept-alive connections to the design), as in the hostile suite; after each case the method probe
goes again, on a new connection, and must get the answer it got before the first case: a 2xx instead is the
answer to a hidden request, left on a connection nginx keeps to the design (conformance_cases.judge_next).
The reference parsers (clients/reference_parsers.py) and gunicorn's own corpus
(clients/gunicorn_corpus.py, fetched with pip into build/) need no socket; they are in the record too.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.clients import gunicorn_corpus, raw_exchange, reference_parsers
from harness.model.catalogue import Catalogue, UnknownNameError
from harness.model.records import record_path, write_record_atomic
from harness.model.records.conformance_record import (
    Answer,
    ConformanceDesign,
    ConformanceRecord,
    CorpusRequest,
    CorpusVerdict,
    GunicornCorpus,
    Parsed,
    ParserAnswer,
)
from harness.suites.conformance.conformance_cases import (
    Case,
    ConformanceSettings,
    Corpus,
    Judgement,
    judge_answer,
    judge_next,
    judge_parser,
    load_corpus,
)
from harness.suites.subjects import PROXIED_SUFFIX, PROXY_TEMPLATE, Subject, launched, tool_versions
from harness.system import launcher, processes
from harness.system.environment import describe_machine, utc_now

RECORD_NAME = "conformance.json"
METHOD_PROBE = b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
STOPPING = threading.Event()


def method_answer(server: Any, settings: ConformanceSettings) -> raw_exchange.Exchange:
    """The design's answer to a `POST /` (405 from a GET-only design: cases that need another method do not apply
    to it); behind nginx, also the answer every later probe must get."""
    return raw_exchange.exchange(server.target_host, server.target_port, METHOD_PROBE, settings.bound,
                                 settings.quiet)


def run_subject(subject: Subject, cases: list[Case], settings: ConformanceSettings, log_root: Path,
                progress: Any, database: str | None = None) -> ConformanceDesign:
    """Every case against one design (maybe behind nginx); restarted if it dies, at most twice."""
    results: dict[str, Answer] = {}
    problems: list[str] = []
    commands: list[list[str]] = []
    remaining = list(cases)
    only_get, probe_status = None, None
    starts = 0
    while remaining and starts < 3:
        starts += 1
        try:
            with launched(subject.design, settings.delay, log_root / subject.name / f"start-{starts}",
                          subject.behind_nginx, database) as server:
                commands.append(server.command)
                if only_get is None:
                    statuses = method_answer(server, settings).statuses
                    only_get, probe_status = statuses[:1] == [405], (statuses[0] if statuses else None)
                while remaining:
                    if STOPPING.is_set():
                        raise KeyboardInterrupt
                    case = remaining.pop(0)
                    if case.applies == "non-get" and only_get:
                        results[case.id] = Answer(verdict="n/a", code="GET-only", reason="answers 405 to POST")
                        continue
                    answer = raw_exchange.exchange(server.target_host, server.target_port, case.data,
                                                   settings.bound, settings.quiet)
                    judgement = judge_answer(case, answer.statuses, answer.interim, answer.ended, answer.http_09,
                                             answer.other_version)
                    after = {}
                    if subject.behind_nginx:  # the next client: does it get its own answer, or one left over?
                        probe = method_answer(server, settings)
                        judgement = judge_next(judgement, probe_status, probe.statuses, probe.ended)
                        after = {"next_answer": str(probe.statuses[0]) if probe.statuses else probe.ended}
                    # one flat entry per cell: the judgement, then what came back (the exchange's own dict)
                    results[case.id] = Answer.from_json({**judgement.to_json(), **answer.to_json(), **after},
                                                        f"{subject.name}: {case.id}")
                    progress(subject.name, case.id)
                    if not server.alive():
                        problems.append(f"died after case {case.id}")
                        results[case.id] = dataclasses.replace(
                            results[case.id], reason=(results[case.id].reason or "") + " (the server died)")
                        break
        except processes.ServerStartError as error:
            problems.append(f"did not start: {error.args[0].splitlines()[0]}")
            break
    for case in remaining:
        results[case.id] = Answer(verdict="n/a", code="not run", reason="the design did not start")
    return ConformanceDesign(name=subject.name, design=subject.design.name, title=subject.design.title,
                             behind_nginx=subject.behind_nginx, get_only=only_get,
                             status="ok" if not problems else "failed", problems=problems, server_commands=commands,
                             cases=results)


def subjects_for(catalogue: Catalogue, names: list[str] | None, settings: ConformanceSettings) -> list[Subject]:
    """Named designs (NAME or NAME+nginx), else every HTTP design, and each behind nginx too (`behind_nginx`)."""
    http = [design for design in catalogue.designs.values() if design.kind == "http"]
    if not names:  # the database designs too: run_suite starts a scratch PostgreSQL for them
        names = settings.designs or [design.name for design in http]
        if settings.behind_nginx == "all":
            names = [*names, *(name + PROXIED_SUFFIX for name in names)]
    subjects = []
    for name in names:
        behind = name.endswith(PROXIED_SUFFIX)
        design = catalogue.design(name.removesuffix(PROXIED_SUFFIX))
        if design.kind != "http":
            raise UnknownNameError("HTTP design", name, [design.name for design in http])
        subjects.append(Subject(design, behind))
    return subjects


def parser_results(cases: list[Case]) -> dict[str, dict[str, ParserAnswer]]:
    """Every case through every reference parser, judged as the live answers are."""
    results = {}
    for case in cases:
        row = {}
        for name, verdict in reference_parsers.run_all(case.data).items():
            judgement: Judgement = judge_parser(case, verdict.outcome, verdict.requests, verdict.status,
                                                verdict.keep_alive)
            parsed = {key: value for key, value in verdict.to_json().items()
                      if key != "parser" and value not in ("", None)}  # the parser's name is the key already
            row[name] = ParserAnswer(verdict=judgement.verdict, code=judgement.code, reason=judgement.reason or None,
                                     parsed=Parsed.from_json(parsed, f"parser {name}: {case.id}"))
        results[case.id] = row
    return results


def corpus_results() -> GunicornCorpus:
    """Gunicorn's valid/ and invalid/ requests through the reference parsers (fetched into build/ with pip)."""
    version = gunicorn_corpus.pinned_version()
    try:
        requests = gunicorn_corpus.load(gunicorn_corpus.fetch(version))
    except gunicorn_corpus.CorpusUnavailable as error:
        return GunicornCorpus(gunicorn_version=version, fetched=False, reason=str(error), requests=[])
    rows = []
    for request in requests:
        verdicts = reference_parsers.run_all(request.data)
        rows.append(CorpusRequest(name=request.name, valid=request.valid, needs_setting=request.needs_setting,
                                  bytes=len(request.data),
                                  parsers={name: CorpusVerdict(outcome=verdict.outcome, requests=verdict.requests,
                                                               status=verdict.status, detail=verdict.detail[:120])
                                           for name, verdict in verdicts.items()}))
    return GunicornCorpus(gunicorn_version=version, fetched=True,
                          command=f"pip download --no-binary :all: --no-deps gunicorn=={version}", requests=rows)


def run_suite(catalogue: Catalogue, design_names: list[str] | None, case_names: list[str] | None, quick: bool,
              out_dir: Path | None, corpus: Corpus | None = None,
              log_root: Path = launcher.LOG_DIR / "conformance", jobs: int | None = None,
              with_gunicorn_corpus: bool = True) -> tuple[Path, ConformanceRecord]:
    """Run the cases against the designs and the parsers; write the record atomically; return its path and it."""
    corpus = corpus or load_corpus()
    settings = corpus.run_settings(quick)
    cases = corpus.select(case_names)
    subjects = subjects_for(catalogue, design_names, settings)
    jobs_run = max(1, min(jobs or settings.jobs, len(subjects) or 1))
    STOPPING.clear()
    started, clock = utc_now(), time.monotonic()
    lock, done, total = threading.Lock(), [0], len(subjects) * len(cases)

    def progress(name: str, case_id: str) -> None:
        with lock:
            done[0] += 1
            if done[0] % 50 == 0 or done[0] == total:
                print(f"[{done[0]}/{total}] {name}: {case_id} (elapsed {time.monotonic() - clock:.0f} s)",
                      file=sys.stderr, flush=True)

    with launcher.database_for([subject.design for subject in subjects]) as database, \
            concurrent.futures.ThreadPoolExecutor(jobs_run, thread_name_prefix="design") as pool:
        futures = [pool.submit(run_subject, subject, cases, settings, log_root, progress, database)
                   for subject in subjects]
        try:
            designs = [future.result() for future in futures]
        except BaseException:
            STOPPING.set()  # Ctrl-C or a bug: every design stops after its current case and stops its server
            raise
    environment = describe_machine(processes.NO_PINNING, {**tool_versions(), **reference_parsers.versions()})
    record = ConformanceRecord(
        suite="conformance",
        title="HTTP/1.1 conformance",
        mode="quick" if quick else "full",
        command=["python", "scripts/bench.py", *sys.argv[1:]] if sys.argv[1:2] == ["conformance"] else sys.argv,
        settings=settings.to_record(jobs_run, PROXY_TEMPLATE),
        groups=[group.to_record() for group in corpus.groups],
        cases=[case.to_record() for case in cases],
        environment=environment,
        started_utc=started,
        designs=designs,
        parsers=parser_results(cases),
        gunicorn_corpus=corpus_results() if with_gunicorn_corpus else GunicornCorpus(fetched=False, reason="not asked",
                                                                                     requests=[]),
        finished_utc=utc_now(),
    )
    complete = not quick and design_names is None and case_names is None
    path = record_path(RECORD_NAME, not complete, out_dir)
    write_record_atomic(path, record)
    return path, record
