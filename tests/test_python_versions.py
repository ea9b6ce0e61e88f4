"""The behaviour suite's core cases under every supported CPython this machine has, not only the one running pytest.

The project supports CPython 3.11, 3.12 and 3.13 (README). The servers use the
standard library only, so each is started with the other interpreter directly.
An interpreter that is not installed is skipped with the reason; on GitHub the
CI matrix runs the whole suite under each version instead.
"""

from __future__ import annotations

import glob
import shutil
import sys
from pathlib import Path

import pytest

from conftest import CATALOGUE, started
from harness import probe

SUPPORTED = ["3.11", "3.12", "3.13"]
DESIGNS = ["sequential-sockets", "thread-per-connection", "epoll-loop", "asyncio-streams", "event-loop-workers"]


def interpreter(version: str) -> str | None:
    """pyenv's copy of CPython X.Y, or `pythonX.Y` on PATH; None when this machine has neither.

    pyenv's shims are skipped: a shim for a version that is not pyenv's current one exits 127.
    """
    candidates = sorted(glob.glob(f"{Path.home()}/.pyenv/versions/{version}.*/bin/python{version}"))
    if candidates:
        return candidates[-1]
    found = shutil.which(f"python{version}")
    return found if found and "/.pyenv/shims/" not in found else None


@pytest.fixture(params=SUPPORTED)
def python(request: pytest.FixtureRequest) -> str:
    path = interpreter(request.param)
    if path is None:
        pytest.skip(f"CPython {request.param} is not installed here (python{request.param} not on PATH, no pyenv copy)")
    return path


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
