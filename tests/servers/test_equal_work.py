"""Equal work at delay 0: no server in a comparison does more per request than the others (issue 20, finding 1).

With no call to simulate, the Python designs skip their timer and answer from the page they
hold. nginx and the applications the real servers run must do the same: no `echo_sleep 0` timer
and no internal redirect in nginx, no `asyncio.sleep(0)` in the ASGI app, no `time.sleep(0)` in
the WSGI app. A zero-length sleep is not free: it is a timer (or a system call) per request,
which made nginx and uvicorn look slower than the designs they were compared with.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys

import pytest
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records.scenario_record import ScenarioRecord
from harness.system import launcher, processes

sys.path.insert(0, str(REPO_ROOT / "servers"))  # the apps import as the real servers import them

import asgi_app  # noqa: E402
import wsgi_app  # noqa: E402

NGINX_DESIGNS = ["nginx", "nginx-keep-alive"]


def location_block(config: str, name: str) -> str:
    """The text of `location NAME { ... }`, nested braces included."""
    start = config.index(f"location {name} {{")
    depth = 0
    for index in range(start, len(config)):
        depth += {"{": 1, "}": -1}.get(config[index], 0)
        if depth == 0 and config[index] == "}":
            return config[start:index + 1]
    raise ValueError(f"unclosed location {name}")


@pytest.mark.parametrize("name", NGINX_DESIGNS)
def test_nginx_answers_at_once_at_delay_0_and_sleeps_only_when_asked(name: str, tmp_path) -> None:
    design = load_catalogue().design(name)
    for delay, expected in ((0.0, "0"), (0.1, "0.1")):
        workdir = tmp_path / f"delay-{delay}"
        workdir.mkdir()
        config = launcher.write_config(design, 8000, delay, "127.0.0.1", workdir).read_text()
        assert f"set $simulated_call {expected};" in config
        root = location_block(config, "/")
        # The shortcut is a rewrite-phase `return`, which runs before any content handler (echo_sleep).
        shortcut = re.search(r"if \(\$simulated_call = 0\) \{\s*return 200 \$page;\s*\}", root)
        assert shortcut and shortcut.start() < root.index("echo_sleep"), root
    assert "return 200 $page;" in location_block(config, "@page")


@pytest.mark.parametrize("name", NGINX_DESIGNS)
def test_nginx_serves_the_same_page_with_and_without_the_simulated_call(name: str, tmp_path) -> None:
    design = load_catalogue().design(name)
    answers = []
    for delay in (0.0, 0.05):
        port = processes.free_port()
        with launcher.running_design(design, port, delay, tmp_path / f"delay-{delay}") as server:
            with socket.create_connection((server.host, server.port), timeout=5) as conn:
                conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        kept = sorted(line for line in head.split(b"\r\n")[1:] if not line.lower().startswith(b"date:"))
        answers.append((head.split(b"\r\n")[0], kept, body))
    assert answers[0] == answers[1]
    assert answers[0][0] == b"HTTP/1.1 200 OK" and b"Content-Type: text/html; charset=utf-8" in answers[0][1]
    assert answers[0][2] == asgi_app.BODY == wsgi_app.BODY  # the page every server answers with


def test_the_asgi_app_awaits_no_timer_at_delay_0(monkeypatch) -> None:
    async def no_timer(seconds: float) -> None:
        raise AssertionError(f"asyncio.sleep({seconds}) awaited at delay 0")

    monkeypatch.setattr(asgi_app, "DELAY", 0.0)
    monkeypatch.setattr(asgi_app.asyncio, "sleep", no_timer)
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(asgi_app.app({"type": "http", "method": "GET", "path": "/"}, None, send))
    assert sent[0]["status"] == 200 and sent[1]["body"] == asgi_app.BODY


def test_the_asgi_app_still_waits_when_a_call_is_simulated(monkeypatch) -> None:
    waited: list[float] = []

    async def timer(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(asgi_app, "DELAY", 0.25)
    monkeypatch.setattr(asgi_app.asyncio, "sleep", timer)

    async def send(message: dict) -> None:
        pass

    asyncio.run(asgi_app.app({"type": "http", "method": "GET", "path": "/"}, None, send))
    assert waited == [0.25]


@pytest.mark.parametrize(("delay", "sleeps"), [(0.0, []), (0.25, [0.25])])
def test_the_wsgi_app_sleeps_only_when_a_call_is_simulated(monkeypatch, delay: float, sleeps: list[float]) -> None:
    slept: list[float] = []
    monkeypatch.setattr(wsgi_app.time, "sleep", slept.append)
    body = b"".join(wsgi_app.make_app(delay)({"REQUEST_METHOD": "GET", "PATH_INFO": "/"}, lambda *args: None))
    assert slept == sleeps and body == wsgi_app.BODY


def test_every_table_states_the_work_per_request_it_compares() -> None:
    """The caption under every scenario table says what each server did per request (render/site.py)."""
    from fake_records import fake_record
    from harness.render import site

    def record(tool: str, settings: dict[str, object], started_utc: str = "2026-11-26T09:00:00Z") -> ScenarioRecord:
        return fake_record({"tool": tool}, settings, [], started_utc=started_utc)

    stated = site.work_per_request(record("wrk", {"delay": 0.0, "keep_alive": True}))
    assert f"the same {len(asgi_app.BODY)}-byte page" in stated and "no simulated call" in stated
    assert "keep the connection" in stated
    waiting = site.work_per_request(record("ab", {"delay": 0.1, "keep_alive": False, "work": 75000}))
    assert "wait 0.1 s for the simulated call" in waiting and "75,000 iterations" in waiting
    assert "close the connection" in waiting
    # The last unequal peak run:
    before = site.work_per_request(record("wrk", {"delay": 0.0, "keep_alive": True}, "2026-11-24T09:00:08Z"))
    assert "⚠ in this record nginx still set a 0 s timer and made an internal redirect" in before
