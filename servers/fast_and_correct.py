"""Fast and correct: the hardened event loop on uvloop, with the common request answered first.

The model: the hardened design's, unchanged in what it accepts and refuses. One
asyncio Protocol per connection, its strict parser, every limit and every timer;
keep-alive, and pipelined requests answered one at a time, in order. What is new
is the common case first: when a connection waits between two requests with
nothing buffered and one segment arrives that is exactly one common request (a
GET of the page, keep-alive, no body) and there is no call or work to wait for,
it is answered at once with a response built once a second, and the keep-alive
timer, still armed, only learns when the wait began again. Anything else takes
the hardened design's long way.
Grows from: hardened_event_loop.py (its parser, limits, armour, serving and
plumbing are kept word for word, which tests/servers/test_server_files.py checks), with
the recipe of uvloop_protocol_keep_alive.py and docs/how-fast.md: uvloop's event
loop, cached responses, the common case first, parsed heads remembered.

Run:   python servers/fast_and_correct.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--work 0]
       [--head-timeout 10] [--body-timeout 10] [--keep-alive-timeout 5] [--send-timeout 10] [--max-connections 15000]
Load:  wrk -c 50 -d 10s http://127.0.0.1:8000/   or   ab -k -n 1000 -c 10 http://127.0.0.1:8000/

Theory of operation: common_request(data) decides whether the fast path may
answer a segment, and it may answer less than the parser would, never decide
otherwise: a precompiled pattern takes the common heads (an HTTP/1.1 GET with one
valid Host and no header that changes the framing: browsers', curl's, proxies'),
heads the full parser found common are remembered, and another new head is given
to the parser once. A head over MAX_COMMON_HEAD_BYTES, a segment with part of a head or more than one, a
refused head, and any request that is not common go the long way, where the
parser answers exactly as in hardened_event_loop.py. tests/servers/test_fast_and_correct.py
holds the fast path to the parser, table by table.
Known limits, on purpose: those of hardened_event_loop.py (GET only, no TLS, no
HTTP/2, one thread), and uvloop is not in the standard library. The fast path
serves only when nothing is waited for (--delay 0 and --work 0); otherwise every
request takes the long way. Remembered heads are capped at MAX_REMEMBERED_HEADS:
a client sending ever new heads costs a second parse for each.
"""

import argparse
import asyncio
import email.utils
import re
import resource
import signal
import time
from dataclasses import dataclass

import uvloop  # the one library this file adds: the same program on libuv's event loop

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request
BACKLOG = 128  # pending connections the kernel queues for us (asyncio accepts up to this many per wake-up)
MAX_REQUEST_LINE_BYTES = 8 * 1024  # a longer request line gets 414: absurd URLs from scanners and overflow probes
MAX_HEADER_LINE_BYTES = 8 * 1024  # a longer header line gets 431: giant cookies, memory held per connection
MAX_HEAD_BYTES = 64 * 1024  # a larger request head gets 431: what one connection can make us hold is bounded
MAX_HEADER_LINES = 100  # more header lines get 431: thousands of tiny headers cost CPU and memory, not bytes
MAX_METHOD_BYTES = 20  # a longer method gets 400: the method is judged before the line ends (random bytes)
MAX_BODY_BYTES = 1024 * 1024  # a larger body gets 413 before we read it (with Expect: 100-continue, unsent)
MAX_CHUNK_SIZE_DIGITS = 8  # more hex digits in a chunk size get 400: overflowing chunk sizes (smuggling)
MAX_CHUNK_LINE_BYTES = 1024  # a longer chunk-size line (extensions) gets 400: chunk-extension floods
MAX_PIPELINED_BYTES = 64 * 1024  # requests read ahead while answering one; past it we stop reading (pipelining flood)
MAX_CONNECTIONS = 15_000  # past it: 503 and close, so a connection flood cannot use every file descriptor
HEAD_TIMEOUT = 10.0  # whole head within this long of its first byte (or of accept), never reset: slowloris
BODY_TIMEOUT = 10.0  # the whole body within this long of the head: a client announcing 100 KB and sending 10 bytes
KEEP_ALIVE_TIMEOUT = 5.0  # an idle connection between two requests is closed: idle connections hold descriptors
SEND_TIMEOUT = 10.0  # a client that takes none of our bytes for this long is dropped: slow readers of big answers
DRAIN_TIMEOUT = 1.0  # lingering close: after our FIN, read leftovers this long, so close() sends FIN, not RST
WRITE_CHUNK_BYTES = 64 * 1024  # big bodies reach the transport piece by piece, as the client reads: slow readers
FD_RESERVE = 64  # descriptors kept for the listener, the loop and stdio when the connection limit meets the fd limit
SHUTDOWN_GRACE = 5.0  # on stop, how long requests in flight may take to finish
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
FORM_RECEIVED = b"form received\n"  # POST /form: the answer once the body is read
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)
# No POLL_INTERVAL: the loop's signal handler wakes it, nothing needs polling.

# More statuses than the other designs' REASONS: every refusal below has its own.
STATUS_REASONS = {100: "Continue", 200: "OK", 400: "Bad Request", 405: "Method Not Allowed", 408: "Request Timeout",
           413: "Content Too Large", 414: "URI Too Long", 417: "Expectation Failed",
           431: "Request Header Fields Too Large", 501: "Not Implemented", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}


# --8<-- [start:model]
class HttpConnection(asyncio.Protocol):
    """One client connection: a parser, a read timer, a write timer, and the request being answered."""

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return  # lingering: what the client still sends is read and dropped
        if self.read_timer_is_idle:  # between two requests, nothing buffered: the common case comes first
            if self.settings.at_once and not self.writing_paused and (version := common_request(data)) is not None:
                return self.answer_at_once(version)  # one whole GET of the page, and no call or work to wait for
            self.arm_read_timer(self.settings.head_timeout, self.head_timed_out)  # the head timeout starts, for good
        self.parser.feed(data)
        self.process()

    def process(self) -> None:
        while not (self.answering or self.closing or self.writing_paused):  # requests one at a time, in order
            try:
                event = self.parser.next_event()
            except RequestError as error:
                return self.refuse(error.status)  # answer the error and close
            if event is None:
                break  # the parser needs more bytes
            if event is END_OF_REQUEST:
                self.start_answer()
            else:
                self.start_request(event)  # a head: 100 Continue, and the body timeout if a body follows
        self.after_events()  # close once a half-closed client is answered; read ahead only so far

    def answer_at_once(self, version: str) -> None:
        """What the long way would answer, without its parser state, queue and timers; then idle again."""
        self.transport.write(cached_response(200, True, version))
        self.idle_since = self.loop.time()  # the keep-alive timer, still armed, now counts from here

    def start_answer(self) -> None:
        self.answering = True
        self.cancel_read_timer()  # from here on we are the slow party, not the client
        if self.settings.delay > 0:
            self.simulated_call = self.loop.call_later(self.settings.delay, self.answer)  # the simulated database call
        else:
            self.simulated_call = self.loop.call_soon(self.answer)  # let other connections run between requests
    # --8<-- [end:model]

    # --8<-- [start:armour]
    def answer(self) -> None:
        self.simulated_call = None
        simulated_cpu_work(self.settings.work)  # the simulated computation: no await in it, so every connection waits
        request, self.request = self.request, None
        self.closing_after_answer = self.server.stopping or not request.keep_alive
        self.queue_answer(request, keep_alive=not self.closing_after_answer)
        self.send_more()

    # __slots__: no per-object dict, a few hundred bytes less for each of ten thousand idle connections.
    __slots__ = ("server", "settings", "loop", "transport", "parser", "request", "read_timer", "read_timer_is_idle",
                 "write_timer", "simulated_call", "outgoing", "answering", "closing_after_answer", "closing",
                 "client_done", "writing_paused", "reading_paused", "idle_since")

    def __init__(self, server: "Server") -> None:
        self.server = server
        self.settings = server.settings
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = RequestParser()
        self.request: Request | None = None
        self.read_timer: asyncio.TimerHandle | None = None  # head, body, keep-alive idle, or lingering
        self.read_timer_is_idle = False  # the keep-alive wait: the next byte starts a head timeout
        self.write_timer: asyncio.TimerHandle | None = None  # armed while the client takes none of our bytes
        self.simulated_call: asyncio.Handle | None = None
        self.outgoing: list[bytes | memoryview] = []  # the answer, not yet written (an empty deque costs 700 bytes)
        self.answering = False  # from the end of a request until its answer is handed to the transport
        self.closing_after_answer = False  # the answer being sent is the last: Connection: close, or stopping
        self.closing = False  # our last answer is sent or going: only lingering is left
        self.client_done = False  # the client half-closed: it will send nothing more
        self.writing_paused = False
        self.reading_paused = False
        self.idle_since = 0.0  # when the keep-alive wait began: the end of the last answer

    # The connection's life, as the loop calls it.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)
        if len(self.server.connections) > self.settings.max_connections:
            self.refuse(503)  # a flood of connections: answer and close, instead of running out of descriptors
            return
        # A new connection gets the head timeout at once: connecting and saying nothing is not free.
        self.arm_read_timer(self.settings.head_timeout, self.head_timed_out)

    def start_request(self, request: "Request") -> None:
        """A request head is in: say 100 Continue if the client waits for it, time the body if one follows."""
        self.request = request
        if request.expects_continue:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # the client waits for this to send its body
        if self.parser.expects_body:
            self.arm_read_timer(self.settings.body_timeout, self.body_timed_out)

    def after_events(self) -> None:
        """After process(): close a half-closed client once answered; pause reading past MAX_PIPELINED_BYTES."""
        if self.client_done and not (self.answering or self.closing or self.writing_paused):
            self.close_gracefully()  # the client sent all it will send and every complete request is answered
            return
        # Read ahead only so far: a client pipelining without reading our answers meets TCP flow control.
        if len(self.parser.buffer) > MAX_PIPELINED_BYTES and not self.reading_paused:
            self.transport.pause_reading()
            self.reading_paused = True
        elif self.reading_paused and len(self.parser.buffer) <= MAX_PIPELINED_BYTES:
            self.transport.resume_reading()
            self.reading_paused = False

    def queue_answer(self, request: "Request", keep_alive: bool) -> None:
        """The answer's bytes, queued: 200 to a POST to /form (its body read), 405 to anything else but GET, 1 MiB at
        /big, the page elsewhere."""
        if request.method == "POST" and request.path == "/form":
            body = FORM_RECEIVED  # answered once in a while, so built each time
            self.outgoing.append(response_head(200, "text/plain; charset=utf-8", len(body), keep_alive, request.version)
                                 + body)
        elif request.method != "GET":
            self.outgoing.append(cached_response(405, keep_alive, request.version))
        elif request.path == "/big":
            self.outgoing.append(cached_response(200, keep_alive, request.version, big=True))  # the head alone
            view = memoryview(BIG_BODY)
            self.outgoing.extend(view[start:start + WRITE_CHUNK_BYTES]
                                 for start in range(0, len(BIG_BODY), WRITE_CHUNK_BYTES))
        else:
            self.outgoing.append(cached_response(200, keep_alive, request.version))

    def send_more(self) -> None:
        """Write while the transport takes more; pause_writing stops us, resume_writing calls us again."""
        while self.outgoing and not self.writing_paused:
            self.transport.write(self.outgoing.pop(0))  # at most 17 pieces: pop(0) is cheap
        if not self.outgoing:
            self.answer_sent()

    def answer_sent(self) -> None:
        self.answering = False
        if self.closing_after_answer:
            self.close_gracefully()
            return
        self.parser.start_next_request()
        if self.parser.buffer:
            self.arm_read_timer(self.settings.head_timeout, self.head_timed_out)  # a pipelined request is here
        else:
            self.idle_since = self.loop.time()
            self.arm_read_timer(self.settings.keep_alive_timeout, self.idle_timed_out, idle=True)
        self.process()

    # Clients that stop sending, vanish or stop reading.

    def eof_received(self) -> bool:
        self.client_done = True
        if self.closing:
            if self.transport.get_write_buffer_size() == 0:
                self.transport.close()
        elif not self.answering:
            self.process()  # answer the complete requests still buffered, then close
        return True  # keep the transport open: a half-closed client still reads our answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        for handle in (self.read_timer, self.write_timer, self.simulated_call):
            if handle is not None:
                handle.cancel()  # a client gone during the simulated call leaves nothing behind
        self.outgoing.clear()
        self.server.connections.discard(self)
        if self.server.stopping and not self.server.connections:
            self.server.all_closed.set()

    def pause_writing(self) -> None:
        # The transport holds more than its high-water mark: the client is not reading.
        self.writing_paused = True
        self.write_timer = self.loop.call_later(self.settings.send_timeout, self.transport.abort)

    def resume_writing(self) -> None:
        self.writing_paused = False
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None
        if self.closing:
            self.linger()  # our last bytes are out: now wait for the client's FIN
        elif self.answering:
            self.send_more()
        else:
            self.process()  # a pipelined request waited for the client to read the previous answer

    # Refusing, timing out and closing.

    def refuse(self, status: int) -> None:
        """Answer an error and close: after a broken request we cannot know where the next one starts."""
        body = f"{status} {STATUS_REASONS[status]}\n".encode()
        self.transport.write(response_head(status, "text/plain; charset=utf-8", len(body), False, "1.1") + body)
        self.close_gracefully()

    def head_timed_out(self) -> None:
        self.close_gracefully()  # no request to answer (as nginx): a head that never ended gets only our FIN

    def idle_timed_out(self) -> None:
        """The keep-alive timer: close, unless answers given at once have moved the idle wait's start since."""
        left = self.idle_since + self.settings.keep_alive_timeout - self.loop.time()
        if left > 0:
            self.arm_read_timer(left, self.idle_timed_out, idle=True)  # one timer per idle wait, not per request
        else:
            self.close_gracefully()

    def body_timed_out(self) -> None:
        self.refuse(408)  # the client sent a request and waits for an answer: tell it why

    def stop(self) -> None:
        """On shutdown: a request in flight is finished (its answer says close); an idle connection closes now."""
        if not (self.closing or self.answering or self.parser.expects_body):
            self.close_gracefully()

    def close_gracefully(self) -> None:
        """Half-close after our last bytes, then read what the client still sends until it closes too."""
        if self.closing:
            return
        self.closing = True
        self.cancel_read_timer()
        self.transport.write_eof()  # FIN once the buffer is written
        self.transport.set_write_buffer_limits(high=0)  # so resume_writing tells us when the buffer is empty
        if self.reading_paused:
            self.transport.resume_reading()
        if not self.writing_paused:
            self.linger()

    def linger(self) -> None:
        if self.client_done:
            self.transport.close()
        else:
            self.arm_read_timer(DRAIN_TIMEOUT, self.transport.close)

    def arm_read_timer(self, seconds: float, callback, idle: bool = False) -> None:
        self.cancel_read_timer()
        self.read_timer = self.loop.call_later(seconds, callback)
        self.read_timer_is_idle = idle

    def cancel_read_timer(self) -> None:
        if self.read_timer is not None:
            self.read_timer.cancel()
            self.read_timer = None
        self.read_timer_is_idle = False
# --8<-- [end:armour]


# --8<-- [start:serve]
@dataclass
class Settings:
    """What the command line may change: the simulated call, the timeouts and the connection limit."""

    delay: float = DELAY
    work: int = WORK
    head_timeout: float = HEAD_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    keep_alive_timeout: float = KEEP_ALIVE_TIMEOUT
    send_timeout: float = SEND_TIMEOUT
    max_connections: int = MAX_CONNECTIONS

    @property
    def at_once(self) -> bool:
        """Whether an answer waits for nothing: no simulated call, no simulated computation."""
        return not (self.delay or self.work)


class Server:
    """What every connection shares: settings, the open connections, and the stop flag."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.connections: set[HttpConnection] = set()
        self.stopping = False
        self.all_closed = asyncio.Event()  # set once stopping and the last connection is gone


async def serve_forever(host: str, port: int, settings: Settings) -> None:
    """Serve until SIGINT/SIGTERM; then stop accepting, finish requests in flight, close idle connections."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    loop.add_signal_handler(signal.SIGTERM, stopping.set)

    server = Server(settings)
    listener = await loop.create_server(lambda: HttpConnection(server), host, port, backlog=BACKLOG)
    host, port = listener.sockets[0].getsockname()[:2]
    print(f"Serving on http://{host}:{port}/ (delay {settings.delay} s); Ctrl-C stops", flush=True)
    await stopping.wait()

    listener.close()  # stop accepting: new clients are refused, not left in the backlog
    server.stopping = True
    for connection in list(server.connections):
        connection.stop()
    if server.connections:
        try:
            await asyncio.wait_for(server.all_closed.wait(), SHUTDOWN_GRACE)
        except TimeoutError:
            for connection in list(server.connections):
                connection.transport.abort()  # out of grace: stop waiting for them
    await listener.wait_closed()
# --8<-- [end:serve]


# --8<-- [start:parser]
class RequestError(Exception):
    """A request we refuse; carries the status code to answer with."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclass
class Request:
    """A complete request head, as the parser hands it over."""

    method: str
    target: str
    version: str  # "1.0" or "1.1"
    headers: list[tuple[bytes, bytes]]  # (lower-cased name, value without surrounding blanks)
    keep_alive: bool
    expects_continue: bool

    @property
    def path(self) -> str:
        """The path of an origin-form (/x?y) or absolute-form (http://host/x?y) target."""
        target = self.target
        if not target.startswith("/"):
            scheme_end = target.find("://")
            slash = target.find("/", scheme_end + 3) if scheme_end > 0 else -1
            target = target[slash:] if slash >= 0 else "/"
        return target.partition("?")[0]


END_OF_REQUEST = object()  # next_event's answer when the body (or its absence) is over

# RFC 9112 sec. 3: request-line = method SP request-target SP HTTP-version, single spaces; stricter than the
# other designs' REQUEST_LINE (capital-letter methods only, any HTTP/d.d so that 2.0 can get 505).
STRICT_REQUEST_LINE = re.compile(rb"([A-Z]{1,%d}) ([\x21-\x7e]+) HTTP/([0-9])\.([0-9])" % MAX_METHOD_BYTES)
# Origin form, absolute form (http or https) or "*" (RFC 9112 sec. 3.2); CONNECT's authority form is checked apart.
TARGET = re.compile(rb"/[\x21-\x7e]*|[Hh][Tt][Tt][Pp][Ss]?://[\x21-\x7e]*|\*")
# RFC 9112 sec. 5: field-name ":" OWS field-value OWS. No space before the colon, no leading
# space (obs-fold), and no control characters but HTAB in the value (NUL, CR, LF: 400).
HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):([\t\x20-\x7e\x80-\xff]*)")
CONTENT_LENGTH = re.compile(rb"[0-9]{1,15}")  # digits only: "-1", "+5", "0x5", "5, 6" are refused
# RFC 9112 sec. 3.2: Host = uri-host [ ":" port ] (RFC 3986 sec. 3.2.2): a bracketed IPv6 literal or a
# reg-name (which covers IPv4 too). No userinfo ("user@"), no path ("/"), no space: those are 400.
HOST_VALUE = re.compile(rb"(?:\[[0-9A-Fa-f:.]+\]|(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)(?::[0-9]*)?")
# RFC 9112 sec. 7.1: chunk-size [ chunk-ext ]; hex digits only ("6_0", "0x5", "+5", "-1" are refused).
# An extension needs a name after its ";" ("5;" and "5 junk" are refused); the rest of it is read, not parsed.
CHUNK_SIZE_LINE = re.compile(rb"([0-9A-Fa-f]{1,%d})"  # the size
                             rb"(?:[ \t]*;[ \t]*[!#$%%&'*+.^_`|~0-9A-Za-z-]+[\t\x20-\x7e\x80-\xff]*)?"  # extensions
                             % MAX_CHUNK_SIZE_DIGITS)
REQUEST_LINE_BYTES = bytes(range(0x21, 0x7F)) + b" \r"  # what a request line may contain, CRLF included


class RequestParser:
    """Bytes in, requests out: no sockets, no clock. Fed with feed(), read with next_event().

    next_event() returns a Request when a head is complete, END_OF_REQUEST when its
    body is over (the body is counted and dropped), or None when it needs more bytes;
    it raises RequestError the moment the bytes cannot be a valid request. After
    END_OF_REQUEST it returns None until start_next_request(): the caller answers
    first, so pipelined requests wait in the buffer, in order.
    """

    __slots__ = ("buffer", "state", "request_line", "headers", "head_bytes", "body_left", "body_bytes")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.start_next_request()

    def start_next_request(self) -> None:
        self.state = "head"  # head, length, chunk-size, chunk-data, chunk-end, trailers, done, answered
        self.request_line: tuple[str, str, str] | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_bytes = 0
        self.body_left = 0  # bytes of the body (or of the current chunk) still to come
        self.body_bytes = 0  # body bytes announced so far

    def feed(self, data: bytes) -> None:
        self.buffer += data

    @property
    def expects_body(self) -> bool:
        return self.state in ("length", "chunk-size", "chunk-data", "chunk-end", "trailers")

    def next_event(self) -> "Request | object | None":
        while True:
            if self.state == "head":
                line = self.take_line(*((MAX_REQUEST_LINE_BYTES, 414) if self.request_line is None
                                        else (MAX_HEADER_LINE_BYTES, 431)))
                if line is None:
                    if self.request_line is None:
                        check_partial_request_line(self.buffer)
                    return None
                self.head_bytes += len(line) + 2
                if self.head_bytes > MAX_HEAD_BYTES:
                    raise RequestError(431)
                if self.request_line is None:
                    if line:  # RFC 9112 sec. 2.2: empty lines before a request line are ignored
                        self.request_line = parse_request_line(line)
                elif line:
                    if len(self.headers) >= MAX_HEADER_LINES:
                        raise RequestError(431)
                    self.headers.append(parse_header_line(line))
                else:
                    return self.finish_head()
            elif self.state == "length":
                if not self.buffer:
                    return None
                taken = min(self.body_left, len(self.buffer))
                del self.buffer[:taken]
                self.body_left -= taken
                if self.body_left == 0:
                    self.state = "done"
            elif self.state == "chunk-size":
                line = self.take_line(MAX_CHUNK_LINE_BYTES, 400)
                if line is None:
                    return None
                match = CHUNK_SIZE_LINE.fullmatch(line)
                if match is None:
                    raise RequestError(400)
                self.body_left = int(match.group(1), 16)
                self.body_bytes += self.body_left
                if self.body_bytes > MAX_BODY_BYTES:
                    raise RequestError(413)
                self.state = "chunk-data" if self.body_left else "trailers"
            elif self.state == "chunk-data":
                if not self.buffer:
                    return None
                taken = min(self.body_left, len(self.buffer))
                del self.buffer[:taken]
                self.body_left -= taken
                if self.body_left == 0:
                    self.state = "chunk-end"
            elif self.state == "chunk-end":
                if len(self.buffer) < 2:
                    return None
                if self.buffer[:2] != b"\r\n":
                    raise RequestError(400)  # a chunk longer than its size said
                del self.buffer[:2]
                self.state = "chunk-size"
            elif self.state == "trailers":
                line = self.take_line(MAX_HEADER_LINE_BYTES, 431)
                if line is None:
                    return None
                if not line:
                    self.state = "done"
                elif len(self.headers) >= MAX_HEADER_LINES:
                    raise RequestError(431)
                else:
                    self.headers.append(parse_header_line(line))  # checked, then ignored
            elif self.state == "done":
                self.state = "answered"
                return END_OF_REQUEST
            else:  # answered: the caller has not called start_next_request() yet
                return None

    def take_line(self, limit: int, too_long_status: int) -> bytes | None:
        """Remove and return one CRLF-ended line (without CRLF), or None if it has not all arrived."""
        end = self.buffer.find(b"\n", 0, limit + 2)  # never look further than the longest line allowed
        if end < 0:
            if len(self.buffer) > limit + 1:
                raise RequestError(too_long_status)
            return None
        if end == 0 or self.buffer[end - 1] != 0x0D:
            raise RequestError(400)  # a bare LF: we accept CRLF only
        line = bytes(self.buffer[:end - 1])
        del self.buffer[:end + 1]
        return line

    def finish_head(self) -> Request:
        """Apply the framing rules of RFC 9112 sec. 6 to a complete head; choose what comes next."""
        method, target, version = self.request_line
        values: dict[bytes, list[bytes]] = {}
        for name, value in self.headers:
            values.setdefault(name, []).append(value)
        hosts = values.get(b"host", [])
        if len(hosts) > 1 or (version == "1.1" and not hosts):
            raise RequestError(400)  # RFC 9112 sec. 3.2: exactly one Host in HTTP/1.1, at most one before
        if hosts and HOST_VALUE.fullmatch(hosts[0]) is None:
            raise RequestError(400)  # RFC 9112 sec. 3.2: "MUST respond with 400" to an invalid Host value
        lengths, encodings = values.get(b"content-length"), values.get(b"transfer-encoding")
        if encodings is not None:
            if lengths is not None or version == "1.0":
                raise RequestError(400)  # RFC 9112 sec. 6.1: both framings at once is how requests are smuggled
            codings = [coding.strip().lower() for value in encodings for coding in value.split(b",")]
            if codings[-1] != b"chunked":
                raise RequestError(400)  # RFC 9112 sec. 6.3: a request whose last coding is not chunked has no end
            if codings != [b"chunked"]:
                raise RequestError(501)  # gzip and friends: we do not decode them
            self.state = "chunk-size"
        elif lengths is not None:
            if len(lengths) > 1 or CONTENT_LENGTH.fullmatch(lengths[0]) is None:
                raise RequestError(400)  # RFC 9112 sec. 6.3: several lengths, or not a number
            self.body_left = int(lengths[0])
            if self.body_left > MAX_BODY_BYTES:
                raise RequestError(413)  # before reading a byte of it
            self.state = "length" if self.body_left else "done"
        else:
            self.state = "done"  # RFC 9112 sec. 6.3: a request with neither has no body
        expects_continue = False
        if b"expect" in values and version == "1.1":  # RFC 9110 sec. 10.1.1: ignored in an HTTP/1.0 request
            if [value.lower() for value in values[b"expect"]] != [b"100-continue"]:
                raise RequestError(417)
            expects_continue = self.expects_body
        options = {option.strip().lower() for value in values.get(b"connection", []) for option in value.split(b",")}
        keep_alive = b"close" not in options and (version == "1.1" or b"keep-alive" in options)
        return Request(method, target, version, self.headers, keep_alive, expects_continue)


def check_partial_request_line(partial: bytearray) -> None:
    """Refuse an unfinished request line as soon as it cannot become a valid one."""
    if partial.translate(None, REQUEST_LINE_BYTES):
        raise RequestError(400)  # a control character or a byte >= 0x80
    method = bytes(partial[:MAX_METHOD_BYTES + 1]).split(b" ", 1)[0].rstrip(b"\r")
    if method and (not (method.isalpha() and method.isupper()) or len(method) > MAX_METHOD_BYTES):
        raise RequestError(400)  # lower case, digits, punctuation, or too long to be a method we know


def parse_request_line(line: bytes) -> tuple[str, str, str]:
    """Split `METHOD target HTTP/x.y`; 400 for anything else, 505 for a well-formed version not 1.x."""
    match = STRICT_REQUEST_LINE.fullmatch(line)
    if match is None:
        raise RequestError(400)  # no version, HTTP/1.1x, two spaces, a control character...
    method, target, major, minor = match.groups()
    if major != b"1":
        raise RequestError(505)
    if minor not in (b"0", b"1"):
        raise RequestError(505)
    if method != b"CONNECT" and TARGET.fullmatch(target) is None:
        raise RequestError(400)
    return method.decode("ascii"), target.decode("ascii"), f"1.{minor.decode('ascii')}"


def parse_header_line(line: bytes) -> tuple[bytes, bytes]:
    """Split `Name: value`; 400 for a space before the colon, a folded line, no colon, or a control byte."""
    match = HEADER_LINE.fullmatch(line)
    if match is None:
        raise RequestError(400)
    return match.group(1).lower(), match.group(2).strip(b" \t")
# --8<-- [end:parser]


# --8<-- [start:common]
# The common case in one pattern: an HTTP/1.1 GET of the page (any path but /big) with one valid Host and any
# other headers but those that change the framing or the answer (Content-Length, Transfer-Encoding, Expect;
# Connection, unless it says only keep-alive), each line checked as the parser checks it. So browsers', curl's,
# health checks' and proxies' heads take it, each unique. Every head it matches (within MAX_COMMON_HEAD_BYTES
# and MAX_HEADER_LINES) the full parser accepts with the same meaning (keep-alive, no body), and a test holds
# the two to it; every other head goes to the parser.
NAME_AND_VALUE = rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e\x80-\xff]*\r\n"  # HEADER_LINE's, with its CRLF
# Three alternatives that never match the same line, so a head the pattern refuses costs one pass, not 2**lines.
OTHER_HEADER = (rb"(?![CcEeHhTt])" + NAME_AND_VALUE  # most names: no initial that could start the five below
                + rb"|(?=[CcEeHhTt])(?!(?i:host|content-length|transfer-encoding|expect|connection):)" + NAME_AND_VALUE
                + rb"|(?i:connection:)[\t ]*(?i:keep-alive)[\t ]*\r\n")  # what HTTP/1.1 does anyway
COMMON_HEAD = re.compile(rb"GET /(?!big[? ])[\x21-\x7e]* HTTP/1\.1\r\n(?:" + OTHER_HEADER + rb")*"
                         rb"(?i:host:)[\t ]*(?:" + HOST_VALUE.pattern + rb")[\t ]*\r\n(?:" + OTHER_HEADER + rb")*\r\n")
remembered_heads: dict[bytes, str] = {}  # a whole head the full parser found common -> its HTTP version
MAX_REMEMBERED_HEADS = 1024  # a cap, so clients sending ever new heads cannot make it grow without end
MAX_COMMON_HEAD_BYTES = 8 * 1024  # longer heads go the long way: no line of a shorter one reaches 414 or 431


def matches_common_head(data: bytes) -> bool:
    """Whether the pattern takes `data`, within the parser's limits on lines (its length is checked before)."""
    return COMMON_HEAD.fullmatch(data) is not None and data.count(b"\n") <= MAX_HEADER_LINES + 2  # + request line, end


def common_request(data: bytes) -> str | None:
    """The HTTP version if `data` is exactly one common request (a GET of the page, keep-alive, no body); else None.

    The pattern first; then heads seen before, byte for byte; then, once per new head, the full parser decides
    (a head it refuses, or one with a body, Expect or Connection: close, goes the long way and is parsed again).
    """
    if len(data) > MAX_COMMON_HEAD_BYTES:
        return None  # the pattern has no length limit: the full parser's limits must apply
    if matches_common_head(data):
        return "1.1"
    version = remembered_heads.get(data)
    if version is not None or data.find(b"\r\n\r\n") != len(data) - 4:
        return version  # None for anything but one whole head
    parser = RequestParser()
    parser.feed(data)
    try:
        request, end = parser.next_event(), parser.next_event()
    except RequestError:
        return None  # the long way refuses it, with the same parser
    if (end is not END_OF_REQUEST or parser.buffer or request.method != "GET" or request.path == "/big"
            or not request.keep_alive or request.expects_continue):
        return None
    if len(remembered_heads) >= MAX_REMEMBERED_HEADS:
        remembered_heads.clear()
    remembered_heads[data] = request.version
    return request.version
# --8<-- [end:common]


# --8<-- [start:plumbing]
cached_date = [0, ""]  # [second, Date header]: formatting a date for every response costs more than the answer


def http_date() -> str:
    """The Date header's value, formatted once per second."""
    now = int(time.time())
    if now != cached_date[0]:
        cached_date[:] = [now, email.utils.formatdate(now, usegmt=True)]
    return cached_date[1]


def response_head(status: int, content_type: str, length: int, keep_alive: bool, version: str) -> bytes:
    """The status line and headers; Connection says what happens next (HTTP/1.0 keep-alive must be said)."""
    if not keep_alive:
        connection = "Connection: close\r\n"
    elif version == "1.0":
        connection = "Connection: keep-alive\r\n"
    else:
        connection = ""  # HTTP/1.1 keeps the connection unless told otherwise
    allow = "Allow: GET\r\n" if status == 405 else ""
    return (f"HTTP/1.1 {status} {STATUS_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\nDate: {http_date()}\r\n{allow}{connection}\r\n").encode("ascii")


cached_responses: dict[tuple[int, bool, str, bool], bytes] = {}  # built this second: (status, keep-alive, version, big)
cached_second = [0]  # the second they were built in


def cached_response(status: int, keep_alive: bool, version: str, big: bool = False) -> bytes:
    """A whole answer (for /big, its head), built at most once a second: only its Date header changes."""
    now = int(time.time())
    if now != cached_second[0]:
        cached_responses.clear()
        cached_second[0] = now
    key = (status, keep_alive, version, big)
    response = cached_responses.get(key)
    if response is None:
        if status != 200:
            body, content_type = f"{status} {STATUS_REASONS[status]}\n".encode(), "text/plain; charset=utf-8"
        elif big:
            body, content_type = BIG_BODY, "text/plain"
        else:
            body, content_type = BODY, "text/html; charset=utf-8"
        head = response_head(status, content_type, len(body), keep_alive, version)
        response = cached_responses[key] = head if big else head + body  # /big's body follows in pieces
    return response


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))


def raise_open_files_limit(max_connections: int) -> int:
    """Raise our soft limit on open files to the hard limit; return the connection limit it allows.

    Each connection is a file descriptor; the usual soft limit (1,024) would stop us
    long before MAX_CONNECTIONS. Past the hard limit accept() fails with EMFILE, and the
    loop pauses accepting for a second; the connection limit keeps us below it.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, max_connections + FD_RESERVE)
    if soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError):
            pass  # not allowed here: keep the soft limit we have
    return max(1, min(max_connections, soft - FD_RESERVE))
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated database call per request")
    parser.add_argument("--work", type=int, default=WORK, help="iterations of simulated CPU work per request")
    parser.add_argument("--head-timeout", type=float, default=HEAD_TIMEOUT, help="seconds for a whole request head")
    parser.add_argument("--body-timeout", type=float, default=BODY_TIMEOUT, help="seconds for a whole request body")
    parser.add_argument("--keep-alive-timeout", type=float, default=KEEP_ALIVE_TIMEOUT,
                        help="seconds an idle connection is kept between requests")
    parser.add_argument("--send-timeout", type=float, default=SEND_TIMEOUT,
                        help="seconds a client may take none of our bytes")
    parser.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                        help="open connections past which new ones get 503")
    args = parser.parse_args()

    max_connections = raise_open_files_limit(args.max_connections)
    settings = Settings(args.delay, args.work, args.head_timeout, args.body_timeout, args.keep_alive_timeout,
                        args.send_timeout, max_connections)
    uvloop.run(serve_forever(args.host, args.port, settings))
    # The requests in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
