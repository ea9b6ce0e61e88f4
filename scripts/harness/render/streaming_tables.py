"""Render the streaming record (results/streaming.json, written by scripts/bench.py streaming).

Tables for docs/streaming.md: what holding the streams cost each design (streams held, threads,
PSS of the process group, per stream), whether the events came on time and a fresh short request
got through meanwhile, the slow readers (memory before and at the peak), and the stop with streams
open (how long, and how each client's stream ended); the same stop for uvicorn and Granian with
their stop bounded (the stop-timeout phase, from results/streaming.json or, measured on its own,
results/streaming-stop-timeout.json) beside their stop at the defaults; a plot of the server's memory
over time under the slow readers; and each stream design's own file (docs/_generated/designs/<name>.md).
Every table names its settings from the record. Reads records only.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.model import limits
from harness.model.records.streaming_record import StreamClient, StreamingRecord, StreamRow
from harness.render.presentation import design_link, design_style

RECORD = "streaming.json"
STOP_TIMEOUT_RECORD = "streaming-stop-timeout.json"  # `bench.py streaming --phase stop-timeout`: that phase alone
# The stream designs, in table order (tests/servers/test_streaming.py keeps this the catalogue's kind = "stream").
STREAM_DESIGNS = ("sse-thread-per-connection", "sse-thread-pool", "sse-asyncio-streams", "sse-asyncio-no-drain",
                  "sse-uvicorn", "sse-granian", "sse-uvicorn-stop-timeout", "sse-granian-stop-timeout")
# Each server at its defaults, its bounded twin, and the option that bounds the stop (read from the record's command).
STOP_BOUNDS = (("sse-uvicorn", "sse-uvicorn-stop-timeout", "--timeout-graceful-shutdown"),
               ("sse-granian", "sse-granian-stop-timeout", "--workers-kill-timeout"))
STREAM_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")  # matplotlib's tab10, dark enough
OUTCOMES = ("clean", "cut between events", "truncated", "reset", "no answer", "open")
NOT_MEASURED = ("*Not measured yet: no `results/streaming.json`. `python scripts/bench.py streaming --quick` "
                "measures it on your machine (into build/).*\n")


def load(results_dir: Path, name: str = RECORD) -> StreamingRecord | None:
    path = results_dir / name
    return StreamingRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path)) if path.exists() else None


def rows(record: StreamingRecord, phase: str) -> list[StreamRow]:
    found = [row for row in record.rows if row.phase == phase]
    return sorted(found, key=lambda row: STREAM_DESIGNS.index(row.design) if row.design in STREAM_DESIGNS
                  else len(STREAM_DESIGNS))


def problems(row: StreamRow) -> str:
    """Why a row failed, short enough for a cell."""
    return "; ".join(row.problems or [])[:120].replace("|", "/")


def failed_row(row: StreamRow, columns: int) -> str:
    return f"| {row.design} | failed: {problems(row)} |" + " |" * (columns - 2)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def held_and_per_stream(row: StreamRow) -> tuple[int, str]:
    """Streams held at once, and the KiB of PSS each cost ('–' when none was held)."""
    # Held at once: the most descriptors the server had open, less those it had before the streams (its
    # listener, its loop's own): the connections actually held at the peak, the denominator per stream.
    held = (row.peak_fds or 0) - (row.samples or [])[0].fds
    growth = ((row.peak_pss_mib or 0) - (row.baseline_pss_mib or 0)) * 1024
    return held, f"{growth / held:.1f}" if held > 0 else "–"


def events_share(row: StreamRow, client: StreamClient) -> str:
    """The events received as a share of those due, flagged when the client may have been what held them back."""
    share = 100 * client.events / row.events_expected if row.events_expected else 0.0
    flag = " ⚠ client CPU-bound" if (row.client_cpu_share or 0) >= limits.CPU_SATURATED else ""
    return f"{share:.0f}%{flag}"


def _count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _mib(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def cost_table(record: StreamingRecord, phase: str) -> str:
    lines = ["| design | streams served | held at once | threads | PSS MiB, before → peak | KiB per stream held |",
             "|---|--:|--:|--:|--:|--:|"]
    for row in rows(record, phase):
        if row.status != "ok" or row.client is None:
            lines.append(failed_row(row, 6))
            continue
        client = row.client
        held, per_stream = held_and_per_stream(row)
        lines.append(f"| {row.design} | {client.streams_with_events:,} of {client.streams_asked:,} | "
                     f"{held:,} | {_count(row.peak_threads)} | {_mib(row.baseline_pss_mib)} → "
                     f"**{_mib(row.peak_pss_mib)}** | {per_stream} |")
    return "\n".join(lines) + "\n"


def timing_table(record: StreamingRecord, phase: str) -> str:
    lines = ["| design | events, % of due | lag, median / p99 s | fresh `GET /` ms, median / max | failed |",
             "|---|--:|--:|--:|--:|"]
    for row in rows(record, phase):
        if row.status != "ok" or row.client is None:
            lines.append(failed_row(row, 5))
            continue
        lag = row.client.max_lag_seconds
        lag_text = "–" if lag.median is None else f"{lag.median:.2f} / {lag.p99 or 0:.2f}"
        lines.append(f"| {row.design} | {events_share(row, row.client)} | {lag_text} | {_ms(row.fresh_ms_median)} / "
                     f"{_ms(row.fresh_ms_max)} | {row.fresh_failed} of {row.fresh_asked} |")
    return "\n".join(lines) + "\n"


def guide_table(record: StreamingRecord) -> str:
    """The guide's table (which-model.md, compare.md): per design at the `hold` phase, what holding the streams cost
    and whether the server kept up, and how long its stop took (the `stop` phase)."""
    stops = {row.design: row.stop_seconds for row in rows(record, "stop") if row.status == "ok"}
    lines = ["| design | threads | KiB per stream | events, % of due | fresh request, median ms (failed) | stop, s |",
             "|---|--:|--:|--:|--:|--:|"]
    for row in rows(record, "hold"):
        if row.status != "ok" or row.client is None:
            lines.append(failed_row(row, 6))
            continue
        _, per_stream = held_and_per_stream(row)
        stop = stops.get(row.design)
        lines.append(f"| {design_link(row.design)} | {_count(row.peak_threads)} | {per_stream} | "
                     f"{events_share(row, row.client)} | "
                     f"{_ms(row.fresh_ms_median)} ({row.fresh_failed} of {row.fresh_asked}) | "
                     f"{'–' if stop is None else f'{stop:.1f}'} |")
    hold, stop_phase = record.phase("hold"), record.phase("stop")
    lines += ["", (f"*{hold.streams:,} streams at once, a {hold.event_bytes}-byte event every "
                   f"{hold.interval * 1000:g} ms each for {hold.seconds:g} s; threads: the most the server's "
                   "processes had; KiB per stream: the growth of their PSS over the streams held at once; events: "
                   "those received, as a share of those due; a fresh request on a new connection about every "
                   "half second meanwhile, failed when unanswered within 2 s. Stop: the graceful stop signal with "
                   f"{stop_phase.streams} streams open, until the last process was gone. `results/{RECORD}`, "
                   f"{record.started_utc[:10]}, ⚠ one run per design; the whole tables are on "
                   "[the streaming page](/streaming.md).*")]
    return "\n".join(lines) + "\n"


def hold_caption(record: StreamingRecord, phase: str) -> str:
    settings = record.phase(phase)
    pinning = record.environment.pinning
    return (f"*{settings.streams:,} streams asked at once (`{settings.path}`: a {settings.event_bytes}-byte "
            f"event every {settings.interval * 1000:g} ms for {settings.seconds:g} s), ⚠ one run per design. "
            "Threads: the most seen in `/proc/PID/task` "
            "over the server's process group. Streams served: those that received at least one event; held at "
            "once: the most connections the server had open together (its open descriptors at the peak, less those "
            "before the streams). PSS of the process group, before the streams and at its peak; KiB per stream "
            "divides the growth by the streams held at once. An event's lag: when it arrived minus when "
            "it was due; per stream the largest, then the median and 99th percentile over streams. A fresh "
            "request about every half second on a new connection (from a third process), failed when "
            f"unanswered within 2 s. Server on CPU {pinning.server_cpu}, client on CPU {pinning.load_tool_cpu}; "
            f"commit {record.environment.commit[:7]}, {record.started_utc[:10]}.*\n")


def slow_table(record: StreamingRecord) -> str:
    lines = ["| design | PSS MiB, before → peak | growth MiB | read by the slow clients, MiB |", "|---|--:|--:|--:|"]
    for row in rows(record, "slow"):
        if row.status != "ok" or row.client is None:
            lines.append(failed_row(row, 4))
            continue
        read = sum(reader.received_bytes for reader in row.client.slow_readers) / 2**20
        growth = (row.peak_pss_mib or 0) - (row.baseline_pss_mib or 0)
        lines.append(f"| {row.design} | {_mib(row.baseline_pss_mib)} → **{_mib(row.peak_pss_mib)}** | "
                     f"{growth:.1f} | {read:.1f} |")
    settings = record.phase("slow")
    path = record.slow_path.format(seconds=settings.seconds)
    lines += ["", (f"*{settings.slow_readers} slow clients at once, each asking for `{path}` (16 KiB every "
              "10 ms: 1.6 MB/s) and reading 4 KiB every 100 ms through a 4 KiB receive buffer (40 KiB/s). PSS of "
              "the server's process group, sampled every half second or so; the kernel's socket buffers are not in "
              "it. ⚠ One run per design.*")]
    return "\n".join(lines) + "\n"


def stop_row_cells(row: StreamRow, cap: float) -> str:
    """A stop row's cells: how long, how the streams ended, when (from the signal), the server's exit status."""
    if row.status != "ok" or row.client is None:
        return "failed: " + problems(row) + " | | |"
    took = row.stop_seconds
    took_text = f"over {cap:g} (killed)" if took is None else f"{took:.2f}"
    outcomes = row.client.outcomes
    ended = ", ".join(f"{outcomes[name]} {name}" for name in OUTCOMES if outcomes.get(name))
    after = row.client.ended_after_stop_seconds
    after_text = ("–" if after is None or after.median is None
                  else f"{after.median:.2f} – {after.max or 0:.2f}")
    exit_code = row.server_exit_code
    return f"{took_text} | {ended} | {after_text} | {'–' if exit_code is None else exit_code}"


def stop_table(record: StreamingRecord) -> str:
    lines = ["| design | stop took, s | how the streams ended | ended after the signal, s | exit status |",
             "|---|--:|---|--:|--:|"]
    lines += [f"| {row.design} | {stop_row_cells(row, record.stop_cap_seconds)} |" for row in rows(record, "stop")]
    settings = record.phase("stop")
    lines += ["", (f"*{settings.streams} streams (`{settings.path}`); about {settings.stop_after or 0:g} s after "
              "they were open, the design's graceful stop signal (SIGTERM; SIGINT for uvicorn, as the harness "
              "always stops it). Stop took: from the signal until no process of its group was left. How each "
              "stream ended, from its last bytes: clean (the body ended after a whole event, or a chunked body's "
              "last chunk), cut between events (chunked, closed without the last chunk), truncated (closed inside "
              "an event), reset; and when, from the signal (median – latest); the exit status of the server's "
              "main process. ⚠ One run per design.*")]
    return "\n".join(lines) + "\n"


def bound_of(row: StreamRow, option: str) -> str:
    """The option and the value the row's server command gave it; 'none (the default)' without it."""
    command = row.server_command or []
    if option not in command:
        return "none (the default)"
    return f"`{option} {command[command.index(option) + 1]}`"


def stop_timeout_table(record: StreamingRecord, bounded: StreamingRecord | None) -> str:
    """uvicorn and Granian stopped with 100 streams open: at the defaults (the stop phase), then with the stop
    bounded (the stop-timeout phase, from `bounded`); 'not measured yet' for the bounded rows without it."""
    lines = [("| server | stop bounded by | stop took, s | how the streams ended | ended after the signal, s | "
             "exit status |"), "|---|---|--:|---|--:|--:|"]
    default_rows = {row.design: row for row in rows(record, "stop")}
    bounded_rows = {row.design: row for row in rows(bounded, "stop-timeout")} if bounded else {}
    for default, twin, option in STOP_BOUNDS:
        for name, row, cap in ((default, default_rows.get(default), record.stop_cap_seconds),
                               (twin, bounded_rows.get(twin), (bounded or record).stop_cap_seconds)):
            if row is None:
                lines.append(f"| {name} | – | not measured yet | | | |")
                continue
            lines.append(f"| {name} | {bound_of(row, option)} | {stop_row_cells(row, cap)} |")
    sources = [(f"the defaults from `results/{RECORD}` (commit {record.environment.commit[:7]}, "
               f"{record.started_utc[:10]})")]
    if bounded is not None:
        name = RECORD if bounded is record else STOP_TIMEOUT_RECORD
        settings = bounded.phase("stop-timeout")
        sources.append(f"the bounded stops from `results/{name}` (commit {bounded.environment.commit[:7]}, "
                       f"{bounded.started_utc[:10]}; {settings.streams} streams, the signal about "
                       f"{settings.stop_after or 0:g} s after they were open)")
    lines += ["", (f"*The stop of the table above, for the two servers, with and without a bound: "
              f"{'; '.join(sources)}. Exit status: the server's main process's. ⚠ One run per row.*")]
    return "\n".join(lines) + "\n"


def memory_plot(record: StreamingRecord) -> str:
    """PSS of each design's process group over time under the slow readers: one line per design."""
    from harness.render import plots  # matplotlib is slow to import: only rendering needs it

    figure, axes = plots.plt.subplots(figsize=(6.4, 3.4))
    for row in rows(record, "slow"):
        if row.status != "ok":
            continue
        points = [(item.t, item.pss_mib) for item in row.samples or [] if item.pss_mib is not None]
        # The site's palette gives designs outside its sweeps one shared colour: here six lines need six.
        colour = STREAM_COLOURS[STREAM_DESIGNS.index(row.design) % len(STREAM_COLOURS)]
        axes.plot([t for t, _ in points], [value for _, value in points], label=row.design, color=colour,
                  marker=design_style(row.design)["marker"], markersize=4)
    axes.set_xlabel("seconds since the slow clients began")
    axes.set_ylabel("PSS of the server, MiB")
    axes.set_title("Server memory under slow readers")
    axes.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    axes.grid(alpha=0.3)
    return plots._to_svg(figure)


def design_file(record: StreamingRecord | None, name: str, record_name: str = RECORD) -> str:
    """A stream design's own results: its rows of every phase, pointing to the streaming page for the rest."""
    if record is None:
        return NOT_MEASURED
    mine = [row for row in record.rows if row.design == name]
    if not mine:
        return NOT_MEASURED
    lines = ["| phase | streams served | threads | PSS MiB, peak | fresh `GET /` ms, median |", "|---|--:|--:|--:|--:|"]
    for row in mine:
        if row.status != "ok" or row.client is None:
            lines.append(f"| {row.phase} | failed | | | |")
            continue
        client = row.client
        served = (f"{client.streams_with_events:,}" if client.streams_asked
                  else f"{len(client.slow_readers)} slow readers")
        lines.append(f"| {row.phase} | {served} | {_count(row.peak_threads)} | "
                     f"{_mib(row.peak_pss_mib)} | {_ms(row.fresh_ms_median)} |")
    lines += ["", f"*From `results/{record_name}`; each phase's settings are under its table above.*"]
    return "\n".join(lines) + "\n"


def streaming_files(results_dir: Path, generated_dir: Path, plots_dir: Path, header: str) -> dict[Path, str]:
    """streaming.md's tables and plot, and each stream design's own file; "not measured yet" before a record."""
    record = load(results_dir)
    source = f"results/{RECORD}"
    # The bounded stops: from the whole record once it has their phase, else from that phase's own record.
    bounded, bounded_name = ((record, RECORD) if record and rows(record, "stop-timeout")
                             else (load(results_dir, STOP_TIMEOUT_RECORD), STOP_TIMEOUT_RECORD))
    twins = {twin for _, twin, _ in STOP_BOUNDS}
    files = {generated_dir / "designs" / f"{name}.md":
             header.format(source=f"results/{bounded_name}" if name in twins else source)
             + (design_file(bounded, name, bounded_name) if name in twins else design_file(record, name))
             for name in STREAM_DESIGNS}
    parts = {"streaming-hold-cost", "streaming-hold-timing", "streaming-10k-cost", "streaming-10k-timing",
             "streaming-slow", "streaming-stop", "streaming-stop-timeout", "streaming-guide"}
    if record is None:
        return files | {generated_dir / f"{part}.md": header.format(source=source) + NOT_MEASURED for part in parts}
    made = {
        "streaming-hold-cost": cost_table(record, "hold") + "\n" + hold_caption(record, "hold"),
        "streaming-hold-timing": timing_table(record, "hold"),
        "streaming-10k-cost": cost_table(record, "hold-10k") + "\n" + hold_caption(record, "hold-10k"),
        "streaming-10k-timing": timing_table(record, "hold-10k"),
        "streaming-slow": slow_table(record),
        "streaming-stop": stop_table(record),
        "streaming-stop-timeout": stop_timeout_table(record, bounded),
        "streaming-guide": guide_table(record),
    }
    files |= {generated_dir / f"{part}.md": header.format(source=source) + text for part, text in made.items()}
    if bounded_name != RECORD:
        files[generated_dir / "streaming-stop-timeout.md"] = (header.format(source=f"{source}, results/{bounded_name}")
                                                               + made["streaming-stop-timeout"])
    files[plots_dir / "streaming-slow-memory.svg"] = memory_plot(record)
    return files
