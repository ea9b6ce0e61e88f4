"""The deployment recipe: from a reader's numbers to workers, threads, pools, timeouts and configuration.

Theory of operation. A reader knows their box (cores, or a container's CPU quota), their peak request
rate, what one request costs (CPU time, and time waiting on PostgreSQL or another service), their
database's connection budget (max_connections less superuser_reserved_connections), their longest
request, and whether a proxy (nginx) sits in front. Little's law turns rate x time into requests held
at once; the rest is the site's measured rules, each in RULES with the record and the page section
that back it, and where it is *not* measured here (more than two CPUs, PgBouncer). `recipe()` applies
them; `RULES` is also written, by the renderer, to docs/_generated/recipe/rules.json, which the
page's calculator (docs/assets/recipe.js) reads: the constants are said once, here. The arithmetic
exists twice (Python for the worked examples and the stack check, JavaScript for the calculator);
tests/site/test_recipe_calculator.py runs the page in Chromium and checks the two agree on a set of inputs.

Known limits: a recipe for one kind of service (requests that compute, then wait on a database); no
streaming, websockets or idle connections (see docs/which-model.md); the counts past two CPUs are the
rules extrapolated, not measurements.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

# Every constant the recipe uses, and every rule with what backs it. Keys are read by recipe.js too.
CONSTANTS: dict[str, Any] = {
    "headroom": 1.25,  # threads, pools and CPU sized for 25% more than rate x time: a choice, see the rule
    "restart_factor": 2,  # a graceful restart runs old and new workers side by side: their pools too
    "admission_factor": 2,  # an event loop admits twice what it runs at once: an admitted request waits <= one request
    "proxy_keepalive_timeout_s": 60,  # nginx's upstream keepalive_timeout default (servers/nginx_upstream_keep_alive.conf)
    "keepalive_margin_s": 5,  # the server's idle timeout this much above the proxy's: 65 s, the race's fix
    "keepalive_without_proxy_s": 5,  # uvicorn's default; clients, not a proxy, reuse the connections
    "graceful_margin_s": 5,  # graceful and read timeouts this much above the longest request
    "gunicorn_timeout_default_s": 30,  # Gunicorn's `timeout` default (a silent worker is killed after it)
    "nginx_read_timeout_default_s": 60,  # nginx's proxy_read_timeout default
    "reserved_default": 3,  # PostgreSQL's superuser_reserved_connections default
    "max_connections_default": 100,  # PostgreSQL's max_connections default
    "measured_cpus": 2,  # the most CPUs any record here had: past it, the rules are not measured
}

RULES: list[dict[str, str]] = [
    {"id": "cpus", "rule": "CPUs = the smaller of the cores and the quota; the CPU work (rate × CPU per request × "
                           "headroom) must fit in them, or no count of workers or threads helps.",
     "record": "results/sizing-computing.json", "page": "sizing.md#computing-the-count-stops-mattering-at-the-cpus",
     "limit": "measured on one and two CPUs"},
    {"id": "event-loop-workers", "rule": "Event loops: one worker per usable CPU; waiting costs an event loop "
                                         "nothing, so more workers help only the computing.",
     "record": "results/sizing-computing.json", "page": "sizing.md#computing-the-count-stops-mattering-at-the-cpus",
     "limit": "measured at 1, 2 and 4 workers on two CPUs"},
    {"id": "thread-workers", "rule": "Threads (Gunicorn gthread): 2 × CPUs + 1 workers, Gunicorn's advice; one GIL "
                                     "each, and on two CPUs gthread gained up to 5 workers.",
     "record": "results/sizing-deployed.json", "page": "sizing.md#gunicorn-gthread-workers-threads",
     "limit": "measured at 1, 2 and 5 workers on two CPUs"},
    {"id": "threads", "rule": "Threads per worker = its share of the rate × (CPU + waiting) × headroom (Little's "
                              "law): a thread holds one request for its whole time.",
     "record": "results/sizing-open-loop.json", "page": "sizing.md#open-loop-the-queue-shows-in-the-latency",
     "limit": "measured up to 32 threads"},
    {"id": "worker-connections", "rule": "Gunicorn gthread: worker_connections = threads. Behind a proxy that keeps "
                                         "its connections, a worker serves the connections it accepted, not its share "
                                         "of the requests; with one connection a thread, none waits behind a busy "
                                         "worker (Gunicorn then keeps no idle connection, and warns so at start).",
     "record": "results/deployment/recipe-check.json", "page": "recipe.md#checked-on-the-real-stack",
     "limit": "3 × 9 threads on one CPU, with it and without it (Gunicorn's default, 1,000)"},
    {"id": "start-up", "rule": "Gunicorn listens before its workers have opened their database pools: what arrives "
                               "in the first seconds after a cold start queues behind them. Send a fresh instance "
                               "traffic once it answers through the app, not once its port is open.",
     "record": "results/deployment/recipe-check.json", "page": "recipe.md#checked-on-the-real-stack",
     "limit": "the cold start is measured (the warm-up rows); the health check is advice, not measured"},
    {"id": "pool", "rule": "Pool per worker: one connection per thread (a thread never waits for one); for an "
                           "event loop, its share of the rate × waiting × headroom: the pool, not the loop, caps it.",
     "record": "results/database-pool-10.json", "page": "database.md#the-pool-decides",
     "limit": "measured with pools of 5 to 20 on one CPU"},
    {"id": "connections", "rule": "Connections: workers × pool, twice that during a graceful restart (old and new "
                                  "workers side by side), must fit in max_connections less the reserved slots.",
     "record": "results/multi-process/restart.json", "page": "zero-downtime.md#what-the-table-shows",
     "limit": "the doubling is the restart's design; the connection count in it is not measured"},
    {"id": "pooler", "rule": "A pooler (PgBouncer, transaction mode) when the pools do not fit but the connections "
                             "busy at once (rate × waiting × headroom) do; when even those do not, no pooler helps.",
     "record": "results/database-pool-20.json", "page": "database.md#the-pool-decides",
     "limit": "PgBouncer is not measured here"},
    {"id": "keep-alive", "rule": "Behind a proxy that keeps connections, the server's idle timeout above the "
                                 "proxy's (nginx: 60 s), so the proxy always closes first.",
     "record": "results/deployment/proxy-race.json",
     "page": "deployment.md#the-idle-timeout-race-502s-from-a-proxy-that-keeps-connections",
     "limit": "measured for Gunicorn, uvicorn and our hardened server; Granian has no HTTP/1 idle timeout to set"},
    {"id": "graceful", "rule": "Graceful timeout above the longest request, so a restart finishes it; the proxy's "
                               "read timeout too.",
     "record": "results/multi-process/restart-in-flight.json",
     "page": "zero-downtime.md#clients-kept-alive-and-long-requests-in-flight",
     "limit": "measured with requests of up to 5 s"},
    {"id": "admission", "rule": "Admission cap: an event loop admits twice what it runs at once and answers 503 "
                                "past it; what it admits takes cap ÷ capacity on average (Little's law), and longer "
                                "at the tail (asyncpg's pool hands its connections out in no fixed order). Gunicorn's "
                                "gthread worker has no cap and queues.",
     "record": "results/deployment/overload.json", "page": "deployment.md#past-capacity",
     "limit": "measured on one CPU up to 3 × capacity; the mean and the tail on PostgreSQL: the check below"},
]


class RecipeInputError(ValueError):
    """A reader's number that the recipe cannot use (negative, zero where it must not be): the message says which."""


@dataclass(frozen=True)
class RecipeInputs:
    cores: int  # CPUs the machine (or the affinity mask) gives
    rate: float  # peak requests a second to serve
    cpu_ms: float  # CPU time per request, milliseconds
    wait_ms: float  # time per request waiting on the database (or another service), milliseconds
    max_connections: int = CONSTANTS["max_connections_default"]
    reserved: int = CONSTANTS["reserved_default"]  # superuser_reserved_connections and any other clients' slots
    longest_s: float = 30.0  # the longest request, seconds
    proxy: bool = True  # nginx (or a balancer) in front, keeping connections to the server
    quota: float | None = None  # a container's CPU quota in CPUs (docker --cpus), None for none

    def check(self) -> None:
        """RecipeInputError naming the first input that makes no sense."""
        if self.cores < 1:
            raise RecipeInputError(f"cores must be 1 or more, not {self.cores}")
        if self.quota is not None and self.quota <= 0:
            raise RecipeInputError(f"a CPU quota must be above 0 CPUs, not {self.quota}")
        if self.rate <= 0:
            raise RecipeInputError(f"the request rate must be above 0, not {self.rate}")
        if self.cpu_ms < 0 or self.wait_ms < 0 or self.cpu_ms + self.wait_ms <= 0:
            raise RecipeInputError("CPU and waiting time per request must be 0 or more, and not both 0")
        if self.max_connections < 1 or self.reserved < 0 or self.reserved >= self.max_connections:
            raise RecipeInputError(f"max_connections ({self.max_connections}) must be above the reserved slots "
                                   f"({self.reserved})")
        if self.longest_s <= 0:
            raise RecipeInputError(f"the longest request must take more than 0 s, not {self.longest_s}")


def usable_cpus(cores: int, quota: float | None) -> int:
    """Workers' CPUs: the cores, capped by the quota rounded up (as servers/event_loop_workers.py usable_cpus)."""
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cpu_capacity(cores: int, quota: float | None) -> float:
    """CPU seconds a second the service may spend: the cores, or the quota when it is smaller."""
    return min(float(cores), quota) if quota is not None else float(cores)


def plan(inputs: RecipeInputs, model: str) -> dict[str, Any]:
    """One model's counts: 'threads' (Gunicorn gthread) or 'event-loop' (uvicorn, Granian)."""
    c = CONSTANTS
    cpus = usable_cpus(inputs.cores, inputs.quota)
    time_s = (inputs.cpu_ms + inputs.wait_ms) / 1000
    if model == "threads":
        workers = 2 * cpus + 1
        per_worker = inputs.rate / workers
        threads = max(1, math.ceil(per_worker * time_s * c["headroom"]))
        pool = threads if inputs.wait_ms > 0 else 0
        in_flight = threads
        admission = None  # gthread has no cap: what it cannot run at once queues
        capacity = workers * threads / time_s
    elif model == "event-loop":
        workers = cpus
        per_worker = inputs.rate / workers
        pool = max(1, math.ceil(per_worker * inputs.wait_ms / 1000 * c["headroom"])) if inputs.wait_ms > 0 else 0
        in_flight = max(1, math.ceil(per_worker * time_s * c["headroom"]))
        threads = None
        admission = c["admission_factor"] * max(in_flight, pool)
        capacity = min(workers * pool / (inputs.wait_ms / 1000) if pool else math.inf,
                       cpu_capacity(inputs.cores, inputs.quota) / (inputs.cpu_ms / 1000) if inputs.cpu_ms else math.inf)
    else:
        raise RecipeInputError(f"model must be 'threads' or 'event-loop', not {model!r}")
    return {"model": model, "workers": workers, "threads": threads, "pool_per_worker": pool,
            "pool_total": workers * pool, "in_flight_per_worker": in_flight, "admission_per_worker": admission,
            "capacity_rps": capacity if math.isfinite(capacity) else None}


def database(inputs: RecipeInputs, pool_total: int) -> dict[str, Any]:
    """Whether the pools fit the database's budget, in steady state and during a restart; pooler or not."""
    budget = inputs.max_connections - inputs.reserved
    at_restart = CONSTANTS["restart_factor"] * pool_total
    busy = math.ceil(inputs.rate * inputs.wait_ms / 1000 * CONSTANTS["headroom"])
    verdict = ("fits" if at_restart <= budget else "pooler" if busy <= budget else "too-many")
    return {"budget": budget, "steady": pool_total, "at_restart": at_restart, "busy": busy, "verdict": verdict}


def timeouts(inputs: RecipeInputs) -> dict[str, int]:
    """Server keep-alive (above the proxy's), graceful, Gunicorn's worker timeout, nginx's read timeout: seconds."""
    c = CONSTANTS
    longest = math.ceil(inputs.longest_s) + c["graceful_margin_s"]
    keep_alive = (c["proxy_keepalive_timeout_s"] + c["keepalive_margin_s"] if inputs.proxy
                  else c["keepalive_without_proxy_s"])
    return {"server_keepalive_s": keep_alive, "proxy_keepalive_s": c["proxy_keepalive_timeout_s"],
            "graceful_s": longest, "gunicorn_timeout_s": max(c["gunicorn_timeout_default_s"], longest),
            "proxy_read_timeout_s": max(c["nginx_read_timeout_default_s"], longest)}


def recipe(inputs: RecipeInputs) -> dict[str, Any]:
    """Everything the page and the calculator show for these inputs (plain JSON values, unrounded: rounding is the
    display's, so Python and JavaScript compute the same floats in the same order and agree exactly)."""
    inputs.check()
    cpu_needed = inputs.rate * inputs.cpu_ms / 1000 * CONSTANTS["headroom"]
    capacity = cpu_capacity(inputs.cores, inputs.quota)
    models = {model: plan(inputs, model) for model in ("threads", "event-loop")}
    for counts in models.values():
        counts["database"] = database(inputs, counts["pool_total"])
    own_ms = inputs.cpu_ms + inputs.wait_ms
    return {"inputs": asdict(inputs), "usable_cpus": usable_cpus(inputs.cores, inputs.quota),
            "cpu_needed": cpu_needed, "cpu_capacity": capacity, "cpu_fits": cpu_needed <= capacity,
            "beyond_measured": usable_cpus(inputs.cores, inputs.quota) > CONSTANTS["measured_cpus"],
            "latency_ms": {"expected": own_ms, "bound": own_ms * CONSTANTS["admission_factor"]},
            "timeouts": timeouts(inputs), "models": models}


def gunicorn_conf(result: dict[str, Any], worker_connections: bool = True) -> str:
    """A gunicorn.conf.py for the threads plan (without its worker_connections line: the stack check's
    counter-example, Gunicorn's default of 1,000)."""
    counts, times = result["models"]["threads"], result["timeouts"]
    return "\n".join([
        "# gunicorn.conf.py: generated by the recipe (docs/recipe.md)",
        'wsgi_app = "app:application"  # your project\'s WSGI callable',
        'bind = ["127.0.0.1:8000"]',
        'worker_class = "gthread"',
        f"workers = {counts['workers']}",
        f"threads = {counts['threads']}  # per worker",
        *([f"worker_connections = {counts['threads']}  # one connection a thread: none waits behind a busy worker "
           "(so Gunicorn keeps no idle connection, and warns so at start)"]
          if worker_connections else []),
        f"keepalive = {times['server_keepalive_s']}  # seconds; above the proxy's idle timeout",
        f"graceful_timeout = {times['graceful_s']}  # seconds; above the longest request",
        f"timeout = {times['gunicorn_timeout_s']}",
        f'raw_env = ["APP_POOL_SIZE={counts["pool_per_worker"]}"]  # your pool per worker: one connection a thread',
        ""])


def uvicorn_command(result: dict[str, Any]) -> str:
    counts, times = result["models"]["event-loop"], result["timeouts"]
    return (f"APP_POOL_SIZE={counts['pool_per_worker']} uvicorn app:app --host 127.0.0.1 --port 8000 "
            f"--workers {counts['workers']} --limit-concurrency {counts['admission_per_worker']} "
            f"--timeout-keep-alive {times['server_keepalive_s']} --timeout-graceful-shutdown {times['graceful_s']} "
            "--no-access-log")


def granian_command(result: dict[str, Any]) -> str:
    counts, times = result["models"]["event-loop"], result["timeouts"]
    return (f"APP_POOL_SIZE={counts['pool_per_worker']} granian --interface asgi app:app --host 127.0.0.1 "
            f"--port 8000 --workers {counts['workers']} --backpressure {counts['admission_per_worker']} "
            f"--workers-kill-timeout {times['graceful_s']} --no-access-log")


def nginx_upstream(result: dict[str, Any]) -> str:
    times = result["timeouts"]
    idle = max(counts["workers"] * counts["in_flight_per_worker"] for counts in result["models"].values())
    return "\n".join([
        "upstream app {",
        "    server 127.0.0.1:8000;",
        f"    keepalive {idle};  # idle connections kept: the requests in flight at once",
        f"    keepalive_timeout {times['proxy_keepalive_s']}s;  # below the server's {times['server_keepalive_s']} s",
        "}",
        "location / {",
        "    proxy_pass http://app;",
        "    proxy_http_version 1.1;",
        '    proxy_set_header Connection "";',
        f"    proxy_read_timeout {times['proxy_read_timeout_s']}s;  # above the longest request",
        "}",
        ""])


def rules_json() -> dict[str, Any]:
    """What docs/_generated/recipe/rules.json holds: the constants and the rules, for the calculator."""
    return {"constants": CONSTANTS, "rules": RULES}


def predict(result: dict[str, Any], model: str, offered: float, schedule_s: float) -> dict[str, Any]:
    """What the recipe predicts for one configuration offered `offered` requests a second for `schedule_s`, once it
    is up (the stack check's warm-up is not judged): within capacity, every request answered in about its own time
    (p99 under the bound); past it, a thread pool answers its capacity and queues the rest (the last request waits
    the backlog over the capacity), and an event loop with its admission cap answers its capacity and refuses the
    rest with 503. What it admits, it holds `cap` at a time and answers `capacity` a second, so by Little's law an
    admitted request takes cap / capacity on average: a mean, not a p99 (the pool hands its connections out in no
    guaranteed order, so some admitted requests wait several calls; the record shows how many)."""
    capacity = result["models"][model]["capacity_rps"] or math.inf
    latency = result["latency_ms"]
    if offered <= capacity:
        return {"within": True, "answered_rps": offered, "refused_share": 0.0, "p99_bound_ms": latency["bound"]}
    if model == "threads":
        backlog = (offered - capacity) * schedule_s
        return {"within": False, "answered_rps": capacity, "refused_share": 0.0,
                "last_wait_s": round(backlog / capacity, 2), "p99_bound_ms": None}
    counts = result["models"][model]
    admitted_mean_ms = counts["workers"] * counts["admission_per_worker"] / capacity * 1000
    return {"within": False, "answered_rps": capacity, "refused_share": round(1 - capacity / offered, 3),
            "p99_bound_ms": None, "mean_bound_ms": round(admitted_mean_ms, 1)}
