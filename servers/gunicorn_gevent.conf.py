"""Gunicorn, gevent worker: one pre-forked process, a greenlet per connection.

The model: the arbiter forks a single worker as in gunicorn_sync.conf.py, but
this worker first monkey-patches the standard library (socket, time, ...) so
that every call that would block instead switches to another greenlet, while
gevent's event loop (libev or libuv, in C) watches the sockets and timers.
The application's blocking time.sleep() becomes a timer: one process holds
hundreds of requests that are all waiting at once.
Grows from: gunicorn_sync.conf.py (the same arbiter and application, another
worker class) and, in spirit, asyncio_streams.py (an event loop, with the
switching points hidden inside the patched library instead of written `await`).

Run:   APP_DELAY=0.1 gunicorn -c servers/gunicorn_gevent.conf.py [--bind 127.0.0.1:8000]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/
Stop:  SIGTERM is the graceful stop (requests in flight get graceful_timeout
       seconds); SIGINT (Ctrl-C) and SIGQUIT are the quick stop.

Known limits: monkey-patching only helps code that blocks through the patched
standard library; a C extension that blocks (some database drivers) or a
CPU-bound loop freezes every greenlet of the worker. Gunicorn caps header
lines and their size, not the whole head (see gunicorn_sync.conf.py).
"""

import os

wsgi_app = "wsgi_app:app"  # servers/wsgi_app.py; the delay comes from APP_DELAY
chdir = os.path.dirname(os.path.abspath(__file__))  # servers/: gunicorn moves there and imports wsgi_app from it
bind = ["127.0.0.1:8000"]  # loopback only, as in every design here
workers = 1  # one process: all the concurrency comes from greenlets
worker_class = "gevent"
worker_connections = 1000  # greenlets (connections) one worker holds at once; more wait in the backlog
keepalive = 0  # close after every response, as every design here does ("Connection: close")
graceful_timeout = 5  # on SIGTERM, how long requests in flight may take to finish
timeout = 30  # a worker whose event loop stalls this long is killed and replaced
limit_request_fields = 32  # header lines per request ...
limit_request_field_size = 2048  # ... of at most this many bytes: 32 x 2 KiB = 64 KiB, else 431
http_parser = "python"  # the pure-Python parser, whether or not gunicorn[fast] is installed
control_socket_disable = True  # no gunicornc control socket in $HOME: several copies may run at once
accesslog = None  # no per-request logging
