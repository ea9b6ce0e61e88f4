"""The TCP-port and TIME_WAIT housekeeping of a run: one shared port per role, and the kernel's table.

Closed connections linger 60 s in TIME_WAIT, on the server's side (our servers close first).
There is at most one per client port: a new connection from the same client port to the same
server port replaces it. So on one server port their number is bounded by the client's
ephemeral port range (about 28,000), however long the run. That is why every design in a run
listens on the same port (run_port): a fresh port per design would add a port's worth per
design and fill the kernel's table (net.ipv4.tcp_max_tw_buckets) within a few designs. Past
that size the kernel stops keeping closed connections at all, and the next design would run
on a kernel that behaves differently; the records count such overflows per cell. The drain
wait below is the safety net: it waits only while the table is more than half full.
"""

from __future__ import annotations

import time
from pathlib import Path

from harness.model.catalogue import Design
from harness.system import processes

TIME_WAIT_MAX_BUCKETS_FILE = Path("/proc/sys/net/ipv4/tcp_max_tw_buckets")
TIME_WAIT_MAX_WAIT_SECONDS = 30.0

_run_ports: dict[str, int] = {}


def run_port(role: str = "server", design: Design | None = None) -> int:
    """The port every design in this run listens on (one per role), or a fresh one if it is taken."""
    if design is not None and not design.reuses_address:
        return processes.free_port()  # it could not bind a port that holds TIME_WAIT connections
    port = _run_ports.get(role)
    if port is not None:
        try:
            processes.ensure_port_free(port)
        except processes.PortBusyError:
            port = None  # something else listens there now
    if port is None:
        port = _run_ports[role] = processes.free_port()
    return port


def time_wait_sockets() -> int | None:
    """TCP sockets in TIME_WAIT right now (from /proc/net/sockstat), recorded beside each run."""
    try:
        with open("/proc/net/sockstat", encoding="ascii") as sockstat:
            for line in sockstat:
                if line.startswith("TCP:"):
                    fields = line.split()
                    return int(fields[fields.index("tw") + 1])
    except (OSError, ValueError):
        pass
    return None


def time_wait_overflows() -> int | None:
    """How often the kernel has found its TIME_WAIT table full since boot (TcpExt TCPTimeWaitOverflow)."""
    try:
        with open("/proc/net/netstat", encoding="ascii") as netstat:
            rows = [line.split() for line in netstat]
    except OSError:
        return None
    for names, values in zip(rows[::2], rows[1::2]):
        if names and names[0] == "TcpExt:" and "TCPTimeWaitOverflow" in names:
            return int(values[names.index("TCPTimeWaitOverflow")])
    return None


def time_wait_drain_threshold(max_buckets_file: Path = TIME_WAIT_MAX_BUCKETS_FILE) -> int:
    """Half the kernel's TIME_WAIT table (32,768 when the kernel does not say its size)."""
    try:
        return int(max_buckets_file.read_text(encoding="ascii")) // 2
    except (OSError, ValueError):
        return 32_768


def wait_for_time_wait_drain(below: int | None = None, max_wait: float = TIME_WAIT_MAX_WAIT_SECONDS) -> None:
    """Between designs, if the kernel's TIME_WAIT table is more than half full, let it empty (bounded wait)."""
    below = time_wait_drain_threshold() if below is None else below
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        count = time_wait_sockets()
        if count is None or count < below:
            return
        time.sleep(0.5)
