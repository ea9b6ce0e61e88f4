"""The page as a WSGI application on a psycopg 3 pool: what Gunicorn's gthread worker runs here.

The model: none of its own, as wsgi_app.py: the server calls the function once
per request in one of its threads. The simulated call becomes a real one: the
thread borrows a connection from a psycopg_pool.ConnectionPool of POOL_SIZE
connections (opened when the worker imports this module, before it serves),
runs the request's query and gives it back. The query: APP_QUERY (sleep is
`SELECT pg_sleep(APP_DELAY)`; single reads one random row of `world`;
multiple reads MULTIPLE_ROWS rows, one query each), or single at /db and
multiple at /queries (TechEmpower's paths). The header X-Query-Result says
what the database returned, X-Pool-Wait-Us how long the request waited for a
free connection.
Grows from: wsgi_app.py (time.sleep(delay) becomes a query on a pooled
connection) and threads_psycopg_pool.py (the same pool and queries).

Run:   DATABASE_URL=postgresql://bench@127.0.0.1:5432/bench APP_DELAY=0.1 \
           gunicorn -c servers/gunicorn_gthread.conf.py wsgi_psycopg_app:app
       (python scripts/bench.py serve gunicorn-gthread-psycopg starts a scratch PostgreSQL)
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: configuration from the environment (DATABASE_URL,
APP_DELAY, APP_QUERY, APP_POOL_SIZE), read once at import, because the command
line belongs to the server. One pool per worker process: with several workers,
each opens POOL_SIZE connections. A request whose query fails, or that waits
POOL_TIMEOUT for a connection, is answered 503 (a WSGI application may answer
an error; our own servers drop the connection instead).
"""

import os
import random
import sys
import time
from collections.abc import Callable, Iterable

import psycopg
from psycopg_pool import ConnectionPool

DSN = os.environ.get("DATABASE_URL", "")
DELAY = float(os.environ.get("APP_DELAY", "0.1"))  # pg_sleep's argument (APP_QUERY=sleep)
QUERY = os.environ.get("APP_QUERY", "sleep")  # what each request asks the database: sleep, single or multiple
POOL_SIZE = int(os.environ.get("APP_POOL_SIZE", "16"))  # as many connections as the worker has threads
POOL_TIMEOUT = 10.0  # how long a thread waits for a free connection before its request gets 503
CONNECT_TIMEOUT = 10.0  # at import, every connection of the pool must be open within this
PATH_QUERIES = {"/db": "single", "/queries": "multiple"}  # TechEmpower's paths choose their query; any other, QUERY
WORLD_ROWS = 10_000  # rows in the world table (harness/system/postgres.py seeds it)
MULTIPLE_ROWS = 20  # rows read by the multiple query, one query each
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)

StartResponse = Callable[[str, list[tuple[str, str]]], object]


def run_query(pool: ConnectionPool, query: str, delay: float) -> tuple[str, int]:
    """The request's database call on a borrowed connection: what the database returned, in a few words,
    and how long the request waited for a connection, in microseconds (0 while one is free)."""
    asked = time.perf_counter()
    with pool.connection() as db:  # a free connection, or wait for one (POOL_TIMEOUT); given back after
        waited_us = round((time.perf_counter() - asked) * 1e6)  # the pool's queue, not the query
        if query == "sleep":
            db.execute("SELECT pg_sleep(%s)", (delay,))  # the database waits; this thread waits for its answer
            return f"pg_sleep {delay:g}", waited_us
        ids = [random.randint(1, WORLD_ROWS) for _ in range(1 if query == "single" else MULTIPLE_ROWS)]
        rows = [db.execute("SELECT id, randomnumber FROM world WHERE id = %s", (row_id,)).fetchone() for row_id in ids]
    return " ".join(f"{row_id}={number}" for row_id, number in rows), waited_us


def make_app(pool: ConnectionPool, query: str, delay: float) -> Callable[[dict, StartResponse], Iterable[bytes]]:
    """A WSGI application that answers GET with BODY (BIG_BODY at /big) after its query, anything else with 405."""

    def app(environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        if environ["REQUEST_METHOD"] != "GET":
            body = b"405 Method Not Allowed\n"
            start_response("405 Method Not Allowed", [("Content-Type", "text/plain; charset=utf-8"),
                                                      ("Content-Length", str(len(body))), ("Allow", "GET")])
            return [body]
        try:
            result, waited_us = run_query(pool, PATH_QUERIES.get(environ["PATH_INFO"], query), delay)
        except psycopg.Error as error:  # failed, or no connection within POOL_TIMEOUT (PoolTimeout)
            print(f"database error: {error}", file=sys.stderr, flush=True)
            body = b"503 Service Unavailable: the database call failed\n"
            start_response("503 Service Unavailable", [("Content-Type", "text/plain; charset=utf-8"),
                                                       ("Content-Length", str(len(body)))])
            return [body]
        big = environ["PATH_INFO"] == "/big"
        body, content_type = (BIG_BODY, "text/plain") if big else (BODY, "text/html; charset=utf-8")
        start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body))),
                                  ("X-Query-Result", result), ("X-Pool-Wait-Us", str(waited_us))])
        return [body]

    return app


def open_pool(dsn: str, size: int) -> ConnectionPool:
    """Every connection opened now, in the worker, before it serves; exit with the reason if they cannot be."""
    if not dsn:
        sys.exit("no database: set DATABASE_URL")
    # autocommit: each SELECT is its own transaction, with no BEGIN and COMMIT round trips around it.
    pool = ConnectionPool(dsn, min_size=size, max_size=size, timeout=POOL_TIMEOUT, kwargs={"autocommit": True},
                          open=False)
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT)
    except psycopg.Error as error:
        pool.close()
        sys.exit(f"cannot open {size} connections to {dsn}: {error}")
    return pool


app = make_app(open_pool(DSN, POOL_SIZE), QUERY, DELAY)  # what `gunicorn wsgi_psycopg_app:app` looks for
