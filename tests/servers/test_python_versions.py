"""The behaviour suite's core cases under every supported CPython this machine has, not only the one running pytest.

The project supports CPython 3.11, 3.12 and 3.13 (README). The servers use the
standard library only, so each is started with the other interpreter directly.
An interpreter that is not installed is skipped with the reason; on GitHub the
CI matrix runs the whole suite under each version instead.
"""

from __future__ import annotations

import sys

import pytest
from harness.clients import probe
from harness.system import launcher

from conftest import CATALOGUE, started

SUPPORTED = ["3.11", "3.12", "3.13"]
DESIGNS = ["sequential-sockets", "thread-per-connection", "epoll-loop", "asyncio-streams", "event-loop-workers"]


@pytest.fixture(params=SUPPORTED)
def python(request: pytest.FixtureRequest) -> str:
    try:
        return launcher.interpreter(request.param)
    except launcher.InterpreterMissingError as error:
        pytest.skip(str(error))


@pytest.mark.parametrize("name", DESIGNS)
def test_core_behaviour_under_each_interpreter(python: str, name: str, tmp_path, monkeypatch) -> None:
    design = CATALOGUE.designs[name]
    # The harness fills {python} with the interpreter running it: give it this one instead.
    monkeypatch.setattr(sys, "executable", python)
    with started(design, tmp_path) as server:
        assert server.process.args[0] == python
        page = probe.get(server.host, server.port)
        trickled = probe.parse_response(probe.exchange(
            server.host, server.port, [bytes([byte]) for byte in b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"], pause=0.002))
        oversized = probe.parse_response(probe.exchange(
            server.host, server.port, b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n"))
        malformed = probe.parse_response(probe.exchange(server.host, server.port, b"GARBAGE\r\n\r\n"))
    assert probe.http_problems(page) == []
    assert (trickled.status, oversized.status, malformed.status) == (200, 431, 400)
    assert server.exit_code == 0  # a graceful stop on SIGTERM, under this interpreter too
