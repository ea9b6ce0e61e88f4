"""Every record kind, by the `kind` (or, in older suites, `suite`) its JSON names: the one list of typed record
classes. tests/harness/model/test_typed_records.py reads every file in results/ through the class its data names here."""

from __future__ import annotations

from typing import Any

from harness.model.records.conformance_record import ConformanceRecord
from harness.model.records.deployment_records import OverloadRecord, RaceRecord
from harness.model.records.gil_dependencies_record import FreeThreadedBuildRecord, GilDependenciesRecord
from harness.model.records.hostile_record import EmfileSettingsRecord, HostileRecord
from harness.model.records.how_fast_records import ProfileRecord, StepsRecord
from harness.model.records.idle_record import IdleRecord
from harness.model.records.instructions_record import InstructionsRecord
from harness.model.records.multi_process_records import BalanceRecord, InFlightRecord, RestartRecord
from harness.model.records.recipe_records import CheckRecord, QuotaRecord
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.records.streaming_record import StreamingRecord
from harness.model.typed import Typed

# One line per kind: "its kind name": its class (the scenario's record has no kind name: record_class below).
RECORD_KINDS: dict[str, type[Typed]] = {
    "balance": BalanceRecord,
    "restart": RestartRecord,
    "restart-in-flight": InFlightRecord,
    "overload": OverloadRecord,
    "proxy-race": RaceRecord,
    "recipe-check": CheckRecord,
    "cpu-quota": QuotaRecord,
    "conformance": ConformanceRecord,
    "hostile": HostileRecord,
    "emfile-settings": EmfileSettingsRecord,
    "how-fast-steps": StepsRecord,
    "profile": ProfileRecord,
    "instructions": InstructionsRecord,
    "idle-connections": IdleRecord,
    "streaming": StreamingRecord,
    "gil-dependencies": GilDependenciesRecord,
    "free-threaded-build": FreeThreadedBuildRecord,
}


def record_class(data: dict[str, Any]) -> type[Typed]:
    """The typed class a record's JSON data is read with: its `kind` (or `suite`), or else a scenario's record."""
    name = data.get("kind") or data.get("suite")
    if name is None and "design" in data and "connections_asked" in data:
        name = "idle-connections"  # records of the idle suite written before they named their kind
    if name is None:
        return ScenarioRecord
    if name not in RECORD_KINDS:
        raise KeyError(f"no record class for kind {name!r} (known: {', '.join(sorted(RECORD_KINDS)) or 'none'})")
    return RECORD_KINDS[name]
