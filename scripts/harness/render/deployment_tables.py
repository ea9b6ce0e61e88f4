"""Render the deployment records (issue 24): the idle-timeout race, past capacity, vegeta beside our client.

Reads records only (suites/deployment.py and the open-loop-vegeta scenario measure them):

- deployment/proxy-race.md: per server and setting, the requests sent through nginx, the 502s
  and their rate per 10,000 requests, and any other failure (results/deployment/proxy-race.json).
- deployment/overload.md: per server (and the admission control it was given), each offered rate
  in turn: what it served, what it refused (503) or never answered, the latency of its 2xx answers
  (p50, p99) and of every answer (p99), the last row at half the capacity again: the recovery.
- deployment/overload-latency.svg (docs/plots/): p99 latency of the 2xx answers against offered
  load, and the share of requests served, one line per server.
- overload-timeline.svg (docs/plots/): second by second through each server's run, the p99 of the 2xx
  answers (by when the request was sent) and the most requests in flight: a queue grows, a cap holds.
- deployment/overload-tradeoff.md: from the same timelines, per server: the 3x rate's first and last
  second (p99, in flight), its 503s at 1x, how long the last rate took to be served as the first was;
  and the most requests in flight at 1x among the servers without a cap (what a cap must allow).
- deployment/slow-clients.md: from results/hostile.json, each design the hostile suite ran both
  alone and behind nginx (the record's `proxy`), under the slow clients' cases
  (slowloris, a stalled body, a slow reader): did a separate probe client still get its answer,
  and how soon, alone and behind nginx.
- deployment/slow-clients-held.md: from results/deployment/slow-clients/hostile.json (the hostile
  suite's slowloris and slow-reader cases on a few designs, alone and behind nginx): the most
  established connections the server's own port held during each, and nginx's port.
- deployment/vegeta-cross-check.md: results/open-loop.json (our client) beside
  results/open-loop-vegeta.json (vegeta), per design and rate: requests/s, p50 and p99.

A record not made yet leaves a line saying so and the command that makes it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TypeVar

from harness.model.records.deployment_records import (
    PER,
    OverloadRecord,
    OverloadRun,
    RaceRecord,
    RaceResult,
    TimelinePoint,
)
from harness.model.records.hostile_record import CaseResult, HostileRecord
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.typed import Typed
from harness.render.cells import cells_by_level, summarise_cell
from harness.render.presentation import design_link, wide_table
from harness.render.survival import load_record as load_hostile
from harness.render.generated_header import HEADER

RACE_ID, OVERLOAD_ID = "proxy-race", "overload"
SLOW_CASES = ("slowloris", "body-stall", "slow-reader")  # the hostile suite's slow clients
HELD_RECORD = "deployment/slow-clients/hostile.json"  # the slow clients' cases again, counting connections held
HELD_COMMAND = ("python scripts/bench.py hostile --case slowloris --case slow-reader --out results/deployment/slow-clients "
                + " ".join(f"--design {name} --design {name}+nginx" for name in
                           ("thread-pool-queue", "gunicorn-gthread", "uvicorn")))
CROSS_CHECK = ("open-loop", "open-loop-vegeta")  # our client's scenario, and its twin with vegeta
T = TypeVar("T", bound=Typed)


def read_record(path: Path, kind: type[T]) -> T | None:
    """A record read through its class, or None when it has not been made yet."""
    return kind.from_json(json.loads(path.read_text(encoding="utf-8")), str(path)) if path.exists() else None


def ms(value: float | None) -> str:
    return "–" if value is None else (f"{value:,.0f}" if value >= 100 else f"{value:.1f}")


def not_measured(path: str, command: str) -> str:
    return f"*Not measured yet: no `{path}`. `{command}` measures it.*\n"


def race_table(record: RaceRecord | None) -> str:
    """One row per run: server, its keep-alive timeout as run, method, sent, 502s, per 10,000, other failures."""
    if record is None:
        return not_measured(f"results/deployment/{RACE_ID}.json", "python scripts/bench.py deployment race")
    rows = ["| server | keep-alive timeout | method | requests | 2xx | 502 | per 10,000 | 95% upper bound "
            "| near the timeout: requests (502) | no answer |", "|---|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    for run in record.runs:
        result = run.result
        if run.error or result is None:
            rows.append(f"| {design_link(run.design)} | {run.label} | {run.method} "
                        f"| failed: {(run.error or 'no result')[:80]} | | | | | | |")
            continue
        timeout = " ".join(run.arguments or []) + (" (default)" if run.label == "defaults" else " (the fix)")
        near, near_502 = near_timeout(result)
        ok = sum(count for status, count in result.statuses.items() if status.startswith("2"))
        rows.append(f"| {design_link(run.design)} | `{timeout}` | {run.method} | {result.sent:,} | {ok:,} "
                    f"| {result.answers(502):,} | **{run.bad_gateway_per_10k:g}** "
                    f"| {upper_bound(result.answers(502), result.sent) * PER:,.0f} | {near:,} ({near_502:,}) "
                    f"| {sum(result.errors.values()):,} |")
    settings = record.settings
    note = (f"\nBehind nginx (`{settings.proxy}`: upstream `keepalive`, HTTP/1.1, its upstream "
            f"`keepalive_timeout` at the default 60 s). The traffic: {settings.users} users, each on its own kept "
            f"connection to nginx, each sending a request to `{settings.path}` and then idle for a time drawn "
            f"uniformly from {1 - settings.idle_spread:g} to {1 + settings.idle_spread:g} times the server's "
            f"timeout, for {settings.duration_s:g} s a run. 95% upper bound: the most 502s per 10,000 these counts still allow "
            f"(Wilson score interval). Near the timeout: the requests sent after a lull (the "
            f"time since any user's last answer) within 50 ms of the server's timeout, and their 502s. One run per "
            f"row, {record.mode} run, commit `{record.environment.commit[:10]}`. Raw record: "
            f"`results/deployment/{RACE_ID}.json`.\n")
    return wide_table("\n".join(rows)) + note


def upper_bound(hits: int, tries: int, z: float = 1.96) -> float:
    """The Wilson score interval's upper end for a proportion (95% by default): what `hits` in `tries` still allows."""
    if not tries:
        return 1.0
    share = hits / tries
    centre = share + z * z / (2 * tries)
    spread = z * math.sqrt(share * (1 - share) / tries + z * z / (4 * tries * tries))
    return min(1.0, (centre + spread) / (1 + z * z / tries))


NEAR_MS = 50  # the race client's fine buckets: within this many ms of the timeout


def near_timeout(result: RaceResult) -> tuple[int, int]:
    """Requests sent after a lull within NEAR_MS of the server's timeout, and how many of them got 502."""
    near = [counts for offset, counts in result.by_offset_ms.items()
            if offset.lstrip("-").replace(".", "", 1).isdigit() and abs(float(offset)) < NEAR_MS]
    return sum(sum(counts.values()) for counts in near), sum(counts.get("502", 0) for counts in near)


def race_verdict(record: RaceRecord | None) -> str:
    """One sentence per server: 502s per 10,000 at its default timeout (per method), and with the fix; then each other
    cause of 502 reproduced, with what its requests got."""
    if record is None:
        return ""
    by_design: dict[str, list[str]] = {}
    for run in record.runs:
        if run.result is None:
            continue
        setting = "at its default timeout" if run.label == "defaults" else "with the fix"
        by_design.setdefault(run.design, []).append(
            f"{run.result.answers(502):,} 502s in {run.result.sent:,} {run.method}s {setting} "
            f"({run.bad_gateway_per_10k:g} per 10,000)")
    lines = [f"- {design_link(design)}: " + "; ".join(parts) + "." for design, parts in by_design.items()]
    for cause in record.causes or []:
        if cause.error or cause.statuses is None:
            lines.append(f"- {cause.cause}: not measured ({(cause.error or 'no result')[:80]}).")
            continue
        answers = ", ".join(f"{status or 'no answer'} after {seconds:g} s"
                            for status, seconds in zip(cause.statuses, cause.seconds or [], strict=False))
        lines.append(f"- {cause.cause} ({design_link(cause.design)} `{' '.join(cause.arguments)}`, every request a "
                     f"{cause.delay:g} s call, behind the same nginx): {cause.answers(502)} of {len(cause.statuses)} "
                     f"got 502 ({answers}).")
    return "\n".join(lines) + "\n"


def overload_rows(run: OverloadRun) -> list[str]:
    """A server's cells in the order they ran: offered, served, 503, no answer, p50/p99 of 2xx, p99 of all."""
    rows = []
    cells = run.cells
    for index, cell in enumerate(cells):
        if cell.error:
            rows.append(f"| | {cell.rate or 0:g} | failed: {cell.error[:60]} | | | | | |")
            continue
        ok, every = cell.latency_ms_2xx, cell.latency_ms
        offered = f"{cell.rate:g} ({cell.multiple:g}×)" + (" again" if index == len(cells) - 1 and index else "")
        rows.append(f"| | {offered} | {cell.requests_per_second:,.0f} | {cell.answers(503):,} "
                    f"| {cell.failed:,} | {ms(ok.p50 if ok else None)} | {ms(ok.p99 if ok else None)} "
                    f"| {ms(every.p99 if every else None)} |")
    return rows


def overload_table(record: OverloadRecord | None) -> str:
    """Every server past capacity, its rates in the order they ran."""
    if record is None:
        return not_measured(f"results/deployment/{OVERLOAD_ID}.json", "python scripts/bench.py deployment overload")
    rows = ["| server, admission | offered/s | 2xx/s | 503 | no answer | p50 ms (2xx) | p99 ms (2xx) | p99 ms (all) |",
            "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for run in record.runs:
        arguments = " ".join(run.arguments) or "its defaults"
        rows.append(f"| {design_link(run.design)} `{arguments}` | | | | | | | |")
        if run.error and not run.cells:
            rows.append(f"| | failed: {run.error[:80]} | | | | | | |")
        rows += overload_rows(run)
    settings = record.settings
    ceiling = record.ceiling.cells[0] if record.ceiling.cells else None
    ceiling_note = ""
    if ceiling is not None and ceiling.late_ms is not None:
        ceiling_note = (f" The tool's ceiling: vegeta against {design_link(record.ceiling.design)} at "
                        f"{ceiling.rate:g} requests/s served {ceiling.requests_per_second:,.0f} a second, "
                        f"its requests sent at most {ceiling.late_ms.p99:g} ms late (p99) against its schedule.")
    back_to_back = (", the rates back to back (each starts when the one before has sent its last request, "
                    "whatever is still in flight)" if any(run.timeline for run in record.runs) else "")
    note = (f"\nvegeta (`-keepalive=false`: a new connection per request, as a proxy without upstream keep-alive) "
            f"offers each rate for {settings.schedule_seconds:g} s{back_to_back}, at most {settings.max_in_flight:,} "
            f"requests in flight; each server answers after a {settings.delay * 1000:g} ms simulated call, at most "
            f"16 at once (about {settings.capacity:g} requests/s). 2xx/s: 2xx answers a second from the first request "
            f"sent to the last answer (the schedule and the last wait). Latency from when vegeta sent the request; "
            f"\"no answer\": refused, reset or past vegeta's {settings.timeout:g} s timeout. One server process "
            f"per row group, its rates one after another; one run per cell, {record.mode} run, commit "
            f"`{record.environment.commit[:10]}`.{ceiling_note} Raw record: "
            f"`results/deployment/{OVERLOAD_ID}.json`.\n")
    figure = ("\n![p99 latency of the 2xx answers, and the share of requests answered 200, against offered load, "
              "one line per server](plots/overload-latency.svg)\n")
    if any(run.timeline for run in record.runs):
        figure += ("\n![Second by second through each server's run: the p99 of its 2xx answers and the most requests "
                   "in flight, the rates marked above](plots/overload-timeline.svg)\n")
    return wide_table("\n".join(rows)) + note + figure


def overload_plot(record: OverloadRecord) -> str:
    """p99 latency of 2xx answers, and the share served, against offered load: one line per server."""
    from harness.render import plots  # matplotlib is slow to import: only rendering needs it

    figure, panels = plots.plt.subplots(1, 2, figsize=(9, 4.2))
    for run in record.runs:
        cells = [cell for cell in run.cells[:-1] if not cell.error]  # the last: recovery, apart
        if not cells:
            continue
        offered = [cell.rate for cell in cells]
        p99 = [cell.latency_ms_2xx.p99 if cell.latency_ms_2xx else None for cell in cells]
        served = [100 * cell.answers(200) / max(1, cell.requests_sent or 0) for cell in cells]
        style = plots.design_style(run.design)
        style["label"] = f"{run.design} {' '.join(run.arguments)}".strip()  # a matplotlib keyword, not a record's
        if run.arguments:
            style["linestyle"] = "--"
        panels[0].plot(offered, p99, markersize=4, **style)
        panels[1].plot(offered, served, markersize=4, **style)
    capacity = record.settings.capacity
    for panel in panels:
        panel.axvline(capacity, color="#616161", linestyle=":", linewidth=1)
        panel.set_xlabel("offered load, requests/s (dotted: capacity)")
        panel.grid(True, alpha=0.3)
    panels[0].set_yscale("log")
    panels[0].yaxis.set_major_formatter(plots.ticker.FuncFormatter(lambda value, _: f"{value:,g}"))
    panels[0].set_ylabel("p99 latency of 2xx answers, ms (log scale)")
    panels[1].set_ylabel("requests answered 200, % of sent")
    panels[1].set_ylim(0, 105)
    figure.suptitle("Past capacity: latency and share served against offered load", x=0.02, ha="left")
    panels[1].legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return plots._to_svg(figure)


def phase(run: OverloadRun, index: int, schedule_s: float) -> list[TimelinePoint]:
    """The timeline's seconds during the index-th rate's schedule (rates run back to back)."""
    return [point for point in run.timeline or [] if index * schedule_s <= point.t_s < (index + 1) * schedule_s]


def queues(run: OverloadRun) -> bool:
    """No admission control at this load: nothing answered 503 (render the word the record's answers support)."""
    return not any(cell.answers(503) for cell in run.cells)


def sent_seconds(points: list[TimelinePoint]) -> list[TimelinePoint]:
    """The seconds in which requests were sent (a rate's last partial second aside)."""
    return [point for point in points if point.sent]


def overload_tradeoff(record: OverloadRecord | None) -> str:
    """Per server, from its timeline: what 1x and 3x did to its p99 and the requests in flight (first and last second
    of each), its 503s at 1x, how soon it recovered; then what the servers without a cap had in flight at 0.5x and 1x
    (what a cap above the worker count must allow, and why at 1x no cap holds a queue)."""
    if record is None or not any(run.timeline for run in record.runs):
        return "*Not measured yet: no timeline in `results/deployment/overload.json`.*\n"
    settings = record.settings
    schedule = settings.schedule_seconds
    multiples = settings.multiples
    top = multiples.index(max(multiples))
    one = multiples.index(1.0) if 1.0 in multiples else None
    last = len(multiples) - 1

    def span(run: OverloadRun, index: int) -> str:
        seconds = sent_seconds(phase(run, index, schedule))
        first, end = seconds[0], seconds[-1]
        return (f"the p99 of its 2xx answers went from {ms(first.p99_ms)} ms (requests sent in the rate's first "
                f"second) to {ms(end.p99_ms)} ms (its last), with {first.in_flight_peak:,} and then "
                f"{end.in_flight_peak:,} requests in flight")

    lines = []
    for run in record.runs:
        if not run.timeline or len(run.cells) <= top:
            continue
        parts = []
        if one is not None:
            cell = run.cells[one]
            parts.append(f"at 1× {span(run, one)}; it refused {cell.answers(503):,} of "
                         f"{cell.requests_sent or 0:,} (503)")
        parts.append(f"at {max(multiples):g}× {span(run, top)}")
        burst = sent_seconds(phase(run, top, schedule))
        failed = sum(point.failed for point in burst)
        if failed:
            parts.append(f"{failed:,} of its {sum(point.sent for point in burst):,} requests at {max(multiples):g}× "
                         f"got no answer within vegeta's {settings.timeout:g} s")
        recovery = sent_seconds(phase(run, last, schedule)) if len(run.cells) > last else []
        baseline = run.cells[0].latency_ms_2xx.p99 if run.cells[0].latency_ms_2xx else None
        if recovery and baseline:
            back = next((point.t_s - last * schedule for point in recovery
                         if point.p99_ms is not None and point.p99_ms <= 2 * baseline), None)
            parts.append(f"back at {multiples[last]:g}×, " +
                         (f"its p99 was within twice the first rate's from {back:g} s in" if back is not None else
                          f"its p99 was not back within twice the first rate's in the {schedule:g} s"))
        lines.append(f"- {design_link(run.design)} `{' '.join(run.arguments) or 'its defaults'}`: "
                     + "; ".join(parts) + ".")
    uncapped = [run for run in record.runs if run.timeline and queues(run)]
    if one is not None and uncapped and multiples[0] < 1:
        calm = max(point.in_flight_peak for run in uncapped for point in phase(run, 0, schedule))
        growing = [sent_seconds(phase(run, one, schedule)) for run in uncapped]
        low = min(points[0].in_flight_peak for points in growing)
        high = max(points[-1].in_flight_peak for points in growing)
        lines.append(f"\nThe servers without a cap had at most {calm:,} requests in flight at {multiples[0]:g}× "
                     f"({settings.capacity * multiples[0]:g} requests/s, any second of the {schedule:g} s); at 1× "
                     f"their count rose from {low:,} to {high:,} over the {schedule:g} s.")
    note = (f"\nFrom the timelines of `results/deployment/overload.json` ({record.mode} run, commit "
            f"`{record.environment.commit[:10]}`): each second's figures are those of the requests vegeta sent in "
            f"that second; in flight is the most requests sent and not yet answered at any instant of it.\n")
    return "\n".join(lines) + "\n" + note


def overload_timeline_plot(record: OverloadRecord) -> str:
    """Second by second through each server's run: p99 of 2xx answers (by send time) and the requests in flight."""
    from harness.render import plots

    figure, panels = plots.plt.subplots(2, 1, figsize=(9, 6.4), sharex=True)
    for run in record.runs:
        if not run.timeline:
            continue
        style = plots.design_style(run.design)
        style["label"] = f"{run.design} {' '.join(run.arguments)}".strip()
        style["marker"] = None
        if run.arguments:
            style["linestyle"] = "--"
        seconds = [point.t_s for point in run.timeline]
        panels[0].plot(seconds, [point.p99_ms for point in run.timeline], **style)
        panels[1].plot(seconds, [max(point.in_flight_peak, 1) for point in run.timeline], **style)
    schedule = record.settings.schedule_seconds
    for index, multiple in enumerate(record.settings.multiples):
        for panel in panels:
            panel.axvline(index * schedule, color="#9e9e9e", linestyle=":", linewidth=1)
        panels[0].text(index * schedule + schedule / 2, 1.02, f"{multiple:g}×", ha="center", fontsize=8,
                       transform=panels[0].get_xaxis_transform())
    for panel in panels:
        panel.set_yscale("log")
        panel.yaxis.set_major_formatter(plots.ticker.FuncFormatter(lambda value, _: f"{value:,g}"))
        panel.grid(True, alpha=0.3)
    panels[0].set_ylabel("p99 of 2xx answers, ms (log)")
    panels[1].set_ylabel("most requests in flight (log)")
    panels[1].set_xlabel(f"seconds since the first request (each rate {schedule:g} s, back to back)")
    figure.suptitle("Past capacity, second by second: a queue grows, a cap holds", x=0.02, ha="left")
    panels[0].legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.0))
    return plots._to_svg(figure)


def proxy_words(proxy: str | None) -> str:
    """The proxy a hostile record's designs sat behind, in words (a record from before it said: the HTTP/1.0 one)."""
    if proxy is None:
        return "`servers/nginx_reverse_proxy.conf` (buffering on, a new upstream connection per request)"
    return f"`{proxy}` (buffering on; client and upstream keep-alive, so connections to the design are reused)"


def probe_cell(case: CaseResult | None) -> str:
    """The probe's answer during a hostile case: its status and seconds, or what went wrong."""
    if case is None:
        return "–"
    probe = case.probe_during
    if probe is None or probe.status is None:
        return f"no answer ({(probe.error if probe else '') or 'none'})"
    return f"{probe.status} in {probe.seconds:.2f} s"


def slow_clients_table(hostile: HostileRecord | None) -> str:
    """Designs run alone and behind nginx by the hostile suite: the probe's answer under each slow client."""
    if hostile is None:
        return not_measured("results/hostile.json", "python scripts/bench.py hostile")
    alone = {design.design: design for design in hostile.designs if not design.behind_nginx}
    proxied = {design.design: design for design in hostile.designs if design.behind_nginx}
    titles = {case.id: case.column for case in hostile.cases}
    both = [name for name in alone if name in proxied]
    if not both:
        return ("*Not measured yet: no design in `results/hostile.json` was run both alone and behind nginx "
                "(`python scripts/bench.py hostile` runs the catalogue's behind-nginx list).*\n")
    rows = ["| design | slow client | probe, alone | probe, behind nginx |", "|---|---|---|---|"]
    for name in both:
        for case_id in SLOW_CASES:
            rows.append(f"| {design_link(name)} | {titles.get(case_id, case_id)} | "
                        f"{probe_cell(alone[name].result(case_id))} | {probe_cell(proxied[name].result(case_id))} |")
    settings = hostile.settings
    note = (f"\nThe hostile suite's cases ([what a real server must survive](survive.md)): slowloris is "
            f"{settings.slowloris_connections} connections trickling a header line every 0.5 s; a stalled body "
            f"announces 100,000 bytes and sends 10; a slow reader asks for 1 MiB and reads 1 KiB. The probe is a "
            f"separate client asking for the page {settings.probe_at:g} s into the case, given "
            f"{settings.probe_timeout:g} s; each design answers after a {settings.delay * 1000:g} ms call. "
            f"Behind nginx: {proxy_words(hostile.proxy)}. "
            f"Commit `{hostile.environment.commit[:10]}`, {hostile.mode} run. Raw record: "
            f"`results/hostile.json`.\n")
    return wide_table("\n".join(rows)) + note


def held_cell(case: CaseResult | None, port: str) -> str:
    """On one port ("server" or "proxy") during a case: peak established connections (connection-seconds)."""
    if case is None or case.verdict == "n/a":
        return "n/a"
    held = case.connections_held
    if held is None:
        return "not counted"
    peak, seconds = ((held.server_peak, held.server_connection_seconds) if port == "server"
                     else (held.proxy_peak, held.proxy_connection_seconds))
    if peak is None:  # no proxy in front
        return "not counted"
    return f"{peak}" + ("" if seconds is None else f" ({seconds:,.1f})")


def held_table(record: HostileRecord | None) -> str:
    """Per design and slow client: the connections the server held alone, and nginx's and the server's behind nginx."""
    if record is None:
        return not_measured(f"results/{HELD_RECORD}", HELD_COMMAND)
    by_name = {design.name: {case.case: case for case in design.cases} for design in record.designs}
    titles = {case.id: case.column for case in record.cases}
    names = [design.design for design in record.designs if not design.behind_nginx]
    rows = ["| design | slow client | server, alone | nginx, in front | server, behind nginx |",
            "|---|---|--:|--:|--:|"]
    for name in names:
        alone, behind = by_name.get(name, {}), by_name.get(name + "+nginx", {})
        for case_id in ("slowloris", "slow-reader"):
            if case_id in alone or case_id in behind:
                rows.append(f"| {design_link(name)} | {titles.get(case_id, case_id)} | "
                            f"{held_cell(alone.get(case_id), 'server')} | "
                            f"{held_cell(behind.get(case_id), 'proxy')} | "
                            f"{held_cell(behind.get(case_id), 'server')} |")
    settings = record.settings
    before = sorted({case.connections_held.server_before for cases in by_name.values() for case in cases.values()
                     if case.connections_held})
    note = (f"\nThe most established TCP connections on each port during the case and, in brackets, "
            f"connection-seconds (each 50 ms sample's count times the time it covers, summed: how long they were "
            f"held), read from `/proc/net/tcp` (the accepting side only; connections the kernel completed but the "
            f"server has not accepted yet count too). Slowloris is {settings.slowloris_connections} connections trickling a header "
            f"line every 0.5 s for up to {settings.bound:g} s; the slow reader asks for 1 MiB and reads nothing for "
            f"{settings.slow_reader_stall:g} s; a server that has handed its whole answer to the kernel and closed no longer "
            f"counts (the kernel, not the server, holds what the reader has not read). The suite's probe client, "
            f"{settings.probe_at:g} s into the case, counts too. Before each case the server held "
            f"{' or '.join(map(str, before)) or '–'}. Behind nginx: {proxy_words(record.proxy)}. "
            f"Commit `{record.environment.commit[:10]}`, "
            f"{record.started_utc[:10]}, {record.mode} run. Raw record: `results/{HELD_RECORD}`.\n")
    return wide_table("\n".join(rows)) + note


def cross_check_table(ours: ScenarioRecord | None, vegeta: ScenarioRecord | None) -> str:
    """Our open-loop client and vegeta on the same designs and rates: requests/s, p50, p99."""
    if ours is None or vegeta is None:
        return not_measured(f"results/{CROSS_CHECK[1] if ours else CROSS_CHECK[0]}.json",
                            "python scripts/bench.py run --scenario " + (CROSS_CHECK[1] if ours else CROSS_CHECK[0]))
    rows = ["| design | offered/s | req/s (ours / vegeta) | p50 ms (ours / vegeta) | p99 ms (ours / vegeta) |",
            "|---|--:|--:|--:|--:|"]
    theirs = {design.name: design for design in vegeta.designs}
    for design in ours.designs:
        if design.name not in theirs:
            continue
        mine, other = cells_by_level(design.runs, "rate"), cells_by_level(theirs[design.name].runs, "rate")
        for rate in sorted(set(mine) & set(other)):
            a, b = summarise_cell(mine[rate]), summarise_cell(other[rate])  # render/cells.py's summaries
            rows.append(f"| {design_link(design.name)} | {rate:g} | {a['rate']['median']:,.0f} / "
                        f"{b['rate']['median']:,.0f} | {ms(a['latency'].get('p50'))} / {ms(b['latency'].get('p50'))} "
                        f"| {ms(a['latency'].get('p99'))} / {ms(b['latency'].get('p99'))} |")
    late = [run.get("late_ms").p99 for design in vegeta.designs for run in design.runs
            if run.get("late_ms") is not None and run.get("late_ms").p99 is not None]
    ours_settings, vegeta_settings = ours.settings, vegeta.settings
    note = (f"\nMedians over each record's runs ({ours_settings.repeat} with our client, "
            f"{vegeta_settings.repeat} with vegeta), {ours_settings.schedule_seconds:g} s per rate, a new "
            f"connection per request in both; ours measures latency from each request's scheduled start, vegeta "
            f"from when it sent it (at most {max(late) if late else 0:g} ms late, p99, in any run). Commits "
            f"`{ours.environment.commit[:10]}` (`results/{CROSS_CHECK[0]}.json`, "
            f"{ours.started_utc[:10]}) and `{vegeta.environment.commit[:10]}` "
            f"(`results/{CROSS_CHECK[1]}.json`, {vegeta.started_utc[:10]}).\n")
    return wide_table("\n".join(rows)) + note


def recovered(run: OverloadRun) -> bool | None:
    """Did the last half-capacity cell serve as the first did (p99 of 2xx within twice the first's)?"""
    cells = [cell for cell in run.cells if not cell.error]
    if len(cells) < 2:
        return None
    first, last = cells[0].latency_ms_2xx, cells[-1].latency_ms_2xx
    if first is None or first.p99 is None:
        return None
    if last is None or last.p99 is None:  # nothing answered 2xx at the last rate: not recovered
        return False
    return last.p99 <= 2 * first.p99 and not cells[-1].failed


def deployment_files(results_dir: Path, generated_dir: Path, plots_dir: Path,
                     records: dict[str, ScenarioRecord]) -> dict[Path, str]:
    """Every generated file of the deployment page."""
    race = read_record(results_dir / "deployment" / f"{RACE_ID}.json", RaceRecord)
    overload = read_record(results_dir / "deployment" / f"{OVERLOAD_ID}.json", OverloadRecord)
    out = generated_dir / "deployment"
    files = {
        out / "proxy-race.md": HEADER.format(source=f"results/deployment/{RACE_ID}.json") + race_table(race),
        out / "proxy-race-verdict.md": HEADER.format(source=f"results/deployment/{RACE_ID}.json")
        + race_verdict(race),
        out / "overload.md": HEADER.format(source=f"results/deployment/{OVERLOAD_ID}.json") + overload_table(overload),
        out / "slow-clients.md": HEADER.format(source="results/hostile.json")
        + slow_clients_table(load_hostile(results_dir)),
        out / "slow-clients-held.md": HEADER.format(source=f"results/{HELD_RECORD}")
        + held_table(load_hostile(results_dir, HELD_RECORD)),
        out / "vegeta-cross-check.md": HEADER.format(source=" and ".join(f"results/{i}.json" for i in CROSS_CHECK))
        + cross_check_table(records.get(CROSS_CHECK[0]), records.get(CROSS_CHECK[1])),
    }
    files[out / "overload-recovery.md"] = HEADER.format(source=f"results/deployment/{OVERLOAD_ID}.json") + "not measured yet.\n"
    files[out / "overload-tradeoff.md"] = (HEADER.format(source=f"results/deployment/{OVERLOAD_ID}.json")
                                           + overload_tradeoff(overload))
    if overload is not None:
        files[plots_dir / "overload-latency.svg"] = overload_plot(overload)
        if any(run.timeline for run in overload.runs):
            files[plots_dir / "overload-timeline.svg"] = overload_timeline_plot(overload)
        verdicts = [f"{run.design} {' '.join(run.arguments)}".strip() + ": "
                    + {True: "recovered", False: "did not recover", None: "not measured"}[recovered(run)]
                    for run in overload.runs]
        files[out / "overload-recovery.md"] = (HEADER.format(source=f"results/deployment/{OVERLOAD_ID}.json")
                                               + "; ".join(verdicts) + ".\n")
    return files

