"""Render the sizing sweeps (scripts/catalogue/16-sizing.toml) for docs/sizing.md: tables, plots, the rules.

Reads records only. Every run of a sizing record says its `size` (the worker or thread count the
server was started with, suites/runner.py measure_sized); a cell is one (design, size), its runs
the repetitions. Beside each measured rate the tables put what Little's law allows: with L
requests in the server at once, each W seconds long, a server completes L / W requests a second.
L is the smaller of the count and the connections the tool holds; W is the scenario's simulated
call plus the CPU the server spent per request (measured: its process group's CPU seconds over its
answers); and no server answers faster than the CPUs it can keep busy can do that CPU work (CPUs /
CPU per request): one per process for processes of one thread (a Python event loop, a sequential
worker: uvicorn with one worker is bounded by one CPU, not the two it may use), every CPU the
server may use for a thread pool or a Rust runtime. A bound is never below a measurement: a test
checks every committed record. Where a design falls short of that line, the page says why. Memory is the process
group's peak PSS divided by the processes it held at the peak (peak_processes), so a Gunicorn
arbiter counts as one of the processes.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from harness.model import limits
from harness.model.records.scenario_record import Outcome, Run, ScenarioRecord
from harness.render.cells import format_rate, rate_flags, rate_label, spread_warning, summarise_cell
from harness.render.presentation import design_link, design_style, wide_table
from harness.render.generated_header import HEADER

SCENARIOS = ("sizing-waiting", "sizing-computing", "sizing-mixed", "sizing-deployed")  # closed loop, one table each
OPEN_LOOP = "sizing-open-loop"
# Gunicorn gthread, workers x threads: one sweep of --workers per thread count (16-sizing.toml), one table.
GTHREAD_GRID = ("sizing-gthread-threads-1", "sizing-gthread-threads-4", "sizing-gthread-threads-16")
GTHREAD = "gunicorn-gthread"


def is_sizing(record: ScenarioRecord) -> bool:
    """Whether a record is a sizing sweep (its runs carry `size`): the generic scenario tables leave it out."""
    return bool(record.settings.sizes)


def cells(design: Outcome) -> dict[tuple[int, float], dict[str, Any]]:
    """(size, level) -> summarise_cell of that count's successful runs."""
    grouped: dict[tuple[int, float], list[Run]] = {}
    for run in design.runs:
        if run.error is None and run.get("size") is not None:
            level = run.get("rate") if run.get("mode") == "open" else run.concurrency
            grouped.setdefault((run.get("size"), level), []).append(run)
    return {key: summarise_cell(runs) for key, runs in sorted(grouped.items())}


def server_cpus(record: ScenarioRecord) -> int:
    """How many CPUs the server could run on (the harness's taskset list)."""
    cpus = record.environment.pinning.server_cpu
    return len(cpus.split(",")) if cpus is not None else record.environment.cpu_count  # None: not pinned, every CPU


def cpu_per_request(cell: dict[str, Any]) -> float | None:
    """The median server CPU seconds per answered request over a cell's runs."""
    values = [run.server_resources.cpu_seconds_per_1000_requests / 1000 for run in cell["runs"]
              if run.server_resources and run.server_resources.cpu_seconds_per_1000_requests]
    return statistics.median(values) if values else None


def sized_by(record: ScenarioRecord, design: Outcome) -> str | None:
    """The option the sweep sets to the count: "--workers" (processes) or "--threads" (threads in one process)."""
    arguments = (record.settings.size_arguments or {}).get(design.name) or []
    return next((argument for argument in arguments if argument.startswith("--")), None)


def one_thread_per_process(design: Outcome) -> bool:
    """A design whose every process runs one thread (an event loop in Python, or sequential workers): it can use
    one CPU per process, however many connections it holds. A Rust runtime or a thread pool can use more."""
    model = design.model
    return ("sequential" in model or "event loop" in model) and "thread" not in model and "Rust" not in model


def in_flight(record: ScenarioRecord, design: Outcome, size: int, connections: float) -> float:
    """Requests a design holds at once: a thread or a sequential process holds one, so a count of them holds that
    many; an event loop may hold every connection, and so may workers of a thread pool each (gthread sized by
    --workers: its threads per worker, 16 in its config, are not the count)."""
    every_connection = "event loop" in design.model or (
        sized_by(record, design) == "--workers" and "thread" in design.model)  # workers of a thread pool each
    return connections if every_connection else min(size, connections)


def usable_cpus(record: ScenarioRecord, design: Outcome, size: int) -> int:
    """CPUs the design can keep busy at this count: one per process for one-thread processes (uvicorn with one
    worker: one CPU, not the two the harness lets it use), else every CPU the server may use."""
    cpus = server_cpus(record)
    if not one_thread_per_process(design):
        return cpus
    return min(cpus, size if sized_by(record, design) == "--workers" else 1)


def littles_law(record: ScenarioRecord, held: float, cpu: float | None, cpus: int | None = None) -> float | None:
    """Requests/s Little's law allows with `held` requests at once: held / (call + CPU), capped by `cpus` (default:
    every CPU the server may use) ÷ CPU per request."""
    delay = record.settings.delay
    busy = delay + (cpu or 0.0)
    if busy <= 0:
        return None
    bound = held / busy
    return min(bound, (cpus or server_cpus(record)) / cpu) if cpu else bound


def memory_label(cell: dict[str, Any]) -> str:
    """Peak PSS of the process group (median over runs) and per process, by the processes it held."""
    pss = [run.server_resources.peak_pss_mib for run in cell["runs"] if run.server_resources]
    processes = [run.server_resources.peak_processes for run in cell["runs"] if run.server_resources]
    pss = [value for value in pss if value is not None]
    processes = [value for value in processes if value]
    if not pss or not processes:
        return "–"
    total, count = statistics.median(pss), statistics.median(processes)
    return f"{total:.0f} / {count:g} = {total / count:.1f}"


def sizing_table(record: ScenarioRecord) -> str:
    """One row per (design, count): the rate and its flags, Little's law, latency, memory."""
    lines = ["| design | count | req/s | Little's law | mean ms | p99 ms | PSS MiB / processes |",
             "|---|--:|--:|--:|--:|--:|--:|"]
    ceilings = limits.ceilings(record)
    for design in record.designs:
        for (size, level), cell in cells(design).items():
            law = littles_law(record, in_flight(record, design, size, level), cpu_per_request(cell),
                              usable_cpus(record, design, size))
            lines.append(f"| {design_link(design.name)} | {size} | {rate_label(cell, ceilings.get(level), record=record)} | "
                         f"{'–' if law is None else format_rate(law)} | {cell['latency'].get('mean', 0):.0f} | "
                         f"{cell['latency'].get('p99', 0):.0f} | {memory_label(cell)} |")
        if design.status != "ok":
            lines.append(f"| {design_link(design.name)} | – | {design.status}: "
                         f"{'; '.join(design.problems)[:160]} | | | | |")
    return wide_table("\n".join(lines))


def caption(record: ScenarioRecord) -> str:
    """What the table measured, where, and how to read its columns."""
    runs = record.settings.repeat
    pinning = record.environment.pinning
    how = ("Threads needed: offered rate × the 0.1 s call (Little's law); ✗ where the pool is smaller. Latency "
           "is from each request's scheduled start, so time spent queued counts." if record.settings.rate
           else f"Little's law: the requests held at once (the count of threads or of sequential processes; every "
                f"connection for an event loop, or for workers whose threads the sweep does not set) ÷ (call + the "
                f"server's measured CPU per request), capped by the CPUs it can keep busy ÷ CPU per request: one per "
                f"process for one-thread processes (a Python event loop, a sequential worker), else the "
                f"{server_cpus(record)} the server may use. Memory: peak PSS of the process group ÷ the "
                "processes it held.")
    return (f"*{record.scenario.title}. Each count is a fresh server; {runs} "
            f"{'run' if runs == 1 else 'runs'} per count, the median in bold (⚠ when the runs disagree by more than "
            f"the spread flag{'; one run shows no spread' if runs == 1 else ''}). The server may use CPUs "
            f"{pinning.server_cpu}; the load tool is pinned to CPU {pinning.load_tool_cpu} and shares it. "
            f"{how} Commit `{record.environment.commit[:10]}`, {record.started_utc[:10]}.*\n")


def sizing_plot(record: ScenarioRecord) -> str:
    """Requests/s against the count (log 2), one line per design, with Little's law drawn over them."""
    from harness.render import plots  # matplotlib: only when rendering

    figure, axes = plots.plt.subplots(figsize=(7.5, 4.2))
    every_size: list[int] = []
    cpus: list[float] = []
    connections = record.settings.concurrency[0]
    for design in record.designs:
        design_cells = cells(design)
        sizes = [size for size, _ in design_cells]
        rates = [cell["rate"]["median"] for cell in design_cells.values()]
        cpus += [cpu for cpu in map(cpu_per_request, design_cells.values()) if cpu]
        if sizes:
            axes.plot(sizes, rates, markersize=5, **design_style(design.name))
            every_size += sizes
    if every_size and cpus:
        least = statistics.median(cpus)  # the typical CPU per request of the cells drawn
        span = [2 ** power for power in range(0, max(every_size).bit_length() + 1)]
        law = [littles_law(record, min(size, connections), least) for size in span]
        axes.plot(span, law, linestyle="--", color="#202020", linewidth=1.2,
                  label=f"Little's law for a thread or process each: min(n, {connections}) ÷ {record.settings.delay + least:.3f} s, "
                        f"capped by {server_cpus(record)} CPUs ÷ {least * 1000:.2g} ms (median CPU per request)")
    axes.set_xscale("log", base=2)
    axes.xaxis.set_major_formatter(plots.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axes.set_xlabel("workers or threads (log scale)")
    axes.set_ylabel("requests per second (median)")
    axes.set_title(record.scenario.title.split(":")[0], loc="left")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=2)
    return plots._to_svg(figure)


def open_loop_table(record: ScenarioRecord) -> str:
    """Threads x offered rate: threads Little's law asks for (rate x W), what was answered, and the latency."""
    delay = record.settings.delay
    lines = ["| threads | offered req/s | threads needed (rate × W) | answered req/s | p50 ms | p99 ms | failed |",
             "|--:|--:|--:|--:|--:|--:|--:|"]
    for design in record.designs:
        for (size, rate), cell in cells(design).items():
            needed = rate * delay
            lines.append(f"| {size} | {rate:g} | {needed:g}{' ✗' if needed > size else ''} | "
                         f"**{format_rate(cell['rate']['median'])}**{spread_warning(cell['rate'])} | "
                         f"{cell['latency'].get('p50', 0):.0f} | {cell['latency'].get('p99', 0):,.0f} | "
                         f"{cell['failed'] if cell['failed'] is not None else '–'} |")
    return wide_table("\n".join(lines))


def open_loop_plot(record: ScenarioRecord) -> str:
    """p99 latency against the offered rate, one line per thread count."""
    from harness.render import plots

    figure, axes = plots.plt.subplots(figsize=(7.5, 4.2))
    delay = record.settings.delay
    for design in record.designs:
        by_size: dict[int, list[tuple[float, float]]] = {}
        for (size, rate), cell in cells(design).items():
            by_size.setdefault(size, []).append((rate, cell["latency"].get("p99", 0)))
        for index, (size, points) in enumerate(sorted(by_size.items())):
            axes.plot([rate for rate, _ in points], [p99 for _, p99 in points], marker="os^v"[index % 4],
                      label=f"{size} threads: capacity {size / delay:g} req/s by Little's law")
    axes.set_yscale("log")
    axes.yaxis.set_major_formatter(plots.ticker.FuncFormatter(lambda value, _: f"{value:,g}"))
    axes.set_xlabel("offered requests per second (open loop)")
    axes.set_ylabel("p99 latency, ms (log scale)")
    axes.set_title("Open loop, 100 ms call: a pool below rate × W queues", loc="left")
    axes.grid(True, which="major", alpha=0.3)
    axes.legend(fontsize=8, frameon=False, loc="upper left")
    return plots._to_svg(figure)


def best(record: ScenarioRecord | None, design_name: str) -> tuple[int, dict[str, Any]] | None:
    """The smallest count whose median reaches 90% of the design's best median: (size, cell)."""
    if record is None:
        return None
    design = record.design(design_name)
    if design is None:
        return None
    design_cells = cells(design)
    if not design_cells:
        return None
    top = max(cell["rate"]["median"] for cell in design_cells.values())
    return next((size, cell) for (size, _), cell in design_cells.items() if cell["rate"]["median"] >= 0.9 * top)


def at(record: ScenarioRecord | None, design_name: str, size: int) -> dict[str, Any] | None:
    design = record.design(design_name) if record else None
    return next((cell for (count, _), cell in cells(design).items() if count == size), None) if design else None


def figure(record: ScenarioRecord | None, design_name: str, size: int) -> str:
    """'N req/s at size S (scenario)' with the cell's flags, or 'not measured'."""
    cell = at(record, design_name, size)
    if record is None or cell is None:
        return "not measured"
    ceiling = limits.ceilings(record).get(cell["runs"][0].concurrency)
    return (f"{format_rate(cell['rate']['median'])} req/s at {size}"
            f"{rate_flags(cell, ceiling, record=record)} (`{record.id}`)")


RULES = [  # model, design, the rule, the scenarios whose figures stand behind it
    ("thread pool (thread-pool-executor, Waitress, gthread threads)", "thread-pool-executor",
     "threads ≥ the requests you want in flight: arrival rate × time a request holds its thread (Little's law); "
     "past the CPUs, threads only help while they wait", ["sizing-waiting", "sizing-mixed", "sizing-computing"]),
    ("pre-fork processes (prefork, Gunicorn sync)", "prefork",
     "a process holds one request: processes = rate × W for waiting work, and no more than the CPUs for "
     "computing work; every process costs its own memory", ["sizing-waiting", "sizing-computing", "sizing-mixed"]),
    ("event-loop workers (our supervisor, uvicorn --workers, Granian --workers)", "event-loop-workers",
     "one worker per CPU the process may use (usable_cpus: affinity and cgroup quota); waiting costs an event "
     "loop nothing, so more workers help only computing", ["sizing-waiting", "sizing-computing", "sizing-mixed"]),
]


def rules_table(records: dict[str, ScenarioRecord]) -> str:
    """The page's closing rules: each with the smallest count within 90% of that design's best, per handler."""
    lines = ["| model | rule | the figure behind it |", "|---|---|---|"]
    for model, design, rule, scenario_ids in RULES:
        figures = []
        for scenario_id in scenario_ids:
            found = best(records.get(scenario_id), design)
            handler = scenario_id.removeprefix("sizing-")
            figures.append(f"{handler}: " + ("not measured" if found is None else
                                             f"90% of its best first at {found[0]}: "
                                             + figure(records[scenario_id], design, found[0])))
        lines.append(f"| {model} | {rule} | {'<br>'.join(figures)} |")
    deployed = records.get("sizing-deployed")
    for design in ("uvicorn", "gunicorn-uvicorn-worker", "granian-asgi", "gunicorn-gthread"):
        found = best(deployed, design)
        if found is None:
            continue
        five = at(deployed, design, 5)
        memory = f"; memory at 5: {memory_label(five)} MiB" if five else ""
        shown = [figure(deployed, design, size) for size in sorted({1, found[0]}) if at(deployed, design, size)]
        lines.append(f"| {design_link(design)} as deployed (hello world) | the fewest workers within 90% of its "
                     f"best here: {found[0]} | {'; '.join(shown)}{memory} |")
    return wide_table("\n".join(lines))


class GridError(ValueError):
    """The gthread grid's records do not cover every (workers, threads) cell they planned."""


def threads_of(record: ScenarioRecord) -> int:
    """The thread count a grid record fixed: the value after --threads in its size arguments."""
    arguments = (record.settings.size_arguments or {}).get(GTHREAD, [])
    if "--threads" not in arguments:
        raise GridError(f"results/{record.id}.json: its size arguments for {GTHREAD} set no --threads")
    return int(arguments[arguments.index("--threads") + 1])


def grid_cell(record: ScenarioRecord, workers: int) -> str:
    """One (workers, threads) cell: the median req/s with its flags, p99, the process group's peak PSS.

    A count whose runs all failed shows the failure (the record keeps it); a count with no run at all is
    a record that does not match its own plan, and raises GridError naming the file and the count.
    """
    design = record.design(GTHREAD)
    where = f"results/{record.id}.json"
    if design is None:
        raise GridError(f"{where} has no {GTHREAD} design: re-run the scenario")
    found = next((cell for (size, _), cell in cells(design).items() if size == workers), None)
    if found is None:
        failed = [run for run in design.runs if run.get("size") == workers and run.error]
        if failed:
            return f"✗ {str(failed[0].error)[:60]}"
        raise GridError(f"{where} has no run of {GTHREAD} at {workers} workers (the grid's rows: "
                        f"{sorted(set(record.settings.sizes[GTHREAD]))}): re-run the scenario")
    ceiling = limits.ceilings(record).get(found["runs"][0].concurrency)
    pss = [run.server_resources.peak_pss_mib for run in found["runs"] if run.server_resources]
    pss = [value for value in pss if value is not None]
    memory = f"{statistics.median(pss):.0f} MiB" if pss else "– MiB"
    return f"{rate_label(found, ceiling, record=record)}<br>p99 {found['latency'].get('p99', 0):.0f} ms<br>{memory}"


def gthread_grid(records: dict[str, ScenarioRecord]) -> str | None:
    """Workers (rows) x threads per worker (columns) for Gunicorn gthread, from the GTHREAD_GRID records.

    None while none of them exists; GridError when only some do, or one lacks a cell another planned.
    """
    present = [records[scenario_id] for scenario_id in GTHREAD_GRID if scenario_id in records]
    if not present:
        return None
    missing = [scenario_id for scenario_id in GTHREAD_GRID if scenario_id not in records]
    if missing:
        raise GridError(f"the gthread grid has no results/{missing[0]}.json (it needs all of "
                        f"{', '.join(GTHREAD_GRID)}): run `python scripts/bench.py run --scenario {missing[0]}`")
    columns = sorted(present, key=threads_of)
    rows = sorted({size for record in columns for size in record.settings.sizes[GTHREAD]})
    lines = ["| workers | " + " | ".join(f"{threads_of(record)} thread{'s' if threads_of(record) > 1 else ''}"
                                          for record in columns) + " |",
             "|--:|" + "--:|" * len(columns)]
    for workers in rows:
        lines.append(f"| {workers} | " + " | ".join(grid_cell(record, workers) for record in columns) + " |")
    first = columns[0]
    pinning = first.environment.pinning
    commits = sorted({record.environment.commit[:10] for record in columns})
    days = sorted({record.started_utc[:10] for record in columns})
    runs = sorted({record.settings.repeat for record in columns})
    caption = (f"*Gunicorn gthread, hello world (no call), wrk with {first.settings.concurrency[0]} "
               f"connections for {first.settings.time_limit:g} s; each cell a fresh server, "
               f"{'/'.join(map(str, runs))} runs, the median in bold with its flags, then the median p99 and the "
               f"process group's peak PSS (arbiter and workers). The server may use CPUs {pinning.server_cpu}; "
               f"the load tool is pinned to CPU {pinning.load_tool_cpu} and shares it. Records: "
               f"{', '.join(f'`results/{scenario_id}.json`' for scenario_id in GTHREAD_GRID)}, commit "
               f"`{'`, `'.join(commits)}`, {', '.join(days)}.*\n")
    return wide_table("\n".join(lines)) + "\n" + caption


def sizing_files(records: dict[str, ScenarioRecord], generated_dir: Path, plots_dir: Path) -> dict[Path, str]:
    """docs/_generated/sizing/*.md and docs/plots/sizing-*.svg from the sizing records (a line where none yet)."""
    files: dict[Path, str] = {}
    out = generated_dir / "sizing"
    for scenario_id in (*SCENARIOS, OPEN_LOOP):
        record = records.get(scenario_id)
        if record is None:
            files[out / f"{scenario_id}.md"] = HEADER.format(source="the catalogue") + "\n" + (
                f"*Not measured yet: no `results/{scenario_id}.json`. `python scripts/bench.py run --scenario "
                f"{scenario_id} --quick` measures it on your machine.*\n")
            continue
        source = HEADER.format(source=f"results/{scenario_id}.json") + "\n"
        if scenario_id == OPEN_LOOP:
            files[out / f"{scenario_id}.md"] = source + open_loop_table(record) + "\n" + caption(record)
            files[plots_dir / f"{scenario_id}.svg"] = open_loop_plot(record)
        else:
            files[out / f"{scenario_id}.md"] = source + sizing_table(record) + "\n" + caption(record)
            files[plots_dir / f"{scenario_id}.svg"] = sizing_plot(record)
    files[out / "rules.md"] = HEADER.format(source="results/sizing-*.json") + "\n" + rules_table(records)
    grid = gthread_grid(records)
    files[out / "gthread-grid.md"] = (
        HEADER.format(source="results/sizing-gthread-threads-*.json") + "\n" + grid if grid is not None else
        HEADER.format(source="the catalogue") + "\n" + "*Not measured yet: no `results/sizing-gthread-threads-*.json`. "
        + "`python scripts/bench.py run --quick --scenario ID` with each of "
        + ", ".join(f"`{scenario_id}`" for scenario_id in GTHREAD_GRID) + " as ID measures it on your machine.*\n")
    return files
