"""A scratch PostgreSQL for the database designs: started in a temporary directory, seeded, always stopped.

Theory of operation: `scratch_cluster()` finds PostgreSQL's server programs (Debian keeps them in
/usr/lib/postgresql/N/bin, off PATH), runs `initdb` into a fresh directory under build/postgres/,
starts `postgres` in the foreground in its own session, listening on 127.0.0.1 and a free port
(its Unix socket in the same directory), waits until it accepts connections, creates the `bench`
database with TechEmpower's two tables, and yields a ScratchCluster whose `dsn` the designs take.
On exit, whatever happened (a failure, Ctrl-C), it runs `pg_ctl stop -m fast`, then SIGKILLs
whatever is left of the server and its children, then removes the directory.
It never touches a system-wide cluster: no service, no /var/lib/postgresql, no /var/run/postgresql.

initdb refuses to run as root, so as root every PostgreSQL program runs as the `postgres` user
(which Debian's package creates) through `setpriv`, and the directory belongs to that user.

Every setting that differs from PostgreSQL's defaults is in SETTINGS, with its reason; they are
passed as `-c name=value` on the server's command line, so `ScratchCluster.command` shows them.

Authentication as a default install has it over TCP: scram-sha-256 (PostgreSQL's default
password_encryption), the role's password (PASSWORD) in the DSN, so every connection a design opens pays
the exchange. The harness's own psql uses the cluster's private Unix socket, with trust.

CPU placement: `scratch_cluster(cpu=...)` pins the postmaster, and so every backend it forks, with taskset;
the runner puts it on the server's CPU (see runner.py: the load tool keeps its CPU to itself).

Known limits, on purpose: a fixed password, written here (a scratch cluster on loopback, thrown away after
the run); no durability at all (fsync off: a crash loses the cluster, which is thrown away anyway).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import random
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.model.paths import REPO_ROOT
from harness.system import processes

SCRATCH_ROOT = REPO_ROOT / "build" / "postgres"
VERSIONED_BIN_DIRS = "/usr/lib/postgresql/*/bin"  # Debian's layout: one directory per major version
PROGRAMS = ("initdb", "pg_ctl", "postgres", "pg_isready", "psql")
SYSTEM_USER = "postgres"  # who runs PostgreSQL when the harness runs as root (initdb refuses root)
DATABASE = "bench"
ROLE = "bench"  # the superuser initdb creates, and the role the designs connect as
AUTHENTICATION = "scram-sha-256 over TCP loopback (initdb --auth-host=scram-sha-256, the role's password in the DSN)"
PASSWORD = "scratch-bench"  # the role's password (scram-sha-256 over TCP); fixed: the cluster is loopback-only, thrown away
READY_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0
LOG_TAIL_BYTES = 3000

# --8<-- [start:settings]
# The settings that differ from the defaults, and why. Everything else is PostgreSQL's default (version 15 on
# Debian bookworm), shared_buffers included (128 MB; the world table is about half a megabyte). Set per cluster
# too (postgres_command): `port`, a free one, and `unix_socket_directories`, the cluster's own directory (not
# /var/run/postgresql, which belongs to the system's clusters).
SETTINGS: dict[str, tuple[str, str]] = {
    "listen_addresses": ("127.0.0.1", "loopback only, like the designs; the default is localhost, which may add ::1"),
    "max_connections": ("200", "room for a pool of up to about 190 connections beside the harness's own "
                               "(default 100); each design's pool holds POOL_SIZE of them"),
    "fsync": ("off", "a scratch cluster, thrown away after the run: durability would only add disk waits to "
                     "the measurement"),
    "synchronous_commit": ("off", "the same: no commit waits for its WAL to reach the disk"),
    "full_page_writes": ("off", "the same: torn pages after a crash do not matter to a cluster nobody keeps"),
}
INITDB_OPTIONS = ["--auth-host=scram-sha-256",  # TCP, the designs' way in: a password, as a default install asks
                  "--auth-local=trust",  # the Unix socket, the harness's psql alone: it lives in the 0700 directory
                  "--encoding=UTF8", "--locale=C",  # the same text ordering on every machine
                  "--no-sync"]  # initdb's own fsync of the new files: nothing here needs to survive a crash
# --8<-- [end:settings]

WORLD_ROWS = 10_000
WORLD_SEED = 20_210_021  # a fixed seed: every run seeds identical rows (issue 21)
# TechEmpower's fortunes (the "Fortunes" test of its Framework Benchmarks), a dozen rows.
FORTUNES = [
    "fortune: No such file or directory",
    "A computer scientist is someone who fixes things that aren't broken.",
    "After enough decimal places, nobody gives a damn.",
    "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1",
    "A computer program does what you tell it to do, not what you want it to do.",
    "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen",
    "Any program that runs right is obsolete.",
    "A list is only as strong as its weakest link. — Donald Knuth",
    "Feature: A bug with seniority.",
    "Computers make very fast, very accurate mistakes.",
    '<script>alert("This should not be displayed in a browser alert box.");</script>',
    "フレームワークのベンチマーク",
]


class PostgresMissingError(LookupError):
    """PostgreSQL's server programs are not installed; the message says how to install them."""


class PostgresStartError(RuntimeError):
    """The scratch cluster did not start (initdb failed, the server died or never answered); with its log tail."""


@dataclass
class ScratchCluster:
    """A running scratch cluster: where it listens, its directory, and exactly how it was started."""

    host: str
    port: int
    directory: Path
    bin_dir: Path
    process: subprocess.Popen[bytes]
    command: list[str]
    run_as: list[str]  # the setpriv prefix when running as root, else nothing
    version: str = ""  # `postgres --version`: "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)"
    cpu: str | None = None  # the taskset list the server and its backends are held to; None: not pinned

    @property
    def dsn(self) -> str:
        """The connection string the designs take (`--dsn`)."""
        return f"postgresql://{ROLE}:{PASSWORD}@{self.host}:{self.port}/{DATABASE}"

    @property
    def log_path(self) -> Path:
        return self.directory / "postgres.log"

    def query(self, sql: str, database: str = DATABASE, timeout: float = 30.0) -> str:
        """Run SQL through psql and return its unaligned output (one row a line, fields split by |)."""
        return psql(self, sql, database, timeout).strip()


def find_bin_dir(path: str | None = None, versioned: str = VERSIONED_BIN_DIRS) -> Path:
    """The directory with initdb, pg_ctl and postgres: Debian's newest versioned one, else the one on PATH."""
    def major(directory: str) -> int:
        found = re.search(r"/(\d+)/bin$", directory)
        return int(found.group(1)) if found else 0

    for candidate in sorted(glob.glob(versioned), key=major, reverse=True):
        if all((Path(candidate) / program).is_file() for program in PROGRAMS):
            return Path(candidate)
    initdb = shutil.which("initdb", path=path)
    if initdb and all((Path(initdb).parent / program).is_file() for program in PROGRAMS):
        return Path(initdb).parent
    raise PostgresMissingError(
        f"PostgreSQL's server programs ({', '.join(PROGRAMS)}) are not installed: neither in {versioned} nor on "
        "PATH. On Debian or Ubuntu: `apt-get install postgresql` (`make install` does it); elsewhere, your "
        "package manager's PostgreSQL server package")


def run_as_prefix() -> list[str]:
    """`setpriv` to the postgres user when we are root (initdb and postgres refuse root); nothing otherwise."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        raise PostgresMissingError(f"running as root, and there is no {SYSTEM_USER!r} user to run PostgreSQL as "
                                   "(initdb refuses root): `apt-get install postgresql` creates it") from None
    return ["setpriv", f"--reuid={SYSTEM_USER}", f"--regid={SYSTEM_USER}", "--init-groups", "--"]


def scratch_parent() -> Path:
    """build/postgres/, unless the postgres user cannot reach it (a checkout under /root): then the temp dir."""
    SCRATCH_ROOT.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or all(os.stat(parent).st_mode & 0o001 for parent in [SCRATCH_ROOT, *SCRATCH_ROOT.parents]):
        return SCRATCH_ROOT
    return Path(tempfile.gettempdir())


def make_directory(run_as: Sequence[str]) -> Path:
    """A fresh directory for one cluster, owned by whoever runs PostgreSQL (mode 0700, as initdb wants)."""
    directory = Path(tempfile.mkdtemp(prefix="scratch-cluster-", dir=scratch_parent()))
    if run_as:
        entry = pwd.getpwnam(SYSTEM_USER)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    return directory


def postgres_command(bin_dir: Path, data_dir: Path, socket_dir: Path, host: str, port: int) -> list[str]:
    """The postgres command line: the data directory, where it listens, and every changed setting."""
    settings = {**{name: value for name, (value, _) in SETTINGS.items()}, "listen_addresses": host,
                "port": str(port), "unix_socket_directories": str(socket_dir)}  # our socket, not /var/run's
    return [str(bin_dir / "postgres"), "-D", str(data_dir),
            *[part for name, value in settings.items() for part in ("-c", f"{name}={value}")]]


def run_program(command: Sequence[str], timeout: float, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run a short PostgreSQL program (initdb, psql, pg_ctl) with a timeout, in its own process group."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                               env={**os.environ, "LC_ALL": "C"}, cwd="/")  # cwd: the postgres user may not read ours
    try:
        stdout, stderr = process.communicate(stdin, timeout=timeout)
    finally:
        if process.poll() is None:  # a timeout, or Ctrl-C: never leave it behind
            processes.stop_process_group(process, grace=1.0)
    if process.returncode != 0:
        raise PostgresStartError(f"`{shlex.join(command)}` exited with {process.returncode}:\n"
                                 f"{stderr[-LOG_TAIL_BYTES:]}")
    return subprocess.CompletedProcess(list(command), process.returncode, stdout, stderr)


def psql(cluster: ScratchCluster, sql: str, database: str = DATABASE, timeout: float = 30.0) -> str:
    """SQL through psql on the cluster's Unix socket; stops at the first error."""
    command = [*cluster.run_as, str(cluster.bin_dir / "psql"), "--no-psqlrc", "--quiet", "--no-align",
               "--tuples-only", "--set=ON_ERROR_STOP=1", f"--host={cluster.directory}", f"--port={cluster.port}",
               f"--username={ROLE}", f"--dbname={database}", "--file=-"]
    return run_program(command, timeout, stdin=sql).stdout


def log_tail(directory: Path) -> str:
    return processes.tail(directory / "postgres.log", LOG_TAIL_BYTES)


def wait_until_ready(cluster: ScratchCluster, timeout: float = READY_TIMEOUT_SECONDS) -> None:
    """Poll pg_isready until the server accepts connections on its TCP port; fail early if it exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cluster.process.poll() is not None:
            raise PostgresStartError(f"postgres exited with code {cluster.process.returncode} while starting on port "
                                     f"{cluster.port}\n--- its log (tail) ---\n{log_tail(cluster.directory)}")
        ready = subprocess.run([str(cluster.bin_dir / "pg_isready"), "--quiet", f"--host={cluster.host}",
                                f"--port={cluster.port}", f"--username={ROLE}", f"--dbname={DATABASE}",
                                "--timeout=1"], stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
        if ready.returncode == 0:
            return
        time.sleep(0.1)
    raise PostgresStartError(f"postgres did not accept connections on {cluster.host}:{cluster.port} within "
                             f"{timeout:.0f} s\n--- its log (tail) ---\n{log_tail(cluster.directory)}")


def seed_sql(rows: int = WORLD_ROWS, seed: int = WORLD_SEED) -> str:
    """TechEmpower's tables: `world` (id, randomnumber 1-10000, from a fixed seed) and `fortune` (a dozen rows)."""
    generator = random.Random(seed)
    world = "".join(f"{row}\t{generator.randint(1, 10_000)}\n" for row in range(1, rows + 1))
    fortunes = ",\n".join(f"({number}, '{text.replace(chr(39), chr(39) * 2)}')"
                          for number, text in enumerate(FORTUNES, start=1))
    return ("CREATE TABLE world (id integer PRIMARY KEY, randomnumber integer NOT NULL);\n"
            f"COPY world (id, randomnumber) FROM stdin;\n{world}\\.\n"
            "CREATE TABLE fortune (id integer PRIMARY KEY, message text NOT NULL);\n"
            f"INSERT INTO fortune (id, message) VALUES\n{fortunes};\n"
            "ANALYZE world; ANALYZE fortune;\n")


def children(pid: int) -> list[int]:
    """The processes whose parent is pid (PostgreSQL's children each lead their own process group)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
    return found


def stop(cluster: ScratchCluster) -> int:
    """`pg_ctl stop -m fast` (every session rolled back, a clean shutdown); then SIGKILL what is left."""
    if cluster.process.poll() is None and (cluster.directory / "data" / "postmaster.pid").exists():
        with contextlib.suppress(PostgresStartError, subprocess.TimeoutExpired):
            run_program([*cluster.run_as, str(cluster.bin_dir / "pg_ctl"), "stop", "--mode=fast", "--wait",
                         f"--timeout={STOP_TIMEOUT_SECONDS:.0f}", f"--pgdata={cluster.directory / 'data'}"],
                        timeout=STOP_TIMEOUT_SECONDS + 5)
    if cluster.process.poll() is None:
        # pg_ctl failed or timed out: kill the server's children (each in a group of its own), then its group.
        for child in children(cluster.process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    return processes.stop_process_group(cluster.process, grace=STOP_TIMEOUT_SECONDS, stop_signal=signal.SIGINT)


@contextlib.contextmanager
def scratch_cluster(port: int | None = None, host: str = processes.LOOPBACK, bin_dir: Path | None = None,
                    cpu: str | None = None) -> Iterator[ScratchCluster]:
    """A seeded scratch PostgreSQL on host:port (a free port unless given), held to `cpu` (a taskset list) when
    given; stopped and removed on exit."""
    bin_dir = bin_dir or find_bin_dir()
    run_as = run_as_prefix()
    if port is None:
        port = processes.free_port(host)
    else:
        processes.ensure_port_free(port, host)  # PortBusyError, naming the port
    directory = make_directory(run_as)
    try:
        data_dir = directory / "data"
        password_file = directory / "password"  # initdb reads the role's password from a file, never the command line
        password_file.write_text(PASSWORD + "\n")
        if run_as:
            entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(password_file, entry.pw_uid, entry.pw_gid)
        run_program([*run_as, str(bin_dir / "initdb"), f"--pgdata={data_dir}", f"--username={ROLE}",
                     f"--pwfile={password_file}", *INITDB_OPTIONS], timeout=60)
        password_file.unlink()
        version = run_program([str(bin_dir / "postgres"), "--version"], timeout=10).stdout.strip()
        command = processes.pinned([*run_as, *postgres_command(bin_dir, data_dir, directory, host, port)], cpu)
        with open(directory / "postgres.log", "wb") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       start_new_session=True, cwd="/", env={**os.environ, "LC_ALL": "C"})
        cluster = ScratchCluster(host, port, directory, bin_dir, process, command, run_as, version, cpu)
        try:
            wait_until_ready(cluster)
            psql(cluster, f"CREATE DATABASE {DATABASE};", database="postgres")
            psql(cluster, seed_sql(), timeout=60)
            yield cluster
        finally:
            stop(cluster)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
