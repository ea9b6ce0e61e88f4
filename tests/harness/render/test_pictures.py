"""Issue 23's pictures that the renderer makes: each design page's question, the survival grid's legend.

The questions (render/predict.py) quote a cell of a committed record, so the test recomputes each
answer from the record and finds it in the page's file, and checks that every page that has one
includes it before its results. The grid (render/survival_grid.py) must explain every status code
the committed hostile record holds, and give every design a verdict; the conformance grid
(render/conformance_grid.py) must draw every answer of its record and explain every code in it.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records import load_scenario_records
from harness.model.records.conformance_record import Answer
from harness.render import conformance_grid, conformance_tables
from harness.render.cells import cells_by_level, format_rate, summarise_cell
from harness.render.predict import QUESTIONS, predict_files
from harness.render.survival import load_record
from harness.render.survival_grid import CODES, grid_page

DOCS = REPO_ROOT / "docs"
# Each status token a cell can show, as the legend's pattern it belongs to (survival_grid.CODES).
CODE_PATTERNS = {
    r"\d{3}": "200, 400, 405, 408, 413, 414, 431, 501",
    r"open": "open", r"closed": "closed", r"reset": "reset", r"\d+×200": "n×200", r"0\.9": "0.9",
    r"(\d{3}|0\.9)(→(\d{3}|0\.9))+": "a→b", r"cpu \d+%": "cpu n%", r"n/a": None,
}


def test_every_question_quotes_its_records_median_and_sits_before_the_results() -> None:
    records = load_scenario_records()
    files = predict_files(records, Path("/generated"))
    assert len(files) >= 20, "most design pages should ask a question"
    designs = load_catalogue().designs
    for path, text in files.items():
        name = path.stem
        scenario = re.search(r"from results/([\w.-]+)\.json", text).group(1)
        clients = dict(QUESTIONS)[scenario]
        design = records[scenario].design(name)
        assert design is not None, name
        median = summarise_cell(cells_by_level(design.runs)[clients])["rate"]["median"]
        assert f"**Measured: {format_rate(median)} requests a second**" in text, name
        assert text.count("??? question") == 1 and "How many requests a second?" in text, name
        page = (DOCS / designs[name].page).read_text(encoding="utf-8")
        include, results = f'--8<-- "docs/_generated/predict/{name}.md"', f'--8<-- "docs/_generated/designs/{name}.md"'
        assert include in page, f"{designs[name].page} does not ask its question"
        assert page.index(include) < page.index(results), f"{designs[name].page}: the question comes after the results"


def test_the_survival_legend_explains_every_status_code_in_the_record() -> None:
    record = load_record(REPO_ROOT / "results")
    assert record is not None
    tokens = {part for design in record.designs for result in design.cases for status in result.statuses
              for part in ([status] if status == "n/a" else status.split("/"))}
    unexplained = [token for token in tokens
                   if not any(re.fullmatch(pattern, token) and (code is None or code in CODES)
                              for pattern, code in CODE_PATTERNS.items())]
    assert unexplained == []


def test_the_survival_grid_has_a_cell_per_case_and_a_verdict_per_design() -> None:
    record = load_record(REPO_ROOT / "results")
    page = grid_page(record)
    rows = [line for line in page.splitlines() if line.startswith("| ") and 'class="sv ' in line]
    assert record is not None and len(rows) == len(record.designs)
    assert all(row.count('class="sv ') == len(record.cases) for row in rows)
    verdicts = page.split("**One line per design:**")[1]
    assert verdicts.count("robust in ") == len(record.designs)


def test_the_conformance_grid_draws_every_answer_of_the_record_and_matches_the_committed_file() -> None:
    record = conformance_tables.load_record(REPO_ROOT / "results")
    assert record is not None
    drawn = conformance_grid.conformance_grid_files(REPO_ROOT / "results", DOCS / "_generated", DOCS / "plots")
    for path, content in drawn.items():
        assert path.read_text(encoding="utf-8") == content, f"stale: {path}; run `python scripts/bench.py render`"
    page = drawn[DOCS / "_generated" / "conformance-grid.md"]
    alone_part, nginx_part = page.split("### Behind nginx")
    grids = alone_part.split('<div class="survival-grid"')[1:]
    # a grid per group, in parts of at most MAX_COLUMNS cases (so each fits the content column)
    parts = sum(-(-sum(1 for case in record.cases if case.group == group.id) // conformance_grid.MAX_COLUMNS)
                for group in record.groups)
    assert len(grids) == parts
    names = {design.design for design in record.placed_designs(behind_nginx=False)}
    for grid in grids:  # every design alone in one row of each group's grid: named, or counted as 'the N others'
        labels = [line.split(" | ")[0][2:] for line in grid.splitlines() if line.startswith("| ") and 'class="sv ' in line]
        named = [name for label in labels for name in label.split(", ") if name in names]
        counted = [int(label.split()[1]) for label in labels if label.startswith("the ") and label.endswith(" others")]
        assert len(named) == len(set(named)) and len(named) + sum(counted) == len(names), labels
    first = record.cases[0]  # a cell says the case, the verdict and the code the record holds
    answer = record.placed_designs(behind_nginx=False)[0].cases[first.id]
    assert f'title="1. {first.short}: {answer.verdict}, {answer.code}"' in alone_part
    assert nginx_part.count('<div class="survival-grid"') == parts


def test_the_compact_conformance_grid_has_a_column_per_class_and_every_design_in_one_row() -> None:
    """The page's answer: a row per set of designs that answer alike, a column per class of case from the catalogue."""
    record = conformance_tables.load_record(REPO_ROOT / "results")
    assert record is not None
    compact = conformance_grid.compact_page(record)
    rows = [line for line in compact.splitlines() if line.startswith("| [")]
    assert all(row.count('class="sv ') == len(record.groups) for row in rows)
    listed = [line for line in compact.splitlines() if line.startswith('- <a id="answers-')]
    assert len(listed) == len(rows) < len(record.designs) / 3  # alike designs share a row
    names = " ".join(listed)
    for design in record.designs:
        assert f"`{conformance_grid.display_name(design)}`" in names, design.name
    assert "hardened" in compact.split("The answer")[1].splitlines()[2]  # the best row is named in the answer


def test_every_code_in_the_conformance_record_has_a_legend_entry() -> None:
    record = conformance_tables.load_record(REPO_ROOT / "results")
    assert record is not None
    page = conformance_grid.grid_page(record)
    codes = {result.code for design in record.designs for result in design.cases.values()}
    assert {"200", "200+200", "200+400", "GET-only", "no answer"} <= codes  # the record's variety, not a trivial set
    for code in codes:
        for entry in conformance_tables.code_legend(code):
            assert f"- `{entry}`: " in page, (code, entry)


def test_a_conformance_code_without_a_legend_entry_stops_the_render() -> None:
    record = conformance_tables.load_record(REPO_ROOT / "results")
    assert record is not None
    design = record.designs[0]
    teapot = {**design.cases, record.cases[0].id: Answer(verdict="fail", code="teapot")}
    odd = dataclasses.replace(record, designs=[dataclasses.replace(design, cases=teapot)])
    with pytest.raises(ValueError, match="'teapot' has no entry in the legend"):
        conformance_grid.grid_page(odd)
