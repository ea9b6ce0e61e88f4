"""Selectors with a timer: one event loop over many sockets; delays wait in timer threads.

The model: the event loop of selectors_blocking_sleep.py, except that the
simulated database call no longer sleeps inside the loop. A threading.Timer
waits out the delay in its own thread, then hands the connection back to the
loop through a queue and wakes the loop with one byte on a socket pair. The
loop alone touches the selector and the sockets: selectors are not thread-safe,
and a timer thread that sent on a non-blocking socket itself could hit
BlockingIOError on a response larger than the socket buffer.
Grows from: selectors_blocking_sleep.py (time.sleep replaced by a timer and a wake-up).

Run:   python servers/selectors_timer.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: one timer thread per request in its delay, so a
flood of requests means a flood of (short-lived) threads: the loop is
single-threaded, the waiting is not. asyncio_streams.py waits without threads.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling clients (a sweep
closes connections whose head is not in after HEAD_TIMEOUT), partial sends, and clients that send
more than we read (we half-close and drain instead of resetting).
"""

from __future__ import annotations

import argparse
import email.utils
import errno
import re
import selectors
import signal
import queue
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
POLL_INTERVAL = 0.5  # how often the event loop looks at the stop flag
ACCEPT_BACKOFF = 0.5  # out of descriptors, how long we stop accepting: a freed one is used within it
OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}  # accept() would fail again at once
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)


# --8<-- [start:model]
def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool]) -> None:
    """Run the event loop until asked to stop and the connections in flight are done."""
    ready: queue.SimpleQueue[Connection] = queue.SimpleQueue()  # timers put connections here
    waiting: set[Connection] = set()  # connections whose timer has not fired yet
    wake_reader, waker = wake_up_pair()  # select() waits on sockets, not on a queue: a timer sends a byte here
    listener.setblocking(False)
    with selectors.DefaultSelector() as selector, wake_reader, waker:
        selector.register(listener, selectors.EVENT_READ)
        selector.register(wake_reader, selectors.EVENT_READ)
        stop = GracefulStop(stopping, selector, listener)
        pause = AcceptPause(selector, listener)  # out of descriptors, accepting pauses instead of spinning
        while not stop.done(in_flight=bool(clients(selector) or waiting)):  # timers in flight count too
            for key, events in selector.select(POLL_INTERVAL):  # the ready sockets; POLL_INTERVAL at most
                if key.fileobj is listener:
                    accept_connection(selector, listener, pause)
                elif key.fileobj is wake_reader:
                    start_responses(selector, wake_reader, ready, waiting, cpu_work)  # calls that are over
                elif events & selectors.EVENT_WRITE:
                    send_response(selector, key.data)
                elif key.data.draining:
                    drain(selector, key.data)
                else:
                    handle_request(selector, key.data, delay, ready, waker, waiting)
            close_idle(selector)
            pause.resume_if_due()
        close_everything(selector, waiting)  # out of grace: stop waiting for them


def handle_request(selector: selectors.BaseSelector, connection: Connection, delay: float,
                   ready: queue.SimpleQueue[Connection], waker: socket.socket, waiting: set[Connection]) -> None:
    """Take what the client sent; once its head is complete, start its call in a timer thread."""
    path = complete_request(selector, connection)
    if path is None:
        return  # not all in yet (the rest comes in a later event), refused, or the client is gone
    connection.outgoing = memoryview(build_page_response(path))  # sent once the delay is over
    selector.unregister(connection.conn)  # meanwhile: a client that half-closed would wake the loop on every turn
    waiting.add(connection)  # so the loop still counts it on stop
    timer = threading.Timer(delay, wake_loop, args=(connection, ready, waker))  # the loop goes back to select()
    timer.daemon = True  # a timer cannot keep the process alive past the grace period
    timer.start()
# --8<-- [end:model]


# --8<-- [start:armour]
def wake_loop(connection: Connection, ready: queue.SimpleQueue[Connection], waker: socket.socket) -> None:
    """In the timer thread: hand the connection back to the loop, touching nothing of the loop's."""
    ready.put(connection)  # SimpleQueue is thread-safe; the selector and the sockets are not ours to touch
    try:
        waker.send(b"\0")  # one byte makes the loop's select() return now
    except BlockingIOError:
        pass  # the socket pair is full of wake-ups already: the loop will wake anyway
    except OSError:
        pass  # the loop has stopped and closed the pair: nobody is waiting for this answer


def wake_up_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of sockets: the loop watches the first, timer threads send on the second."""
    wake_reader, waker = socket.socketpair()
    wake_reader.setblocking(False)
    waker.setblocking(False)  # a timer thread must never wait on the loop
    return wake_reader, waker


def start_responses(selector: selectors.BaseSelector, wake_reader: socket.socket,
                    ready: queue.SimpleQueue[Connection], waiting: set[Connection], cpu_work: int) -> None:
    """Back in the loop: the delays in the queue are over, so send each answer when its socket has room."""
    wake_reader.recv(4096)  # the bytes only woke us; the queue says who is ready
    while not ready.empty():
        connection = ready.get()
        waiting.discard(connection)
        simulated_cpu_work(cpu_work)  # the simulated computation, in the loop's thread: every connection waits
        connection.deadline = time.monotonic() + SEND_TIMEOUT  # one deadline for the whole answer
        selector.register(connection.conn, selectors.EVENT_WRITE, connection)


class GracefulStop:
    """On the first signal, stop accepting; then give the requests in flight SHUTDOWN_GRACE to finish."""

    def __init__(self, stopping: list[bool], selector: selectors.BaseSelector, listener: socket.socket) -> None:
        self.stopping = stopping  # becomes non-empty on SIGINT/SIGTERM
        self.selector = selector
        self.listener = listener
        self.deadline: float | None = None

    def done(self, in_flight: bool) -> bool:
        """Looked at once per turn of the loop: may the loop end now?"""
        if self.stopping and self.deadline is None:
            if self.listener in self.selector.get_map():  # not while accepting is paused
                self.selector.unregister(self.listener)
            self.listener.close()  # stop accepting: new clients are refused, not left in the backlog
            self.deadline = time.monotonic() + SHUTDOWN_GRACE
        return self.deadline is not None and (not in_flight or time.monotonic() > self.deadline)


def close_everything(selector: selectors.BaseSelector, waiting: set[Connection]) -> None:
    """Out of grace (or done): close what is still open."""
    for connection in clients(selector):
        close_connection(selector, connection)
    for connection in waiting:
        connection.conn.close()  # their timers may still fire; wake_loop expects that


class AcceptPause:
    """Out of file descriptors, stop watching the listener for ACCEPT_BACKOFF instead of spinning on it."""

    def __init__(self, selector: selectors.BaseSelector, listener: socket.socket) -> None:
        self.selector = selector
        self.listener = listener
        self.until: float | None = None  # while paused: when to watch the listener again

    def start(self) -> None:
        # accept() failed, but the client is still in the backlog: the listener stays readable,
        # so select() would report it at once on every turn, and accept() fail again: a busy loop.
        self.selector.unregister(self.listener)  # the connections we hold are served meanwhile
        self.until = time.monotonic() + ACCEPT_BACKOFF

    def resume_if_due(self) -> None:
        """Looked at once per turn of the loop: watch the listener again once the back-off is over."""
        if self.until is not None and time.monotonic() >= self.until:
            self.until = None
            if self.listener.fileno() != -1:  # not closed by a stop meanwhile
                self.selector.register(self.listener, selectors.EVENT_READ)


class Connection:
    """What the loop remembers about one client between two events.

    A blocking server keeps this state on its call stack; an event loop that
    juggles many clients in one thread has to keep it somewhere explicit.
    """

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.received = b""  # the request head so far
        self.outgoing = memoryview(b"")  # response bytes the socket has not taken yet (sliced without copying)
        self.draining = False  # answered and half-closed: only reading leftovers now
        self.deadline = time.monotonic() + HEAD_TIMEOUT  # one deadline for the whole head; the sweep closes us after it


def accept_connection(selector: selectors.BaseSelector, listener: socket.socket, pause: AcceptPause) -> None:
    """Accept one waiting client and watch it for its request."""
    try:
        conn, _ = listener.accept()
    except OSError as error:
        if error.errno in OUT_OF_RESOURCES:  # no descriptor (or memory) for the new socket
            pause.start()
        return  # otherwise the client gave up before we got to it
    conn.setblocking(False)  # from now on, no call on this socket may wait
    selector.register(conn, selectors.EVENT_READ, Connection(conn))


def complete_request(selector: selectors.BaseSelector, connection: Connection) -> str | None:
    """Read what has arrived: the path of a complete GET, or None (answering refusals, closing lost clients)."""
    try:
        head = read_request_head(connection)
        if head is None:
            return None  # the rest of the head comes in a later event, before the same deadline
        method, path = parse_request_head(head)
        if method != "GET":
            raise RequestError(405)
        return path
    except RequestError as error:
        connection.outgoing = memoryview(build_refusal(error.status))
        connection.deadline = time.monotonic() + SEND_TIMEOUT  # one deadline for the whole answer
        selector.modify(connection.conn, selectors.EVENT_WRITE, connection)  # send when the socket has room
    except BlockingIOError:
        pass  # woken with nothing to read after all; wait for the next event
    except OSError:
        close_connection(selector, connection)  # reset or early close: this client is lost
    return None


def send_response(selector: selectors.BaseSelector, connection: Connection) -> None:
    """Send as much of the answer as the socket takes; half-close after the last byte."""
    try:
        sent = connection.conn.send(connection.outgoing)  # may take only part of it
    except BlockingIOError:
        return  # no room after all; wait for the next event
    except OSError:
        close_connection(selector, connection)  # reset: this client is lost
        return
    connection.outgoing = connection.outgoing[sent:]
    if not connection.outgoing:
        close_gracefully(selector, connection)
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


def read_request_head(connection: Connection) -> bytes | None:
    """Add what has arrived to the buffer; return the head once its blank line is in."""
    chunk = connection.conn.recv(65536)  # never blocks: the selector said there is data
    if not chunk:
        raise ConnectionError("client closed before finishing its request")
    connection.received += chunk
    head, blank_line, _ = connection.received.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise RequestError(431)
    return head if blank_line else None


def close_gracefully(selector: selectors.BaseSelector, connection: Connection) -> None:
    """Half-close; drain only if the client sent more than we read, so closing sends FIN, not RST."""
    try:
        connection.conn.shutdown(socket.SHUT_WR)
        unread = connection.conn.recv(1, socket.MSG_PEEK)  # look without taking: the socket never blocks
    except BlockingIOError:
        unread = b""  # nothing unread now; a client that sent only its head sends nothing more but its FIN
    except OSError:
        close_connection(selector, connection)  # the client is already gone
        return
    if not unread:
        # Nothing left unread, so closing sends FIN: no need to spend a round trip waiting for the client's.
        close_connection(selector, connection)
        return
    connection.draining = True  # unread bytes would make close() send RST: read them first, for a while
    connection.deadline = time.monotonic() + DRAIN_TIMEOUT
    selector.modify(connection.conn, selectors.EVENT_READ, connection)


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))


def close_connection(selector: selectors.BaseSelector, connection: Connection) -> None:
    """Forget the connection and close its socket."""
    selector.unregister(connection.conn)
    connection.conn.close()


def drain(selector: selectors.BaseSelector, connection: Connection) -> None:
    """Read and discard leftovers; close once the client closes too."""
    try:
        if connection.conn.recv(65536):
            return  # discarded; the sweep closes us at the drain deadline
    except BlockingIOError:
        return  # nothing after all; wait for the next event
    except OSError:
        pass  # the client is already gone
    close_connection(selector, connection)


def clients(selector: selectors.BaseSelector) -> list[Connection]:
    """The connections the loop is serving: everything registered but the listener (and a waker)."""
    return [key.data for key in selector.get_map().values() if isinstance(key.data, Connection)]


def close_idle(selector: selectors.BaseSelector) -> None:
    """Close connections past their deadline: silent clients and finished drains."""
    now = time.monotonic()
    for connection in clients(selector):
        if connection.deadline < now:
            close_connection(selector, connection)
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    args = parser.parse_args()

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    with socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        serve_forever(listener, args.delay, args.work, stopping)
    # The requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
