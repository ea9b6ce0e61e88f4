"""The timeline player's data: results/timeline.json turned into the snippets the pages include.

Theory of operation. The timeline scenario records, for each of its 30 requests, the load
client's own moments (scripts/http_load.py --timeline): start, connected, sent, first byte of
the answer, end (last byte) and closed, and which of the ten closed-loop workers sent it. This
module keeps those moments in milliseconds, per design, and writes them into a `<div
class="timeline-player">` as JSON in a data attribute; docs/assets/timeline-player.js draws and
plays them. The browser only redraws what is here: every number it shows comes from the record.

What the player calls "in the call" is inferred, not seen: every design in the scenario waits
the simulated call (CALL_MS, the scenario's delay) and then writes its answer at once, so the
call is taken to be the last delay before the first byte (never earlier than the request was
sent). Everything between `connected` and the call's start is "waiting": in the kernel's listen
queue or accepted but not yet served. The client cannot tell the two apart; the server's own
system calls can (system/syscall_trace.py, strace attached for a second run of the same load,
run.get("traced"), no server file changed): the player plays that run, and where a request has them
(entry["server"]), it marks on its bar when the server
accepted the connection, read the request, wrote the answer and closed. The handler's start and
end are Python, not system calls: they lie between the read and the write, and are not drawn.

Files: docs/_generated/timeline-player/<design>.md (one design, included by its page, its player under a question
the reader answers first: guess_block) and
docs/_generated/timeline-player/pairs.md (the home page's pairs, both designs on one clock).
A record older than these moments (no `connected` in its entries) gives no player: only the
static plots.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from harness.model.catalogue import load_catalogue
from harness.model.records.scenario_record import Outcome, ScenarioRecord

SCENARIO_ID = "timeline"
SUBDIR = "timeline-player"
# The home page's pairs: the idea each one shows, then the two designs on the same load.
PAIRS = [
    ("One at a time, or a thread each", "sequential-sockets", "thread-per-connection"),
    ("Threads, or one event loop", "thread-per-connection", "asyncio-streams"),
    ("A blocking sleep in the loop, or a timer", "selectors-blocking-sleep", "selectors-timer"),
]
MOMENTS = ("start", "connected", "sent", "first_byte", "end", "closed")
# The server's moments (entry["server"], system/syscall_trace.MOMENTS), as the player names them.
SERVER_MOMENTS = {"accepted": "accepted", "head_read": "head_read", "written": "written", "closed": "server_closed"}
CLOSED_NOTE = ("This design keeps a connection open when the client asks; the load client never does (it sends "
               "Connection: close), so here every request has a connection of its own.")
NO_SCRIPT = "<p>The timeline player needs JavaScript; the comparison page draws the same runs as static plots.</p>"


def milliseconds(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def playable(entries: list[dict[str, Any]] | None) -> bool:
    """Whether a run's timeline has the client's in-between moments (records before issue 23 do not)."""
    return bool(entries) and all("connected" in entry and "worker" in entry for entry in entries)


def design_timeline(design: Outcome, delay_s: float) -> dict[str, Any] | None:
    """One design's run as the player reads it: one row per request, moments in ms from the run's start.

    A timeline's entries are the load client's free-form moments (dicts), as scripts/http_load.py wrote them."""
    # The traced run (the same load again, strace attached: runner.traced_run) when the record has one: its
    # requests carry the server's moments. The measured run's numbers (tables, plots, questions) are untraced.
    timelines = ([run.get("traced").timeline for run in design.runs if run.get("traced")]
                 + [run.get("timeline") for run in design.runs])
    entries = next((timeline for timeline in timelines if playable(timeline)), None)
    if entries is None:
        return None
    traced = any("server" in entry for entry in entries)
    rows = [[entry["worker"], *(milliseconds(entry[moment]) for moment in MOMENTS), entry["result"] == "ok",
             *(server_moments(entry) if traced else [])]
            for entry in sorted(entries, key=lambda entry: entry["index"])]
    ends = [moment for row in rows for moment in row[1:7] if moment is not None]
    known = load_catalogue().designs.get(design.name)
    return {"design": design.name, "title": design.title, "model": design.model,
            "call_ms": milliseconds(delay_s), "clients": 1 + max(row[0] for row in rows),
            "end_ms": max(ends), "fields": ["worker", *MOMENTS, "ok", *(SERVER_MOMENTS.values() if traced else [])],
            "requests": rows, "note": CLOSED_NOTE if known is not None and known.keep_alive else ""}


def server_moments(entry: dict[str, Any]) -> list[float | None]:
    """The server's moments of one request in ms (None where its trace has none, or the request none at all)."""
    server = entry.get("server") or {}
    return [milliseconds(server.get(moment)) for moment in SERVER_MOMENTS]


def player_div(data: dict[str, Any], label: str) -> str:
    """The element timeline-player.js fills in, its data a JSON attribute (escaped for HTML)."""
    payload = html.escape(json.dumps(data, separators=(",", ":")), quote=True)
    return (f'<div class="timeline-player" role="region" aria-label="{html.escape(label, quote=True)}" '
            f'data-timeline="{payload}">{NO_SCRIPT}</div>\n')


# Predict, then see (issue 35): before a design's timeline plays, the reader picks when the last answer arrives.
# The three choices come from the load alone (every client's calls overlapped; some waited for a worker; one
# request at a time), the right one from the record: the measured end against the two bounds, with this slack.
OVERLAPPED_WITHIN = 1.25  # the last answer within 1.25 x (requests per client x call): the calls overlapped
SERIAL_FROM = 0.8  # from 0.8 x (requests x call) on: one request at a time


def guess_block(timeline: dict[str, Any], requests: int) -> str:
    """The question above a design's player and its answer, folded: without JavaScript a plain question; with it
    (docs/assets/timeline-guess.js) the choices become buttons and the player waits for one."""
    clients, call_ms, end_ms = timeline["clients"], timeline["call_ms"], timeline["end_ms"]
    overlapped, serial = requests / clients * call_ms, requests * call_ms
    answer = 0 if end_ms <= OVERLAPPED_WITHIN * overlapped else 2 if end_ms >= SERIAL_FROM * serial else 1
    choices = [f"about {overlapped / 1000:g} s: every client's calls overlap",
               "in between: some clients wait for a free worker",
               f"about {serial / 1000:g} s: one request at a time, {requests} calls end to end"]
    reading = ["the calls overlapped, as many at once as there were clients",
               "more than the overlapped bound and far less than the serial one: requests queued for a worker",
               "each request waited for the one before it"][answer]
    items = "".join(f"<li>{html.escape(choice)}</li>" for choice in choices)
    return (f'<div class="timeline-guess" data-answer="{answer}">\n'
            f"<p><strong>Guess first:</strong> {clients} clients send {requests} requests between them, each with a "
            f"{call_ms:g} ms call. When does the last answer arrive?</p>\n"
            f'<ol class="tg-choices">{items}</ol>\n'
            f'<details class="question"><summary>The answer, from the record</summary>\n'
            f"<p>Choice {answer + 1}: the last answer arrived at {end_ms / 1000:.2f} s ({end_ms:,.0f} ms), so "
            f"{reading}. Play the run below to see it happen.</p>\n</details>\n</div>\n")


def timeline_player_files(record: ScenarioRecord | None, generated_dir: Path, header: str) -> dict[Path, str]:
    """Every design's player snippet and the pairs' snippet; nothing when the record has no moments."""
    if record is None:
        return {}
    delay_s = float(record.settings.delay)
    clients = record.settings.concurrency[0]
    load = {"clients": clients, "requests": record.settings.requests, "call_ms": milliseconds(delay_s),
            "commit": record.environment.commit[:10], "started_utc": record.started_utc}
    timelines = {design.name: timeline for design in record.designs
                 if design.status == "ok" and (timeline := design_timeline(design, delay_s))}
    directory = generated_dir / SUBDIR
    source = header.format(source=f"results/{SCENARIO_ID}.json")
    files = {directory / f"{name}.md": source + guess_block(timeline, record.settings.requests) + player_div(
                 {"load": load, "panels": [timeline]}, f"Timeline player: {name}, one run played back")
             for name, timeline in timelines.items()}
    pairs = [{"label": label, "panels": [timelines[first], timelines[second]]}
             for label, first, second in PAIRS if first in timelines and second in timelines]
    if pairs:
        files[directory / "pairs.md"] = source + player_div(
            {"load": load, "pairs": pairs}, "Timeline player: two designs on the same load, played back")
    return files
