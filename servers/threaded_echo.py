"""Threaded echo: socketserver gives every connection its own thread.

The model: socketserver.ThreadingTCPServer accepts on the main thread and runs
EchoHandler.handle() for each connection in a new thread. The handler reads one
line, waits out the simulated I/O with time.sleep() (only its own thread
waits), and answers the line upper-cased. The server of "Async Python - Part 1",
with the graceful stop that article asks for: SIGINT or SIGTERM stops the
accepting, the replies in flight get SHUTDOWN_GRACE to finish, and the exit code is 0.
Grows from: thread_per_connection.py (the same thread per connection, started
by socketserver instead of by hand, speaking a line protocol instead of HTTP).

Protocol (the same in asyncio_echo.py and minimal_asyncio_echo.py): the client
sends one line ending in b"\\n"; the server reads until that newline however
the bytes arrive, waits --delay seconds, sends the line back upper-cased
(newline included) and closes. One line per connection: bytes after the first
newline are read and discarded. A line longer than MAX_LINE_BYTES gets TOO_LONG
instead; a client that closes before its newline gets no answer.

Run:   python servers/threaded_echo.py [--host 127.0.0.1] [--port 8000] [--delay 0.1]
Load:  python scripts/echo_client.py --port 8000 --connections 1000

Known limits, on purpose: one thread, with its own stack, per connection; with
10,000 clients at once that is 10,000 threads taking turns on one GIL. On stop,
threads still running after SHUTDOWN_GRACE are abandoned (they are daemon threads).
Not on purpose, and handled: lines that arrive in pieces, over-long lines,
silent clients (timeout), and clients that send more than we read (we
half-close and drain instead of resetting).
"""

import argparse
import signal
import socket
import socketserver
import threading
import time

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated I/O per line
BACKLOG = 128  # pending connections the kernel queues for us
MAX_LINE_BYTES = 64 * 1024  # a longer line gets TOO_LONG instead of its echo
CLIENT_TIMEOUT = 10.0  # a client that goes quiet cannot hold its thread forever
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
POLL_INTERVAL = 0.5  # how often the accept loop looks at the stop flag
SHUTDOWN_GRACE = 5.0  # on stop, how long replies in flight may take to finish
TOO_LONG = b"ERROR line longer than 65536 bytes\n"


class LineTooLong(Exception):
    """The client sent MAX_LINE_BYTES without a newline."""


def upper_case(line: bytes) -> bytes:
    """The line upper-cased as UTF-8 text; bytes that are not UTF-8 come back unchanged."""
    return line.decode("utf-8", "surrogateescape").upper().encode("utf-8", "surrogateescape")


def read_line(conn: socket.socket) -> bytes:
    """Read until the first newline (included), however the bytes arrive."""
    received = bytearray()
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("client closed before its newline")
        start = len(received)
        received += chunk
        end = received.find(b"\n", start)  # search only the new bytes: a trickled line stays linear
        if end != -1 and end < MAX_LINE_BYTES:
            return bytes(received[: end + 1])
        if end != -1 or len(received) >= MAX_LINE_BYTES:
            raise LineTooLong


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


def handle_request(conn: socket.socket, delay: float) -> None:
    """Answer one connection's line; socketserver closes the connection afterwards."""
    try:
        conn.settimeout(CLIENT_TIMEOUT)
        try:
            line = read_line(conn)
            time.sleep(delay)  # the simulated I/O: only this thread waits
            reply = upper_case(line)
        except LineTooLong:
            reply = TOO_LONG
        conn.sendall(reply)
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on


class EchoHandler(socketserver.BaseRequestHandler):
    """socketserver makes one of these per connection and calls handle() in that connection's thread."""

    server: "EchoServer"

    def handle(self) -> None:
        handle_request(self.request, self.server.delay)


class EchoServer(socketserver.ThreadingTCPServer):
    """ThreadingTCPServer with our backlog, a bounded wait for replies in flight, and a graceful close."""

    allow_reuse_address = True  # as socket.create_server does: a restart need not wait out TIME_WAIT
    request_queue_size = BACKLOG
    # socketserver's defaults are daemon_threads = False and block_on_close = True:
    # server_close() would then join every handler thread with no time limit, and
    # the interpreter would wait for them again at exit. A silent client could
    # hold the stop for CLIENT_TIMEOUT or more. We count the connections in
    # flight ourselves and wait for them with a deadline (wait_for_in_flight);
    # daemon threads let the process exit when that deadline has passed.
    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], delay: float) -> None:
        super().__init__(address, EchoHandler)
        self.delay = delay
        self.in_flight = 0  # connections accepted and not yet closed
        self.all_done = threading.Condition()  # notified whenever in_flight goes down

    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        """Count the connection, then let ThreadingMixIn start its thread."""
        with self.all_done:
            self.in_flight += 1  # counted before its thread starts: a stop cannot miss it
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        """socketserver calls this once per connection, after handle() or after a failure."""
        close_gracefully(request)  # socketserver's own version half-closes without draining
        with self.all_done:
            self.in_flight -= 1
            self.all_done.notify_all()

    def wait_for_in_flight(self, timeout: float) -> bool:
        """Wait until every connection is closed, or `timeout` seconds; True if all closed."""
        with self.all_done:
            return self.all_done.wait_for(lambda: self.in_flight == 0, timeout)


def serve_forever(server: EchoServer, stopping: list[bool]) -> None:
    """Accept connections, each answered in its own thread, until asked to stop."""
    server.timeout = POLL_INTERVAL  # server.handle_request() returns after this long without a client
    while not stopping:
        server.handle_request()  # socketserver's: accept one connection, start its thread, return
    server.server_close()  # stop accepting: new clients are refused, not left in the backlog
    server.wait_for_in_flight(SHUTDOWN_GRACE)  # one deadline for all replies in flight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated I/O per line")
    args = parser.parse_args()

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)  # only a flag: taking a lock in a signal handler can deadlock

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    server = EchoServer((args.host, args.port), args.delay)
    host, port = server.server_address[:2]
    print(f"Serving on tcp://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
    serve_forever(server, stopping)
    # The replies in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
