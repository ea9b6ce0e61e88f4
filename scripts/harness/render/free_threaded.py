"""Render the free-threaded comparison: the same designs on one CPython with the GIL and without it.

The records: results/free-threaded/free-threaded-<workload>-<python>.json, one per workload
(cpu, mixed, hello) and build, measured round robin in pairs (catalogue 18-free-threaded.toml):
3.13.5 and 3.13.5t built here from one tarball (scripts/build_free_threaded_python.sh), and 3.14
and 3.14t, which only the bench workflow's `free-threaded` job on a GitHub runner measures. And
results/free-threaded/dependencies.json (suites/gil_dependencies.py): which dependencies install
on each build and which turn the GIL back on.

Per pair and workload, a table: each design's median requests/s on both builds with the interval
and the flags every table carries, the ratio free-threaded / GIL, and whether the GIL was really
off in the server (each run's `gil`, asked inside the server after the run: system/gil_report.py);
a free-threaded run whose GIL came back on is flagged. From the 3.13 pair's records: the answer in
three sentences (free-threaded.md, which the cpu-bound page includes too), and memory per thread
and per process (the mixed workload's sizing runs' PSS). A pair without records says so in words:
never a placeholder number, never a run that no record shows.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.model import limits
from harness.model.records import RESULTS_DIR
from harness.model.records import load_scenario_records
from harness.model.records.gil_dependencies_record import FreeThreadedBuildRecord, GilDependenciesRecord
from harness.model.records.scenario_record import Outcome, Run, ScenarioRecord
from harness.model.stats import interval_name
from harness.render.cells import SPREAD_FLAG, format_rate, rate_flags, summarise_cell
from harness.render.presentation import design_link

FREE_THREADED_DIR_NAME = "free-threaded"
SCENARIO_PREFIX = "free-threaded-"  # the catalogue's ids; their records are here, not in results/ itself
RECORD_ID = re.compile(r"free-threaded-(cpu|mixed|hello)-(\d+\.\d+(?:\.\d+)?)(t?)")
# The pairs, by the version the page calls them; the GIL build's name first (catalogue 18-free-threaded.toml).
PAIRS = {"3.13": ("3.13.5", "3.13.5t"), "3.14": ("3.14", "3.14t")}
WORKLOADS = {"cpu": "CPU-bound: 75,000 iterations of pure Python per request (about 5 ms), 10 connections",
             "mixed": "mixed: a 90 ms call, then 150,000 iterations (about 10 ms of CPU), 64 connections",
             "hello": "hello world: no call, no computation, 50 connections"}
# What each design is, for the answer: the thread designs, the multi-process ones, the event loops (the control).
THREADS = ["thread-per-connection", "thread-pool-executor", "thread-pool-queue", "threading-tcpserver",
           "gunicorn-gthread", "waitress", "granian-wsgi"]
PROCESSES = ["prefork", "process-pool", "event-loop-workers"]
EVENT_LOOPS = ["asyncio-streams"]


@dataclass(frozen=True)
class Row:
    """One table row: a design (at one size of a sizing sweep), its cells on each build."""

    design: str
    size: int | None
    cells: dict[str, dict[str, Any]]  # by python ("3.13.5"): summarise_cell's dict
    ceilings: dict[str, float | None]

    @property
    def name(self) -> str:
        """The design, and its size in a sizing sweep: 'thread-pool-executor ×16'."""
        return self.design + (f" ×{self.size}" if self.size is not None else "")

    @property
    def label(self) -> str:
        return design_link(self.design) + (f" ×{self.size}" if self.size is not None else "")

    def ratio(self, gil: str, free: str) -> float | None:
        if gil not in self.cells or free not in self.cells or not self.cells[gil]["rate"]["median"]:
            return None
        return self.cells[free]["rate"]["median"] / self.cells[gil]["rate"]["median"]


def load(results_dir: Path = RESULTS_DIR) -> dict[str, dict[str, ScenarioRecord]]:
    """{workload: {python: record}} for every free-threaded record there is."""
    found: dict[str, dict[str, ScenarioRecord]] = {}
    for scenario_id, record in load_scenario_records(results_dir / FREE_THREADED_DIR_NAME).items():
        match = RECORD_ID.fullmatch(scenario_id)
        if match:
            found.setdefault(match[1], {})[match[2] + match[3]] = record
    return found


def runs_by_size(outcome: Outcome) -> dict[int | None, list[Run]]:
    """A design's successful runs by the size of a sizing sweep (None: not swept); one level per scenario here."""
    grouped: dict[int | None, list[Run]] = {}
    for run in outcome.runs:
        if run.error is None and run.requests_per_second is not None:
            grouped.setdefault(run.get("size"), []).append(run)
    return grouped


def rows(records: dict[str, ScenarioRecord]) -> list[Row]:
    """The rows of one workload's pair of records, in the first record's design order."""
    order: list[tuple[str, int | None]] = []
    cells: dict[tuple[str, int | None], dict[str, dict[str, Any]]] = {}
    ceilings: dict[tuple[str, int | None], dict[str, float | None]] = {}
    for python, record in records.items():
        ceiling = limits.ceilings(record)
        for outcome in record.designs:
            for size, runs in sorted(runs_by_size(outcome).items(), key=lambda item: item[0] or 0):
                key = (outcome.name, size)
                if key not in cells:
                    order.append(key)
                cells.setdefault(key, {})[python] = summarise_cell(runs)
                ceilings.setdefault(key, {})[python] = ceiling.get(runs[0].concurrency)
    return [Row(name, size, cells[(name, size)], ceilings[(name, size)]) for name, size in order]


def cpus_busy(runs: list[Run], record: ScenarioRecord) -> float | None:
    """The median number of CPUs the server's process group kept busy over a cell's runs (its CPU time over the
    run's wall time): about 1 for threads under a GIL, up to 2 here where they compute at once."""
    environment = record.environment
    busy = [limits.server_busy(run, environment) for run in runs]
    if not busy or any(share is None for share in busy):
        return None
    return statistics.median(busy) * limits.cpu_count(environment.pinning.server_cpu, environment)


def cpus_label(row: Row, gil: str, free: str, records: dict[str, ScenarioRecord]) -> str:
    """'1.00 → 1.78': the CPUs the server kept busy on the GIL build, then on the free-threaded one."""
    values = [cpus_busy(row.cells[python]["runs"], records[python]) if python in row.cells else None
              for python in (gil, free)]
    return " → ".join("–" if value is None else f"{value:.2f}" for value in values)


def gil_states(runs: list[Run]) -> str:
    """How the GIL was in a cell's runs, as the server's processes reported it after each run."""
    states = [run.get("gil") for run in runs]
    enabled, disabled = states.count("enabled"), states.count("disabled")
    if enabled:
        return f"⚠ **on** in {enabled} of {len(states)} runs"
    if disabled == len(states):
        return f"off ({disabled} of {len(states)} runs)"
    return "not reported"


def rate_label(cell: dict[str, Any], ceiling: float | None, record: ScenarioRecord) -> str:
    rate = cell["rate"]
    return (f"**{format_rate(rate['median'])}** ({format_rate(rate['interval_low'])}–"
            f"{format_rate(rate['interval_high'])}){rate_flags(cell, ceiling, record=record)}")


def pair_table(workload: str, gil: str, free: str, records: dict[str, ScenarioRecord]) -> str:
    """One workload's table for a pair of builds."""
    first = records[gil]
    settings, environment = first.settings, first.environment
    lines = [f"| design | requests/s, {gil} (GIL) | requests/s, {free} (free-threaded) | {free} / {gil} "
             f"| CPUs busy, {gil} → {free} | GIL inside the {free} server |", "|---|--:|--:|--:|--:|---|"]
    for row in rows(records):
        ratio = row.ratio(gil, free)
        gil_cell = rate_label(row.cells[gil], row.ceilings[gil], records[gil]) if gil in row.cells else "failed"
        free_cell = rate_label(row.cells[free], row.ceilings[free], records[free]) if free in row.cells else "failed"
        state = gil_states(row.cells[free]["runs"]) if free in row.cells else "–"
        lines.append(f"| {row.label} | {gil_cell} | {free_cell} | "
                     f"{'–' if ratio is None else f'{ratio:.2f}'} | {cpus_label(row, gil, free, records)} | {state} |")
    failures = [f"{outcome.name} on {python}: {outcome.problems[0] if outcome.problems else outcome.status}"
                for python, record in records.items() for outcome in record.designs if outcome.status != "ok"]
    lines += ["", f"*{WORKLOADS[workload]}; medians of {settings.repeat} runs of {settings.time_limit:g} s "
              f"({interval_name(settings.repeat)} in brackets), the two builds measured round robin; the server "
              f"may use both CPUs, wrk runs on CPU {environment.pinning.load_tool_cpu} beside it; CPUs busy: the "
              "server's CPU time over each run's wall time (its whole process group), the median of the runs; "
              f"{environment.cpu_model}, {environment.cpus_available} CPUs; commit `{environment.commit[:10]}`"
              f"{' (with uncommitted changes)' if environment.dirty else ''}, {first.started_utc} to "
              f"{first.finished_utc}; records `results/free-threaded/free-threaded-{workload}-<python>.json`.*"]
    if failures:
        lines += ["", "*Did not finish: " + "; ".join(failures) + ".*"]
    return "\n".join(lines) + "\n"


def ratios(records: dict[str, ScenarioRecord], gil: str, free: str, names: list[str]) -> dict[str, float]:
    """{design (×size): free/gil} for the named designs measured on both builds, each size of a sizing sweep."""
    found = {}
    for row in rows(records):
        ratio = row.ratio(gil, free)
        if row.design in names and ratio is not None:
            found[row.name] = ratio
    return found


def best_run_ratios(records: dict[str, ScenarioRecord], gil: str, free: str, names: list[str]) -> dict[str, float]:
    """{design: free/gil} of each cell's fastest run: the run the rest of the machine disturbed least (the reasoning
    of the standard library's timeit, whose documentation reads the fastest of several timings for the same
    reason); shown beside the medians, never instead of them."""
    found = {}
    for row in rows(records):
        if row.design in names and gil in row.cells and free in row.cells:
            found[row.name] = row.cells[free]["rate"]["max"] / row.cells[gil]["rate"]["max"]
    return found


def span(values: dict[str, float]) -> str:
    low, high = min(values.values()), max(values.values())
    return f"{low:.2f}×" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}× to {high:.2f}×"


def best(records: dict[str, ScenarioRecord], python: str, names: list[str]) -> Row | None:
    """The row (a design at any size) among `names` with the highest median on `python`."""
    candidates = [row for row in rows(records) if records and row.design in names and python in row.cells]
    return max(candidates, key=lambda row: row.cells[python]["rate"]["median"]) if candidates else None


def median_pss(row: Row, python: str) -> float | None:
    """The median of a cell's runs' peak PSS (MiB, the whole process group); None if a run did not measure it."""
    values = [run.server_resources.peak_pss_mib if run.server_resources else None for run in row.cells[python]["runs"]]
    return statistics.median(values) if values and None not in values else None  # type: ignore[type-var]


def threads_against_processes(thread_row: Row, process_row: Row, python: str) -> str:
    """The best thread design against the best multi-process one on one build: the ratio of medians, whether their
    runs overlap, and their memory."""
    threads, processes = thread_row.cells[python]["rate"], process_row.cells[python]["rate"]
    apart = (threads["interval_low"] > processes["interval_high"] or threads["interval_high"] < processes["interval_low"])
    memory = [median_pss(thread_row, python), median_pss(process_row, python)]
    return (f"the best thread design's median ({thread_row.label}) was {threads['median'] / processes['median']:.2f}× "
            f"the best multi-process design's ({process_row.label}), "
            f"{'beyond' if apart else 'within'} the spread of their runs"
            + ("" if None in memory else f", in {memory[0]:.0f} MiB of PSS against {memory[1]:.0f}"))


def outcome(row: Row, gil: str, free: str) -> str:
    """'more' or 'fewer' when the free-threaded cell's interval lies wholly above or below the GIL cell's, else
    'within' (the runs overlap: no difference this record can show)."""
    low, high = row.cells[free]["rate"], row.cells[gil]["rate"]
    if low["interval_low"] > high["interval_high"]:
        return "more"
    if low["interval_high"] < high["interval_low"]:
        return "fewer"
    return "within"


def verdicts(records: dict[str, ScenarioRecord], gil: str, free: str, names: list[str]) -> str:
    """Which of the named designs (each size) served more, or fewer, beyond the spread of their runs; the rest
    lie within it. With the widest spread, when one is flagged."""
    seen: dict[str, str] = {}
    widest = 0.0
    for row in rows(records):
        if row.design in names and gil in row.cells and free in row.cells:
            seen[row.name] = outcome(row, gil, free)
            widest = max(widest, row.cells[gil]["rate"]["relative_interval"], row.cells[free]["rate"]["relative_interval"])
    more = [name for name, word in seen.items() if word == "more"]
    fewer = [name for name, word in seen.items() if word == "fewer"]
    within = len(seen) - len(more) - len(fewer)
    if len(seen) == 1:
        text = {"more": "more beyond the spread of its runs", "fewer": "fewer beyond the spread of its runs",
                "within": "within the spread of its runs"}[next(iter(seen.values()))]
    else:
        parts = ([f"more beyond the spread of their runs: {', '.join(more)}"] if more else []) + (
            [f"fewer beyond it: {', '.join(fewer)}"] if fewer else []) + (
            [f"{'the other ' if more or fewer else 'all '}{within} within it"] if within else [])
        text = "; ".join(parts) if more or fewer else f"all {len(seen)} within the spread of their runs"
    return text + (f" (runs varied by up to {widest:.0%})" if widest > SPREAD_FLAG else "")


def answer(by: dict[str, dict[str, ScenarioRecord]], gil: str = "3.13.5", free: str = "3.13.5t") -> str:
    """The reader's question answered in three sentences, from the 3.13 pair's records; words when they are missing.

    A difference is claimed only where the two cells' intervals do not overlap (outcome)."""
    pairs = {workload: records for workload, records in by.items() if gil in records and free in records}
    if "cpu" not in pairs or "hello" not in pairs:
        return (f"*Not measured yet:* the records of CPython {gil} and {free} (`make free-threaded-bench`) are not "
                "in `results/free-threaded/`.\n")
    cpu, hello = pairs["cpu"], pairs["hello"]
    threads_cpu, threads_hello = ratios(cpu, gil, free, THREADS), ratios(hello, gil, free, THREADS)
    loop_hello = ratios(hello, gil, free, EVENT_LOOPS)
    computing = (f"- **Computing** (CPU-bound): the thread designs' medians on {free} were {span(threads_cpu)} "
                 f"those on {gil}; {verdicts(cpu, gil, free, THREADS)}; fastest runs, the least disturbed, "
                 f"{span(best_run_ratios(cpu, gil, free, THREADS))}.")
    if "mixed" in pairs:
        mixed = pairs["mixed"]
        computing += (f" **Waiting, then computing** (mixed): {span(ratios(mixed, gil, free, THREADS))}; "
                      f"{verdicts(mixed, gil, free, THREADS)}.")
    lines = [computing]
    loop = (f" The single-threaded event loop's median was {span(loop_hello)}, "
            f"{verdicts(hello, gil, free, EVENT_LOOPS)}." if loop_hello else "")
    lines.append(f"- **Not computing** (hello world): the thread designs' medians were {span(threads_hello)}; "
                 f"{verdicts(hello, gil, free, THREADS)}; fastest runs "
                 f"{span(best_run_ratios(hello, gil, free, THREADS))}.{loop}")
    shares = []
    for workload, words in (("cpu", "CPU-bound"), ("mixed", "mixed")):
        thread_best, process_best = best(pairs.get(workload, {}), free, THREADS), best(pairs.get(workload, {}), free,
                                                                                      PROCESSES)
        if thread_best and process_best:
            shares.append(f"{words}, {threads_against_processes(thread_best, process_best, free)}")
    if shares:
        lines.append(f"- **A process per core, still?** On {free}: " + "; ".join(shares)
                     + ". Two CPUs, shared with the load tool.")
    return "\n".join(lines) + "\n"


def memory_table(by: dict[str, dict[str, ScenarioRecord]], gil: str = "3.13.5", free: str = "3.13.5t") -> str:
    """Memory per thread and per process on each build: the mixed workload's sizing runs' peak PSS."""
    records = by.get("mixed", {})
    if gil not in records or free not in records:
        return "*Not measured yet* (the mixed workload's records, which carry the sizing runs, are missing).\n"
    lines = ["| what | sizes compared | PSS per extra one, " + gil + " (GIL) | PSS per extra one, " + free
             + " (free-threaded) |", "|---|---|--:|--:|"]
    for design, what in (("thread-pool-executor", "a thread (thread pool)"), ("prefork", "a process (pre-fork)")):
        per: dict[str, str] = {}
        sizes: list[int] = []
        for python in (gil, free):
            outcome = records[python].design(design)
            pss = {size: statistics.median(run.server_resources.peak_pss_mib for run in runs
                                           if run.server_resources and run.server_resources.peak_pss_mib)
                   for size, runs in runs_by_size(outcome).items()
                   if size is not None and any(run.server_resources and run.server_resources.peak_pss_mib
                                               for run in runs)} if outcome else {}
            if len(pss) < 2:
                per[python] = "not measured"
                continue
            sizes = sorted(pss)
            low, high = sizes[0], sizes[-1]
            per[python] = (f"{(pss[high] - pss[low]) / (high - low):.2f} MiB "
                           f"({pss[low]:.1f} → {pss[high]:.1f} MiB)")
        compared = f"{sizes[0]} and {sizes[-1]}" if sizes else "–"
        lines.append(f"| {what} | {compared} | {per[gil]} | {per[free]} |")
    lines += ["", "*The medians of the runs' peak PSS (the whole process group, shared pages split between the "
              "processes that share them) at the smallest and the largest size of the mixed workload's sizing runs, "
              "under load; the difference divided by the extra threads or processes.*"]
    return "\n".join(lines) + "\n"


def dependencies_tables(results_dir: Path = RESULTS_DIR) -> str:
    """A table per dependencies record (dependencies.json here, dependencies-3.14.json from the workflow)."""
    paths = sorted((results_dir / FREE_THREADED_DIR_NAME).glob("dependencies*.json"))
    if not paths:
        return "*Not checked yet* (`python scripts/bench.py gil-dependencies` writes the record).\n"
    return "\n".join(dependencies_table(path) for path in paths)


def dependencies_table(path: Path) -> str:
    """Which dependencies install on each build, how, and whether importing them turns the GIL back on."""
    record = GilDependenciesRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
    versions = list(record.interpreters)
    lines = ["| package | used by | " + " | ".join(
        f"{version} ({'free-threaded' if 'disabled' in (check.interpreter.gil or '') else 'GIL'})"
        for version, check in record.interpreters.items()) + " |", "|---|---|" + "---|" * len(versions)]
    packages = list(next(iter(record.interpreters.values())).packages)
    for package in packages:
        cells = []
        for version in versions:
            check = record.interpreters[version].packages.get(package)
            if check is None:
                cells.append("–")
            elif not check.installed:
                cells.append("does not install: no wheel, and no source for it" if "(from versions: none)"
                             in (check.source_build or "") else
                             "does not install: no wheel, and its source build failed (the record keeps pip's words)")
            elif check.gil_after_import is None:
                cells.append(f"{check.installed}; the import failed")
            else:
                free_build = "disabled" in (record.interpreters[version].interpreter.gil or "")
                gil = (("⚠ **turns the GIL on**" if check.gil_after_import == "enabled" else "GIL stays off")
                       if free_build else "")
                older = (f" {check.installed_version}" if check.installed_version
                         and check.installed_version != check.version else "")
                cells.append(f"{check.installed}{older}" + (f", {gil}" if gil else ""))
        version_pin = next((record.interpreters[v].packages[package].version for v in versions
                            if package in record.interpreters[v].packages), None)
        used_by = next(record.interpreters[v].packages[package].used_by for v in versions
                       if package in record.interpreters[v].packages)
        lines.append(f"| {package} {version_pin or ''} | {used_by} | " + " | ".join(cells) + " |")
    lines += ["", f"*Each package at the version requirements.lock pins, in a scratch environment per build: a wheel "
              "if one fits, else built from source, else the newest older release with a wheel; then imported in a "
              "fresh process, which asks "
              f"`sys._is_gil_enabled()`. Checked {record.started_utc} to {record.finished_utc}; record "
              f"`results/free-threaded/{path.name}`.*"]
    return "\n".join(lines) + "\n"


BUILD_RECORD = "build.json"  # scripts/build_free_threaded_python.sh writes it when MANY_CLIENTS_BUILD_RECORD names it


def build_time(results_dir: Path = RESULTS_DIR) -> str:
    """How long `make free-threaded-python` took from a fresh clone with an empty cache, step by step, from the
    record the build script wrote; words when there is none."""
    path = results_dir / FREE_THREADED_DIR_NAME / BUILD_RECORD
    if not path.exists():
        return ("*Not shown yet:* no build from a fresh clone with an empty cache has been recorded "
                f"(`results/free-threaded/{BUILD_RECORD}`).\n")
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("kind") != "free-threaded-build":
        raise ValueError(f"{path}: not a free-threaded build record (kind {data.get('kind')!r})")
    record = FreeThreadedBuildRecord.from_json(data, str(path))
    seconds = record.seconds
    total = seconds.source + seconds.gil + seconds.free_threaded + seconds.environments
    return (f"From a fresh clone with an empty cache, `make free-threaded-python` took **{total // 60} min "
            f"{total % 60} s** on this machine ({record.cpus} CPUs, {record.cpu_model}; make -j{record.make_jobs}): "
            f"fetching and unpacking the source {seconds.source} s, the build with the GIL {seconds.gil} s, "
            f"the free-threaded build {seconds.free_threaded} s, the two environments with the servers "
            f"{seconds.environments} s (pip's own download cache, outside the build's, was not emptied). Commit "
            f"`{record.commit[:10]}`, {record.started_utc} to {record.finished_utc}; record "
            f"`results/free-threaded/{BUILD_RECORD}`.\n")


def not_run(pair: str, gil: str, free: str, where: str) -> str:
    return (f"*No record of CPython {gil} and {free} is in `results/free-threaded/`: {where}. "
            "Until one is, this site says nothing about them.*\n")


def free_threaded_files(results_dir: Path, generated_dir: Path, header: str) -> dict[Path, str]:
    """free-threaded.md (the answer), one table per pair and workload, memory, dependencies."""
    by = load(results_dir)
    source = "results/free-threaded/"
    files = {generated_dir / "free-threaded.md": header.format(source=source) + answer(by),
             generated_dir / "free-threaded-memory.md": header.format(source=source) + memory_table(by),
             generated_dir / "free-threaded-dependencies.md": header.format(source=source)
             + dependencies_tables(results_dir),
             generated_dir / "free-threaded-build.md": header.format(source=source) + build_time(results_dir)}
    where = {"3.13": "`make free-threaded-bench` measures them on this machine",
             "3.14": "the bench workflow's `free-threaded` job measures them on a GitHub runner, and no run of it "
                     "has come back"}
    for pair, (gil, free) in PAIRS.items():
        for workload in WORKLOADS:
            records = {python: record for python, record in by.get(workload, {}).items() if python in (gil, free)}
            text = (pair_table(workload, gil, free, records) if len(records) == 2
                    else not_run(pair, gil, free, where[pair]))
            files[generated_dir / f"free-threaded-{pair}-{workload}.md"] = header.format(source=source) + text
    return files
