"""Talk to a server directly and check that its answer is correct, before any load.

A design that answers wrongly is not measured: a fast wrong answer is not a
result. The checks are those of the server contract: status 200, a Content-Length
that matches the body, Content-Type, Date, Connection: close, the page itself.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

READ_TIMEOUT_SECONDS = 10.0


@dataclass
class RawResponse:
    """A parsed HTTP response as the bytes arrived."""

    status: int
    reason: str
    headers: dict[str, str]  # lower-cased names; a repeated header keeps the last value
    body: bytes
    raw: bytes = field(repr=False)


def parse_response(raw: bytes) -> RawResponse:
    """Split a complete response into status, headers and body; ValueError when malformed."""
    head, separator, body = raw.partition(b"\r\n\r\n")
    if not separator:
        raise ValueError(f"no end of headers in {len(raw)} bytes: {raw[:80]!r}")
    status_line, *header_lines = head.decode("iso-8859-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise ValueError(f"malformed status line {status_line!r}")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return RawResponse(int(code), reason, headers, body, raw)


def exchange(host: str, port: int, payload: bytes | list[bytes], timeout: float = READ_TIMEOUT_SECONDS,
             pause: float = 0.0) -> bytes:
    """Send a request (optionally in pieces, `pause` seconds apart) and read until the server closes."""
    pieces = payload if isinstance(payload, list) else [payload]
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, port), timeout=timeout) as conn:
        for piece in pieces:
            conn.sendall(piece)
            if pause:
                time.sleep(pause)
        received = bytearray()
        while time.monotonic() < deadline:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
        return bytes(received)


def get(host: str, port: int, path: str = "/", extra_headers: str = "", timeout: float = READ_TIMEOUT_SECONDS) -> RawResponse:
    """One plain GET asking the server to close after it (a keep-alive server otherwise keeps it open), parsed."""
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n{extra_headers}\r\n".encode("ascii")
    return parse_response(exchange(host, port, request, timeout))


def http_problems(response: RawResponse) -> list[str]:
    """Everything wrong with an answer to GET /, by the server contract; empty when correct."""
    problems = []
    if response.status != 200:
        problems.append(f"status {response.status}, expected 200")
    length = response.headers.get("content-length")
    if length is None:
        problems.append("no Content-Length")
    elif not length.isdigit() or int(length) != len(response.body):
        problems.append(f"Content-Length {length} but the body has {len(response.body)} bytes")
    if not response.headers.get("content-type", "").startswith("text/html"):
        problems.append(f"Content-Type {response.headers.get('content-type')!r}, expected text/html")
    if "date" not in response.headers:
        problems.append("no Date header")
    if response.headers.get("connection", "").lower() != "close":
        problems.append("no Connection: close")
    if b"<h1>" not in response.body:
        problems.append("the body is not the hello page")
    return problems


def verify_http(host: str, port: int) -> list[str]:
    """Fetch / and list contract violations (or the error that prevented the fetch)."""
    try:
        return http_problems(get(host, port))
    except (OSError, ValueError) as error:
        return [f"could not fetch /: {error}"]


def verify_naive_http(host: str, port: int) -> list[str]:
    """The lighter check for the deliberately naive variants: a 200 carrying the page, read until close.

    They break the contract on purpose (no Date, a single recv), so only what a
    reader would see in a browser is checked; tests/test_async101_naive.py proves
    what breaks.
    """
    try:
        response = get(host, port)
    except (OSError, ValueError) as error:
        return [f"could not fetch /: {error}"]
    problems = [] if response.status == 200 else [f"status {response.status}, expected 200"]
    return problems + ([] if b"<h1>" in response.body else ["the body is not the hello page"])
