"""socketserver.ForkingTCPServer: the library's accept loop, a process per connection.

The model: socketserver_tcp.py with ForkingMixIn in front of TCPServer. For
every accepted connection, process_request() forks: the child runs the
RequestHandler, closes the connection and leaves with os._exit(); the parent
closes its copy of the connection and goes back to accept. Between accepts,
collect_children() reaps the children that have finished.
Grows from: socketserver_tcp.py (one class name and the accept loop changed);
fork_per_connection.py is the same design written by hand.

Run:   python servers/forking_tcpserver.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: a process per client, up to the library's
max_children (40); with 40 alive, the accept loop waits until one exits.
On stop, children still running after SHUTDOWN_GRACE are killed.
Unix only: os.fork does not exist on Windows.
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling
clients (HEAD_TIMEOUT for the whole head), and clients
that send more than we read (we half-close and drain instead of resetting;
the library's own close would reset), and children that would keep the
listening socket open after a stop.
"""

import argparse
import email.utils
import errno
import os
import re
import signal
import socket
import socketserver
import sys
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
POLL_INTERVAL = 0.5  # how often the accept loop looks at the stop flag
ACCEPT_BACKOFF = 0.5  # out of descriptors, how long we stop accepting: a freed one is used within it
OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}  # accept() would fail again at once
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
REAP_INTERVAL = 0.05  # on stop, how often we look for finished children (waitpid has no timeout)
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)


# --8<-- [start:model]
def serve_forever(server: "Server", stopping: list[bool]) -> None:
    """Accept connections, a child process for each, until asked to stop; then wait for the children."""
    # Not the library's serve_forever() in a second thread, as in socketserver_tcp.py: a process with two
    # threads must not fork (the child gets every lock but one thread). We drive the loop a step at a time.
    while not stopping:
        server.handle_request()  # wait up to POLL_INTERVAL for a connection; fork a child for it
        server.service_actions()  # collect_children(): reap the children that have exited
    server.socket.close()  # stop accepting: new clients are refused, not left in the backlog
    stop_children(server)


class RequestHandler(socketserver.BaseRequestHandler):
    """Answer one connection completely; the server (self.server) closes it afterwards."""

    def handle(self) -> None:
        conn = self.request  # the connected socket: read and written as in sequential_sockets.py
        try:
            try:
                method, path = parse_request_head(read_request_head(conn))
                if method != "GET":
                    raise RequestError(405)
                time.sleep(self.server.delay)  # the simulated database call: only this process waits
                simulated_cpu_work(self.server.cpu_work)  # the simulated computation: each child has its own GIL
                response = build_page_response(path)
            except RequestError as error:
                response = build_refusal(error.status)
            conn.settimeout(SEND_TIMEOUT)  # sendall counts it for the whole answer, not per send
            conn.sendall(response)
        except OSError:
            pass  # timeout, reset or early close: this client is lost, the server goes on


class Server(socketserver.ForkingTCPServer):
    """ForkingTCPServer (ForkingMixIn: a child process per connection) with our delay and a bounded stop."""

    def __init__(self, address: tuple[str, int], delay: float, cpu_work: int) -> None:
        super().__init__(address, RequestHandler)  # each connection: RequestHandler(...).handle(), in a child
        self.delay = delay
        self.cpu_work = cpu_work
    # --8<-- [end:model]

    # --8<-- [start:armour]
    request_queue_size = BACKLOG  # the library's listen() backlog (its default is 5)
    allow_reuse_address = True  # SO_REUSEADDR, as socket.create_server sets it: restart without waiting
    timeout = POLL_INTERVAL  # how long handle_request() waits for a connection before returning
    # server_close() would wait for every child with no time limit (block_on_close
    # = True); we wait SHUTDOWN_GRACE ourselves, in stop_children.
    block_on_close = False
    # Kept at the library's default, max_children = 40: collect_children() blocks
    # the accept loop while 40 children are alive. It rarely bites: a child lives
    # only as long as its request.

    def finish_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        # Runs in the child: ForkingMixIn forks first. The library leaves the
        # child's copy of the listening socket open, so during a stop the port
        # would go on taking connections into a backlog that nobody reads until
        # the last child exits. The child never accepts: close its copy.
        self.socket.close()
        super().finish_request(request, client_address)

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        # The library half-closes and closes at once; unread bytes (the rest of
        # an oversized head) would then make the kernel send RST, and the
        # client could lose our 431. Drain first, like the other designs.
        close_gracefully(request)

    def get_request(self) -> tuple[socket.socket, object]:
        try:
            return super().get_request()  # listener.accept()
        except OSError as error:
            # Out of descriptors, the client stays in the backlog and the listener readable: the library's
            # loop would call accept() again at once and fail again, a busy loop. The accept loop holds no
            # request while it accepts, so sleeping here pauses accepting and nothing else.
            if error.errno in OUT_OF_RESOURCES:  # no descriptor (or memory) for the new socket
                time.sleep(ACCEPT_BACKOFF)
            raise  # the library drops this attempt and goes back to select()

    def handle_error(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        if isinstance(sys.exc_info()[1], OSError):
            return  # reset or early close: this client is lost, the server goes on
        super().handle_error(request, client_address)  # a real bug: print the traceback
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


def stop_children(server: Server) -> None:
    """Give the children SHUTDOWN_GRACE to finish their requests, then kill the rest; reap them all."""
    deadline = time.monotonic() + SHUTDOWN_GRACE
    # With max_children alive, collect_children() blocks until one exits, deadline
    # or not; nothing new is forked any more, so lift the cap.
    server.max_children = sys.maxsize
    while server.active_children and time.monotonic() < deadline:
        server.collect_children()  # reaps the children that have exited, without waiting
        time.sleep(REAP_INTERVAL)
    for pid in server.active_children or ():
        os.kill(pid, signal.SIGKILL)  # out of grace; the pid is still ours: it has not been reaped
    server.collect_children(blocking=True)
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
        # A list, not a threading.Event: Event.set() takes a lock, and a lock
        # taken in a signal handler can deadlock with the code it interrupted.
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    with Server((args.host, args.port), args.delay, args.work) as server:
        host, port = server.socket.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        serve_forever(server, stopping)
    # The children finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
