"""Named figures: the single numbers the prose quotes, rendered from the records like the tables.

Exact values are asserted against the frozen fixture tests/fixtures/render/sweep-io.json
(three designs, levels 1, 100 and 1,000, three repetitions each), never against results/.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from harness.model.paths import REPO_ROOT
from harness.model.records.scenario_record import ScenarioRecord
from harness.render import site
from harness.render.figures import SITE_FIGURES, Figure, FigureError, figures_page, in_words

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "render" / "sweep-io.json"


def sweep() -> dict[str, Any]:
    """The fixture's JSON, to change before it is read (its `fixture` key, a note on where it came from, left out)."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    data.pop("fixture", None)
    return data


def records(record: dict[str, Any] | None = None) -> dict[str, ScenarioRecord]:
    """The records the figures read, by id: the fixture (or `record`), read through its class."""
    typed = ScenarioRecord.from_json(record or sweep(), "test record")
    return {typed.id: typed}


def test_a_figure_is_the_median_of_its_cell_with_its_unit() -> None:
    # epoll-loop at c=1,000: 7,885.6, 7,112.1, 7,596.9 req/s; 1.0, 0.88, 0.97 CPU s; 15.2, 15.3, 15.1 MiB.
    # A flag describes the number it sits on (issue 31, finding 6): the rate's runs disagree by 10.2% of its
    # median, the CPU seconds' by 12%, the memory's by 1%, so the memory figure carries no flag.
    flagged = {"allow_flagged": True}
    assert Figure("a", "sweep-io", "epoll-loop", 1000, "rate", **flagged).value(records()) == "7,597 req/s ⚠ spread 10%"
    assert Figure("a", "sweep-io", "epoll-loop", 1000, "cpu", **flagged).value(records()) == (
        "0.97 CPU-seconds ⚠ spread 12%")
    assert Figure("a", "sweep-io", "epoll-loop", 1000, "rss").value(records()) == "15.2 MiB"
    assert Figure("a", "sweep-io", "epoll-loop", 100, "rate").value(records()) == "947.3 req/s"
    # prefork at c=100: p50 1,012.5, 1,009.7, 1,010.1 ms; under a second one decimal is kept.
    assert Figure("a", "sweep-io", "prefork", 100, "p50").value(records()) == "1,010 ms"
    assert Figure("a", "sweep-io", "prefork", 1, "p50").value(records()) == "100.5 ms"
    assert Figure("a", "sweep-io", "prefork", 1, "processes").value(records()) == "9"


def test_a_figure_changes_when_its_record_changes() -> None:
    figure = Figure("epoll-rate", "sweep-io", "epoll-loop", 1000, "rate", allow_flagged=True)
    before = figures_page(records(), [figure])
    changed = sweep()
    for run in changed["designs"][2]["runs"]:
        if run["concurrency"] == 1000:
            run["requests_per_second"] *= 2
    after = figures_page(records(changed), [figure])
    assert "7,597 req/s" in before and "15,194 req/s" in after


def test_the_page_has_one_snippet_section_per_figure_in_order() -> None:
    figures = [Figure("first", "sweep-io", "epoll-loop", 100, "rate"),
               Figure("second", "sweep-io", "thread-per-connection", 1000, "rss")]
    page = figures_page(records(), figures)
    assert re.findall(r"--8<-- \[(start|end):([a-z-]+)\]", page) == [
        ("start", "first"), ("end", "first"), ("start", "second"), ("end", "second")]
    day = records()["sweep-io"].started_utc[:10]
    source = f' <small class="figure-source">[sweep-io, {day}]</small>\n'
    assert f"\n947.3 req/s{source}" in page and f"\n22.4 MiB{source}" in page  # each names its record and day


@pytest.mark.parametrize(("figure", "message"), [
    (Figure("gone", "sweep-hello", "epoll-loop", 1, "rate"), "no record results/sweep-hello.json"),
    (Figure("nobody", "sweep-io", "uvicorn", 1, "rate"), "has no design 'uvicorn'"),
    (Figure("level", "sweep-io", "epoll-loop", 50, "rate"), "no successful run at level 50"),
    (Figure("metric", "sweep-io", "epoll-loop", 1, "speed"), "unknown metric 'speed'"),
], ids=["record", "design", "level", "metric"])
def test_a_missing_record_design_level_or_metric_is_an_error_that_names_the_figure(figure: Figure,
                                                                                    message: str) -> None:
    with pytest.raises(FigureError, match=re.escape(message)) as raised:
        figures_page(records(), [figure])
    assert repr(figure.name) in str(raised.value)


def test_a_run_that_did_not_record_the_metric_is_an_error_not_a_blank() -> None:
    changed = sweep()
    del changed["designs"][0]["runs"][0]["server_resources"]
    with pytest.raises(FigureError, match="do not record server CPU seconds"):
        Figure("cpu", "sweep-io", "thread-per-connection", 1, "cpu").value(records(changed))


def test_two_figures_with_one_name_are_refused() -> None:
    twice = [Figure("same", "sweep-io", "epoll-loop", 1, "rate"), Figure("same", "sweep-io", "prefork", 1, "rate")]
    with pytest.raises(FigureError, match="used twice: same"):
        figures_page(records(), twice)


def test_render_check_sees_a_stale_figure(tmp_path: Path) -> None:
    results, generated = tmp_path / "results", tmp_path / "generated"
    results.mkdir()
    (results / "sweep-io.json").write_text(json.dumps(sweep()), encoding="utf-8")
    figures = [Figure("epoll-rate", "sweep-io", "epoll-loop", 1000, "rate", allow_flagged=True)]
    for path, content in site.expected_files(results, generated, figures=figures).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    assert "7,597 req/s" in (generated / "figures.md").read_text()

    changed = sweep()
    changed["designs"][2]["runs"][5]["requests_per_second"] = 9000.0  # c=1,000: 7,112 -> 9,000, the median to 7,886
    (results / "sweep-io.json").write_text(json.dumps(changed), encoding="utf-8")
    expected = site.expected_files(results, generated, figures=figures)
    stale = [path for path, content in expected.items() if path.read_text(encoding="utf-8") != content]
    assert generated / "figures.md" in stale
    assert "7,886 req/s" in expected[generated / "figures.md"]


def with_ceiling(rate: float) -> dict[str, ScenarioRecord]:
    """The fixture with a load-tool ceiling measured at c=100, three runs at `rate` req/s."""
    record = sweep()
    record["ceiling"] = {**record["designs"][0], "name": "tool-ceiling", "runs": [
        {**run, "requests_per_second": rate} for run in record["designs"][0]["runs"] if run["concurrency"] == 100]}
    return records(record)


def test_a_flagged_cell_renders_with_the_flag_its_table_cell_shows() -> None:
    # thread-per-connection at c=100: 948.2 req/s against a ceiling of 1,000 is 95% of it.
    rate = Figure("rate", "sweep-io", "thread-per-connection", 100, "rate", allow_flagged=True)
    p50 = Figure("p50", "sweep-io", "thread-per-connection", 100, "p50", allow_flagged=True)
    page = figures_page(with_ceiling(1000.0), [rate, p50])
    assert "\n948.2 req/s (⚠ at the load tool's limit, 95% of the most it reached) <small" in page
    # The latency of that cell is not a rate: it does not inherit the rate's flag (issue 31, finding 6).
    assert re.search(r"\n[0-9.,]+ ms <small", page)
    # The flag is the table's own, said in words (figures.in_words), not a flag of its own making.
    record = with_ceiling(1000.0)["sweep-io"]
    row = next(row for row in site.design_rows(record, record.designs[0], with_name=False) if "| 100 |" in row)
    assert "**948.2** ⚠ tool-bound (95% of ceiling)" in row
    assert in_words("948.2 req/s ⚠ tool-bound (95% of ceiling)") in page
    # The same cell under a ceiling it is far from has no flag, and needs no allowance.
    assert Figure("rate", "sweep-io", "thread-per-connection", 100, "rate").value(with_ceiling(5000.0)) == "948.2 req/s"
    # The ceiling's own cell is never tool-bound against itself.
    assert Figure("tool", "sweep-io", "tool-ceiling", 100, "rate").value(with_ceiling(1000.0)) == "1,000 req/s"


@pytest.mark.parametrize(("figure", "flag"), [
    (Figure("spread", "sweep-io", "epoll-loop", 1000, "rate"), "⚠ spread 10%"),
    (Figure("spread-cpu", "sweep-io", "epoll-loop", 1000, "cpu"), "⚠ spread 12%"),
    (Figure("tool", "sweep-io", "thread-per-connection", 100, "rate"), "⚠ tool-bound (95% of ceiling)"),
], ids=["spread", "spread-other-metric", "tool-bound"])
def test_a_flagged_cell_without_the_allowance_is_refused_naming_the_figure_and_the_flag(figure: Figure,
                                                                                      flag: str) -> None:
    with pytest.raises(FigureError, match=re.escape(flag)) as raised:
        figures_page(with_ceiling(1000.0), [figure])
    assert repr(figure.name) in str(raised.value) and "allow_flagged" in str(raised.value)


def test_every_site_figure_from_a_flagged_cell_shows_its_flag_in_the_generated_page() -> None:
    """What the pages include: a line with ⚠ for every allowed figure whose cell is flagged today."""
    page = (REPO_ROOT / "docs" / "_generated" / "figures.md").read_text(encoding="utf-8")
    values = dict(re.findall(r"\[start:([a-z0-9-]+)\] -->\n(.*)\n", page))
    for figure in SITE_FIGURES:
        if not figure.allow_flagged:  # the repeat flag ('⚠ second run') is carried by any rate figure
            unrepeated = re.sub(r" \(⚠ a second run measured [^)]*\)", "", values[figure.name])
            assert "⚠" not in unrepeated, f"{figure.name} is flagged without allow_flagged"


def test_every_site_figure_is_quoted_by_a_page_and_every_quote_names_a_figure() -> None:
    pages = "".join(path.read_text(encoding="utf-8") for path in (REPO_ROOT / "docs").rglob("*.md")
                    if "_generated" not in path.parts)
    quoted = set(re.findall(r'--8<-- "docs/_generated/figures\.md:([a-z0-9-]+)"', pages))
    defined = {figure.name for figure in SITE_FIGURES}
    assert quoted - defined == set(), "pages quote figures that scripts/harness/render/figures.py does not define"
    assert defined - quoted == set(), "figures no page quotes: remove them or quote them"


def test_render_exits_2_and_names_the_figure_when_a_record_cannot_answer_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import bench

    def unanswerable(*args: object, **kwargs: object) -> list[str]:
        figures_page({}, [Figure("gone", "sweep-io", "epoll-loop", 1, "rate")])
        return []

    monkeypatch.setattr(site, "stale_files", unanswerable)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert bench.main(["render", "--check"]) == 2
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert "figure 'gone': no record results/sweep-io.json" in capsys.readouterr().err


def test_every_quoted_figure_stands_alone_on_its_line_and_no_punctuation_follows_it() -> None:
    """pymdownx.snippets replaces only a line holding nothing but the marker; the next line joins with a space."""
    problems = []
    for path in sorted((REPO_ROOT / "docs").rglob("*.md")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if "_generated/figures.md:" not in line:
                continue
            where = f"{path.relative_to(REPO_ROOT)}:{number + 1}"
            if re.fullmatch(r'\s*--8<-- "docs/_generated/figures\.md:[a-z0-9-]+"', line) is None:
                problems.append(f"{where}: the include must be alone on its line")
            following = lines[number + 1].lstrip() if number + 1 < len(lines) else ""
            if following[:1] in {".", ",", ";", ":", ")", "?", "!"}:
                problems.append(f"{where}: punctuation after a figure would print after a space")
    assert problems == []


def second_run(factor: float, **environment: Any) -> dict[str, ScenarioRecord]:
    """results/rerun/: the fixture run again right after it, prefork's rate at c=1 multiplied by `factor`."""
    record = sweep()
    record["started_utc"], record["finished_utc"] = "2026-11-22T13:10:00Z", "2026-11-22T13:20:00Z"
    record["environment"].update(environment)
    for design in record["designs"]:
        for run in design["runs"]:
            if design["name"] == "prefork" and run["concurrency"] == 1:
                run["requests_per_second"] *= factor
    return records(record)


def test_a_figure_whose_second_run_fell_outside_its_interval_carries_the_repeat_flag_or_is_refused() -> None:
    """Issue 20, finding 10: the echo figures disagreed with their second run by 28-31% and the prose did not say."""
    figure = Figure("prefork-c1", "sweep-io", "prefork", 1, "rate")
    assert figure.value(records()) == figure.value(records(), second_run(1.0))  # B agrees: no flag
    allowed = figure  # the repeat flag is carried, never refused: the number is still this run's median
    first = figure.value(records())
    assert allowed.value(records(), second_run(0.7)).startswith(first + " ⚠ second run ")
    assert allowed.value(records(), second_run(0.7)).endswith(" req/s (−30%)")
    assert "⚠ second run" not in Figure("p50", "sweep-io", "prefork", 1, "p50").value(
        records(), second_run(1.3))  # a rate's repeat flag is not a latency's (issue 31, finding 6)
    # Not a repeat pair (another commit): the repeatability page says why; the figure claims nothing from it.
    assert allowed.value(records(), second_run(0.7, commit="0" * 40)) == first


def test_the_generated_figures_carry_the_repeat_flag_of_the_committed_second_runs() -> None:
    from harness.model.records import load_scenario_records, rerun_dir

    first, second = load_scenario_records(), load_scenario_records(rerun_dir())
    page = (REPO_ROOT / "docs" / "_generated" / "figures.md").read_text(encoding="utf-8")
    values = dict(re.findall(r"\[start:([a-z0-9-]+)\] -->\n(.*)\n", page))
    for figure in SITE_FIGURES:
        flag = figure.repeat_flag(first[figure.scenario], second.get(figure.scenario))
        if figure.metric == "rate":  # said in words in the page (in_words), the table's flag behind them
            assert (not flag or in_words("x" + flag).removeprefix("x (⚠ ").removesuffix(")")
                    in values[figure.name]), figure.name
        else:  # a memory, CPU, latency or failure figure never carries its row's rate flag (issue 31, finding 6)
            assert "second run" not in values[figure.name] and "load tool" not in values[figure.name], figure.name


def test_a_flag_describes_the_figure_it_sits_on_not_its_row() -> None:
    """Issue 31, finding 6: '23.1 MiB ⚠ second run 1,957 req/s', '0.50 CPU-seconds ⚠ tool-bound'. A cell whose rate
    is tool-bound and disagrees with its second run: its rate carries both flags, its memory, CPU, p50 and failures
    neither."""
    tool_bound = with_ceiling(1000.0)
    rate = Figure("rate", "sweep-io", "thread-per-connection", 100, "rate", allow_flagged=True)
    assert "⚠ tool-bound" in rate.value(tool_bound)
    for metric in ("rss", "cpu", "p50", "failed", "processes"):
        shown = Figure(metric, "sweep-io", "thread-per-connection", 100, metric, allow_flagged=True).value(tool_bound)
        assert "tool-bound" not in shown, (metric, shown)
    for metric in ("rss", "cpu", "p50", "failed"):
        shown = Figure(metric, "sweep-io", "prefork", 1, metric, allow_flagged=True).value(records(), second_run(0.7))
        assert "second run" not in shown, (metric, shown)
    assert "second run" in Figure("rate", "sweep-io", "prefork", 1, "rate").value(records(), second_run(0.7))


def test_every_flag_a_sentence_quotes_is_said_in_words() -> None:
    """Issue 35: '3,621 req/s ⚠ spread 70% ⚠ second run 4,343 req/s (+20%)' reads, in a sentence, as words; a flag
    the wording does not know stops the render instead of reaching a page as jargon."""
    assert in_words("3,621 req/s ⚠ spread 70% ⚠ second run 4,343 req/s (+20%)") == (
        "3,621 req/s (⚠ varied by 70% across runs; a second run measured 4,343 req/s, +20%, outside this run's range)")
    assert in_words("0.57 CPU-seconds ⚠ 0.06 s runs") == "0.57 CPU-seconds (⚠ from runs of only 0.06 s)"
    assert in_words("20,167 req/s ⚠ tool-bound (tool CPU 97%)") == (
        "20,167 req/s (⚠ at the load tool's limit, its CPU 97% busy)")
    assert in_words("8,087 req/s") == "8,087 req/s"
    with pytest.raises(FigureError, match="no words"):
        in_words("8,087 req/s ⚠ something new")
    page = (REPO_ROOT / "docs" / "_generated" / "figures.md").read_text(encoding="utf-8")
    assert " ⚠ spread" not in page and " ⚠ second run" not in page and " ⚠ tool-bound" not in page


def test_no_sentence_quotes_more_than_two_figures() -> None:
    """Issue 35: a sentence with three or four numbers, each with its flags, is not read; two per sentence at most
    (tables, where figures sit in cells, aside)."""
    crowded = {}
    for path in sorted((REPO_ROOT / "docs").rglob("*.md")):
        if "_generated" in path.parts:
            continue
        text = re.sub(r"<table>.*?</table>", "", path.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r'--8<-- "docs/_generated/figures\.md:[^"]+"', "FIGURE", text)
        for paragraph in re.split(r"\n\s*\n", text):
            for sentence in re.split(r"(?<=[.!?:;])\s+", paragraph.replace("\n", " ")):
                if sentence.count("FIGURE") > 2:
                    crowded.setdefault(str(path.relative_to(REPO_ROOT)), []).append(sentence[:100])
    assert crowded == {}

