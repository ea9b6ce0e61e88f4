"""Naive asyncio socket API: the "Async 101" asynchronous server, protocol bugs kept.

The model: one event loop; a coroutine accepts with loop.sock_accept and starts
a task per connection, which reads with a single loop.sock_recv(1024), answers
with loop.sock_sendall and closes. While one task waits for its client, the
loop runs the others. This file keeps the naive protocol handling of the
article's server on purpose, so tests/servers/test_async101_naive.py can show what it
costs. It is NOT a design to copy: asyncio_sock_api.py is the same loop done
properly.
Grows from: naive_blocking_accept_loop.py (the same handler, awaited on one event loop).

Run:   python servers/naive_asyncio_sock_api.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  ab -r -l -n 1000 -c 150 http://127.0.0.1:8000/

Naive on purpose, and what breaks (each one proved by tests/servers/test_async101_naive.py):
- One sock_recv(1024) is taken to be the whole request. A request that arrives
  in pieces is judged by its first piece: "GE" alone gets 400 Bad Request.
- Whatever the client sent beyond that read stays unread when close() runs, and
  Linux answers unread input with a reset (RST) instead of a FIN: a client that
  sent a 20 KiB head loses the response it was sent, with ECONNRESET.
- No Content-Length, no Date, no Connection: close: the client finds the end
  of the body only when the connection closes (hence ab -l in the article).
- The 400 answer ends its head with a bare "\\n\\n", and every non-GET gets 400.
- No timeout: a silent client keeps its task (and its socket) forever. Unlike
  the blocking version, it no longer holds up everyone else.
Kept from our skeleton, because the harness needs them and they are not the
lesson: it binds 127.0.0.1, keeps a reference to every task (the loop itself
keeps only weak ones; the article does not), stops accepting on SIGINT and
SIGTERM, gives the tasks in flight SHUTDOWN_GRACE and exits 0, and logs
nothing per request (the article prints every request).
"""

import argparse
import asyncio
import signal
import socket

HOST = "127.0.0.1"  # loopback only, even here: the article's 0.0.0.0 is not the lesson
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""


# --8<-- [start:model]
async def serve_forever(host: str, port: int, delay: float, cpu_work: int) -> None:
    """Accept until SIGINT/SIGTERM, then give the requests in flight SHUTDOWN_GRACE to finish."""
    loop = asyncio.get_running_loop()
    listener = open_listener(host, port, delay)  # non-blocking: sock_accept requires it
    handlers: set[asyncio.Task[None]] = set()

    async def accept_forever() -> None:
        while True:
            conn, _ = await loop.sock_accept(listener)
            handler = loop.create_task(handle_request(conn, delay, cpu_work))
            handlers.add(handler)  # the loop keeps only a weak reference to a task: we keep it alive
            handler.add_done_callback(handlers.discard)

    acceptor = loop.create_task(accept_forever())
    loop.add_signal_handler(signal.SIGINT, acceptor.cancel)
    loop.add_signal_handler(signal.SIGTERM, acceptor.cancel)
    await asyncio.gather(acceptor, return_exceptions=True)  # until a signal cancels it
    listener.close()  # stop accepting
    await finish_in_flight(handlers)


async def handle_request(conn: socket.socket, delay: float, cpu_work: int) -> None:
    """Answer one connection from a single read, then close it (naively)."""
    loop = asyncio.get_running_loop()
    try:
        request = await loop.sock_recv(conn, 1024)  # NAIVE: one read, as if the whole request always came at once
        request_line = request.split(b"\r\n")[0]
        tokens = request_line.split()
        if len(tokens) == 3 and tokens[0] == b"GET":
            await asyncio.sleep(delay)  # the simulated database call: only this task waits
            simulated_cpu_work(cpu_work)  # the simulated computation: every task waits
            await loop.sock_sendall(conn, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")  # NAIVE: no length
            await loop.sock_sendall(conn, BODY)
        else:
            await loop.sock_sendall(conn, b"HTTP/1.1 400 Bad Request\n\n")  # NAIVE: bare newlines, 400 for non-GET
    except OSError:
        pass  # the client is gone; the loop goes on
    finally:
        conn.close()  # NAIVE: unread input still queued makes this a reset, not a FIN
# --8<-- [end:model]


# --8<-- [start:armour]
def open_listener(host: str, port: int, delay: float) -> socket.socket:
    """The listening socket, non-blocking; print where it listens, and the delay."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind((host, port))
    listener.listen()  # the article's default backlog: Python picks min(SOMAXCONN, 128)
    listener.setblocking(False)  # sock_accept requires a non-blocking socket
    host, port = listener.getsockname()[:2]
    print(f"Serving on http://{host}:{port}/ (delay {delay} s); Ctrl-C stops", flush=True)
    return listener


async def finish_in_flight(handlers: set[asyncio.Task[None]]) -> None:
    """Give the requests in flight SHUTDOWN_GRACE, then cancel the rest."""
    if handlers:
        _, late = await asyncio.wait(handlers, timeout=SHUTDOWN_GRACE)
        for handler in late:
            handler.cancel()  # out of grace: stop waiting for them
        await asyncio.gather(*late, return_exceptions=True)
# --8<-- [end:armour]


# --8<-- [start:plumbing]
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

    asyncio.run(serve_forever(args.host, args.port, args.delay, args.work))
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
