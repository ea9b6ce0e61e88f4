"""How fast can Python go, rendered: a chain's steps table, the profile's breakdown, and its flame graph.

The chains of steps and their records are described in model/how_fast_steps.py; measuring
is suites/how_fast.py (`bench.py how-fast`). Rendering (here, called by render/site.py)
reads the records and never measures. The flame graph is drawn from the committed
collapsed stacks with a fixed layout and fixed colours, so `render --check` can redraw
it and compare byte for byte.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from harness.model import limits
from harness.model.how_fast_steps import FAST_AND_CORRECT, HOW_FAST, PROFILE_NAME, PROFILES_DIR, Chain
from harness.model.records.common import Environment
from harness.model.records.how_fast_records import ProfileRecord, StepsRecord, StepsRow
from harness.model.stats import spread
from harness.render.cells import SPREAD_FLAG, rate_flags
from harness.render.generated_header import HEADER

SPREAD_PERCENT = f"{SPREAD_FLAG:.0%}"
TOOL_BOUND_PERCENT = f"{limits.TOOL_BOUND_FRACTION:.0%}"
SATURATED_PERCENT = f"{limits.CPU_SATURATED:.0%}"


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def rates(row: StepsRow) -> list[float]:
    """The req/s of a row's runs that answered."""
    return [run.requests_per_second for run in row.runs if not run.error and run.requests_per_second is not None]


def row_summary(row: StepsRow) -> dict[str, float | None]:
    """Median req/s and median CPU microseconds per request over a row's repetitions."""
    measured = rates(row)
    if not measured:
        return {"rps": None, "cpu_us": None, "low": None, "high": None}
    cpu = [run.server_resources.cpu_seconds / run.complete * 1e6 for run in row.runs
           if not run.error and run.server_resources is not None and run.server_resources.cpu_seconds is not None
           and run.complete]
    return {"rps": _median(measured), "low": min(measured), "high": max(measured),
            "cpu_us": _median(cpu) if cpu else None}


def row_limit(record: StepsRecord, row: StepsRow, ceiling: float | None) -> limits.Limit:
    """What limited a row (model/limits.limit): the tool's CPU, the server's, and the row's share of the ceiling."""
    return limits.limit([run for run in row.runs if not run.error], record.environment, ceiling)


def rate_cell_flags(record: StepsRecord, row: StepsRow, ceiling: float | None) -> str:
    """The flags a row's rate carries (cells.rate_flags: spread, tool-bound); '' for a record older than them.

    A record carries them since it names the scenario whose ceiling it measured (its settings' `ceiling_scenario`;
    `ceiling`, the row, is None when none was measured); a record made before that renders as it always did.
    """
    if record.settings.ceiling_scenario is None:
        return ""
    return rate_flags({"rate": spread(rates(row)), "runs": row.runs}, ceiling, environment=record.environment)


def cpu_cell(record: StepsRecord, row: StepsRow, cpu_us: float | None, ceiling: float | None) -> str:
    """CPU µs per request, and, when the server was at the limit of its CPU, that it is then only CPUs ÷ rate."""
    if cpu_us is None:
        return "–"
    found = row_limit(record, row, ceiling)
    if found.server_bound and found.server_busy is not None:
        return f"{cpu_us:.1f} (≈ 1/rate: server CPU {found.server_busy:.0%})"
    return f"{cpu_us:.1f}"


def steps_table(record: StepsRecord) -> str:
    """One row per step, then the reference servers measured in the same run."""
    settings = record.settings
    reference_name = settings.relative_to
    summaries = {row.name: row_summary(row) for row in record.rows}
    reference = (summaries.get(reference_name) or {}).get("rps") if reference_name else None
    ceiling_name, ceiling = limits.ceiling_row(settings.ceiling, {name: summary["rps"]
                                                                   for name, summary in summaries.items()})
    lines = ["| | Server | req/s (median, min–max) | CPU µs per request | % of " + (reference_name or "–") + " |",
             "|---|---|---|---|---|"]
    for row in record.rows:
        summary = summaries[row.name]
        label = f"step {row.step}" if row.step is not None else "reference"
        if summary["rps"] is None:
            problem = "; ".join(row.problems) or "no run"
            lines.append(f"| {label} | {row.title} | not measured: {_cell(problem)} | – | – |")
            continue
        rate = (f"**{summary['rps']:,.0f}** ({summary['low']:,.0f}–{summary['high']:,.0f})"
                + rate_cell_flags(record, row, ceiling))
        cpu = cpu_cell(record, row, summary["cpu_us"], ceiling)
        share = f"{summary['rps'] / reference:.0%}" if reference else "–"
        lines.append(f"| {label} | {row.title} | {rate} | {cpu} | {share} |")
    environment = record.environment
    heads = ("every request a production-shaped head, each unique (the `peak-production-heads` scenario's), "
             if settings.request_heads == "production" else "wrk's one-header GET, ")
    caption = (f"\nwrk, {settings.connections} keep-alive connections, {settings.seconds} s per run, "
               f"{settings.repeat} runs per row in alternating order, {heads}hello-world page with no simulated call; "
               f"server on CPU {environment.pinning.server_cpu}, wrk on CPU {environment.pinning.load_tool_cpu}; "
               f"{environment.cpu_model}, Python {environment.python}, {', '.join(tool_versions(environment))}; "
               f"commit `{environment.commit[:10]}`{' (with uncommitted changes)' if environment.dirty else ''}, "
               f"{record.mode} run of {record.started_utc}. CPU µs per request is the server's whole process "
               "group's user + system time over the run, divided by the requests answered.\n")
    if settings.ceiling_scenario is not None:
        caption = caption[:-1] + " " + flags_sentence(record, ceiling_name, ceiling) + "\n"
    return "\n".join(lines) + "\n" + caption


def tool_versions(environment: Environment) -> list[str]:
    """The version line of each tool the record names (a table of versions, where a tool gave one, as its text)."""
    return [str(version) for version in environment.tools.values()]


def flags_sentence(record: StepsRecord, ceiling_name: str | None, ceiling: float | None) -> str:
    """What the ⚠ flags of a steps table mean: tool-bound by wrk's own CPU where the record measured it (and
    server-bound beside the CPU column), else by the old rule, the share of the tool's ceiling."""
    spread_text = f"⚠ spread: the row's runs lie further apart than {SPREAD_PERCENT} of its median; "
    if all(run.load_tool_resources is not None for row in record.rows for run in row.runs):
        return (spread_text + f"⚠ tool-bound (tool CPU): wrk used {SATURATED_PERCENT} or more of its CPU, so the "
                "row measures wrk as much as the server. Where the server used "
                f"{SATURATED_PERCENT} or more of its own CPU, its CPU per request is marked ≈ 1/rate: a saturated "
                "server's CPU per request is its CPU divided by its rate, and says nothing its rate does not.")
    titles = {row.name: row.title for row in record.rows}
    if ceiling is None:
        where = "no ceiling was measured, so no row is flagged tool-bound"
    else:
        where = (f"the tool's ceiling is the highest median wrk reached in this run, the {ceiling_name} row's "
                 f"({titles.get(ceiling_name or '', ceiling_name)}, {ceiling:,.0f} req/s), measured beside "
                 f"{record.settings.ceiling}, the design the `{record.settings.ceiling_scenario}` scenario measures "
                 "as its ceiling")
    return (spread_text + f"⚠ tool-bound (share of ceiling), the old rule of a record that did not measure wrk's "
            f"own CPU: the row's median is {TOOL_BOUND_PERCENT} or more of the tool's ceiling; {where}.")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


CATEGORIES = [  # (label, colour); the order of the breakdown table and of the legend
    ("kernel: sending and receiving (write, read)", "#e8a33d"),
    ("kernel: waiting for the next request (epoll)", "#bbbbbb"),
    ("parsing the request head", "#6aa84f"),
    ("our protocol: buffer, queue, answer", "#3d85c6"),
    ("building the response", "#8e7cc3"),
    ("event loop (uvloop) and interpreter", "#cc4125"),
    ("garbage collector", "#999933"),
]
LEGEND = dict(zip([label for label, _ in CATEGORIES], ["kernel: write, read", "kernel: epoll wait", "parsing",
                                                         "our protocol", "building responses", "event loop, interpreter",
                                                         "garbage collector"]))
SYSCALL_LEAVES = {"write", "writev", "send", "sendmsg", "read", "recv", "recvmsg", "readv"}
WAIT_LEAVES = {"epoll_wait", "epoll_pwait", "epoll_pwait2"}
PARSING = {"parse_request_head", "parse_request_head_once"}
BUILDING = {"cached_response", "build_response", "response_for"}


def frame_function(frame: str) -> tuple[str, str]:
    """A py-spy frame 'name (file:line)' or 'name (library.so)': its function name and where it is."""
    name, _, where = frame.partition(" (")
    return name.strip(), where.rstrip(")")


EVENT_LOOP_SOURCES = ("loop.c", "stream.c", "core.c", "linux.c", "queue.h", "loop-watcher.c", "uv-common.c",
                      "_asynciomodule.c", "asyncio/", "uvloop/", "selector_events.py", "base_events.py", "events.py")


def category(stack: list[str], design_file: str = HOW_FAST.design_file.name) -> str:
    """Which part of the server a sample belongs to: a system call at the leaf, else the innermost frame of ours
    or of the event loop (frames of the interpreter's own helpers, such as object.h, are looked through)."""
    leaf_name, leaf_where = frame_function(stack[-1])
    if leaf_name in WAIT_LEAVES:
        return CATEGORIES[1][0]
    if leaf_name in SYSCALL_LEAVES and "libc" in leaf_where:
        return CATEGORIES[0][0]
    if any(frame_function(frame)[0].startswith("gc_collect") for frame in stack):
        return CATEGORIES[6][0]
    for frame in reversed(stack):
        name, where = frame_function(frame)
        if where.startswith(design_file) or where.startswith("step-"):
            if name in PARSING:
                return CATEGORIES[2][0]
            if name in BUILDING:
                return CATEGORIES[4][0]
            return CATEGORIES[3][0]
        if where.startswith(EVENT_LOOP_SOURCES) or "/asyncio/" in where:
            return CATEGORIES[5][0]
    return CATEGORIES[5][0]


def read_collapsed(text: str) -> list[tuple[list[str], int]]:
    """Collapsed stacks ('frame;frame;frame count' per line), as (frames, samples)."""
    stacks = []
    for line in text.splitlines():
        if not line.strip():
            continue
        frames, _, count = line.rpartition(" ")
        stacks.append((frames.split(";"), int(count)))
    return stacks


def breakdown(stacks: list[tuple[list[str], int]]) -> dict[str, int]:
    """Samples per category, in CATEGORIES order."""
    counts = {label: 0 for label, _ in CATEGORIES}
    for frames, samples in stacks:
        counts[category(frames)] += samples
    return counts


def profile_page(meta: ProfileRecord, stacks: list[tuple[list[str], int]], svg_name: str) -> str:
    """CPU microseconds per request, split kernel/user by the kernel's own count and user time by the samples."""
    counts = breakdown(stacks)
    kernel_labels = {CATEGORIES[0][0], CATEGORIES[1][0]}
    user_samples = sum(count for label, count in counts.items() if label not in kernel_labels)
    cpu, wrk = meta.cpu, meta.wrk
    requests = wrk.complete or 0
    user_us = cpu.user_seconds / requests * 1e6 if requests else 0.0
    system_us = cpu.system_seconds / requests * 1e6 if requests else 0.0
    total_us = user_us + system_us
    lines = ["| Where a request's CPU time goes | µs per request | Share | Samples |", "|---|---|---|---|",
             f"| in the kernel (system calls: reading, writing, polling) | {system_us:.1f} | "
             f"{system_us / total_us:.0%} | {counts[CATEGORIES[0][0]] + counts[CATEGORIES[1][0]]:,} |"]
    for label, _ in CATEGORIES:
        if label in kernel_labels:
            continue
        share = counts[label] / user_samples if user_samples else 0.0
        lines.append(f"| in user space: {label} | {user_us * share:.1f} | {user_us * share / total_us:.0%} | "
                     f"{counts[label]:,} |")
    lines.append(f"| **all** | **{total_us:.1f}** | 100% | {sum(counts.values()):,} |")
    environment, commands = meta.environment, meta.commands
    lines.append("")
    lines.append(f"*The server's user and system CPU time are the kernel's own count (/proc) over a "
                 f"{wrk.duration_s or 0:.0f} s wrk run without the profiler: {cpu.user_seconds:.2f} s and "
                 f"{cpu.system_seconds:.2f} s for {requests:,} requests ({wrk.requests_per_second or 0:,.0f} req/s). "
                 "A second run, under the profiler, gave the samples. "
                 f"User time is split in proportion to {meta.profiler}'s samples outside system calls "
                 f"({user_samples:,} of {sum(counts.values()):,}; {meta.rate_hz} Hz for {meta.seconds} s, "
                 f"native frames). wrk held {meta.connections} keep-alive connections; server on CPU "
                 f"{environment.pinning.server_cpu}, wrk and the profiler on CPU "
                 f"{environment.pinning.load_tool_cpu}; {environment.cpu_model}, Python "
                 f"{environment.python}, commit `{environment.commit[:10]}`, {meta.started_utc}. "
                 f"Commands: `{' '.join(commands.server)}`, `{' '.join(commands.load)}`, "
                 f"`{' '.join(commands.profiler)}`.*")
    lines.append("")
    lines.append(saturation_line(meta))
    lines.append("")
    lines.append(f"![Flame graph of the fastest design under wrk](plots/{svg_name})")
    return "\n".join(lines) + "\n"


def saturation_line(meta: ProfileRecord) -> str:
    """Was the server saturated? A profile of a server that mostly waits shows the wait, not the work."""
    measured = meta.saturation
    if measured is None:  # recorded before the check: the busy share follows from the kernel's count and wrk's time
        busy = (meta.cpu.user_seconds + meta.cpu.system_seconds) / (meta.wrk.duration_s or float("nan"))
        return (f"⚠ **Not at saturation.** The server was on CPU {busy:.0%} of the run without the profiler, so "
                "most samples caught it waiting for work (the kernel rows above): this profile was taken before the "
                "harness checked saturation, and describes an idle server more than a busy one.")
    ratio = measured.rate_of_steps_table
    against = f"; its rate was {ratio:.0%} of the steps table's last step" if ratio is not None else ""
    return (f"Saturation: the server was on CPU {measured.server_busy:.0%} of the run without the profiler and "
            f"{measured.server_busy_profiled:.0%} of the profiled one{against} (the harness refuses a profile "
            "below 80% busy or 90% of that rate).")


# A flame graph: x is the share of samples, y the depth of the stack; each box one frame, its children
# above it, sorted by name so that the same profile always draws the same picture.

WIDTH, ROW, FONT = 1200, 17, 11
MIN_WIDTH = 0.5  # pixels: thinner boxes are left out


def flame_graph(stacks: list[tuple[list[str], int]], title: str) -> str:
    """A deterministic SVG flame graph of collapsed stacks, boxes coloured by CATEGORIES."""
    tree: dict[str, Any] = {"samples": 0, "children": {}, "category": ""}
    for frames, samples in stacks:
        node = tree
        node["samples"] += samples
        label = category(frames)
        for frame in frames:
            node = node["children"].setdefault(frame, {"samples": 0, "children": {}, "category": label})
            node["samples"] += samples
    total = tree["samples"] or 1
    depth = _depth(tree)
    height = (depth + 3) * ROW + 20
    colours = dict(CATEGORIES)
    boxes: list[str] = []

    def draw(node: dict[str, Any], x: float, level: int) -> None:
        for name in sorted(node["children"]):
            child = node["children"][name]
            width = child["samples"] / total * WIDTH
            if width >= MIN_WIDTH:
                y = height - (level + 2) * ROW
                function, where = frame_function(name)
                share = child["samples"] / total
                colour = colours[_box_category(function, where)]
                text = html.escape(function if width > 7 * len(function) else function[: max(int(width / 7) - 1, 0)])
                boxes.append(f'<g><title>{html.escape(name)}: {child["samples"]} samples ({share:.1%})</title>'
                             f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="{ROW - 1}" fill="{colour}"/>'
                             + (f'<text x="{x + 2:.1f}" y="{y + ROW - 5}">{text}</text>' if text else "") + "</g>")
                draw(child, x, level + 1)
            x += width

    draw(tree, 0.0, 0)
    legend = "".join(f'<rect x="{10 + index * 170}" y="22" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{24 + index * 170}" y="31">{html.escape(LEGEND[label])}</text>'
                     for index, (label, colour) in enumerate(CATEGORIES))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="{FONT}">\n'
            f'<text x="10" y="14" font-size="13">{html.escape(title)}</text>\n{legend}\n'
            + "\n".join(boxes) + "\n</svg>\n")


def _box_category(function: str, where: str) -> str:
    """A box's colour: the category its own frame belongs to."""
    return category([f"{function} ({where})"])


def _depth(node: dict[str, Any]) -> int:
    return 1 + max((_depth(child) for child in node["children"].values()), default=0)


def load_steps(path: Path) -> StepsRecord:
    """A chain's steps record, typed."""
    return StepsRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


def load_profile(path: Path) -> ProfileRecord:
    """A profile's record (the .json beside its collapsed stacks), typed."""
    return ProfileRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


def steps_files(chain: Chain, results_dir: Path, generated_dir: Path) -> dict[Path, str]:
    """A chain's steps tables: <chain>-steps.md, and for fast-and-correct <chain>-steps-production-heads.md too."""
    files = steps_file(chain, results_dir, generated_dir)
    if chain is FAST_AND_CORRECT:  # its page compares wrk's one-header GET with production-shaped heads
        files |= steps_file(chain, results_dir, generated_dir, request_heads="production")
    return files


def steps_file(chain: Chain, results_dir: Path, generated_dir: Path,
               request_heads: str | None = None) -> dict[Path, str]:
    """One steps table, from its record (a 'not measured yet' line before there is one)."""
    suffix = f"-{request_heads}-heads" if request_heads else ""
    target = generated_dir / f"{chain.name}-steps{suffix}.md"
    record = chain.record_for(request_heads)
    steps_path = results_dir / record
    if steps_path.exists():
        return {target: HEADER.format(source=f"results/{record}") + steps_table(load_steps(steps_path))}
    option = ("" if chain is HOW_FAST else f" --chain {chain.name}") + (
        f" --request-heads {request_heads}" if request_heads else "")
    return {target: HEADER.format(source="results/") + (
        f"*Not measured yet: `python scripts/bench.py how-fast steps{option}` writes `results/{record}`.*\n")}


def how_fast_files(results_dir: Path, generated_dir: Path, plots_dir: Path) -> dict[Path, str]:
    """The generated files of the how-fast page: steps table, profile breakdown, flame graph (when recorded)."""
    files = steps_files(HOW_FAST, results_dir, generated_dir)
    stacks_path = results_dir / PROFILES_DIR / f"{PROFILE_NAME}.collapsed"
    meta_path = results_dir / PROFILES_DIR / f"{PROFILE_NAME}.json"
    if stacks_path.exists() and meta_path.exists():
        stacks = read_collapsed(stacks_path.read_text(encoding="utf-8"))
        meta = load_profile(meta_path)
        svg_name = f"how-fast-{PROFILE_NAME}-flamegraph.svg"
        files[generated_dir / "how-fast-profile.md"] = (
            HEADER.format(source=f"results/{PROFILES_DIR}/{PROFILE_NAME}.collapsed and .json")
            + profile_page(meta, stacks, svg_name))
        files[plots_dir / svg_name] = flame_graph(stacks, f"{PROFILE_NAME} under wrk: {sum(n for _, n in stacks):,} samples")
    else:
        files[generated_dir / "how-fast-profile.md"] = HEADER.format(source="results/") + (
            "*Not profiled yet: `python scripts/bench.py how-fast profile` writes `results/profiles/`.*\n")
    return files
