"""Event-loop workers: N processes, each with its own asyncio loop, under a supervisor that restarts them gracefully.

The model: the parent opens the listening socket(s), then forks WORKERS
copies of itself; each worker runs asyncio_streams.py's server on the socket
it inherited. Two ways to share the port, chosen with --sharing:
  inherited  one listening socket, opened by the parent, inherited by every
             worker: all their event loops wait on the same accept queue;
  reuseport  one listening socket per worker, all bound to the same port with
             SO_REUSEPORT: the kernel spreads new connections over them by a
             hash of the client's address and port.
The parent serves nobody. It restarts a worker that dies (with back-off), and
on SIGHUP replaces every worker without refusing a connection: new workers
start on the same sockets, and only once they accept are the old ones asked
to stop; they stop accepting and finish what they hold. The sockets never
close, so no connection waiting in an accept queue is lost. SIGINT/SIGTERM
stop everything gracefully.
Grows from: asyncio_streams.py (what each worker runs) and prefork.py (the
parent that forks and supervises workers).

Run:     python servers/event_loop_workers.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
                                              [--workers N] [--sharing inherited|reuseport]
Load:    ab -n 1000 -c 10 http://127.0.0.1:8000/
Restart: kill -HUP <the parent's pid, printed at start>

Known limits, on purpose: POSIX only (os.fork, SO_REUSEPORT is Linux/BSD).
Every worker is a whole process with its own memory. A worker that computes
(--work) blocks its own loop, as in asyncio_streams.py: more workers than
CPUs buys nothing for computing. With --sharing reuseport the hash does not
look at how busy a worker is: a slow worker still gets its share.
Not on purpose, and handled: a worker that crashes at start is restarted
after a growing pause, not in a tight loop; a new generation that fails to
start on SIGHUP is stopped and the old one keeps serving; workers whose
parent died notice and stop; requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling clients (HEAD_TIMEOUT
for the whole head, SEND_TIMEOUT for the whole answer), graceful close.
"""

import argparse
import asyncio
import email.utils
import os
import re
import select
import signal
import socket
import sys
import time
from typing import NoReturn

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
BACKLOG = 128  # pending connections the kernel queues for us (per socket)
MAX_HEAD_BYTES = 64 * 1024  # larger request heads get 431
HEAD_TIMEOUT = 10.0  # the whole request head must arrive within this, however slowly it trickles in
SEND_TIMEOUT = 10.0  # the whole answer must be taken within this, however slowly the client reads
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
POLL_INTERVAL = 0.5  # how often the parent looks for exited workers, and workers for a dead parent
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
WORKERS = 0  # 0: one per CPU this process may use (usable_cpus: its affinity and its cgroup's quota)
READY_TIMEOUT = 10.0  # on SIGHUP, how long new workers may take to start accepting
BACKOFF_FIRST = 0.1  # seconds before restarting a worker that died...
BACKOFF_MAX = 10.0  # ...doubling each time it dies young, up to this
STABLE_AFTER = 10.0  # a worker that lived this long resets its slot's back-off
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)

PARENT_SIGNALS = {signal.SIGCHLD, signal.SIGHUP, signal.SIGINT, signal.SIGTERM}


# --8<-- [start:model]
def open_listeners(host: str, port: int, sharing: str, count: int) -> list[socket.socket]:
    """The parent's sockets: one shared by every worker, or one per worker on the same port (SO_REUSEPORT)."""
    if sharing == "inherited":
        return [socket.create_server((host, port), backlog=BACKLOG)]
    first = socket.create_server((host, port), backlog=BACKLOG, reuse_port=True)
    port = first.getsockname()[1]  # with --port 0, the others must join the port the first one got
    return [first] + [socket.create_server((host, port), backlog=BACKLOG, reuse_port=True) for _ in range(count - 1)]


def start_worker(listener: socket.socket, others: list[socket.socket], delay: float, cpu_work: int) -> tuple[int, int]:
    """Fork one worker on `listener`; return (its pid, the read end of its readiness pipe)."""
    ready_read, ready_write = os.pipe()
    pid = os.fork()  # the parent blocks every signal it handles, so the child starts with them blocked too
    if pid:
        os.close(ready_write)
        return pid, ready_read
    os.close(ready_read)  # in the child from here on: it never returns into the parent's code
    for sock in others:
        sock.close()  # another worker's socket (reuseport): not ours to accept on
    run_worker(listener, delay, cpu_work, ready_write)  # runs worker_loop, then exits the process


async def worker_loop(listener: socket.socket, delay: float, cpu_work: int, ready: int, parent: int) -> int:
    """In a worker: asyncio_streams.py's server on an inherited socket, until SIGTERM; return requests served."""
    stopping = stop_on_signals()  # an Event set on SIGINT/SIGTERM
    served = [0]
    handlers: set[asyncio.Task[None]] = set()

    def start_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served[0] += 1
        handler = asyncio.create_task(handle_request(reader, writer, delay, cpu_work))
        handlers.add(handler)
        handler.add_done_callback(handlers.discard)

    server = await asyncio.start_server(start_handler, sock=listener, limit=MAX_HEAD_BYTES)
    report_ready(ready)  # we accept: on SIGHUP the parent waits for this before it stops the old workers
    await until_stopped(stopping, parent)  # SIGTERM, or the parent died
    await stop_gracefully(server, handlers)
    return served[0]
# --8<-- [end:model]


# --8<-- [start:armour]
def run_worker(listener: socket.socket, delay: float, cpu_work: int, ready: int) -> NoReturn:
    """In the child: run worker_loop, report how it ended, and exit without returning into the parent's code."""
    exit_code = 1
    try:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a reload is the parent's business, not a worker's
        served = asyncio.run(worker_loop(listener, delay, cpu_work, ready, os.getppid()))
        print(f"worker {os.getpid()} served {served} connections", flush=True)
        exit_code = 0
    except BaseException as error:  # noqa: BLE001 - report anything, then exit: the parent restarts us
        print(f"worker {os.getpid()} failed: {error!r}", file=sys.stderr, flush=True)
    finally:
        os._exit(exit_code)  # skip the parent's cleanup code, which this copy of the stack still holds


def stop_on_signals() -> asyncio.Event:
    """An Event set on SIGINT/SIGTERM; the signals held back since the fork are let through from now on."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())  # held back since the fork; one that came meanwhile arrives now
    return stopping


def report_ready(ready: int) -> None:
    """Tell the parent we accept: one byte on the readiness pipe."""
    try:
        os.write(ready, b"r")
    except BrokenPipeError:
        pass  # nobody waits for it (a first start, or a restart after a crash)
    os.close(ready)


async def until_stopped(stopping: asyncio.Event, parent: int) -> None:
    """Until SIGINT/SIGTERM, or until the parent is gone (a new parent id means ours died: stop too)."""
    while not stopping.is_set() and os.getppid() == parent:
        try:
            await asyncio.wait_for(stopping.wait(), POLL_INTERVAL)
        except TimeoutError:
            pass


async def stop_gracefully(server: asyncio.Server, handlers: set[asyncio.Task[None]]) -> None:
    """Stop accepting; give the requests in flight SHUTDOWN_GRACE, then cancel the rest."""
    # Stopping already: a second SIGTERM (the parent's, after one sent to the whole group) is held
    # back. Let through, it would kill us once asyncio.run has put back SIGTERM's default action,
    # before run_worker reports what we served.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    await stop_reading_listeners(server)
    server.close()  # our copy of the socket; the parent (and any new worker) still holds it open
    if handlers:
        _, late = await asyncio.wait(handlers, timeout=SHUTDOWN_GRACE)
        for handler in late:
            handler.cancel()
        await asyncio.gather(*late, return_exceptions=True)


async def stop_reading_listeners(server: asyncio.Server) -> None:
    """Stop accepting, and wait until every connection already accepted has reached our callback.

    The loop accepts a connection, then sets up its transport, then calls connection_made
    (which starts our handler): two more loop turns. Stopping between the accept and the
    handler would leave that client out of `handlers`, and its connection would be closed
    unanswered when the loop ends (a reload under load lost 1 of 800 requests this way).
    """
    loop = asyncio.get_running_loop()
    for listener in server.sockets:
        loop.remove_reader(listener.fileno())  # no new accept from here on
    for _ in range(2):  # the transport, then connection_made
        await asyncio.sleep(0)


async def handle_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float,
                         cpu_work: int) -> None:
    """Answer one connection completely, then close it."""
    try:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):  # one deadline for the whole head
                method, path = parse_request_head(await read_request_head(reader))
            if method != "GET":
                raise RequestError(405)
            await asyncio.sleep(delay)  # the simulated database call: only this coroutine waits
            simulated_cpu_work(cpu_work)  # the simulated computation: no await in it, so every connection waits
            response = build_page_response(path)
        except RequestError as error:
            response = build_refusal(error.status)
        writer.write(response)
        async with asyncio.timeout(SEND_TIMEOUT):  # one deadline for the whole answer
            await writer.drain()  # returns once the socket has taken the bytes
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on
    except asyncio.CancelledError:
        writer.close()  # out of grace on stop: close at once, skip the polite drain
        raise
    await close_gracefully(reader, writer)
# --8<-- [end:armour]


# --8<-- [start:supervisor]
class Supervisor:
    """The parent: one worker per slot (a slot is a listening socket), restarted when it dies, replaced on SIGHUP."""

    def __init__(self, listeners: list[socket.socket], count: int, delay: float, cpu_work: int) -> None:
        self.slots = [listeners[index % len(listeners)] for index in range(count)]
        self.listeners = listeners
        self.delay, self.cpu_work = delay, cpu_work
        self.workers: dict[int, int] = {}  # pid -> slot, the current generation
        self.retiring: set[int] = set()  # old generation, finishing what it holds
        self.started: dict[int, float] = {}  # pid -> when it started
        self.backoff = [BACKOFF_FIRST] * count
        self.due: dict[int, float] = {}  # slot -> when to restart its worker

    def spawn(self, slot: int) -> tuple[int, int]:
        listener = self.slots[slot]
        pid, ready = start_worker(listener, [sock for sock in self.listeners if sock is not listener],
                                  self.delay, self.cpu_work)
        self.started[pid] = time.monotonic()
        return pid, ready

    def start(self) -> None:
        for slot in range(len(self.slots)):
            pid, ready = self.spawn(slot)
            os.close(ready)  # at start nobody is waiting to be replaced: no need to wait for it
            self.workers[pid] = slot

    def reload(self) -> None:
        """SIGHUP: start a new generation on the same sockets; stop the old one only once all new ones accept."""
        new = {}
        readiness = {}
        for slot in range(len(self.slots)):
            pid, ready = self.spawn(slot)
            new[pid], readiness[ready] = slot, pid
        deadline = time.monotonic() + READY_TIMEOUT
        died = False
        while readiness and not died and time.monotonic() < deadline:
            readable, _, _ = select.select(list(readiness), [], [], max(0.0, deadline - time.monotonic()))
            for ready in readable:
                if os.read(ready, 1):  # a byte: that worker accepts
                    os.close(ready)
                    readiness.pop(ready)
                else:
                    died = True  # end of file: it died before it could accept, the new generation is broken
        for ready in readiness:
            os.close(ready)
        if readiness:  # not every new worker accepted: keep serving with the old generation
            print("reload failed: new workers did not start; the old ones keep serving", file=sys.stderr, flush=True)
            self.signal_all(new, signal.SIGTERM)
            self.retiring.update(new)
            return
        self.signal_all(self.workers, signal.SIGTERM)  # they stop accepting and finish what they hold
        self.retiring.update(self.workers)
        self.workers = new
        self.due.clear()  # a slot waiting for a restart has its new worker already
        print(f"reloaded: {len(new)} new workers", flush=True)

    @staticmethod
    def signal_all(pids, signum: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass  # already gone; reap() collects it

    def reap(self) -> None:
        """Collect exited workers; schedule a restart (after its slot's back-off) for a current one."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            lived = time.monotonic() - self.started.pop(pid, time.monotonic())
            if pid in self.retiring:
                self.retiring.discard(pid)
                continue
            slot = self.workers.pop(pid, None)
            if slot is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            self.backoff[slot] = BACKOFF_FIRST if lived >= STABLE_AFTER else min(self.backoff[slot] * 2, BACKOFF_MAX)
            self.due[slot] = time.monotonic() + self.backoff[slot]
            print(f"worker {pid} exited with {code} after {lived:.1f} s; restarting in {self.backoff[slot]:g} s",
                  file=sys.stderr, flush=True)

    def restart_due(self) -> None:
        now = time.monotonic()
        for slot, when in list(self.due.items()):
            if when <= now:
                del self.due[slot]
                pid, ready = self.spawn(slot)
                os.close(ready)
                self.workers[pid] = slot

    def stop(self) -> None:
        """Every worker gets SIGTERM and SHUTDOWN_GRACE to finish; the rest are killed; all are reaped."""
        everyone = set(self.workers) | self.retiring
        self.signal_all(everyone, signal.SIGTERM)
        deadline = time.monotonic() + SHUTDOWN_GRACE + 1.0
        while everyone and time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                everyone.discard(pid)
            else:
                time.sleep(0.05)
        if everyone:  # say so: the lines those workers would print on their way out are lost with them
            print(f"workers {sorted(everyone)} still running {SHUTDOWN_GRACE + 1:g} s after SIGTERM: killed",
                  file=sys.stderr, flush=True)
        self.signal_all(everyone, signal.SIGKILL)  # out of grace
        for pid in everyone:
            try:
                os.waitpid(pid, 0)  # no zombies left behind
            except ChildProcessError:
                pass

    def run(self) -> None:
        """Wait for signals (held back, taken one at a time: no handler runs in the middle of a fork)."""
        self.start()
        while True:
            received = signal.sigtimedwait(PARENT_SIGNALS, POLL_INTERVAL)
            if received is not None and received.si_signo in (signal.SIGINT, signal.SIGTERM):
                self.stop()  # before reap(): workers the same signal stopped are not "exited, restarting"
                return
            self.reap()  # on SIGCHLD, and on every wake-up in case two exits were merged into one signal
            if received is None or received.si_signo == signal.SIGCHLD:
                self.restart_due()
            else:  # SIGHUP
                self.reload()
# --8<-- [end:supervisor]


# --8<-- [start:plumbing]
REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}


REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/1\.[01]")


class RequestError(Exception):
    """A request we refuse; carries the status code to answer with."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def build_response(status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> bytes:
    """Serialise a complete HTTP/1.1 response that closes the connection."""
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
        "Connection: close\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


def build_page_response(path: str) -> bytes:
    """The answer to a GET: 1 MiB of text at /big, the page everywhere else."""
    if path == "/big":
        return build_response(200, BIG_BODY, "text/plain")
    return build_response(200, BODY, "text/html; charset=utf-8")


def build_refusal(status: int) -> bytes:
    """The answer to a request we refuse: its status, in words."""
    return build_response(status, f"{status} {REASONS[status]}\n".encode())


def parse_request_head(head: bytes) -> tuple[str, str]:
    """Validate a request head (without the blank line); return its method and path."""
    request_line, *header_lines = head.split(b"\r\n")
    match = REQUEST_LINE.fullmatch(request_line)
    if match is None:
        raise RequestError(400)
    for line in header_lines:
        name, colon, _ = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise RequestError(400)
    return match.group(1).decode("ascii"), match.group(2).decode("ascii", "replace")


async def read_request_head(reader: asyncio.StreamReader) -> bytes:
    """Read until the blank line that ends the head, however the bytes arrive."""
    try:
        # The reader's limit (MAX_HEAD_BYTES, set in start_server) caps how far
        # readuntil looks for the blank line: past it, LimitOverrunError.
        received = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        raise RequestError(431) from None
    except asyncio.IncompleteReadError:
        raise ConnectionError("client closed before finishing its request") from None
    return received[:-4]


async def close_gracefully(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half-close, then drain what the client still sends, so close() sends FIN, not RST."""
    try:
        writer.write_eof()
        async with asyncio.timeout(DRAIN_TIMEOUT):
            while await reader.read(65536):
                pass
    except OSError:
        pass  # the client is already gone, or DRAIN_TIMEOUT passed (TimeoutError is an OSError)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass  # a reset while closing: nothing left to protect


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))
# --8<-- [end:plumbing]


# --8<-- [start:usable-cpus]
def usable_cpus() -> int:
    """The CPUs this process may use: its affinity mask, capped by its cgroup's CPU quota (rounded up).

    os.cpu_count() counts the machine's CPUs, and os.process_cpu_count() (3.13) only the affinity
    mask (taskset, docker --cpuset-cpus); a container limited with docker --cpus or Kubernetes'
    CPU limit keeps every CPU in its mask and gets a quota instead: cpu.max says "200000 100000",
    two CPUs' worth of time per period. Starting a worker per machine CPU there only adds
    processes that take turns on the quota.
    """
    affinity = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota()
    return max(1, min(affinity, quota)) if quota is not None else affinity


def cgroup_cpu_quota(proc: str = "/proc/self") -> int | None:
    """CPUs' worth of time per period our cgroup (or a limited parent) may use, rounded up; None if unlimited.

    cgroup v2 keeps the quota in cpu.max ("200000 100000", or "max 100000"); v1, still mounted by
    hybrid hosts, in cpu.cfs_quota_us and cpu.cfs_period_us (-1: none). /proc/self/cgroup names our
    cgroup, /proc/self/mountinfo where each hierarchy is mounted (and which part of it: a container
    sees its own cgroup as the root).
    """
    try:
        with open(proc + "/mountinfo", encoding="utf-8") as mountinfo:
            mounts = [line.split() for line in mountinfo]
        with open(proc + "/cgroup", encoding="utf-8") as cgroup:
            memberships = [line.rstrip("\n").split(":", 2) for line in cgroup]
    except OSError:
        return None
    limits = []
    for _, controllers, path in memberships:
        version = 2 if controllers == "" else 1 if "cpu" in controllers.split(",") else None
        for fields in mounts:  # id parent major:minor root mount-point options ... - type source super-options
            kind, options = fields[fields.index("-") + 1], fields[-1].split(",")
            if version == 2 and kind == "cgroup2" or version == 1 and kind == "cgroup" and "cpu" in options:
                root, mount_point = fields[3], fields[4]
                relative = path[len(root):] if path.startswith(root) else path
                limits += quotas_up_to(mount_point, relative.strip("/"), version)
    return min(limits) if limits else None


def quotas_up_to(mount_point: str, relative: str, version: int) -> list[int]:
    """The CPU quota of a cgroup and of each parent up to the mount point (a parent's limit binds its children)."""
    limits = []
    parts = relative.split("/") if relative else []
    for depth in range(len(parts), -1, -1):
        directory = "/".join([mount_point, *parts[:depth]])
        try:
            if version == 2:
                with open(directory + "/cpu.max", encoding="ascii") as cpu_max:
                    quota, period = cpu_max.read().split()[:2]
            else:
                with open(directory + "/cpu.cfs_quota_us", encoding="ascii") as quota_file, \
                        open(directory + "/cpu.cfs_period_us", encoding="ascii") as period_file:
                    quota, period = quota_file.read().strip(), period_file.read().strip()
        except (OSError, ValueError):
            continue  # no such file at this level (the root has no cpu.max; a controller may be off)
        if quota not in ("max", "-1"):
            limits.append(-(-int(quota) // int(period)))  # rounded up: 1.5 CPUs' worth of time is 2 workers
    return limits
# --8<-- [end:usable-cpus]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--workers", type=int, default=WORKERS,
                        help="worker processes (default: the CPUs we may use: affinity and cgroup quota)")
    parser.add_argument("--sharing", choices=["inherited", "reuseport"], default="inherited",
                        help="one listening socket for all workers, or one each on the same port")
    args = parser.parse_args()
    if args.workers < 0:
        parser.error("--workers must be 1 or more (0: one per CPU we may use)")
    args.workers = args.workers or usable_cpus()

    # Held back from here on and taken with sigtimedwait in Supervisor.run; forked
    # workers start with them held back too and release them once they are set up.
    signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
    listeners = open_listeners(args.host, args.port, args.sharing, args.workers)
    host, port = listeners[0].getsockname()[:2]
    print(f"Serving on http://{host}:{port}/ (delay {args.delay} s, {args.workers} workers, "
          f"{args.sharing} socket{'s' if len(listeners) > 1 else ''}; parent pid {os.getpid()}); "
          "SIGHUP restarts the workers, Ctrl-C stops", flush=True)  # flushed before fork
    try:
        Supervisor(listeners, args.workers, args.delay, args.work).run()
    finally:
        for listener in listeners:
            listener.close()
    # Every worker finished its requests in flight (or ran out of grace) and was reaped.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
