"""Render the free-threaded comparison: the cpu-bound scenario on CPython 3.14 with the GIL and on 3.14t without.

Nothing here can be measured on the development machines (no free-threaded CPython
can be installed on them); bench.yml's `free-threaded` job runs the scenario on a
GitHub runner with setup-python's 3.14 and 3.14t and commits the two records as
results/free-threaded/<interpreter>/cpu-bound.json. Until both exist, the table says
so in words: never a placeholder number.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.model.records import RESULTS_DIR
from harness.model.records.scenario_record import ScenarioRecord
from harness.render.cells import format_rate, rate_medians

FREE_THREADED_DIR_NAME = "free-threaded"
INTERPRETERS = {"gil": "3.14", "free-threaded": "3.14t"}  # folder names under results/free-threaded/
SCENARIO_ID = "cpu-bound"
NOT_YET = ("*Not measured yet.* No free-threaded CPython can be installed on the machines this site is built on, "
           "so this comparison runs on a GitHub runner: the `free-threaded` job of `.github/workflows/bench.yml` "
           "runs the cpu-bound scenario on CPython {gil} and {free} and commits both records to "
           "`results/free-threaded/`. No such run has come back yet{missing}.\n")


def load_pair(results_dir: Path = RESULTS_DIR) -> dict[str, ScenarioRecord]:
    """The records that exist, by kind ("gil", "free-threaded")."""
    found = {}
    for kind, folder in INTERPRETERS.items():
        path = results_dir / FREE_THREADED_DIR_NAME / folder / f"{SCENARIO_ID}.json"
        if path.exists():
            found[kind] = ScenarioRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
    return found


def free_threaded_table(results_dir: Path = RESULTS_DIR) -> str:
    pair = load_pair(results_dir)
    if len(pair) < 2:
        missing = [INTERPRETERS[kind] for kind in INTERPRETERS if kind not in pair]
        return NOT_YET.format(gil=INTERPRETERS["gil"], free=INTERPRETERS["free-threaded"],
                              missing=f" (missing: {', '.join(missing)})")
    gil, free = rate_medians(pair["gil"]), rate_medians(pair["free-threaded"])
    lines = ["| design | clients | req/s, 3.14 (GIL) | req/s, 3.14t (free-threaded) | 3.14t / 3.14 |",
             "|---|--:|--:|--:|--:|"]
    for (name, level), rate in gil.items():
        if (name, level) not in free:
            continue
        ratio = free[(name, level)] / rate if rate else float("nan")
        lines.append(f"| {name} | {level:g} | {format_rate(rate)} | {format_rate(free[(name, level)])} | {ratio:.2f} |")
    machines = [pair[kind].environment for kind in INTERPRETERS]
    lines += ["", "*Medians of each cell's repetitions. Runner: " + "; ".join(
        f"{machine.runner} ({machine.cpu_model}, {machine.cpus_available} CPUs), Python {machine.python}"
        f" ({machine.gil or 'GIL not recorded'}), commit {machine.commit[:7]}" for machine in machines) + ".*"]
    return "\n".join(lines) + "\n"
