"""The page as an ASGI application: what uvicorn runs.

The model: none of its own. An ASGI application is a coroutine function the
server calls once per request, as a task on the server's event loop (uvloop,
a libuv-based replacement for asyncio's loop, under uvicorn). The simulated
database call is `await asyncio.sleep()`: a timer on that loop, so one thread
keeps any number of requests waiting at once, as in asyncio_streams.py.
Grows from: asyncio_streams.py (the same coroutine per request, minus every
line about reading and writing bytes, which the server now owns).

Run:   APP_DELAY=0.1 uvicorn --app-dir servers asgi_app:app --http httptools --loop uvloop
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: the delay comes from the APP_DELAY environment
variable, read once at import, because the command line belongs to the server;
so does APP_KEEP_ALIVE=1, which stops the app asking to close every connection.
A blocking call here (time.sleep, a blocking database driver) would freeze
every request of the process, exactly as in selectors_blocking_sleep.py.
"""

import asyncio
import os

DELAY = float(os.environ.get("APP_DELAY", "0.1"))  # seconds of simulated database call per request
# APP_KEEP_ALIVE=1: leave the connection to the server (and the client), so it may be kept alive.
KEEP_ALIVE = os.environ.get("APP_KEEP_ALIVE", "0") == "1"
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
FORM_RECEIVED = b"form received\n"  # POST /form: the answer once the body is read
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)


async def app(scope: dict, receive, send) -> None:
    """Answer GET with BODY (BIG_BODY at /big) after DELAY seconds, a POST to /form with 200 once its body is read
    (a form sent, as behind a proxy's kept connection), anything else with 405."""
    if scope["type"] != "http":
        return  # lifespan and websocket events: nothing to set up, nothing to refuse
    if scope["method"] == "POST" and scope["path"] == "/form":
        more = True
        while more:  # the form, read and dropped
            more = (await receive()).get("more_body", False)
        status, body, content_type = 200, FORM_RECEIVED, b"text/plain; charset=utf-8"
    elif scope["method"] != "GET":
        status, body, content_type = 405, b"405 Method Not Allowed\n", b"text/plain; charset=utf-8"
    else:
        if DELAY:  # no call to simulate at 0: no timer either, as in every design here
            await asyncio.sleep(DELAY)  # the simulated database call: only this request waits
        if scope["path"] == "/big":
            status, body, content_type = 200, BIG_BODY, b"text/plain"
        else:
            status, body, content_type = 200, BODY, b"text/html; charset=utf-8"
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if not KEEP_ALIVE:
        # ASGI lets an application ask for the connection to close; uvicorn then
        # answers "Connection: close" and closes after the body, as every design here does.
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
