"""One exchange of exact bytes: send them on a fresh connection, read every answer, see whether it closes.

The conformance suite (suites/conformance/) sends each case's bytes through here. Sending is
raw_http's (no Nagle, the bytes as given, never a half-close: whether the server closes is what we
watch); framing what came back is raw_http.responses. Reading stops at the server's close or
reset, `quiet` seconds after the last byte once an answer is complete (time enough for a second
answer to a hidden request to follow), or at `bound`.

Known limits: a server that answers a hidden request more than `quiet` seconds after the first
answer is seen as answering once; the suite starts designs without a simulated delay, so their
answers come within milliseconds.
"""

from __future__ import annotations

import re
import socket
import time
from dataclasses import asdict, dataclass

from harness.clients import raw_http

OTHER_VERSION = re.compile(rb"HTTP/(?!1\.[01] )(\d\.\d) (?=\d{3})")  # a status line claiming a version not 1.0/1.1


@dataclass(frozen=True)
class Exchange:
    """What came back for one case's bytes."""

    statuses: list[int]  # final answers, in order
    interim: list[int]  # 1xx answers
    ended: str  # "eof", "reset", or "open" (still open when we stopped reading)
    http_09: bool  # bytes came that are not a status line
    received: int  # bytes received
    head: str  # the first answer's status line, for the record
    error: str = ""
    other_version: str = ""  # "HTTP/1.2" when a status line claims a version other than 1.0 and 1.1

    def to_json(self) -> dict:
        """The fields that say something: an empty error, version or interim list and a false http_09 are left out
        (thousands of answers in one record); no body is ever kept, only the first status line and the length."""
        return {key: value for key, value in asdict(self).items()
                if key in ("statuses", "ended", "received", "head") or value not in ("", [], False)}


def exchange(host: str, port: int, data: bytes, bound: float, quiet: float) -> Exchange:
    """Send `data` on a new connection; read until close, `quiet` s of silence after an answer, or `bound`."""
    try:
        conn = raw_http.connect(host, port, timeout=bound)
    except OSError as error:
        return Exchange([], [], "refused", False, 0, "", f"{type(error).__name__}: {error}")
    with conn:
        started = time.monotonic()
        try:
            conn.sendall(data)
        except OSError as error:  # the server closed while we were still sending (a refusal mid-request)
            received, ended = drain(conn, started + bound)
            return summarise(received, ended or "reset", f"send: {type(error).__name__}")
        received, ended = read_until_quiet(conn, started + bound, quiet)
    return summarise(received, ended)


def read_until_quiet(conn: socket.socket, deadline: float, quiet: float) -> tuple[bytes, str]:
    """Read until EOF/reset, the deadline, or `quiet` s without a byte once at least one answer is complete."""
    received = bytearray()
    while True:
        now = time.monotonic()
        complete = bool(received) and raw_http.responses(bytes(received))[1]
        wait = min(deadline - now, quiet) if complete else deadline - now
        if wait <= 0:
            return bytes(received), "open"
        conn.settimeout(wait)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            if complete or time.monotonic() >= deadline:
                return bytes(received), "open"
            continue
        except OSError:
            return bytes(received), "reset"
        if not chunk:
            return bytes(received), "eof"
        received += chunk


def drain(conn: socket.socket, deadline: float) -> tuple[bytes, str]:
    """After a failed send: whatever answer the server managed to write before closing."""
    received = bytearray()
    while time.monotonic() < deadline:
        conn.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            return bytes(received), "open"
        except OSError:
            return bytes(received), "reset"
        if not chunk:
            return bytes(received), "eof"
        received += chunk
    return bytes(received), "open"


def summarise(received: bytes, ended: str, error: str = "") -> Exchange:
    """Statuses out of the bytes (raw_http.responses), 1xx set apart; 0 there means an HTTP/0.9 answer."""
    if not received:
        return Exchange([], [], ended, False, 0, "", error)
    head = received.split(b"\r\n", 1)[0][:80].decode("latin-1")
    claimed = OTHER_VERSION.match(received)
    if claimed:  # read its statuses as HTTP/1.1's; the claim itself is recorded and judged
        received = OTHER_VERSION.sub(b"HTTP/1.1 ", received)
    statuses, _ = raw_http.responses(received)
    http_09 = statuses[:1] == [0]
    return Exchange([status for status in statuses if status >= 200],
                    [status for status in statuses if 100 <= status < 200], ended, http_09, len(received), head,
                    error, "HTTP/" + claimed.group(1).decode() if claimed else "")
