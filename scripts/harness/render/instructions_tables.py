"""Instructions per request, rendered: one table per group (how-fast steps, hardened vs plain, Python versions).

The record is results/instructions/instructions.json (suites/instructions.py, `bench.py instructions`;
the arithmetic is model/instruction_counts.py). Each row shows the mean of its two measurements, both
measurements and their difference (flagged past 2%), the row against its group's first row, and,
where another record has one, the CPU time per request measured under wrk: a wall-clock measure of
the same server beside the steady one.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from harness.model import instruction_counts
from harness.model.how_fast_steps import HOW_FAST
from harness.model.records.instructions_record import CountRow, InstructionsRecord
from harness.model.records.scenario_record import ScenarioRecord
from harness.render.how_fast_tables import load_steps, row_summary
from harness.render.presentation import wide_table

GROUPS = [  # (group, heading, what its first row is called in the "vs" column)
    ("steps", "The how-fast steps", "step 0"),
    ("hardened", "Hardened vs plain", "plain"),
    ("versions", "Python versions", "3.11"),
]
PAGE_GROUPS = {"instructions.md": ["steps", "hardened"], "instructions-python-versions.md": ["versions"]}
CHAIN_PAGE = "instructions-fast-and-correct.md"  # the fast-and-correct group: both request heads side by side
CPU_SCENARIO = "peak"  # wrk, 50 keep-alive connections, hello world: where plain and hardened have a CPU time


def measurements(row: CountRow) -> list[float]:
    return [measurement.instructions_per_request for measurement in row.measurements]


def cpu_microseconds(results_dir: Path, records: dict[str, ScenarioRecord]) -> dict[str, tuple[float, str]]:
    """Row name -> (median CPU µs per request under wrk, where it comes from), for rows another record measured."""
    found: dict[str, tuple[float, str]] = {}
    steps_path = results_dir / HOW_FAST.record
    if steps_path.exists():
        for row in load_steps(steps_path).rows:
            cpu = row_summary(row)["cpu_us"]
            if row.step is not None and cpu is not None:
                found[row.name] = (cpu, "how-fast steps")
    peak = records.get(CPU_SCENARIO)
    for design in peak.designs if peak else []:
        costs = [run.server_resources.cpu_seconds / run.complete * 1e6 for run in design.runs
                 if run.server_resources is not None and run.server_resources.cpu_seconds is not None and run.complete]
        if costs:
            found[design.name] = (statistics.median(costs), f"`{CPU_SCENARIO}`")
    return found


def group_table(rows: list[CountRow], first_label: str, cpu: dict[str, tuple[float, str]], within: float) -> str:
    """One group's rows: instructions per request, both measurements and their difference, and the rest."""
    head = ("| Server | Python | instructions per request | measurement 1 / 2 | difference | "
            f"vs {first_label} | CPU µs per request under wrk |")
    lines = [head, "|---|---|---|---|---|---|---|"]
    base = statistics.mean(measurements(rows[0])) if len(measurements(rows[0])) >= 1 else None
    for row in rows:
        label = f"step {row.step}: {row.title}" if row.step is not None else row.title
        python = row.python_version or "–"
        values = measurements(row)
        if row.problems or len(values) < 2:
            problem = "; ".join(row.problems) or "fewer than two measurements"
            lines.append(f"| {label} | {python} | not measured: {_cell(problem)} | – | – | – | – |")
            continue
        mean = statistics.mean(values)
        difference = instruction_counts.relative_difference(values[0], values[1])
        flag = "" if instruction_counts.agree(values, within) else f" ⚠ over {within:.0%}"
        versus = f"{mean / base:.0%}" if base else "–"
        wall = cpu.get(row.name) if row.python is None else None  # a wrk run on another CPython: none
        cpu_cell = f"{wall[0]:.1f} ({wall[1]})" if wall else "–"
        lines.append(f"| {label} | {python} | **{mean:,.0f}** | {values[0]:,.0f} / {values[1]:,.0f} | "
                     f"{difference:.2%}{flag} | {versus} | {cpu_cell} |")
    return "\n".join(lines) + "\n"


def largest_difference(rows: list[CountRow]) -> float | None:
    differences = [instruction_counts.relative_difference(*measurements(row)[:2]) for row in rows
                   if not row.problems and len(measurements(row)) >= 2]
    return max(differences) if differences else None


def caption(record: InstructionsRecord, rows: list[CountRow]) -> str:
    settings, environment = record.settings, record.environment
    low, high = settings.requests
    largest = largest_difference(rows)
    agreement = ("" if largest is None else
                 f"The two measurements of every row above differ by at most {largest:.2%}"
                 f"{'' if largest <= settings.agreement else ' ⚠ more than ' + format(settings.agreement, '.0%')}. ")
    return (f"\n{agreement}{record.valgrind} callgrind; each measurement is two runs of the server under it, "
            f"answering {low:,} and then {high:,} GET / requests on one keep-alive connection, one at a time: "
            f"instructions per request = (total({high:,}) − total({low:,})) / {high - low:,}, so start-up and "
            "shutdown cancel out. Each row was measured twice (difference: |m2 − m1| over their mean). "
            "User space only: the kernel's work on each request is not counted. "
            "CPU µs per request is a wall-clock measure of the same server under wrk (50 keep-alive connections), "
            f"from the how-fast steps record or the `{CPU_SCENARIO}` scenario: it moves a few % between runs. "
            f"{environment.cpu_model}; commit `{environment.commit[:10]}`"
            f"{' (with uncommitted changes)' if environment.dirty else ''}; "
            f"{record.mode} run of {record.started_utc}.\n")


def instructions_page(record: InstructionsRecord, cpu: dict[str, tuple[float, str]] | None = None,
                      groups: list[str] | None = None) -> str:
    """The tables of the groups asked for (every group by default), each under its heading, then the caption."""
    parts: list[str] = []
    shown: list[CountRow] = []
    for group, heading, first_label in GROUPS:
        rows = [row for row in record.rows if row.group == group]
        if not rows or (groups is not None and group not in groups):
            continue
        # Five number columns beside a server's name: wider than the page's column, so it scrolls, name pinned.
        parts.append(f"**{heading}**\n\n"
                     + wide_table(group_table(rows, first_label, cpu or {}, record.settings.agreement)))
        shown += rows
    if not parts:
        return "*No rows of this kind in the record.*\n"
    return "\n".join(parts) + caption(record, shown)


def load_instructions(path: Path) -> InstructionsRecord:
    """The instruction counts' record, typed."""
    return InstructionsRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


def mean_count(row: CountRow | None) -> float | None:
    """A row's mean over its measurements; None when it was not measured twice."""
    values = measurements(row) if row is not None and not row.problems else []
    return statistics.mean(values) if len(values) >= 2 else None


def chain_table(record: InstructionsRecord) -> str:
    """The fast-and-correct group: each step and nginx, instructions per request with wrk's head and with
    production-shaped heads, and each against nginx's count for the same heads."""
    rows = [row for row in record.rows if row.group == "fast-and-correct"]
    if not rows:
        return "*No fast-and-correct rows in the record yet: `python scripts/bench.py instructions` counts them.*\n"
    by_key = {(row.step, row.design_name, row.request_heads): row for row in rows}
    nginx_name = next((row.design_name for row in rows if row.step is None), None)
    nginx = {heads: mean_count(by_key.get((None, nginx_name, heads))) for heads in (None, "production")}
    lines = ["| | Server | wrk's one-header GET | vs nginx | production-shaped heads | vs nginx |",
             "|---|---|---|---|---|---|"]
    keys = sorted({(row.step, row.design_name, row.title) for row in rows},
                  key=lambda key: (key[0] is None, key[0] or 0))
    for step, design_name, title in keys:
        cells = []
        for heads in (None, "production"):
            row = by_key.get((step, design_name, heads))
            mean = mean_count(row)
            if row is None:
                cells += ["–", "–"]
            elif mean is None:
                cells += [f"not measured: {_cell('; '.join(row.problems) or 'fewer than two measurements')}", "–"]
            else:
                flag = "" if instruction_counts.agree(measurements(row), record.settings.agreement) else " ⚠ spread"
                base = nginx[heads]
                cells += [f"**{mean:,.0f}**{flag}", f"{mean / base:.1f}×" if base else "–"]
        label = f"step {step}" if step is not None else "reference"
        lines.append(f"| {label} | {title} | " + " | ".join(cells) + " |")
    largest = largest_difference(rows)
    low, high = record.settings.requests
    return ("\n".join(lines) + "\n\n"
            f"Instructions per request in user space (callgrind), each the mean of two measurements"
            + (f" that differ by at most {largest:.2%}" if largest is not None else "")
            + f": (total({high:,}) − total({low:,})) / {high - low:,} requests on one keep-alive connection, "
            "one at a time. wrk's one-header GET is the same head every time; the production-shaped heads are "
            "those of the `peak-production-heads` scenario (clients/tools/production_heads.txt), each unique. "
            "nginx is its master and its one worker, counted together. The kernel's work is not counted. "
            f"{record.valgrind}; commit `{record.environment.commit[:10]}`"
            f"{' (with uncommitted changes)' if record.environment.dirty else ''}; "
            f"{record.mode} run of {record.started_utc}.\n")


def instructions_files(results_dir: Path, generated_dir: Path, records: dict[str, ScenarioRecord],
                       header: str) -> dict[Path, str]:
    """instructions.md (steps, hardened vs plain) and instructions-python-versions.md; "not measured yet" before."""
    path = results_dir / instruction_counts.RECORD
    if not path.exists():
        note = ("*Not measured yet: `python scripts/bench.py instructions` writes "
                f"`results/{instruction_counts.RECORD}`.*\n")
        return {generated_dir / name: header.format(source="results/") + note for name in [*PAGE_GROUPS, CHAIN_PAGE]}
    record = load_instructions(path)
    cpu = cpu_microseconds(results_dir, records)
    source = header.format(source=f"results/{instruction_counts.RECORD}")
    files = {generated_dir / name: source + instructions_page(record, cpu, groups)
             for name, groups in PAGE_GROUPS.items()}
    files[generated_dir / CHAIN_PAGE] = source + chain_table(record)
    return files


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
