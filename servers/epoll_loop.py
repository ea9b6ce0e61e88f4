"""epoll loop: one thread, one select.epoll, non-blocking sockets, and a heap of timers.

The model: the kernel keeps the list of sockets we watch (epoll), and each
call to epoll.poll() returns only those that are ready. The loop reads what
has arrived, writes what the socket will take, and keeps every connection's
progress in a Connection object between two events. The simulated database
call is a timer: the connection waits in a heap ordered by due time, and the
loop's poll() timeout is the time left until the first one is due. Nothing
sleeps and nothing runs in another thread, yet every wait overlaps.
Grows from: selectors_timer.py (the same loop, on epoll itself, with its timer
threads replaced by a heap inside the loop).

Run:   python servers/epoll_loop.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Level-triggered, on purpose: epoll reports a socket for as long as it is
readable (or writable), so each handler may do one recv() or send() and leave
the rest to the next turn of the loop. Edge-triggered epoll reports a socket
only when its state changes: each handler would have to read, write or accept
until BlockingIOError, or never hear from that socket again.
Known limits, on purpose: Linux only (epoll); one thread for everything, so
any call that blocks freezes every connection; Python work is not spread over
CPUs.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling clients (a sweep
closes connections whose head is not in after HEAD_TIMEOUT), partial sends, and clients that send
more than we read (we half-close and drain instead of resetting).
"""

from __future__ import annotations

import argparse
import email.utils
import errno
import heapq
import itertools
import re
import select
import signal
import socket
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
POLL_INTERVAL = 0.5  # the longest the loop waits in poll(): it looks at the stop flag and deadlines this often
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
    listener.setblocking(False)
    listener_fd = listener.fileno()
    with select.epoll() as epoll:
        loop = Loop(epoll, delay, cpu_work)
        epoll.register(listener_fd, select.EPOLLIN)
        stop = GracefulStop(stopping, epoll, listener)
        pause = AcceptPause(epoll, listener)  # out of descriptors, accepting pauses instead of spinning
        while not stop.done(in_flight=loop.in_flight()):
            for fd, _ in epoll.poll(poll_timeout(loop)):  # only the ready sockets; never past the next timer
                if fd == listener_fd:
                    accept_connections(loop, listener, pause)
                elif fd in loop.watched:  # not closed earlier in this same batch of events
                    on_ready(loop, loop.watched[fd])  # by its state, not the event bits: send, drain or read
            fire_due_timers(loop)
            close_idle(loop)
            pause.resume_if_due()
        close_everything(loop)  # out of grace: stop waiting for them


def handle_request(loop: Loop, connection: Connection) -> None:
    """Take what the client sent; once its head is complete, start the call or answer at once."""
    if not complete_request(loop, connection):
        return  # not all in yet (the rest comes in a later event), refused, or the client is gone
    if loop.delay <= 0:  # no call to wait for
        simulated_cpu_work(loop.cpu_work)  # the simulated computation, in the loop's thread: every connection waits
        start_response(loop, connection, build_page_response(connection.path))
    else:  # the call is a timer in the heap, not a sleep; the socket leaves epoll while it waits
        loop.unwatch(connection)  # (a client that half-closed would be reported readable on every turn)
        heapq.heappush(loop.timers, (time.monotonic() + loop.delay, next(loop.tie_breaker), connection))


def fire_due_timers(loop: Loop) -> None:
    """The calls that are over: answer their clients."""
    now = time.monotonic()
    while loop.timers and loop.timers[0][0] <= now:
        _, _, connection = heapq.heappop(loop.timers)
        simulated_cpu_work(loop.cpu_work)  # the simulated computation, in the loop's thread: every connection waits
        start_response(loop, connection, build_page_response(connection.path))
# --8<-- [end:model]


# --8<-- [start:armour]
class Connection:
    """What the loop remembers about one client between two events."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.fd = conn.fileno()  # kept: fileno() is -1 once the socket is closed
        self.received = b""  # the request head so far
        self.path = "/"  # what the request asked for, kept while its call is in the heap
        self.outgoing = memoryview(b"")  # response bytes the socket has not taken yet (sliced without copying)
        self.draining = False  # answered and half-closed: only reading leftovers now
        self.deadline = time.monotonic() + HEAD_TIMEOUT  # one deadline for the whole head; the sweep closes us after it


class Loop:
    """The epoll object, the connections it watches, and the timers: everything the loop owns."""

    def __init__(self, epoll: select.epoll, delay: float, cpu_work: int) -> None:
        self.epoll = epoll
        self.delay = delay
        self.cpu_work = cpu_work
        self.watched: dict[int, Connection] = {}  # registered with epoll, by file descriptor
        self.timers: list[tuple[float, int, Connection]] = []  # (due, tie-breaker, connection), a heap
        self.tie_breaker = itertools.count()  # equal due times never compare two Connections

    def watch(self, connection: Connection, events: int) -> None:
        """Register a connection with epoll, or change what we wait for on it."""
        if connection.fd in self.watched:
            self.epoll.modify(connection.fd, events)
        else:
            self.epoll.register(connection.fd, events)
            self.watched[connection.fd] = connection

    def unwatch(self, connection: Connection) -> None:
        """Stop watching a connection (it stays open)."""
        self.epoll.unregister(connection.fd)
        del self.watched[connection.fd]

    def in_flight(self) -> bool:
        return bool(self.watched or self.timers)


class GracefulStop:
    """On the first signal, stop accepting; then give the requests in flight SHUTDOWN_GRACE to finish."""

    def __init__(self, stopping: list[bool], epoll: select.epoll, listener: socket.socket) -> None:
        self.stopping = stopping  # becomes non-empty on SIGINT/SIGTERM
        self.epoll = epoll
        self.listener = listener
        self.deadline: float | None = None

    def done(self, in_flight: bool) -> bool:
        """Looked at once per turn of the loop: may the loop end now?"""
        if self.stopping and self.deadline is None:
            self.epoll.unregister(self.listener)
            self.listener.close()  # stop accepting: new clients are refused, not left in the backlog
            self.deadline = time.monotonic() + SHUTDOWN_GRACE
        return self.deadline is not None and (not in_flight or time.monotonic() > self.deadline)


class AcceptPause:
    """Out of file descriptors, stop watching the listener for ACCEPT_BACKOFF instead of spinning on it."""

    def __init__(self, epoll: select.epoll, listener: socket.socket) -> None:
        self.epoll = epoll
        self.listener = listener
        self.until: float | None = None  # while paused: when to watch the listener again

    def start(self) -> None:
        # accept() failed, but the client is still in the backlog: the listener stays readable (level-
        # triggered), so poll() would report it at once on every turn, and accept() fail again: a busy loop.
        self.epoll.modify(self.listener, 0)  # still registered, reported for nothing; the connections go on
        self.until = time.monotonic() + ACCEPT_BACKOFF

    def resume_if_due(self) -> None:
        """Looked at once per turn of the loop: watch the listener again once the back-off is over."""
        if self.until is not None and time.monotonic() >= self.until:
            self.until = None
            if self.listener.fileno() != -1:  # not closed by a stop meanwhile
                self.epoll.modify(self.listener, select.EPOLLIN)


def close_everything(loop: Loop) -> None:
    """Out of grace (or done): close what is still open, watched or waiting for its timer."""
    for connection in list(loop.watched.values()):
        close_connection(loop, connection)
    for _, _, connection in loop.timers:
        connection.conn.close()


def accept_connections(loop: Loop, listener: socket.socket, pause: AcceptPause) -> None:
    """Accept every client waiting in the backlog and watch each for its request."""
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return  # the backlog is empty
        except OSError as error:
            if error.errno in OUT_OF_RESOURCES:  # no descriptor (or memory) for the new socket
                pause.start()
            return  # otherwise a client gave up before we got to it; epoll reports the rest next turn
        conn.setblocking(False)  # from now on, no call on this socket may wait
        loop.watch(Connection(conn), select.EPOLLIN)


def on_ready(loop: Loop, connection: Connection) -> None:
    """Do the next step for a socket epoll reported, chosen by the connection's state.

    Not by the event bits: an event may belong to a socket closed earlier in this
    batch whose number a new connection has already taken.
    """
    if connection.outgoing:
        send_response(loop, connection)
    elif connection.draining:
        drain(loop, connection)
    else:
        handle_request(loop, connection)


def complete_request(loop: Loop, connection: Connection) -> bool:
    """Read what has arrived: True once a GET's head is complete (answering refusals, closing lost clients)."""
    try:
        head = read_request_head(connection)
        if head is None:
            return False  # the rest of the head comes in a later event, before the same deadline
        method, connection.path = parse_request_head(head)
        if method != "GET":
            raise RequestError(405)
        return True
    except RequestError as error:
        start_response(loop, connection, build_refusal(error.status))
    except BlockingIOError:
        pass  # woken with nothing to read after all; wait for the next event
    except OSError:
        close_connection(loop, connection)  # reset or early close: this client is lost
    return False


def start_response(loop: Loop, connection: Connection, response: bytes) -> None:
    """Queue the answer; epoll tells us when the socket has room for it."""
    connection.outgoing = memoryview(response)
    connection.deadline = time.monotonic() + SEND_TIMEOUT  # one deadline for the whole answer
    loop.watch(connection, select.EPOLLOUT)  # level-triggered: reported at once if there is room now


def send_response(loop: Loop, connection: Connection) -> None:
    """Send as much of the answer as the socket takes; half-close after the last byte."""
    try:
        sent = connection.conn.send(connection.outgoing)  # may take only part of it
    except BlockingIOError:
        return  # no room after all; wait for the next event
    except OSError:
        close_connection(loop, connection)  # reset: this client is lost
        return
    connection.outgoing = connection.outgoing[sent:]
    if not connection.outgoing:
        close_gracefully(loop, connection)
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
    chunk = connection.conn.recv(65536)  # never blocks: epoll said there is data (or an EOF)
    if not chunk:
        raise ConnectionError("client closed before finishing its request")
    connection.received += chunk
    head, blank_line, _ = connection.received.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise RequestError(431)
    return head if blank_line else None


def close_gracefully(loop: Loop, connection: Connection) -> None:
    """Half-close; drain only if the client sent more than we read, so closing sends FIN, not RST."""
    try:
        connection.conn.shutdown(socket.SHUT_WR)
        unread = connection.conn.recv(1, socket.MSG_PEEK)  # look without taking: the socket never blocks
    except BlockingIOError:
        unread = b""  # nothing unread now; a client that sent only its head sends nothing more but its FIN
    except OSError:
        close_connection(loop, connection)  # the client is already gone
        return
    if not unread:
        # Nothing left unread, so closing sends FIN: no need to spend a round trip waiting for the client's.
        close_connection(loop, connection)
        return
    connection.draining = True  # unread bytes would make close() send RST: read them first, for a while
    connection.deadline = time.monotonic() + DRAIN_TIMEOUT
    loop.watch(connection, select.EPOLLIN)


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))


def close_connection(loop: Loop, connection: Connection) -> None:
    """Forget the connection and close its socket."""
    if connection.fd in loop.watched:
        loop.unwatch(connection)
    connection.conn.close()


def drain(loop: Loop, connection: Connection) -> None:
    """Read and discard leftovers; close once the client closes too."""
    try:
        if connection.conn.recv(65536):
            return  # discarded; the sweep closes us at the drain deadline
    except BlockingIOError:
        return  # nothing after all; wait for the next event
    except OSError:
        pass  # the client is already gone
    close_connection(loop, connection)


def close_idle(loop: Loop) -> None:
    """Close connections past their deadline: silent clients and finished drains."""
    now = time.monotonic()
    for connection in list(loop.watched.values()):
        if connection.deadline < now:
            close_connection(loop, connection)


def poll_timeout(loop: Loop) -> float:
    """Wait until the first timer is due, but never longer than POLL_INTERVAL."""
    if not loop.timers:
        return POLL_INTERVAL
    return max(0.0, min(POLL_INTERVAL, loop.timers[0][0] - time.monotonic()))
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
