"""Render the multi-process records (results/multi-process/*.json): restarts under load, and worker balance.

Reads records only (harness/suites/restart.py and harness/suites/balance.py measure). The restart
table counts every failed request by kind, per run (the median and every run's count: a
target measured once is flagged); its plot shows, per target, the latency of the requests
due in each bin and the failed ones, with the restarts marked, for the run with the
median count. The
balance table lists how many connections each worker served.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

from harness.model.records import MULTI_PROCESS_DIR_NAME, RESULTS_DIR
from harness.model.records.multi_process_records import (
    MULTI_PROCESS_KINDS,
    Answer,
    BalanceRecord,
    InFlightRecord,
    MultiProcessRecord,
    RestartRecord,
    RestartRun,
    RestartTarget,
)
from harness.model.records.scenario_record import ScenarioRecord
from harness.render.cells import SPREAD_FLAG, format_rate, rate_cells, rate_medians, spread_warning
from harness.render.presentation import design_link, wide_table
from harness.render.generated_header import HEADER

WINDOW_SECONDS = 1.0  # "around a restart": requests due from a restart to this long after it
# restart_probe.py's outcomes other than a status, as a reader says them
IN_FLIGHT_FAILURES = {"closed": "closed before an answer", "reset": "reset", "timeout": "timed out",
                      "refused": "refused"}


KINDS = tuple(MULTI_PROCESS_KINDS)


def load_multi_process_records(results_dir: Path = RESULTS_DIR) -> dict[str, MultiProcessRecord]:
    """Every record of results/multi-process/ by scenario id, typed; each must be of a kind rendered here."""
    records = {}
    for path in sorted((results_dir / MULTI_PROCESS_DIR_NAME).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("kind") not in KINDS:  # its class checks the schema
            raise ValueError(f"{path}: not a record of a kind in {KINDS}")
        record = MULTI_PROCESS_KINDS[data["kind"]].from_json(data, str(path))
        assert isinstance(record, (BalanceRecord, RestartRecord, InFlightRecord))
        records[record.scenario.id] = record
    return records


def _worst_near_restarts(run: RestartRun) -> float | None:
    """The worst latency of a request due within WINDOW_SECONDS after any restart of one run."""
    worst = [entry.max_ms for entry in run.bins if entry.max_ms is not None
             and any(0 <= entry.t - restart.at_s < WINDOW_SECONDS for restart in run.restarts)]
    return max(worst) if worst else None


def failed_label(runs: list[RestartRun]) -> str:
    """Failed requests per run: the median in bold, every run's count after it; one run is flagged as such."""
    counts = [run.report.failed for run in runs]
    middle = statistics.median(counts)
    text = f"**{middle:,.0f}**" if middle == int(middle) else f"**{middle:,.1f}**"
    if len(counts) == 1:
        return text + " ⚠ one run, no spread"
    return text + f" ({', '.join(f'{count:,}' for count in counts)})"


def _row(row: RestartTarget) -> str:
    runs = row.runs
    if not runs:
        error = row.errors[0].error if row.errors else "no run"
        return f"| {row.label} | – | server did not start: {error.splitlines()[0]} | – | – |"
    reports = [run.report for run in runs]
    kinds = {kind: sum(report.failed_by_kind[kind] for report in reports) for kind in ("connect", "read")}
    other = sum(report.failed for report in reports) - kinds["connect"] - kinds["read"]
    requests = sorted({report.requests for report in reports})
    p50 = statistics.median((report.latency_ms.p50 if report.latency_ms else 0) or 0 for report in reports)
    worst = [value for value in map(_worst_near_restarts, runs) if value is not None]
    lost = f" ⚠ {len(row.errors)} run(s) did not start" if row.errors else ""
    return (f"| {row.label} | {', '.join(f'{count:,}' for count in requests)} | {failed_label(runs)}{lost} | "
            f"{kinds['connect']:,} / {kinds['read']:,} / {other:,} | "
            f"{p50:,.0f} / {f'{max(worst):,.0f}' if worst else '–'} |")


def restart_table(record: RestartRecord) -> str:
    scenario = record.scenario
    machine = record.environment
    pinning = machine.pinning
    repeat = scenario.repeat
    lines = [
        "| server (how it was restarted) | requests per run | failed per run: median (each run) | "
        "failed: refused / reset or cut / other, all runs | latency ms: p50 / worst within 1 s of a restart |",
        "|---|--:|--:|--:|--:|",
        *(_row(row) for row in record.targets),
        "",
        f"*Our open-loop client at {scenario.rate:g} requests/s for {scenario.seconds:g} s against each "
        f"server, simulated call {scenario.delay * 1000:g} ms, {scenario.restarts} restarts "
        f"{scenario.every:g} s apart (the plot marks where each fell on the client's clock); "
        + (f"{repeat} runs per server, the servers taking turns; latency: the median run's p50, the worst of "
           "every run. " if repeat > 1 else "one run per server (no spread: ⚠). ")
        + "Refused: the connection was refused (no socket listening). Reset or cut: reset, or closed before a "
        "whole response. Server on CPU " + str(pinning.server_cpu) + ", client on CPU "
        + str(pinning.load_tool_cpu) + f" (taskset); {machine.cpu_model}, Python {machine.python}, "
        f"commit {machine.commit[:7]}, {record.started_utc} to {record.finished_utc}.*",
    ]
    return "\n".join(lines) + "\n"


def plotted_run(row: RestartTarget) -> RestartRun:
    """The run a target's plot shows: the one with the median number of failed requests (the first of a tie)."""
    runs = sorted(row.runs, key=lambda run: run.report.failed)
    return runs[(len(runs) - 1) // 2]


def signals_table(record: RestartRecord) -> str:
    """Where each restart method comes from (each server's documentation)."""
    lines = ["| server | restart | where it is documented |", "|---|---|---|"]
    for row in record.targets:
        how = row.signal if row.method == "signal" else "stop, then start"
        lines.append(f"| {row.name} | {how} | {row.source} |")
    return "\n".join(lines) + "\n"


def restart_plot(record: RestartRecord) -> str:
    from harness.render import plots  # matplotlib is slow to import: only rendering needs it

    plt = plots.plt
    plotted = [(row.label, plotted_run(row)) for row in record.targets if row.runs]
    figure, axes_list = plt.subplots(len(plotted), 1, figsize=(7.5, 1.45 * len(plotted) + 0.6), sharex=True,
                                     squeeze=False)
    width = record.scenario.bin_seconds
    for axes, (label, run) in zip((axes for (axes,) in axes_list), plotted):
        times = [entry.t + width / 2 for entry in run.bins]
        worst = [entry.max_ms for entry in run.bins]
        median = [entry.p50_ms for entry in run.bins]
        axes.plot(times, worst, color="#7f7f7f", linewidth=1, label="worst latency in the bin")
        axes.plot(times, median, color="#1f77b4", linewidth=1.2, label="median latency")
        axes.set_yscale("log")
        axes.set_ylim(50, 20_000)
        failed_axes = axes.twinx()
        failed_axes.bar([entry.t + width / 2 for entry in run.bins], [entry.failed for entry in run.bins],
                        width=width * 0.9, color="#d62728", alpha=0.7, label="failed requests")
        failed_axes.set_ylim(0, max(1, record.scenario.rate * width))
        failed_axes.set_ylabel("failed", fontsize=8, color="#d62728")
        failed_axes.tick_params(labelsize=7)
        for restart in run.restarts:
            axes.axvline(restart.at_s, color="black", linestyle="--", linewidth=0.8)
        axes.set_title(f"{label}: {run.report.failed:,} failed"
                       + (" (the run with the median count)" if record.scenario.repeat > 1 else ""),
                       loc="left", fontsize=9)
        axes.set_ylabel("ms (log)", fontsize=8)
        axes.tick_params(labelsize=7)
    last = axes_list[-1][0]
    last.set_xlabel("seconds since the load started (dashed lines: restarts)")
    handles, labels = axes_list[0][0].get_legend_handles_labels()
    figure.legend(handles + [plt.Rectangle((0, 0), 1, 1, color="#d62728", alpha=0.7)], labels + ["failed requests"],
                  loc="upper right", fontsize=7, frameon=False, ncol=3)
    figure.tight_layout(rect=(0, 0, 1, 0.97))
    return plots._to_svg(figure)


def outcomes_label(answers: list[Answer]) -> str:
    """'6 answered (2 saying Connection: close)', then each failure kind: what the clients got."""
    if not answers:
        return "–"
    answered = [answer for answer in answers if answer.outcome == 200]
    parts = [f"{len(answered)} answered"
             + (f" ({sum(not a.keep_alive for a in answered)} saying Connection: close)"
                if any(not a.keep_alive for a in answered) else "")]
    failures = Counter(str(answer.outcome) for answer in answers if answer.outcome != 200)
    parts += [f"**{count} {IN_FLIGHT_FAILURES.get(kind, kind)}**" for kind, count in sorted(failures.items())]
    return ", ".join(parts)


def seconds_span(values: list[float]) -> str:
    """'4.71 s' for one value (or equal ones), '4.70–4.73 s' for a spread."""
    low, high = min(values), max(values)
    return f"{low:.2f} s" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}–{high:.2f} s"


def in_flight_long_table(record: InFlightRecord) -> str:
    """The requests in flight at the restart: answered or cut, and when they ended."""
    scenario = record.scenario
    lines = ["| server (restart) | requests in flight, all runs | what they got | ended, s after the restart |",
             "|---|--:|---|--:|"]
    for row in record.targets:
        answers = [answer for run in row.reported() if run.report for answer in run.report.long]
        ended = [answer.ended_s for answer in answers]
        lost = f" ⚠ {len(row.errors)} run(s) failed: {row.errors[0].error.splitlines()[0]}" if row.errors else ""
        lines.append(f"| {row.label} | {len(answers)} | {outcomes_label(answers)}{lost} | "
                     f"{seconds_span(ended) if ended else '–'} |")
    lines += ["", (f"*Each request takes the {scenario.delay:g} s simulated call and was sent "
                   f"{scenario.restart_after:g} s before the restart signal, on a new connection.*")]
    return "\n".join(lines) + "\n"


def in_flight_idle_table(record: InFlightRecord) -> str:
    """The kept-alive connections idle at the restart: did the server close them, and what their next request got."""
    lines = [("| server (restart) | next request, s after the restart | closed by the server while idle "
              "(s after the restart) | sent on the kept connection | sent on a new one (it was closed) |"),
             "|---|--:|---|---|---|"]
    for row in record.targets:
        connections = [connection for run in row.reported() if run.report for connection in run.report.idle]
        for moment in sorted({connection.next_at_s for connection in connections}):
            group = [connection for connection in connections if connection.next_at_s == moment]
            closes = [connection for connection in group if connection.closed_by_server]
            kinds = Counter(connection.closed_by_server for connection in closes)
            closed = "none" if not closes else ", ".join(
                f"{count} {kind}" for kind, count in sorted(kinds.items())) + " at " + seconds_span(
                [connection.closed_at_s for connection in closes if connection.closed_at_s is not None])
            kept = [connection.next for connection in group if connection.reused]
            fresh = [connection.next for connection in group if not connection.reused]
            lines.append(f"| {row.label} | {moment:g} | {len(closes)} of {len(group)}: {closed} | "
                         f"{outcomes_label(kept)} | {outcomes_label(fresh)} |")
    return "\n".join(lines) + "\n"


def in_flight_tables(record: InFlightRecord) -> str:
    """Both tables of the in-flight restart, and one caption with the conditions."""
    scenario = record.scenario
    machine = record.environment
    pinning = machine.pinning
    repeat = scenario.repeat
    caption = (
        f"*One restart per run; {scenario.long} requests in flight and {scenario.idle} kept-alive connections "
        f"idle at the restart, their next requests taken in turn at {' and '.join(f'{v:g}' for v in scenario.next_after)} s "
        f"after it; every request {scenario.delay:g} s (the simulated call). "
        + (f"{repeat} runs per server, the servers taking turns; counts over all runs. " if repeat > 1
           else "One run per server (⚠ no spread). ")
        + "A negative moment is before the restart. Closed before an answer: the server closed the connection "
        "(end of file) after the request was sent; reset: the connection was reset. Server on CPU " + str(pinning.server_cpu) + ", client (scripts/harness/clients/"
        "restart_probe.py) on CPU " + str(pinning.load_tool_cpu) + f" (taskset); {machine.cpu_model}, "
        f"Python {machine.python}, commit {machine.commit[:7]}"
        + (" (uncommitted changes ⚠)" if machine.dirty else "")
        + f", {record.started_utc} to {record.finished_utc}.*")
    return ("**Requests in flight at the restart**\n\n" + in_flight_long_table(record)
            + "\n**Kept-alive connections idle at the restart, and their next request**\n\n"
            + wide_table(in_flight_idle_table(record)) + "\n" + caption + "\n")


def balance_table(record: BalanceRecord) -> str:
    lines = ["| design | workers | connections served, per worker | busiest / average |", "|---|--:|---|--:|"]
    for row in record.rows:
        served = row.served
        ratio = served[0] / (sum(served) / len(served)) if served and sum(served) else float("nan")
        lines.append(f"| {row.name} | {row.workers} | {', '.join(f'{count:,}' for count in served)} | "
                     f"{ratio:.2f} |")
    scenario, machine = record.scenario, record.environment
    lines += ["", f"*{scenario.requests:,} hello-world requests, each on a new connection, {scenario.concurrency}"
              f" at a time (our closed-loop client on CPU {machine.pinning.load_tool_cpu}); the server may use"
              f" CPUs {machine.pinning.server_cpu}. Each worker prints its count as it stops. "
              f"{machine.cpu_model}, Python {machine.python}, commit {machine.commit[:7]}, "
              f"{record.started_utc[:10]}.*"]
    return "\n".join(lines) + "\n"


SCALING_PAIRS = {"scaling-hello": ("scaling-hello-one-cpu", "scaling-hello-two-cpus"),
                 "scaling-cpu": ("scaling-cpu-one-cpu", "scaling-cpu-two-cpus")}


def flagged_median(rate: dict[str, float]) -> str:
    """A cell's median, with the tables' spread warning when its runs disagreed."""
    return f"{format_rate(rate['median'])}{spread_warning(rate, word='')}"


def scaling_table(one: ScenarioRecord, two: ScenarioRecord) -> str:
    """Each design's median requests/s on one CPU and on two, and the ratio: how much a second core bought."""
    on_one, on_two = rate_cells(one), rate_cells(two)
    titles = {design.name: design.title for design in two.designs}
    lines = ["| design | req/s, server on 1 CPU | on 2 CPUs (one shared with the load tool) | 2 CPUs / 1 CPU |",
             "|---|--:|--:|--:|"]
    for key, alone in on_one.items():
        if key in on_two and alone["median"]:
            both = on_two[key]
            lines.append(f"| {design_link(key[0], titles.get(key[0]))} | {flagged_median(alone)} | "
                         f"{flagged_median(both)} | **{both['median'] / alone['median']:.2f}** |")
    pinning_two = two.environment.pinning
    lines += ["", f"*Medians of {one.settings.repeat} runs each (⚠: their range was over "
              f"{SPREAD_FLAG:.0%} of the median), from `results/{one.id}.json` and "
              f"`results/{two.id}.json`. On two CPUs the server may use CPUs {pinning_two.server_cpu} "
              f"and the load tool runs on CPU {pinning_two.load_tool_cpu}, so the ceiling is below 2.*"]
    return "\n".join(lines) + "\n"


def scaling_plot(pairs: dict[str, tuple[ScenarioRecord, ScenarioRecord]]) -> str:
    """One panel per workload: each design's median req/s on one CPU and on two, side by side."""
    from harness.render import plots  # matplotlib is slow to import: only rendering needs it
    plt = plots.plt
    figure, axes_row = plt.subplots(1, len(pairs), figsize=(5.2 * len(pairs), 3.8), squeeze=False)
    for axes, (name, (one, two)) in zip(axes_row[0], pairs.items()):
        on_one, on_two = rate_medians(one), rate_medians(two)
        keys = [key for key in on_one if key in on_two]
        positions = range(len(keys))
        axes.barh([position + 0.2 for position in positions], [on_one[key] for key in keys], height=0.4,
                  color="#9bb7d4", label="server on 1 CPU")
        axes.barh([position - 0.2 for position in positions], [on_two[key] for key in keys], height=0.4,
                  color="#1f4e79", label="on 2 CPUs")
        axes.set_yticks(list(positions), [design for design, _ in keys], fontsize=8)
        axes.invert_yaxis()
        axes.set_xlabel("requests/s (median)")
        axes.set_title(name.replace("scaling-", "").replace("cpu", "CPU-bound").replace("hello", "hello world"),
                       loc="left", fontsize=10)
    handles, labels = axes_row[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    figure.tight_layout(rect=(0, 0.07, 1, 1))  # room below the panels for the legend
    return plots._to_svg(figure)


def multi_process_files(generated_dir: Path, plot_dir: Path, results_dir: Path = RESULTS_DIR,
                        scenario_records: dict[str, ScenarioRecord] | None = None) -> dict[Path, str]:
    """The generated table files and plots of every record in results/multi-process/, and the scaling pairs."""
    files: dict[Path, str] = {}
    pairs = {}
    for name, (one, two) in SCALING_PAIRS.items():
        if scenario_records and one in scenario_records and two in scenario_records:
            pairs[name] = (scenario_records[one], scenario_records[two])
            files[generated_dir / f"{name}.md"] = (HEADER.format(source=f"results/{one}.json and results/{two}.json") + "\n"
                                                   + scaling_table(scenario_records[one], scenario_records[two]))
    if pairs:
        files[plot_dir / "scaling.svg"] = scaling_plot(pairs)
    for scenario_id, record in load_multi_process_records(results_dir).items():
        header = HEADER.format(source=f"results/{MULTI_PROCESS_DIR_NAME}/{scenario_id}.json") + "\n"
        if isinstance(record, BalanceRecord):
            files[generated_dir / f"{scenario_id}.md"] = header + balance_table(record)
            continue
        if isinstance(record, InFlightRecord):
            files[generated_dir / f"{scenario_id}.md"] = header + in_flight_tables(record)
            continue
        files[generated_dir / f"{scenario_id}.md"] = header + restart_table(record)
        files[generated_dir / f"{scenario_id}-signals.md"] = header + signals_table(record)
        files[plot_dir / f"{scenario_id}-timeline.svg"] = restart_plot(record)
    return files
