"""The server's side of a timeline, seen from outside: its own system calls (strace), per connection.

Theory of operation. The timeline scenario's client records when it connected, sent, got the first
byte and saw the close; what the server did in between is invisible to it. Instead of instrumenting
every file in servers/ (they are for readers), the harness attaches `strace -f` to every process of
the server's group for the one run and reads, per accepted connection:

- accepted: when accept()/accept4() returned it (the peer's port, from the address strace decodes,
  is the client's local port: that is how a connection is matched to a request of the client's);
- head read: when the first read()/recvfrom()/recvmsg() that returned bytes on it returned (the
  client's request is one small write, so the first read holds the head);
- first written / written: when the first and the last write()/sendto()/sendmsg() that wrote
  bytes on it returned (the answer's head, then its last byte);
- closed: when the last close() of it returned, or the process holding it exited (a forked child
  that handles a connection inherits the descriptor: the parent's close does not end it).

Descriptors belong to processes, not threads, so each line's thread id is mapped to its process
(its thread group): from /proc for threads that exist when strace attaches, from clone()/clone3()
(CLONE_THREAD or not) for those made during the run; a fork copies the parent's open connections.

What is not shown: when the handler started and finished. A handler is Python code, not a system
call; "started" lies somewhere between the head read and the first write, "finished" at the last
write. Known limits: a connection accepted before strace attached is not seen; a read that
returns part of a head larger than one segment is still called the head read; strace stops the
server at every traced call, so a traced server is slower (tens of microseconds a call): these
moments show order and who did what, and the client's own timeline stays the measurement of rates.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

INSTALL_HINT = "strace is not installed (the timeline scenario traces the server's system calls): apt-get install strace"
SYSCALLS = ("accept", "accept4", "read", "recvfrom", "recvmsg", "write", "sendto", "sendmsg", "close",
            "clone", "clone3", "fork", "vfork")
READS, WRITES, ACCEPTS = {"read", "recvfrom", "recvmsg"}, {"write", "sendto", "sendmsg"}, {"accept", "accept4"}
FORKS = {"clone", "clone3", "fork", "vfork"}
ATTACH_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
MOMENTS = ("accepted", "head_read", "first_written", "written", "closed")

# One line of `strace -f -ttt -T -o FILE`: thread id, Unix time, then a call, an unfinished call, a resumed one,
# or a note (+++ exited +++, --- SIGCHLD ---).
LINE = re.compile(r"^(?P<tid>\d+)\s+(?P<time>\d+\.\d+)\s+(?P<rest>.*)$")
CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*)$")
RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<args>.*)$")
RESULT = re.compile(r"\)\s+=\s+(?P<ret>-?\d+|\?)(?P<error> [A-Z]\w+)?.*?(?:<(?P<took>\d+\.\d+)>)?$")
PEER_PORT = re.compile(r"sin6?_port=htons\((\d+)\)")
FIRST_ARG = re.compile(r"^\s*(\d+)")


class StraceMissingError(RuntimeError):
    """strace is not on PATH; the message says how to install it."""


class TraceAttachError(RuntimeError):
    """strace could not attach to the server (ptrace refused, or it timed out): the message has its words."""


def strace_path() -> str:
    """Where strace is; StraceMissingError with the install line when it is not."""
    path = shutil.which("strace")
    if path is None:
        raise StraceMissingError(INSTALL_HINT)
    return path


@dataclass
class Connection:
    """One accepted connection's moments (Unix seconds) and who touched it."""

    peer_port: int | None
    process: int  # the process (thread group) that accepted it
    accepted: float
    head_read: float | None = None
    first_written: float | None = None
    written: float | None = None
    closed: float | None = None
    threads: list[int] = field(default_factory=list)  # the threads that read or wrote it, in order met
    processes: list[int] = field(default_factory=list)  # the processes that read or wrote it
    copies: int = 1  # open descriptors of it (a fork adds one, a close or an exit takes one)

    def touched_by(self, tid: int, process: int) -> None:
        if tid not in self.threads:
            self.threads.append(tid)
        if process not in self.processes:
            self.processes.append(process)


@dataclass(frozen=True)
class Call:
    """A finished system call: who made it, when it returned, its arguments and result."""

    index: int  # the line where it began: a fork acts there, before the child's first line
    tid: int
    name: str
    args: str
    ret: int | None
    returned: float


def calls(lines: Iterable[str]) -> Iterator[Call | tuple[str, int, float]]:
    """Each finished call (an unfinished one joined to its resumed half), and ('exit', tid, time) for an exit."""
    pending: dict[int, tuple[int, str, str]] = {}
    for index, line in enumerate(lines):
        match = LINE.match(line.rstrip("\n"))
        if match is None:
            continue
        tid, moment, rest = int(match["tid"]), float(match["time"]), match["rest"]
        if rest.startswith("+++ exited") or rest.startswith("+++ killed"):
            yield ("exit", tid, moment)
            continue
        if rest.endswith("<unfinished ...>"):
            call = CALL.match(rest)
            if call:
                pending[tid] = (index, call["name"], call["args"][:-len("<unfinished ...>")])
            continue
        resumed = RESUMED.match(rest)
        if resumed:
            if tid not in pending:
                continue  # begun before strace attached
            begun, name, args = pending.pop(tid)
            yield _finished(begun, tid, name, args + resumed["args"], moment, None)
            continue
        call = CALL.match(rest)
        if call:
            yield _finished(index, tid, call["name"], call["args"], moment, "entry")


def _finished(index: int, tid: int, name: str, args: str, moment: float, stamped: str | None) -> Call:
    """The call with its result; a whole line is stamped at entry (add its duration), a resumed one at return."""
    result = RESULT.search(args)
    ret = None if result is None or result["ret"] == "?" else int(result["ret"])
    took = float(result["took"]) if result is not None and result["took"] and stamped == "entry" else 0.0
    return Call(index, tid, name, args, ret, moment + took)


def connections(lines: list[str], processes: dict[int, int]) -> list[Connection]:
    """Every connection accepted in the trace, in order; `processes` maps the threads alive at attach to their process."""
    events = list(calls(lines))
    process_of = dict(processes)
    forks: dict[int, tuple[int, bool]] = {}  # a fork's line -> (child, shares the parent's descriptors: a thread)
    for event in events:
        if isinstance(event, Call) and event.name in FORKS and event.ret and event.ret > 0:
            forks[event.index] = (event.ret, "CLONE_THREAD" in event.args)
    # Map every thread to its process before reading descriptors: a child may print before its parent's clone returns.
    for event in sorted((e for e in events if isinstance(e, Call) and e.index in forks), key=lambda e: e.index):
        child, thread = forks[event.index]
        process_of[child] = process_of.get(event.tid, event.tid) if thread else child
    open_now: dict[tuple[int, int], Connection] = {}
    found: list[Connection] = []
    # A fork acts at its line (the child's copy exists from then on); every other call when it returned.
    ordered = sorted(events, key=lambda e: _when(e, forks, lines))
    for event in ordered:
        if not isinstance(event, Call):
            _exited(event[1], event[2], process_of, open_now)
            continue
        process = process_of.get(event.tid, event.tid)
        if event.index in forks and not forks[event.index][1]:
            child = forks[event.index][0]
            for (owner, fd), connection in list(open_now.items()):
                if owner == process:
                    open_now[(child, fd)] = connection
                    connection.copies += 1
            continue
        if event.ret is None or event.ret < 0:
            continue
        if event.name in ACCEPTS:
            port = PEER_PORT.search(event.args)
            connection = Connection(int(port[1]) if port else None, process, event.returned)
            open_now[(process, event.ret)] = connection
            found.append(connection)
            continue
        fd = FIRST_ARG.match(event.args)
        connection = open_now.get((process, int(fd[1]))) if fd else None
        if connection is None:
            continue  # a descriptor that is not an accepted connection (the listening socket, a database, a pipe)
        if event.name in READS and event.ret > 0:
            connection.head_read = connection.head_read or event.returned
            connection.touched_by(event.tid, process)
        elif event.name in WRITES and event.ret > 0:
            connection.first_written = connection.first_written or event.returned
            connection.written = event.returned
            connection.touched_by(event.tid, process)
        elif event.name == "close":
            del open_now[(process, int(fd[1]))]
            _release(connection, event.returned)
    return found


def _when(event: Call | tuple[str, int, float], forks: dict[int, tuple[int, bool]], lines: list[str]) -> float:
    """The moment an event acts: a fork when it began (its line's own time), anything else when it returned."""
    if not isinstance(event, Call):
        return event[2]
    if event.index in forks:
        match = LINE.match(lines[event.index])
        return float(match["time"]) if match else event.returned
    return event.returned


def _release(connection: Connection, moment: float) -> None:
    connection.copies -= 1
    if connection.copies == 0:
        connection.closed = moment


def _exited(tid: int, moment: float, process_of: dict[int, int], open_now: dict[tuple[int, int], Connection]) -> None:
    """A process's last thread left (strace says it of its leader last): the kernel closed what it held."""
    if process_of.get(tid, tid) != tid:
        return  # a thread, not the process
    for key in [key for key in open_now if key[0] == tid]:
        _release(open_now.pop(key), moment)


def threads_of(pids: list[int]) -> dict[int, int]:
    """Every thread of these processes, mapped to its process (/proc/PID/task)."""
    mapping = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                mapping[int(task)] = pid
    return mapping


def _traced(tid: int) -> bool:
    """Whether a tracer is attached to the thread (/proc/TID/status TracerPid)."""
    try:
        status = Path(f"/proc/{tid}/status").read_text()
    except OSError:
        return True  # it ended: nothing left to wait for
    match = re.search(r"^TracerPid:\s+(\d+)", status, re.MULTILINE)
    return bool(match and int(match[1]))


class SyscallTrace:
    """strace attached to a server's processes for the length of a `with` block; then its connections."""

    def __init__(self, pids: list[int], out_path: Path, cpu: str | None = None) -> None:
        self.pids, self.out_path, self.cpu = pids, out_path, cpu
        self.processes = threads_of(pids)
        self.command = [strace_path(), "-f", "-ttt", "-T", "-q", "-s", "0", "-o", str(out_path),
                        "-e", "trace=" + ",".join(SYSCALLS)] + [part for pid in pids for part in ("-p", str(pid))]
        if cpu is not None:
            self.command = ["taskset", "-c", cpu] + self.command
        self.process: subprocess.Popen[bytes] | None = None
        self.stderr = ""

    def __enter__(self) -> SyscallTrace:
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        start_new_session=True)
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while not all(_traced(tid) for tid in self.processes):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self._stop()
                raise TraceAttachError(f"strace could not attach to the server ({' '.join(self.command)}): "
                                   f"{self.stderr.strip()[-500:] or 'timed out'}")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop()

    def _stop(self) -> None:
        """SIGINT detaches strace from every thread and lets it flush; SIGKILL if it will not go."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)
        try:
            _, stderr = self.process.communicate(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            _, stderr = self.process.communicate(timeout=STOP_TIMEOUT_S)
        self.stderr = stderr.decode(errors="replace")

    def connections(self) -> list[Connection]:
        lines = self.out_path.read_text(errors="replace").splitlines() if self.out_path.exists() else []
        return connections(lines, self.processes)


def _place(entry: dict[str, Any], connection: Connection, start: float) -> None:
    """The connection's moments on the request's entry, in seconds from the client's start."""
    entry["server"] = {name: None if getattr(connection, name) is None
                       else round(getattr(connection, name) - start, 6) for name in MOMENTS}
    entry["server"].update(process=connection.process, threads=connection.threads, processes=connection.processes)


def add_to_timeline(run: dict[str, Any], found: list[Connection], command: list[str]) -> None:
    """Give each request of the run's timeline its connection's moments (seconds on the client's clock), matched by port.

    The client's clock: its timeline's seconds count from `clock_start_unix_s` (the same instant on the Unix
    clock), so a moment t on the server's trace is t - clock_start_unix_s there."""
    timeline, start = run.get("timeline"), run.get("clock_start_unix_s")
    by_port: dict[int, list[Connection]] = {}
    for connection in found:
        if connection.peer_port is not None:
            by_port.setdefault(connection.peer_port, []).append(connection)
    matched = by_order = 0
    if start is None:
        timeline = None
    for entry in timeline or []:
        candidates = by_port.get(entry.get("local_port") or -1)
        if candidates:
            _place(entry, candidates.pop(0), start)  # a port used twice in one run: in the order they were accepted
            matched += 1
    # libuv (uvloop) accepts without asking for the peer's address, and nothing later asks for it: those
    # connections are matched by order, the accept order against the order the client saw its connects complete.
    unported = [connection for connection in found if connection.peer_port is None]
    waiting = sorted((entry for entry in timeline or [] if "server" not in entry and entry.get("connected") is not None),
                     key=lambda entry: entry["connected"])
    for entry, connection in zip(waiting, unported):
        _place(entry, connection, start)
        by_order += 1
    run["server_trace"] = {
        "command": command, "connections": len(found), "matched": matched + by_order, "matched_by_order": by_order,
        "moments": list(MOMENTS),
        "note": ("the server's own system calls (strace -f): accepted, head read, first and last write, close, per "
                 "connection; the handler's start and end are not system calls (started: after the head read, "
                 "finished: at the last write). strace slows every traced call: order, not rates. A connection "
                 "accepted without its peer's address (libuv) is matched by order: the listen queue is first in, "
                 "first out, but two requests that connected in the same instant may be swapped"),
    }
