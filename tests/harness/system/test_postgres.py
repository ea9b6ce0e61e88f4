"""The scratch PostgreSQL (scripts/harness/system/postgres.py) and the two designs that query it.

One cluster is started for the module, seeded, queried from one request to each design (started
through the launcher with its DSN, as every suite starts them), and stopped; after that, no
PostgreSQL process of ours may be left in the process table. A second start must seed identical
rows. Bounded: each cluster starts and stops in about two seconds.
"""

from __future__ import annotations

import concurrent.futures
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.clients import probe
from harness.model.catalogue import Design
from harness.system import launcher, postgres, processes
from process_table import all_processes
from python_source import differing_lines
from scenario_settings import settings_of

from conftest import CATALOGUE

pytestmark = pytest.mark.timeout(90)
DATABASE_DESIGNS = [design for design in CATALOGUE.designs.values() if launcher.needs_database(design)]
WORLD_CHECKSUM = "SELECT count(*), sum(id::bigint * randomnumber), min(randomnumber), max(randomnumber) FROM world"


def processes_in(directory: Path) -> list[int]:
    """Processes whose command line names the cluster's directory (postgres, and its children, name it via -D)."""
    found = []
    for process in all_processes():
        try:
            command = Path(f"/proc/{process.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in command:
            found.append(process.pid)
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[postgres.ScratchCluster]:
    with postgres.scratch_cluster() as running:
        yield running
    assert not running.directory.exists(), "the scratch directory was left behind"


POOLED = {"threads-psycopg-pool", "asyncio-asyncpg", "asyncio-psycopg-pool", "gunicorn-gthread-psycopg",
          "uvicorn-asyncpg", "granian-asyncpg"}  # the designs that answer X-Pool-Wait-Us; the others connect per client


def test_the_designs_that_need_a_database_are_those_of_issue_21() -> None:
    assert sorted(design.name for design in DATABASE_DESIGNS) == sorted(
        [*POOLED, "thread-per-connection-psycopg", "gevent-psycopg"])


def test_the_seed_is_techempowers_tables(cluster: postgres.ScratchCluster) -> None:
    count, _, smallest, largest = cluster.query(WORLD_CHECKSUM).split("|")
    assert (int(count), int(smallest) >= 1, int(largest) <= 10_000) == (10_000, True, True)
    assert cluster.query("SELECT count(*) FROM fortune") == str(len(postgres.FORTUNES)) == "12"


def test_the_server_listens_on_loopback_with_the_settings_we_state(cluster: postgres.ScratchCluster) -> None:
    for name, (value, why) in postgres.SETTINGS.items():
        assert why, f"{name} has no reason"
        assert cluster.query(f"SHOW {name}") == value, name
    assert cluster.dsn == f"postgresql://bench:{postgres.PASSWORD}@127.0.0.1:{cluster.port}/bench"


def test_the_cluster_asks_a_password_over_tcp_and_refuses_a_wrong_one(cluster: postgres.ScratchCluster) -> None:
    """scram-sha-256 over loopback, as a default install: the DSN's password logs in, a wrong one or none does not
    (issue 31: a connection per request pays the authentication a real deployment pays)."""
    import psycopg
    with psycopg.connect(cluster.dsn, connect_timeout=5) as db:
        assert db.execute("SHOW password_encryption").fetchone() == ("scram-sha-256",)
        assert db.execute("SELECT left(rolpassword, 14) = 'SCRAM-SHA-256$' FROM pg_authid WHERE rolname = %s",
                          (postgres.ROLE,)).fetchone() == (True,)
    for wrong in (cluster.dsn.replace(postgres.PASSWORD, "not-the-password"),
                  f"postgresql://{postgres.ROLE}@{cluster.host}:{cluster.port}/{postgres.DATABASE}"):
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(wrong, connect_timeout=5)


def test_the_cluster_is_pinned_where_the_record_says() -> None:
    """scratch_cluster(cpu=...) holds the postmaster, and so every backend it forks, to that CPU (taskset), and the
    cluster says so and names its version: what the runner writes into a database record."""
    import os
    cpu = str(min(os.sched_getaffinity(0)))
    with postgres.scratch_cluster(cpu=cpu) as pinned:
        assert pinned.command[:3] == ["taskset", "-c", cpu]
        assert pinned.cpu == cpu and os.sched_getaffinity(pinned.process.pid) == {int(cpu)}
        assert pinned.version.startswith("postgres (PostgreSQL) ")


@pytest.mark.parametrize("design", DATABASE_DESIGNS, ids=lambda design: design.name)
def test_one_request_to_each_design_runs_a_real_query(design: Design, cluster: postgres.ScratchCluster,
                                                      tmp_path: Path) -> None:
    """The answer is the page, and X-Query-Result says what PostgreSQL returned: pg_sleep at /, one row of `world`
    at /db, twenty at /queries (TechEmpower's paths), each row as the table holds it; a pooled design also says
    how long the request waited for a connection (X-Pool-Wait-Us, whole microseconds)."""
    with launcher.running_design(design, processes.free_port(), 0.0, tmp_path, database=cluster.dsn) as server:
        page = probe.get(server.host, server.port)
        answers = {path: probe.get(server.host, server.port, path) for path in ("/db", "/queries")}
    assert probe.http_problems(page) == []
    assert page.headers["x-query-result"] == "pg_sleep 0"
    assert ("x-pool-wait-us" in page.headers) == (design.name in POOLED)
    if design.name in POOLED:
        assert int(page.headers["x-pool-wait-us"]) >= 0
    for path, rows in (("/db", 1), ("/queries", 20)):
        pairs = [pair.split("=") for pair in answers[path].headers["x-query-result"].split()]
        assert answers[path].status == 200 and len(pairs) == rows
        for row_id, number in pairs:
            assert cluster.query(f"SELECT randomnumber FROM world WHERE id = {int(row_id)}") == number


@pytest.mark.parametrize("design", DATABASE_DESIGNS, ids=lambda design: design.name)
def test_each_design_answers_request_after_request_on_one_connection(design: Design, cluster: postgres.ScratchCluster,
                                                                    tmp_path: Path) -> None:
    """Keep-alive (issue 31): three GET /db on one HTTP/1.1 connection, one after another, each a real query, and three
    GET / as the harness proves keep-alive before a run; none says Connection: close. So wrk's connections stay
    open in the database scenarios, and a request pays for its query, not for a new TCP connection."""
    request = "GET /db HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    with launcher.running_design(design, processes.free_port(), 0.0, tmp_path, database=cluster.dsn) as server:
        answers = [probe.parse_response(raw) for raw in
                   probe.exchange_on_one_connection(server.host, server.port, [request] * 3)]
        closed, problems = probe.verify_http_keep_alive(server.host, server.port)
    assert (closed, problems) == (False, [])
    assert [answer.status for answer in answers] == [200] * 3
    assert all(answer.headers.get("connection", "").lower() != "close" for answer in answers)
    assert all(len(answer.headers["x-query-result"].split()) == 1 for answer in answers)


@pytest.mark.parametrize("design", DATABASE_DESIGNS, ids=lambda design: design.name)
def test_ten_clients_wait_for_pg_sleep_together(design: Design, cluster: postgres.ScratchCluster,
                                                tmp_path: Path) -> None:
    """Ten 0.3 s database sleeps overlap (16 pooled connections, or one per client; under gevent too, as psycopg
    3.1.14+ waits through the patched select): together well under ten times 0.3 s."""
    with launcher.running_design(design, processes.free_port(), 0.3, tmp_path, database=cluster.dsn) as server:
        started_at = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(10) as clients:
            answers = list(clients.map(lambda _: probe.get(server.host, server.port, timeout=10), range(10)))
        elapsed = time.monotonic() - started_at
    assert [answer.headers["x-query-result"] for answer in answers] == ["pg_sleep 0.3"] * 10
    assert 0.3 <= elapsed < 1.2, f"ten 0.3 s queries took {elapsed:.2f} s"


@pytest.mark.parametrize("name", ["asyncio-asyncpg", "thread-per-connection-psycopg"])
def test_a_database_that_is_not_running_stops_the_design_at_start_with_the_reason(name: str, tmp_path: Path) -> None:
    """Nothing listens at the DSN: the design exits at start, naming the DSN and the refusal; nothing hangs."""
    dsn = f"postgresql://{postgres.ROLE}@127.0.0.1:{processes.free_port()}/{postgres.DATABASE}"
    with pytest.raises(processes.ServerStartError) as failure:
        with launcher.running_design(CATALOGUE.design(name), processes.free_port(), 0.0, tmp_path, database=dsn):
            pass
    assert dsn in failure.value.stderr_tail and "refused" in failure.value.stderr_tail.lower()


def test_a_pool_larger_than_the_connections_allowed_stops_the_design_with_postgresqls_reason(
        cluster: postgres.ScratchCluster, tmp_path: Path) -> None:
    """Out of connections: a role allowed three asks for five, and the design exits at start in PostgreSQL's words.

    A role of its own with a CONNECTION LIMIT, not the whole max_connections: the same refusal, without opening
    two hundred backends on a shared machine (the superuser `bench` is exempt from role limits).
    """
    cluster.query("DROP ROLE IF EXISTS limited; CREATE ROLE limited LOGIN PASSWORD 'limited' CONNECTION LIMIT 3;")
    dsn = f"postgresql://limited:limited@{cluster.host}:{cluster.port}/{postgres.DATABASE}"
    with pytest.raises(processes.ServerStartError) as failure:
        with launcher.running_design(CATALOGUE.design("asyncio-asyncpg"), processes.free_port(), 0.0, tmp_path,
                                     database=dsn, extra_arguments=["--pool-size", "5"]):
            pass
    assert "cannot open 5 connections" in failure.value.stderr_tail
    assert "too many connections" in failure.value.stderr_tail


def test_wrk_summarises_the_wait_for_a_connection(cluster: postgres.ScratchCluster, tmp_path: Path) -> None:
    """header_statistic: twenty clients on a pool of two, each query 50 ms: most answers waited for a connection."""
    from harness.clients.tools import require_tool
    wrk = require_tool("wrk")
    with launcher.running_design(CATALOGUE.design("asyncio-asyncpg"), processes.free_port(), 0.05, tmp_path,
                                 database=cluster.dsn, extra_arguments=["--pool-size", "2"]) as server:
        run = wrk.run(f"http://{server.host}:{server.port}/", 20, settings_of(time_limit=1, timeout=10,
                                                                               header_statistic="X-Pool-Wait-Us"),
                      tmp_path / "wrk", None)
    statistic = run["header_statistic"]
    assert run["error"] is None and statistic["header"] == "X-Pool-Wait-Us"
    assert statistic["count"] == run["complete"] > 0 and statistic["missing"] == 0
    assert statistic["p50"] >= 100_000  # twenty clients, two connections, 50 ms each: most wait several rounds


def test_a_design_started_without_a_database_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(launcher.DatabaseMissingError, match="threads-psycopg-pool"):
        launcher.server_command(CATALOGUE.design("threads-psycopg-pool"), 8000, 0.1, tmp_path)


def test_a_second_start_seeds_identical_rows_and_nothing_is_left(cluster: postgres.ScratchCluster) -> None:
    with postgres.scratch_cluster() as second:
        assert second.port != cluster.port
        assert second.query(WORLD_CHECKSUM) == cluster.query(WORLD_CHECKSUM)
        assert second.query("SELECT string_agg(message, '|' ORDER BY id) FROM fortune") == \
            cluster.query("SELECT string_agg(message, '|' ORDER BY id) FROM fortune")
        server_pid, directory = second.process.pid, second.directory
        assert server_pid in processes_in(directory)
    assert processes_in(directory) == [], "a PostgreSQL process outlived its cluster"
    assert not directory.exists()


def test_a_missing_postgresql_says_how_to_install_it(tmp_path: Path) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "psql").write_text("#!/bin/sh\nexit 0\n")  # a client alone is not a server
    (fake_bin / "psql").chmod(0o755)
    with pytest.raises(postgres.PostgresMissingError, match=r"apt-get install postgresql"):
        postgres.find_bin_dir(path=str(fake_bin), versioned=str(tmp_path / "none" / "*" / "bin"))


def test_a_busy_port_is_named() -> None:
    with socket.create_server((processes.LOOPBACK, 0)) as holder:
        port = holder.getsockname()[1]
        with pytest.raises(processes.PortBusyError, match=str(port)), postgres.scratch_cluster(port=port):
            pass


def test_a_server_that_dies_while_starting_shows_its_log() -> None:
    """A postgres that exits at once (here: a bad setting) is reported with the tail of its log."""
    real = postgres.find_bin_dir()
    # Under build/postgres/, not pytest's tmp_path: as root, the postgres user runs these and must reach them.
    fake_bin = Path(tempfile.mkdtemp(prefix="fake-bin-", dir=postgres.scratch_parent()))
    try:
        fake_bin.chmod(0o755)
        for program in postgres.PROGRAMS:
            (fake_bin / program).symlink_to(real / program)
        (fake_bin / "postgres").unlink()
        (fake_bin / "postgres").write_text(f'#!/bin/sh\nexec {real / "postgres"} "$@" -c shared_buffers=nonsense\n')
        (fake_bin / "postgres").chmod(0o755)
        with pytest.raises(postgres.PostgresStartError, match=r"(?s)exited with code.*shared_buffers"):
            with postgres.scratch_cluster(bin_dir=fake_bin):
                pass
    finally:
        shutil.rmtree(fake_bin)


def test_the_gevent_file_is_the_thread_per_connection_file_plus_monkey_patching() -> None:
    """After their docstrings, gevent_psycopg.py is thread_per_connection_psycopg.py and two lines (the page says so)."""
    assert differing_lines("servers/thread_per_connection_psycopg.py", "servers/gevent_psycopg.py",
                           code_only=True) == [
        "+ from gevent import monkey  # first, before any other import, so every later one gets the patched modules",
        "+ monkey.patch_all()  # socket, time.sleep, threading, select... now switch greenlets instead of blocking",
    ]
