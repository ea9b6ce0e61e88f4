"""Server-sent events on an event loop without backpressure: writes that never wait for the client.

The model: sse_asyncio_streams.py without the one line that waits,
`await writer.drain()`. writer.write() hands each event to the transport,
which sends what the socket takes at once and keeps the rest in its own
buffer, in the server's memory. For a client that reads as fast as the events
come, nothing changes. For one that reads slowly, the buffer grows by every
event it has not taken, without bound, until the stream ends or the client
goes away: this is what a server does that writes with transport.write() or a
callback and never looks at pause_writing().
Grows from: sse_asyncio_streams.py (the drain after each event is gone).

Run:   python servers/sse_asyncio_no_drain.py [--host 127.0.0.1] [--port 8000] [--delay 0.1]
                                              [--interval 0.1] [--duration 30] [--event-bytes 64]
Load:  curl -N 'http://127.0.0.1:8000/events?interval=0.1&duration=5&size=64'
       (the query overrides the options, per stream)

Known limits, on purpose: no backpressure, so a slow reader costs memory that
grows with its stream; nothing drops it (SEND_TIMEOUT bounds only the drain of
the end). On stop, every stream ends after its current event, within one
interval, and the unsent rest is given SEND_TIMEOUT to leave.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling clients (HEAD_TIMEOUT for the
whole head, SEND_TIMEOUT for the whole answer), and clients that send more than we read.
"""

import argparse
import asyncio
import email.utils
import re
import signal
import urllib.parse

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
BACKLOG = 128  # pending connections the kernel queues for us
MAX_HEAD_BYTES = 64 * 1024  # larger request heads get 431
HEAD_TIMEOUT = 10.0  # the whole request head must arrive within this, however slowly it trickles in
SEND_TIMEOUT = 10.0  # the whole answer must be taken within this, however slowly the client reads
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
INTERVAL = 0.1  # seconds between two events of a stream (?interval= overrides it)
DURATION = 30.0  # seconds a stream lasts (?duration= overrides it)
EVENT_BYTES = 64  # bytes per event, framing included (?size= overrides it)
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)
# No POLL_INTERVAL: the loop's signal handler wakes it, nothing needs polling.


# --8<-- [start:model]
async def handle_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float,
                         cpu_work: int, stopping: asyncio.Event) -> None:
    """Answer one connection (a stream of events at /events, the page anywhere else), then close it."""
    try:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):  # one deadline for the whole head
                method, path = parse_request_head(await read_request_head(reader))
            if method != "GET":
                raise RequestError(405)
            if path.startswith("/events"):
                await send_events(writer, *stream_settings(path), stopping)
                response = b""  # the stream was the whole answer
            else:
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


async def send_events(writer: asyncio.StreamWriter, interval: float, count: int, size: int,
                      stopping: asyncio.Event) -> None:
    """The event-stream head, then one event every interval until `count` are sent or the server stops."""
    writer.write(EVENT_STREAM_HEAD)
    started = (loop := asyncio.get_running_loop()).time()
    for number in range(count):
        await asyncio.sleep(started + number * interval - loop.time())  # on schedule: no drift
        if stopping.is_set():
            return  # stopping: end between two events, so the client sees a whole last event
        writer.write(build_event(number, size))  # never waits: what the client has not taken stays in memory
# --8<-- [end:model]


# --8<-- [start:armour]
async def serve_forever(host: str, port: int, delay: float, cpu_work: int) -> None:
    """Serve until SIGINT/SIGTERM, then give the requests in flight SHUTDOWN_GRACE to finish."""
    stopping = stop_on_signals()  # an Event, set on SIGINT/SIGTERM
    handlers: set[asyncio.Task[None]] = set()

    def start_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handler = asyncio.create_task(handle_request(reader, writer, delay, cpu_work, stopping))
        handlers.add(handler)  # the loop keeps only a weak reference to a task: we keep it alive
        handler.add_done_callback(handlers.discard)

    server = await asyncio.start_server(start_handler, host, port, limit=MAX_HEAD_BYTES, backlog=BACKLOG)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"Serving on http://{host}:{port}/ (delay {delay} s); Ctrl-C stops", flush=True)
    await stopping.wait()
    await stop_gracefully(server, handlers)


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
EVENT_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                     b"Connection: close\r\n\r\n")  # no length: the body (the stream) ends when the connection does


def stream_settings(path: str) -> tuple[float, int, int]:
    """What a stream's query asks (?interval=S&duration=S&size=BYTES), within bounds: interval, events, size."""
    query = urllib.parse.parse_qs(path.partition("?")[2])

    def number(name: str, default: float, low: float, high: float) -> float:
        try:
            return min(max(float(query[name][0]), low), high)
        except (KeyError, ValueError):
            return default  # absent or not a number: the server's setting

    interval = number("interval", INTERVAL, 0.001, 60.0)
    duration = number("duration", DURATION, 0.0, 3600.0)
    return interval, round(duration / interval), int(number("size", EVENT_BYTES, 16, 1024 * 1024))


def build_event(number: int, size: int) -> bytes:
    """One server-sent event of `size` bytes: its number as id and data, padded, and the blank line that ends it."""
    event = f"id: {number}\ndata: {number} ".encode("ascii")
    return event + b"x" * max(0, size - len(event) - 2) + b"\n\n"


# --8<-- [end:plumbing]


def main() -> None:
    global INTERVAL, DURATION, EVENT_BYTES  # the streams read the module's constants; the options replace them
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--interval", type=float, default=INTERVAL, help="seconds between two events of a stream")
    parser.add_argument("--duration", type=float, default=DURATION, help="seconds a stream lasts")
    parser.add_argument("--event-bytes", type=int, default=EVENT_BYTES, help="bytes per event")
    args = parser.parse_args()
    INTERVAL, DURATION, EVENT_BYTES = args.interval, args.duration, args.event_bytes

    asyncio.run(serve_forever(args.host, args.port, args.delay, args.work))
    # The streams and requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
