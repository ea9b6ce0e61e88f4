"""Thread pool and queue: a fixed set of threads takes accepted connections from a queue.

The model: THREADS worker threads are started once, up front. The main thread
only accepts, and puts each new connection on a queue.Queue; whichever worker
is free takes it, answers it exactly as the sequential server would, and goes
back to the queue for the next. While one worker waits out its database call,
the others answer and the main thread accepts.
Grows from: thread_per_connection.py (the same handle_request; the threads are
made once and fed through a queue instead of made per client).

Run:   python servers/thread_pool_queue.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--threads 8]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: THREADS requests at a time, no more; the rest wait
in the queue (at most QUEUE_LIMIT of them), then in the listen backlog. The
threads share one interpreter and its GIL: they overlap waiting, not Python
work. Every connection crosses from one thread to another through the queue,
which costs a wake-up per request that the sequential server does not pay.
On stop, a worker still busy after SHUTDOWN_GRACE is abandoned, not joined.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent clients (timeout), and clients
that send more than we read (we half-close and drain instead of resetting).
"""

import argparse
import email.utils
import queue
import re
import signal
import socket
import threading
import time

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
BACKLOG = 128  # pending connections the kernel queues for us
MAX_HEAD_BYTES = 64 * 1024  # larger request heads get 431
CLIENT_TIMEOUT = 10.0  # a client that goes quiet cannot hold the server forever
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


# --8<-- [start:model]
def serve_forever(listener: socket.socket, delay: float, threads: int, stopping: list[bool]) -> None:
    """Accept connections and queue them for the pool until asked to stop."""
    connections: queue.Queue[socket.socket | None] = queue.Queue(maxsize=QUEUE_LIMIT)
    # daemon=True: a stuck client cannot keep the process alive past the grace period.
    workers = [threading.Thread(target=work, args=(connections, delay), daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    listener.settimeout(POLL_INTERVAL)
    while not stopping:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        while True:  # wait for room in the queue, but keep looking at the stop flag
            try:
                connections.put(conn, timeout=POLL_INTERVAL)
                break
            except queue.Full:
                if stopping:
                    conn.close()  # never queued, never started: nothing in flight to protect
                    break
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


def work(connections: queue.Queue[socket.socket | None], delay: float) -> None:
    """In a worker thread: answer connections from the queue until it hands us None."""
    while True:
        conn = connections.get()  # sleeps until there is work: an idle pool costs nothing
        if conn is None:
            return  # the stop sentinel: one per thread, queued behind the real work
        handle_request(conn, delay)


def handle_request(conn: socket.socket, delay: float) -> None:
    """Answer one connection completely, then close it."""
    try:
        conn.settimeout(CLIENT_TIMEOUT)
        try:
            method = parse_request_head(read_request_head(conn))
            if method != "GET":
                raise RequestError(405)
            time.sleep(delay)  # the simulated database call: only this worker thread waits
            response = build_response(200, BODY)
        except RequestError as error:
            response = build_response(error.status, f"{error.status} {REASONS[error.status]}\n".encode())
        conn.sendall(response)
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on
    finally:
        close_gracefully(conn)
# --8<-- [end:model]


# --8<-- [start:plumbing]
REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}


REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/1\.[01]")


class RequestError(Exception):
    """A request we refuse; carries the status code to answer with."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def build_response(status: int, body: bytes) -> bytes:
    """Serialise a complete HTTP/1.1 response that closes the connection."""
    content_type = "text/html; charset=utf-8" if status == 200 else "text/plain; charset=utf-8"
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
        "Connection: close\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


def parse_request_head(head: bytes) -> str:
    """Validate a request head (without the blank line); return its method."""
    request_line, *header_lines = head.split(b"\r\n")
    match = REQUEST_LINE.fullmatch(request_line)
    if match is None:
        raise RequestError(400)
    for line in header_lines:
        name, colon, _ = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise RequestError(400)
    return match.group(1).decode("ascii")


def read_request_head(conn: socket.socket) -> bytes:
    """Read until the blank line that ends the head, however the bytes arrive."""
    received = b""
    while b"\r\n\r\n" not in received:
        if len(received) > MAX_HEAD_BYTES:
            raise RequestError(431)
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("client closed before finishing its request")
        received += chunk
    head, _, _ = received.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise RequestError(431)
    return head


def close_gracefully(conn: socket.socket) -> None:
    """Half-close, then drain what the client still sends, so close() sends FIN, not RST."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(DRAIN_TIMEOUT)
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while time.monotonic() < deadline and conn.recv(65536):
            pass
    except OSError:
        pass  # the client is already gone; nothing left to protect
    finally:
        conn.close()
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated work per request")
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
        serve_forever(listener, args.delay, args.threads, stopping)
    # The requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
