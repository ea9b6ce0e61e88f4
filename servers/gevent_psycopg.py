"""gevent with PostgreSQL: a greenlet per connection, each with its own psycopg 3 connection, monkey-patched.

The model: thread_per_connection.py, with the simulated database call made
real and no pool: the thread that answers a client connects to PostgreSQL
itself, runs the request's query (`--query`: sleep is `SELECT pg_sleep(delay)`,
the articles' 100 ms call for real; single reads one random row of `world`;
multiple reads MULTIPLE_ROWS rows, one query each; GET /db and GET /queries
ask single and multiple whatever --query says) and closes that connection after
the query. One request, one database connection: the simplest thing that
works, and every request pays for a new one (a TCP handshake, the start-up
exchange with its scram-sha-256 authentication, and a new PostgreSQL backend
process), even on an HTTP connection the client keeps open: the thread
answers request after request on it (HTTP/1.1 keep-alive) until the client
closes, says Connection: close, or is silent for KEEP_ALIVE_TIMEOUT. The answer is the
usual page; the header X-Query-Result says what the database returned.
Under gevent: monkey.patch_all() turns every thread into a greenlet and
every blocking socket call into a switch. psycopg 3 is not a socket user of
Python's (libpq owns its socket), yet from 3.1.14 on it sees the patched
select module and waits on libpq's socket through it: its queries yield to
the other greenlets (psycopg.waiting, the wait_select path).
Grows from: thread_per_connection_psycopg.py (the same file, monkey-patched
first: a test keeps the two identical but for those lines).

Run:   python servers/gevent_psycopg.py --dsn postgresql://bench@127.0.0.1:5432/bench
       [--query sleep] [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
       (or set DATABASE_URL; python scripts/bench.py serve gevent-psycopg starts a scratch PostgreSQL)
Load:  wrk -c 50 -d 10s http://127.0.0.1:8000/db   or   ab -k -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: one thread and one PostgreSQL connection (a backend
process) per client, uncapped: more clients than the server's max_connections
and the extra ones fail ("too many clients already"), their requests dropped.
A request whose query fails gets no answer: its connection is closed and the
error printed, as for a client lost mid-answer. --delay is for sleep alone.
On stop, threads still running after SHUTDOWN_GRACE are abandoned, not joined.
Threads overlap waiting, not computing: with --work, the GIL lets one thread
at a time run Python code.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling
clients (HEAD_TIMEOUT for a whole head from its first byte, KEEP_ALIVE_TIMEOUT
between requests), and clients
that send more than we read (we half-close and drain instead of resetting).
"""

from gevent import monkey  # first, before any other import, so every later one gets the patched modules
monkey.patch_all()  # socket, time.sleep, threading, select... now switch greenlets instead of blocking
import argparse
import errno
import email.utils
import os
import random
import re
import signal
import socket
import sys
import threading
import time

import psycopg

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
CONNECT_TIMEOUT = 10  # seconds a thread waits for its own database connection (libpq takes whole seconds)
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
def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool], dsn: str,
                  query: str) -> None:
    """Accept connections and answer each in its own thread until asked to stop."""
    handlers: list[tuple[threading.Thread, socket.socket]] = []  # only this thread touches the list: no lock needed
    listener.settimeout(POLL_INTERVAL)
    while not stopping:
        if (conn := accept_or_wait(listener)) is None:
            continue  # no client within POLL_INTERVAL, or no file descriptor free for a moment
        handlers = [(handler, open_conn) for handler, open_conn in handlers if handler.is_alive()]
        handler = threading.Thread(target=handle_connection, args=(conn, delay, cpu_work, dsn, query, stopping),
                                   daemon=True)
        if start_or_refuse(handler, conn):  # started: the accept loop goes straight back to accept()
            handlers.append((handler, conn))
    stop_handlers(listener, handlers)


def handle_connection(conn: socket.socket, delay: float, cpu_work: int, dsn: str, query: str,
                      stopping: list[bool]) -> None:
    """Answer requests on one connection until the client or a timeout ends it, then close it."""
    received, keep_alive = bytearray(), True  # received: bytes read past the current head (the next request's)
    try:
        while keep_alive and not stopping:
            try:
                if (head := read_request_head(conn, received)) is None:
                    break  # the client closed (or went idle too long) between two requests
                method, target, keep_alive = parse_request_head(head)
                if method != "GET":
                    raise RequestError(405)
                headers = {"X-Query-Result": run_query(dsn, PATH_QUERIES.get(target, query), delay)}  # connect, query
                simulated_cpu_work(cpu_work)  # the simulated computation: holds the GIL, so the other threads wait
                response = add_headers(build_page_response(target, keep_alive and not stopping), headers)
            except RequestError as error:
                keep_alive = False  # what follows a refused head cannot be trusted to be a request
                response = build_refusal(error.status)
            conn.settimeout(SEND_TIMEOUT)  # sendall counts it for the whole answer, not per send
            conn.sendall(response)
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on
    finally:
        close_gracefully(conn)
# --8<-- [end:model]


# --8<-- [start:query]
def run_query(dsn: str, query: str, delay: float) -> str:
    """The request's database call on a connection of its own; what the database returned, in a few words."""
    try:
        # autocommit: each SELECT is its own transaction, with no BEGIN and COMMIT round trips around it.
        with psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as db:  # closed after
            if query == "sleep":
                db.execute("SELECT pg_sleep(%s)", (delay,))  # the database waits; this thread waits for its answer
                return f"pg_sleep {delay:g}"
            ids = [random.randint(1, WORLD_ROWS) for _ in range(1 if query == "single" else MULTIPLE_ROWS)]
            rows = [db.execute("SELECT id, randomnumber FROM world WHERE id = %s", (row_id,)).fetchone()
                    for row_id in ids]
    except psycopg.Error as error:  # refused, too many clients, or a failed query: this request is lost
        print(f"database error, request dropped: {error}", file=sys.stderr, flush=True)
        raise ConnectionAbortedError("the database call failed") from error
    return " ".join(f"{row_id}={number}" for row_id, number in rows)
# --8<-- [end:query]


# --8<-- [start:armour]
def start_or_refuse(handler: threading.Thread, conn: socket.socket) -> bool:
    """Start a connection's thread; if no thread can be started, refuse that client and go on."""
    try:
        handler.start()
    except RuntimeError:  # "can't start new thread": out of memory or over the thread limit
        conn.close()  # this client is refused; the server and the clients it has go on
        return False
    return True


def stop_handlers(listener: socket.socket, handlers: list[tuple[threading.Thread, socket.socket]]) -> None:
    """Stop accepting, wake the idle connections, then give the requests in flight SHUTDOWN_GRACE to finish.

    The threads are daemons: one stuck on a client past the grace period cannot keep the process alive.
    """
    listener.close()  # stop accepting: new clients are refused, not left in the backlog
    for handler, conn in handlers:
        try:
            conn.shutdown(socket.SHUT_RD)  # wakes a thread parked in recv() on an idle connection: it sees the end
        except OSError:
            pass  # that connection is already closed
    deadline = time.monotonic() + SHUTDOWN_GRACE  # one deadline shared by all, not 5 s each
    for handler, _ in handlers:
        handler.join(max(0.0, deadline - time.monotonic()))


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
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"), help="PostgreSQL DSN (default: $DATABASE_URL)")
    parser.add_argument("--query", choices=QUERIES, default="sleep", help="what each request asks the database")
    args = parser.parse_args()
    if not args.dsn:
        parser.error("no database: give --dsn or set DATABASE_URL")

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    try:  # one connection now, so a database that is down or refuses us fails at start, not per request
        psycopg.connect(args.dsn, connect_timeout=CONNECT_TIMEOUT).close()
    except psycopg.Error as error:
        sys.exit(f"cannot connect to {args.dsn}: {error}")
    with socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (query {args.query}, delay {args.delay} s, a database connection "
              "per client); Ctrl-C stops", flush=True)
        serve_forever(listener, args.delay, args.work, stopping, args.dsn, args.query)
    # The requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
