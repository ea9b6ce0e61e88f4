"""Shared fixtures: the catalogue, and designs started exactly the way the harness starts them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import launcher, processes
from harness.catalogue import Design, load_catalogue

CATALOGUE = load_catalogue()
HTTP_DESIGNS = [design for design in CATALOGUE.designs.values() if design.kind == "http"]


def tcp_sockets_on(port: int) -> list[list[str]]:
    """The rows of /proc/net/tcp (Linux), split into fields, whose local port is `port`.

    Field 3 is the state (0A listening, 06 TIME_WAIT); field 4 is tx_queue:rx_queue.
    """
    rows = Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]
    return [fields for fields in (row.split() for row in rows) if int(fields[1].rsplit(":", 1)[1], 16) == port]


@contextlib.contextmanager
def started(design: Design, tmp_path: Path, delay: float = 0.0, work: int = 0) -> Iterator[processes.RunningServer]:
    """A design listening on a free loopback port (with --work N if asked); stopped (whole process group) on exit."""
    port = processes.free_port()
    workdir = tmp_path / (f"{design.name}-work-{work}" if work else design.name)
    with launcher.running_design(design, port, delay, workdir, work=work) as server:
        yield server


@pytest.fixture(params=HTTP_DESIGNS, ids=lambda design: design.name)
def http_design(request: pytest.FixtureRequest) -> Design:
    return request.param


# `make test` runs the suite on several workers (pytest-xdist, --dist loadgroup). Tests that share an
# expensive module fixture stay on one worker, file by file; the docs' code blocks all stay on one
# worker, in page order, because a page's servers listen on the fixed port 8000 its commands name.
ONE_WORKER_FILES = {"test_browser.py", "test_hardened.py", "test_hostile.py", "test_server_files.py",
                    "test_behaviour.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".md":
            item.add_marker(pytest.mark.xdist_group("code-blocks"))
        elif item.path.name in ONE_WORKER_FILES:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
