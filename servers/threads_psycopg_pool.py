"""Thread pool with PostgreSQL: each request's call is a real query, on a connection from a psycopg pool.

The model: thread_pool_executor.py, with the simulated database call made
real. The THREADS pool threads answer as before; each borrows a connection
from a psycopg_pool.ConnectionPool of POOL_SIZE connections, opened at start,
runs the request's query on it (`--query`: sleep is `SELECT pg_sleep(delay)`,
the articles' 100 ms call for real; single reads one random row of `world`;
multiple reads MULTIPLE_ROWS rows, one query each) and gives it back. GET /db and GET /queries ask single and multiple
whatever --query says (TechEmpower's paths). The answer is the usual page; the
header X-Query-Result says what the database returned, and X-Pool-Wait-Us how
long the request waited for a free connection. Connections stay open between
requests (HTTP/1.1 keep-alive): a thread answers one request, then gives the
connection back to the accept thread, which watches it with a selector
(Waiting) until the next request begins, as Gunicorn's gthread worker does, so
an idle client holds no thread; a connection silent for KEEP_ALIVE_TIMEOUT is
closed.
Grows from: thread_pool_executor.py (time.sleep(delay) becomes a query on a
pooled connection, and connections are kept between requests).

Run:   python servers/threads_psycopg_pool.py --dsn postgresql://bench@127.0.0.1:5432/bench [--query sleep]
       [--pool-size 16] [--threads 16] [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
       (or set DATABASE_URL; python scripts/bench.py serve threads-psycopg-pool starts a scratch PostgreSQL)
Load:  wrk -c 50 -d 10s http://127.0.0.1:8000/db   or   ab -k -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: at most min(THREADS, POOL_SIZE) queries at once; a
thread that finds every connection lent waits up to POOL_TIMEOUT for one. A
request whose query fails (the database went away, or no connection came in
time) gets no answer: its connection is closed and the error printed, as for a
client lost mid-answer (an error status would need a reason the shared plumbing does not
have). --delay is for sleep alone: the queries of single and multiple are the call.
Otherwise as thread_pool_executor.py: an unbounded queue behind the threads,
and --work computes one thread at a time under the GIL.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling
clients (HEAD_TIMEOUT for a whole head from its first byte, KEEP_ALIVE_TIMEOUT
between requests), and clients
that send more than we read (we half-close and drain instead of resetting).
"""

import argparse
import concurrent.futures
import contextlib
import errno
import email.utils
import os
import queue
import random
import re
import selectors
import signal
import socket
import sys
import time

import psycopg
from psycopg_pool import ConnectionPool

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of database sleep per request (--query sleep: SELECT pg_sleep(DELAY))
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
BACKLOG = 128  # pending connections the kernel queues for us
MAX_HEAD_BYTES = 64 * 1024  # larger request heads get 431
HEAD_TIMEOUT = 10.0  # the whole request head must arrive within this, however slowly it trickles in
SEND_TIMEOUT = 10.0  # the whole answer must be taken within this, however slowly the client reads
KEEP_ALIVE_TIMEOUT = 5.0  # an idle connection between two requests is closed after this
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
POLL_INTERVAL = 0.5  # how often the accept loop looks at the stop flag
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
# More than the ten clients of the concurrency test and fewer than the fifty of
# the article's load: see the page. The library's own default, min(32, CPUs + 4),
# is sized for CPU work and would change from machine to machine.
THREADS = 16
# As many connections as threads: fewer would make threads wait for a connection, more would sit idle.
POOL_SIZE = 16
POOL_TIMEOUT = 10.0  # how long a thread waits for a free connection before its request is dropped
CONNECT_TIMEOUT = 10.0  # at start, every connection of the pool must be open within this
QUERIES = ("sleep", "single", "multiple")  # --query: what each request asks the database
PATH_QUERIES = {b"/db": "single", b"/queries": "multiple"}  # TechEmpower's paths choose their query; any other, --query
WORLD_ROWS = 10_000  # rows in the world table (harness/system/postgres.py seeds it)
MULTIPLE_ROWS = 20  # rows read by --query multiple, one query each
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)


# --8<-- [start:model]
def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool],
                  threads: int, pool: ConnectionPool, query: str) -> None:
    """Hand each request that begins to the pool until asked to stop; between requests, no thread waits."""
    pending: list[tuple[concurrent.futures.Future[None], socket.socket]] = []  # (task, its connection), unfinished
    with (Waiting(listener) as waiting,  # new and kept-alive connections, watched until their next request begins
          concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="handler") as executor):
        while not stopping:
            for conn, received in waiting.ready():  # within POLL_INTERVAL
                pending = [(task, client) for task, client in pending if not task.done()]  # forget finished ones
                # submit returns at once: a free thread runs the task, or it waits in the queue.
                task = executor.submit(handle_request, conn, received, delay, cpu_work, pool, query, stopping, waiting)
                pending.append((task, conn))
        stop_pending(listener, pending)  # then leaving the with block waits for the running ones


def handle_request(conn: socket.socket, received: bytearray, delay: float, cpu_work: int, pool: ConnectionPool,
                   query: str, stopping: list[bool], waiting: "Waiting") -> None:
    """Answer the connection's next request, then give it back to `waiting` for the one after (or close it)."""
    keep_alive = False  # until a request asks for it
    try:
        try:
            if (head := read_request_head(conn, received)) is None:
                raise ConnectionError("the client closed between two requests")
            method, target, keep_alive = parse_request_head(head)
            if method != "GET":
                raise RequestError(405)
            result, waited = run_query(pool, PATH_QUERIES.get(target, query), delay)  # only this thread waits
            simulated_cpu_work(cpu_work)  # the simulated computation: holds the GIL, so the other threads wait
            response = add_headers(build_page_response(target, keep_alive and not stopping),  # stopping: we close
                                   {"X-Query-Result": result, "X-Pool-Wait-Us": f"{waited}"})
        except RequestError as error:
            keep_alive = False  # what follows a refused head cannot be trusted to be a request
            response = build_refusal(error.status)
        conn.settimeout(SEND_TIMEOUT)  # sendall counts it for the whole answer, not per send
        conn.sendall(response)
    except OSError:
        keep_alive = False  # timeout, reset or early close: this client is lost, the server goes on
    waiting.give_back(conn, received, keep_alive and not stopping)
# --8<-- [end:model]


# --8<-- [start:query]
def run_query(pool: ConnectionPool, query: str, delay: float) -> tuple[str, int]:
    """The request's database call on a borrowed connection: what the database returned, in a few words,
    and how long the request waited for a connection, in microseconds (0 while one is free)."""
    asked = time.perf_counter()
    try:
        with pool.connection() as db:  # a free connection, or wait for one (POOL_TIMEOUT); given back after
            waited_us = round((time.perf_counter() - asked) * 1e6)  # the pool's queue, not the query
            if query == "sleep":
                db.execute("SELECT pg_sleep(%s)", (delay,))  # the database waits; this thread waits for its answer
                return f"pg_sleep {delay:g}", waited_us
            ids = [random.randint(1, WORLD_ROWS) for _ in range(1 if query == "single" else MULTIPLE_ROWS)]
            rows = [db.execute("SELECT id, randomnumber FROM world WHERE id = %s", (row_id,)).fetchone()
                    for row_id in ids]
    except psycopg.Error as error:  # failed, or no connection came: this request is lost, like a client that left
        print(f"database error, request dropped: {error}", file=sys.stderr, flush=True)
        raise ConnectionAbortedError("the database call failed") from error
    return " ".join(f"{row_id}={number}" for row_id, number in rows), waited_us
# --8<-- [end:query]


# --8<-- [start:armour]
def stop_pending(listener: socket.socket, pending: list[tuple[concurrent.futures.Future[None], socket.socket]]) -> None:
    """Stop accepting, give the tasks SHUTDOWN_GRACE, then cancel the queued ones and cut the running ones short."""
    listener.close()  # stop accepting: new clients are refused, not left in the backlog
    concurrent.futures.wait([task for task, _ in pending], timeout=SHUTDOWN_GRACE)
    for task, conn in pending:
        if task.cancel():
            conn.close()  # still queued, out of grace: it will never run
        elif not task.done():
            # Running, out of grace. The executor's threads cannot be
            # abandoned (the interpreter joins them at exit), so end the
            # conversation: every recv or send on it now returns at once.
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # it closed in the meantime


def build_page_response(target: bytes, keep_alive: bool) -> bytes:
    """The answer to a GET: the page, or GET /big's megabyte of text."""
    if target.partition(b"?")[0] == b"/big":
        return build_response(200, BIG_BODY, keep_alive, "text/plain; charset=utf-8")
    return build_response(200, BODY, keep_alive, "text/html; charset=utf-8")


def build_refusal(status: int) -> bytes:
    """The answer to a refused head; the connection closes after it."""
    return build_response(status, f"{status} {REASONS[status]}\n".encode(), False, "text/plain; charset=utf-8")


def read_request_head(conn: socket.socket, received: bytearray) -> bytes | None:
    """Read until the blank line that ends the next head; None if the client closed or idled between requests."""
    # One deadline for the whole head, from its first byte (a pipelined one has begun already), not one per recv.
    deadline = time.monotonic() + HEAD_TIMEOUT if received else None
    while (end := received.find(b"\r\n\r\n")) == -1:
        if len(received) > MAX_HEAD_BYTES:
            raise RequestError(431)
        if deadline is None:
            conn.settimeout(KEEP_ALIVE_TIMEOUT)  # between requests: how long the next one may take to begin
        else:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the request head took longer than HEAD_TIMEOUT")
            conn.settimeout(remaining)  # so a client trickling a byte at a time still runs out of time
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            if received:
                raise  # silent inside a request: the client is lost
            return None  # idle for KEEP_ALIVE_TIMEOUT between requests: close politely
        if not chunk:
            if received:
                raise ConnectionError("client closed before finishing its request")
            return None
        if deadline is None:
            deadline = time.monotonic() + HEAD_TIMEOUT  # a head has begun: HEAD_TIMEOUT for all of it
        received += chunk
    if end > MAX_HEAD_BYTES:
        raise RequestError(431)
    head = bytes(received[:end])
    del received[:end + 4]  # keep what follows: a pipelined next request
    return head

class Waiting:
    """The connections no request is using (new clients, kept-alive ones between two requests), watched by the
    accept thread with a selector, as Gunicorn's gthread worker does: an idle client holds no thread.

    Only the accept thread touches the selector: a handler gives its connection back through a queue and wakes
    select() with a byte on a socket pair. A connection silent for KEEP_ALIVE_TIMEOUT is closed.
    """

    def __init__(self, listener: socket.socket) -> None:
        self.listener = listener
        self.selector = selectors.DefaultSelector()
        self.given_back: queue.SimpleQueue[tuple[socket.socket, bytearray]] = queue.SimpleQueue()
        self.wake_reader, self.wake_writer = socket.socketpair()
        self.wake_writer.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ)
        self.selector.register(self.wake_reader, selectors.EVENT_READ)

    def __enter__(self) -> "Waiting":
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close every connection still watched or given back, then the selector and the socket pair."""
        while not self.given_back.empty():
            close_gracefully(self.given_back.get()[0])
        for key in list(self.selector.get_map().values()):
            if key.data is not None:
                close_gracefully(key.fileobj)  # type: ignore[arg-type]  # only our sockets carry data
        self.selector.close()
        self.wake_reader.close()
        self.wake_writer.close()

    def give_back(self, conn: socket.socket, received: bytearray, keep_alive: bool) -> None:
        """From a handler's thread: watch a kept-alive connection for its next request; close any other."""
        if not keep_alive:
            close_gracefully(conn)
            return
        self.given_back.put((conn, received))
        with contextlib.suppress(BlockingIOError):  # the pair is full: select() has a wake-up to read already
            self.wake_writer.send(b"\0")

    def ready(self) -> list[tuple[socket.socket, bytearray]]:
        """Wait up to POLL_INTERVAL; the connections whose next request has begun, with what was read of it."""
        began: list[tuple[socket.socket, bytearray]] = []
        for key, _ in self.selector.select(POLL_INTERVAL):
            if key.fileobj is self.listener:
                if (conn := accept_or_wait(self.listener)) is not None:
                    self.watch(conn, bytearray())  # a new client: watched until it sends its first request
            elif key.fileobj is self.wake_reader:
                self.wake_reader.recv(4096)
                self.take_given_back(began)
            else:
                self.selector.unregister(key.fileobj)
                began.append((key.fileobj, key.data[0]))  # type: ignore[arg-type]  # only our sockets carry data
        now = time.monotonic()
        for key in list(self.selector.get_map().values()):
            if key.data is not None and key.data[1] < now:  # silent for KEEP_ALIVE_TIMEOUT: close politely
                self.selector.unregister(key.fileobj)
                close_gracefully(key.fileobj)  # type: ignore[arg-type]
        return began

    def take_given_back(self, began: list[tuple[socket.socket, bytearray]]) -> None:
        """Watch the connections handlers gave back; one whose next request was read already (pipelined) has begun."""
        while not self.given_back.empty():
            conn, received = self.given_back.get()
            if received:
                began.append((conn, received))  # no new bytes may come: the selector would never say so
            else:
                self.watch(conn, received)

    def watch(self, conn: socket.socket, received: bytearray) -> None:
        """Watch a connection until it sends (its next request begins) or stays silent KEEP_ALIVE_TIMEOUT."""
        self.selector.register(conn, selectors.EVENT_READ, (received, time.monotonic() + KEEP_ALIVE_TIMEOUT))
# --8<-- [end:armour]


# --8<-- [start:plumbing]
REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}


REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/1\.[01]")


class RequestError(Exception):
    """A request we refuse; carries the status code to answer with."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def build_response(status: int, body: bytes, keep_alive: bool, content_type: str) -> bytes:
    """Serialise a complete HTTP/1.1 response; it says whether the connection stays open."""
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


def add_headers(response: bytes, headers: dict[str, str]) -> bytes:
    """The response with more header lines, after the others."""
    head, _, body = response.partition(b"\r\n\r\n")
    lines = "".join(f"\r\n{name}: {value}" for name, value in headers.items())
    return head + lines.encode("ascii") + b"\r\n\r\n" + body


def parse_request_head(head: bytes) -> tuple[str, bytes, bool]:
    """Validate a request head (without the blank line); return its method, target and whether to keep alive."""
    request_line, *header_lines = head.split(b"\r\n")
    match = REQUEST_LINE.fullmatch(request_line)
    if match is None:
        raise RequestError(400)
    connection, has_body = b"", False
    for line in header_lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise RequestError(400)
        name = name.lower()
        if name == b"connection":
            connection += b"," + value.lower()  # the header may be repeated: its tokens add up
        elif name == b"content-length":
            has_body = has_body or value.strip() != b"0"
        elif name == b"transfer-encoding":
            has_body = True
    tokens = {token.strip() for token in connection.split(b",")}
    # HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 closes unless asked to keep it.
    keep_alive = b"close" not in tokens if request_line.endswith(b"/1.1") else b"keep-alive" in tokens
    return match.group(1).decode("ascii"), match.group(2), keep_alive and not has_body


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
    parser.add_argument("--delay", type=float, default=DELAY,
                        help="seconds of the simulated call, made real: pg_sleep's argument (--query sleep)")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--threads", type=int, default=THREADS, help="threads in the pool")
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"), help="PostgreSQL DSN (default: $DATABASE_URL)")
    parser.add_argument("--pool-size", type=int, default=POOL_SIZE, help="database connections in the pool")
    parser.add_argument("--query", choices=QUERIES, default="sleep", help="what each request asks the database")
    args = parser.parse_args()
    if not args.dsn:
        parser.error("no database: give --dsn or set DATABASE_URL")

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    # Every connection opened now, before listening: not during the first requests. autocommit: each
    # SELECT is its own transaction, with no BEGIN and COMMIT round trips around it.
    pool = ConnectionPool(args.dsn, min_size=args.pool_size, max_size=args.pool_size, timeout=POOL_TIMEOUT,
                          kwargs={"autocommit": True}, open=False)
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except psycopg.Error as error:
        sys.exit(f"cannot open {args.pool_size} connections to {args.dsn}: {error}")
    with pool, socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (query {args.query}, delay {args.delay} s, {args.pool_size} "
              "connections); Ctrl-C stops", flush=True)
        serve_forever(listener, args.delay, args.work, stopping, args.threads, pool, args.query)
    # The requests in flight finished (or ran out of grace) inside serve_forever; the pool closed its connections.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
