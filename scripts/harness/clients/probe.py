"""Talk to a server directly and check that its answer is correct, before any load.

A design that answers wrongly is not measured: a fast wrong answer is not a
result. The checks are those of the server contract: status 200, a Content-Length
that matches the body, Content-Type, Date, Connection: close, the page itself.

Two ways to read an answer. In close mode (`exchange`, `get`) the server closes
after its answer and we read until it does: that is our designs' contract, and
the naive variants send no Content-Length to read by. In keep-alive mode
(`exchange_on_one_connection`, `verify_http_keep_alive`) the connection stays
open, so each answer is framed by its Content-Length; a server that closes
before the last answer was asked for did not keep the connection alive.
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


class ClosedEarlyError(ValueError):
    """The server closed the connection before a whole answer (or before the next request was answered)."""


class UnframedResponseError(ValueError):
    """An answer whose head says no Content-Length: only the close can end it."""


def split_response(buffer: bytes) -> tuple[RawResponse, bytes] | None:
    """The first answer in `buffer`, framed by its Content-Length, and the bytes after it; None while incomplete.

    The one place the harness frames an answer by its Content-Length: UnframedResponseError when
    the head has none, ValueError when it is malformed.
    """
    head, separator, after = buffer.partition(b"\r\n\r\n")
    if not separator:
        return None
    parsed = parse_response(head + separator)  # the head alone: the body is framed below
    length = parsed.headers.get("content-length", "")
    if not length.isdigit():
        raise UnframedResponseError(f"no Content-Length to frame the answer by: {buffer[:80]!r}")
    if len(after) < int(length):
        return None
    body = after[:int(length)]
    return RawResponse(parsed.status, parsed.reason, parsed.headers, body, head + separator + body), \
        after[int(length):]


class ResponseReader:
    """Read answers one after another from one connection, each framed by its Content-Length."""

    def __init__(self, conn: socket.socket, deadline: float) -> None:
        self.conn, self.deadline, self.buffer = conn, deadline, b""

    def _fill(self) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no whole answer before the deadline")
        self.conn.settimeout(remaining)
        try:
            chunk = self.conn.recv(65536)
        except ConnectionResetError as error:
            raise ClosedEarlyError(f"the server reset the connection ({len(self.buffer)} bytes of an answer read)") \
                from error
        if not chunk:
            raise ClosedEarlyError(f"the server closed the connection ({len(self.buffer)} bytes of an answer read)")
        self.buffer += chunk

    def next_response(self) -> bytes:
        """The next whole answer: its head, then exactly Content-Length bytes of body."""
        while (framed := split_response(self.buffer)) is None:
            self._fill()
        response, self.buffer = framed
        return response.raw


def exchange_on_one_connection(host: str, port: int, requests: list[bytes], pipelined: bool = False,
                               timeout: float = READ_TIMEOUT_SECONDS) -> list[bytes]:
    """Send several requests on one connection and read each answer by its Content-Length.

    One after another (each sent once the previous answer is in), or pipelined: all sent in
    one write before any answer is read. Raises ClosedEarlyError when the server closes first.
    """
    deadline = time.monotonic() + timeout
    answers = []
    with socket.create_connection((host, port), timeout=timeout) as conn:
        reader = ResponseReader(conn, deadline)
        if pipelined:
            conn.sendall(b"".join(requests))
            return [reader.next_response() for _ in requests]
        for number, request in enumerate(requests, 1):
            try:
                conn.sendall(request)
            except (BrokenPipeError, ConnectionResetError) as error:
                raise ClosedEarlyError(f"the server closed the connection before request {number}") from error
            try:
                answers.append(reader.next_response())
            except ClosedEarlyError as error:
                raise ClosedEarlyError(f"after answer {number - 1}: {error}") from None
    return answers


def get(host: str, port: int, path: str = "/", extra_headers: str = "", timeout: float = READ_TIMEOUT_SECONDS) -> RawResponse:
    """One plain GET asking the server to close after it (a keep-alive server otherwise keeps it open), parsed."""
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n{extra_headers}\r\n".encode("ascii")
    return parse_response(exchange(host, port, request, timeout))


def http_problems(response: RawResponse, keep_alive: bool = False) -> list[str]:
    """Everything wrong with an answer to GET /, by the server contract; empty when correct.

    In close mode the answer must say Connection: close; asked to keep alive, it must not.
    """
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
    closes = response.headers.get("connection", "").lower() == "close"
    if keep_alive and closes:
        problems.append("Connection: close, asked to keep alive")
    elif not keep_alive and not closes:
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


KEEP_ALIVE_REQUESTS = 3  # answers one connection must carry before a design counts as keeping alive


def keep_alive_request(host: str, port: int, http_version: str) -> bytes:
    """GET / asking to keep the connection: HTTP/1.1 keeps it by default, HTTP/1.0 must ask (as ab -k does)."""
    ask = "Connection: keep-alive\r\n" if http_version == "HTTP/1.0" else ""
    return f"GET / {http_version}\r\nHost: {host}:{port}\r\n{ask}\r\n".encode("ascii")


def verify_http_keep_alive(host: str, port: int, requests: int = KEEP_ALIVE_REQUESTS, pipelined: bool = False,
                           http_version: str = "HTTP/1.1") -> tuple[bool, list[str]]:
    """Ask for / `requests` times on one connection, without Connection: close.

    Returns whether the server closed (the connection, before the last answer, or by saying
    Connection: close) and everything wrong: each answer must be whole (read by its Content-Length)
    and keep the contract, except that it must not say Connection: close. Asked in HTTP/1.0 (as ab -k
    asks), each answer must also say Connection: keep-alive, or an HTTP/1.0 client closes it.
    """
    request = keep_alive_request(host, port, http_version)
    mode = f"{http_version}, {'pipelined' if pipelined else 'one after another'}"
    try:
        answers = exchange_on_one_connection(host, port, [request] * requests, pipelined=pipelined)
    except ClosedEarlyError as error:
        return True, [f"did not keep the connection open for {requests} requests ({mode}): {error}"]
    except (OSError, ValueError) as error:
        return False, [f"could not fetch / {requests} times on one connection ({mode}): {error}"]
    problems, closed = [], False
    for number, answer in enumerate(answers, 1):
        response = parse_response(answer)
        connection = response.headers.get("connection", "").lower()
        found = http_problems(response, keep_alive=True)
        if http_version == "HTTP/1.0" and connection != "keep-alive" and connection != "close":
            found.append("no Connection: keep-alive in answer to an HTTP/1.0 keep-alive request")
        closed = closed or connection == "close" or (http_version == "HTTP/1.0" and connection != "keep-alive")
        problems += [f"answer {number} of {requests}: {problem}" for problem in found]
    return closed, problems


def verify_naive_http(host: str, port: int) -> list[str]:
    """The lighter check for the deliberately naive variants: a 200 carrying the page, read until close.

    They break the contract on purpose (no Date, a single recv), so only what a
    reader would see in a browser is checked; tests/servers/test_async101_naive.py proves
    what breaks.
    """
    try:
        response = get(host, port)
    except (OSError, ValueError) as error:
        return [f"could not fetch /: {error}"]
    problems = [] if response.status == 200 else [f"status {response.status}, expected 200"]
    return problems + ([] if b"<h1>" in response.body else ["the body is not the hello page"])
