"""One restart with kept-alive clients idle and long requests in flight (restart.toml's [in_flight], issue 24):
the plan is checked, our supervisor's restart is reproduced in small, and the tables are fed only by the record."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

import pytest
from harness.clients import restart_probe
from harness.model.records.multi_process_records import Answer, InFlightRecord
from harness.render import multi_process_tables
from harness.suites import restart

from conftest import CATALOGUE, write_restart_plan

PLAN = """
id = "restart"
title = "test"
rate = 100
seconds = 1
delay = 0.05
restarts = 0
first_restart = 0
every = 0

[in_flight]
id = "restart-in-flight"
title = "test"
delay = 1.5
idle = 1
long = 1
restart_after = 0.3
next_after = [0.5]
repeat = 1

[[in_flight.target]]
design = "event-loop-workers"
signal = "SIGHUP"
source = "its docstring"
"""


def test_the_committed_in_flight_plan_loads_and_names_known_designs() -> None:
    plan = restart.load_in_flight_plan(catalogue=CATALOGUE)
    assert plan.repeat >= 3 and plan.delay == 5.0 and plan.restart_after < plan.delay
    assert {"event-loop-workers", "gunicorn-gthread"} <= {target.design for target in plan.targets}
    assert restart.load_in_flight_plan(quick=True, catalogue=CATALOGUE).repeat == 1


@pytest.mark.parametrize(("change", "message"), [
    (("long = 1", "lng = 1"), "[in_flight]: unknown key `lng` (did you mean `long`?)"),
    (("next_after = [0.5]", "next_after = 0.5"), "[in_flight].next_after: expected a list"),
    (('signal = "SIGHUP"', 'signal = "SIGHOP"'), "needs a signal name"),
    (("restart_after = 0.3", "restart_after = 2"), "while the long requests"),
])
def test_a_wrong_in_flight_plan_is_refused_naming_the_file(tmp_path, change, message) -> None:
    with pytest.raises(restart.RestartPlanError, match="restart.toml") as error:
        restart.load_in_flight_plan(write_restart_plan(tmp_path, PLAN.replace(*change)), catalogue=CATALOGUE)
    assert message in str(error.value)


def test_our_supervisor_finishes_the_request_in_flight_and_the_idle_client_reconnects(tmp_path) -> None:
    """A 1.5 s request sent 0.3 s before SIGHUP is answered after the restart (the old worker waited for it);
    the kept-alive client finds its connection closed cleanly after its first answer (the design says
    Connection: close), so its next request, 0.5 s after the restart, goes on a new connection and is answered."""
    path, written = restart.measure_plan(CATALOGUE, restart.Plan(in_flight=True, out=tmp_path / "out",
                                                                 plan_path=write_restart_plan(tmp_path, PLAN)))
    assert restart.problems(written) == 0
    record = InFlightRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
    (run,) = record.targets[0].runs
    assert run.alive_at_end and run.report is not None
    (long,) = run.report.long
    assert long.outcome == 200 and long.sent_s < 0 < long.ended_s  # in flight across the restart
    (idle,) = run.report.idle
    assert idle.first.outcome == 200 and not idle.first.keep_alive
    assert idle.closed_by_server == "closed"
    assert idle.closed_at_s is not None and idle.closed_at_s < 0  # a clean close, before the restart
    assert not idle.reused and idle.next.outcome == 200
    tables = multi_process_tables.in_flight_tables(record)
    assert "| event-loop-workers (SIGHUP) | 1 | 1 answered (1 saying Connection: close) |" in tables
    assert "1 of 1: 1 closed at" in tables and "One run per server (⚠ no spread)" in tables


def test_the_tables_count_every_failure_kind() -> None:
    answers = [Answer(outcome=outcome, keep_alive=keep_alive, sent_s=-0.3, ended_s=1.0, took_s=1.3)
               for outcome, keep_alive in ((200, True), ("closed", False), ("reset", False), ("closed", False))]
    assert multi_process_tables.outcomes_label(answers) == "1 answered, **2 closed before an answer**, **1 reset**"
    assert multi_process_tables.outcomes_label([]) == "–"
    assert multi_process_tables.seconds_span([4.701, 4.704]) == "4.70 s"
    assert multi_process_tables.seconds_span([1.0, 4.7]) == "1.00–4.70 s"


def serve_then_drop(how: str):
    """A keep-alive server that answers a connection's first request, then drops it on the next: FIN or RST."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await reader.readuntil(b"\r\n\r\n")  # the next request: dropped unanswered
        if how == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
        writer.close()
    return handle


@pytest.mark.parametrize("how", ["closed", "reset"])
def test_the_probe_names_a_connection_dropped_after_the_request_was_sent(how, capsys) -> None:
    """The failure a client library cannot hide: the kept connection looked open, the request went out on it,
    and the server closed (or reset) it instead of answering."""
    async def main() -> dict:
        server = await asyncio.start_server(serve_then_drop(how), "127.0.0.1", 0)
        async with server:
            port = server.sockets[0].getsockname()[1]
            return await restart_probe.probe("127.0.0.1", port, idle=1, long=0, restart_after=0.05,
                                             next_after=[0.1])

    report = asyncio.run(main())
    (idle,) = report["idle"]
    assert idle["first"]["outcome"] == 200 and idle["first"]["keep_alive"]
    assert idle["closed_by_server"] is None and idle["reused"]
    assert idle["next"]["outcome"] == how
    assert capsys.readouterr().out.startswith("restart ")  # the line the harness restarts on
