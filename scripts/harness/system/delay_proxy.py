"""A TCP proxy that makes 127.0.0.1 behave like a slow network path: every byte is held `one_way_ms`.

Why a proxy and not `tc netem`: this machine's kernel is built without the netem
queueing discipline (CONFIG_NET_SCH_NETEM is not set), and a proxy needs no root.

The model of a path with a one-way delay d (a round trip of 2d), and what the
proxy does to reproduce it between a load tool and a server, both on loopback:

- A new connection: the client's SYN takes d, the SYN-ACK d more, and only then
  does the client send its request, which takes d: it reaches the server 3d
  after connect() began. Loopback connects at once, so the proxy holds the
  first bytes of each connection 3d (connecting to the server immediately).
- Every later byte, either way, is held d; the answer reaches the client d
  after the server wrote it. A request on a new connection therefore costs two
  round trips (4d) plus the server's time, one on a kept-alive connection (2d).
- A close (FIN) is forwarded d after the bytes before it, so an answer is never
  cut short.

Known limits: no bandwidth limit, loss or jitter; the proxy connects to the
server at once, so the server accepts the connection up to 3d earlier than over
a real path. It runs as its own process (the harness pins it to the load tool's
CPU), an asyncio loop that costs a little CPU per chunk.

Run:  python scripts/harness/system/delay_proxy.py --port 8001 --upstream-port 8000 --one-way-ms 35
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import time

HOST = "127.0.0.1"
CHUNK_BYTES = 65536
HANDSHAKE_LEGS = 2  # SYN, SYN-ACK: what the first bytes wait for before they can even leave the client


async def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float, first_delay: float) -> None:
    """Copy reader to writer, each chunk delivered `delay` after it arrived (the first `first_delay`), in order."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:  # end of stream: half-close, as the sender did
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    deliverer = asyncio.create_task(deliver())
    last_due = 0.0
    delay_now = first_delay
    try:
        while True:
            data = await reader.read(CHUNK_BYTES)
            last_due = max(last_due, time.monotonic() + delay_now)  # never overtake an earlier chunk
            delay_now = delay
            await queue.put((last_due, data))
            if not data:
                break
        await deliverer
    except (ConnectionError, OSError):
        deliverer.cancel()


async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter,
                upstream_port: int, delay: float) -> None:
    """One client connection: connect upstream, then carry both directions with the path's delays."""
    try:
        server_reader, server_writer = await asyncio.open_connection(HOST, upstream_port)
    except OSError:
        client_writer.close()
        return
    try:
        await asyncio.gather(
            carry(client_reader, server_writer, delay, (HANDSHAKE_LEGS + 1) * delay),
            carry(server_reader, client_writer, delay, delay),
            return_exceptions=True,
        )
    finally:
        for writer in (server_writer, client_writer):
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


async def serve(port: int, upstream_port: int, one_way_ms: float) -> None:
    delay = one_way_ms / 1000
    server = await asyncio.start_server(lambda r, w: relay(r, w, upstream_port, delay), HOST, port, backlog=1024)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    print(f"Serving on http://{HOST}:{port}/ -> {HOST}:{upstream_port}, {one_way_ms:g} ms each way", flush=True)
    async with server:
        await stopping.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--one-way-ms", type=float, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.upstream_port, args.one_way_ms))


if __name__ == "__main__":
    main()
