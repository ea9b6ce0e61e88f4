"""Production-shaped request heads, as clients/tools/wrk_production_heads.lua sends them, for Python clients.

The templates live in clients/tools/production_heads.txt (read by both); `head(n, host, path)`
fills the n-th request's placeholders exactly as the Lua script does for wrk's thread 0, so the
instruction counts (suites/instructions.py) send the same bytes as the wrk scenario.
"""

from __future__ import annotations

import re
from pathlib import Path

TEMPLATES_FILE = Path(__file__).parent / "tools" / "production_heads.txt"
PLACEHOLDER = re.compile(r"\$[A-Z_]+")


def templates(path: Path = TEMPLATES_FILE) -> list[tuple[str, str]]:
    """(name, head with placeholders) for each template, in order; each head's lines end in CRLF, then a blank."""
    found: list[tuple[str, list[str]]] = []
    for line in path.read_text(encoding="ascii").splitlines():
        if line.startswith("=== "):
            found.append((line[4:], []))
        elif found:
            found[-1][1].append(line)
        elif line and not line.startswith("#"):
            raise ValueError(f"{path}: text before the first template: {line!r}")
    heads = []
    for name, lines in found:
        while lines and not lines[-1]:
            lines.pop()
        heads.append((name, "\r\n".join(lines) + "\r\n\r\n"))
    return heads


def values(n: int, thread: int = 0) -> dict[str, str]:
    """The per-request fields of request n (string.format in the Lua script, the same formats)."""
    return {
        "$REQUEST_ID": f"{thread:08x}-0000-4000-8000-{n:012x}",
        "$TRACE_ID": f"4bf92f3577b34da6{thread:04x}{n:012x}",
        "$SPAN_ID": f"{thread:04x}{n:012x}",
        "$CLIENT_IP": f"10.{(thread * 64 + n // 65536) % 256}.{n // 256 % 256}.{n % 256}",
        "$SESSION": f"k7{thread:04x}{n:012x}",
    }


class ProductionHeads:
    """The n-th production-shaped head for one host and path, the templates taken in turn."""

    def __init__(self, host: str, path: str = "/") -> None:
        self.heads = [head.replace("$HOST", host).replace("$PATH", path) for _, head in templates()]

    def head(self, n: int, thread: int = 0) -> bytes:
        fields = values(n, thread)
        text = self.heads[n % len(self.heads)]
        return PLACEHOLDER.sub(lambda match: fields.get(match.group(0), match.group(0)), text).encode("ascii")
