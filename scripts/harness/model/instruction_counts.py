"""Instructions per request: the arithmetic and the record, shared by the suite and its renderer.

Theory of operation: a server run under valgrind's callgrind counts every instruction it executes
in user space (callgrind's event Ir, "instructions read"). A run that answers N requests counts
start-up + N x (one request) + shutdown. Two runs of the same server, with N1 and N2 requests,
differ by (N2 - N1) requests and nothing else, so

    instructions per request = (total(N2) - total(N1)) / (N2 - N1)

and start-up and shutdown cancel out. The whole pair is measured twice; the two results must agree
within AGREEMENT (a difference is shown, never hidden). The suite is suites/instructions.py
(`bench.py instructions`); render/instructions_tables.py draws the tables.

Known limits: user space only (callgrind does not see the kernel, so the system calls' own work,
a large share of a hello-world request, is not in the count); an instruction is not a unit of time
(a cache miss costs more than an add), so this is a steady measure of work done, not of speed.
"""

from __future__ import annotations

from pathlib import Path

RECORD = Path("instructions") / "instructions.json"  # under results/; a subdirectory, so not read as a scenario
AGREEMENT = 0.02  # the two measurements of one row must agree within 2%


def per_request(total_low: int, total_high: int, requests_low: int, requests_high: int) -> float:
    """(total(N2) - total(N1)) / (N2 - N1): what one more request costs, start-up and shutdown cancelled."""
    if requests_high <= requests_low:
        raise ValueError(f"the second run must answer more requests than the first ({requests_low} -> {requests_high})")
    if total_high <= total_low:
        raise ValueError(f"the run with more requests counted fewer instructions ({total_low:,} -> {total_high:,})")
    return (total_high - total_low) / (requests_high - requests_low)


def relative_difference(first: float, second: float) -> float:
    """|second - first| as a share of their mean: how far two measurements of one thing disagree."""
    return abs(second - first) / ((first + second) / 2)


def agree(values: list[float], within: float = AGREEMENT) -> bool:
    """Whether every measurement lies within `within` of every other (relative to their mean)."""
    return all(relative_difference(a, b) <= within for a in values for b in values)
