"""asyncio with PostgreSQL: each request's call is a real query, awaited on a connection from an asyncpg pool.

The model: asyncio_streams.py, with the simulated database call made real.
Each connection still gets a coroutine; it borrows a connection from an
asyncpg pool of POOL_SIZE connections, opened at start, awaits the request's
query on it (`--query`: sleep is `SELECT pg_sleep(delay)`, the articles'
100 ms call for real; single reads one random row of `world`; multiple reads
MULTIPLE_ROWS rows, one query each) and gives it back. While a query is out,
the loop runs the other coroutines: asyncpg speaks PostgreSQL's protocol on
the loop's own sockets. GET /db and GET /queries ask single and
multiple whatever --query says (TechEmpower's paths). The answer is the usual
page; the header X-Query-Result says what the database returned, and
X-Pool-Wait-Us how long the request waited for a free connection.
Connections stay open between requests (HTTP/1.1 keep-alive): the coroutine
waits for the next request's first byte, up to KEEP_ALIVE_TIMEOUT, or until a
stop, which closes an idle connection at once.
Grows from: asyncio_streams.py (asyncio.sleep(delay) becomes a query on a
pooled connection).

Run:   python servers/asyncio_asyncpg.py --dsn postgresql://bench@127.0.0.1:5432/bench [--query sleep]
       [--pool-size 16] [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
       (or set DATABASE_URL; python scripts/bench.py serve asyncio-asyncpg starts a scratch PostgreSQL)
Load:  wrk -c 50 -d 10s http://127.0.0.1:8000/db   or   ab -k -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: at most POOL_SIZE queries at once, however many
coroutines: the others wait in the pool's queue, up to POOL_TIMEOUT. A request
whose query fails (the database went away) or times out waiting for a
connection gets no answer: its connection is closed, as for a client lost
mid-answer (an error status would need a reason the shared plumbing does not
have). --delay is for sleep alone: the queries of single and multiple are the call.
Otherwise as asyncio_streams.py: one thread for everything, so a blocking call
or --work freezes every connection.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling clients (HEAD_TIMEOUT for the
whole head, SEND_TIMEOUT for the whole answer), and clients that send more than we read (we half-close and drain
instead of resetting).
"""

import argparse
import asyncio
import email.utils
import os
import random
import re
import signal
import sys
import time

import asyncpg

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
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
# As many connections as threads_psycopg_pool.py has: the same number of queries out at once.
POOL_SIZE = 16
POOL_TIMEOUT = 10.0  # how long a coroutine waits for a free connection before its request is dropped
CONNECT_TIMEOUT = 10.0  # at start, every connection of the pool must be open within this
QUERIES = ("sleep", "single", "multiple")  # --query: what each request asks the database
PATH_QUERIES = {b"/db": "single", b"/queries": "multiple"}  # TechEmpower's paths choose their query; any other, --query
WORLD_ROWS = 10_000  # rows in the world table (harness/system/postgres.py seeds it)
MULTIPLE_ROWS = 20  # rows read by --query multiple, one query each
# The driver's errors: the server's (a failed query) and the client library's (a connection lost mid-query).
DATABASE_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError)
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)
# No POLL_INTERVAL: the loop's signal handler wakes it, nothing needs polling.


# --8<-- [start:model]
async def serve_forever(host: str, port: int, delay: float, cpu_work: int, pool: asyncpg.Pool, query: str) -> None:
    """Serve until SIGINT/SIGTERM, then give the requests in flight SHUTDOWN_GRACE to finish."""
    stopping = stop_on_signals()  # an Event, set on SIGINT/SIGTERM
    handlers: set[asyncio.Task[None]] = set()
    def start_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.create_task(handle_connection(reader, writer, delay, cpu_work, pool, query, stopping))
        handlers.add(handler)  # the loop keeps only a weak reference to a task: we keep it alive
        handler.add_done_callback(handlers.discard)
    server = await asyncio.start_server(start_handler, host, port, limit=MAX_HEAD_BYTES, backlog=BACKLOG)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"Serving on http://{host}:{port}/ (query {query}, delay {delay} s); Ctrl-C stops", flush=True)
    await stopping.wait()
    await stop_gracefully(server, handlers)


async def handle_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float,
                            cpu_work: int, pool: asyncpg.Pool, query: str, stopping: asyncio.Event) -> None:
    """Answer requests on one connection until the client, a timeout or a stop ends it, then close it."""
    keep_alive = True
    try:
        while keep_alive and (first := await next_request_begins(reader, stopping)):  # b"": closed, idle or stop
            try:
                async with asyncio.timeout(HEAD_TIMEOUT):  # one deadline for the whole head, from its first byte
                    method, target, keep_alive = parse_request_head(first + await read_request_head(reader))
                if method != "GET":
                    raise RequestError(405)
                result, waited = await run_query(pool, PATH_QUERIES.get(target, query), delay)  # only we wait
                simulated_cpu_work(cpu_work)  # the simulated computation: no await in it, so every connection waits
                response = add_headers(build_page_response(target, keep_alive and not stopping.is_set()),
                                       {"X-Query-Result": result, "X-Pool-Wait-Us": f"{waited}"})
            except RequestError as error:
                keep_alive = False  # what follows a refused head cannot be trusted to be a request
                response = build_refusal(error.status)
            await send(writer, response)  # within SEND_TIMEOUT
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on
    except asyncio.CancelledError:
        writer.close()  # out of grace on stop: close at once, skip the polite drain
        raise
    await close_gracefully(reader, writer)
# --8<-- [end:model]


# --8<-- [start:query]
async def run_query(pool: asyncpg.Pool, query: str, delay: float) -> tuple[str, int]:
    """The request's database call on a borrowed connection: what the database returned, in a few words,
    and how long the request waited for a connection, in microseconds (0 while one is free)."""
    asked = time.perf_counter()
    try:
        async with pool.acquire(timeout=POOL_TIMEOUT) as db:  # a free connection, or wait for one; given back after
            waited_us = round((time.perf_counter() - asked) * 1e6)  # the pool's queue, not the query
            if query == "sleep":
                await db.execute("SELECT pg_sleep($1)", delay)  # the database waits; this coroutine awaits its answer
                return f"pg_sleep {delay:g}", waited_us
            ids = [random.randint(1, WORLD_ROWS) for _ in range(1 if query == "single" else MULTIPLE_ROWS)]
            rows = [await db.fetchrow("SELECT id, randomnumber FROM world WHERE id = $1", row_id) for row_id in ids]
    except DATABASE_ERRORS as error:  # the query failed: this request is lost, like one whose client left
        print(f"database error, request dropped: {error}", file=sys.stderr, flush=True)
        raise ConnectionAbortedError("the database call failed") from error
    return " ".join(f"{row['id']}={row['randomnumber']}" for row in rows), waited_us
# --8<-- [end:query]


# --8<-- [start:armour]
def stop_on_signals() -> asyncio.Event:
    """An Event set on SIGINT/SIGTERM."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    # add_signal_handler runs the callback inside the loop, between two other
    # callbacks, so it may touch loop objects such as this Event.
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    return stopping


async def stop_gracefully(server: asyncio.Server, handlers: set[asyncio.Task[None]]) -> None:
    """Stop accepting; give the requests in flight SHUTDOWN_GRACE, then cancel the rest."""
    await stop_reading_listeners(server)
    server.close()  # new clients are refused, not left in the backlog
    if handlers:
        _, late = await asyncio.wait(handlers, timeout=SHUTDOWN_GRACE)
        for handler in late:
            handler.cancel()  # out of grace: stop waiting for them
        await asyncio.gather(*late, return_exceptions=True)
    await server.wait_closed()


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


def build_page_response(target: bytes, keep_alive: bool) -> bytes:
    """The answer to a GET: the page, or GET /big's megabyte of text."""
    if target.partition(b"?")[0] == b"/big":
        return build_response(200, BIG_BODY, keep_alive, "text/plain; charset=utf-8")
    return build_response(200, BODY, keep_alive, "text/html; charset=utf-8")


def build_refusal(status: int) -> bytes:
    """The answer to a refused head; the connection closes after it."""
    return build_response(status, f"{status} {REASONS[status]}\n".encode(), False, "text/plain; charset=utf-8")

async def send(writer: asyncio.StreamWriter, response: bytes) -> None:
    """Write a whole answer; one deadline, SEND_TIMEOUT, for all of it, however slowly the client reads."""
    writer.write(response)
    async with asyncio.timeout(SEND_TIMEOUT):
        await writer.drain()  # returns once the socket has taken the bytes


async def next_request_begins(reader: asyncio.StreamReader, stopping: asyncio.Event) -> bytes:
    """The next request's first byte; b"" when the client closes, stays silent KEEP_ALIVE_TIMEOUT, or we stop."""
    reading = asyncio.ensure_future(reader.read(1))  # b"" when the client closed
    stopped = asyncio.ensure_future(stopping.wait())  # between requests, a stop closes the connection at once
    try:
        done, _ = await asyncio.wait({reading, stopped}, timeout=KEEP_ALIVE_TIMEOUT,
                                     return_when=asyncio.FIRST_COMPLETED)
        return reading.result() if reading in done else b""
    finally:
        reading.cancel()  # no byte is lost: a cancelled read has taken none from the buffer
        stopped.cancel()
# --8<-- [end:armour]


async def serve_with_pool(args: argparse.Namespace) -> None:
    """Open every connection of the pool before listening (not during the first requests), serve, close them."""
    try:
        pool = await asyncio.wait_for(asyncpg.create_pool(args.dsn, min_size=args.pool_size, max_size=args.pool_size),
                                      CONNECT_TIMEOUT)
    except (OSError, *DATABASE_ERRORS) as error:  # refused, unreachable, timed out (TimeoutError is an OSError)
        sys.exit(f"cannot open {args.pool_size} connections to {args.dsn}: {error!r}")
    async with pool:
        await serve_forever(args.host, args.port, args.delay, args.work, pool, args.query)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY,
                        help="seconds of the simulated call, made real: pg_sleep's argument (--query sleep)")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--dsn", default=os.environ.get("DATABASE_URL"), help="PostgreSQL DSN (default: $DATABASE_URL)")
    parser.add_argument("--pool-size", type=int, default=POOL_SIZE, help="database connections in the pool")
    parser.add_argument("--query", choices=QUERIES, default="sleep", help="what each request asks the database")
    args = parser.parse_args()
    if not args.dsn:
        parser.error("no database: give --dsn or set DATABASE_URL")

    asyncio.run(serve_with_pool(args))
    # The requests in flight finished (or ran out of grace) inside serve_forever; the pool closed its connections.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
