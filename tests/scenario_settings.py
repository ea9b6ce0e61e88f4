"""Typed scenario settings for tests that give a tool or the plan only the few settings they exercise, and the one
design table the catalogue tests write around what they change."""

from __future__ import annotations

from typing import Any

from harness.model.settings import ScenarioSettings


def settings_of(**given: Any) -> ScenarioSettings:
    """ScenarioSettings with `given`, read as a record's (leniently): a required setting not given, or given as None,
    is None (unset: a test of one tool's command needs no scenario around it), every other setting its default."""
    return ScenarioSettings.from_json({name: value for name, value in given.items() if value is not None},
                                      lenient=True)


# A whole `[[design]]` table, every required key, as a catalogue file holds it.
DESIGN_TABLE = """[[design]]
name = "sequential-sockets"
title = "t"
kind = "http"
file = "servers/sequential_sockets.py"
page = "designs/sequential-sockets.md"
model = "sequential"
concurrent = false
reproduces = []
"""
