"""Scenario settings: every key a `[[scenario]]` may set, its type, and who reads it.

A scenario's keys are its names (`id`, `title`, `article`, `tool`, `designs`, and the
tables `quick` and `published`: catalogue.Scenario's typed fields, read by typed.py) and its
settings: the fields of ScenarioSettings below, the one typed object a run reads (SETTINGS, the
table the checks use, is read off its fields). A setting is read either by the harness, whatever
the load tool (`delay`, `repeat`, `proxy`, ...), or by load tools only; LOAD_TOOLS below describes
each load tool once: the settings it reads (each adapter in clients/tools/ takes its `reads` from
there, so the catalogue, a model, needs no client to check a scenario), how its runs end, what it
counts (TOOL_READS, COUNTED_TOOLS, DURATION_TOOLS and LINE_ECHO_TOOLS are views of it). Loading
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

A setting's type is its annotation, checked by the one reader of catalogue and records (typed.py, read_value)
and said in words by its type_name (errors here, the catalogue README's table): no table of type names beside it.

To add a setting: one field of ScenarioSettings below; for a tool setting, also its name in the
LOAD_TOOLS entry (its `reads`) of each load tool that reads it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Annotated, Any, Literal

from harness.model.typed import NON_EMPTY, Check, RecordShapeError, Typed, field_types, read_value, type_name

HARNESS, TOOL = "harness", "tool"
NAME_KEYS = {"id", "title", "article", "tool", "designs", "quick", "published"}  # a scenario's names, not settings
QUICK_NAMES = {"designs", "covered_by"}  # the names a [scenario.quick] table holds beside the settings it replaces
MIN_RUN_SECONDS = 1.0  # a measured run shorter than this is an error, outside a fixed-count experiment
# Faster than hey or ab has run here (hey with keep-alive against nginx: about 35,000 requests/s, pinned to
# one CPU; wrk, which has no request count, reached 129,000): a hey or ab scenario whose `requests` would
# last this long at this rate is stopped by its time limit, never by its count.
FASTEST_COUNTED_RATE = 100_000
FULL_RUN_ONLY = {"ceiling", "ceiling_exempt", "fixed_count"}  # what a scenario measures: never changed by quick


# What a setting's words say beyond its Python type (typed.Check): the catalogue README's type column reads them.
DesignName = Annotated[str, Check("design name")]
Level = Annotated[str, Check("concurrency level", str.isdigit)]  # a TOML table's key: "500"


@dataclass(frozen=True)
class Setting:
    """One scenario setting: its name, its type (ScenarioSettings' annotation), who reads it, whether it must be set."""

    name: str
    type: Any
    reader: str  # HARNESS (whatever the tool) or TOOL (only tools that list it in `reads`)
    required: bool = False

    @property
    def type_name(self) -> str:
        return type_name(self.type)


def _setting(reader: str, default: Any = None, *, required: bool = False) -> Any:
    """A ScenarioSettings field: its default (None: unset; a tool setting's default is the tool's, in its
    adapter) and, as metadata, the reader and whether it is required (SETTINGS is made of them)."""
    metadata = {"reader": reader, "required": required}
    if required:
        return field(metadata=metadata)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


class ScenarioSettings(Typed):  # a frozen, keyword-only dataclass: required settings need not come first
    """Every setting a `[[scenario]]` may set, typed: one object per run, made by Scenario.settings().

    A quick run's object is the full run's with `[scenario.quick]` replaced in (dataclasses.replace).
    To add a setting: one field below; for a tool setting, also its name in the LOAD_TOOLS entry (`reads`)
    of each load tool that reads it, and a row in scripts/catalogue/README.md.
    """

    requests: int = _setting(HARNESS, required=True)  # requests per run (wrk, echo-client ignore it)
    concurrency: Annotated[list[int], NON_EMPTY] = _setting(HARNESS, required=True)
    time_limit: float = _setting(HARNESS, required=True)
    delay: float = _setting(HARNESS, required=True)
    repeat: int = _setting(HARNESS, required=True)
    keep_alive: bool = _setting(HARNESS, False)  # true: verified per design, and the tool must read it
    pipelining: bool = _setting(HARNESS, False)  # true: only designs that declare and prove pipelining
    # The design the tool is measured against, first, with no simulated call.
    ceiling: DesignName | None = _setting(HARNESS)
    ceiling_exempt: str | None = _setting(HARNESS)  # why it measures no ceiling (check_measurement)
    fixed_count: str | None = _setting(HARNESS)  # why its runs end at a request count, however short (ditto)
    proxy: str | None = _setting(HARNESS)
    # Why this scenario measures through a proxy without upstream keep-alive, and the page that says so: every other
    # behind-nginx measurement uses the proxy the site recommends (tests/harness/suites/test_recommended_proxy.py)
    proxy_http_1_0: str | None = _setting(HARNESS)
    relative_to: DesignName | None = _setting(HARNESS)
    time_limit_blocking: float | None = _setting(HARNESS)
    time_limit_at: dict[Level, float] | None = _setting(HARNESS)
    work: int = _setting(HARNESS, 0)  # iterations of pure-Python work per request (designs' --work)
    server_cpus: Literal["all"] | None = _setting(HARNESS)
    network_delay_ms: float | None = _setting(HARNESS)  # system/delay_proxy.py between tool and design
    cpu_per_request: bool | None = _setting(HARNESS)  # the tables add the server's CPU time per answer
    warm_up: float | None = _setting(HARNESS)  # seconds of the same load before each run, not counted
    pipeline_depth: int | None = _setting(TOOL)  # wrk: requests written at once on each connection
    python: str | None = _setting(HARNESS)  # "3.12": run the designs on that CPython (launcher.interpreter)
    # Measured round robin with the scenarios of the same name (suites/interleave.py).
    interleave: str | None = _setting(HARNESS)
    # Why a run of every scenario (`bench.py run`) leaves it out: it runs only by name (its id or group's).
    named_only: str | None = _setting(HARNESS)
    database: bool | None = _setting(HARNESS)  # start a scratch PostgreSQL for the run (system/postgres.py)
    # Why a database scenario closes the connection after every answer (keep_alive false): a connection per request
    # is exactly the work around a short query, so one that does it says why
    # (tests/harness/model/test_database_records.py)
    closes_connections: str | None = _setting(HARNESS)
    # A sizing sweep: each design named here runs once per count, restarted with size_arguments ({size} filled in).
    sizes: dict[DesignName, Annotated[list[int], NON_EMPTY]] | None = _setting(HARNESS)
    size_arguments: dict[DesignName, list[str]] | None = _setting(HARNESS)
    path: str = _setting(HARNESS, "/")  # the URL path the tool asks for: "/db" picks a database query
    server_arguments: list[str] = _setting(HARNESS, [])  # after every design's command
    header_statistic: str | None = _setting(TOOL)  # wrk: a response header's numbers (X-Pool-Wait-Us)
    # wrk: "production" sends production-shaped heads, each unique (clients/tools/wrk_production_heads.lua)
    request_heads: Literal["production"] | None = _setting(TOOL)
    rate: float | Annotated[list[float], NON_EMPTY] | None = _setting(TOOL)
    schedule_seconds: float | None = _setting(TOOL)
    timeline: bool | None = _setting(TOOL)
    timeout: float | None = _setting(TOOL)
    client_timeout: float | None = _setting(TOOL)
    ab_flags: list[str] | None = _setting(TOOL)
    wrk_threads: int | None = _setting(TOOL)
    echo_rate: float | None = _setting(TOOL)

    @classmethod
    def for_tool(cls, time_limit: float, concurrency: int, **tool_settings: Any) -> ScenarioSettings:
        """The settings of one load-tool run that no scenario describes (how-fast's wrk, deployment's vegeta): the
        tool reads its time limit and its own settings; requests, delay and repeat are what a tool never reads."""
        return cls(requests=0, concurrency=[concurrency], time_limit=time_limit, delay=0, repeat=1, **tool_settings)

    def to_json(self) -> dict[str, Any]:
        """The settings as a record keeps them: the required ones and keep_alive always, the others where the
        scenario set them (not None, not the harness's default), so old and new records read alike."""
        return {setting.name: getattr(self, setting.name) for setting in fields(self)
                if getattr(self, setting.name) is not None
                and (setting.name in ALWAYS_RECORDED or getattr(self, setting.name) != _default(setting))}

    def time_limits(self) -> list[float]:
        """Every time limit a run of these settings can run under: the scenario's, per level, for blocking designs."""
        limits = [self.time_limit, *(self.time_limit_at or {}).values()]
        return limits + ([self.time_limit_blocking] if self.time_limit_blocking else [])


def _default(setting: Field[Any]) -> Any:
    return setting.default_factory() if setting.default_factory is not MISSING else setting.default


SETTINGS: dict[str, Setting] = {  # the catalogue's table of settings, read off ScenarioSettings' fields
    setting.name: Setting(setting.name, field_types(ScenarioSettings)[setting.name], setting.metadata["reader"],
                          setting.metadata["required"]) for setting in fields(ScenarioSettings)}
ALWAYS_RECORDED = {name for name, setting in SETTINGS.items() if setting.required} | {"keep_alive"}


@dataclass(frozen=True)
class LoadTool:
    """One load tool as the model knows it, said once: the settings it reads, how one of its runs ends, what it
    counts. Its adapter (clients/tools/) runs it; its extras (records/scenario_record.py) are what it reports beyond
    every run's fields."""

    reads: frozenset[str]
    # "time": runs for the time limit, no request count; "count or time": stops at `requests` or the time limit,
    # whichever comes first; "count or schedule": ends when it has sent its requests (a line per connection, for the
    # echo client) or its open-loop schedule at `rate`, however soon
    ends: Literal["time", "count or time", "count or schedule"]
    counts: Literal["HTTP answers", "echoed lines"] = "HTTP answers"


LOAD_TOOLS: dict[str, LoadTool] = {
    "ab": LoadTool(frozenset({"requests", "concurrency", "time_limit", "keep_alive", "ab_flags"}), "count or time"),
    # one line per connection, echoes counted, not HTTP answers
    "echo-client": LoadTool(frozenset({"concurrency", "time_limit", "echo_rate"}), "count or schedule",
                            "echoed lines"),
    "hey": LoadTool(frozenset({"requests", "concurrency", "time_limit", "keep_alive", "timeout"}), "count or time"),
    # not keep_alive: our HTTP client always closes
    "http-client": LoadTool(frozenset({"requests", "concurrency", "time_limit", "rate", "schedule_seconds",
                                       "timeline", "client_timeout"}), "count or schedule"),
    # open loop at a fixed rate; never keeps a connection (-keepalive=false), as our own client
    "vegeta": LoadTool(frozenset({"concurrency", "time_limit", "rate", "schedule_seconds", "timeout"}),
                       "count or schedule"),
    "wrk": LoadTool(frozenset({"concurrency", "time_limit", "keep_alive", "timeout", "wrk_threads", "pipeline_depth",
                               "header_statistic", "request_heads"}), "time"),
}
# Views of LOAD_TOOLS, by the trait their readers ask about.
TOOL_READS = {name: tool.reads for name, tool in LOAD_TOOLS.items()}  # the settings each reads
COUNTED_TOOLS = {name for name, tool in LOAD_TOOLS.items() if tool.ends == "count or time"}
DURATION_TOOLS = {name for name, tool in LOAD_TOOLS.items() if tool.ends == "time"}
LINE_ECHO_TOOLS = {name for name, tool in LOAD_TOOLS.items() if tool.counts == "echoed lines"}


class SettingsError(ValueError):
    """A scenario key that is unknown, of the wrong type, missing, or not read by the scenario's tool."""


def check_scenario(where: str, entry: dict[str, Any], tool_name: str, tool_reads: Collection[str]) -> None:
    """Raise SettingsError, naming the file and the scenario (`where`) and the setting, at the first setting wrong. The
    scenario's names (NAME_KEYS, QUICK_NAMES) are catalogue.Scenario's typed fields, read by typed.py after this."""
    quick = entry.get("quick", {})
    quick = {key: value for key, value in quick.items() if key not in QUICK_NAMES} if isinstance(quick, dict) else {}
    tables = [("", {key: value for key, value in entry.items() if key not in NAME_KEYS}), ("quick.", quick)]
    for prefix, table in tables:
        for key, value in table.items():
            _check_one(where, prefix + key, key, value, tool_name, tool_reads)
    missing = [setting.name for setting in SETTINGS.values() if setting.required and setting.name not in entry]
    if missing:
        raise SettingsError(f"{where}: missing required setting(s) {', '.join(map(repr, missing))}")
    full = ScenarioSettings.from_json(tables[0][1], where)
    variants = (full, replace(full, **quick))
    if any(variant.keep_alive for variant in variants) and "keep_alive" not in tool_reads:
        raise SettingsError(f"{where}: keep_alive = true, but its tool {tool_name!r} cannot keep connections alive")
    check_measurement(where, entry, quick, tool_name, variants)


def check_sizes(where: str, sizes: dict[str, list[int]] | None, size_arguments: dict[str, list[str]] | None,
                designs: list[str]) -> None:
    """A sizing sweep names only the scenario's designs, each with the arguments that set its count."""
    swept, arguments = sizes or {}, size_arguments or {}
    for name in swept:
        if name not in designs:
            raise SettingsError(f"{where}: sizes names {name!r}, which is not one of its designs")
        if not any("{size}" in part for part in arguments.get(name, [])):
            raise SettingsError(f"{where}: sizes sweeps {name!r}, but size_arguments gives it no argument with "
                                "{size} (e.g. [\"--workers\", \"{size}\"])")


def check_measurement(where: str, entry: dict[str, Any], quick: dict[str, Any], tool_name: str,
                      variants: tuple[ScenarioSettings, ScenarioSettings]) -> None:
    """Raise SettingsError unless the scenario measures its tool's ceiling and runs long enough (module header).

    `entry` and `quick` are the tables as written (which keys they name); `variants` the full and quick settings.
    """
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
    if variants[0].fixed_count:
        return  # an article's fixed-count experiment (or a picture): its runs end at their count, however short
    for label, variant in zip(("", "quick: "), variants):
        problem = run_length_problem(variant, tool_name)
        if problem:
            raise SettingsError(f"{where}: {label}{problem}; make its runs last {MIN_RUN_SECONDS:g} s or more, "
                                "or, for an article's fixed-count experiment, fixed_count = \"why\"")


def run_length_problem(settings: ScenarioSettings, tool_name: str) -> str | None:
    """Why runs of these settings could last under MIN_RUN_SECONDS, or None when each lasts at least that."""
    limits = settings.time_limits()
    if min(limits) < MIN_RUN_SECONDS:
        return f"a time limit of {min(limits):g} s"
    if tool_name in DURATION_TOOLS:
        return None
    if tool_name in COUNTED_TOOLS:
        needed = math.ceil(max(limits) * FASTEST_COUNTED_RATE)
        if settings.requests < needed:
            return (f"{tool_name} stops after requests = {settings.requests:,}, which it can send in "
                    f"{settings.requests / FASTEST_COUNTED_RATE:.2g} s (at {FASTEST_COUNTED_RATE:,} requests/s), "
                    f"before its time limit of {max(limits):g} s; requests = {needed:,} or more lets the time "
                    "limit end every run")
        return None
    rates = settings.rate
    if rates is not None:  # open loop: a run lasts as long as its schedule (suites/plan.py, levels)
        swept = isinstance(rates, list)
        schedules = ([settings.schedule_seconds] if swept and settings.schedule_seconds
                     else [settings.requests / rate for rate in (rates if swept else [rates])])
        if min(schedules) < MIN_RUN_SECONDS:
            return f"an open-loop schedule of {min(schedules):g} s"
        return None
    return f"{tool_name} runs until it has sent its requests, however soon that is"


def _check_one(where: str, shown: str, key: str, value: Any, tool_name: str, tool_reads: Collection[str]) -> None:
    setting = SETTINGS.get(key)
    if setting is None:
        close = difflib.get_close_matches(key, [*SETTINGS, *NAME_KEYS, *QUICK_NAMES], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SettingsError(f"{where}: unknown setting {shown!r}{hint}; the settings are listed in "
                            "scripts/catalogue/README.md")
    try:
        read_value(setting.type, value, f"{where}: {shown}")
    except RecordShapeError:
        raise SettingsError(f"{where}: {shown} = {value!r}, expected: {setting.type_name}") from None
    if setting.reader == TOOL and key not in tool_reads:
        raise SettingsError(f"{where}: sets {shown!r}, which its tool {tool_name!r} does not read "
                            f"({tool_name} reads: {', '.join(sorted(tool_reads))})")
