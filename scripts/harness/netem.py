"""Run part of a benchmark over a slow network path: a private loopback with `tc netem` delay.

The model: the calling thread moves into a new network namespace (unshare
CLONE_NEWNET), whose loopback device starts down and isolated from the
machine's. We bring it up and give it a netem qdisc that holds every packet
`delay_ms` before delivering it. On loopback each packet crosses the device
once, so a delay of 35 ms each way makes a 70 ms round trip between a client
and a server that still talk over 127.0.0.1. Every process started from this
thread (servers, load tools) inherits the namespace; on leaving, the thread
returns to its original namespace and the private one disappears with the last
process in it, so nothing is left behind even when a run is interrupted.

Known limits: needs CAP_NET_ADMIN in the machine's user namespace (root, or
sudo in CI); a process that is not root gets NetemUnavailableError, which
bench.py reports as bad input (exit 2). Linux only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator

CLONE_NEWNET = 0x40000000  # <sched.h>
COMMAND_TIMEOUT_SECONDS = 10
QUEUE_LIMIT_PACKETS = 100_000  # netem's default queue of 1,000 packets would drop under load, not delay


class NetemUnavailableError(RuntimeError):
    """A private network namespace with a netem delay cannot be made here; the message says why."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, check=False)
    if done.returncode != 0:
        raise NetemUnavailableError(f"{' '.join(command)} failed: {done.stderr.strip()[:300]}")


def netem_commands(delay_ms: float) -> list[list[str]]:
    """What sets up the private loopback: bring it up, then delay every packet that leaves it."""
    return [["ip", "link", "set", "lo", "up"],
            ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", f"{delay_ms:g}ms",
             "limit", str(QUEUE_LIMIT_PACKETS)]]


@contextlib.contextmanager
def delayed_loopback(delay_ms: float) -> Iterator[None]:
    """Inside this block, the calling thread's 127.0.0.1 delays every packet by delay_ms (each way)."""
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise NetemUnavailableError(f"{tool} is not installed: sudo apt-get install iproute2")
    libc = _libc()
    original = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if libc.unshare(CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise NetemUnavailableError(f"cannot make a network namespace ({os.strerror(error)}): "
                                        "a scenario with loopback_delay_ms must run as root (sudo)")
        try:
            for command in netem_commands(delay_ms):
                _run(command)
            yield
        finally:
            if libc.setns(original, CLONE_NEWNET) != 0:  # back to the machine's network
                raise OSError(ctypes.get_errno(), "could not return to the original network namespace")
    finally:
        os.close(original)
