"""Waitress: one I/O thread runs a select loop, a pool of task threads runs the application.

The model: the main thread owns every socket. It accepts, reads request bytes
as they arrive, and once a whole request is parsed hands it to a task thread,
which calls the WSGI application (servers/wsgi_app.py) and leaves the answer
in an output buffer for the main thread to send. Slow clients cost the pool
nothing; a slow application holds one of THREADS threads, so THREADS requests
wait their delay at once and the next ones queue for a free thread.
Grows from: asyncio_executor.py (an event loop that does all the socket work
and hands the blocking call to a fixed pool of threads), with waitress's own
select loop in place of asyncio's and the whole application in the pool.

Run:   python servers/waitress_server.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0] [--keep-alive]
       [--threads 4] [--connection-limit 100]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Why a runner and not `waitress-serve`: waitress-serve installs no SIGTERM
handler, so SIGTERM (what service managers send) kills it at once, requests in
flight included; on Ctrl-C it lets the busy task threads finish but cancels the
requests still queued for a thread. Here both signals stop accepting, then let
every request already accepted finish, for up to SHUTDOWN_GRACE seconds.
Two more things waitress does not do on its own, added here: it has no switch
to turn keep-alive off (and PEP 3333 forbids the application to send
"Connection: close"), so ClosingTask asks it to close after each answer
(--keep-alive leaves waitress's own keep-alive on); and it closes a refused
connection with request bytes unread, which makes the kernel send RST, so
DrainingChannel half-closes and drains first, as our designs do.
Known limits: beyond connection_limit (100) open connections waitress stops
accepting and new clients wait in the backlog.
"""

import argparse
import signal
import socket
import time

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, create_server
from waitress.task import WSGITask

from wsgi_app import make_app  # servers/ is on sys.path when this file runs

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
MAX_HEAD_BYTES = 64 * 1024  # larger request heads get 431
CLIENT_TIMEOUT = 10  # a client that goes quiet cannot hold a connection forever
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
POLL_INTERVAL = 0.5  # how often the loop looks at the stop flag
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
THREADS = 4  # waitress's default: requests whose application runs at the same time
CONNECTION_LIMIT = 100  # waitress's default: past it, it stops accepting (the next clients wait in the backlog)


# --8<-- [start:model]
def serve_forever(server: BaseWSGIServer, stopping: list[bool]) -> None:
    """Run the I/O loop until asked to stop, then finish the requests in flight."""
    while not stopping:
        wasyncore.loop(timeout=POLL_INTERVAL, map=server._map, count=1)
    wasyncore.dispatcher.close(server)  # stop accepting: close only the listening socket
    deadline = time.monotonic() + SHUTDOWN_GRACE  # the loop keeps sending what the task threads write
    while open_channels(server) and time.monotonic() < deadline:
        wasyncore.loop(timeout=0.05, map=server._map, count=1)
    server.task_dispatcher.shutdown(timeout=max(0.0, deadline - time.monotonic()))
    wasyncore.close_all(server._map)  # out of grace: whatever is still open is closed
# --8<-- [end:model]


# --8<-- [start:plumbing]
class ClosingTask(WSGITask):
    """A WSGI task that closes the connection after its answer ("Connection: close")."""

    def build_response_header(self) -> bytes:
        self.set_close_on_finish()  # adds "Connection: close" unless the answer has a Connection header
        return super().build_response_header()


class Drainer(wasyncore.dispatcher):
    """A half-closed connection, read and discarded until the client closes or DRAIN_TIMEOUT passes."""

    def __init__(self, sock: socket.socket, socket_map: dict) -> None:
        super().__init__(sock, map=socket_map)
        self.deadline = time.monotonic() + DRAIN_TIMEOUT

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return time.monotonic() > self.deadline  # past the deadline, handle_write closes us

    def handle_read(self) -> None:
        try:
            leftover = self.socket.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            leftover = b""  # the client reset the connection: nothing left to protect
        if not leftover:
            self.close()

    def handle_write(self) -> None:
        self.close()


class DrainingChannel(HTTPChannel):
    """A connection that closes with FIN, not RST: what --keep-alive uses (waitress's own keep-alive)."""

    def handle_close(self) -> None:
        # Waitress closes at once, even with request bytes still unread (a refused
        # 70 KiB head): the kernel then sends RST and the client may never read
        # the 431. A duplicate of the socket keeps the connection alive after
        # waitress closes its own; we half-close it and drain it in the loop.
        if self.socket is not None and self.connected:
            try:
                lingering = self.socket.dup()
                lingering.shutdown(socket.SHUT_WR)
                Drainer(lingering, self._map)
            except OSError:
                pass  # the client is already gone
        super().handle_close()


class ClosingChannel(DrainingChannel):
    """A DrainingChannel whose requests run as ClosingTasks: it closes after every answer."""

    task_class = ClosingTask


def open_channels(server: BaseWSGIServer) -> int:
    """Client connections still open (the map also holds the listener and the wake-up pipe)."""
    return sum(isinstance(dispatcher, (HTTPChannel, Drainer)) for dispatcher in server._map.values())
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--keep-alive", action="store_true",
                        help="keep connections open between requests (waitress's own behaviour), instead of closing")
    parser.add_argument("--threads", type=int, default=THREADS, help="task threads (waitress's default: 4)")
    parser.add_argument("--connection-limit", type=int, default=CONNECTION_LIMIT,
                        help="open connections before waitress stops accepting (its default: 100)")
    args = parser.parse_args()

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    server = create_server(
        make_app(args.delay, args.work),
        host=args.host,
        port=args.port,
        threads=args.threads,
        connection_limit=args.connection_limit,
        max_request_header_size=MAX_HEAD_BYTES,
        channel_timeout=CLIENT_TIMEOUT,
        cleanup_interval=CLIENT_TIMEOUT,  # how often idle connections are looked for (default 30 s)
    )
    # Every connection accepted from now on closes after its answer, or, with --keep-alive, when the client asks.
    server.channel_class = DrainingChannel if args.keep_alive else ClosingChannel
    host, port = server.socket.getsockname()[:2]
    print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
    serve_forever(server, stopping)
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
