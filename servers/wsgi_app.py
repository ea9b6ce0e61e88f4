"""The page as a WSGI application: what a real Python server (Gunicorn, Waitress) runs.

The model: none of its own. A WSGI application is a function the server calls
once per request, in whatever thread, process or greenlet the server chose;
the concurrency is entirely the server's. The simulated database call is a
blocking time.sleep(), so each call ties up whatever runs it: a worker process
(gunicorn sync), a greenlet that gevent's monkey-patching makes cooperative
(gunicorn gevent), or a pool thread (waitress).
Grows from: sequential_sockets.py (the same BODY and the same answers, minus
every line about sockets, which the server now owns).

Run:   APP_DELAY=0.1 [APP_WORK=0] gunicorn -c servers/gunicorn_sync.conf.py
       python servers/waitress_server.py [--host 127.0.0.1] [--port 8000] [--delay 0.1]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: the delay comes from the APP_DELAY environment
variable (and the simulated computation, as our designs' --work, from APP_WORK),
read once at import, because a server's command line belongs to the server, not
to the application. Connection, Date and the framing of the
response are the server's business: PEP 3333 forbids an application to send
hop-by-hop headers such as Connection (waitress refuses them outright), so
"Connection: close" is configured in each server, not sent from here.
"""

import os
import time
from collections.abc import Callable, Iterable

DELAY = float(os.environ.get("APP_DELAY", "0.1"))  # seconds of simulated database call per request
WORK = 0  # iterations of simulated computation (pure-Python arithmetic) per request: APP_WORK overrides it
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
FORM_RECEIVED = b"form received\n"  # POST /form: the answer once the body is read
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)

StartResponse = Callable[[str, list[tuple[str, str]]], object]


def make_app(delay: float, cpu_work: int = 0) -> Callable[[dict, StartResponse], Iterable[bytes]]:
    """A WSGI application that answers GET with BODY (BIG_BODY at /big) after `delay` s and `cpu_work` iterations of
    computation, a POST to /form with 200 once its body is read (a form sent, as behind a proxy's kept
    connection), anything else with 405."""

    def app(environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] == "POST" and environ["PATH_INFO"] == "/form":
            environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))  # the form, read and dropped
            body = FORM_RECEIVED
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        if environ["REQUEST_METHOD"] != "GET":
            body = b"405 Method Not Allowed\n"
            start_response("405 Method Not Allowed", [
                ("Content-Type", "text/plain; charset=utf-8"),
                ("Content-Length", str(len(body))),
                ("Allow", "GET"),
            ])
            return [body]
        if delay:  # no call to simulate at 0: no sleep either, as in every design here
            time.sleep(delay)  # the simulated database call: it blocks whatever the server runs us in
        if cpu_work:
            simulated_cpu_work(cpu_work)  # the simulated computation, as in our designs: it holds the GIL
        if environ["PATH_INFO"] == "/big":
            body, content_type = BIG_BODY, "text/plain"
        else:
            body, content_type = BODY, "text/html; charset=utf-8"
        start_response("200 OK", [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),  # without it, HTTP/1.1 servers fall back to chunked
        ])
        return [body]

    return app


def simulated_cpu_work(iterations: int) -> int:
    """A fixed amount of pure-Python arithmetic (no sleep, no clock): it holds the GIL while it runs."""
    return sum(number * number % 7 for number in range(iterations))


app = make_app(DELAY, int(os.environ.get("APP_WORK", WORK)))  # what `gunicorn wsgi_app:app` looks for
