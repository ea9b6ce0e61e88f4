"""Results files: written atomically, read back for rendering, and their shapes as typed classes.

model/typed.py is the machinery (a record kind is a frozen dataclass; reading checks every key and
migrates old schema versions); records/common.py the parts every kind shares (the machine);
records/scenario_record.py the load scenarios' record; each other suite's record kind has its module beside them.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.model.paths import REPO_ROOT
from harness.model.records.kinds import record_class
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.typed import Typed

RESULTS_DIR = REPO_ROOT / "results"
SCRATCH_RESULTS_DIR = REPO_ROOT / "build" / "results"  # quick, partial or shortened runs: never the published record
MULTI_PROCESS_DIR_NAME = "multi-process"  # results/multi-process/: records that are not load-tool scenarios


def write_json_atomic(path: Path, data: Any) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over the target.

    A reader (or a crash) sees the old file or the new one, never half of one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            # mkstemp makes the file private (0600); a record is for everyone to read, like any file we write.
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(handle.fileno(), 0o666 & ~umask)
            json.dump(data, handle, indent=2, sort_keys=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def record_path(relative: str, partial: bool, out_dir: Path | None) -> Path:
    """Where a suite writes its record (`relative`, e.g. "hostile.json" or "multi-process/restart.json"): under
    out_dir if given, else results/ for a complete full run and build/results/ for a quick or partial one."""
    return (out_dir or (SCRATCH_RESULTS_DIR if partial else RESULTS_DIR)) / relative


def results_path(scenario_id: str, results_dir: Path = RESULTS_DIR) -> Path:
    return results_dir / f"{scenario_id}.json"


def rerun_dir(results_dir: Path = RESULTS_DIR) -> Path:
    """Where a second complete run of every scenario goes, to be compared with the first (same format)."""
    return results_dir / "rerun"


def write_record_atomic(path: Path, record: Typed) -> None:
    """A typed record written as JSON, atomically (write_json_atomic)."""
    write_json_atomic(path, record.to_json())


def load_scenario_records(results_dir: Path = RESULTS_DIR) -> dict[str, ScenarioRecord]:
    """Every scenario's record in a results directory, typed, by scenario id; none if the directory is missing.

    Only the directory's own *.json files: the second run in results/rerun/ is not a scenario of results/, and
    the suites' own records there (results/hostile.json, conformance.json, streaming.json: they name their kind)
    are their renderers' to read. A record of the wrong shape or a newer schema is a RecordShapeError naming it.
    """
    records = {}
    for path in sorted(results_dir.glob("*.json")):  # not rglob: see above
        data = json.loads(path.read_text(encoding="utf-8"))
        if record_class(data) is not ScenarioRecord:
            continue
        record = ScenarioRecord.from_json(data, str(path))
        records[record.id] = record
    return records
