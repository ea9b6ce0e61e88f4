"""Threaded echo: socketserver.ThreadingTCPServer, a thread per connection, one line each.

The model: the library's accept loop starts a new thread for every
connection; the thread reads one line, waits out the simulated I/O with
time.sleep() (only its own thread waits), and answers the line upper-cased.
This is the threaded server of "Async Python - Part 1", with the graceful stop
that article asks for: on SIGINT or SIGTERM, stop accepting, give the replies
in flight SHUTDOWN_GRACE to finish, exit 0.
Grows from: threading_tcpserver.py (the same server and the same stop; the
HTTP handler replaced by the echo).

Protocol (the same in asyncio_echo.py and minimal_asyncio_echo.py): the client
sends one line ending in b"\\n"; the server reads until that newline however
the bytes arrive, waits --delay seconds, sends the line back upper-cased
(newline included) and closes. One line per connection: bytes after the first
newline are read and discarded. A line longer than MAX_LINE_BYTES gets TOO_LONG
instead; a client that closes before its newline gets no answer.

Run:   python servers/threaded_echo.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--backlog 128]
Load:  python scripts/echo_client.py --port 8000 --connections 1000

Known limits, on purpose: one thread per client and no cap on how many run at
once: 10,000 clients at once are 10,000 threads taking turns on one GIL, and
the accept loop is one of them. On stop, threads still running after
SHUTDOWN_GRACE are abandoned (they are daemon threads), not joined.
Not on purpose, and handled: lines that arrive in pieces, over-long lines,
silent clients (timeout), and clients that send more than we read (we
half-close and drain instead of resetting; the library's own close would reset).
"""

import argparse
import signal
import socket
import socketserver
import sys
import threading
import time

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated I/O per line
BACKLOG = 128  # pending connections the kernel queues for us (--backlog; the kernel caps it at somaxconn)
MAX_LINE_BYTES = 64 * 1024  # a longer line gets TOO_LONG instead of its echo
CLIENT_TIMEOUT = 10.0  # a client that goes quiet cannot hold the server forever
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
POLL_INTERVAL = 0.5  # how often the accept loop looks at the stop flag
SHUTDOWN_GRACE = 5.0  # on stop, how long replies in flight may take to finish
TOO_LONG = b"ERROR line longer than 65536 bytes\n"


# --8<-- [start:model]
def serve_forever(server: "Server", stopping: list[bool]) -> None:
    """Run the library's accept loop until asked to stop, then give replies in flight SHUTDOWN_GRACE."""
    # In a thread of its own: shutdown() waits for this loop to return, and our signal handler needs main.
    accept_loop = threading.Thread(target=server.serve_forever, args=(POLL_INTERVAL,), daemon=True)
    accept_loop.start()
    while not stopping:
        time.sleep(POLL_INTERVAL)
    stop_server(server)


class RequestHandler(socketserver.StreamRequestHandler):
    """Answer one connection's line; the server (self.server) closes the connection afterwards."""

    timeout = CLIENT_TIMEOUT  # StreamRequestHandler.setup() applies it to the socket

    def handle(self) -> None:
        try:
            # readline waits for the newline however the bytes arrive; one byte past the cap means too long.
            line = self.rfile.readline(MAX_LINE_BYTES + 1)
            if len(line) > MAX_LINE_BYTES:
                reply = TOO_LONG
            elif not line.endswith(b"\n"):
                return  # the client closed before its newline: nothing to answer
            else:
                time.sleep(self.server.delay)  # the simulated I/O: only this thread waits
                reply = upper_case(line)
            self.wfile.write(reply)  # unbuffered (wbufsize = 0): this is a sendall
        except OSError:
            pass  # timeout, reset or early close: this client is lost, the server goes on


class Server(socketserver.ThreadingTCPServer):
    """ThreadingTCPServer (ThreadingMixIn: a new thread per connection) with our delay and a bounded stop."""

    def __init__(self, address: tuple[str, int], delay: float, backlog: int = BACKLOG) -> None:
        self.request_queue_size = backlog  # the library's listen() backlog (its default is 5), used below
        super().__init__(address, RequestHandler)  # each connection: RequestHandler(...).handle(), in its thread
        self.delay = delay
        self.in_flight = 0  # connections accepted and not yet closed; several threads change it: under the lock
        self.idle = threading.Condition()
    # --8<-- [end:model]

    # --8<-- [start:armour]
    allow_reuse_address = True  # SO_REUSEADDR, as socket.create_server sets it: restart without waiting
    # The library's defaults are daemon_threads = False and block_on_close = True:
    # server_close() then joins every handler thread with no time limit, and the
    # interpreter would wait for them at exit anyway. One client that trickles a
    # byte every few seconds could hold the stop for minutes. Daemon threads that
    # we count ourselves give the stop a deadline instead.
    daemon_threads = True
    block_on_close = False

    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        with self.idle:
            self.in_flight += 1  # counted before its thread starts, so a stop cannot miss it
        super().process_request(request, client_address)  # starts the thread and returns at once

    def wait_until_idle(self, timeout: float) -> None:
        """Return when no connection is in flight, or after `timeout` seconds."""
        with self.idle:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        # The library half-closes and closes at once; unread bytes (the rest of
        # an over-long line) would then make the kernel send RST, and the client
        # could lose our answer. Drain first, like the other designs.
        try:
            close_gracefully(request)
        finally:
            with self.idle:  # the library calls this once per connection, as its last step
                self.in_flight -= 1
                self.idle.notify_all()

    def handle_error(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        if isinstance(sys.exc_info()[1], OSError):
            return  # reset or early close: this client is lost, the server goes on
        super().handle_error(request, client_address)  # a real bug: print the traceback


def stop_server(server: Server) -> None:
    """Stop accepting, then wait for the connections in flight, SHUTDOWN_GRACE at most."""
    deadline = time.monotonic() + SHUTDOWN_GRACE  # one deadline for the whole stop
    server.shutdown()  # quick here: the loop only accepts, so it never holds a connection
    server.socket.close()  # stop accepting: new clients are refused, not left in the backlog
    server.wait_until_idle(max(0.0, deadline - time.monotonic()))
# --8<-- [end:armour]


# --8<-- [start:plumbing]
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


def upper_case(line: bytes) -> bytes:
    """The line upper-cased as UTF-8 text; bytes that are not UTF-8 come back unchanged."""
    return line.decode("utf-8", "surrogateescape").upper().encode("utf-8", "surrogateescape")
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated I/O per line")
    parser.add_argument("--backlog", type=int, default=BACKLOG, help="listen backlog: connections not yet accepted")
    args = parser.parse_args()

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        # A list, not a threading.Event: Event.set() takes a lock, and a lock
        # taken in a signal handler can deadlock with the code it interrupted.
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    with Server((args.host, args.port), args.delay, args.backlog) as server:
        host, port = server.socket.getsockname()[:2]
        print(f"Serving on tcp://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        serve_forever(server, stopping)
    # The replies in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
