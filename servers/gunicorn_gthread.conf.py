"""Gunicorn, gthread worker: one pre-forked process, a pool of threads, connections kept alive.

The model: the arbiter forks a single worker as in gunicorn_sync.conf.py, but
this worker runs a poller (selectors) over every open connection and hands each
connection that has a request ready to a pool of `threads` threads, which run
the application. After answering, the connection goes back to the poller for up
to `keepalive` seconds, waiting for the client's next request: an idle
keep-alive connection costs a file descriptor in the poller, not a thread.
Grows from: gunicorn_sync.conf.py (the same arbiter and application) and
thread_pool_executor.py (a fixed pool of threads answering requests).

Run:   APP_DELAY=0.1 gunicorn -c servers/gunicorn_gthread.conf.py [--bind 127.0.0.1:8000]
Load:  hey -n 2000 -c 50 http://127.0.0.1:8000/   (hey keeps connections alive by default)
Stop:  SIGTERM is the graceful stop (requests in flight get graceful_timeout
       seconds); SIGINT (Ctrl-C) and SIGQUIT are the quick stop.

Known limits: `threads` requests run the application at once; more wait for a
thread, so a slow call holds a thread for its whole length. At most
worker_connections connections are open at once; more wait in the backlog.
Gunicorn caps header lines and their size, not the whole head (see
gunicorn_sync.conf.py).
"""

import os

wsgi_app = "wsgi_app:app"  # servers/wsgi_app.py; the delay comes from APP_DELAY
chdir = os.path.dirname(os.path.abspath(__file__))  # servers/: gunicorn moves there and imports wsgi_app from it
bind = ["127.0.0.1:8000"]  # loopback only, as in every design here
workers = 1  # one process: all the concurrency comes from its threads
worker_class = "gthread"
threads = 16  # requests whose application runs at once, as thread_pool_executor.py's 16 threads
worker_connections = 1000  # connections the worker holds at once (in the poller or in a thread)
keepalive = 5  # seconds an idle connection waits for its next request (gunicorn's default is 2)
graceful_timeout = 5  # on SIGTERM, how long requests in flight may take to finish
timeout = 30  # a worker silent for this long is killed and replaced by the arbiter
limit_request_fields = 32  # header lines per request ...
limit_request_field_size = 2048  # ... of at most this many bytes: 32 x 2 KiB = 64 KiB, else 431
http_parser = "python"  # the pure-Python parser, whether or not gunicorn[fast] is installed
control_socket_disable = True  # no gunicornc control socket in $HOME: several copies may run at once
accesslog = None  # no per-request logging
