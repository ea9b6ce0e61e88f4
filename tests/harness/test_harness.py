"""The harness on bad input, broken designs, interruption and atomic writes.

These tests run scripts/bench.py as a reader would (a subprocess), against the
real catalogue or the catalogue of deliberately broken designs in
tests/fixtures/designs/.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness.clients import probe, verify
from harness.model.catalogue import Design, Scenario
from harness.model.paths import REPO_ROOT
from harness.model.records import write_json_atomic
from harness.model.settings import ScenarioSettings
from harness.render import site
from harness.suites import runner
from harness.system import launcher, ports, processes

from conftest import CATALOGUE, started, tcp_sockets_on

BENCH = [sys.executable, str(REPO_ROOT / "scripts" / "bench.py")]
BROKEN_CATALOGUE = REPO_ROOT / "tests" / "fixtures" / "designs"
FROM_SCRATCH_ATTEMPTS = ["http-server", "raw-sockets", "threading", "selectors-blocking", "selectors-timer", "asyncio"]


def bench(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BENCH, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env)


def test_list_json_covers_every_from_scratch_attempt_with_the_required_fields() -> None:
    listed = json.loads(bench("list", "--json").stdout)
    for entry in listed:
        assert {"name", "title", "kind", "file", "page", "model", "reproduces"} <= entry.keys()
        assert (REPO_ROOT / entry["file"]).is_file(), entry["file"]
        assert (REPO_ROOT / "docs" / entry["page"]).is_file(), entry["page"]
    reproduced = {attempt for entry in listed for attempt in entry["reproduces"]}
    assert {f"from-scratch/{attempt}" for attempt in FROM_SCRATCH_ATTEMPTS} <= reproduced


ARTICLE_EXPERIMENT_IDS = {
    "async-101/sync", "async-101/async",
    "concurrency-models/linear", "concurrency-models/prefork", "concurrency-models/thread-queue",
    "concurrency-models/epoll",
    "designing-servers/sequential", "designing-servers/forking-per-client", "designing-servers/forking-tcpserver",
    "designing-servers/threading", "designing-servers/process-pool", "designing-servers/thread-pool",
    "designing-servers/nonblocking", "designing-servers/async", "designing-servers/nginx",
    "designing-servers/gunicorn-sync", "designing-servers/gunicorn-gevent", "designing-servers/waitress",
    "async-python-part-1/threaded-echo", "async-python-part-1/asyncio-echo",
}


def test_list_json_covers_every_experiment_of_the_other_four_articles() -> None:
    listed = json.loads(bench("list", "--json").stdout)
    reproduced = {attempt for entry in listed for attempt in entry["reproduces"]}
    assert ARTICLE_EXPERIMENT_IDS - reproduced == set()


def test_every_article_scenario_and_sweep_is_in_the_catalogue() -> None:
    listed = {scenario["id"]: scenario for scenario in json.loads(bench("scenarios", "--json").stdout)}
    assert {"from-scratch", "async-101", "concurrency-models", "designing-servers", "designing-servers-behind-nginx",
            "async-python-part-1", "timeline", "sweep-io", "sweep-hello", "sweep-10k", "open-loop",
            "cpu-bound"} <= listed.keys()
    assert {scenario["tool"] for scenario in listed.values()} == {"ab", "hey", "wrk", "http-client", "echo-client", "vegeta"}
    for sweep in ("sweep-io", "sweep-hello"):  # the two workloads of the sweep: a 100 ms call, and none
        assert listed[sweep]["concurrency"] == [1, 10, 50, 100, 500, 1000]
    assert (listed["sweep-io"]["delay"], listed["sweep-hello"]["delay"]) == (0.1, 0)
    assert listed["sweep-10k"]["concurrency"] == [10000]
    assert isinstance(listed["open-loop"]["rate"], list) and len(listed["open-loop"]["rate"]) >= 3
    assert listed["cpu-bound"]["work"] > 0 and listed["cpu-bound"]["delay"] == 0


def test_every_scenario_names_designs_and_a_known_tool() -> None:
    listed = json.loads(bench("scenarios", "--json").stdout)
    assert "from-scratch" in {scenario["id"] for scenario in listed}
    for scenario in listed:
        assert scenario["designs"], scenario["id"]
        assert scenario["tool"] in {"ab", "hey", "wrk", "http-client", "echo-client", "vegeta"}


@pytest.mark.parametrize("args", [["run", "--design", "no-such-design"], ["run", "--scenario", "no-such-scenario"],
                                  ["serve", "no-such-design"], ["check", "no-such-design"]])
def test_an_unknown_name_exits_2_and_lists_the_known_ones(args: list[str]) -> None:
    result = bench(*args)
    assert result.returncode == 2
    assert "unknown" in result.stderr
    assert "sequential-sockets" in result.stderr or "from-scratch" in result.stderr


def test_a_broken_catalogue_is_bad_input_and_says_where(tmp_path: Path) -> None:
    (tmp_path / "designs.toml").write_text("[[design]\nname = ")  # not TOML
    result = bench("--catalogue", str(tmp_path), "list")
    assert result.returncode == 2
    assert f"the catalogue in {tmp_path}" in result.stderr and "Traceback" not in result.stderr


def test_a_catalogue_folder_without_catalogue_files_is_bad_input(tmp_path: Path) -> None:
    """A mistyped --catalogue (a missing or an empty folder, one of a suite's own catalogues, a table written
    [design]) says so; each exited 3, "bug in the harness", before."""
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "one.toml").write_text('[design]\nname = "x"\n')
    cases = {tmp_path / "missing": f"no catalogue files (*.toml) in {tmp_path / 'missing'}",
             tmp_path: f"no catalogue files (*.toml) in {tmp_path}",
             REPO_ROOT / "scripts" / "catalogue" / "hostile": "no [[design]] tables in",
             tables: "`design` must be an array of tables, each written [[design]]"}
    for folder, message in cases.items():
        result = bench("--catalogue", str(folder), "list")
        assert result.returncode == 2, result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr


def test_a_bug_in_the_harness_exits_3_not_1_which_means_a_design_failed(monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_under_test", REPO_ROOT / "scripts" / "bench.py")
    bench_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_module)

    def broken_listing(catalogue: object, args: object) -> int:
        raise RuntimeError("a bug")

    # The one table of subcommands holds the handler: the bug goes in there.
    monkeypatch.setitem(bench_module.SUBCOMMANDS, "list",
                        bench_module.SUBCOMMANDS["list"]._replace(handler=broken_listing))
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # main() would install its handlers in pytest
    assert bench_module.main(["list"]) == 3
    stderr = capsys.readouterr().err
    assert "RuntimeError: a bug" in stderr and "bug in the harness" in stderr


def test_a_busy_port_is_named() -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        result = bench("serve", "sequential-sockets", "--port", str(port))
    assert result.returncode == 2
    assert f"port {port}" in result.stderr and "busy" in result.stderr


def test_a_missing_load_tool_says_how_to_install_it(tmp_path: Path) -> None:
    result = bench("run", "--scenario", "from-scratch", "--quick", "--out", str(tmp_path),
                   env={**os.environ, "PATH": str(tmp_path)})  # nothing on PATH: no ab
    assert result.returncode == 2
    assert "ab is not installed" in result.stderr and "apt-get install apache2-utils" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ab (apache2-utils), which `make test` installs")
def test_fewer_repetitions_of_a_whole_scenario_go_to_build_not_to_the_published_results() -> None:
    """`run --repeat K` (what the methodology page offers for a shorter run) never replaces results/."""
    published = REPO_ROOT / "results" / "async-101.json"
    before = published.read_bytes()
    result = bench("run", "--scenario", "async-101", "--repeat", "1")
    assert result.returncode in (0, 1), result.stderr  # 1 would mean a design failed: its record is still written
    written = REPO_ROOT / "build" / "results" / "async-101.json"
    assert f"Wrote {written}" in result.stdout
    record = json.loads(written.read_text())
    assert record["mode"] == "full" and record["settings"]["repeat"] == 1
    assert {run["repetition"] for design in record["designs"] for run in design["runs"]} == {0}
    assert published.read_bytes() == before


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ab (apache2-utils), which `make test` installs")
def test_broken_designs_are_recorded_as_failed_and_the_run_goes_on(tmp_path: Path) -> None:
    result = bench("--catalogue", str(BROKEN_CATALOGUE), "run", "--scenario", "broken-designs", "--out", str(tmp_path))
    assert result.returncode == 1, result.stderr
    record = json.loads((tmp_path / "broken-designs.json").read_text())
    by_name = {design["name"]: design for design in record["designs"]}

    assert by_name["exits-at-start"]["status"] == "failed"
    assert "boom: this server refuses to start" in by_name["exits-at-start"]["stderr_tail"]

    assert by_name["wrong-answer"]["status"] == "failed"
    assert "no Content-Length" in by_name["wrong-answer"]["problems"][0]
    assert by_name["wrong-answer"]["runs"] == []  # a wrong answer is never measured

    assert by_name["dies-mid-run"]["status"] == "failed"
    assert "dying on purpose" in by_name["dies-mid-run"]["stderr_tail"]

    good = by_name["good"]
    assert good["status"] == "ok" and good["server_exit_codes"] == [0]
    assert good["runs"][0]["complete"] == 200 and good["runs"][0]["failed"] == 0
    environment = record["environment"]
    assert {"cpu_model", "cpu_count", "kernel", "python", "tools", "commit", "pinning"} <= environment.keys()
    assert environment["tools"]["ab"].startswith("ApacheBench")
    assert "FAILED in broken-designs: exits-at-start, wrong-answer, dies-mid-run" in result.stderr


class ShortRunTool:
    """A load tool whose every run lasts 0.3 s: what hey did with 2,000 requests on kept connections."""

    name, keep_alive_version, reads = "short", None, frozenset()

    def version(self) -> str:
        return "short 1"

    def command(self, url: str, concurrency: int, settings: dict, workdir: Path | None = None) -> list[str]:
        return ["short", url]

    def run(self, url: str, concurrency: int, settings: dict, workdir: Path, cpu: str | None) -> dict:
        return {"tool": self.name, "command": self.command(url, concurrency, settings), "concurrency": concurrency,
                "complete": 300, "failed": 0, "non_2xx": 0, "requests_per_second": 1000.0, "duration_s": 0.3,
                "latency_ms": None, "error": None}


@pytest.mark.parametrize("fixed_count", [None, "the article's fixed-count experiment"], ids=["timed", "fixed-count"])
def test_a_run_shorter_than_a_second_is_an_error_outside_a_fixed_count_experiment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixed_count: str | None) -> None:
    options = {"ceiling_exempt": "a test", **({"fixed_count": fixed_count} if fixed_count else {})}
    scenario = Scenario(id="short-runs", title="t", tool="short", designs=["thread-per-connection"],
                        full_settings=ScenarioSettings(requests=300, concurrency=[10], time_limit=5, delay=0.0,
                                                       repeat=2, **options))
    monkeypatch.setattr(runner, "require_tool", lambda name: ShortRunTool())
    _, record = runner.run_scenario(CATALOGUE, scenario, None, quick=False, repeat=None, out_dir=tmp_path)
    design = record.designs[0]
    table = site.scenario_table(record)
    if fixed_count:  # its runs end at their count, however soon: numbers, unflagged
        assert design.status == "ok" and [run.error for run in design.runs] == [None, None]
        assert "**1,000**" in table and "⚠" not in table
        return
    assert design.status == "failed" and len(design.runs) == 1  # the first short run stops the design
    run = design.runs[0]
    assert run.error is not None
    assert run.error.startswith("the run lasted 0.30 s (300 requests), under the 1 s a measured run needs")
    assert run.requests_per_second == 1000.0  # kept in the record, with its reason
    assert "not measured: at c=10: the run lasted 0.30 s" in table and "1,000" not in table


LOAD_MARKER = "slow/good/repetition-0/c2/ab.csv"  # where the interrupted run's ab writes (build/logs/...)


def processes_running(marker: str) -> list[str]:
    """Command lines of live processes that contain `marker` (read from /proc, never truncated)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # the process ended while we looked
        if marker in args:
            found.append(args)
    return found


@pytest.mark.skipif(shutil.which("ab") is None, reason="needs ab (apache2-utils), which `make test` installs")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_stops_everything_and_writes_no_record(tmp_path: Path, signum: signal.Signals) -> None:
    out = tmp_path / "out"
    harness = subprocess.Popen([*BENCH, "--catalogue", str(BROKEN_CATALOGUE), "run", "--scenario", "slow",
                                "--out", str(out)], cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        # Only this run's processes: other tests (other xdist workers) may run ab and this design meanwhile.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not processes_running(LOAD_MARKER):
            time.sleep(0.1)  # wait until the load tool is running against the server
        running = processes_running(LOAD_MARKER)
        port = re.search(r"http://127\.0\.0\.1:(\d+)/", running[0]).group(1) if running else "none"
        harness.send_signal(signum)
        _, stderr = harness.communicate(timeout=30)
    finally:
        if harness.poll() is None:  # never SIGKILL first: the harness could not stop its children
            harness.send_signal(signal.SIGINT)
            harness.communicate(timeout=30)
    assert running, f"the load tool never started; harness said: {stderr}"
    assert harness.returncode == 130
    assert "interrupted" in stderr
    assert not out.exists() or list(out.iterdir()) == []
    assert processes_running(LOAD_MARKER) == []  # ab is gone
    assert processes_running(f"sequential_sockets.py --host 127.0.0.1 --port {port} ") == []  # and so is the server


def test_an_atomic_write_that_fails_leaves_the_old_record_and_no_debris(tmp_path: Path) -> None:
    target = tmp_path / "scenario.json"
    write_json_atomic(target, {"version": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"version": 2, "unserialisable": object()})
    assert json.loads(target.read_text()) == {"version": 1}
    assert [path.name for path in tmp_path.iterdir()] == ["scenario.json"]


def test_a_record_is_readable_by_everyone_the_umask_allows(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "scenario.json", {"version": 1})
    finally:
        os.umask(previous)
    assert (tmp_path / "scenario.json").stat().st_mode & 0o777 == 0o644  # not mkstemp's private 0600


def test_check_shows_the_answer_and_passes_for_a_correct_design() -> None:
    result = bench("check", "thread-per-connection")
    assert result.returncode == 0, result.stderr
    assert "HTTP/1.1 200 OK" in result.stdout and "thread-per-connection: OK" in result.stdout


def test_the_catalogue_design_files_and_pages_exist() -> None:
    for design in CATALOGUE.designs.values():
        assert (REPO_ROOT / design.file).exists(), design.file
        assert (REPO_ROOT / "docs" / design.page).exists(), design.page


# --- One port for a whole run: TIME_WAIT stays bounded by the client's port range ---------------------

def time_wait_on(port: int) -> int:
    """Connections in TIME_WAIT (state 06) whose local port is `port`."""
    return sum(1 for fields in tcp_sockets_on(port) if fields[3] == "06")


def design_on(name: str, port: int, tmp_path: Path):
    design = CATALOGUE.design(name)
    return launcher.running_design(design, port, 0.0, tmp_path / name)


def leave_time_wait_behind(port: int, tmp_path: Path, requests: int = 20) -> None:
    """Serve some requests on `port` and stop: the server closed first, so the port keeps them in TIME_WAIT."""
    with design_on("thread-per-connection", port, tmp_path) as server:
        for _ in range(requests):
            assert probe.get(server.host, server.port).status == 200


@pytest.fixture
def shared_port_in_time_wait(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """A fresh run's shared port, on which a design has just served 20 requests and stopped."""
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads TIME_WAIT sockets from /proc/net/tcp")
    monkeypatch.setattr(ports, "_run_ports", {})
    port = ports.run_port()
    leave_time_wait_behind(port, tmp_path, requests=20)
    assert time_wait_on(port) >= 20
    return port


def test_the_next_design_listens_on_the_port_the_last_one_left_in_time_wait(shared_port_in_time_wait: int,
                                                                           tmp_path: Path) -> None:
    port = shared_port_in_time_wait
    assert ports.run_port() == port  # the same port again: its TIME_WAIT is no obstacle
    with design_on("asyncio-streams", port, tmp_path) as server:
        assert probe.get(server.host, server.port).status == 200


WITHOUT_SO_REUSEADDR = [design for design in CATALOGUE.designs.values() if not design.reuses_address]


def test_only_the_articles_naive_servers_say_they_bind_without_so_reuseaddr() -> None:
    assert sorted(design.name for design in WITHOUT_SO_REUSEADDR) == ["async-101-naive-async", "async-101-naive-sync"]


@pytest.mark.parametrize("naive", WITHOUT_SO_REUSEADDR, ids=lambda design: design.name)
def test_a_design_without_so_reuseaddr_cannot_bind_that_port_so_it_gets_a_fresh_one(
        naive: Design, shared_port_in_time_wait: int, tmp_path: Path) -> None:
    port = shared_port_in_time_wait
    with pytest.raises(processes.ServerStartError) as refused:
        with design_on(naive.name, port, tmp_path):
            pass
    assert "Address already in use" in refused.value.stderr_tail
    assert ports.run_port("server", naive) != port
    assert ports.run_port() == port  # the others keep the shared port


def test_a_shared_port_that_something_else_took_is_replaced(monkeypatch) -> None:
    monkeypatch.setattr(ports, "_run_ports", {})
    port = ports.run_port()
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind((processes.LOOPBACK, port))
        squatter.listen()
        replacement = ports.run_port()
    assert replacement != port
    assert ports.run_port() == replacement
    assert ports.run_port("proxy") not in (port, replacement)  # the reverse proxy has a port of its own


@pytest.mark.skipif(not Path("/proc/net/netstat").exists(), reason="reads TcpExt counters from /proc/net/netstat")
def test_time_wait_overflows_are_counted_from_the_kernel() -> None:
    overflows = ports.time_wait_overflows()
    assert isinstance(overflows, int) and overflows >= 0


def test_the_primer_sends_its_requests_at_once_and_a_sequential_server_still_answers_them_in_turn(tmp_path):
    # 3 primer requests against a 0.3 s call: one call's time on a concurrent design, three on a
    # sequential one (which is why it still flushes requests a time-limited level left queued).
    timings = {}
    for name in ("thread-per-connection", "sequential-sockets"):
        with started(CATALOGUE.design(name), tmp_path, delay=0.3) as server:
            begun = time.monotonic()
            verify.prime(server.host, server.port)
            timings[name] = time.monotonic() - begun
    assert verify.PRIMER_REQUESTS == 3
    assert timings["thread-per-connection"] < 0.8, timings
    assert timings["sequential-sockets"] > 0.85, timings


def test_the_primer_raises_when_the_server_does_not_answer():
    with pytest.raises(OSError):
        verify.prime(processes.LOOPBACK, processes.free_port())  # nothing listens there


# --- serve: the design's own exit status --------------------------------------------------------------

@pytest.mark.parametrize(("catalogue", "name", "signum", "expected"), [
    (None, "thread-per-connection", signal.SIGINT, 0),
    (None, "thread-per-connection", signal.SIGTERM, 0),
    (BROKEN_CATALOGUE, "stops-with-status-3", signal.SIGINT, 3),
], ids=["ctrl-c", "sigterm", "design-exits-3"])
def test_serve_exits_with_the_designs_own_status_after_a_stop_signal(catalogue, name, signum, expected) -> None:
    port = processes.free_port()
    options = ["--catalogue", str(catalogue)] if catalogue else []
    serving = subprocess.Popen([*BENCH, *options, "serve", name, "--port", str(port)], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection((processes.LOOPBACK, port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        serving.send_signal(signum)
        _, stderr = serving.communicate(timeout=30)
    finally:
        if serving.poll() is None:
            serving.send_signal(signal.SIGINT)
            serving.communicate(timeout=30)
    assert serving.returncode == expected, stderr
    assert "no record was written" not in stderr and "interrupted" not in stderr
    assert f"exit status {expected}" in stderr


@pytest.mark.skipif(shutil.which("hey") is None or shutil.which("nginx") is None,
                    reason="needs hey and nginx, which `make test` installs")
def test_a_run_behind_the_reverse_proxy_records_every_command_it_ran(tmp_path: Path) -> None:
    """A design behind nginx, measured for real: its runs keep the proxy's command beside the server's and the
    tool's, and the record they make reads back through its class (a key the record does not know would stop the
    run at its first cell: the kind of mistake the committed records, made before the key, cannot show)."""
    scenario = CATALOGUE.scenarios["designing-servers-behind-nginx"]
    path, record = runner.run_scenario(CATALOGUE, scenario, ["thread-per-connection"], quick=True, repeat=None,
                                       out_dir=tmp_path)
    (design,) = record.designs
    assert design.status == "ok", design.problems
    (run,) = design.runs
    assert run.get("proxy_command") is not None and "nginx" in " ".join(run.get("proxy_command"))
    assert run.get("server_command") is not None and run.get("load_command") is not None
    assert type(record).from_json(json.loads(path.read_text(encoding="utf-8"))) == record
