"""Two tiny servers for tests/harness/suites/test_hostile.py: one that does each case right, one that does it wrong.

Run:  python tests/hostile_servers.py good|bad --port P

`good`: a thread per connection, strict about the request (414, 431, 400 at once),
a head timeout counted from the first byte, a body timeout, 100 Continue, /big,
a half-close and drain before closing, and a pause (not a spin) when accept()
fails with EMFILE. `bad`: the same skeleton doing each of those wrong: one recv()
and no timeouts, 200 to anything with a blank line, a hang after the first of
several pipelined requests, no answer after a half-close, an fd kept per reset
connection, and a busy loop on EMFILE. Neither is a design: only the tests use them.
"""

from __future__ import annotations

import argparse
import re
import signal
import socket
import threading
import time

HEAD_TIMEOUT = 1.0
BODY_TIMEOUT = 1.0
BIG = b"x" * 1048576
REQUEST_LINE = re.compile(rb"(GET|POST) (/\S*|http://\S+) HTTP/1\.[01]")
HEADER = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[ \t]*[\x21-\x7e]*(?:[ \t]+[\x21-\x7e]+)*[ \t]*")
leaked: list[socket.socket] = []


def respond(conn: socket.socket, status: int, body: bytes = b"") -> None:
    conn.sendall(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (status, len(body)) + body)


def close_gently(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(0.5)
        while conn.recv(65536):
            pass
    except OSError:
        pass
    conn.close()


def good_head(conn: socket.socket) -> tuple[int, bytes, bytes]:
    """(status to refuse with or 0, head, bytes after it); the head must arrive within HEAD_TIMEOUT of its first byte."""
    data, deadline = b"", time.monotonic() + HEAD_TIMEOUT  # counted from the accept: idle clients time out too
    while b"\r\n\r\n" not in data:
        if re.search(rb"(?<!\r)\n", data):
            return 400, b"", b""  # a bare LF line end: refused (RFC 9112 also allows accepting it)
        line_end = data.find(b"\r\n")
        first_line = data if line_end < 0 else data[:line_end]
        if len(first_line) > 8192:
            return 414, b"", b""
        if line_end >= 0 and not REQUEST_LINE.fullmatch(first_line):
            return 400, b"", b""
        if line_end < 0 and first_line and not re.match(rb"(G|GE|GET|P|PO|POS|POST)( |$)", first_line):
            return 400, b"", b""
        if len(data) > 65536 or data.count(b"\r\n") > 100:
            return 431, b"", b""
        conn.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = conn.recv(65536)
        if not chunk:
            return -1, b"", b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if len(lines[0]) > 8192:
        return 414, b"", b""
    if len(lines) > 101:
        return 431, b"", b""
    if not REQUEST_LINE.fullmatch(lines[0]):
        return 400, b"", b""
    if any(len(line) > 8192 for line in lines[1:]):
        return 431, b"", b""
    if not all(HEADER.fullmatch(line) for line in lines[1:]):
        return 400, b"", b""
    return 0, head, rest


def good_body(conn: socket.socket, head: bytes, rest: bytes) -> int:
    """Read the body by RFC 9112's rules; a status to refuse with, or 0."""
    fields = [line.split(b":", 1) for line in head.split(b"\r\n")[1:]]
    values = {name.strip().lower(): value.strip() for name, value in fields}
    length, chunked = values.get(b"content-length"), values.get(b"transfer-encoding")
    if length is not None and chunked is not None:
        return 400
    conn.settimeout(BODY_TIMEOUT)
    if chunked is not None:
        size = rest.split(b"\r\n", 1)[0]
        if not re.fullmatch(rb"[0-9A-Fa-f]{1,16}", size):
            return 400
        return 0
    if length is None:
        return 0
    if not length.isdigit():
        return 400
    if values.get(b"expect", b"").lower() == b"100-continue":
        return 413 if int(length) > 1_000_000 else 0
    while len(rest) < int(length):
        chunk = conn.recv(65536)  # a timeout here ends the connection: the body timeout
        if not chunk:
            return -1
        rest += chunk
    return 0


def good_connection(conn: socket.socket) -> None:
    try:
        status, head, rest = good_head(conn)
        if status == 0:
            status = good_body(conn, head, rest)
        if status > 0:
            respond(conn, status)
        elif status == 0:
            respond(conn, 200, BIG if head.split(b" ")[1] == b"/big" else b"hello")
    except OSError:
        pass
    finally:
        close_gently(conn)


def bad_connection(conn: socket.socket) -> None:
    try:
        data = conn.recv(65536)  # one recv: a request in pieces is a request lost
        if b"\r\n\r\n" not in data:
            if data:
                conn.recv(65536)  # and then wait forever, with no timeout
            return
        if not re.match(rb"[A-Z]+ / HTTP/1\.1\r\n", data) or b"\r\nHost:" not in data:
            respond(conn, 400)  # strict where it should not be: HTTP/1.0, absolute-form
            return
        conn.settimeout(0.2)
        try:
            if conn.recv(1, socket.MSG_PEEK) == b"":
                return  # took a half-close for a client that left: no answer
        except TimeoutError:
            pass
        conn.settimeout(None)
        if data.startswith(b"POST") and b"Content-Length: 100000" in data:
            while conn.recv(65536):  # waits for the whole body, forever
                pass
            return
        respond(conn, 200, BIG if b" /big " in data else b"hello")
        conn.recv(65536)  # keeps the connection (and the rest of a pipeline) unanswered until the client leaves
    except OSError:
        leaked.append(conn)  # a reset: the socket is forgotten, never closed
        return
    conn.close()


def serve(listener: socket.socket, handler, busy_on_emfile: bool) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            if not busy_on_emfile:
                time.sleep(0.1)  # EMFILE: wait for a descriptor to free up, do not spin
            continue
        threading.Thread(target=handler, args=(conn,), daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("behaviour", choices=["good", "bad"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(0)))
    with socket.create_server((args.host, args.port), backlog=512) as listener:
        print(f"Serving on http://{args.host}:{args.port}/", flush=True)
        if args.behaviour == "good":
            serve(listener, good_connection, busy_on_emfile=False)
        else:
            serve(listener, bad_connection, busy_on_emfile=True)


if __name__ == "__main__":
    main()
