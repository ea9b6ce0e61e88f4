"""Standard library http.server: HTTPServer answers one connection at a time.

The model: the library's accept loop hands each connection to a fresh
BaseHTTPRequestHandler, which parses the request, waits for the simulated
database call in do_GET, answers and closes; only then is the next accepted.
Grows from: nothing; this is the starting point. sequential_sockets.py does the
same job without the library.

Run:   python servers/stdlib_http_server.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: while one client waits out its delay, every other
client waits in the listen backlog. That is the lesson of this design.
Not on purpose, and handled: the library parses the request and answers 400 to
malformed request lines and 501 to methods it has no do_ method for; we add a
cap on the whole request head (431), a timeout for silent clients, and a
half-close with drain instead of a reset, and a 400 for a request line
without a version ("GET /", old HTTP/0.9), which the library would answer.
"""

import argparse
import http.server
import signal
import socket
import sys
import threading
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
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)
# No REASONS or REQUEST_LINE here: the library keeps its own table of reasons
# and its own request-line parser.


# --8<-- [start:model]
def serve_forever(httpd: "Server", stopping: list[bool]) -> None:
    """Run the library's accept loop (one request at a time) until asked to stop, then let it finish."""
    # In a thread of its own: shutdown() waits for this loop to return, and our signal handler needs main.
    accept_loop = threading.Thread(target=httpd.serve_forever, args=(POLL_INTERVAL,))
    accept_loop.start()
    while not stopping:
        time.sleep(POLL_INTERVAL)
    httpd.shutdown()  # returns once the loop has finished the request in flight
    accept_loop.join()


class RequestHandler(http.server.BaseHTTPRequestHandler):
    """Answer one connection completely; the library parses the request and calls do_GET, then closes."""

    # HTTP/1.1 on the status line, like the other designs; the Connection: close
    # header we send makes the library close after this one response anyway.
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        time.sleep(self.server.delay)  # the simulated database call: nothing else runs meanwhile
        simulated_cpu_work(self.server.cpu_work)  # the simulated computation: nothing else runs meanwhile either
        body, content_type = (BIG_BODY, "text/plain") if self.path == "/big" else (BODY, "text/html; charset=utf-8")
        self.send_response(200)  # also sends Date (and Server)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")  # also tells the library to close afterwards
        self.end_headers()
        self.wfile.write(body)
    # --8<-- [end:model]

    # --8<-- [start:armour]
    # The library's default, HTTP/0.9, would send our 400 for a malformed
    # request line as a bare page without a status line.
    default_request_version = "HTTP/1.0"
    timeout = SEND_TIMEOUT  # applied in setup(); reads wait only for what is left of HEAD_TIMEOUT
    server: "Server"

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the library's buffered reader: ours reads the socket itself
        self.rfile = HeadLimitedReader(self.connection)  # type: ignore[assignment]

    def parse_request(self) -> bool:
        try:
            parsed = super().parse_request()
        # Only the header lines read in here can pass the budget: the request
        # line before them is at most 64 KiB + 1, inside it.
        except RequestError as error:
            self.send_error(error.status)
            return False
        if parsed and len(self.requestline.split()) != 3:
            # The library still accepts HTTP/0.9's "GET /" with no version; every
            # other design refuses it, and so do we.
            self.send_error(400, "The request line needs an HTTP version")
            return False
        return parsed

    def log_message(self, format: str, *args: object) -> None:
        # Silent on purpose: the library prints a line per request (and per
        # error) to stderr, which under load costs more than the answer itself.
        pass


class Server(http.server.HTTPServer):
    """HTTPServer with our backlog, our close and our delay."""

    request_queue_size = BACKLOG  # the library's listen() backlog

    def __init__(self, address: tuple[str, int], delay: float, cpu_work: int) -> None:
        super().__init__(address, RequestHandler)
        self.delay = delay
        self.cpu_work = cpu_work

    def shutdown_request(self, request: socket.socket) -> None:  # type: ignore[override]
        # The library half-closes and closes at once; unread bytes (the rest of
        # an oversized head) would then make the kernel send RST, and the
        # client could lose our 431. Drain first, like the other designs.
        close_gracefully(request)

    def handle_error(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        if isinstance(sys.exc_info()[1], OSError):
            return  # reset or early close: this client is lost, the server goes on
        super().handle_error(request, client_address)  # a real bug: print the traceback
# --8<-- [end:armour]


# --8<-- [start:plumbing]
class RequestError(Exception):
    """A request we refuse; carries the status code to answer with."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


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


class HeadLimitedReader:
    """The handler's rfile: the whole request head, not each line, is capped and bounded by one deadline.

    http.server only limits each line (64 KiB) and the number of headers (100),
    so 100 lines of 60 KiB would still be read; and its socket timeout applies to
    each read, so a client trickling a byte at a time would never time out. This
    reader counts every byte readline returns (the head, without the blank line
    that ends it, may be at most MAX_HEAD_BYTES, as in the other designs) and
    lets every recv wait only for what is left of HEAD_TIMEOUT.
    """

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.buffered = b""  # received, not yet returned
        # The lines read include the head's last CRLF and the blank line's CRLF.
        self.remaining = MAX_HEAD_BYTES + 4
        self.deadline = time.monotonic() + HEAD_TIMEOUT  # one deadline for the whole head

    def readline(self, limit: int = -1) -> bytes:
        # Never return more than one byte past the budget, so nothing is over-counted.
        size = self.remaining + 1 if limit < 0 else min(limit, self.remaining + 1)
        while self.buffered.find(b"\n", 0, size) < 0 and len(self.buffered) < size:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request head took longer than HEAD_TIMEOUT")
            self.conn.settimeout(left)
            chunk = self.conn.recv(65536)
            if not chunk:
                break  # the client closed: return what there is, as a file would
            self.buffered += chunk
        self.conn.settimeout(SEND_TIMEOUT)  # what the library sends next is our answer
        newline = self.buffered.find(b"\n", 0, size)
        end = newline + 1 if newline >= 0 else min(size, len(self.buffered))
        line, self.buffered = self.buffered[:end], self.buffered[end:]
        self.remaining -= len(line)
        if self.remaining < 0:
            raise RequestError(431)
        return line

    def close(self) -> None:
        pass  # the socket is the server's to close (close_gracefully)
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

    with Server((args.host, args.port), args.delay, args.work) as httpd:
        host, port = httpd.socket.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        serve_forever(httpd, stopping)
    # The request in flight finished inside serve_forever; nothing else is pending.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
