"""Load tools: each adapter builds its command line and parses what the tool emits.

An adapter module defines `TOOL`, an object with `name`, `executable`,
`install_hint`, `reads` (the scenario settings it reads: see settings.py),
`keep_alive_version` (how it asks to keep a connection, "HTTP/1.1" or "HTTP/1.0";
None if it never does), `version()`, `command(url, concurrency, settings, workdir)` (the
command line it will run, printed by the runner before the run) and
`run(url, concurrency, settings, workdir, cpu)`.
`run` returns one record with the same keys whatever the tool:
requests_per_second, complete, failed, latency_ms (mean, p50, p90, p99, max),
duration_s, keep_alive, command, exit_code, error; plus the tool's own extras.
"""

from __future__ import annotations

import importlib
import importlib.util
import shutil
from pathlib import Path
from typing import Any, Protocol

from harness.model.settings import ScenarioSettings


class ToolMissingError(RuntimeError):
    """A load tool is not installed; the message says how to install it."""


class LoadTool(Protocol):
    name: str
    executable: str
    install_hint: str
    reads: frozenset[str]
    keep_alive_version: str | None

    def version(self) -> str: ...

    def command(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path) -> list[str]: ...

    def run(self, url: str, concurrency: int, settings: ScenarioSettings, workdir: Path,
            cpu: str | None) -> dict[str, Any]: ...


def _discover() -> dict[str, LoadTool]:
    """Every adapter module in this package that defines TOOL."""
    tools: dict[str, LoadTool] = {}
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{path.stem}")
        tool = getattr(module, "TOOL", None)
        if tool is not None:
            tools[tool.name] = tool
    return tools


TOOLS = _discover()


def require_tool(name: str) -> LoadTool:
    """The adapter for `name`, after checking its executable is on PATH."""
    if name not in TOOLS:
        raise ToolMissingError(f"no adapter for load tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    tool = TOOLS[name]
    if shutil.which(tool.executable) is None:
        raise ToolMissingError(f"{tool.executable} is not installed (needed by {name}); install it with: {tool.install_hint}")
    return tool
