"""Process pool: a fixed set of worker processes, fed connections by the accept loop.

The model: at start, the parent forks WORKERS processes. Then it only accepts;
each accepted connection goes into a queue, a Unix socket pair, and an idle
worker takes it out and answers it with the same handle_request as
sequential_sockets.py. What travels through the queue is not a Python object:
a socket cannot be pickled. It is the connection's file descriptor, which the
kernel copies into the receiving process (SCM_RIGHTS, socket.send_fds and
socket.recv_fds). Up to WORKERS requests overlap; the next ones wait in the
queue, as connections already accepted.
Grows from: fork_per_connection.py (the processes are forked once, up front,
and reused, instead of once per connection).

Run:   python servers/process_pool.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0] [--workers 16]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: at most WORKERS requests at once; the rest queue.
A worker that dies is not replaced. On stop, workers still busy after
SHUTDOWN_GRACE are killed. Unix only: os.fork and SCM_RIGHTS. With --work,
workers compute in parallel, but no more of them than there are CPUs.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling
clients (HEAD_TIMEOUT for the whole head), clients that
send more than we read (we half-close and drain instead of resetting), and a
full queue (the accept loop waits, and still notices a stop).
"""

import argparse
import email.utils
import os
import re
import signal
import socket
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
POLL_INTERVAL = 0.5  # how often the accept loop looks at the stop flag
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
REAP_INTERVAL = 0.05  # on stop, how often we look for finished workers (waitpid has no timeout)
# More than the ten clients of the concurrency test and fewer than the fifty of
# the article's load: see the page. Sized for waiting, not for CPUs.
WORKERS = 16
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)


# --8<-- [start:model]
def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool],
                  workers: int) -> None:
    """Start the pool, then accept connections and queue them for it until asked to stop."""
    queue, pids = start_workers(listener, workers, delay, cpu_work)
    listener.settimeout(POLL_INTERVAL)
    while not stopping:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        hand_over(queue, conn, stopping)  # socket.send_fds: the kernel copies the descriptor into the queue
    listener.close()  # stop accepting: new clients are refused, not left in the backlog
    queue.close()  # the workers answer what is queued, then read the end of the queue and exit
    stop_workers(pids)


def start_workers(listener: socket.socket, count: int, delay: float, cpu_work: int) -> tuple[socket.socket, list[int]]:
    """Fork the pool; return the parent's end of the queue and the workers' pids."""
    # SOCK_SEQPACKET keeps each message whole and gives every message to exactly
    # one reader, so the workers can share one end of the pair as a queue.
    parent_end, jobs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    workers = []
    for _ in range(count):
        if (pid := os.fork()) == 0:
            run_worker(listener, parent_end, jobs, delay, cpu_work)  # never returns
        workers.append(pid)
    jobs.close()  # the parent only sends
    parent_end.settimeout(POLL_INTERVAL)  # a full queue must not hide a stop from us
    return parent_end, workers


def work(jobs: socket.socket, delay: float, cpu_work: int) -> None:
    """In a worker: take connections from the queue and answer them, one by one, until it closes."""
    # recv_fds waits for a connection; none means the parent closed its end and the queue is empty: time to go.
    while fds := socket.recv_fds(jobs, 1, 1)[1]:
        handle_request(socket.socket(fileno=fds[0]), delay, cpu_work)  # sequential_sockets.py's
# --8<-- [end:model]


# --8<-- [start:armour]
def hand_over(queue: socket.socket, conn: socket.socket, stopping: list[bool]) -> None:
    """Put a connection in the queue, then close the parent's copy of it."""
    try:
        while True:
            try:
                # The kernel copies the descriptor into the message: the
                # connection stays open, in the queue, after our close below.
                socket.send_fds(queue, [b"c"], [conn.fileno()])
                return
            except TimeoutError:  # the queue is full: every worker is busy and many connections wait
                if stopping:
                    return  # we are stopping and nobody can take it: this client is refused
    finally:
        conn.close()
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


def run_worker(listener: socket.socket, parent_end: socket.socket, jobs: socket.socket, delay: float,
               cpu_work: int) -> NoReturn:
    """Run in a forked worker: serve from the queue, then leave at once."""
    status = 1
    try:
        listener.close()  # only the parent accepts; a worker's copy would keep the port open after a stop
        parent_end.close()  # or the queue could never end: this copy would keep it open
        work(jobs, delay, cpu_work)
        status = 0
    except BaseException:
        traceback.print_exc()  # a bug: say so, since os._exit skips the usual report
    finally:
        os._exit(status)  # never return into the parent's code (see fork_per_connection.py)


def stop_workers(workers: list[int]) -> None:
    """Give the workers SHUTDOWN_GRACE to empty the queue, then kill the rest; reap them all."""
    running = set(workers)
    deadline = time.monotonic() + SHUTDOWN_GRACE
    while running and time.monotonic() < deadline:
        for pid in list(running):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                running.discard(pid)
        time.sleep(REAP_INTERVAL)
    for pid in running:
        os.kill(pid, signal.SIGKILL)  # out of grace; the pid is still ours: it has not been reaped
    for pid in running:
        os.waitpid(pid, 0)
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--workers", type=int, default=WORKERS, help="processes in the pool")
    args = parser.parse_args()

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    with socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        serve_forever(listener, args.delay, args.work, stopping, args.workers)
    # The workers finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
