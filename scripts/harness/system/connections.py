"""How many established TCP connections a listening port holds, read from the kernel's tables, and their peak.

A connection counts on the port it was accepted on: a row of /proc/net/tcp{,6} whose *local*
port is the listener's and whose state is ESTABLISHED. That is the server's side only (a client
socket to that port has an ephemeral local port), and it includes connections the kernel has
completed but the server has not yet accepted: they hold a place in its listen queue all the
same. Reading the tables needs no tool and no permission (`ss -Htn state established "( sport =
:PORT )"` counts the same rows). The hostile suite samples it during its slow-client cases, for
the server's port and, behind nginx, for nginx's: what each of them holds while the clients are slow.
A listening row's rx_queue is its accept queue: the idle case opens its connections in batches and
waits for it to empty before the next (listen_queue).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
ESTABLISHED = "01"  # the state column of /proc/net/tcp, in hex (include/net/tcp_states.h)
LISTEN = "0A"


def sockets_on(port: int, tables: tuple[Path, ...] = TCP_TABLES) -> list[list[str]]:
    """The rows of the tables, split into fields, whose local port is `port` (a missing table has none).

    Fields: sl local_address rem_address st tx_queue:rx_queue ...; an address is HEXIP:HEXPORT, the
    state is hex (01 established, 06 TIME_WAIT, 0A listening).
    """
    found = []
    for table in tables:
        try:
            rows = table.read_text(encoding="ascii").splitlines()[1:]
        except FileNotFoundError:
            continue
        found += [fields for fields in map(str.split, rows)
                  if len(fields) > 3 and int(fields[1].rsplit(":", 1)[1], 16) == port]
    return found


def established(port: int, tables: tuple[Path, ...] = TCP_TABLES) -> int:
    """Established connections whose local port is `port`, over IPv4 and IPv6."""
    return sum(1 for fields in sockets_on(port, tables) if fields[3] == ESTABLISHED)


def listen_queue(port: int, tables: tuple[Path, ...] = TCP_TABLES) -> int:
    """Connections the kernel completed on `port` that no process has accepted yet, over all its listeners.

    A listening row's rx_queue is its accept queue (the kernel's sk_ack_backlog); SO_REUSEPORT workers have a
    listener each, so they are summed.
    """
    queued = 0
    for table in tables:
        try:
            with table.open(encoding="ascii") as rows:
                next(rows, None)  # the header
                for fields in map(str.split, rows):
                    if fields[3] != LISTEN:
                        break  # the kernel lists every listener first: the rest (thousands, in a case) is not read
                    if int(fields[1].rsplit(":", 1)[1], 16) == port:
                        queued += int(fields[4].split(":")[1], 16)
        except FileNotFoundError:
            continue
    return queued


@dataclass
class PeakConnections:
    """The most established connections seen on each port while sampling, the count before it began, and
    connection-seconds (each sample's count times the time since the last: how long they were held, summed)."""

    before: dict[int, int]
    peak: dict[int, int] = field(default_factory=dict)
    connection_seconds: dict[int, float] = field(default_factory=dict)
    samples: int = 0


@contextmanager
def peak_connections(ports: list[int], every: float = 0.05) -> Iterator[PeakConnections]:
    """Sample every port's established connections every `every` s in a thread until the block ends."""
    result = PeakConnections({port: established(port) for port in ports})
    result.peak = dict(result.before)
    result.connection_seconds = {port: 0.0 for port in ports}
    done = threading.Event()

    def sample() -> None:
        last = time.monotonic()
        while not done.is_set():
            now = time.monotonic()
            for port in ports:
                count = established(port)
                result.peak[port] = max(result.peak[port], count)
                result.connection_seconds[port] += count * (now - last)
            last = now
            result.samples += 1
            done.wait(every)

    sampler = threading.Thread(target=sample, name="peak-connections", daemon=True)
    sampler.start()
    try:
        yield result
    finally:
        done.set()
        sampler.join(5)
        for port in ports:  # one last reading, so a block shorter than one period is still sampled
            result.peak[port] = max(result.peak[port], established(port))

