"""Made-up load scenario records for the renderers' tests, read through their class like the real ones.

A test that needs a record with just these designs and runs builds it here: every key a real record has is
filled in from a real one (tests/fixtures/render/async-101.json: its machine, its times), the test's own keys
replace them, and the whole is read by ScenarioRecord.from_json, so a fake with a misspelt or missing key
fails where it is made, not as a silent blank in a table.
"""

from __future__ import annotations

import json
from typing import Any

from harness.model.paths import REPO_ROOT
from harness.model.records.scenario_record import ScenarioRecord

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "render"
BASE = FIXTURES / "async-101.json"


def fixture(name: str) -> dict[str, Any]:
    """A fixture's JSON, to change before it is read (its `fixture` key, a note on where it came from, left out)."""
    data = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    data.pop("fixture", None)
    return data


def typed(data: dict[str, Any]) -> ScenarioRecord:
    """The record the renderers read, checked by its class (a fake with a misspelt key fails here)."""
    return ScenarioRecord.from_json(data, "test record")


def fake_run(**keys: Any) -> dict[str, Any]:
    """One run's JSON: the keys every tool writes (a successful run, no numbers), then `keys`."""
    return {"tool": "wrk", "command": None, "concurrency": 1, "keep_alive": True, "exit_code": 0, "complete": None,
            "failed": 0, "requests_per_second": None, "duration_s": None, "latency_ms": None, "error": None} | keys


def fake_outcome(name: str, runs: list[dict[str, Any]], **keys: Any) -> dict[str, Any]:
    """One design's JSON in a record: measured ("ok") with these runs, then `keys`."""
    return {"name": name, "title": name, "model": "", "reproduces": [], "status": "ok", "problems": [],
            "stderr_tail": None, "server_exit_codes": [], "runs": runs} | keys


def fake_record_json(scenario: dict[str, Any], settings: dict[str, Any], designs: list[dict[str, Any]],
                     environment: dict[str, Any] | None = None, **keys: Any) -> dict[str, Any]:
    """A record's JSON: the scenario's names (id, title, ...; no article figures unless given) and `settings`
    (the run's, and the catalogue entry's beside its names), these designs, the base record's machine with
    `environment`'s keys in place of its own, and any other top-level `keys` (ceiling, started_utc, ...)."""
    base = json.loads(BASE.read_text(encoding="utf-8"))
    names = {key: base["scenario"][key] for key in ("id", "title", "article", "tool", "designs", "quick")}
    return {**base, "scenario": {**names, "published": {}, **scenario, **settings}, "settings": settings,
            "environment": {**base["environment"], **(environment or {})}, "designs": designs, "ceiling": None,
            **keys}


def fake_record(scenario: dict[str, Any], settings: dict[str, Any], designs: list[dict[str, Any]],
                environment: dict[str, Any] | None = None, **keys: Any) -> ScenarioRecord:
    """fake_record_json, read through ScenarioRecord (the way every renderer receives a record)."""
    data = fake_record_json(scenario, settings, designs, environment, **keys)
    return ScenarioRecord.from_json(data, f"fake record {scenario.get('id', '')}")
