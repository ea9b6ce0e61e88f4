"""Shared fixtures: the catalogue, and designs started exactly the way the harness starts them."""

from __future__ import annotations

import contextlib
import fcntl
import pickle
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
from harness.clients import probe
from harness.model.catalogue import Design, load_catalogue
from harness.model.paths import REPO_ROOT
from harness.system import connections, launcher, postgres, processes

CATALOGUE = load_catalogue()
HTTP_DESIGNS = [design for design in CATALOGUE.designs.values() if design.kind == "http"]
T = TypeVar("T")


def tcp_sockets_on(port: int) -> list[list[str]]:
    """The rows of /proc/net/tcp (Linux, IPv4), split into fields, whose local port is `port`.

    Field 3 is the state (0A listening, 06 TIME_WAIT); field 4 is tx_queue:rx_queue.
    """
    return connections.sockets_on(port, (Path("/proc/net/tcp"),))


# The scratch PostgreSQL of the designs that talk to one (launcher.needs_database): started by the first
# test in this pytest process that starts such a design, stopped when the session ends.
_DATABASE = contextlib.ExitStack()
_DSN: list[str] = []


def database_dsn() -> str:
    """The DSN of this pytest process's scratch PostgreSQL (system/postgres.py), started on first use."""
    if not _DSN:
        _DSN.append(_DATABASE.enter_context(postgres.scratch_cluster()).dsn)
    return _DSN[0]


@pytest.fixture(scope="session", autouse=True)
def database_stopped_after_the_session() -> Iterator[None]:
    """Stop the scratch PostgreSQL, if a test started one, when the session ends (failures and Ctrl-C too)."""
    try:
        yield
    finally:
        _DATABASE.close()


@contextlib.contextmanager
def started(design: Design, tmp_path: Path, delay: float = 0.0, work: int = 0) -> Iterator[processes.RunningServer]:
    """A design listening on a free loopback port (with --work N if asked); stopped (whole process group) on exit.

    A design that talks to PostgreSQL gets the scratch cluster's DSN (database_dsn), and one request is answered
    before it is yielded: Gunicorn listens before its worker has opened its pool (16 scram-sha-256 logins, over a
    second on a busy machine), so a test's first request would otherwise time the logins too (CI once saw ten
    overlapped 0.3 s calls take 1.6 s that way), or wait in the backlog for a worker a stop would never start.
    """
    port = processes.free_port()
    workdir = tmp_path / (f"{design.name}-work-{work}" if work else design.name)
    database = database_dsn() if launcher.needs_database(design) else None
    with launcher.running_design(design, port, delay, workdir, work=work, database=database) as server:
        if database:
            answer = probe.get(server.host, server.port, "/db", timeout=30)
            assert answer.status == 200, f"{design.name} did not answer its first query: {server.stderr_tail()}"
        yield server


def first_line_served(design_file: str, port: int, database: str | None = None) -> str:
    """Start a design file by hand with only --port (its default host), and --dsn for a database design;
    return the first line it prints."""
    dsn = ["--dsn", database] if database else []
    process = subprocess.Popen([sys.executable, design_file, "--port", str(port), *dsn], stdout=subprocess.PIPE,
                               text=True, cwd=REPO_ROOT, start_new_session=True)
    try:
        return process.stdout.readline()
    finally:
        processes.stop_process_group(process)
        process.stdout.close()


def all_at_once(count: int, ask: Callable[[], T]) -> tuple[float, list[T]]:
    """Call `ask` from `count` threads released together; the wall time until the last answer, and the answers."""
    answers: list[T] = []
    barrier = threading.Barrier(count)

    def one() -> None:
        barrier.wait()
        answers.append(ask())

    threads = [threading.Thread(target=one) for _ in range(count)]
    started_at = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return time.monotonic() - started_at, answers


@pytest.fixture(params=HTTP_DESIGNS, ids=lambda design: design.name)
def http_design(request: pytest.FixtureRequest) -> Design:
    return request.param


@dataclass
class StrictBuild:
    """One `mkdocs build --strict` of the site (with its notebook run), shared by every test that reads it."""

    site: Path
    returncode: int
    stderr: str


def shared_dir(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """The folder every xdist worker of this run sees (the run's base temp; the worker's own without xdist)."""
    return tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent


def shared_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, make: Callable[[], T]) -> T:
    """`make()` run once per test run, whichever xdist worker asks first (under a lock, the others wait), its
    result pickled where every worker reads it: for the expensive things several groups read unchanged."""
    shared = shared_dir(tmp_path_factory, worker_id)
    result = shared / f"{name}.pickle"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            made = make()
            partial = result.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(made))
            partial.rename(result)
    return pickle.loads(result.read_bytes())


@pytest.fixture(scope="session")
def strict_build(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> StrictBuild:
    """The site built once per test run and shared by every xdist worker that reads it (shared_once): a build is
    15-40 s of CPU, and three groups read it (the site's files, the browser's, the timeline player's)."""
    site = shared_dir(tmp_path_factory, worker_id) / "site"

    def build() -> StrictBuild:
        result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                                cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
        return StrictBuild(site, result.returncode, result.stderr)

    return shared_once(tmp_path_factory, worker_id, "site-build", build)


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[Path, str]:
    """What `bench.py render` makes of the committed results/ (every renderer of the registry), rendered once per
    test run: a whole render is 15-70 s of CPU, and the site's, the layers' and the tables' tests all read it."""
    from harness.render import site

    return shared_once(tmp_path_factory, worker_id, "rendered", site.expected_files)


@pytest.fixture(scope="session")
def built_site(strict_build: StrictBuild) -> Path:
    """The built site's directory; fails the test that asks for it when the strict build failed."""
    assert strict_build.returncode == 0, strict_build.stderr[-4000:]
    return strict_build.site


def read_responses(conn: socket.socket, count: int) -> list[bytes]:
    """`count` whole responses read off a kept-alive socket, by their Content-Length (the page and the refusals)."""
    buffer, answers = b"", []
    while len(answers) < count:
        while b"\r\n\r\n" not in buffer:
            buffer += conn.recv(65536) or b"!"
            assert not buffer.endswith(b"!"), "closed early"
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
        while len(buffer) < length:
            buffer += conn.recv(65536)
        answers.append(head + b"\r\n\r\n" + buffer[:length])
        buffer = buffer[length:]
    return answers


def write_restart_plan(tmp_path: Path, text: str) -> Path:
    """A restart plan (scripts/catalogue/restart/restart.toml's shape) written where a test can load it."""
    path = tmp_path / "restart.toml"
    path.write_text(text, encoding="utf-8")
    return path
