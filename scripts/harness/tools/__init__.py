"""Load tools: each builds its command line and parses what the tool emits.

A tool adapter turns (url, concurrency, settings) into one run record with the
same keys whatever the tool: requests_per_second, complete, failed, latency_ms
(mean, p50, p90, p99, max), duration_s, plus the tool's own extras.
"""

from __future__ import annotations

import shutil
from typing import Protocol

from harness.tools.ab import ApacheBench


class ToolMissingError(RuntimeError):
    """A load tool is not installed; the message says how to install it."""


class LoadTool(Protocol):
    name: str
    executable: str
    install_hint: str

    def version(self) -> str: ...


TOOLS: dict[str, LoadTool] = {tool.name: tool for tool in (ApacheBench(),)}


def require_tool(name: str) -> LoadTool:
    """The adapter for `name`, after checking its executable is on PATH."""
    if name not in TOOLS:
        raise ToolMissingError(f"no adapter for load tool {name!r}; known: {', '.join(sorted(TOOLS))}")
    tool = TOOLS[name]
    if shutil.which(tool.executable) is None:
        raise ToolMissingError(f"{tool.executable} is not installed (needed by {name}); install it with: {tool.install_hint}")
    return tool
