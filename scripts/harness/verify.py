"""Before measuring: check a design's answer, and prime it.

A design that answers wrongly is not measured (a fast wrong answer is not a result).
The check depends on the design's kind: the HTTP contract, the naive variants' lighter
check, or the echo protocol.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable

from harness import echo_probe, probe
from harness.catalogue import Design

PRIMER_REQUESTS = 3
VERIFIERS: dict[str, Callable[[str, int], list[str]]] = {
    "http": probe.verify_http, "naive-http": probe.verify_naive_http, "echo": echo_probe.verify_echo}
HTTP_KINDS = {"http", "naive-http"}  # primed before measuring; an echo connection costs nothing to warm up


def verify(design: Design, host: str, port: int) -> list[str]:
    """Everything wrong with the design's answer (empty when it is right)."""
    return VERIFIERS[design.kind](host, port)


def prime(host: str, port: int) -> None:
    """A few requests before measuring, so first-request costs (imports, caches) are not timed.

    Sent at once, not one after another: a concurrent design answers them in one simulated call
    (0.1 s, not 0.3 s, before each of a sweep's levels), and a sequential one still answers them
    only after any requests left queued by the previous level. An error in any of them is raised.
    """
    request = f"GET / HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with concurrent.futures.ThreadPoolExecutor(PRIMER_REQUESTS) as pool:
        answers = [pool.submit(probe.exchange, host, port, request, timeout=10) for _ in range(PRIMER_REQUESTS)]
    for answer in answers:
        answer.result()
