"""Memory per open connection: what each further connection a design holds costs in resident memory.

Theory of operation: a sweep record measures each design at several
concurrency levels and records the peak RSS of the server's whole process
group (harness.resources). For each design we take the median peak RSS at each
level and fit a straight line against the level by least squares; its slope is
the memory per connection, and the lowest and highest levels show the RSS
itself. Every level counts, so one noisy level does not decide the answer.

A record with a single level (sweep-10k) cannot make a slope, but it extends a
sweep for the designs both measured, provided they were measured alike: the
same tool, simulated call and keep-alive, the same machine, and the same
commit (a server's code or configuration is part of what is measured: nginx's
worker_connections, for one, sizes memory it allocates up front). Otherwise
it is left out, and the caption says why.

Known limits: the level is the number of connections the load tool holds, not
a count taken at the server. A design that cannot keep up leaves some of them
in the kernel's accept queue, where they cost its process nothing, so read the
slope beside the throughput table. RSS summed over a process tree counts the
pages its processes share once per process; PSS divides them among the processes
that share them (system/resources.py). A record whose every run has PSS is shown
in PSS, an older one in RSS, and the table says which. Peaks are sampled every 100 ms.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from harness.model.records.scenario_record import Outcome, Run, ScenarioRecord
from harness.model.settings import LINE_ECHO_TOOLS
from harness.render.cells import cells_by_level, is_rate_sweep
from harness.render.presentation import design_link

KIB_PER_MIB = 1024


@dataclass
class MemoryLine:
    """One design's points (level, median peak RSS in MiB, scenario id) and the slope through them."""

    design: Outcome
    points: list[tuple[int, float, str]]
    processes: int  # the most processes its tree had in any run used
    failed_levels: list[int]  # levels where some requests failed: fewer connections may have been open

    @property
    def kib_per_connection(self) -> float | None:
        if len(self.points) < 2:
            return None
        levels = [level for level, _, _ in self.points]
        rss_kib = [rss * KIB_PER_MIB for _, rss, _ in self.points]
        return statistics.linear_regression(levels, rss_kib).slope


PSS, RSS = "peak_pss_mib", "peak_rss_mib"
METRIC_NAMES = {PSS: "PSS", RSS: "RSS"}


def peak_memory(run: Run, metric: str) -> float | None:
    """The run's peak memory `metric` (PSS or RSS, MiB); None where the run did not sample it."""
    return getattr(run.server_resources, metric) if run.server_resources else None


def memory_metric(record: ScenarioRecord) -> str:
    """PSS when every run of the record that sampled memory has it (shared pages counted once), else RSS."""
    sampled = [run for design in record.designs for run in design.runs if peak_memory(run, RSS) is not None]
    return PSS if sampled and all(peak_memory(run, PSS) is not None for run in sampled) else RSS


def peak_memory_by_level(design: Outcome, metric: str = RSS) -> dict[int, list[Run]]:
    """A design's successful runs that recorded the peak memory `metric`, by concurrency."""
    measured = {level: [run for run in runs if peak_memory(run, metric) is not None]
                for level, runs in cells_by_level(design.runs).items()}
    return {level: runs for level, runs in measured.items() if runs}


def is_sweep(record: ScenarioRecord) -> bool:
    """Two or more concurrency levels with peak RSS (a rate sweep holds one level of concurrency)."""
    return not is_rate_sweep(record) and any(len(peak_memory_by_level(design)) >= 2 for design in record.designs)


def is_single_level(record: ScenarioRecord) -> bool:
    """One concurrency level with peak RSS: no slope of its own, but it may extend a sweep."""
    return (not is_rate_sweep(record) and len(record.settings.concurrency) == 1
            and not record.settings.sizes  # a sizing sweep's cells differ by count, not by level
            and any(peak_memory_by_level(design) for design in record.designs))


def mismatches(sweep: ScenarioRecord, extra: ScenarioRecord) -> list[str]:
    """Why `extra`'s levels may not join `sweep`'s line: each way they were not measured alike."""
    reasons = []
    if sweep.settings.delay != extra.settings.delay:
        reasons.append(f"a {extra.settings.delay:g} s call there, {sweep.settings.delay:g} s here")
    if sweep.settings.keep_alive != extra.settings.keep_alive:
        reasons.append(f"keep-alive {'on' if extra.settings.keep_alive else 'off'} there, "
                       f"{'on' if sweep.settings.keep_alive else 'off'} here")
    if memory_metric(sweep) != memory_metric(extra):
        reasons.append(f"memory as {METRIC_NAMES[memory_metric(extra)]} there, {METRIC_NAMES[memory_metric(sweep)]} "
                       "here")
    mine, theirs = sweep.environment, extra.environment
    if (mine.cpu_model, mine.cpu_count) != (theirs.cpu_model, theirs.cpu_count):
        reasons.append(f"another machine ({theirs.cpu_model}, {theirs.cpu_count} CPUs)")
    if mine.commit != theirs.commit:
        reasons.append(f"measured at commit `{theirs.commit[:10]}`, this record at `{mine.commit[:10]}`, "
                       "so the servers' code or configuration may differ")
    elif mine.dirty or theirs.dirty:
        reasons.append("measured with uncommitted changes")
    return reasons


def memory_lines(sweep: ScenarioRecord, joined: list[ScenarioRecord]) -> list[MemoryLine]:
    """A line per design of the sweep, extended by the levels of the joined one-level records."""
    lines = []
    metric = memory_metric(sweep)
    for design in sweep.designs:
        sources = [(sweep, design)] + [(extra, other) for extra in joined for other in extra.designs
                                       if other.name == design.name]
        points, processes, failed_levels = [], 0, []
        for record, measured in sources:
            for level, runs in sorted(peak_memory_by_level(measured, metric).items()):
                points.append((level, statistics.median(peak_memory(run, metric) for run in runs), record.id))
                # Every run here sampled its resources (peak_memory_by_level kept only those).
                processes = max([processes] + [run.server_resources.peak_processes or 0 for run in runs
                                               if run.server_resources])
                if any(run.failed != 0 for run in runs):
                    failed_levels.append(level)
        lines.append(MemoryLine(design, sorted(points), processes, failed_levels))
    return lines


def _levels_used(line: MemoryLine, sweep_id: str) -> str:
    """The sweep's own levels, then each joined record's, and where requests failed."""
    own = ", ".join(f"{level:,}" for level, _, source in line.points if source == sweep_id)
    joined = [f"{level:,} (`{source}`)" for level, _, source in line.points if source != sweep_id]
    text = " + ".join(part for part in [own, *joined] if part)
    if line.failed_levels:
        text += " ⚠ requests failed at " + ", ".join(f"{level:,}" for level in line.failed_levels)
    return text or "–"


def _row(line: MemoryLine, sweep_id: str) -> str:
    design = line.design
    name = design_link(design.name, design.title)
    slope = line.kib_per_connection
    if slope is None:
        return f"| {name} | – | – | – | – | fewer than two levels measured |"
    (low, low_rss, _), (high, high_rss, _) = line.points[0], line.points[-1]
    return (f"| {name} | **{slope:.1f}** | {low_rss:.1f} (c={low:,}) | {high_rss:.1f} (c={high:,}) | "
            f"{line.processes} | {_levels_used(line, sweep_id)} |")


def _connections_note(record: ScenarioRecord) -> str:
    """What the level means in open connections, for this record's tool and settings."""
    settings, tool = record.settings, record.scenario.tool
    if tool in LINE_ECHO_TOOLS:
        return (f"{tool} opens all c connections at once and each stays open until its one line is answered "
                f"after the {settings.delay:g} s call, so up to c are open together.")
    if settings.keep_alive:
        return f"{tool} keeps each of its c connections open for the whole run: c is the number of open connections."
    if settings.delay:
        return (f"Keep-alive is off: each answer closes its connection and the {tool} client opens the next at "
                f"once. With a {settings.delay:g} s call a connection is open for nearly all of each request, "
                "so the server holds about c connections at a time.")
    return ("Keep-alive is off and there is no call to wait for: connections are short, and c is only an upper "
            "bound on the connections open at a time.")


def _and(items: list[str]) -> str:
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def caption(sweep: ScenarioRecord, lines: list[MemoryLine], decisions: list[str]) -> str:
    """How the slopes were made, what c means for this record, and which other records joined it."""
    environment = sweep.environment
    trees = [line for line in lines if line.processes > 1]
    name = METRIC_NAMES[memory_metric(sweep)]
    sentences = [
        f"KiB per connection: the least-squares slope of the peak {name} of the server's process tree (median of the "
        f"repetitions at each level) against the number of connections c, over the levels listed; the {name} columns "
        "are MiB at the lowest and highest level.",
        _connections_note(sweep),
        "A design that cannot keep up leaves some connections waiting in the kernel's accept queue, where they "
        "cost its process nothing: read the slope beside the throughput table.",
    ]
    if trees:
        names = _and([f"`{line.design.name}`" for line in trees])
        counts = _and([str(line.processes) for line in trees])
        sentences.append(f"{names} run as several processes (at most {counts}): " + (
            "their peak PSS is the sum over the process tree, each shared page divided among the processes that "
            "share it." if name == "PSS" else "their peak RSS is the sum over the process tree, which counts the "
            "pages those processes share once per process, so it overstates what they cost (this record predates "
            "PSS sampling)."))
    sentences += decisions
    sentences.append(f"Peak {name} is sampled every 100 ms. Machine: {environment.cpu_model}, "
                     f"{environment.cpu_count} CPUs; commit `{environment.commit[:10]}`, {sweep.started_utc} "
                     f"({sweep.mode} run). Raw record: `results/{sweep.id}.json`.")
    return " ".join(sentences)


def _join_decisions(sweep: ScenarioRecord, singles: list[ScenarioRecord]) -> tuple[list[ScenarioRecord], list[str]]:
    """Which one-level records of the same tool extend this sweep, and a sentence on each."""
    names = {design.name for design in sweep.designs}
    joined, decisions = [], []
    for extra in singles:
        shared = [design.name for design in extra.designs if design.name in names]
        if extra.scenario.tool != sweep.scenario.tool or not shared:
            continue  # another tool counts connections differently; no design in common joins nothing
        level = f"`{extra.id}` (c={extra.settings.concurrency[0]:,})"
        reasons = mismatches(sweep, extra)
        if reasons:
            decisions.append(f"{level} is not combined: {'; '.join(reasons)}.")
        else:
            joined.append(extra)
            decisions.append(f"{level} is combined for {', '.join(f'`{name}`' for name in shared)}: same tool, "
                             "call, keep-alive, machine and commit.")
    return joined, decisions


def memory_page(records: dict[str, ScenarioRecord]) -> str:
    """One table per sweep record, each under a line naming its scenario."""
    singles = [record for record in records.values() if is_single_level(record)]
    sections = []
    for scenario_id, record in records.items():
        if not is_sweep(record):
            continue
        joined, decisions = _join_decisions(record, singles)
        lines = memory_lines(record, joined)
        name = METRIC_NAMES[memory_metric(record)]
        head = (f"| Design | KiB per connection | Peak {name} at lowest c, MiB | Peak {name} at highest c, MiB | "
                "Processes | Levels used (c) |\n|---|---|---|---|---|---|\n")
        rows = "\n".join(_row(line, scenario_id) for line in lines)
        sections.append(f"**{record.scenario.title}** (scenario `{scenario_id}`)\n\n{head}{rows}\n\n"
                        f"{caption(record, lines, decisions)}\n")
    if not sections:
        return ("*Not measured yet: no record in `results/` measures peak memory at two or more concurrency "
                "levels.*\n")
    return "\n".join(sections)
