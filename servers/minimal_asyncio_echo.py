"""Minimal asyncio echo: the smallest correct asyncio.Protocol for the echo protocol, as a yardstick.

The model: the event loop calls data_received() as bytes arrive; once the line
is complete, loop.call_later() schedules the reply `delay` seconds later. No
task, no coroutine: a timer handle is the cheapest way asyncio has to wait.
It is the reference asyncio_echo.py is measured against: same protocol, same
delay, same upper-casing, same polite close, and nothing else. What it leaves
out is what asyncio_echo.py pays for: a task per line, a timeout for silent
clients, and a stop that waits for the replies in flight.
Grows from: asyncio_echo.py, by subtraction.

Protocol (the same in threaded_echo.py and asyncio_echo.py): the client sends
one line ending in b"\\n"; the server reads until that newline however the
bytes arrive, waits --delay seconds, sends the line back upper-cased (newline
included) and closes. One line per connection: bytes after the first newline
are read and discarded. A line longer than MAX_LINE_BYTES gets TOO_LONG
instead; a client that closes before its newline gets no answer.

Run:   python servers/minimal_asyncio_echo.py [--host 127.0.0.1] [--port 8000] [--delay 0.1] [--backlog 128]
Load:  python scripts/echo_client.py --port 8000 --connections 1000

Known limits, on purpose: a client that never sends its newline, or never
closes after the reply, holds its connection until it goes away. SIGINT and
SIGTERM stop at once with exit code 0; replies still waiting are not sent, and
a connection accepted in the last instant can make asyncio log an
AssertionError (CPython gh-109564; asyncio_echo.py stops in two steps to avoid it).
"""

import argparse
import asyncio
import signal

HOST = "127.0.0.1"  # loopback only: binding every interface is a choice to make on purpose
PORT = 8000
DELAY = 0.1  # seconds of simulated I/O per line
BACKLOG = 128  # pending connections the kernel queues for us (--backlog; the kernel caps it at somaxconn)
MAX_LINE_BYTES = 64 * 1024  # a longer line gets TOO_LONG instead of its echo
TOO_LONG = b"ERROR line longer than 65536 bytes\n"


# --8<-- [start:model]
async def serve_forever(host: str, port: int, delay: float, backlog: int) -> None:
    """Serve until SIGINT/SIGTERM."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, stopping.set)
    loop.add_signal_handler(signal.SIGTERM, stopping.set)
    server = await loop.create_server(lambda: EchoProtocol(delay), host, port, backlog=backlog)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"Serving on tcp://{host}:{port}/ (delay {delay} s); Ctrl-C stops", flush=True)
    await stopping.wait()
    server.close()


class EchoProtocol(asyncio.Protocol):
    """One connection: buffer until the newline, answer on a timer."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.received: bytearray | None = bytearray()  # None once the line is complete
        self.answered = False
        self.client_done = False  # the client has half-closed
        self.transport: asyncio.Transport

    def data_received(self, data: bytes) -> None:
        if self.received is None:
            return  # past the line: read and discard, so closing sends FIN, not RST
        start = len(self.received)
        self.received += data
        end = self.received.find(b"\n", start)
        if end == -1 and len(self.received) <= MAX_LINE_BYTES:
            return
        line, self.received = bytes(self.received[: end + 1]), None
        if end == -1 or end >= MAX_LINE_BYTES:
            self.answer(TOO_LONG)
        else:
            asyncio.get_running_loop().call_later(self.delay, self.answer, upper_case(line))
    # --8<-- [end:model]

    # --8<-- [start:armour]
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def answer(self, reply: bytes) -> None:
        self.answered = True
        if self.transport.is_closing():
            return
        self.transport.write(reply)
        if self.client_done:
            self.transport.close()  # both sides are done: close once the reply is written
        else:
            self.transport.write_eof()  # FIN after the reply; the client closes its side, then we close

    def eof_received(self) -> bool:
        self.client_done = True
        return self.received is None and not self.answered  # True keeps a half-closed client until answered
# --8<-- [end:armour]


# --8<-- [start:plumbing]
def upper_case(line: bytes) -> bytes:
    """The line upper-cased as UTF-8 text; bytes that are not UTF-8 come back unchanged."""
    return line.decode("utf-8", "surrogateescape").upper().encode("utf-8", "surrogateescape")
# --8<-- [end:plumbing]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=PORT)
    parser.add_argument("--delay", type=float, default=DELAY, help="seconds of simulated I/O per line")
    parser.add_argument("--backlog", type=int, default=BACKLOG, help="listen backlog: connections not yet accepted")
    args = parser.parse_args()

    asyncio.run(serve_forever(args.host, args.port, args.delay, args.backlog))
    print("Stopped", flush=True)


if __name__ == "__main__":
    main()
