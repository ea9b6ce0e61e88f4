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

To add a setting: one `Setting(...)` line below; for a tool setting, also its name in the
TOOL_READS entry of each load tool that reads it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HARNESS, TOOL = "harness", "tool"
NAME_KEYS = {"id", "title", "article", "tool", "designs", "quick", "published"}  # a scenario's names, not settings


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
    Setting("ceiling", "string", HARNESS),
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
    Setting("database", "boolean", HARNESS),  # start a scratch PostgreSQL for the run (system/postgres.py)
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
    "wrk": frozenset({"concurrency", "time_limit", "keep_alive", "timeout", "wrk_threads", "pipeline_depth"}),
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
    tables = [("", {key: value for key, value in entry.items() if key not in NAME_KEYS}), ("quick.", quick)]
    for prefix, table in tables:
        for key, value in table.items():
            _check_one(where, prefix + key, key, value, tool_name, tool_reads)
    missing = [setting.name for setting in SETTINGS.values() if setting.required and setting.name not in entry]
    if missing:
        raise SettingsError(f"{where}: missing required setting(s) {', '.join(map(repr, missing))}")
    if (entry.get("keep_alive") or quick.get("keep_alive")) and "keep_alive" not in tool_reads:
        raise SettingsError(f"{where}: keep_alive = true, but its tool {tool_name!r} cannot keep connections alive")


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
