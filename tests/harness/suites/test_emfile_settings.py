"""Case 15 against the real servers' own caps (suites/hostile/emfile_settings.py): its catalogue, the client's look at
a held connection, and the table the page shows. None of these starts a server.

The measurement itself (`bench.py hostile --emfile-settings`) runs case 15 through the hostile suite's run_case,
which tests/harness/suites/test_hostile.py and tests/servers/test_emfile.py exercise against real servers.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness.clients import raw_http
from harness.model.disclosed_settings import load_real_servers
from harness.model.paths import REPO_ROOT
from harness.render import survival
from harness.suites.hostile import emfile_settings

from conftest import CATALOGUE

RECORD = REPO_ROOT / "results" / survival.SETTINGS_RECORD_NAME


@contextlib.contextmanager
def connected_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A loopback TCP connection: (client, server) sockets, both closed on the way out."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    with contextlib.closing(client), contextlib.closing(server):
        yield client, server


def settle() -> None:
    time.sleep(0.05)  # loopback delivers at once; a moment for the FIN or RST to arrive


def test_a_held_connection_is_closed_by_the_peer_only_after_its_eof_or_reset() -> None:
    with connected_pair() as (client, server):
        assert not raw_http.closed_by_peer(client)  # open, nothing waiting
        server.sendall(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
        settle()
        assert not raw_http.closed_by_peer(client)  # an answer waiting is not a loss
        assert client.recv(100).startswith(b"HTTP/1.1 503")  # and the look took nothing from it
        server.shutdown(socket.SHUT_WR)
        settle()
        assert raw_http.closed_by_peer(client)  # EOF
    with connected_pair() as (client, server):
        server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()  # RST
        settle()
        assert raw_http.closed_by_peer(client)


def test_every_setting_names_a_design_and_is_disclosed_with_its_value() -> None:
    """Each cap measured runs on a catalogue design, and the real servers' list discloses the option and the value."""
    servers = load_real_servers()
    for entry in emfile_settings.load_settings():
        design = CATALOGUE.design(entry.design)
        assert entry.server in servers, entry
        option = entry.arguments[0].lstrip("-").replace("-", "_")
        disclosed = [setting for setting in servers[entry.server].settings
                     if option in setting.setting.lstrip("-").replace("-", "_")]
        assert disclosed and any(entry.value in setting.ours for setting in disclosed), (entry, disclosed)
        assert entry.value in entry.arguments and entry.source.startswith("https://"), entry
        assert design.kind == "http", design


def test_a_setting_missing_its_arguments_is_refused_naming_it(tmp_path: Path) -> None:
    broken = tmp_path / "emfile-settings.toml"
    broken.write_text('[[setting]]\nserver = "Waitress"\ndesign = "waitress"\nsetting = "connection_limit"\n'
                      'source = "https://example.org"\ndefault = "100"\nvalue = "32"\nwhy = "a test"\n',
                      encoding="utf-8")
    with pytest.raises(ValueError, match="connection_limit"):
        emfile_settings.load_settings(broken)
    (tmp_path / "empty.toml").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="no \\[\\[setting\\]\\]"):
        emfile_settings.load_settings(tmp_path / "empty.toml")


def test_before_the_record_the_table_says_how_to_measure_it() -> None:
    assert "bench.py hostile --emfile-settings" in survival.emfile_settings_table(None)


@pytest.mark.skipif(not RECORD.exists(), reason="results/hostile-emfile-settings.json not measured yet")
def test_the_table_shows_both_runs_of_every_setting_from_the_record() -> None:
    record = survival.load_settings_record(REPO_ROOT / "results")
    assert record is not None
    table = survival.emfile_settings_table(record)
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Server")]
    assert len(rows) == 2 * len(record.rows)
    busy = record.case.busy_cpu_share
    for row, (default_line, setting_line) in zip(record.rows, zip(rows[::2], rows[1::2]), strict=True):
        for run, line in ((row.default, default_line), (row.with_setting, setting_line)):
            figures = run.result.figures if run.result else None
            if figures is None:
                assert "not measured" in line
                continue
            assert f"| {figures.cpu_share:.0%}" in line and (("busy loop" in line) == (figures.cpu_share > busy))
            assert f"{figures.at_limit} of {figures.processes}" in line
            if figures.held_answered is not None:
                assert (f"{figures.held_answered} / {figures.held_closed} / {figures.held_silent} of "
                        f"{figures.connections_held}") in line
                assert figures.held_answered + figures.held_closed + figures.held_silent == figures.connections_held
    assert json.loads(RECORD.read_text(encoding="utf-8"))["kind"] == "emfile-settings"


@pytest.mark.skipif(not RECORD.exists(), reason="results/hostile-emfile-settings.json not measured yet")
def test_what_the_reference_page_reads_from_the_record_holds() -> None:
    """docs/reference/survive-limits.md's paragraph under the table, claim by claim, against the record."""
    record = survival.load_settings_record(REPO_ROOT / "results")
    assert record is not None and record.case.ask_held_within is not None
    busy = record.case.busy_cpu_share
    rows = {row.setting.server: row for row in record.rows}
    for row in record.rows:
        capped, default = row.with_setting, row.default
        assert capped.result is not None and default.result is not None, row.setting
        figures, before = capped.result.figures, default.result.figures
        assert figures is not None and before is not None
        # With the cap: not at the limit, no busy loop, no EMFILE in the log.
        assert (figures.at_limit, capped.emfile_logged) == (0, 0) and figures.cpu_share <= busy, row.setting
        # The price: the connections past the cap wait; fewer answered than at the defaults, some got nothing.
        assert figures.held_answered < before.held_answered and figures.held_silent > 0, row.setting
    granian = rows["Granian"].with_setting.result.figures
    assert granian.held_answered == int(rows["Granian"].setting.value)  # --backpressure capped connections too
    gthread = rows["Gunicorn"].default
    assert gthread.result.figures.at_limit == 0 and gthread.result.figures.cpu_share <= busy  # no spin, not "at" it
    assert gthread.emfile_logged > 0 and gthread.processes_replaced >= 1  # accept() raised EMFILE; a new worker
    assert gthread.result.figures.held_closed > 0  # what a client loses: closed without an answer
    waitress = rows["Waitress"].default
    assert waitress.emfile_logged > 0 and waitress.result.figures.cpu_share > busy  # the log fills, beside the spin
    page = (REPO_ROOT / "docs" / "reference" / "survive-limits.md").read_text(encoding="utf-8")
    assert "Read it row by row." in page and '--8<-- "docs/_generated/survive-emfile-settings.md"' in page
