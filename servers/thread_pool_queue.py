"""Thread pool and queue: a fixed set of threads takes accepted connections from a queue.

The model: THREADS worker threads are started once, up front. The main thread
only accepts, and puts each new connection on a queue.Queue; whichever worker
is free takes it, answers it exactly as the sequential server would, and goes
back to the queue for the next. While one worker waits out its database call,
the others answer and the main thread accepts.
Grows from: thread_per_connection.py (the same handle_request; the threads are
made once and fed through a queue instead of made per client).

Run:   python servers/thread_pool_queue.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0] [--threads 8]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: THREADS requests at a time, no more; the rest wait
in the queue (at most QUEUE_LIMIT of them), then in the listen backlog. The
threads share one interpreter and its GIL: they overlap waiting, not Python
work. Every connection crosses from one thread to another through the queue,
which costs a wake-up per request that the sequential server does not pay.
On stop, a worker still busy after SHUTDOWN_GRACE is abandoned, not joined.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling
clients (HEAD_TIMEOUT for the whole head), and clients
that send more than we read (we half-close and drain instead of resetting).
"""

import argparse
import email.utils
import errno
import queue
import re
import signal
import socket
import threading
import time

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
THREADS = 8  # worker threads, as in the article; each one answers one client at a time
QUEUE_LIMIT = BACKLOG  # accepted connections waiting for a worker; past it, the backlog holds the rest
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)


# --8<-- [start:model]
def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool], threads: int) -> None:
    """Accept connections and queue them for the pool until asked to stop."""
    connections: queue.Queue[socket.socket | None] = queue.Queue(maxsize=QUEUE_LIMIT)
    workers = [threading.Thread(target=work, args=(connections, delay, cpu_work), daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    listener.settimeout(POLL_INTERVAL)
    while not stopping:
        if (conn := accept_or_wait(listener)) is None:
            continue  # no client within POLL_INTERVAL, or no file descriptor free for a moment
        enqueue(connections, conn, stopping)  # waits while the queue is full: the backlog fills instead
    stop_workers(listener, connections, workers)


def work(connections: queue.Queue[socket.socket | None], delay: float, cpu_work: int) -> None:
    """In a worker thread: answer connections from the queue until it hands us None, the stop sentinel."""
    while (conn := connections.get()) is not None:  # sleeps until there is work: an idle pool costs nothing
        handle_request(conn, delay, cpu_work)


def handle_request(conn: socket.socket, delay: float, cpu_work: int) -> None:
    """Answer one connection completely, then close it."""
    try:
        try:
            method, path = parse_request_head(read_request_head(conn))
            if method != "GET":
                raise RequestError(405)
            time.sleep(delay)  # the simulated database call: only this worker thread waits
            simulated_cpu_work(cpu_work)  # the simulated computation: holds the GIL, so the other threads wait
            response = build_page_response(path)
        except RequestError as error:
            response = build_refusal(error.status)
        conn.settimeout(SEND_TIMEOUT)  # sendall counts it for the whole answer, not per send
        conn.sendall(response)
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on
    finally:
        close_gracefully(conn)
# --8<-- [end:model]


# --8<-- [start:armour]
def enqueue(connections: queue.Queue[socket.socket | None], conn: socket.socket, stopping: list[bool]) -> None:
    """Wait for room in the queue, but keep looking at the stop flag."""
    while True:
        try:
            connections.put(conn, timeout=POLL_INTERVAL)
            return
        except queue.Full:
            if stopping:
                conn.close()  # never queued, never started: nothing in flight to protect
                return


def stop_workers(listener: socket.socket, connections: queue.Queue[socket.socket | None],
                 workers: list[threading.Thread]) -> None:
    """Stop accepting, let the workers answer what is queued, and give them SHUTDOWN_GRACE in all.

    The threads are daemons: one stuck on a client past the grace period cannot keep the process alive.
    """
    listener.close()  # stop accepting: new clients are refused, not left in the backlog
    # One sentinel per worker, after the connections already queued: those are answered first.
    # put() may wait for room while the queue is full, but never past the shared deadline.
    deadline = time.monotonic() + SHUTDOWN_GRACE  # one deadline shared by all, not 5 s each
    for _ in workers:
        try:
            connections.put(None, timeout=max(0.0, deadline - time.monotonic()))
        except queue.Full:
            break  # out of grace: the workers still busy are abandoned
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
# --8<-- [end:armour]


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


def accept_or_wait(listener: socket.socket) -> socket.socket | None:
    """The next client, or None when none came within POLL_INTERVAL or no file descriptor is free.

    Out of file descriptors (EMFILE, ENFILE: every open connection holds one), accept() fails
    at once, and again on the next call: waiting a poll interval lets handlers close theirs,
    instead of a busy loop or a crash. The client waits in the backlog meanwhile.
    """
    try:
        conn, _ = listener.accept()
    except TimeoutError:
        return None
    except OSError as error:
        if error.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        time.sleep(POLL_INTERVAL)
        return None
    return conn
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--threads", type=int, default=THREADS, help="worker threads in the pool")
    args = parser.parse_args()

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    with socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s, {args.threads} threads); Ctrl-C stops",
              flush=True)
        serve_forever(listener, args.delay, args.work, stopping, args.threads)
    # The requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
