"""Naive blocking accept loop: the "Async 101" synchronous server, protocol bugs kept.

The model: one thread accepts a connection, reads the request with a single
recv(1024), answers from the request line alone, closes, and accepts the next.
This file keeps the naive protocol handling of the article's server on purpose,
so tests/servers/test_async101_naive.py can show what it costs. It is NOT a design to copy:
sequential_sockets.py is the same loop done properly.
Grows from: sequential_sockets.py (the same loop, with its protocol care taken out).

Run:   python servers/naive_blocking_accept_loop.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  ab -r -l -n 1000 -c 150 http://127.0.0.1:8000/

Naive on purpose, and what breaks (each one proved by tests/servers/test_async101_naive.py):
- One recv(1024) is taken to be the whole request. A request that arrives in
  pieces is judged by its first piece: "GE" alone gets 400 Bad Request.
- Whatever the client sent beyond that read stays unread when close() runs, and
  Linux answers unread input with a reset (RST) instead of a FIN: a client that
  sent a 20 KiB head loses the response it was sent, with ECONNRESET.
- No Content-Length, no Date, no Connection: close. The client can only find the
  end of the body by waiting for the connection to close, which is why the
  article's ab run needs -l.
- The 400 answer ends its head with a bare "\\n\\n", which is not HTTP.
- A well-formed request line with any method but GET also gets 400 (the
  contract says 405).
- No timeout: a client that connects and says nothing holds the only thread,
  and every other client waits behind it.
Kept from our skeleton, because the harness needs them and they are not the
lesson: it binds 127.0.0.1, accepts with a timeout so it can notice SIGINT and
SIGTERM, finishes the request in hand and exits 0, and logs nothing per request
(the article prints every request).
"""

import argparse
import signal
import socket
import time

HOST = "127.0.0.1"  # loopback only, even here: the article's 0.0.0.0 is not the lesson
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
POLL_INTERVAL = 0.5  # how often the accept loop looks at the stop flag
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""


# --8<-- [start:model]
def serve_forever(listener: socket.socket, delay: float, cpu_work: int, stopping: list[bool]) -> None:
    """Accept and answer connections one by one until asked to stop."""
    listener.settimeout(POLL_INTERVAL)
    while not stopping:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        handle_request(conn, delay, cpu_work)  # the next client waits until this returns


def handle_request(conn: socket.socket, delay: float, cpu_work: int) -> None:
    """Answer one connection from a single read, then close it (naively)."""
    try:
        request = conn.recv(1024)  # NAIVE: one read, as if the whole request always came at once
        request_line = request.split(b"\r\n")[0]
        tokens = request_line.split()
        if len(tokens) == 3 and tokens[0] == b"GET":
            time.sleep(delay)  # the simulated database call
            simulated_cpu_work(cpu_work)  # the simulated computation
            conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n")  # NAIVE: no Content-Length
            conn.send(BODY)  # NAIVE: send(), not sendall(): fine only while the body is small
        else:
            conn.send(b"HTTP/1.1 400 Bad Request\n\n")  # NAIVE: bare newlines, and 400 for every non-GET
    except OSError:
        pass  # the client is gone; the loop goes on
    finally:
        conn.close()  # NAIVE: unread input still queued makes this a reset, not a FIN
# --8<-- [end:model]


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

    stopping: list[bool] = []  # becomes non-empty on SIGINT/SIGTERM

    def request_stop(signum: int, frame: object) -> None:
        stopping.append(True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((args.host, args.port))
        listener.listen()  # the article's default backlog: Python picks min(SOMAXCONN, 128)
        host, port = listener.getsockname()[:2]
        print(f"Serving on http://{host}:{port}/ (delay {args.delay} s); Ctrl-C stops", flush=True)
        serve_forever(listener, args.delay, args.work, stopping)
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
