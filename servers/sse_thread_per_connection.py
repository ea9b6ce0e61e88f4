"""Server-sent events, thread per connection: every stream holds a thread for as long as it lasts.

The model: thread_per_connection.py, answering GET /events with a stream
instead of a page: the head of a `text/event-stream` response, then one small
event every INTERVAL seconds for DURATION seconds, then the end of the body
(the connection closes). The thread sleeps between two events and blocks in
sendall() while the client's socket buffers are full: a client that reads
slowly slows its own thread down, and the server never holds more than one
event for it (backpressure, for free). Every other path answers the page.
Grows from: thread_per_connection.py (the handler streams; the stop flag
reaches it so a stopping server ends each stream between two events).

Run:   python servers/sse_thread_per_connection.py [--host 127.0.0.1] [--port 8000] [--delay 0.1]
                                                  [--interval 0.1] [--duration 30] [--event-bytes 64]
Load:  curl -N 'http://127.0.0.1:8000/events?interval=0.1&duration=5&size=64'
       (the query overrides the options, per stream)

Known limits, on purpose: one thread, with its own stack, per open stream;
nothing caps how many run at once. On stop, every stream ends after its
current event (a clean end of the body), within one interval; threads still
running after SHUTDOWN_GRACE are abandoned. A client that takes nothing for
SEND_TIMEOUT is dropped.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling clients (HEAD_TIMEOUT
for the whole head), and clients that send more than we read.
"""

import argparse
import errno
import email.utils
import re
import signal
import socket
import threading
import time
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
POLL_INTERVAL = 0.5  # how often the accept loop looks at the stop flag
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


# --8<-- [start:model]
def handle_request(conn: socket.socket, delay: float, cpu_work: int, stopping: list[bool]) -> None:
    """Answer one connection (a stream of events at /events, the page anywhere else), then close it."""
    try:
        try:
            method, path = parse_request_head(read_request_head(conn))
            if method != "GET":
                raise RequestError(405)
            if path.startswith("/events"):
                send_events(conn, *stream_settings(path), stopping)
                return  # the stream was the whole answer; `finally` closes the connection
            time.sleep(delay)  # the simulated database call: only this thread waits
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


def send_events(conn: socket.socket, interval: float, count: int, size: int, stopping: list[bool]) -> None:
    """The event-stream head, then one event every interval until `count` are sent or the server stops."""
    conn.settimeout(SEND_TIMEOUT)  # for each sendall: the client must take every event within this
    conn.sendall(EVENT_STREAM_HEAD)
    started = time.monotonic()
    for number in range(count):
        time.sleep(max(0.0, started + number * interval - time.monotonic()))  # on schedule: no drift
        if stopping:
            return  # stopping: end between two events, so the client sees a whole last event
        conn.sendall(build_event(number, size))  # blocks while the client's buffers are full: backpressure
# --8<-- [end:model]


# --8<-- [start:armour]
def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool]) -> None:
    """Accept connections and answer each in its own thread until asked to stop."""
    handlers: list[threading.Thread] = []  # only this thread touches the list: no lock needed
    listener.settimeout(POLL_INTERVAL)
    while not stopping:
        if (conn := accept_or_wait(listener)) is None:
            continue  # no client within POLL_INTERVAL, or no file descriptor free for a moment
        handlers = [handler for handler in handlers if handler.is_alive()]  # forget finished ones
        handler = threading.Thread(target=handle_request, args=(conn, delay, cpu_work, stopping), daemon=True)
        if start_or_refuse(handler, conn):  # started: the accept loop goes straight back to accept()
            handlers.append(handler)
    stop_handlers(listener, handlers)


def start_or_refuse(handler: threading.Thread, conn: socket.socket) -> bool:
    """Start a connection's thread; if no thread can be started, refuse that client and go on."""
    try:
        handler.start()
    except RuntimeError:  # "can't start new thread": out of memory or over the thread limit
        conn.close()  # this client is refused; the server and the clients it has go on
        return False
    return True


def stop_handlers(listener: socket.socket, handlers: list[threading.Thread]) -> None:
    """Stop accepting, then give the requests in flight SHUTDOWN_GRACE to finish.

    The threads are daemons: one stuck on a client past the grace period cannot keep the process alive.
    """
    listener.close()  # stop accepting: new clients are refused, not left in the backlog
    deadline = time.monotonic() + SHUTDOWN_GRACE  # one deadline shared by all, not 5 s each
    for handler in handlers:
        handler.join(max(0.0, deadline - time.monotonic()))
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

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    with socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        serve_forever(listener, args.delay, args.work, stopping)
    # The streams and requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
