"""Typed scenario settings for tests that give a tool or the plan only the few settings they exercise."""

from __future__ import annotations

from typing import Any

from harness.model.settings import SETTINGS, ScenarioSettings


def settings_of(**given: Any) -> ScenarioSettings:
    """ScenarioSettings with `given`; a required setting not given is None (unset: a test of one tool's command
    needs no scenario around it), every other setting its default."""
    unset = {name: None for name, setting in SETTINGS.items() if setting.required and name not in given}
    return ScenarioSettings(**unset, **given)
