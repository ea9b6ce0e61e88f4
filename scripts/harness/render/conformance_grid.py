"""The conformance matrix as a coloured grid (docs/_generated/conformance-grid.md), from results/conformance.json.

Drawn by render/grid.py, as the survival grid is: one grid per group of cases (at most eighteen
narrow columns, so each fits the content column at 1280 px), one row per design alone, each cell
the verdict's mark on the verdict's colour and what the design answered as its tooltip. Behind
nginx the designs mostly answer alike (nginx reads the request first, so its answer is what a
client gets): there each grid has one row per distinct set of answers, labelled with the designs
that gave it, instead of forty near-identical rows. Under the grids, the legend of every mark and
every code a tooltip or the text matrix shows; rendering stops with an error when the record holds
a code the legend cannot explain (conformance_tables.code_legend). The one-line verdict per design
is the summary table (conformance-summary.md) the page shows above the grid.
"""

from __future__ import annotations

from pathlib import Path

from harness.model.records.conformance_record import Answer, ConformanceCase, ConformanceDesign, ConformanceRecord
from harness.render.conformance_tables import (
    CODES,
    COLOURS,
    HEADER,
    LEGEND,
    MARKS,
    NOT_MEASURED,
    RECORD_NAME,
    case_anchor,
    code_legend,
    grouped_cases,
    load_record,
)
from harness.render.grid import Column, grid_table, legend_mark, mark_cell, not_run_cell

# A set of answers shared by this many designs or more behind nginx is labelled by count, the others by name.
NAMED_UP_TO = 4


def numbered_cases(record: ConformanceRecord) -> dict[str, int]:
    """Each case's number: its place in the record, as the list of every case shows it."""
    return {case.id: number for number, case in enumerate(record.cases, 1)}


def _cell(case: ConformanceCase, number: int, result: Answer | None) -> str:
    if result is None:
        return not_run_cell()
    code_legend(result.code)  # a code without a legend entry stops the render
    said = f"{number}. {case.short}: {result.verdict}, {result.code}"
    return mark_cell(COLOURS[result.verdict], MARKS[result.verdict], said)


def _cells(cases: list[ConformanceCase], numbers: dict[str, int], design: ConformanceDesign) -> list[str]:
    return [_cell(case, numbers[case.id], design.cases.get(case.id)) for case in cases]


def group_grids(record: ConformanceRecord, behind_nginx: bool) -> str:
    """One grid per group: a row per design alone, or per distinct set of answers behind nginx."""
    numbers = numbered_cases(record)
    designs = record.placed_designs(behind_nginx)
    if not designs:
        return ""
    out = []
    for group, cases in grouped_cases(record):
        if not cases:  # a run of chosen cases (--case) leaves some groups empty
            continue
        columns = [Column(str(numbers[case.id]), f"#{case_anchor(case)}", case.short) for case in cases]
        if behind_nginx:
            rows = _merged_rows(cases, numbers, designs)
        else:
            rows = [(design.design, _cells(cases, numbers, design)) for design in designs]
        out.append(f"**{group.title}** (cases {numbers[cases[0].id]}–{numbers[cases[-1].id]})\n")
        out.append(grid_table(columns, rows))
    return "\n".join(out)


def _answered(design: ConformanceDesign, case: ConformanceCase) -> tuple[str, str]:
    """The verdict and code of a design's answer to a case; empty where it was not sent."""
    answer = design.cases.get(case.id)
    return (answer.verdict, answer.code) if answer is not None else ("", "")


def _merged_rows(cases: list[ConformanceCase], numbers: dict[str, int],
                 designs: list[ConformanceDesign]) -> list[tuple[str, list[str]]]:
    """A row per distinct set of answers (verdict and code per case), most designs first."""
    shared: dict[tuple[tuple[str, str], ...], list[ConformanceDesign]] = {}
    for design in designs:
        key = tuple(_answered(design, case) for case in cases)
        shared.setdefault(key, []).append(design)
    groups = sorted(shared.values(), key=len, reverse=True)
    rows = []
    for index, members in enumerate(groups):
        if len(groups) == 1:
            label = f"every design ({len(members)})"
        elif index == 0 and len(members) >= NAMED_UP_TO:
            label = f"the {len(members)} others"
        else:
            label = ", ".join(member.design for member in members)
        rows.append((label, _cells(cases, numbers, members[0])))
    # the largest set last, so 'the N others' follows the designs it excludes
    return rows[1:] + rows[:1] if len(rows) > 1 and rows[0][0].startswith("the ") else rows


def legend() -> str:
    """Every mark on its colour, every code a tooltip or the text matrix shows."""
    verdict_of = {symbol: verdict for verdict, symbol in MARKS.items()}
    marks = "\n".join(f"- {legend_mark(COLOURS[verdict_of[symbol]], symbol)} **{verdict_of[symbol]}**: {meaning}"
                      for symbol, meaning in LEGEND.items())
    codes = "\n".join(f"    - `{code}`: {meaning}" for code, meaning in CODES.items())
    return (f"{marks}\n\nThe column numbers are the cases' numbers in [the list of every case](#every-case); point "
            "at a cell for the case's name and what the design answered.\n\n"
            f'??? info "What the answers in a cell\'s tooltip and in the text matrix mean"\n\n{codes}\n')


def grid_page(record: ConformanceRecord | None) -> str:
    if record is None:
        return NOT_MEASURED
    alone, proxied = group_grids(record, False), group_grids(record, True)
    text = legend() + "\n" + alone
    if proxied:
        text += ("\n### Behind nginx\n\nEach design behind `servers/nginx_reverse_proxy.conf`: nginx reads the "
                 "request first, so designs that answer alike share a row.\n\n" + proxied)
    return text


def conformance_grid_files(results_dir: Path, generated_dir: Path) -> dict[Path, str]:
    """conformance-grid.md from results_dir/conformance.json (or a line saying it is missing)."""
    return {generated_dir / "conformance-grid.md": HEADER.format(source=f"results/{RECORD_NAME}")
            + grid_page(load_record(results_dir))}
