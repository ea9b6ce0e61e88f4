"""The recipe, checked: its configurations on the real stack, and workers against a CPU quota.

Both read scripts/catalogue/18-recipe.toml (`[check]` and `[quota]`) and write one record each, atomically,
after the last run (results/deployment/recipe-check.json and cpu-quota.json for a complete full run).

check: the plan's inputs go through model/deployment_recipe.py's recipe(); its gunicorn.conf.py (threads) and its
uvicorn command line (event loop) are run as printed, only the app (our WSGI app on psycopg, our ASGI app on
asyncpg, both SELECT pg_sleep(wait)), the address and the DSN filled in, on the scratch PostgreSQL, behind nginx
with upstream keep-alive; with the plan's counter_example, the threads plan also runs without its
worker_connections line (Gunicorn's default), to show what that rule is for. Each fresh stack first gets the
sized rate for warmup_seconds (kept as the run's warm-up, not judged: Gunicorn listens before its workers have
opened their pools), then vegeta offers each rate in turn (open loop, a new connection per request to nginx, as
the overload suite). The server, nginx and PostgreSQL share one CPU, vegeta has the other. The tool's ceiling is
nginx alone at the top rate, measured first.

quota: for each worker count a fresh cgroup with the plan's quota (system/cpu_quota.py), the design started
inside it (may use every CPU), usable_cpus() and os.cpu_count() asked inside it, wrk on the second CPU; cpu.stat
is read before and after the load, so the throttling counted is the load's. The group is removed after each run.

Known limits: two repetitions; one machine of two CPUs; the quota run uses hello world, where the server's own
work per request is what the quota rations.
"""

from __future__ import annotations

import shlex
import signal
import sys
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from harness.clients.tools import require_tool
from harness.model.catalogue import CATALOGUE_DIR, Catalogue
from harness.model.deployment_recipe import gunicorn_conf, recipe, uvicorn_command
from harness.model.paths import REPO_ROOT
from harness.model.recipe_plan import CheckPlan, QuotaPlan
from harness.model.records import SCRATCH_RESULTS_DIR, write_record_atomic
from harness.model.records.deployment_records import OverloadCell
from harness.model.records.recipe_records import COUNTER_EXAMPLE, CheckRecord, CheckRun, QuotaRecord, QuotaRun
from harness.model.records.scenario_record import Latency
from harness.model.typed import Typed
from harness.suites import deployment
from harness.model.settings import ScenarioSettings
from harness.suites.deployment import RECORD_DIR, nginx_version
from harness.system import cpu_quota, launcher, ports, postgres, processes
from harness.system.environment import describe_machine, utc_now

PLAN_PATH = CATALOGUE_DIR / "18-recipe.toml"
SERVERS = REPO_ROOT / "servers"
WSGI_APP = "wsgi_psycopg_app:app"  # servers/wsgi_psycopg_app.py: SELECT pg_sleep(APP_DELAY) on a psycopg pool
ASGI_APP = "asgi_asyncpg_app:app"  # servers/asgi_asyncpg_app.py: the same on an asyncpg pool
PRINT_CPUS = ("import importlib.util, os; spec = importlib.util.spec_from_file_location('s', {path!r}); "
              "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
              "print(module.usable_cpus(), os.cpu_count())")
PlanT = TypeVar("PlanT", CheckPlan, QuotaPlan)


class RecipePlanError(ValueError):
    """18-recipe.toml is wrong: bad input (exit 2); the message names the file and the key."""


def read_section(name: str, kind: type[PlanT], quick: bool, path: Path = PLAN_PATH) -> PlanT:
    """One table of the plan, typed, with its `quick` overrides applied when asked (read as the deployment plan is)."""
    return deployment.read_section(name, kind, quick, path, RecipePlanError)


def stack_command(model: str, result: dict[str, Any], port: int, workdir: Path, dsn: str,
                  wait_s: float) -> tuple[list[str], signal.Signals]:
    """The recipe's configuration as a command line, the app and the address filled in, and its stop signal."""
    host = processes.LOOPBACK
    if model in ("threads", COUNTER_EXAMPLE):
        workdir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "gunicorn.conf.py"
        conf.write_text(configuration(model, result), encoding="utf-8")
        return ([sys.executable, "-m", "gunicorn", "-c", str(conf), "--bind", f"{host}:{port}", "--chdir",
                 str(SERVERS), "--env", f"APP_DELAY={wait_s:g}", "--env", f"DATABASE_URL={dsn}", WSGI_APP],
                signal.SIGTERM)  # Gunicorn's graceful stop
    words = shlex.split(uvicorn_command(result))
    environment = [word for word in words if "=" in word and not word.startswith("-")]
    arguments = words[len(environment) + 1:]  # after "uvicorn"
    arguments = [ASGI_APP if word == "app:app" else word for word in arguments]
    arguments[arguments.index("--port") + 1] = str(port)
    arguments[arguments.index("--host") + 1] = host
    return (["env", *environment, f"APP_DELAY={wait_s:g}", f"DATABASE_URL={dsn}", sys.executable, "-m", "uvicorn",
             "--app-dir", str(SERVERS), *arguments], signal.SIGINT)  # uvicorn ends with exit 0 on SIGINT


def configuration(model: str, result: dict[str, Any]) -> str:
    """What the recipe printed for this model: gunicorn.conf.py's text (less worker_connections for the
    counter-example) or the uvicorn command line."""
    if model == "event-loop":
        return uvicorn_command(result)
    return gunicorn_conf(result, worker_connections=model != COUNTER_EXAMPLE)


def vegeta_cell(url: str, rate: float, plan: CheckPlan, workdir: Path, cpu: str | None,
                multiple: float, seconds: float | None = None) -> OverloadCell:
    """vegeta at `rate` for `seconds` (the plan's schedule unless given)."""
    tool = require_tool("vegeta")
    seconds = seconds or plan.schedule_seconds
    settings = ScenarioSettings.for_tool(seconds, plan.max_in_flight, rate=rate, schedule_seconds=seconds,
                                         timeout=plan.timeout)
    print(f"  rate {rate:g}/s: {' '.join(tool.command(url, plan.max_in_flight, settings, workdir))}", flush=True)
    cell = OverloadCell.from_json(tool.run(url, plan.max_in_flight, settings, workdir, cpu), f"vegeta at {rate:g}/s")
    return replace(cell, multiple=multiple, load_command=processes.pinned(cell.command, cpu))


def check_run(model: str, repeat: int, result: dict[str, Any], plan: CheckPlan, dsn: str, log_dir: Path,
              pinning: processes.CpuPinning) -> CheckRun:
    """One configuration behind nginx: the warm-up at the sized rate, then every rate in turn; a fresh server and
    proxy."""
    port = ports.run_port("server")
    command, stop_signal = stack_command(model, result, port, log_dir, dsn, plan.wait_ms / 1000)
    config = configuration(model, result)
    cells: list[OverloadCell] = []
    warmup: OverloadCell | None = None
    try:
        with launcher.running_configuration(command, port, log_dir, pinning.server, stop_signal) as server, \
                launcher.reverse_proxy(plan.proxy_config, server.port, log_dir, pinning.server) as proxy:
            print(f"  server: {' '.join(server.command)}\n  proxy:  {' '.join(proxy.command)}", flush=True)
            url = f"http://{proxy.host}:{proxy.port}/"
            if plan.warmup_seconds:
                print(f"  warm-up, {plan.warmup_seconds:g} s:", flush=True)
                warmup = vegeta_cell(url, plan.rate, plan, log_dir / "warmup", pinning.load, 1.0, plan.warmup_seconds)
            for index, (rate, multiple) in enumerate(zip(plan.rates, plan.multiples, strict=True)):
                cells.append(vegeta_cell(url, rate, plan, log_dir / f"{index}-rate{rate:g}", pinning.load, multiple))
            alive = server.alive()
            error = None if alive else f"the server died: {server.stderr_tail()[-400:]}"
        return CheckRun(model=model, repeat=repeat, config=config, server_command=server.command,
                        proxy_command=proxy.command, warmup=warmup, cells=cells, server_alive=alive, error=error)
    except processes.ServerStartError as error:
        return CheckRun(model=model, repeat=repeat, config=config, server_command=command, warmup=warmup,
                        cells=cells, error=str(error))


def run_check(catalogue: Catalogue, quick: bool, out_dir: Path | None) -> tuple[Path, CheckRecord]:
    """The ceiling, then both configurations `repeat` times, taking turns; write the record."""
    plan = read_section("check", CheckPlan, quick)
    result = recipe(plan.inputs())
    pinning = processes.cpu_pinning()
    started, runs = utc_now(), []
    log_root = launcher.LOG_DIR / plan.id
    top = max(plan.rates)
    print(f"{plan.id}: ceiling {plan.ceiling} at {top:g}/s", flush=True)
    ceiling_design = catalogue.design(plan.ceiling)
    with launcher.running_design(ceiling_design, ports.run_port("server", ceiling_design), 0.0, log_root / "ceiling",
                                 cpu=pinning.server) as nginx:
        ceiling = [vegeta_cell(f"http://{nginx.host}:{nginx.port}/", top, plan, log_root / "ceiling" / "load",
                               pinning.load, max(plan.multiples))]
    models = ("threads", *((COUNTER_EXAMPLE,) if plan.counter_example else ()), "event-loop")
    with postgres.scratch_cluster(cpu=pinning.server) as cluster:  # the database on the server's CPU, as the runner
        for repeat in range(plan.repeat):
            for model in models:
                print(f"{plan.id}: {model}, repeat {repeat + 1} of {plan.repeat}", flush=True)
                run = check_run(model, repeat, result, plan, cluster.dsn, log_root / f"{repeat}-{model}", pinning)
                runs.append(run)
        database_command = list(cluster.command)
    record = CheckRecord(kind="recipe-check", mode="quick" if quick else "full", plan=plan, recipe=result,
                         environment=describe_machine(pinning, {"nginx": nginx_version(),
                                                                "vegeta": require_tool("vegeta").version()}),
                         started_utc=started, finished_utc=utc_now(), database_command=database_command,
                         ceiling=ceiling, runs=runs)
    return write_record(record, plan.id, quick, out_dir), record


def cpus_inside(group: cpu_quota.QuotaGroup) -> tuple[int | None, int | None]:
    """usable_cpus() (servers/event_loop_workers.py) and os.cpu_count() as a process inside the group sees them."""
    command = [*group.wrapper(), sys.executable, "-c",
               PRINT_CPUS.format(path=str(SERVERS / "event_loop_workers.py"))]
    answer = processes.run_tool(command, timeout=30)
    words = answer.stdout.split()
    return (int(words[0]), int(words[1])) if answer.returncode == 0 and len(words) == 2 else (None, None)


def quota_run(catalogue: Catalogue, plan: QuotaPlan, workers: int, sized_by: str, repeat: int, log_dir: Path,
              pinning: processes.CpuPinning) -> tuple[QuotaRun, int]:
    """A fresh group, the design inside it with `workers`, wrk for `seconds`; cpu.stat over the load."""
    design = catalogue.design(plan.design)
    tool = require_tool("wrk")
    name = f"bench-quota-{uuid.uuid4().hex[:8]}"
    with cpu_quota.quota_group(name, plan.quota_us, plan.period_us) as group:
        usable, count = cpus_inside(group)
        try:
            with launcher.running_design(design, ports.run_port("server", design), 0.0, log_dir, cpu=pinning.server,
                                         extra_arguments=["--workers", str(workers)],
                                         wrapper=group.wrapper()) as server:
                settings = ScenarioSettings.for_tool(plan.seconds, plan.connections)
                url = f"http://{server.host}:{server.port}/"
                before = group.throttling()
                answer = tool.run(url, plan.connections, settings, log_dir / "load", pinning.load)
                after = group.throttling()
                server_command = server.command
        except processes.ServerStartError as error:
            return QuotaRun(workers=workers, sized_by=sized_by, repeat=repeat, usable_cpus=usable, cpu_count=count,
                            error=str(error)), group.version
    latency = answer.get("latency_ms")
    run = QuotaRun(workers=workers, sized_by=sized_by, repeat=repeat, usable_cpus=usable, cpu_count=count,
                   server_command=server_command, load_command=processes.pinned(answer.get("command", []),
                                                                                pinning.load),
                   requests_per_second=answer.get("requests_per_second"),
                   latency_ms=Latency.from_json(latency) if latency else None,
                   errors=(answer.get("failed") or 0) + (answer.get("non_2xx") or 0),
                   periods=int(after["periods"] - before["periods"]),
                   throttled_periods=int(after["throttled_periods"] - before["throttled_periods"]),
                   throttled_s=round(after["throttled_s"] - before["throttled_s"], 4), error=answer.get("error"))
    print(f"  {workers} workers: {run.requests_per_second or 0:,.0f} req/s, p99 "
          f"{latency.get('p99') if latency else '–'} ms, throttled {run.throttled_periods} of {run.periods} periods "
          f"({run.throttled_s} s); usable_cpus() inside: {usable}, os.cpu_count(): {count}", flush=True)
    return run, group.version


def run_quota(catalogue: Catalogue, quick: bool, out_dir: Path | None) -> tuple[Path, QuotaRecord]:
    """Every worker count `repeat` times, taking turns, each in a fresh group; write the record."""
    plan = read_section("quota", QuotaPlan, quick)
    if len(plan.sized_by) != len(plan.workers):
        raise RecipePlanError(f"{PLAN_PATH} [quota]: sized_by needs one entry per worker count ({plan.workers})")
    cpu_quota.controller()  # QuotaUnavailableError before anything starts
    pinning = processes.cpu_pinning(server_on_every_cpu=True)  # the quota, not an affinity mask, rations the server
    started, runs, version = utc_now(), [], 0
    for repeat in range(plan.repeat):
        for workers, sized_by in zip(plan.workers, plan.sized_by, strict=True):
            print(f"{plan.id}: {workers} workers ({sized_by}), repeat {repeat + 1} of {plan.repeat}", flush=True)
            run, version = quota_run(catalogue, plan, workers, sized_by, repeat,
                                     launcher.LOG_DIR / plan.id / f"{repeat}-{workers}", pinning)
            runs.append(run)
    record = QuotaRecord(kind="cpu-quota", mode="quick" if quick else "full", plan=plan, cgroup_version=version,
                         environment=describe_machine(pinning, {"wrk": require_tool("wrk").version()}),
                         started_utc=started, finished_utc=utc_now(), runs=runs)
    return write_record(record, plan.id, quick, out_dir), record


def write_record(record: Typed, record_id: str, quick: bool, out_dir: Path | None) -> Path:
    """results/deployment/<id>.json for a full run, build/results/ for a quick one (or --out)."""
    path = (out_dir or (SCRATCH_RESULTS_DIR if quick else RECORD_DIR)) / f"{record_id}.json"
    write_record_atomic(path, record)
    return path


def problems(record: CheckRecord | QuotaRecord) -> int:
    """Runs with a problem (the record keeps why): a stack that would not start, a load that failed."""
    if isinstance(record, CheckRecord):
        return sum(bool(run.error) or any(cell.error for cell in run.cells) for run in record.runs)
    return sum(bool(run.error) for run in record.runs)


@dataclass(frozen=True)
class Plan:
    """`bench.py recipe check|quota`: which part, quick or full, where the record goes."""

    part: Literal["check", "quota"]
    quick: bool = False
    out: Path | None = None  # default: results/deployment/ for a full run, build/results/ for a quick one


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, CheckRecord | QuotaRecord]:
    """The recipe's check or the CPU quota run; the record written atomically, its path and it."""
    run = run_check if plan.part == "check" else run_quota
    return run(catalogue, plan.quick, plan.out)
