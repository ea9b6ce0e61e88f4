"""Gunicorn, sync worker: a pre-forked process that answers one request at a time.

The model: a master process (the arbiter) binds the socket and forks `workers`
processes that all accept() on it. A sync worker takes one connection, runs
the WSGI application to the end, writes the answer, closes, and only then
accepts again: with one worker, this is sequential_sockets.py with a process
supervisor around it. More workers mean more requests at once, one process each.
Grows from: prefork.py (the same parent that forks workers onto one socket and
restarts them), cut down to the article's single worker.

Run:   APP_DELAY=0.1 gunicorn -c servers/gunicorn_sync.conf.py [--bind 127.0.0.1:8000]
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/
Stop:  SIGTERM (kill PID) is the graceful stop: the worker finishes its request,
       for up to graceful_timeout seconds. SIGINT (Ctrl-C) and SIGQUIT are the
       quick stop: the request in flight is cut off.

Known limits: Gunicorn has no cap on the size of the whole request head; it caps
the number of header lines and the size of each. We pick the two so their
product is our 64 KiB (32 lines of at most 2 KiB), which also refuses a 33rd
header, however small. Command-line flags override anything set here.
"""

import os

wsgi_app = "wsgi_app:app"  # servers/wsgi_app.py; the delay comes from APP_DELAY
chdir = os.path.dirname(os.path.abspath(__file__))  # servers/: gunicorn moves there and imports wsgi_app from it
bind = ["127.0.0.1:8000"]  # loopback only, as in every design here
workers = 1  # one process, one request at a time: the article's single-CPU setting
worker_class = "sync"
graceful_timeout = 5  # on SIGTERM, how long a request in flight may take to finish
timeout = 30  # a worker silent for this long is killed and replaced by the arbiter
limit_request_fields = 32  # header lines per request ...
limit_request_field_size = 2048  # ... of at most this many bytes: 32 x 2 KiB = 64 KiB, else 431
http_parser = "python"  # the pure-Python parser, whether or not gunicorn[fast] is installed
control_socket_disable = True  # no gunicornc control socket in $HOME: several copies may run at once
accesslog = None  # no per-request logging
