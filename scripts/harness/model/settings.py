"""Scenario settings: every key a `[[scenario]]` may set, its type, and who reads it.

A scenario's keys are its names (`id`, `title`, `article`, `tool`, `designs`, and the
tables `quick` and `published`) and its settings, listed in SETTINGS below. A setting is
read either by the harness, whatever the load tool (`delay`, `repeat`, `proxy`, ...), or
by load tools only; TOOL_READS below lists, per load tool, the settings it reads (each
adapter in clients/tools/ takes its `reads` from there, so the catalogue, a model, needs
no client to check a scenario). Loading
the catalogue checks every scenario, and its `[scenario.quick]` table, against this list:
an unknown or misspelt key, a value of the wrong type, a missing required setting, or a
tool setting the scenario's tool does not read is an error naming the key, the scenario
and the file (bench.py exits 2). So is `keep_alive = true` with a tool that cannot keep
connections alive (one whose `reads` lacks `keep_alive`).

Two rules keep a scenario's numbers from measuring the load tool instead of the server (STYLE.md,
rule 12), checked by check_measurement below:

- The tool's ceiling. Every scenario names a `ceiling` (a design measured first, with no
  simulated call, so the tables can flag cells within 80% of it), or says in `ceiling_exempt`
  why a ceiling would mean nothing there (an article's reproduction whose rates a simulated
  call holds far below any tool, an open loop at a fixed offered rate, a picture of one run).
- Runs of at least MIN_RUN_SECONDS. A run that short weighs the tool's start and stop as much
  as the server. Every time limit a scenario can run under (full or quick, `time_limit_at`,
  `time_limit_blocking`) is at least that long, and runs must end by their time limit, not by a
  request count: wrk always does; hey and ab only when `requests` outlasts the longest limit at
  FASTEST_COUNTED_RATE; our open-loop client when each rate's schedule lasts that long. The one
  exception is `fixed_count` (a stated reason): an article's fixed-count experiment, compared
  with its published figures, or a run that is a picture rather than a rate. The runner then
  also marks any measured run shorter than MIN_RUN_SECONDS as an error (suites/runner.py), so a
  server fast enough to beat the estimate still never shows a sub-second number.

To add a setting: one `Setting(...)` line below; for a tool setting, also its name in the
TOOL_READS entry of each load tool that reads it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HARNESS, TOOL = "harness", "tool"
NAME_KEYS = {"id", "title", "article", "tool", "designs", "quick", "published"}  # a scenario's names, not settings
MIN_RUN_SECONDS = 1.0  # a measured run shorter than this is an error, outside a fixed-count experiment
# Faster than hey or ab has run here (hey with keep-alive against nginx: about 35,000 requests/s, pinned to
# one CPU; wrk, which has no request count, reached 129,000): a hey or ab scenario whose `requests` would
# last this long at this rate is stopped by its time limit, never by its count.
FASTEST_COUNTED_RATE = 100_000
COUNTED_TOOLS = {"ab", "hey"}  # tools that stop at `requests` or at the time limit, whichever comes first
DURATION_TOOLS = {"wrk"}  # tools that run for the time limit and have no request count
FULL_RUN_ONLY = {"ceiling", "ceiling_exempt", "fixed_count"}  # what a scenario measures: never changed by quick


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


TYPES: dict[str, Callable[[Any], bool]] = {
    "integer": _integer,
    "number": _number,
    "boolean": lambda value: isinstance(value, bool),
    "string": lambda value: isinstance(value, str),
    "non-empty list of integers": lambda value: isinstance(value, list) and bool(value) and all(map(_integer, value)),
    "list of strings": lambda value: isinstance(value, list) and all(isinstance(item, str) for item in value),
    "number, or a list of numbers": lambda value: _number(value) or (
        isinstance(value, list) and bool(value) and all(map(_number, value))),
    "table of concurrency level -> seconds": lambda value: isinstance(value, dict) and all(
        key.isdigit() and _number(seconds) for key, seconds in value.items()),
    '"all"': lambda value: value == "all",
    "table of design name -> list of integers": lambda value: isinstance(value, dict) and all(
        isinstance(counts, list) and bool(counts) and all(map(_integer, counts)) for counts in value.values()),
    "table of design name -> list of strings": lambda value: isinstance(value, dict) and all(
        isinstance(arguments, list) and all(isinstance(item, str) for item in arguments) for arguments in value.values()),
}


@dataclass(frozen=True)
class Setting:
    """One scenario setting: its name, its type (a key of TYPES), who reads it, whether it must be set."""

    name: str
    type: str
    reader: str  # HARNESS (whatever the tool) or TOOL (only tools that list it in `reads`)
    required: bool = False


SETTINGS: dict[str, Setting] = {setting.name: setting for setting in [
    Setting("requests", "integer", HARNESS, required=True),  # requests per run (wrk and echo-client ignore it)
    Setting("concurrency", "non-empty list of integers", HARNESS, required=True),
    Setting("time_limit", "number", HARNESS, required=True),
    Setting("delay", "number", HARNESS, required=True),
    Setting("repeat", "integer", HARNESS, required=True),
    Setting("keep_alive", "boolean", HARNESS),  # true: verified per design, and the tool must read it
    Setting("pipelining", "boolean", HARNESS),  # true: only designs that declare and prove pipelining
    Setting("ceiling", "string", HARNESS),  # the design the tool is measured against, first, with no simulated call
    Setting("ceiling_exempt", "string", HARNESS),  # why this scenario measures no ceiling (check_measurement)
    Setting("fixed_count", "string", HARNESS),  # why its runs end at a request count, however short (ditto)
    Setting("proxy", "string", HARNESS),
    Setting("relative_to", "string", HARNESS),
    Setting("time_limit_blocking", "number", HARNESS),
    Setting("time_limit_at", "table of concurrency level -> seconds", HARNESS),
    Setting("work", "integer", HARNESS),
    Setting("server_cpus", '"all"', HARNESS),
    Setting("network_delay_ms", "number", HARNESS),  # harness/system/delay_proxy.py between the tool and each design
    Setting("cpu_per_request", "boolean", HARNESS),  # the tables add the server's CPU time per answer
    Setting("warm_up", "number", HARNESS),  # seconds of the same load before each measured run, not counted
    Setting("pipeline_depth", "integer", TOOL),  # wrk: requests written at once on each connection
    Setting("python", "string", HARNESS),  # "3.12": run the designs on that CPython (launcher.interpreter)
    Setting("interleave", "string", HARNESS),  # measured round robin with the scenarios of the same name (suites/interleave.py)
    Setting("database", "boolean", HARNESS),  # start a scratch PostgreSQL for the run (system/postgres.py)
    # A sizing sweep: each design named here runs once per count, restarted with size_arguments ({size} filled in).
    Setting("sizes", "table of design name -> list of integers", HARNESS),
    Setting("size_arguments", "table of design name -> list of strings", HARNESS),
    Setting("path", "string", HARNESS),  # the URL path the tool asks for (default "/"): "/db" picks a database query
    Setting("server_arguments", "list of strings", HARNESS),  # appended to every design's command: ["--pool-size", "5"]
    Setting("header_statistic", "string", TOOL),  # wrk: a response header's numbers, summarised (X-Pool-Wait-Us)
    Setting("rate", "number, or a list of numbers", TOOL),
    Setting("schedule_seconds", "number", TOOL),
    Setting("timeline", "boolean", TOOL),
    Setting("timeout", "number", TOOL),
    Setting("client_timeout", "number", TOOL),
    Setting("ab_flags", "list of strings", TOOL),
    Setting("wrk_threads", "integer", TOOL),
    Setting("echo_rate", "number", TOOL),
]}


TOOL_READS: dict[str, frozenset[str]] = {  # load tool -> the settings it reads (adapters: clients/tools/*.py)
    "ab": frozenset({"requests", "concurrency", "time_limit", "keep_alive", "ab_flags"}),
    "echo-client": frozenset({"concurrency", "time_limit", "echo_rate"}),
    "hey": frozenset({"requests", "concurrency", "time_limit", "keep_alive", "timeout"}),
    # not keep_alive: our HTTP client always closes
    "http-client": frozenset({"requests", "concurrency", "time_limit", "rate", "schedule_seconds", "timeline",
                              "client_timeout"}),
    # open loop at a fixed rate; never keeps a connection (-keepalive=false), as our own client
    "vegeta": frozenset({"concurrency", "time_limit", "rate", "schedule_seconds", "timeout"}),
    "wrk": frozenset({"concurrency", "time_limit", "keep_alive", "timeout", "wrk_threads", "pipeline_depth",
                      "header_statistic"}),
}


class SettingsError(ValueError):
    """A scenario key that is unknown, of the wrong type, missing, or not read by the scenario's tool."""


def check_scenario(path: Path, entry: dict[str, Any], tool_name: str, tool_reads: Collection[str]) -> None:
    """Raise SettingsError, naming the file, the scenario and the key, at the first thing wrong."""
    where = f"{path}: scenario {entry.get('id', '(no id)')!r}"
    for key in ("id", "title", "tool", "designs"):
        if key not in entry:
            raise SettingsError(f"{where}: missing {key!r}")
    quick = entry.get("quick", {})
    if not isinstance(quick, dict):
        raise SettingsError(f"{where}: [scenario.quick] must be a table")
    if "designs" in quick:  # the one name a quick run may change: which designs it measures
        chosen = quick["designs"]
        if not isinstance(chosen, list) or not chosen or not set(chosen) <= set(entry["designs"]):
            raise SettingsError(f"{where}: quick.designs = {chosen!r}, expected: a non-empty list of the "
                                "scenario's own designs")
        quick = {key: value for key, value in quick.items() if key != "designs"}
    tables = [("", {key: value for key, value in entry.items() if key not in NAME_KEYS}), ("quick.", quick)]
    for prefix, table in tables:
        for key, value in table.items():
            _check_one(where, prefix + key, key, value, tool_name, tool_reads)
    missing = [setting.name for setting in SETTINGS.values() if setting.required and setting.name not in entry]
    if missing:
        raise SettingsError(f"{where}: missing required setting(s) {', '.join(map(repr, missing))}")
    if (entry.get("keep_alive") or quick.get("keep_alive")) and "keep_alive" not in tool_reads:
        raise SettingsError(f"{where}: keep_alive = true, but its tool {tool_name!r} cannot keep connections alive")
    check_measurement(where, entry, quick, tool_name)
    check_sizes(where, {**entry, **quick}, entry["designs"])


def check_sizes(where: str, settings: dict[str, Any], designs: list[str]) -> None:
    """A sizing sweep names only the scenario's designs, each with the arguments that set its count."""
    swept, arguments = settings.get("sizes") or {}, settings.get("size_arguments") or {}
    for name in swept:
        if name not in designs:
            raise SettingsError(f"{where}: sizes names {name!r}, which is not one of its designs")
        if not any("{size}" in part for part in arguments.get(name, [])):
            raise SettingsError(f"{where}: sizes sweeps {name!r}, but size_arguments gives it no argument with "
                                "{size} (e.g. [\"--workers\", \"{size}\"])")




def check_measurement(where: str, entry: dict[str, Any], quick: dict[str, Any], tool_name: str) -> None:
    """Raise SettingsError unless the scenario measures its tool's ceiling and runs long enough (module header)."""
    moved = sorted(FULL_RUN_ONLY & quick.keys())
    if moved:
        raise SettingsError(f"{where}: quick.{moved[0]} is not allowed: a quick run measures what the full run "
                            "measures, only shorter")
    for key in FULL_RUN_ONLY - {"ceiling"}:
        if key in entry and not entry[key].strip():
            raise SettingsError(f"{where}: {key} must say why, in a sentence")
    if ("ceiling" in entry) == ("ceiling_exempt" in entry):
        raise SettingsError(
            f"{where}: " + ("sets both ceiling and ceiling_exempt" if "ceiling" in entry else
                            "measures no tool ceiling: set ceiling = \"DESIGN\" (the fastest design the tool can "
                            "load, measured first with no simulated call, so cells near it are flagged tool-bound), "
                            "or ceiling_exempt = \"why a ceiling means nothing here\""))
    if entry.get("fixed_count"):
        return  # an article's fixed-count experiment (or a picture): its runs end at their count, however short
    settings = {key: value for key, value in entry.items() if key not in NAME_KEYS}
    for label, variant in (("", settings), ("quick: ", {**settings, **quick})):
        problem = run_length_problem(variant, tool_name)
        if problem:
            raise SettingsError(f"{where}: {label}{problem}; make its runs last {MIN_RUN_SECONDS:g} s or more, "
                                "or, for an article's fixed-count experiment, fixed_count = \"why\"")


def time_limits(settings: dict[str, Any]) -> list[float]:
    """Every time limit a run of these settings can run under: the scenario's, per level, for blocking designs."""
    limits = [settings["time_limit"], *(settings.get("time_limit_at") or {}).values()]
    return limits + ([settings["time_limit_blocking"]] if settings.get("time_limit_blocking") else [])


def run_length_problem(settings: dict[str, Any], tool_name: str) -> str | None:
    """Why runs of these settings could last under MIN_RUN_SECONDS, or None when each lasts at least that."""
    limits = time_limits(settings)
    if min(limits) < MIN_RUN_SECONDS:
        return f"a time limit of {min(limits):g} s"
    if tool_name in DURATION_TOOLS:
        return None
    if tool_name in COUNTED_TOOLS:
        needed = math.ceil(max(limits) * FASTEST_COUNTED_RATE)
        if settings["requests"] < needed:
            return (f"{tool_name} stops after requests = {settings['requests']:,}, which it can send in "
                    f"{settings['requests'] / FASTEST_COUNTED_RATE:.2g} s (at {FASTEST_COUNTED_RATE:,} requests/s), "
                    f"before its time limit of {max(limits):g} s; requests = {needed:,} or more lets the time "
                    "limit end every run")
        return None
    rates = settings.get("rate")
    if rates is not None:  # open loop: a run lasts as long as its schedule (suites/plan.py, levels)
        swept = isinstance(rates, list)
        schedules = ([settings["schedule_seconds"]] if swept and settings.get("schedule_seconds")
                     else [settings["requests"] / rate for rate in (rates if swept else [rates])])
        if min(schedules) < MIN_RUN_SECONDS:
            return f"an open-loop schedule of {min(schedules):g} s"
        return None
    return f"{tool_name} runs until it has sent its requests, however soon that is"


def _check_one(where: str, shown: str, key: str, value: Any, tool_name: str, tool_reads: Collection[str]) -> None:
    setting = SETTINGS.get(key)
    if setting is None:
        close = difflib.get_close_matches(key, [*SETTINGS, *NAME_KEYS], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SettingsError(f"{where}: unknown setting {shown!r}{hint}; the settings are listed in "
                            "scripts/catalogue/README.md")
    if not TYPES[setting.type](value):
        raise SettingsError(f"{where}: {shown} = {value!r}, expected: {setting.type}")
    if setting.reader == TOOL and key not in tool_reads:
        raise SettingsError(f"{where}: sets {shown!r}, which its tool {tool_name!r} does not read "
                            f"({tool_name} reads: {', '.join(sorted(tool_reads))})")
