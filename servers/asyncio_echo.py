"""asyncio echo: one event loop; each line's slow part is a task, answered from its done-callback.

The model: an asyncio.Protocol gets callbacks from the event loop as bytes
arrive. When a whole line is in, data_received() does not wait for the
simulated I/O itself: it starts a task for it (loop.create_task) and returns at
once, so the loop can serve every other connection. When the task is done, the
loop calls send_reply() (task.add_done_callback), which writes the upper-cased
line and closes. This is the design of "Async Python - Part 1", with what it
needs to be correct: buffering until the newline, a cap, a strong reference to
each task, timeouts, a polite close, and a graceful stop.
Grows from: asyncio_streams.py (the same event loop, driven through callbacks
instead of coroutines that read), and threaded_echo.py (the same protocol).

Protocol (the same in threaded_echo.py and minimal_asyncio_echo.py): the client
sends one line ending in b"\\n"; the server reads until that newline however
the bytes arrive, waits --delay seconds, sends the line back upper-cased
(newline included) and closes. One line per connection: bytes after the first
newline are read and discarded. A line longer than MAX_LINE_BYTES gets TOO_LONG
instead; a client that closes before its newline gets no answer.

Run:   python servers/asyncio_echo.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--backlog 128]
Load:  python scripts/echo_client.py --port 8000 --connections 1000

Known limits, on purpose: one thread for everything, so a blocking call in
data_received() or in the task would freeze every connection.
Not on purpose, and handled: lines that arrive in pieces, over-long lines,
silent clients (CLIENT_TIMEOUT for the line), clients that half-close while we
work (we still answer), and clients that send more than we read (we half-close
and drain instead of resetting). Deadlines are checked by one sweep every
SWEEP_INTERVAL, not by a timer per connection: with 10,000 connections, two
extra timers each cost more than the sweep. On SIGINT/SIGTERM: stop accepting,
give open connections SHUTDOWN_GRACE, abort the rest, exit 0.
"""

import argparse
import asyncio
import math
import signal

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated I/O per line
BACKLOG = 128  # pending connections the kernel queues for us (--backlog; the kernel caps it at somaxconn)
MAX_LINE_BYTES = 64 * 1024  # a longer line gets TOO_LONG instead of its echo
CLIENT_TIMEOUT = 10.0  # a client that goes quiet cannot hold a connection forever
DRAIN_TIMEOUT = 1.0  # how long we read leftovers after answering, before closing
SWEEP_INTERVAL = 0.5  # how often one sweep closes the connections past their deadline
SHUTDOWN_GRACE = 5.0  # on stop, how long replies in flight may take to finish
TOO_LONG = b"ERROR line longer than 65536 bytes\n"
# No POLL_INTERVAL: the loop's signal handler wakes it, nothing needs polling.


# --8<-- [start:model]
async def serve_forever(host: str, port: int, delay: float, backlog: int) -> None:
    """Serve until SIGINT/SIGTERM, then give the open connections SHUTDOWN_GRACE to finish."""
    loop = asyncio.get_running_loop()
    stopping = stop_on_signals(loop)  # an Event, set on SIGINT/SIGTERM
    connections: set[EchoProtocol] = set()
    server = await loop.create_server(lambda: EchoProtocol(delay, connections), host, port, backlog=backlog)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"Serving on tcp://{host}:{port}/ (delay {delay} s); Ctrl-C stops", flush=True)
    sweeper = asyncio.create_task(close_overdue(connections))  # one sweep for every client's deadline
    await stopping.wait()
    await stop_gracefully(loop, server, connections, sweeper)


async def simulated_io(line: bytes, delay: float) -> bytes:
    """The slow part, as a coroutine: wait `delay` seconds without holding the loop, then upper-case."""
    await asyncio.sleep(delay)  # a timer inside the loop: other connections run meanwhile
    return upper_case(line)


class EchoProtocol(asyncio.Protocol):
    """One connection: buffer until the newline, hand the slow part to a task, answer when it is done."""

    def data_received(self, data: bytes) -> None:
        line = self.take_line(data)  # None: no newline yet, past the line (discarded), or too long (refused)
        if line is None:
            return  # the loop calls us again with the next bytes
        self.deadline = math.inf  # the wait from here on is ours, not the client's
        self.work = self.loop.create_task(simulated_io(line, self.delay))  # starts on the loop's next turn
        self.work.add_done_callback(self.send_reply)  # the loop calls it when the task has finished

    def send_reply(self, work: "asyncio.Task[bytes]") -> None:
        """The task's done-callback: answer with its result."""
        if work.cancelled():
            return  # the client left (connection_lost cancelled it), or the stop ran out of grace
        try:
            reply = work.result()
        except Exception:
            self.transport.abort()  # the work failed: drop the connection instead of leaving it hanging
            raise  # ...and let the loop's exception handler log why
        self.answer(reply)
    # --8<-- [end:model]

    # --8<-- [start:armour]
    def __init__(self, delay: float, connections: "set[EchoProtocol]") -> None:
        self.delay = delay
        self.connections = connections  # every open connection of the server, for a graceful stop
        self.connections.add(self)  # at accept time, before connection_made: a stop cannot miss us
        self.loop = asyncio.get_running_loop()
        self.closed = self.loop.create_future()  # resolved by connection_lost; serve_forever waits on it
        self.received = bytearray()
        self.work: asyncio.Task[bytes] | None = None  # the loop keeps only a weak reference: we keep it alive
        self.answered = False
        self.client_done = False  # the client has half-closed: no more bytes will come
        self.deadline = self.loop.time() + CLIENT_TIMEOUT  # close_overdue() closes us past it
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def take_line(self, data: bytes) -> bytes | None:
        """Buffer what arrived; the line once its newline is in, else None (answering TOO_LONG past the cap)."""
        if self.work is not None or self.answered:
            return None  # past the line: read and discard, so closing sends FIN, not RST
        start = len(self.received)
        self.received += data
        end = self.received.find(b"\n", start)  # search only the new bytes: a trickled line stays linear
        if end == -1 and len(self.received) <= MAX_LINE_BYTES:
            return None  # not a whole line yet
        if end == -1 or end >= MAX_LINE_BYTES:
            self.answer(TOO_LONG)
            return None
        line = bytes(self.received[: end + 1])
        self.received.clear()
        return line

    def answer(self, reply: bytes) -> None:
        """Send the reply, half-close, and give the client DRAIN_TIMEOUT to close its side."""
        self.answered = True
        if self.transport.is_closing():
            return  # the client already went away: nobody to answer
        self.transport.write(reply)
        if self.client_done:
            self.transport.close()  # nothing left to drain: close once the reply is written
            return
        self.transport.write_eof()  # FIN after the reply: the client reads it all, then end of file
        self.deadline = self.loop.time() + DRAIN_TIMEOUT  # ...and closes its side, or we close it

    def eof_received(self) -> bool:
        # The client half-closed. Keep the connection open only if we still owe it
        # an answer (it sent its line, then shut its side, like `nc -N`); returning
        # False lets the transport close itself, after writing what we queued.
        self.client_done = True
        return self.work is not None and not self.answered

    def connection_lost(self, exc: Exception | None) -> None:
        if self.work is not None:
            self.work.cancel()  # nobody to answer any more; a no-op if it is done
        self.connections.discard(self)
        self.closed.set_result(None)


def stop_on_signals(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """An Event set on SIGINT/SIGTERM."""
    stopping = asyncio.Event()
    # add_signal_handler runs the callback inside the loop, between two other
    # callbacks, so it may touch loop objects such as this Event.
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    return stopping


async def stop_gracefully(loop: asyncio.AbstractEventLoop, server: asyncio.Server,
                          connections: set[EchoProtocol], sweeper: asyncio.Task[None]) -> None:
    """Stop accepting, give the open connections SHUTDOWN_GRACE to finish, abort the rest."""
    # Stop accepting in two steps. server.close() alone can land between an accept
    # and the setting up of its transport, which CPython answers with an
    # AssertionError and a leaked socket (gh-109564). So: stop reading the
    # listening socket, give the loop two turns to set up what it has accepted
    # (its transport, then connection_made, where its EchoProtocol joins
    # `connections`), then close.
    for listener in server.sockets:
        loop.remove_reader(listener.fileno())
    for _ in range(2):
        await asyncio.sleep(0)
    server.close()  # new clients are refused, not left in the backlog
    if connections:
        await asyncio.wait([connection.closed for connection in connections], timeout=SHUTDOWN_GRACE)
    if connections:
        late = list(connections)
        for connection in late:
            connection.transport.abort()  # out of grace: close at once, skip the polite drain
        # abort() reports connection_lost (which cancels the task) on the loop's next turn.
        await asyncio.wait([connection.closed for connection in late], timeout=1.0)
    sweeper.cancel()
    await asyncio.gather(sweeper, return_exceptions=True)
    await server.wait_closed()
# --8<-- [end:armour]


# --8<-- [start:plumbing]
def upper_case(line: bytes) -> bytes:
    """The line upper-cased as UTF-8 text; bytes that are not UTF-8 come back unchanged."""
    return line.decode("utf-8", "surrogateescape").upper().encode("utf-8", "surrogateescape")


async def close_overdue(connections: set[EchoProtocol]) -> None:
    """Every SWEEP_INTERVAL, close the connections past their deadline (abort if closing did not finish)."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(SWEEP_INTERVAL)
        now = loop.time()
        for connection in [connection for connection in connections if connection.deadline < now]:
            if connection.transport.is_closing():
                connection.transport.abort()  # closed once already and still unsent: the client does not read
            else:
                connection.transport.close()
                connection.deadline = now + DRAIN_TIMEOUT
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated I/O per line")
    parser.add_argument("--backlog", type=int, default=BACKLOG, help="listen backlog: connections not yet accepted")
    args = parser.parse_args()

    asyncio.run(serve_forever(args.host, args.port, args.delay, args.backlog))
    # The replies in flight finished (or ran out of grace) inside serve_forever.
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
