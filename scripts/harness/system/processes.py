"""Start processes in their own process group and always stop them.

Every process the harness starts (a server, a load tool) runs in a new session,
so stopping it means signalling the whole group: a prefork server's workers or
a shell's children cannot outlive it. Stopping is SIGTERM (to the group, or to the
main process alone for a design that asks), a grace period, then SIGKILL to the
group, and it runs in `finally` blocks, so Ctrl-C and failures leave no orphans.
group_counts reads a group's open descriptors and threads from /proc (the hostile suite's leak check).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

LOOPBACK = "127.0.0.1"
STOP_GRACE_SECONDS = 8.0  # servers promise to exit within 5 s of SIGTERM; a supervisor kills its workers at 6 s
READY_TIMEOUT_SECONDS = 15.0
STDERR_TAIL_BYTES = 2000


class PortBusyError(OSError):
    """The requested port is already taken on the loopback interface."""


class ServerStartError(RuntimeError):
    """A server exited or never listened; carries the tail of its stderr."""

    def __init__(self, message: str, stderr_tail: str) -> None:
        super().__init__(f"{message}\n--- stderr (tail) ---\n{stderr_tail}" if stderr_tail else message)
        self.stderr_tail = stderr_tail


def free_port(host: str = LOOPBACK) -> int:
    """Ask the kernel for a port nobody uses right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def ensure_port_free(port: int, host: str = LOOPBACK) -> None:
    """Raise PortBusyError naming the port when something already listens there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise PortBusyError(
                f"port {port} on {host} is busy ({error.strerror}); stop what uses it or pick another with --port"
            ) from error


@dataclass(frozen=True)
class CpuPinning:
    """The CPUs (taskset lists) the server and the load tool are held to; None: not pinned."""

    server: str | None
    load: str | None


NO_PINNING = CpuPinning(server=None, load=None)  # suites whose clients are not load tools, and machines of one CPU


def cpu_pinning(server_on_every_cpu: bool = False) -> CpuPinning:
    """Which CPUs the server and the load tool get: separate cores when there are two or more.

    With server_on_every_cpu (a scenario's `server_cpus = "all"`), the server may run on every CPU,
    the load tool's included: for CPU-bound work, where parallel processes are the point and the
    tool, at a few hundred requests a second, costs next to nothing.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2 and shutil.which("taskset"):
        server = ",".join(str(cpu) for cpu in cpus) if server_on_every_cpu else str(cpus[0])
        return CpuPinning(server=server, load=str(cpus[1]))
    return NO_PINNING


def pinned(command: Sequence[str], cpu: str | None) -> list[str]:
    """Prefix a command with taskset when a CPU is given."""
    return ["taskset", "-c", cpu, *command] if cpu is not None else list(command)


def tail(path: Path, limit: int = STDERR_TAIL_BYTES) -> str:
    """The last bytes of a log file, decoded leniently."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data[-limit:].decode("utf-8", errors="replace")


def send_stop_signal(process: subprocess.Popen[bytes], stop_signal: signal.Signals, whole_group: bool = True) -> None:
    """The stop signal to the server's whole process group, as Ctrl-C in a terminal and systemd's default
    KillMode=control-group deliver it, or (whole_group=False) to its main process alone, as `docker stop` and
    KillMode=mixed do, for a supervisor whose workers must hear it from the supervisor, not at the same time."""
    with contextlib.suppress(ProcessLookupError):
        if whole_group:
            os.killpg(process.pid, stop_signal)
        else:
            os.kill(process.pid, stop_signal)


def stop_process_group(process: subprocess.Popen[bytes], grace: float = STOP_GRACE_SECONDS,
                       stop_signal: signal.Signals = signal.SIGTERM, whole_group: bool = True) -> int:
    """Send the stop signal (SIGTERM unless told), wait, then SIGKILL the group; return the leader's exit code."""
    if process.poll() is None:
        send_stop_signal(process, stop_signal, whole_group)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # Children may outlive the leader (a worker that ignored SIGTERM): kill what is left.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.wait(timeout=grace)


def wait_until_listening(process: subprocess.Popen[bytes], port: int, stderr_path: Path,
                         host: str = LOOPBACK, timeout: float = READY_TIMEOUT_SECONDS) -> None:
    """Poll until the port accepts connections; fail early if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerStartError(f"exited with code {process.returncode} before listening on port {port}",
                                   tail(stderr_path))
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise ServerStartError(f"did not listen on {host}:{port} within {timeout:.0f} s", tail(stderr_path))


@dataclass
class RunningServer:
    """A started server: where it listens and where its output goes."""

    process: subprocess.Popen[bytes]
    host: str
    port: int
    stdout_path: Path
    stderr_path: Path
    command: list[str]  # exactly what was started (with taskset when pinned), to re-run it by hand
    exit_code: int | None = None

    def stderr_tail(self) -> str:
        return tail(self.stderr_path)

    def alive(self) -> bool:
        return self.process.poll() is None


@contextlib.contextmanager
def running_server(command: Sequence[str], port: int, log_dir: Path, host: str = LOOPBACK,
                   cpu: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None,
                   stop_signal: signal.Signals = signal.SIGTERM, signal_whole_group: bool = True,
                   ready_timeout: float = READY_TIMEOUT_SECONDS,
                   stop_grace: float = STOP_GRACE_SECONDS) -> Iterator[RunningServer]:
    """Start a server, wait until it listens, yield it, and always stop its whole group.

    ready_timeout and stop_grace are for a server that starts and stops slowly on purpose (under valgrind).
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    stdout_path, stderr_path = log_dir / "server.stdout", log_dir / "server.stderr"
    started = pinned(command, cpu)
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(started, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                   start_new_session=True, env=env, cwd=cwd)
    server = RunningServer(process, host, port, stdout_path, stderr_path, started)
    try:
        wait_until_listening(process, port, stderr_path, host, timeout=ready_timeout)
        yield server
    finally:
        server.exit_code = stop_process_group(process, grace=stop_grace, stop_signal=stop_signal,
                                              whole_group=signal_whole_group)


@dataclass(frozen=True)
class ToolUsage:
    """What a load tool's own process cost: its CPU time (the kernel's count, os.wait4: user and system, with the
    children it waited for) over the wall time from its start to its exit."""

    user_seconds: float
    system_seconds: float
    wall_seconds: float

    def as_record(self) -> dict[str, float]:
        """The run's `load_tool_resources` (model/records/scenario_record.LoadToolResources)."""
        return {"cpu_seconds": round(self.user_seconds + self.system_seconds, 3),
                "user_seconds": round(self.user_seconds, 3), "system_seconds": round(self.system_seconds, 3),
                "wall_seconds": round(self.wall_seconds, 3)}


class ToolRun(subprocess.CompletedProcess[str]):
    """A finished load tool: its exit code and output, and its own CPU time (`usage`; None if it was not reaped)."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str,
                 usage: ToolUsage | None = None) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.usage = usage


def run_tool(command: Sequence[str], timeout: float, cpu: str | None = None, cwd: Path | None = None) -> ToolRun:
    """Run a load tool in its own process group with a hard timeout; never leave it behind.

    The harness reaps the tool itself (os.wait4), so the record can say how much CPU the tool used: a tool at
    the limit of its core is what limited the run (model/limits.py). Its output is read by two threads meanwhile.
    """
    started = time.monotonic()
    process = subprocess.Popen(pinned(command, cpu), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, start_new_session=True, text=True, cwd=cwd)
    output: dict[str, str] = {}
    reaped: list[tuple[int, Any, float]] = []

    def drain(name: str, stream: IO[str]) -> None:
        with stream:
            output[name] = stream.read()

    def reap() -> None:
        _, status, usage = os.wait4(process.pid, 0)
        reaped.append((status, usage, time.monotonic() - started))

    threads = [threading.Thread(target=drain, args=(name, stream), daemon=True)
               for name, stream in (("stdout", process.stdout), ("stderr", process.stderr))]
    waiter = threading.Thread(target=reap, daemon=True)
    for thread in (*threads, waiter):
        thread.start()
    timed_out = False
    try:
        waiter.join(timeout)
        if waiter.is_alive():
            timed_out = True
            _kill_tool_group(process.pid, waiter)
    finally:
        if waiter.is_alive():  # KeyboardInterrupt or any other escape
            _kill_tool_group(process.pid, waiter)
    for thread in threads:
        thread.join(5.0)  # the pipes close when the group is gone
    if not reaped:
        raise RuntimeError(f"{command[0]} could not be reaped")
    status, rusage, wall = reaped[0]
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    stdout, stderr = output.get("stdout", ""), output.get("stderr", "")
    usage = ToolUsage(rusage.ru_utime, rusage.ru_stime, wall)
    if timed_out:
        return ToolRun(list(command), -9, stdout, stderr + f"\n[harness] killed after the {timeout:.0f} s timeout", usage)
    return ToolRun(list(command), process.returncode, stdout, stderr, usage)


def tool_usage_record(completed: subprocess.CompletedProcess[str]) -> dict[str, float] | None:
    """A finished tool's `load_tool_resources` for its run's record; None when it was not run by run_tool."""
    usage = getattr(completed, "usage", None)
    return usage.as_record() if isinstance(usage, ToolUsage) else None


def _kill_tool_group(pid: int, waiter: threading.Thread, grace: float = 1.0) -> None:
    """SIGTERM to a tool's group, then SIGKILL after the grace; returns once the waiter has reaped the tool."""
    for stop in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, stop)
        waiter.join(grace)
        if not waiter.is_alive():
            break
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # what the leader left behind
    waiter.join()


def group_pids(pgid: int) -> list[int]:
    """Every process whose process group is `pgid`, at the moment of the listing (Linux: /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue  # it ended while we looked
        if int(stat[stat.rindex(")") + 2:].split()[2]) == pgid:  # pgrp, after the command name
            pids.append(int(entry))
    return pids


def group_counts(pgid: int) -> tuple[int, int]:
    """Open file descriptors and threads, summed over every process of the group (Linux: /proc)."""
    fds = threads = 0
    for entry in group_pids(pgid):
        try:
            fds += len(os.listdir(f"/proc/{entry}/fd"))
            threads += len(os.listdir(f"/proc/{entry}/task"))
        except (OSError, ValueError):
            continue  # it ended while we looked
    return fds, threads
