"""The page as an ASGI application on an asyncpg pool: what uvicorn and Granian run here.

The model: none of its own, as asgi_app.py: the server calls the coroutine
function once per request, as a task on its event loop. The simulated call
becomes a real one: the task borrows a connection from an asyncpg pool of
POOL_SIZE connections (opened at the server's lifespan start-up, before it
serves), awaits the request's query and gives it back. The query: APP_QUERY
(sleep is `SELECT pg_sleep(APP_DELAY)`; single reads one random row of
`world`; multiple reads MULTIPLE_ROWS rows, one query each), or single at /db
and multiple at /queries (TechEmpower's paths). The header X-Query-Result says
what the database returned, X-Pool-Wait-Us how long the request waited for a
free connection.
Grows from: asgi_app.py (asyncio.sleep(delay) becomes a query on a pooled
connection) and asyncio_asyncpg.py (the same pool and queries).

Run:   DATABASE_URL=postgresql://bench@127.0.0.1:5432/bench APP_DELAY=0.1 \
           uvicorn --app-dir servers asgi_asyncpg_app:app --http httptools --loop uvloop
       (python scripts/bench.py serve uvicorn-asyncpg starts a scratch PostgreSQL)
Load:  ab -n 1000 -c 10 http://127.0.0.1:8000/

Known limits, on purpose: configuration from the environment (DATABASE_URL,
APP_DELAY, APP_QUERY, APP_POOL_SIZE), read once at import, because the command
line belongs to the server. The pool needs the ASGI lifespan protocol (uvicorn
and Granian both speak it): a server without it gets 503 for every request. A
request whose query fails, or that waits POOL_TIMEOUT for a connection, is
answered 503.
"""

import os
import random
import sys
import time

import asyncpg

DSN = os.environ.get("DATABASE_URL", "")
DELAY = float(os.environ.get("APP_DELAY", "0.1"))  # pg_sleep's argument (APP_QUERY=sleep)
QUERY = os.environ.get("APP_QUERY", "sleep")  # what each request asks the database: sleep, single or multiple
POOL_SIZE = int(os.environ.get("APP_POOL_SIZE", "16"))  # as many connections as asyncio_asyncpg.py's pool
POOL_TIMEOUT = 10.0  # how long a task waits for a free connection before its request gets 503
CONNECT_TIMEOUT = 10.0  # at start-up, every connection of the pool must be open within this
PATH_QUERIES = {"/db": "single", "/queries": "multiple"}  # TechEmpower's paths choose their query; any other, QUERY
WORLD_ROWS = 10_000  # rows in the world table (harness/system/postgres.py seeds it)
MULTIPLE_ROWS = 20  # rows read by the multiple query, one query each
# The driver's errors: a failed query, a lost connection, and no connection within POOL_TIMEOUT.
DATABASE_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError)
BODY = b"""<!doctype html>
<html>
  <head><title>Many clients at once</title></head>
  <body><h1>Hello from a Python server</h1></body>
</html>
"""
BIG_BODY = (b"x" * 1023 + b"\n") * 1024  # GET /big: 1 MiB of text, built once (to test slow readers)
pools: list[asyncpg.Pool] = []  # the process's one pool, once the lifespan start-up has opened it


async def run_query(pool: asyncpg.Pool, query: str, delay: float) -> tuple[str, int]:
    """The request's database call on a borrowed connection: what the database returned, in a few words,
    and how long the request waited for a connection, in microseconds (0 while one is free)."""
    asked = time.perf_counter()
    async with pool.acquire(timeout=POOL_TIMEOUT) as db:  # a free connection, or wait for one; given back after
        waited_us = round((time.perf_counter() - asked) * 1e6)  # the pool's queue, not the query
        if query == "sleep":
            await db.execute("SELECT pg_sleep($1)", delay)  # the database waits; this task awaits its answer
            return f"pg_sleep {delay:g}", waited_us
        ids = [random.randint(1, WORLD_ROWS) for _ in range(1 if query == "single" else MULTIPLE_ROWS)]
        rows = [await db.fetchrow("SELECT id, randomnumber FROM world WHERE id = $1", row_id) for row_id in ids]
    return " ".join(f"{row['id']}={row['randomnumber']}" for row in rows), waited_us


async def lifespan(receive, send) -> None:
    """Open every connection at start-up (not during the first requests); close them at shutdown."""
    await receive()  # lifespan.startup
    try:
        pools.append(await asyncpg.create_pool(DSN, min_size=POOL_SIZE, max_size=POOL_SIZE, timeout=CONNECT_TIMEOUT))
    except (OSError, *DATABASE_ERRORS) as error:  # refused, unreachable, timed out, or no DATABASE_URL
        await send({"type": "lifespan.startup.failed", "message": f"cannot open {POOL_SIZE} connections: {error!r}"})
        return
    await send({"type": "lifespan.startup.complete"})
    await receive()  # lifespan.shutdown
    await pools.pop().close()
    await send({"type": "lifespan.shutdown.complete"})


async def app(scope: dict, receive, send) -> None:
    """Answer GET with BODY (BIG_BODY at /big) after its query, anything else with 405."""
    if scope["type"] == "lifespan":
        return await lifespan(receive, send)
    if scope["type"] != "http":
        return  # websocket events: nothing to refuse
    # No `connection: close`: the server keeps the connection for the client's next request (issue 31), and closes
    # it when the client asks (a keep-alive-off run's wrk sends Connection: close).
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if scope["method"] != "GET":
        status, body = 405, b"405 Method Not Allowed\n"
    else:
        try:
            result, waited_us = await run_query(pools[0], PATH_QUERIES.get(scope["path"], QUERY), DELAY)
            big = scope["path"] == "/big"
            status, body = 200, BIG_BODY if big else BODY
            content_type = b"text/plain" if big else b"text/html; charset=utf-8"
            headers = [(b"content-type", content_type), (b"x-query-result", result.encode()),
                       (b"x-pool-wait-us", str(waited_us).encode())]
        except (IndexError, *DATABASE_ERRORS) as error:  # no pool (no lifespan), a failed query, or no connection
            print(f"database error: {error!r}", file=sys.stderr, flush=True)
            status, body = 503, b"503 Service Unavailable: the database call failed\n"
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
