"""Case 15 (EMFILE) against real servers at their defaults and with their own setting that caps connections.

    python scripts/bench.py hostile --emfile-settings [--quick] [--out DIR]

Waitress and Granian spin when the process runs out of descriptors at their defaults, and Gunicorn's
gthread worker dies at its limit and is replaced (results/hostile.json). Each server documents a cap on what
one process holds (scripts/catalogue/hostile/emfile-settings.toml: Waitress's connection_limit,
Gunicorn's worker_connections, Granian's --backpressure). For each, this suite runs case 15 exactly as
the hostile suite does (cases.emfile_case through run.run_case: the limit of every process lowered,
once it answers, to what it holds + the headroom; more connections held than that; the group's CPU
meanwhile; a probe after), twice, one after the other: at the server's defaults, then with the
setting's arguments appended to the design's command. Each run starts its own server. The case also
counts the held connections the server had closed by the end of the hold and the processes started
during it, and here (ask_held_within) sends a GET on every held connection after the hold and counts
what came back: what a client already connected loses. Around the whole case this suite counts the
server's stderr lines naming EMFILE and the processes that were not there before (workers replaced):
Gunicorn's gthread worker does not spin on EMFILE, its accept() raises it and the worker exits, which
it can only do once its threads, blocked reading silent connections, are let go.

Known limits: one run of each, a few seconds each; the value measured is one value below the headroom
(the catalogue says why), not a sweep. A full run writes results/hostile-emfile-settings.json; --quick
(the suite's quick settings) writes under build/results/.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import tomllib
from pathlib import Path

from harness.model.catalogue import CATALOGUE_DIR, Catalogue
from harness.model.records import record_path, write_record_atomic
from harness.model.records.hostile_record import (EmfileSetting, EmfileSettingRow, EmfileSettingRun,
                                                  EmfileSettingsRecord)
from harness.model.suite_settings import HostileSettings
from harness.suites.hostile.cases import EMFILE_TEXT, Case, load_suite
from harness.suites.hostile.run import run_case, warm_up
from harness.suites.subjects import launched
from harness.system import launcher, processes
from harness.system.environment import describe_machine, utc_now
from harness.system.open_files import raise_open_files_limit

SETTINGS_FILE = CATALOGUE_DIR / "hostile" / "emfile-settings.toml"
RECORD_NAME = "hostile-emfile-settings.json"
CASE_ID = "emfile"
ASK_HELD_WITHIN = 2.0  # s: after the hold, a GET on every held connection; a served one answers in milliseconds
PACKAGES = ["waitress", "gunicorn", "granian"]  # their versions go into the record


def package_versions() -> dict[str, str]:
    """The installed version of each real server measured here."""
    return {name: importlib.metadata.version(name) for name in PACKAGES}


def load_settings(path: Path = SETTINGS_FILE) -> list[EmfileSetting]:
    """The settings to measure, typed (a missing or misspelt key is an error naming the entry)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    entries = [EmfileSetting.from_json(entry, f"{path}: [[setting]] {entry.get('setting', index + 1)}")
               for index, entry in enumerate(data.get("setting", []))]
    if not entries:
        raise ValueError(f"{path}: no [[setting]] to measure")
    return entries


def measure(catalogue: Catalogue, setting: EmfileSetting, arguments: list[str], case: Case,
            settings: HostileSettings, log_dir: Path) -> EmfileSettingRun:
    """Case 15 against the setting's design started with `arguments` (none: its defaults)."""
    design = catalogue.design(setting.design)
    try:
        with launched(design, settings.delay, log_dir, extra_arguments=arguments) as server:
            warm_up(server)
            before = set(processes.group_pids(server.process.pid))
            result = run_case(server, case, settings)
            replaced = len(set(processes.group_pids(server.process.pid)) - before)
            command = server.command
            stderr = server.running.stderr_path.read_text(encoding="utf-8", errors="replace")
    except processes.ServerStartError as error:
        return EmfileSettingRun(arguments=arguments, command=None, result=None,
                                problem=f"did not start: {error.args[0].splitlines()[0]}")
    logged = sum(1 for line in stderr.splitlines() if EMFILE_TEXT in line)
    return EmfileSettingRun(arguments=arguments, command=command, result=result, emfile_logged=logged,
                            processes_replaced=replaced)


def run_emfile_settings(catalogue: Catalogue, quick: bool, out_dir: Path | None,
                        log_root: Path = launcher.LOG_DIR / "hostile-emfile-settings",
                        path: Path = SETTINGS_FILE) -> tuple[Path, EmfileSettingsRecord]:
    """Every setting at the defaults and with the setting; the record written atomically; its path and the record."""
    entries = load_settings(path)
    for entry in entries:
        catalogue.design(entry.design)  # an unknown design fails before anything starts
    suite = load_suite()
    settings = suite.run_settings(quick)
    case = dataclasses.replace(suite.select([CASE_ID])[0], ask_held_within=ASK_HELD_WITHIN)  # the record keeps it
    raise_open_files_limit(settings.emfile_connections + 64, "connections")
    started = utc_now()
    rows = []
    for entry in entries:
        runs = []
        for label, arguments in (("default", []), ("setting", entry.arguments)):
            print(f"{entry.server} {entry.setting}: {label} {' '.join(arguments)}", flush=True)
            runs.append(measure(catalogue, entry, arguments, case, settings,
                                log_root / f"{entry.design}-{label}"))
        rows.append(EmfileSettingRow(setting=entry, default=runs[0], with_setting=runs[1]))
    record = EmfileSettingsRecord(
        kind="emfile-settings",
        mode="quick" if quick else "full",
        settings=settings,
        case=case,
        environment=describe_machine(processes.NO_PINNING, package_versions()),
        started_utc=started,
        finished_utc=utc_now(),
        rows=rows,
    )
    record_file = record_path(RECORD_NAME, quick, out_dir)
    write_record_atomic(record_file, record)
    return record_file, record
