"""asyncio socket API: one event loop, a task per connection, plain non-blocking sockets.

The model: the sequential server's code, line for line, with every call that
could block replaced by its awaitable twin on the event loop: loop.sock_accept,
loop.sock_recv, loop.sock_sendall. Each `await` hands the thread back to the
loop, which runs the other connections' tasks meanwhile. No streams, no
protocols: the sockets stay ordinary socket objects in non-blocking mode, and
the loop only watches their file descriptors for us.
Grows from: sequential_sockets.py (the same functions, awaited on one event loop).

Run:   python servers/asyncio_sock_api.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  ab -r -l -n 1000 -c 150 http://127.0.0.1:8000/

Known limits, on purpose: one thread for everything, so any call that blocks
(time.sleep, a blocking database driver) would freeze every connection. The
sock_* helpers copy every chunk into a new bytes object and register and
unregister the socket with the selector on each call that has to wait:
simple, not the fastest way (asyncio_streams.py lets a transport keep the
registration).
Not on purpose, and handled: requests that arrive in pieces, oversized heads
(431), malformed request lines (400), silent or trickling clients (HEAD_TIMEOUT for the
whole head, SEND_TIMEOUT for the whole answer), and clients that send more than we read
(we half-close and drain instead of resetting).
"""

import argparse
import asyncio
import email.utils
import errno
import re
import signal
import socket

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
ACCEPT_BACKOFF = 0.5  # out of descriptors, how long we stop accepting: a freed one is used within it
OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}  # accept() would fail again at once
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)
# No POLL_INTERVAL: the loop's signal handler wakes it, nothing needs polling.


# --8<-- [start:model]
async def serve_forever(listener: socket.socket, delay: float, cpu_work: int) -> None:
    """Serve until SIGINT/SIGTERM, then give the requests in flight SHUTDOWN_GRACE to finish."""
    stopping = stop_on_signals()  # an Event, set on SIGINT/SIGTERM
    handlers: set[asyncio.Task[None]] = set()
    acceptor = asyncio.create_task(accept_forever(listener, delay, cpu_work, handlers))
    await stopping.wait()
    await stop_gracefully(acceptor, listener, handlers)


async def accept_forever(listener: socket.socket, delay: float, cpu_work: int,
                         handlers: set[asyncio.Task[None]]) -> None:
    """Accept connections and start a task for each; runs until cancelled."""
    while True:
        conn = await accept_connection(listener)  # loop.sock_accept; the new socket is already non-blocking
        handler = asyncio.create_task(handle_request(conn, delay, cpu_work))
        handlers.add(handler)  # the loop keeps only a weak reference to a task: we keep it alive
        handler.add_done_callback(handlers.discard)


async def handle_request(conn: socket.socket, delay: float, cpu_work: int) -> None:
    """Answer one connection completely, then close it."""
    try:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):  # one deadline for the whole head
                method, path = parse_request_head(await read_request_head(conn))
            if method != "GET":
                raise RequestError(405)
            await asyncio.sleep(delay)  # the simulated database call: only this task waits
            simulated_cpu_work(cpu_work)  # the simulated computation: no await in it, so every connection waits
            response = build_page_response(path)
        except RequestError as error:
            response = build_refusal(error.status)
        async with asyncio.timeout(SEND_TIMEOUT):  # one deadline for the whole answer
            await asyncio.get_running_loop().sock_sendall(conn, response)  # until the socket took every byte
    except OSError:
        pass  # timeout, reset or early close: this client is lost, the server goes on
    except asyncio.CancelledError:
        conn.close()  # out of grace on stop: close at once, skip the polite drain
        raise
    await close_gracefully(conn)
# --8<-- [end:model]


# --8<-- [start:armour]
async def accept_connection(listener: socket.socket) -> socket.socket:
    """The next client (loop.sock_accept), waiting ACCEPT_BACKOFF whenever we are out of file descriptors."""
    while True:
        try:
            conn, _ = await asyncio.get_running_loop().sock_accept(listener)
            return conn
        except OSError as error:
            # Raised out of accept_forever, this would end the task: the server would accept no one,
            # ever again. Retried at once, it would fail at once (the client is still in the backlog).
            if error.errno in OUT_OF_RESOURCES:  # no descriptor (or memory) for the new socket
                await asyncio.sleep(ACCEPT_BACKOFF)  # not watching the listener; the connections go on
            # otherwise the client gave up before we got to it


def stop_on_signals() -> asyncio.Event:
    """An Event set on SIGINT/SIGTERM."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    # add_signal_handler runs the callback inside the loop, between two other
    # callbacks, so it may touch loop objects such as this Event.
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    return stopping


async def stop_gracefully(acceptor: asyncio.Task[None], listener: socket.socket,
                          handlers: set[asyncio.Task[None]]) -> None:
    """Stop accepting; give the requests in flight SHUTDOWN_GRACE, then cancel the rest."""
    acceptor.cancel()  # stop accepting: the pending sock_accept is withdrawn from the loop
    await asyncio.gather(acceptor, return_exceptions=True)
    listener.close()  # new clients are refused, not left in the backlog
    if handlers:
        _, late = await asyncio.wait(handlers, timeout=SHUTDOWN_GRACE)
        for handler in late:
            handler.cancel()  # out of grace: stop waiting for them
        await asyncio.gather(*late, return_exceptions=True)
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


async def read_request_head(conn: socket.socket) -> bytes:
    """Read until the blank line that ends the head, however the bytes arrive."""
    loop = asyncio.get_running_loop()
    received = b""
    while b"\r\n\r\n" not in received:
        if len(received) > MAX_HEAD_BYTES:
            raise RequestError(431)
        chunk = await loop.sock_recv(conn, 65536)  # waits for data without holding the thread
        if not chunk:
            raise ConnectionError("client closed before finishing its request")
        received += chunk
    head, _, _ = received.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise RequestError(431)
    return head


async def close_gracefully(conn: socket.socket) -> None:
    """Half-close; drain only if the client sent more than we read, so close() sends FIN, not RST."""
    loop = asyncio.get_running_loop()
    try:
        conn.shutdown(socket.SHUT_WR)
        try:
            unread = conn.recv(1, socket.MSG_PEEK)  # look without taking: the socket never blocks
        except BlockingIOError:
            unread = b""  # nothing unread now; a client that sent only its head sends nothing more but its FIN
        if unread:  # unread bytes would make close() send RST: read them first, for a while
            async with asyncio.timeout(DRAIN_TIMEOUT):
                while await loop.sock_recv(conn, 65536):
                    pass
    except OSError:
        pass  # the client is already gone, or DRAIN_TIMEOUT passed (TimeoutError is an OSError)
    finally:
        conn.close()


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    args = parser.parse_args()

    with socket.create_server((args.host, args.port), backlog=BACKLOG) as listener:
        listener.setblocking(False)  # the loop's sock_* helpers refuse blocking sockets
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        asyncio.run(serve_forever(listener, args.delay, args.work))
    # The requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
