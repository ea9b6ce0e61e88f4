"""The deployment recipe's rules (harness/model/deployment_recipe.py) and the CPU quota group (system/cpu_quota.py).

The rules: each says what it should for inputs chosen to land on either side of it, names a record that
exists and a page section that exists. The quota group: cpu.stat of both cgroup versions parsed from fixtures;
a missing controller refused with a message; and, where this machine lets us (root, a cpu controller), a real
group whose member sees one CPU through usable_cpus(), removed afterwards even when the body fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from harness.model.deployment_recipe import RULES, RecipeInputError, RecipeInputs, gunicorn_conf, predict, recipe
from harness.model.paths import REPO_ROOT
from harness.model.records.deployment_records import OverloadCell
from harness.render.recipe_tables import CHECK_PATH, QUOTA_PATH, held
from harness.system import cpu_quota

BASE = {"cores": 2, "rate": 200, "cpu_ms": 1, "wait_ms": 100, "max_connections": 100, "reserved": 3}


def answer(**changes: object) -> dict:
    return recipe(RecipeInputs(**{**BASE, **changes}))


def slug(heading: str) -> str:
    """Python-Markdown's toc slug of a heading (what the pages' #anchors name)."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[-\s]+", "-", text).strip("-")


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule["id"])
def test_every_rule_names_a_record_and_a_section_that_exist(rule: dict) -> None:
    """A rule's record exists; or it is one the recipe suite writes itself, and its table says it is not measured yet."""
    if rule["record"] not in {f"results/{path}" for path in (CHECK_PATH, QUOTA_PATH)}:
        assert (REPO_ROOT / rule["record"]).exists(), rule["record"]
    elif not (REPO_ROOT / rule["record"]).exists():
        table = REPO_ROOT / "docs" / "_generated" / "recipe" / ("check.md" if CHECK_PATH in rule["record"] else "quota.md")
        assert "Not measured yet" in table.read_text(encoding="utf-8"), f"{rule['record']} is missing"
    page, _, anchor = rule["page"].partition("#")
    headings = re.findall(r"^#+ (.+)$", (REPO_ROOT / "docs" / page).read_text(encoding="utf-8"), re.M)
    assert anchor in {slug(heading) for heading in headings}, f"{page} has no section #{anchor}"


def test_threads_hold_rate_times_time_with_headroom_and_a_connection_each() -> None:
    threads = answer()["models"]["threads"]
    assert threads["workers"] == 5  # 2 x 2 + 1
    assert threads["threads"] == 6  # 40 req/s per worker x 0.101 s x 1.25 = 5.05, rounded up
    assert threads["pool_per_worker"] == threads["threads"] and threads["pool_total"] == 30
    assert threads["capacity_rps"] >= 200  # the sized rate fits in what the threads hold


def test_an_event_loop_has_a_worker_per_usable_cpu_and_its_pool_is_its_cap() -> None:
    loop = answer()["models"]["event-loop"]
    assert loop["workers"] == 2
    assert loop["pool_per_worker"] == 13  # 100 req/s x 0.1 s x 1.25 = 12.5
    assert loop["admission_per_worker"] == 26  # twice what it runs at once
    assert answer(quota=1.5, cores=16)["models"]["event-loop"]["workers"] == 2  # the quota, rounded up, not the cores
    assert answer(quota=1.5, cores=16)["usable_cpus"] == 2


def test_the_pools_fit_then_need_a_pooler_then_nothing_helps() -> None:
    assert answer()["models"]["threads"]["database"]["verdict"] == "fits"  # 60 during a restart of 97
    crowded = answer(cores=8, rate=600)["models"]["threads"]["database"]
    assert crowded["at_restart"] > crowded["budget"] >= crowded["busy"]
    assert crowded["verdict"] == "pooler"
    assert answer(cores=8, rate=2000)["models"]["threads"]["database"]["verdict"] == "too-many"  # 250 busy > 97


def test_timeouts_keep_the_server_above_the_proxy_and_the_longest_request() -> None:
    times = answer(longest_s=90)["timeouts"]
    assert times["server_keepalive_s"] > times["proxy_keepalive_s"]
    assert times["graceful_s"] > 90 and times["proxy_read_timeout_s"] > 90 and times["gunicorn_timeout_s"] > 90
    assert answer(proxy=False)["timeouts"]["server_keepalive_s"] == 5


def test_cpu_that_does_not_fit_is_said_and_past_two_cpus_is_flagged() -> None:
    assert not answer(rate=2000, cpu_ms=1)["cpu_fits"]  # 2.5 CPUs of work on 2
    assert answer()["cpu_fits"] and not answer()["beyond_measured"]
    assert answer(cores=4)["beyond_measured"]


@pytest.mark.parametrize(("changes", "words"), [
    ({"cores": 0}, "cores"), ({"rate": 0}, "rate"), ({"cpu_ms": 0, "wait_ms": 0}, "not both 0"),
    ({"reserved": 100}, "reserved"), ({"quota": 0}, "quota"), ({"longest_s": 0}, "longest"),
])
def test_nonsense_inputs_are_refused_naming_them(changes: dict, words: str) -> None:
    with pytest.raises(RecipeInputError, match=words):
        answer(**changes)


def test_past_capacity_a_thread_pool_queues_and_an_event_loop_refuses() -> None:
    result = answer()
    assert predict(result, "threads", 200, 10)["within"]
    queued = predict(result, "threads", 400, 10)
    assert queued["refused_share"] == 0 and queued["last_wait_s"] > 1
    refused = predict(result, "event-loop", 400, 10)
    assert refused["refused_share"] == pytest.approx(1 - 260 / 400, abs=0.001)
    # Little's law: 2 workers hold 26 admitted each and answer 260/s, so an admitted request takes 200 ms on average;
    # a mean, not a p99 bound (the pool's queue is not first come, first served)
    assert refused["mean_bound_ms"] == pytest.approx(2 * 26 / 260 * 1000) and refused["p99_bound_ms"] is None


def test_the_counter_example_is_the_threads_plan_without_worker_connections() -> None:
    result = answer()
    printed, counter = gunicorn_conf(result), gunicorn_conf(result, worker_connections=False)
    assert "worker_connections = 6" in printed and "worker_connections" not in counter
    assert [line for line in printed.splitlines() if not line.startswith("worker_connections")] == counter.splitlines()


def overload_cell(answered: float, p99: float, mean: float, refused: int = 0, sent: int = 2000) -> OverloadCell:
    """vegeta offering sent / 10 s, with these answers."""
    latency = {"mean": mean, "p50": mean, "p90": p99, "p99": p99, "max": p99}
    return OverloadCell.from_json({"tool": "vegeta", "command": [], "concurrency": 4000, "keep_alive": False,
                                   "exit_code": 0, "requests_sent": sent, "complete": sent, "failed": 0,
                                   "status_counts": {"200": sent - refused, **({"503": refused} if refused else {})},
                                   "requests_per_second": answered, "latency_ms_2xx": latency, "rate": sent / 10})


@pytest.mark.parametrize(("model", "cell", "verdict"), [
    ("threads", overload_cell(200, p99=104, mean=102), "✓"),
    ("threads", overload_cell(198, p99=347, mean=119), "✗"),  # the tail of the first record: past 2 x 100.5 ms
    ("threads", overload_cell(258, p99=5454, mean=2783, sent=4000), "✓"),  # a queue, answering about its 269/s
    ("threads", overload_cell(173, p99=2634, mean=1001, sent=4000), "✗"),  # a queue, but far below its capacity
    ("event-loop", overload_cell(242, p99=302, mean=199, refused=1530, sent=4000), "✓"),  # the mean holds
    ("event-loop", overload_cell(242, p99=302, mean=230, refused=1530, sent=4000), "✗"),  # past 52/250 s
    ("event-loop", overload_cell(390, p99=150, mean=150, sent=4000), "✗"),  # no 503: the cap did not refuse
])
def test_the_check_table_judges_each_cell_against_the_prediction(model: str, cell: OverloadCell, verdict: str) -> None:
    result = recipe(RecipeInputs(cores=1, rate=200, cpu_ms=0.5, wait_ms=100, max_connections=200, reserved=3,
                                 longest_s=1))
    assert held(cell, predict(result, model, cell.rate, 10)) == verdict


@pytest.mark.parametrize(("version", "text", "expected"), [
    (1, "nr_periods 120\nnr_throttled 30\nthrottled_time 1500000000\nnr_bursts 0\n", (120, 30, 1.5)),
    (2, "usage_usec 99\nuser_usec 50\nsystem_usec 49\nnr_periods 80\nnr_throttled 8\nthrottled_usec 250000\n",
     (80, 8, 0.25)),
])
def test_cpu_stat_of_both_versions(tmp_path: Path, version: int, text: str, expected: tuple) -> None:
    (tmp_path / "cpu.stat").write_text(text)
    stat = cpu_quota.read_cpu_stat(tmp_path / "cpu.stat", version)
    assert (stat["periods"], stat["throttled_periods"], stat["throttled_s"]) == expected


def test_no_cpu_controller_is_refused_with_a_message(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    with pytest.raises(cpu_quota.QuotaUnavailableError, match="no cpu controller"):
        cpu_quota.controller(tmp_path)


def test_a_real_quota_group_is_seen_by_usable_cpus_and_removed_even_on_failure() -> None:
    try:
        parent, _ = cpu_quota.controller()
    except cpu_quota.QuotaUnavailableError as error:
        pytest.skip(str(error))
    name = f"bench-test-{uuid.uuid4().hex[:8]}"
    script = ("import importlib.util; spec = importlib.util.spec_from_file_location('s', {!r}); "
              "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); "
              "print(module.usable_cpus())").format(str(REPO_ROOT / "servers" / "event_loop_workers.py"))
    with pytest.raises(RuntimeError, match="the body failed"):
        with cpu_quota.quota_group(name, 50_000, 100_000) as group:
            inside = subprocess.run([*group.wrapper(), sys.executable, "-c", script], capture_output=True, text=True,
                                    timeout=30, check=True)
            assert inside.stdout.strip() == "1"  # half a CPU of quota, rounded up
            raise RuntimeError("the body failed")
    assert not (parent / name).exists()
