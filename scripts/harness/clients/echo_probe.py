"""Check an echo server's answer before any load: one sentence in, the same sentence upper-cased out.

The echo protocol (servers/*_echo.py): the client sends one line ending in
"\\n"; the server answers the line upper-cased, newline included, and closes.
A design that answers wrongly is not measured, as for HTTP (see probe.py).
"""

from __future__ import annotations

from harness.clients import probe

SENTENCE = b"the washing machine, the kettle and the toaster, all at once\n"
READ_TIMEOUT_SECONDS = 10.0


def echo_problems(sent: bytes, received: bytes) -> list[str]:
    """Everything wrong with `received` as the answer to `sent`; empty when correct."""
    expected = sent.upper()
    if received == expected:
        return []
    if not received:
        return ["no answer: the server closed without sending anything"]
    if not received.endswith(b"\n"):
        return [f"the answer does not end with a newline: {received[:80]!r}"]
    return [f"expected {expected!r}, got {received[:200]!r}"]


def verify_echo(host: str, port: int) -> list[str]:
    """Send one sentence, read until the server closes, list what is wrong (or why it could not be asked)."""
    try:
        received = probe.exchange(host, port, SENTENCE, timeout=READ_TIMEOUT_SECONDS)
    except OSError as error:
        return [f"could not talk to {host}:{port}: {error}"]
    return echo_problems(SENTENCE, received)
