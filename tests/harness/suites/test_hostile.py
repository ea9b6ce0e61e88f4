"""The hostile suite (scripts/harness/suites/hostile/): each case's verdict, proven both ways.

Every case kind runs against two tiny servers (tests/hostile_servers.py): `good` does
what the case's robust answer asks, `bad` does the classic wrong thing. A case whose
verdict passed both would prove nothing, so each test asserts the good one passes and
the bad one fails. Then: the harness around a case (probes, leaks, a death), that the
suite leaves no process behind, the catalogue of cases, and the renderer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import resource
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness.model.catalogue import Design
from harness.model.paths import REPO_ROOT
from harness.model.records.hostile_record import HostileRecord
from harness.render import site, survival, survival_grid
from harness.suites.hostile import cases, run
from harness.system import processes

from conftest import CATALOGUE

TEST_SERVERS = REPO_ROOT / "tests" / "hostile_servers.py"
SUITE = cases.load_suite()
# Short bounds and small counts: the tiny servers time out within 1 s.
SETTINGS = dataclasses.replace(SUITE.run_settings(quick=True), bound=2.5, short_bound=2.5, idle_connections=20,
                               slowloris_connections=5, resets=20, emfile_headroom=40, emfile_beyond=40,
                               emfile_connections=80, emfile_hold=1.5, settle=2.0, delay=0.0)
SPINNING_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "servers" / "spins_on_emfile.py"
DYING_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "servers" / "dies_on_emfile.py"
SLOW_ACCEPTOR = REPO_ROOT / "tests" / "fixtures" / "servers" / "slow_acceptor.py"


def tiny_design(behaviour: str, server_file: Path = TEST_SERVERS) -> Design:
    """A catalogue-shaped entry for a tiny test server, so run.launched starts it like any design."""
    return Design(name=f"tiny-{behaviour}", title=behaviour, kind="http", file=str(server_file.relative_to(REPO_ROOT)),
                  page="", model="test", concurrent=True, reproduces=[],
                  command=["{python}", "{file}", *([behaviour] if server_file == TEST_SERVERS else []),
                           "--host", "{host}", "--port", "{port}"])


@contextlib.contextmanager
def tiny(behaviour: str, tmp_path: Path) -> Iterator[run.Server]:
    with run.launched(tiny_design(behaviour), SETTINGS.delay, tmp_path / behaviour) as server:
        yield server


def case(case_id: str) -> cases.Case:
    return SUITE.select([case_id])[0]


def play(server: run.Server, case_id: str) -> list[cases.Variant]:
    target = cases.Target(server.target_host, server.target_port, server.process.pid, SETTINGS)
    return cases.CASE_KINDS[case(case_id).kind](target, case(case_id))


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Iterator[run.Server]:
    with tiny("good", tmp_path_factory.mktemp("good")) as server:
        yield server


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> Iterator[run.Server]:
    with tiny("bad", tmp_path_factory.mktemp("bad")) as server:
        yield server


# Cases whose verdict only depends on the variants (the harness-level ones are tested below).
VARIANT_CASES = ["dribble", "pipelined", "long-request-line", "large-head", "malformed-request-line",
                 "malformed-header", "conflicting-length", "bad-chunk-size", "body-stall", "slowloris",
                 "idle-connections", "half-close", "expect-continue", "request-forms"]


@pytest.mark.parametrize("case_id", VARIANT_CASES)
def test_the_good_server_gives_every_robust_answer(good: run.Server, case_id: str) -> None:
    variants = play(good, case_id)
    assert variants and all(variant.passed for variant in variants), variants


@pytest.mark.parametrize("case_id", VARIANT_CASES)
def test_the_bad_server_fails_every_case(bad: run.Server, case_id: str) -> None:
    variants = play(bad, case_id)
    assert any(not variant.passed for variant in variants), variants


def test_a_refusal_after_a_timeout_is_not_at_once(bad: run.Server) -> None:
    """Random bytes without a blank line: the bad server waits; the suite says so, not just 'open'."""
    [random_bytes] = [variant for variant in play(bad, "malformed-request-line") if variant.name.startswith("4 KiB")]
    assert (random_bytes.passed, random_bytes.status) == (False, "open")


def test_the_slow_reader_needs_big_and_says_when_it_is_missing(good: run.Server, tmp_path: Path) -> None:
    [variant] = play(good, "slow-reader")
    assert variant.applicable and variant.status == "200"
    with run.launched(CATALOGUE.design("sequential-sockets"), SETTINGS.delay, tmp_path) as without_big:
        [missing] = play(without_big, "slow-reader")
    if missing.applicable:
        pytest.skip("sequential-sockets answers GET /big now: nothing left to show missing")
    assert (missing.status, missing.note) == ("n/a", "not applicable: no /big (1 MiB) on this design")


def test_resets_leak_nothing_on_the_good_server_and_an_fd_each_on_the_bad(good: run.Server,
                                                                          bad: run.Server) -> None:
    robust = run.run_case(good, case("reset"), SETTINGS)
    leaky = run.run_case(bad, case("reset"), SETTINGS)
    assert (robust.verdict, robust.fds_leaked) == ("robust", 0), robust
    assert leaky.fds_leaked > 0 and leaky.verdict == "weak", leaky


@pytest.mark.parametrize("design", [tiny_design("spins", SPINNING_FIXTURE), CATALOGUE.design("epoll-loop"),
                                    CATALOGUE.design("thread-pool-queue")],  # it died on EMFILE until 2026-11-25
                         ids=lambda design: design.name)
def test_emfile_lowers_the_running_servers_limit_and_calls_a_spinning_loop_busy(design: Design, tmp_path: Path) -> None:
    """The case lowers the limit once the server answers: the fixture's loop spins, epoll_loop.py pauses accepting."""
    with run.launched(design, SETTINGS.delay, tmp_path) as server:
        limit = resource.prlimit(server.process.pid, resource.RLIMIT_NOFILE)
        result = run.run_case(server, case("emfile"), SETTINGS)
        lowered = resource.prlimit(server.process.pid, resource.RLIMIT_NOFILE)
    note = result.variants[0].note
    assert lowered[0] < limit[0] and lowered[0] == lowered[1], (limit, lowered)  # soft and hard, on the running server
    assert "1 of 1 processes at their limit before and after" in note, note  # the CPU was measured over the limit
    assert result.probe_after is not None and result.probe_after.served, result  # serving resumed once they closed
    if design.name != "tiny-spins":  # the fixture that goes back to select() after EMFILE
        assert result.verdict == "robust", result
    else:
        assert (result.robust, result.verdict) == (False, "weak") and "busy loop" in note, result


def test_emfile_sees_a_worker_die_at_the_limit_and_be_replaced(tmp_path: Path) -> None:
    """The fixture's worker raises EMFILE, frees a descriptor and exits once the held connections close; its supervisor
    starts another. The looks before and after the hold find no process at its limit: the watch must see the death."""
    with run.launched(tiny_design("dies", DYING_FIXTURE), SETTINGS.delay, tmp_path) as server:
        result = run.run_case(server, case("emfile"), SETTINGS)
    figures, note = result.figures, result.variants[0].note
    assert figures is not None and figures.at_limit == 0, note  # what hid it: its freed descriptor
    assert (figures.died_at_limit, figures.replaced) == (1, 1), note
    assert figures.emfile_logged, note  # the traceback's "OSError: [Errno 24] Too many open files"
    assert "never accepted past it" not in note and "ran out of descriptors and ended" in note, note
    assert result.verdict == "robust" and result.probe_after is not None and result.probe_after.served, result
    data = json.loads(json.dumps(FIXTURE))
    data["cases"] = [case("emfile").to_json()]
    data["designs"][0]["cases"] = [result.to_json()]
    page = survival.emfile_page(fixture(data))
    classes = {line.split("**")[1]: line for line in page.splitlines() if line.startswith("- **")}
    assert classes["A worker died at the limit and was replaced"].endswith(": nginx."), page  # the fixture's name
    assert classes["Never at the limit"].startswith("- **Never at the limit** (0 of 1"), page


@pytest.mark.parametrize("close_after, robust", [("0.5", True), ("inf", False)], ids=["closes-after-accept", "never"])
def test_idle_connections_beyond_the_backlog_are_timed_from_when_the_server_has_them(
        tmp_path: Path, close_after: str, robust: bool) -> None:
    """Case 11 against a server with a backlog of 16 that takes a connection every 10 ms and closes each 0.5 s after
    taking it: 80 opened at once overflow its queue (some never reach it, or reach it a second late), so the verdict
    hung on a race. Opened in batches of 8, each accepted before the next, every one is closed within the bound;
    the same server that never closes still fails."""
    settings = dataclasses.replace(SETTINGS, idle_connections=80, bound=1.5)
    idle = dataclasses.replace(case("idle-connections"), batch=8, accept_wait=1.0)
    design = tiny_design("slow-acceptor", SLOW_ACCEPTOR)
    with run.launched(design, SETTINGS.delay, tmp_path, extra_arguments=["--close-after", close_after]) as server:
        target = cases.Target(server.target_host, server.target_port, server.process.pid, settings)
        [variant] = cases.idle_case(target, idle)
    assert variant.passed is robust, variant
    assert variant.note.startswith("80 of 80 closed" if robust else "0 of 80 closed"), variant


def test_a_stalled_design_is_stalled_not_weak(tmp_path: Path) -> None:
    """The probe client waits behind the slowloris connections of a one-at-a-time design."""
    with run.launched(CATALOGUE.design("sequential-sockets"), SETTINGS.delay, tmp_path) as server:
        # The connections trickle for 5 s: well past the probe's 2 s, which starts 0.5 s in.
        result = run.run_case(server, case("slowloris"), dataclasses.replace(SETTINGS, bound=5.0))
    assert result.verdict == "stalled" and result.probe_during is not None, result
    assert result.probe_during.status is None, result
    assert result.probe_after is not None and result.probe_after.served  # serving resumed once the connections closed


def test_a_design_that_dies_is_recorded_with_its_stderr_and_the_run_goes_on(tmp_path: Path) -> None:
    """thread-per-connection crashes on EMFILE in accept(); the suite records it and carries on."""
    subject = run.Subject(CATALOGUE.design("thread-per-connection"))
    record = run.run_subject(subject, [case("emfile"), case("half-close")], SETTINGS, tmp_path, lambda _: None)
    by_case = {result.case: result for result in record.cases}
    if by_case["emfile"].alive:
        pytest.skip("thread-per-connection survives EMFILE now")
    assert record.status == "failed" and "died during case 15" in record.problems[0]
    assert "Too many open files" in by_case["emfile"].stderr_tail
    assert by_case["half-close"].verdict == "robust"  # the next case ran against a fresh server


def group_alive(pgid: int) -> bool:
    return processes.group_counts(pgid) != (0, 0)


def test_the_suite_leaves_no_process_behind(tmp_path: Path) -> None:
    """Two designs (one behind nginx), two cases: every process group is gone afterwards, the record is written."""
    started: list[int] = []
    launched = run.launched

    @contextlib.contextmanager
    def watched(*args, **kwargs):  # noqa: ANN002, ANN003 - records the groups it starts
        with launched(*args, **kwargs) as server:
            started.append(server.process.pid)
            if server.proxy is not None:
                started.append(server.proxy.process.pid)
            yield server

    run.launched = watched
    try:
        path, record = run.run_suite(CATALOGUE, ["asyncio-streams", "sequential-sockets+nginx"],
                                         ["reset", "12"], quick=True, out_dir=tmp_path / "out",
                                         suite=cases.Suite(dataclasses.asdict(SETTINGS), {}, SUITE.cases),
                                         log_root=tmp_path)
    finally:
        run.launched = launched
    assert len(started) == 3
    assert not [pgid for pgid in started if group_alive(pgid)]
    assert path == tmp_path / "out" / "hostile.json"
    written = HostileRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
    assert written.to_json() == record.to_json() and written.designs[1].name == "sequential-sockets+nginx"
    assert [result.case for result in record.designs[0].cases] == ["half-close", "reset"]


def test_the_catalogue_has_the_issues_seventeen_cases_each_with_its_answer_and_sources() -> None:
    assert [case.number for case in SUITE.cases] == list(range(1, 18))
    for entry in SUITE.cases:
        assert entry.robust and entry.wild and entry.reference, entry.id
        if entry.kind == "exchange":
            assert entry.variant, entry.id


def test_a_case_of_an_unknown_kind_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "cases.toml"
    broken.write_text('[[case]]\nnumber = 1\nid = "x"\ntitle = "x"\nrobust = "x"\nwild = "x"\nreference = "x"\n'
                      'kind = "teleport"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="kind 'teleport'"):
        cases.load_suite(broken)


def test_a_misspelt_case_parameter_is_refused_at_load(tmp_path: Path) -> None:
    """The catalogue's case is read through the record's HostileCase: a parameter it does not know is an error."""
    broken = tmp_path / "cases.toml"
    broken.write_text('[[case]]\nnumber = 1\nid = "x"\ntitle = "x"\nrobust = "x"\nwild = "x"\nreference = "x"\n'
                      'kind = "pipelined"\ncount = [2]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[\[case\]\] x: unknown key `count` \(did you mean `counts`\?\)"):
        cases.load_suite(broken)


def test_unknown_cases_and_non_http_designs_are_bad_input() -> None:
    from harness.model.catalogue import UnknownNameError

    with pytest.raises(UnknownNameError):
        SUITE.select(["99"])
    with pytest.raises(UnknownNameError):
        run.subjects_for(CATALOGUE, ["threaded-echo"], SETTINGS)
    assert [subject.name for subject in run.subjects_for(CATALOGUE, ["uvicorn+nginx"], SETTINGS)] == ["uvicorn+nginx"]


def test_bench_hostile_exits_2_on_an_unknown_case() -> None:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import bench

    assert bench.main(["hostile", "--case", "no-such-case", "--design", "nginx"]) == 2


# --- the renderer ---------------------------------------------------------------------------

SETTINGS_KEPT = SETTINGS.to_record(jobs=1)  # as a record keeps them
FIXTURE = {
    "schema": 1, "suite": "hostile", "title": "t", "mode": "quick",
    "command": ["python", "scripts/bench.py", "hostile"],
    "settings": {**SETTINGS_KEPT, "delay": 0.05, "bound": 3.0, "probe_timeout": 2.0, "probe_at": 0.5,
                 "after_timeout": 5.0},
    "cases": [{"number": 3, "id": "long-request-line", "title": "Long line", "robust": "414", "wild": "scanners",
               "reference": "RFC 9112 §3", "kind": "exchange"}],
    "environment": {"cpu_model": "cpu", "cpu_count": 2, "cpus_available": 2, "memory_gib": 4.0, "kernel": "6",
                    "os": "Linux", "python": "3.11", "runner": "local",
                    "pinning": {"server_cpu": None, "load_tool_cpu": None, "method": "none"},
                    "tools": {"nginx": "nginx/1"}, "commit": "0123456789abcdef", "dirty": False},
    "started_utc": "2026-01-01T00:00:00Z", "finished_utc": "2026-01-01T00:01:00Z",
    "designs": [
        {"name": name, "design": "nginx", "title": "NGINX", "model": "m", "behind_nginx": False, "status": "ok",
         "problems": [], "stderr_tail": "", "server_commands": [["nginx"]],
         "cases": [{"case": "long-request-line", "number": 3, "verdict": verdict, "robust": verdict == "robust",
                    "survived": True, "alive": True, "statuses": statuses, "seconds_to_close": 0.01,
                    "probe_during": {"status": 200, "seconds": 0.05, "error": ""},
                    "probe_after": {"status": 200, "seconds": 0.05, "error": ""},
                    "fds_leaked": 0, "threads_leaked": 0, "fds_before": 4, "threads_before": 1, "peak_rss_mib": 5.0,
                    "cpu_seconds": 0.01, "case_seconds": 0.1, "errors": [], "stderr_tail": "",
                    "variants": [{"name": "10 KiB line", "passed": verdict == "robust", "status": statuses[0],
                                  "seconds_to_close": 0.01, "note": "", "applicable": True}]}]}
        for name, verdict, statuses in [("nginx", "robust", ["414", "414"])]],
}


def fixture(data: dict[str, Any] = FIXTURE) -> HostileRecord:
    return HostileRecord.from_json(data, "the fixture")


def test_the_matrix_shows_a_mark_and_the_status_per_cell() -> None:
    tables = survival.matrix_tables(fixture())
    assert '| [nginx](/designs/nginx.md "NGINX, one worker process") | ✔ 414 |' in tables  # linked to its page
    assert "| **all** | **1** | **0** | **0** | **0** | **0** | |" in tables


def test_the_limits_table_says_whether_a_measurement_keeps_the_documented_promise() -> None:
    limit = {"server": "nginx", "design": "nginx", "setting": "large_client_header_buffers", "source": "https://x",
             "default": "4 8k", "case": "long-request-line", "variant": "10 KiB line"}
    for promised, kept in ([414], "| yes |"), ([400], "| **no** |"):
        assert kept in survival.limits_page(fixture(), [survival.DocumentedLimit(**limit, promises_status=promised)])


def test_every_documented_limit_names_a_real_case_and_variant() -> None:
    for limit in survival.load_limits():
        assert limit.design in CATALOGUE.designs and limit.source.startswith("https://")
        if limit.case is not None:
            entry = case(limit.case)
            if limit.variant is not None:
                assert limit.variant in {variant.name for variant in entry.variant or []} or \
                    limit.variant.endswith("pipelined"), limit


def test_a_stale_matrix_fails_render_check(tmp_path: Path) -> None:
    results, generated = tmp_path / "results", tmp_path / "generated"
    results.mkdir()
    (results / "hostile.json").write_text(json.dumps(FIXTURE), encoding="utf-8")
    site.write_all(results, generated)
    assert site.stale_files(results, generated) == []
    changed = json.loads(json.dumps(FIXTURE))
    changed["designs"][0]["cases"][0]["statuses"] = ["400"]
    (results / "hostile.json").write_text(json.dumps(changed), encoding="utf-8")
    assert f"stale: {generated / 'survive-matrix.md'}" in site.stale_files(results, generated)
    (results / "hostile.json").unlink()
    assert f"stale: {generated / 'survive-matrix.md'}" in site.stale_files(results, generated)


def test_the_page_includes_every_rendered_piece() -> None:
    """survive.md and its reference page (the full matrix) include every table; the page links the download."""
    page = (REPO_ROOT / "docs" / "survive.md").read_text(encoding="utf-8")
    pages = page + "".join((REPO_ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
                           for name in ("survive-matrix.md", "survive-text-matrix.md", "survive-limits.md"))
    drawn = {**survival.survival_files(REPO_ROOT / "results", REPO_ROOT / "docs" / "_generated", REPO_ROOT / "docs" / "plots"),
             **survival_grid.survival_grid_files(REPO_ROOT / "results", REPO_ROOT / "docs" / "_generated")}
    for path in drawn:
        if path.suffix == ".csv":
            assert f"(plots/{path.name})" in page
        else:
            assert f'--8<-- "docs/_generated/{path.name}"' in pages, path.name
    assert page.index("survive-compact.md") < page.index("## How a case is judged")  # the answer first


def test_the_proxy_table_names_the_cases_nginx_fixes_and_the_ones_it_costs() -> None:
    record = json.loads(json.dumps(FIXTURE))
    alone = record["designs"][0]
    alone.update(name="sequential-sockets", design="sequential-sockets")
    alone["cases"][0]["verdict"] = "weak"
    fronted = json.loads(json.dumps(alone))
    fronted.update(name="sequential-sockets+nginx", behind_nginx=True)
    fronted["cases"][0]["verdict"] = "robust"
    record["designs"] = [alone, fronted]
    page = survival.proxy_page(fixture(record))
    assert "| 3. long-request-line | ⚠ 414 | ✔ 414 |" in page
    assert "nginx turns cases 3 robust, and cases none from robust to not." in page
