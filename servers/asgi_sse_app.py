"""Server-sent events as an ASGI application: what uvicorn and Granian run for the streaming page.

The model: none of its own. The server calls `app` once per request, as a task
on its event loop; for GET /events the app sends the head of a
`text/event-stream` response, then one small event every INTERVAL seconds for
DURATION seconds, each as a `http.response.body` message with more_body, then
an empty last one. The server owns the socket: it frames the body (chunked
transfer encoding, since the app gives no length) and decides what
`await send(...)` does when the client reads slowly. uvicorn's send waits
while its transport is paused (backpressure, as drain() does); Granian hands
the bytes to its Rust side. Every other path answers the page at once.
Grows from: asgi_app.py (the same app, streaming at /events) and
sse_asyncio_streams.py (the same schedule and events).

Run:   uvicorn --app-dir servers asgi_sse_app:app --http httptools --loop uvloop
       granian --interface asgi --working-dir servers asgi_sse_app:app
Load:  curl -N 'http://127.0.0.1:8000/events?interval=0.1&duration=5&size=64'
       (the query overrides STREAM_INTERVAL, STREAM_DURATION and STREAM_EVENT_BYTES from the environment)

Known limits, on purpose: the settings come from the environment, because the
command line belongs to the server. The app does not listen for the client's
disconnect (receive() and http.disconnect): a stream whose client has gone runs
on to its end, its events dropped by the server; and it does not hear that the
server is stopping, so a graceful stop waits for the streams to end, however
long the server's own shutdown timeout lets it.
"""

import asyncio
import os
import urllib.parse

INTERVAL = float(os.environ.get("STREAM_INTERVAL", "0.1"))  # seconds between two events (?interval=)
DURATION = float(os.environ.get("STREAM_DURATION", "30"))  # seconds a stream lasts (?duration=)
EVENT_BYTES = int(os.environ.get("STREAM_EVENT_BYTES", "64"))  # bytes per event, framing included (?size=)
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
STREAM_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                  (b"connection", b"close")]  # closed after the stream, as every design here


async def app(scope: dict, receive, send) -> None:
    """GET /events: a stream of events; any other GET: the page at once; anything else: 405."""
    if scope["type"] != "http":
        return  # lifespan and websocket events: nothing to set up, nothing to refuse
    if scope["method"] != "GET":
        await answer(send, 405, b"405 Method Not Allowed\n", b"text/plain; charset=utf-8")
    elif scope["path"] == "/events":
        await send_events(send, *stream_settings(scope["query_string"].decode("latin-1")))
    else:
        await answer(send, 200, BODY, b"text/html; charset=utf-8")


async def send_events(send, interval: float, count: int, size: int) -> None:
    """The event-stream head, then one event every interval until `count` are sent; then the end of the body."""
    await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
    started = (loop := asyncio.get_running_loop()).time()
    for number in range(count):
        await asyncio.sleep(started + number * interval - loop.time())  # on schedule: no drift
        await send({"type": "http.response.body", "body": build_event(number, size), "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def answer(send, status: int, body: bytes, content_type: bytes) -> None:
    """A whole short answer, and the connection closed after it."""
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def stream_settings(query_string: str) -> tuple[float, int, int]:
    """What a stream's query asks (interval=S&duration=S&size=BYTES), within bounds: interval, events, size."""
    query = urllib.parse.parse_qs(query_string)

    def number(name: str, default: float, low: float, high: float) -> float:
        try:
            return min(max(float(query[name][0]), low), high)
        except (KeyError, ValueError):
            return default  # absent or not a number: the server's setting

    interval = number("interval", INTERVAL, 0.001, 60.0)
    duration = number("duration", DURATION, 0.0, 3600.0)
    return interval, round(duration / interval), int(number("size", EVENT_BYTES, 16, 1024 * 1024))


def build_event(number: int, size: int) -> bytes:
    """One server-sent event of `size` bytes: its number as id and data, padded, and the blank line that ends it."""
    event = f"id: {number}\ndata: {number} ".encode("ascii")
    return event + b"x" * max(0, size - len(event) - 2) + b"\n\n"
