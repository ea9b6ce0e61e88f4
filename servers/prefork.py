"""Prefork: N worker processes, forked up front, take turns accepting on one socket.

The model: the parent opens the listening socket, then forks WORKERS copies of
itself. Each worker runs the sequential server's accept loop on the socket it
inherited, so the kernel hands each new connection to one of the workers
waiting in accept(). N workers answer N clients at once, on as many CPUs as
there are, with no thread and no shared memory between them. The parent
serves nobody: it only supervises, restarting a worker that dies, and on
SIGINT/SIGTERM it stops them all.
Grows from: sequential_sockets.py (the same accept loop, run in several processes).

Run:   python servers/prefork.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0] [--workers N]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: N requests at a time, no more: client N+1 waits in
the listen backlog until a worker is free, as with the sequential server. Every
worker is a whole process, with its own memory. POSIX only (os.fork).
With --work, workers compute in parallel, but no more of them than there are CPUs.
A worker that dies is restarted, but at most as many times a minute as there
are workers: a worker that crashes at once, again and again, would otherwise
be forked forever; past the limit the parent stops everything and exits 1.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling
clients (HEAD_TIMEOUT for the whole head), clients that
send more than we read (we half-close and drain instead of resetting), and
workers left behind by a parent that was killed (they notice and exit).
"""

import argparse
import email.utils
import os
import re
import signal
import socket
import sys
import time
import traceback
from typing import NoReturn

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
BACKLOG = 128  # pending connections the kernel queues for us
MAX_HEAD_BYTES = 64 * 1024  # larger request heads get 431
HEAD_TIMEOUT = 10.0  # the whole request head must arrive within this, however slowly it trickles in
SEND_TIMEOUT = 10.0  # the whole answer must be taken within this, however slowly the client reads
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
POLL_INTERVAL = 0.5  # how often the accept loop (and the parent) looks at the stop flag
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
WORKERS = os.cpu_count() or 1  # one process per CPU: enough to keep every CPU busy
RESTART_WINDOW = 60.0  # more restarts than workers within this many seconds: something is wrong
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)

STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


# --8<-- [start:model]
def start_workers(listener: socket.socket, delay: float, cpu_work: int, count: int) -> set[int]:
    """Fork `count` workers; every one of them accepts on the same listening socket."""
    return {start_worker(listener, delay, cpu_work) for _ in range(count)}


def start_worker(listener: socket.socket, delay: float, cpu_work: int) -> int:
    """Fork one worker; return its process id (in the parent). The worker never returns."""
    parent = os.getpid()
    pid = fork_holding_stop_signals()  # os.fork(), holding stop signals back (see the supervision below)
    if pid:
        return pid  # in the parent: back to supervising
    run_worker(listener, delay, cpu_work, parent)  # in the child: serve until stopped, then exit


def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool],
                  parent: int) -> None:
    """In a worker: accept and answer connections one by one (sequential_sockets.py's handle_request) until stopped."""
    listener.settimeout(POLL_INTERVAL)
    while not stopping and not orphaned(parent):  # a worker whose parent died stops too
        try:
            # Every idle worker waits here. With a timeout, accept() waits in poll(),
            # and a new client wakes every waiting worker; one of them gets it.
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        handle_request(conn, delay, cpu_work)  # this worker's next client waits; the other workers do not
# --8<-- [end:model]


# --8<-- [start:armour]
def fork_holding_stop_signals() -> int:
    """os.fork() with SIGINT/SIGTERM held back across it; the child releases them in run_worker."""
    # A stop signal that reached the child before it set its own handler would
    # run the parent's copy of the handler and be lost.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    return pid


def run_worker(listener: socket.socket, delay: float, cpu_work: int, parent: int) -> NoReturn:
    """In a new worker: set the stop handler, serve, then leave at once, never into the parent's code."""
    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    for signum in STOP_SIGNALS:
        signal.signal(signum, request_stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # one held back arrives now, at our handler
    exit_code = 1
    try:
        serve_forever(listener, delay, cpu_work, stopping, parent)
        exit_code = 0
    except Exception:
        traceback.print_exc()  # os._exit below would otherwise swallow it; the parent restarts us
    finally:
        os._exit(exit_code)  # skip the parent's cleanup code, which this copy of the stack still holds


def orphaned(parent: int) -> bool:
    """Whether the parent has died: an orphan is adopted by another process, so its parent id changes."""
    return os.getppid() != parent


def supervise(listener: socket.socket, delay: float, cpu_work: int, count: int, stopping: list[bool]) -> int:
    """In the parent: keep `count` workers running until asked to stop; return the exit code."""
    workers = start_workers(listener, delay, cpu_work, count)
    restarts: list[float] = []  # when recent restarts happened
    exit_code = 0
    while not stopping:
        time.sleep(POLL_INTERVAL)  # the parent has nothing else to do
        if stopping:
            break  # workers exiting now are stopping too (Ctrl-C reaches them all): no restarts
        for pid, code in reap(workers):
            now = time.monotonic()
            restarts = [moment for moment in restarts if now - moment < RESTART_WINDOW] + [now]
            if len(restarts) > count:
                print(f"worker {pid} exited with {code}; too many restarts, stopping", file=sys.stderr, flush=True)
                stopping.append(True)
                exit_code = 1
                break
            print(f"worker {pid} exited with {code}; starting another", file=sys.stderr, flush=True)
            workers.add(start_worker(listener, delay, cpu_work))
    stop_workers(workers)
    return exit_code


def reap(workers: set[int]) -> list[tuple[int, int]]:
    """Collect workers that have exited, without waiting; return (pid, exit code) pairs."""
    exited = []
    while workers:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break  # no children left at all
        if pid == 0:
            break  # children remain, none has exited
        workers.discard(pid)
        exited.append((pid, os.waitstatus_to_exitcode(status)))
    return exited


def stop_workers(workers: set[int]) -> None:
    """Ask every worker to stop, give them SHUTDOWN_GRACE to finish, then kill and reap the rest."""
    for pid in workers:
        try:
            os.kill(pid, signal.SIGTERM)  # it finishes the request in hand, then exits
        except ProcessLookupError:
            pass  # already gone; reap() collects it
    deadline = time.monotonic() + SHUTDOWN_GRACE  # one deadline shared by all, not 5 s each
    while workers and time.monotonic() < deadline:
        reap(workers)
        time.sleep(0.05)
    for pid in workers:
        try:
            os.kill(pid, signal.SIGKILL)  # out of grace
        except ProcessLookupError:
            pass
    for pid in list(workers):
        os.waitpid(pid, 0)  # no zombies left behind
    workers.clear()
# --8<-- [end:armour]


# --8<-- [start:plumbing]
def handle_request(conn: socket.socket, delay: float, cpu_work: int) -> None:
    """Answer one connection completely, then close it."""
    try:
        try:
            method, path = parse_request_head(read_request_head(conn))
            if method != "GET":
                raise RequestError(405)
            time.sleep(delay)  # the simulated database call: only this process waits
            simulated_cpu_work(cpu_work)  # the simulated computation: each process has its own GIL
            response = build_page_response(path)
        except RequestError as error:
            response = build_refusal(error.status)
        conn.settimeout(SEND_TIMEOUT)  # sendall counts it for the whole answer, not per send
        conn.sendall(response)
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on
    finally:
        close_gracefully(conn)


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


def read_request_head(conn: socket.socket) -> bytes:
    """Read until the blank line that ends the head, however the bytes arrive, within HEAD_TIMEOUT."""
    deadline = time.monotonic() + HEAD_TIMEOUT  # one deadline for the whole head, not one per recv
    received = b""
    while b"\r\n\r\n" not in received:
        if len(received) > MAX_HEAD_BYTES:
            raise RequestError(431)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request head took longer than HEAD_TIMEOUT")
        conn.settimeout(remaining)  # so a client trickling a byte at a time still runs out of time
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("client closed before finishing its request")
        received += chunk
    head, _, _ = received.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise RequestError(431)
    return head


def close_gracefully(conn: socket.socket) -> None:
    """Half-close; drain only if the client sent more than we read, so close() sends FIN, not RST."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.setblocking(False)
        try:
            unread = conn.recv(1, socket.MSG_PEEK)  # look, without waiting: is anything left unread?
        except BlockingIOError:
            unread = b""  # nothing unread now; a client that sent only its head sends nothing more but its FIN
        if unread:
            # Closing with unread bytes would send RST, and the client could lose our answer:
            # read them, and what else comes, for up to DRAIN_TIMEOUT. Not by default: waiting
            # for the client's FIN costs a round trip per request, and nothing is at risk without unread input.
            conn.settimeout(DRAIN_TIMEOUT)
            deadline = time.monotonic() + DRAIN_TIMEOUT
            while time.monotonic() < deadline and conn.recv(65536):
                pass
    except OSError:
        pass  # the client is already gone; nothing left to protect
    finally:
        conn.close()


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--workers", type=int, default=WORKERS, help="worker processes (default: one per CPU)")
    args = parser.parse_args()

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    for signum in STOP_SIGNALS:
        signal.signal(signum, request_stop)

    with socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s, {args.workers} workers); Ctrl-C stops",
              flush=True)  # flushed before fork: a buffered line would be printed once per worker
        exit_code = supervise(listener, args.delay, args.work, args.workers, stopping)
    # Every worker finished its request in flight (or ran out of grace) and was reaped.
    print("Stopped", flush=True)
    sys.exit(exit_code)


if __name__ == "__main__":
    main()
