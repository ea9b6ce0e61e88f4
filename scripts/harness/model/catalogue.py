"""Load the design and scenario catalogue from scripts/catalogue/*.toml (designs and scenarios read by typed.py, a
scenario's settings checked first by settings.py, with the tool that reads each)."""

from __future__ import annotations

import signal
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

from harness.model.paths import REPO_ROOT
from harness.model.settings import (NAME_KEYS, QUICK_NAMES, TOOL_READS, ScenarioSettings, SettingsError,
                                    check_scenario, check_sizes)
from harness.model.typed import Check, Typed, any_age, optional

CATALOGUE_DIR = REPO_ROOT / "scripts" / "catalogue"
DEFAULT_COMMAND = ["{python}", "{file}", "--host", "{host}", "--port", "{port}", "--delay", "{delay}"]


class UnknownNameError(LookupError):
    """A design or scenario name that is not in the catalogue."""

    def __init__(self, what: str, name: str, known: list[str]) -> None:
        super().__init__(f"unknown {what} {name!r}; known {what}s: {', '.join(known)}")


# A design's stop signals, named as `signal.Signals` names them ("SIGTERM"): the harness stops it with the first.
SIGNAL_NAMES = Check("non-empty list of signal names",
                     lambda names: bool(names) and set(names) <= signal.Signals.__members__.keys())


class Design(Typed):
    """A `[[design]]` table: every key it may hold, read by the one checker (typed.py), so an unknown or misspelt key
    is an error naming the file, the design and the nearest known key (scripts/catalogue/README.md lists them)."""

    name: str
    title: str
    kind: Literal["http", "naive-http", "echo", "stream"]
    file: str
    page: str
    model: str
    concurrent: bool
    reproduces: list[str]
    command: list[str] = field(default_factory=lambda: list(DEFAULT_COMMAND))
    config_template: str | None = None  # a file the harness fills (@HOST@, @PORT@, ...) for {config}
    # Signals that stop the design gracefully; the harness stops it with the first one.
    stop_signals: Annotated[list[str], SIGNAL_NAMES] = field(default_factory=lambda: ["SIGTERM", "SIGINT"])
    # The harness sends that signal to the whole process group unless this is set: then to the main process
    # alone, for a supervisor that must tell its workers itself (Granian, whose main process exits 1 when a
    # worker that heard the signal too exits before it has handled its own copy).
    stop_main_process_only: bool = False
    oversized_head_status: int = 431  # what a 70 KiB request head gets (real servers may differ)
    # Real servers' documented answers to the behaviour suite's malformed request lines, where not 400.
    malformed_request_status: dict[str, int] = field(default_factory=dict)
    supports_work: bool = False  # takes --work N (N iterations of pure-Python computation per request)
    # Binds with SO_REUSEADDR, so it can listen on a port that still holds TIME_WAIT connections
    # (the harness then gives it the run's shared port; otherwise a fresh one).
    reuses_address: bool = True
    # HTTP/1.1 persistent connections: several requests on one connection (checked before a keep-alive scenario).
    keep_alive: bool = False
    pipelining: bool = False  # answers requests sent back to back before the first answer, in order
    # An echo design answers the lines it holds before it exits on SIGINT/SIGTERM; false for one that stops at
    # once: tests/servers/test_echo.py reads it and skips the in-flight test for such a design.
    finishes_in_flight: bool = True

    @property
    def stop_signal(self) -> signal.Signals:
        """The signal the harness stops this design with: the first graceful one it lists."""
        return signal.Signals[self.stop_signals[0]]


# The scenario's own designs, a few of them: which, the catalogue checks (a relation, load_catalogue).
OWN_DESIGNS = Check("non-empty list of the scenario's own designs", bool)
# The scenario whose quick run stands for this one: which, the catalogue checks (check_covered).
STAND_IN = Check("the id of the scenario whose quick run stands for this one", lambda name: bool(name.strip()))


class QuickTable(Typed):
    """A `[scenario.quick]` table: the settings a quick run replaces, and two names. Written flat, as the catalogue
    gives it, the settings first."""

    # Checked against ScenarioSettings by settings.check_scenario (with the scenario's tool's reads).
    settings: dict[str, Any] = field(default_factory=dict)
    designs: Annotated[list[str], OWN_DESIGNS] | None = optional()  # the few a quick run measures
    # A quick run of every scenario leaves this one out, and that scenario's quick run stands for it (the same tool
    # and shape, one number apart); `--scenario ID --quick` still runs it.
    covered_by: Annotated[str, STAND_IN] | None = optional()

    @classmethod
    def from_flat(cls, data: dict[str, Any]) -> dict[str, Any]:
        names = {key: value for key, value in data.items() if key in QUICK_NAMES}
        return {**names, "settings": {key: value for key, value in data.items() if key not in QUICK_NAMES}}

    def to_flat(self, data: dict[str, Any]) -> dict[str, Any]:
        return data.pop("settings") | data


class Scenario(Typed):
    """A `[[scenario]]` table, and a scenario record's copy of the one it ran from (records/scenario_record.py): its
    names, read by the one checker (typed.py), so a missing key or a value of the wrong type is an error naming the
    file, the scenario and the key; and its settings, kept flat beside them as the catalogue writes them
    (`full_settings` here; settings.check_scenario checks them first, with the tool that reads each)."""

    id: str
    title: str
    article: str = ""
    tool: str  # one of TOOL_READS' (load_catalogue checks it)
    designs: list[str]
    quick: QuickTable = field(default_factory=QuickTable)
    published: dict[str, Any] = field(default_factory=dict)  # the article's own figures, keyed by level: free-form
    # A record's: a setting retired since is left out, one required since reads None.
    full_settings: ScenarioSettings = any_age()

    @classmethod
    def from_flat(cls, data: dict[str, Any]) -> dict[str, Any]:
        names = {key: value for key, value in data.items() if key in NAME_KEYS}
        return {**names, "full_settings": {key: value for key, value in data.items() if key not in NAME_KEYS}}

    def to_flat(self, data: dict[str, Any]) -> dict[str, Any]:
        settings = data.pop("full_settings")
        return {key: data[key] for key in ("id", "title", "article", "tool")} | settings | {
            key: data[key] for key in ("designs", "quick", "published")}

    def design_names(self, quick: bool) -> list[str]:
        """The designs a run measures: all of them, or in a quick run the few its quick table names."""
        return list(self.quick.designs or self.designs) if quick else list(self.designs)

    def settings(self, quick: bool) -> ScenarioSettings:
        """The settings a run uses: the full ones, or with the quick overrides replaced in."""
        return replace(self.full_settings, **self.quick.settings) if quick else self.full_settings


@dataclass(frozen=True)
class Catalogue:
    designs: dict[str, Design]
    scenarios: dict[str, Scenario]

    def design(self, name: str) -> Design:
        if name not in self.designs:
            raise UnknownNameError("design", name, sorted(self.designs))
        return self.designs[name]

    def scenario(self, scenario_id: str) -> Scenario:
        if scenario_id not in self.scenarios:
            raise UnknownNameError("scenario", scenario_id, sorted(self.scenarios))
        return self.scenarios[scenario_id]


def read_entries(directory: Path) -> tuple[list[tuple[Path, dict[str, Any]]], list[tuple[Path, dict[str, Any]]]]:
    """Design and scenario tables from every *.toml in the directory, in file-name order."""
    designs, scenarios = [], []
    files = sorted(directory.glob("*.toml"))
    if not files:  # a mistyped --catalogue: say so, not "no designs" further on
        raise ValueError(f"no catalogue files (*.toml) in {directory}")
    for path in files:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for key, entries in (("design", designs), ("scenario", scenarios)):
            tables = data.get(key, [])
            if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
                raise ValueError(f"{path}: `{key}` must be an array of tables, each written [[{key}]]")
            entries += [(path, table) for table in tables]
    if not designs:  # a folder of other TOML files (a suite's own catalogue, such as hostile/)
        raise ValueError(f"no [[design]] tables in {directory}/*.toml")
    return designs, scenarios


def load_catalogue(directory: Path = CATALOGUE_DIR) -> Catalogue:
    """Parse every catalogue file and check names, settings (settings.py) and the designs scenarios name."""
    design_entries, scenario_entries = read_entries(directory)
    designs: dict[str, Design] = {}
    for path, entry in design_entries:
        design = Design.from_json(entry, f"{path}: design {entry.get('name', '(no name)')!r}")
        if design.name in designs:
            raise ValueError(f"{path}: design {design.name!r} is listed twice")
        designs[design.name] = design
    scenarios: dict[str, Scenario] = {}
    for path, entry in scenario_entries:
        where = f"{path}: scenario {entry.get('id', '(no id)')!r}"
        tool = entry.get("tool", "")
        if not isinstance(tool, str) or tool not in TOOL_READS:
            raise SettingsError(f"{where}: unknown tool {tool!r}; known: {', '.join(sorted(TOOL_READS))}")
        check_scenario(where, entry, tool, TOOL_READS[tool])  # the settings, first: each with the tool that reads it
        scenario = Scenario.from_json(entry, where)  # the names: typed
        chosen = scenario.quick.designs
        if chosen is not None and not set(chosen) <= set(scenario.designs):
            raise SettingsError(f"{where}: quick.designs = {chosen!r}, expected: a non-empty list of the "
                                "scenario's own designs")
        quick = scenario.settings(quick=True)
        check_sizes(where, quick.sizes, quick.size_arguments, scenario.designs)
        full = scenario.settings(quick=False)
        for name in [*scenario.designs, *(name for name in (full.ceiling, full.relative_to) if name)]:
            if name not in designs:
                raise ValueError(f"{where} names design {name!r}, which is not in the "
                                 f"catalogue; known designs: {', '.join(sorted(designs))}")
        variants = (full, quick)
        ceiling = designs.get(full.ceiling or "")
        if ceiling is not None:  # caught here: the tool's ceiling must do what the scenario asks, as its designs do
            asked = {"keep_alive": any(variant.keep_alive for variant in variants),
                     "pipelining": any(variant.pipelining for variant in variants)}
            asks = [key for key, wanted in asked.items() if wanted and not getattr(ceiling, key)]
            if asks:
                raise ValueError(f"{where} sets {asks[0]} = true, but its ceiling "
                                 f"{ceiling.name!r} does not declare it: it would be refused, and no cell flagged")
        asks_work = any(variant.work for variant in variants)
        unable = [name for name in scenario.designs if asks_work and not designs[name].supports_work]
        if unable:  # caught here, not when the run reaches them
            raise ValueError(f"{where} sets work, but {', '.join(unable)} "
                             "cannot do it (no supports_work = true)")
        if scenario.id in scenarios:
            raise ValueError(f"{where} is listed twice")
        scenarios[scenario.id] = scenario
    check_covered(scenarios)
    return Catalogue(designs=designs, scenarios=scenarios)


def check_covered(scenarios: dict[str, Scenario]) -> None:
    """A scenario left out of a quick run of every scenario names one that runs in it, with the same tool."""
    for scenario in scenarios.values():
        name = scenario.quick.covered_by
        if name is None:
            continue
        where = f"scenario {scenario.id!r}: quick.covered_by = {name!r}"
        if name not in scenarios:
            raise ValueError(f"{where}, which is not in the catalogue")
        stand_in = scenarios[name]
        if stand_in.id == scenario.id or stand_in.quick.covered_by is not None:
            raise ValueError(f"{where}, which a quick run of every scenario leaves out too: name one it runs")
        if stand_in.tool != scenario.tool:
            raise ValueError(f"{where}, which runs {stand_in.tool}, not {scenario.tool}: it cannot stand for it")
