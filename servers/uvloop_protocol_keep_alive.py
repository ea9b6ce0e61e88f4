"""The asyncio Protocol with keep-alive, on uvloop: one event loop (libuv, in C), many requests per connection.

The model: the event loop calls an asyncio.Protocol when bytes arrive; the
protocol cuts every complete request head out of its buffer, however the bytes
were split or batched (pipelining: several requests in one segment), and starts
each request's simulated database call as a timer (loop.call_later), not a
task: no coroutine, no future. Answers leave in request order: an answer whose
call finishes early waits in a queue behind the earlier ones. After an answer
the connection stays open for the next request (HTTP/1.1 keep-alive, and
HTTP/1.0 when the client asks for it with `Connection: keep-alive`, as `ab -k`
does), until the client says `Connection: close`, half-closes, or stays idle
for KEEP_ALIVE_TIMEOUT. The Date header changes once a second, so whole
responses are built once a second and reused.
Grows from: asyncio_echo.py, by way of asyncio_protocol_keep_alive.py: this is
that file run on uvloop's event loop in place of asyncio's (uvloop.run for
asyncio.run). A test keeps the two files' code identical but for uvloop's lines;
only the docstrings differ.

Run:   python servers/uvloop_protocol_keep_alive.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
Load:  wrk -c 50 -d 10s http://127.0.0.1:8000/   or   ab -k -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: one thread for everything, so a blocking call (or
--work's computation) freezes every connection. No request bodies: a request
that announces one (Content-Length, Transfer-Encoding) is answered and the
connection closed after it, since its body cannot be told from the next request.
Not on purpose, and handled: heads that arrive in pieces or many to a segment,
oversized heads (431), malformed request lines (400), silent clients
(HEAD_TIMEOUT for a whole head from its first byte, KEEP_ALIVE_TIMEOUT idle between
requests, SEND_TIMEOUT for a client that stops reading our answers),
clients that pipeline without reading (at most MAX_PIPELINED requests in
flight, and reading stops while the socket's send buffer is full), and clients
that send more than we read (we half-close and drain instead of resetting).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import email.utils
import math
import re
import signal
import time
import uvloop  # the one library this file is about: the same program on another event loop

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
BACKLOG = 128  # pending connections the kernel queues for us
MAX_HEAD_BYTES = 64 * 1024  # larger request heads get 431
MAX_PIPELINED = 32  # requests one connection may have in flight; past it we stop reading until answers leave
HEAD_TIMEOUT = 10.0  # the whole request head must arrive within this, from its first byte, however it trickles in
SEND_TIMEOUT = 10.0  # a client that leaves our answers unread (the send buffer stays full) is closed after this
KEEP_ALIVE_TIMEOUT = 5.0  # an idle connection between two requests is closed after this
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after the last answer, before closing
SWEEP_INTERVAL = 0.5  # how often one sweep closes the connections past their deadline
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
BIG_BYTES = 1024 * 1024  # GET /big answers this many bytes of text
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
# No POLL_INTERVAL: the loop's signal handler wakes it, nothing needs polling.

REASONS = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"}
REQUEST_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+) (\S+) HTTP/1\.[01]")


# --8<-- [start:model]
class KeepAliveProtocol(asyncio.Protocol):
    """One connection: cut requests out of the buffer, start a timer for each, send answers in request order."""

    def data_received(self, data: bytes) -> None:
        if self.last_request_read:
            return  # past the last request: read and discard, so closing sends FIN, not RST
        if not self.received and not self.answers and self.quick_answer(data):
            return
        if not self.received and not self.answers:
            self.deadline = self.loop.time() + HEAD_TIMEOUT  # a new head has begun: HEAD_TIMEOUT for all of it
        self.received += data
        self.read_requests()

    def start_answer(self, answer: Answer) -> None:
        """Queue the answer; a 200 waits for its simulated call (a timer), a refusal is ready at once."""
        self.answers.append(answer)
        self.deadline = math.inf  # the wait from here on is ours, not the client's
        if not answer.keep_alive:
            self.last_request_read = True  # nothing after this request is read as a request
        if answer.status != 200:
            answer.response = cached_response(answer.status, keep_alive=False)
        elif self.delay > 0:
            answer.timer = self.loop.call_later(self.delay, self.call_done, answer)
        else:
            self.complete(answer)  # a call that takes no time needs no timer: read_requests sends it

    def call_done(self, answer: Answer) -> None:
        """The timer of one request fired: its answer is ready; send it if every earlier one is."""
        self.complete(answer)
        if self.answers[0] is answer:
            self.send_ready()  # otherwise an earlier answer is still waiting: this one waits its turn

    def complete(self, answer: Answer) -> None:
        """The simulated call is over: do the simulated computation, and the answer is ready."""
        simulated_cpu_work(self.cpu_work)  # on the loop's thread: every connection waits meanwhile
        answer.response = cached_response(200, answer.keep_alive, answer.big)
    # --8<-- [end:model]

    # --8<-- [start:armour]
    def __init__(self, delay: float, cpu_work: int, connections: "set[KeepAliveProtocol]") -> None:
        self.delay, self.cpu_work = delay, cpu_work
        self.connections = connections  # every open connection of the server, for a graceful stop
        self.connections.add(self)  # at accept time, before connection_made: a stop cannot miss us
        self.loop = asyncio.get_running_loop()
        self.closed = self.loop.create_future()  # resolved by connection_lost; serve_forever waits on it
        self.received = bytearray()
        self.scanned = 0  # how much of `received` has been searched for the end of a head
        self.answers: collections.deque[Answer] = collections.deque()  # in request order
        self.last_request_read = False  # the client (or we) ended the connection: read and discard the rest
        self.client_done = False  # the client has half-closed: no more bytes will come
        self.reading = True
        self.writing_paused = False  # the socket's send buffer is full: the client is not reading
        self.deadline = self.loop.time() + KEEP_ALIVE_TIMEOUT  # close_overdue() closes us past it
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport (uvloop's is no subclass)

    def quick_answer(self, data: bytes) -> bool:
        """The common case first: one whole GET in one segment, nothing owed, no call to wait for. True if answered."""
        if self.delay or self.cpu_work or data.find(b"\r\n\r\n") != len(data) - 4 or len(data) > MAX_HEAD_BYTES:
            return False
        try:
            method, target, keep_alive = parse_request_head(data[:-4])
        except RequestError:
            return False  # the general path refuses it, in order
        if method != "GET" or not keep_alive:
            return False
        self.transport.write(cached_response(200, True, target.partition(b"?")[0] == b"/big"))
        self.deadline = self.loop.time() + KEEP_ALIVE_TIMEOUT
        return True

    def read_requests(self) -> None:
        """Start an answer for every complete head in the buffer, in order; then send what is ready."""
        received = self.received
        while not self.last_request_read and len(self.answers) < MAX_PIPELINED:
            # Search only what is new (and the 3 bytes before it): a head trickled in stays linear.
            end = received.find(b"\r\n\r\n", max(0, self.scanned - 3))
            if end == -1:
                self.scanned = len(received)
                if len(received) > MAX_HEAD_BYTES:
                    self.start_answer(Answer(431, keep_alive=False))
                break
            self.scanned = 0
            if end > MAX_HEAD_BYTES:
                self.start_answer(Answer(431, keep_alive=False))
                break
            head = bytes(received[:end])
            del received[:end + 4]
            try:
                method, target, keep_alive = parse_request_head(head)
            except RequestError as error:
                self.start_answer(Answer(error.status, keep_alive=False))
                break
            if method != "GET":
                self.start_answer(Answer(405, keep_alive=False))  # we never read bodies: close after it
                break
            self.start_answer(Answer(200, keep_alive, big=target.partition(b"?")[0] == b"/big"))
        self.adjust_reading()
        if self.answers and self.answers[0].response is not None:
            self.send_ready()

    def send_ready(self) -> None:
        """Write every ready answer at the head of the queue in one go; close after the last one if asked."""
        answers, ready = self.answers, []
        while answers and answers[0].response is not None:
            ready.append(answers.popleft().response)
        if self.transport.is_closing():
            return  # the client already went away: nobody to answer
        self.transport.write(ready[0] if len(ready) == 1 else b"".join(ready))
        if answers:
            return
        if self.last_request_read:
            self.close_politely()
            return
        self.deadline = self.loop.time() + (HEAD_TIMEOUT if self.received else KEEP_ALIVE_TIMEOUT)
        self.adjust_reading()

    def adjust_reading(self) -> None:
        """Stop reading while MAX_PIPELINED answers are owed or the client does not read; resume after."""
        should_read = not self.writing_paused and len(self.answers) < MAX_PIPELINED
        if should_read == self.reading or self.transport.is_closing():
            return
        self.reading = should_read
        if should_read:
            self.transport.resume_reading()
            self.read_requests()  # heads that waited in the buffer meanwhile
        else:
            self.transport.pause_reading()

    def close_politely(self) -> None:
        """Half-close after the last answer, and give the client DRAIN_TIMEOUT to close its side."""
        if self.client_done:
            self.transport.close()  # nothing left to drain: close once the answers are written
            return
        self.transport.write_eof()  # FIN after the answers: the client reads them all, then end of file
        self.deadline = self.loop.time() + DRAIN_TIMEOUT  # ...and closes its side, or the sweep closes it

    def stop(self) -> None:
        """The server is stopping: answer the requests in flight, then close; an idle connection closes now."""
        if not self.last_request_read:
            self.last_request_read = True
            if not self.answers and not self.transport.is_closing():
                self.close_politely()

    def pause_writing(self) -> None:
        self.writing_paused = True  # the transport's buffer is over its high-water mark
        self.deadline = self.loop.time() + SEND_TIMEOUT  # the client must read our answers in time
        self.adjust_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.deadline = math.inf if self.answers else self.loop.time() + KEEP_ALIVE_TIMEOUT
        self.adjust_reading()

    def eof_received(self) -> bool:
        # The client half-closed. Answer what it already asked (returning True keeps
        # the connection open for that), then close; with nothing owed, returning False
        # lets the transport close itself after writing what we queued.
        self.client_done = True
        self.last_request_read = True
        return bool(self.answers)

    def connection_lost(self, exc: Exception | None) -> None:
        for answer in self.answers:
            if answer.timer is not None:
                answer.timer.cancel()  # nobody to answer any more
        self.answers.clear()
        self.connections.discard(self)
        self.closed.set_result(None)
# --8<-- [end:armour]


class Answer:
    """One request's answer: held in the connection's queue until it and every earlier one are ready."""

    __slots__ = ("big", "keep_alive", "status", "response", "timer")

    def __init__(self, status: int, keep_alive: bool, big: bool = False) -> None:
        self.status, self.keep_alive, self.big = status, keep_alive, big
        self.response: bytes | None = None  # set when the simulated call is done: the answer is ready
        self.timer: asyncio.TimerHandle | None = None


class RequestError(Exception):
    """A request we refuse; carries the status code to answer with."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


_parsed_heads: dict[bytes, tuple[str, bytes, bool]] = {}  # head -> what parse_request_head made of it
MAX_PARSED_HEADS = 1024  # caps, so clients sending ever new (or huge) heads cannot make it grow without end
MAX_REMEMBERED_HEAD_BYTES = 1024  # longer heads are parsed every time: at most 1 MiB of remembered heads


def parse_request_head(head: bytes) -> tuple[str, bytes, bool]:
    """parse_request_head_once, remembered: a client sends the same head again and again, parsed once."""
    parsed = _parsed_heads.get(head)
    if parsed is None:
        parsed = parse_request_head_once(head)  # a RequestError is raised, never remembered
        if len(head) <= MAX_REMEMBERED_HEAD_BYTES:
            if len(_parsed_heads) >= MAX_PARSED_HEADS:
                _parsed_heads.clear()
            _parsed_heads[head] = parsed
    return parsed


def parse_request_head_once(head: bytes) -> tuple[str, bytes, bool]:
    """Validate a request head (without the blank line); return its method, target and whether to keep alive."""
    request_line, *header_lines = head.split(b"\r\n")
    match = REQUEST_LINE.fullmatch(request_line)
    if match is None:
        raise RequestError(400)
    connection, has_body = b"", False
    for line in header_lines:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise RequestError(400)
        name = name.lower()
        if name == b"connection":
            connection += b"," + value.lower()  # the header may be repeated: its tokens add up
        elif name == b"content-length":
            has_body = has_body or value.strip() != b"0"
        elif name == b"transfer-encoding":
            has_body = True
    tokens = {token.strip() for token in connection.split(b",")}
    # HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 closes unless asked to keep it.
    keep_alive = b"close" not in tokens if request_line.endswith(b"/1.1") else b"keep-alive" in tokens
    return match.group(1).decode("ascii"), match.group(2), keep_alive and not has_body


def build_response(status: int, body: bytes, keep_alive: bool, content_type: str) -> bytes:
    """Serialise a complete HTTP/1.1 response; it says whether the connection stays open."""
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


_cache_second = -1  # the second the cached responses were built in
_cache: dict[tuple[int, bool, bool], bytes] = {}


def cached_response(status: int, keep_alive: bool, big: bool = False) -> bytes:
    """The complete response, built at most once a second: only its Date header changes, once a second."""
    global _cache_second
    second = int(time.time())
    if second != _cache_second:
        _cache.clear()
        _cache_second = second
    key = (status, keep_alive, big)
    response = _cache.get(key)
    if response is None:
        if status != 200:
            body, content_type = f"{status} {REASONS[status]}\n".encode(), "text/plain; charset=utf-8"
        elif big:
            body, content_type = b"x" * BIG_BYTES, "text/plain; charset=utf-8"
        else:
            body, content_type = BODY, "text/html; charset=utf-8"
        response = _cache[key] = build_response(status, body, keep_alive, content_type)
    return response


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))


async def close_overdue(connections: set[KeepAliveProtocol]) -> None:
    """Every SWEEP_INTERVAL, close the connections past their deadline (abort if closing did not finish)."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(SWEEP_INTERVAL)
        now = loop.time()
        for connection in [connection for connection in connections if connection.deadline < now]:
            if connection.transport.is_closing():
                connection.transport.abort()  # closed once already and still unsent: the client does not read
            else:
                connection.last_request_read = True
                connection.close_politely()
                connection.deadline = now + DRAIN_TIMEOUT


async def serve_forever(host: str, port: int, delay: float, cpu_work: int) -> None:
    """Serve until SIGINT/SIGTERM, then give the requests in flight SHUTDOWN_GRACE to finish."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    # add_signal_handler runs the callback inside the loop, between two other
    # callbacks, so it may touch loop objects such as this Event.
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    loop.add_signal_handler(signal.SIGTERM, stopping.set)

    connections: set[KeepAliveProtocol] = set()
    server = await loop.create_server(lambda: KeepAliveProtocol(delay, cpu_work, connections), host, port,
                                      backlog=BACKLOG)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"Serving on http://{host}:{port}/ (delay {delay} s); Ctrl-C stops", flush=True)
    sweeper = asyncio.create_task(close_overdue(connections))
    await stopping.wait()

    # Stop accepting in two steps, as in asyncio_echo.py (python/cpython#109564):
    # stop reading the listening socket, give the loop two turns to set up what it
    # has accepted (its transport, then connection_made), then close.
    for listener in server.sockets:
        loop.remove_reader(listener.fileno())
    for _ in range(2):
        await asyncio.sleep(0)
    server.close()  # new clients are refused, not left in the backlog
    for connection in list(connections):
        connection.stop()  # idle keep-alive connections close now; busy ones after their answers
    if connections:
        await asyncio.wait([connection.closed for connection in connections], timeout=SHUTDOWN_GRACE)
    if connections:
        late = list(connections)
        for connection in late:
            connection.transport.abort()  # out of grace: close at once, skip the polite drain
        await asyncio.wait([connection.closed for connection in late], timeout=1.0)
    sweeper.cancel()
    await asyncio.gather(sweeper, return_exceptions=True)
    await server.wait_closed()


def main() -> None:
    global KEEP_ALIVE_TIMEOUT  # the handlers read the module's constant; --keep-alive-timeout replaces it
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--keep-alive-timeout", type=float, default=KEEP_ALIVE_TIMEOUT,
                        help="seconds an idle connection is kept open between two requests")
    args = parser.parse_args()
    KEEP_ALIVE_TIMEOUT = args.keep_alive_timeout

    uvloop.run(serve_forever(args.host, args.port, args.delay, args.work))
    # The requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
