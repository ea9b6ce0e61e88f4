"""The timeline player (issue 23): the client's moments, the renderer's snippets, and the player in a browser.

The record side: http_load.py's timeline gives each request its worker and its moments in order, and
render/timeline_player.py turns a record into one snippet per design and the home page's pairs, or
nothing for a record made before the moments existed. The browser side plays, pauses, steps and
switches the pair on the built site (the session's strict build and server, shared with
tests/site/test_browser.py), by mouse and by keyboard; it asserts the state the player publishes on its
element (data-time, data-playing, data-pair), never a duration.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_records import fake_outcome, fake_record_json, fake_run
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records.scenario_record import ScenarioRecord
from harness.render.site import HEADER
from harness.render import timeline_player
from harness.render.timeline_player import PAIRS, timeline_player_files

# The browser's fixtures: the same server and Chromium as the site's other browser checks (the build served with a
# search index of no documents: the player uses no search, and Material's worker would index the site on each load).
from test_browser import browser, light_url  # noqa: F401 - pytest finds fixtures by name

from conftest import started

MOMENTS = ["start", "connected", "sent", "first_byte", "end", "closed"]
WAIT_MS = 20_000  # generous: a busy shared machine may draw slowly; the assertions are about state, not speed


def entry(index: int, worker: int, start: float, first_byte: float) -> dict[str, Any]:
    return {"index": index, "intended_start": start, "start": start, "connected": start + 0.001,
            "sent": start + 0.0011, "first_byte": first_byte, "end": first_byte + 0.0001,
            "closed": first_byte + 0.0002, "status": 200, "result": "ok", "worker": worker}


def record(designs: list[str], with_moments: bool = True) -> dict[str, Any]:
    """A made-up timeline record's JSON: two workers, two requests each, answered one call apart."""
    entries = [entry(0, 0, 0.0, 0.1), entry(1, 1, 0.0, 0.2), entry(2, 0, 0.1, 0.3), entry(3, 1, 0.2, 0.4)]
    if not with_moments:
        entries = [{key: value for key, value in item.items() if key in ("index", "start", "end", "result")}
                   for item in entries]
    return fake_record_json({"id": "timeline"}, {"delay": 0.1, "concurrency": [2], "requests": 4},
                            [fake_outcome(name, [fake_run(tool="http-client", concurrency=2, timeline=entries)],
                                          model="model")
                             for name in designs],
                            {"commit": "0123456789abcdef"}, started_utc="2026-11-25T20:00:00Z")


def typed(data: dict[str, Any]) -> ScenarioRecord:
    return ScenarioRecord.from_json(data, "test record")


def traced_run(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The traced run's JSON (runner.traced_run): its timeline; nothing else the player reads."""
    return {"timeline": entries, "server_trace": None, "clock_start_unix_s": None, "complete": None, "failed": None,
            "requests_per_second": None, "latency_ms": None, "duration_s": None, "error": None}


def player_data(content: str) -> dict[str, Any]:
    match = re.search(r'data-timeline="([^"]*)"', content)
    assert match, content[:200]
    return json.loads(html.unescape(match.group(1)))


def test_the_renderer_writes_a_snippet_per_design_and_the_pairs(tmp_path: Path) -> None:
    names = sorted({name for _, first, second in PAIRS for name in (first, second)})
    files = timeline_player_files(typed(record(names)), tmp_path, HEADER)
    assert set(files) == {tmp_path / "timeline-player" / f"{name}.md" for name in [*names, "pairs"]}
    one = player_data(files[tmp_path / "timeline-player" / "sequential-sockets.md"])
    panel = one["panels"][0]
    assert (panel["clients"], panel["call_ms"], panel["end_ms"], len(panel["requests"])) == (2, 100.0, 400.2, 4)
    assert panel["fields"] == ["worker", *MOMENTS, "ok"]
    assert panel["requests"][1] == [1, 0.0, 1.0, 1.1, 200.0, 200.1, 200.2, True]
    pairs = player_data(files[tmp_path / "timeline-player" / "pairs.md"])["pairs"]
    assert [[panel["design"] for panel in pair["panels"]] for pair in pairs] == [[first, second]
                                                                              for _, first, second in PAIRS]


def test_the_servers_traced_moments_travel_with_each_request(tmp_path: Path) -> None:
    traced = record(["thread-per-connection"])
    entries = traced["designs"][0]["runs"][0]["timeline"]
    entries[0]["server"] = {"accepted": 0.0012, "head_read": 0.0013, "first_written": 0.1001, "written": 0.1001,
                            "closed": 0.1002, "process": 1, "threads": [2], "processes": [1]}
    panel = player_data(timeline_player_files(typed(traced), tmp_path, HEADER)[
        tmp_path / "timeline-player" / "thread-per-connection.md"])["panels"][0]
    assert panel["fields"] == ["worker", *MOMENTS, "ok", "accepted", "head_read", "written", "server_closed"]
    assert panel["requests"][0][-4:] == [1.2, 1.3, 100.1, 100.2]
    assert panel["requests"][1][-4:] == [None, None, None, None]  # a request without a traced connection
    # a record with a traced run (runner.traced_run) plays that one: the measured run stays untraced
    measured = record(["thread-per-connection"])
    measured["designs"][0]["runs"][0]["traced"] = traced_run(entries)
    panel = player_data(timeline_player_files(typed(measured), tmp_path, HEADER)[
        tmp_path / "timeline-player" / "thread-per-connection.md"])["panels"][0]
    assert panel["requests"][0][-4:] == [1.2, 1.3, 100.1, 100.2]


def test_a_record_without_the_moments_gives_no_player(tmp_path: Path) -> None:
    assert timeline_player_files(typed(record(["sequential-sockets"], with_moments=False)), tmp_path, HEADER) == {}
    assert timeline_player_files(None, tmp_path, HEADER) == {}


def test_the_client_records_each_requests_moments_in_order(tmp_path: Path) -> None:
    with started(load_catalogue().design("thread-per-connection"), tmp_path, delay=0.05) as server:
        completed = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "http_load.py"),
                                    f"http://127.0.0.1:{server.port}/", "--requests", "6", "--concurrency", "3",
                                    "--timeline", str(tmp_path / "timeline.json")],
                                   check=False, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    entries = json.loads((tmp_path / "timeline.json").read_text())
    assert {item["worker"] for item in entries} == {0, 1, 2}
    for item in entries:
        moments = [item[name] for name in MOMENTS]
        assert moments == sorted(moments), item
        assert item["first_byte"] - item["sent"] >= 0.05 * 0.9, item  # the server's call lies between the two


# --- the player in a browser ---------------------------------------------------------------------------------


@pytest.fixture
def player_page(browser: object) -> Any:  # noqa: F811 - the fixture imported above
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield context.new_page()
    finally:
        context.close()


def state(player: Any, name: str) -> str:
    return player.get_attribute(f"data-{name}")


def time_of(player: Any) -> int:
    return int(state(player, "time"))


def test_the_home_page_player_plays_steps_and_switches_pairs_by_mouse_and_keyboard(
        player_page: Any, light_url: str) -> None:  # noqa: F811
    page = player_page
    page.goto(light_url)
    player = page.locator(".timeline-player[data-ready]").first
    player.wait_for(timeout=WAIT_MS)
    assert state(player, "pair") == "0" and player.locator(".tp-panel").count() == 2
    end = time_of(player)
    assert end > 0, "the player opens on the whole run"

    play = player.locator(".tp-play")
    play.click()  # from the end, Play starts the run again from zero
    page.wait_for_function("el => el.dataset.playing === 'true' && Number(el.dataset.time) > 0",
                           arg=player.element_handle(), timeout=WAIT_MS)
    play.click()
    assert state(player, "playing") == "false"
    paused = time_of(player)
    page.wait_for_timeout(150)
    assert time_of(player) == paused, "paused, the clock stands still"

    # Keyboard only from here: focus a control and press keys.
    player.locator(".tp-forward").focus()
    page.keyboard.press("Home")
    assert time_of(player) == 0
    page.keyboard.press("Enter")
    after_enter = time_of(player)
    assert after_enter > 0
    page.keyboard.press("Space")
    assert time_of(player) > after_enter
    page.keyboard.press("ArrowRight")
    after_arrow = time_of(player)
    page.keyboard.press("ArrowLeft")
    assert time_of(player) < after_arrow
    page.keyboard.press("End")
    assert time_of(player) == end
    live = player.locator(".tp-live")
    assert re.search(r"\d ms\. .*waiting, \d+ in the call, \d+ answered", live.text_content()), live.text_content()

    play.focus()
    page.keyboard.press("Space")
    page.wait_for_function("el => el.dataset.playing === 'true'", arg=player.element_handle(), timeout=WAIT_MS)
    page.keyboard.press("Enter")
    assert state(player, "playing") == "false"

    second_pair = player.locator(".tp-pairs button").nth(1)
    second_pair.focus()
    page.keyboard.press("Enter")
    assert state(player, "pair") == "1" and second_pair.get_attribute("aria-pressed") == "true"
    names = player.locator(".tp-name strong").all_text_contents()
    assert names == [PAIRS[1][1], PAIRS[1][2]]
    assert PAIRS[1][1] in live.text_content(), "the switch is announced"


def test_a_design_page_plays_its_own_run(player_page: Any, light_url: str) -> None:  # noqa: F811
    page = player_page
    page.goto(light_url + "designs/thread-per-connection/")
    player = page.locator(".timeline-player[data-ready]").first
    player.wait_for(timeout=WAIT_MS)
    assert player.locator(".tp-name strong").all_text_contents() == ["thread-per-connection"]
    assert player.locator(".tp-chart svg rect").count() > 0, "the bars are drawn"
    # the committed run traced the server: its moments are marks on the bars, and the legend names them
    assert player.locator(".tp-chart .tp-mark-accepted").count() > 0
    assert "the server's own system calls" in player.locator(".tp-legend").text_content()
    # predict, then see: the player waits, inert, until the reader has guessed; the guess is then checked
    assert player.get_attribute("inert") is not None
    guess = page.locator(".timeline-guess[data-ready]").first
    right = int(guess.get_attribute("data-answer"))
    guess.locator(".tg-choice").nth(2).click()  # one request at a time: wrong for a thread per connection
    assert right != 2 and "the record says choice" in guess.locator(".tg-verdict").text_content()
    assert guess.locator("details").get_attribute("open") is not None
    assert player.get_attribute("inert") is None
    player.locator(".tp-back").click()
    assert time_of(player) < int(player.locator(".tp-scrub").get_attribute("max"))


@pytest.mark.parametrize(("end_ms", "answer"), [(322.0, 0), (416.0, 1), (514.1, 1), (3033.8, 2)])
def test_the_guess_before_a_timeline_is_checked_against_the_record(end_ms: float, answer: int) -> None:
    """Predict, then see (issue 35): the right choice is the one the measured end falls in, from the load's bounds
    (30 requests from 10 clients with a 100 ms call: 0.3 s when every call overlaps, 3 s one at a time)."""
    block = timeline_player.guess_block({"clients": 10, "call_ms": 100.0, "end_ms": end_ms}, 30)
    assert f'data-answer="{answer}"' in block
    assert "<li>about 0.3 s: every client" in block and "<li>about 3 s: one request at a time" in block
    assert f"Choice {answer + 1}: the last answer arrived at {end_ms / 1000:.2f} s" in block
    assert block.index("Guess first") < block.index("<details")  # the question shows; its answer is folded


def test_every_design_page_with_a_player_asks_first() -> None:
    """The committed player snippets: each design's question comes before its player."""
    for path in sorted((REPO_ROOT / "docs" / "_generated" / "timeline-player").glob("*.md")):
        if path.name == "pairs.md":
            continue
        text = path.read_text(encoding="utf-8")
        assert text.index('class="timeline-guess"') < text.index('class="timeline-player"'), path.name
