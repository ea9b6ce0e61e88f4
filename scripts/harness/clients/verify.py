"""Before measuring: refuse a design that cannot speak what the scenario asks, check its answer, prime it.

A design that answers wrongly is not measured (a fast wrong answer is not a result).
What is checked follows the design's kind (the HTTP contract, the naive variants'
lighter check, the echo protocol) and what the scenario asks: with `keep_alive`,
the design must say `keep_alive = true` in its catalogue entry and then prove it,
answering several requests on one connection (read by Content-Length, never until
close); with `pipelining`, the same requests sent in one write. A design that does
not is refused for that scenario, never measured as if it had kept the connection.
The primer reads its answers the same way the scenario's tool will.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.clients import echo_probe, probe, sse_client
from harness.model.catalogue import Design

PRIMER_REQUESTS = 3
VERIFIERS: dict[str, Callable[[str, int], list[str]]] = {
    "http": probe.verify_http, "naive-http": probe.verify_naive_http, "echo": echo_probe.verify_echo,
    "stream": sse_client.verify_stream}
HTTP_KINDS = {"http", "naive-http"}  # primed before measuring; an echo connection costs nothing to warm up


@dataclass
class Verification:
    """The outcome of the checks before measuring: what is wrong, and what was proven (for the record)."""

    problems: list[str] = field(default_factory=list)
    refused: bool = False  # the design cannot do what the scenario asks (not merely a wrong answer)
    proven: dict[str, Any] = field(default_factory=dict)


def refusal(design: Design, asked_by: str, keep_alive: bool, pipelining: bool = False) -> str | None:
    """Why the design must not be measured in this mode at all (its catalogue entry says so), or None.

    `asked_by` names what asks, for the message: "scenario 'keep-alive'", or a command.
    """
    missing = [key for key, asked in (("keep_alive", keep_alive), ("pipelining", pipelining))
               if asked and not getattr(design, key)]
    if not missing:
        return None
    return (f"refused: {asked_by} asks for {' and '.join(missing)}, and design {design.name!r} "
            f"does not declare {' and '.join(f'{key} = true' for key in missing)} in its catalogue entry")


def verify(design: Design, host: str, port: int, keep_alive: bool = False, pipelining: bool = False,
           http_version: str = "HTTP/1.1") -> Verification:
    """Check the design's answer in the mode the scenario asks (close, keep-alive, pipelined).

    `http_version` is how the scenario's tool asks to keep alive (its adapter's keep_alive_version):
    HTTP/1.1 (hey, wrk) or HTTP/1.0 with Connection: keep-alive (ab -k).
    """
    if not keep_alive and not pipelining:
        problems = VERIFIERS[design.kind](host, port)
        return Verification(problems, proven={} if problems else {"answer": True})
    if design.kind not in HTTP_KINDS:
        return Verification([f"refused: a {design.kind} design has no HTTP keep-alive"], refused=True)
    verification = Verification()
    checks = ([("keep_alive", False)] if keep_alive else []) + ([("pipelining", True)] if pipelining else [])
    for name, pipelined in checks:
        closed, problems = probe.verify_http_keep_alive(host, port, pipelined=pipelined, http_version=http_version)
        if problems:
            # Closing when asked to keep alive is not a wrong answer but the wrong mode: refused.
            prefix = f"refused: design {design.name!r} closes when asked for {name}: " if closed else ""
            return Verification([prefix + problem for problem in problems], refused=closed,
                                proven=verification.proven)
        verification.proven.update({"answer": True, name: True, f"{name}_requests": probe.KEEP_ALIVE_REQUESTS,
                                    "http_version": http_version})
    return verification


def prime(host: str, port: int, keep_alive: bool = False) -> None:
    """A few requests before measuring, so first-request costs (imports, caches) are not timed.

    Sent at once, not one after another: a concurrent design answers them in one simulated call
    (0.1 s, not 0.3 s, before each of a sweep's levels), and a sequential one still answers them
    only after any requests left queued by the previous level. In a keep-alive scenario each answer
    is read by its Content-Length (the server keeps the connection: reading until close would wait
    for its idle timeout). An error in any of them is raised.
    """
    # Without keep-alive, ask to close: a design that can keep alive would otherwise hold the connection.
    close = "" if keep_alive else "Connection: close\r\n"
    request = f"GET / HTTP/1.1\r\nHost: {host}\r\n{close}\r\n".encode()

    def ask() -> object:
        if keep_alive:
            return probe.exchange_on_one_connection(host, port, [request], timeout=10)
        return probe.exchange(host, port, request, timeout=10)

    with concurrent.futures.ThreadPoolExecutor(PRIMER_REQUESTS) as pool:
        answers = [pool.submit(ask) for _ in range(PRIMER_REQUESTS)]
    for answer in answers:
        answer.result()
