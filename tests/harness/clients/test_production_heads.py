"""Production-shaped heads: wrk's Lua script and the Python client send the same bytes, each head unique.

The templates are clients/tools/production_heads.txt; wrk_production_heads.lua fills them for wrk (the
peak-production-heads scenario), clients/production_heads.py for Python (the instruction counts). A small
server here records what wrk really sends and compares it with the Python client's heads, byte for byte.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading

import pytest
from harness.clients import production_heads
from harness.clients.production_heads import ProductionHeads
from harness.clients.tools import wrk
from harness.model.settings import ScenarioSettings

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


def test_five_shapes_from_200_bytes_to_1_4_kib_each_request_unique() -> None:
    heads = ProductionHeads("127.0.0.1:8000")
    sample = [heads.head(number) for number in range(50)]
    sizes = sorted({len(head) for head in sample})
    assert len(production_heads.templates()) == 5 and 190 <= sizes[0] < 250 and 1300 <= sizes[-1] <= 1536
    assert len(set(sample)) == len(sample)  # no cache of whole heads answers any of them
    assert all(head.endswith(b"\r\n\r\n") and head.count(b"\r\n\r\n") == 1 and b"$" not in head for head in sample)
    assert all(b"Connection: close" not in head and b"Content-Length" not in head for head in sample)


def test_wrk_uses_the_script_when_the_scenario_asks_for_production_heads() -> None:
    settings = ScenarioSettings.for_tool(5, 50, keep_alive=True, request_heads="production")
    command = wrk.TOOL.command("http://127.0.0.1:8000/", 50, settings)
    assert command[-3:] == ["-s", str(wrk.PRODUCTION_HEADS_SCRIPT), "http://127.0.0.1:8000/"]


def record_heads(listener: socket.socket, heads: list[bytes], wanted: int) -> None:
    """Answer each head on each connection wrk opens (it opens one first to test the address), keeping the first
    `wanted` heads."""
    while len(heads) < wanted:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        buffer = b""
        with connection:
            connection.settimeout(5)
            try:
                while len(heads) < wanted:
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    buffer += chunk
                    while b"\r\n\r\n" in buffer:
                        head, buffer = buffer.split(b"\r\n\r\n", 1)
                        heads.append(head + b"\r\n\r\n")
                        connection.sendall(ANSWER)
            except OSError:
                return


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")
def test_wrk_sends_exactly_the_heads_the_python_client_makes() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    heads: list[bytes] = []
    thread = threading.Thread(target=record_heads, args=(listener, heads, 12), daemon=True)
    thread.start()
    try:
        subprocess.run(["wrk", "-t", "1", "-c", "1", "-d", "1s", "-s", str(wrk.PRODUCTION_HEADS_SCRIPT),
                        f"http://127.0.0.1:{port}/"], capture_output=True, timeout=30, check=False)
        thread.join(10)
    finally:
        listener.close()
    expected = ProductionHeads(f"127.0.0.1:{port}")
    assert len(heads) >= 10
    # wrk calls request() once before its first connection, so the first head sent is one of the first few.
    first = next(number for number in range(5) if expected.head(number) == heads[0])
    assert heads[:10] == [expected.head(number) for number in range(first, first + 10)]
