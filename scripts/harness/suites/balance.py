"""How evenly N event-loop workers share connections: one inherited socket against one SO_REUSEPORT socket each.

For each design of DESIGNS and each worker count of WORKER_COUNTS: start the design
with `--workers N` on every CPU, load it with our closed-loop client (every request a
new connection, CONCURRENCY at a time, for REQUESTS requests) pinned to the second
CPU, stop it, and read the line each worker prints as it stops ("worker PID served
N connections"). The record keeps every worker's count; render/multi_process_tables.py
renders it.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.model.catalogue import Catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records import (
    MULTI_PROCESS_DIR_NAME,
    record_path,
    write_record_atomic,
)
from harness.model.records.multi_process_records import BalanceRecord, BalanceRow, BalanceScenario, LoadReport
from harness.system import launcher, processes
from harness.system.environment import describe_machine, utc_now

DESIGNS = ["event-loop-workers", "event-loop-workers-reuseport"]
WORKER_COUNTS = [2, 4]
REQUESTS, QUICK_REQUESTS = 4000, 600
CONCURRENCY = 50
DELAY = 0.0  # hello world: the question is who accepts, not who waits
HTTP_LOAD = REPO_ROOT / "scripts" / "http_load.py"
WORKER_LINE = re.compile(r"worker (\d+) served (\d+) connections")
RECORD_NAME = "balance.json"


def served_per_worker(stdout: str) -> list[int]:
    """Each worker's count from the lines workers print as they stop, largest first."""
    return sorted((int(count) for _, count in WORKER_LINE.findall(stdout)), reverse=True)


def measure(catalogue: Catalogue, name: str, workers: int, requests: int, log_dir: Path,
            pinning: processes.CpuPinning) -> BalanceRow:
    design = catalogue.design(name)
    port = processes.free_port()
    workdir = log_dir / f"{name}-{workers}"
    workers_argument = ["--workers", str(workers)]
    command = launcher.design_command(design, port, DELAY, workdir, extra_arguments=workers_argument)
    load = [sys.executable, str(HTTP_LOAD), f"http://{processes.LOOPBACK}:{port}/", "--requests", str(requests),
            "--concurrency", str(CONCURRENCY)]
    print(f"  server: {' '.join(processes.pinned(command, pinning.server))}\n"
          f"  load:   {' '.join(processes.pinned(load, pinning.load))}", flush=True)
    with launcher.running_design(design, port, DELAY, workdir, cpu=pinning.server,
                                 extra_arguments=workers_argument) as server:
        result = processes.run_tool(load, timeout=120, cpu=pinning.load)
    report = LoadReport.from_json(json.loads(result.stdout), "http_load.py's report")
    counts = served_per_worker(server.stdout_path.read_text(encoding="utf-8"))
    return BalanceRow(name=name, title=design.title, workers=workers, server_command=command, load_command=load,
                      served=counts, requests_ok=report.complete, failed=report.failed, exit_code=server.exit_code)


@dataclass(frozen=True)
class Plan:
    """`bench.py balance`: quick (fewer requests) or full, and where the record goes."""

    quick: bool = False
    out: Path | None = None  # default: results/, or build/results/ with quick


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, BalanceRecord]:
    """Every design at every worker count; the record written atomically, its path and it."""
    quick, out_dir = plan.quick, plan.out
    pinning = processes.cpu_pinning(server_on_every_cpu=True)
    started = utc_now()
    requests = QUICK_REQUESTS if quick else REQUESTS
    rows = []
    for name in DESIGNS:
        for workers in WORKER_COUNTS:
            print(f"balance: {name}, {workers} workers", flush=True)
            rows.append(measure(catalogue, name, workers, requests, launcher.LOG_DIR / "balance", pinning))
            print(f"  served per worker: {rows[-1].served}", flush=True)
    record = BalanceRecord(
        kind="balance",
        scenario=BalanceScenario(id="balance", requests=requests, concurrency=CONCURRENCY, delay=DELAY, quick=quick),
        environment=describe_machine(pinning, {"http_load.py": "ours (scripts/http_load.py)"}),
        started_utc=started, finished_utc=utc_now(), rows=rows)
    path = record_path(f"{MULTI_PROCESS_DIR_NAME}/{RECORD_NAME}", quick, out_dir)
    write_record_atomic(path, record)
    return path, record
