"""Does a server answer pipelined requests, correctly and in order?

HTTP/1.1 lets a client send its next requests on a kept-alive connection without
waiting for the answers; the server must answer them in the order they came.
The check: send `count` GET requests in one write (one TCP segment on loopback),
each with a distinct path, the last one asking to close, then read until the
server closes and split what arrived into responses by their Content-Length.
Every response must be a 200 carrying the page, and there must be exactly `count`
of them. Because every design answers every path with the same page, order is
checked by request count and framing: a server that answered only the first
request, dropped one, or ran two answers together fails. A server that does not
keep alive at all answers the first and closes: 1 of `count`.

Known limits: responses must carry Content-Length (chunked answers are reported
as a problem, not parsed); the whole exchange is bounded by `timeout`.
"""

from __future__ import annotations

from harness.clients import probe

DEFAULT_COUNT = 10


def pipelined_requests(host: str, port: int, count: int) -> bytes:
    """`count` GETs back to back, the last with Connection: close so the server ends the exchange."""
    requests = []
    for index in range(count):
        closing = "Connection: close\r\n" if index == count - 1 else ""
        requests.append(f"GET /?pipelined={index} HTTP/1.1\r\nHost: {host}:{port}\r\n{closing}\r\n")
    return "".join(requests).encode("ascii")


def split_responses(raw: bytes) -> tuple[list[probe.RawResponse], bytes]:
    """Consecutive Content-Length-framed responses, and whatever bytes could not be framed."""
    responses = []
    rest = raw
    while rest:
        try:
            framed = probe.split_response(rest)
        except probe.UnframedResponseError:
            break  # a chunked answer, or one ended by the close: reported as bytes left over
        if framed is None:
            break
        response, rest = framed
        responses.append(response)
    return responses, rest


def pipelining_problems(raw: bytes, count: int) -> list[str]:
    """What is wrong with the bytes answering `count` pipelined GETs; empty when all were answered in order."""
    try:
        responses, leftover = split_responses(raw)
    except ValueError as error:
        return [f"unreadable answer: {error}"]
    problems = []
    if len(responses) != count:
        problems.append(f"{len(responses)} framed responses to {count} pipelined requests")
    for index, response in enumerate(responses):
        if response.status != 200 or b"<h1>" not in response.body:
            problems.append(f"response {index + 1} is status {response.status}, not 200 with the page")
    if leftover:
        problems.append(f"{len(leftover)} bytes after the last framed response")
    return problems


def verify_pipelining(host: str, port: int, count: int = DEFAULT_COUNT, timeout: float = 10.0) -> list[str]:
    """Send `count` pipelined GETs in one write; list what is wrong with the answers (empty when correct)."""
    try:
        raw = probe.exchange(host, port, pipelined_requests(host, port, count), timeout=timeout)
    except OSError as error:
        return [f"the exchange failed: {error!r}"]
    return pipelining_problems(raw, count)
