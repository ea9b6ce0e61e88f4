"""The conformance record drawn for a reader, from results/conformance.json: the page's answer and the full grid.

- conformance-compact.md, the answer the page opens with: one row per set of designs (alone or behind nginx)
  that gave the same verdict to every case, one column per class of case (the catalogue's groups,
  scripts/catalogue/conformance/cases.toml, so a new case or class falls into it with no change here), each
  cell the cases passed of those that apply, coloured by the worst verdict; then what each row gets wrong.
- conformance-grid.md, for the reference page (docs/reference/conformance-matrix.md): every case, drawn by
  render/grid.py as the survival grid is: one grid per group of cases (at most eighteen narrow columns, so
  each fits the content column at 1280 px), each cell the verdict's mark on the verdict's colour and what
  the design answered as its tooltip. Designs that answered a group's cases alike share a row, labelled
  with their names (forty near-identical rows read as one). Under the grids, the legend of every mark and
  code; rendering stops with an error when the record holds a code the legend cannot explain
  (conformance_tables.code_legend).
- conformance-matrix.csv, served beside the plots: every design x every case, verdict and answer, one
  line each, for a reader who wants the whole matrix in a spreadsheet.
"""

from __future__ import annotations

import csv
import io
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
    caption,
    case_anchor,
    code_legend,
    fails,
    grouped_cases,
    load_record,
    score,
    verdict_line,
)
from harness.render.grid import Column, grid_table, legend_mark, mark_cell, not_run_cell

# Every case, its bytes and what the RFC asks, is a reference page of its own (the grid's columns link there): with
# the grid on one page it passed the 5,000-word budget once the corpus grew (issue 35).
CASES_PAGE = "/reference/conformance-cases.md"
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


MAX_COLUMNS = 12  # cases in one grid table: with a row's label, about 700 px


def _cells(cases: list[ConformanceCase], numbers: dict[str, int], design: ConformanceDesign) -> list[str]:
    return [_cell(case, numbers[case.id], design.cases.get(case.id)) for case in cases]


def group_grids(record: ConformanceRecord, behind_nginx: bool) -> str:
    """One grid per group: a row per distinct set of answers, labelled with the designs that gave it."""
    numbers = numbered_cases(record)
    designs = record.placed_designs(behind_nginx)
    if not designs:
        return ""
    out = []
    for group, cases in grouped_cases(record):
        if not cases:  # a run of chosen cases (--case) leaves some groups empty
            continue
        # A group of many cases is drawn in parts, so a table fits the content column at 1280 px (tests/site/test_browser.py)
        for part in (cases[start:start + MAX_COLUMNS] for start in range(0, len(cases), MAX_COLUMNS)):
            columns = [Column(str(numbers[case.id]), f"{CASES_PAGE}#{case_anchor(case)}", case.short) for case in part]
            rows = _merged_rows(part, numbers, designs)  # forty near-identical rows read as one
            out.append(f"**{group.title}** (cases {numbers[part[0].id]}–{numbers[part[-1].id]})\n")
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
    return (f"{marks}\n\nThe column numbers are the cases' numbers in [the list of every case]({CASES_PAGE}); point "
            "at a cell for the case's name and what the design answered.\n\n"
            f'??? info "What the answers in a cell\'s tooltip and in the text matrix mean"\n\n{codes}\n')


def grid_page(record: ConformanceRecord | None) -> str:
    if record is None:
        return NOT_MEASURED
    alone, proxied = group_grids(record, False), group_grids(record, True)
    text = legend() + "\n### Alone\n\nDesigns that gave the same answer to every case of a group share its row.\n\n" + alone
    if proxied:
        text += ("\n### Behind nginx\n\nEach design behind "
                 f"`{record.settings.proxy or 'servers/nginx_reverse_proxy.conf'}` "
                 "(a new client's request follows every case: `next` in a cell when it did not get its own answer): "
                 "nginx reads the "
                 "request first, so designs that answer alike share a row.\n\n" + proxied)
    return text


def display_name(design: ConformanceDesign) -> str:
    return design.design + (" + nginx" if design.behind_nginx else "")


def answer_groups(record: ConformanceRecord) -> list[list[ConformanceDesign]]:
    """Designs (alone and behind nginx) that gave the same verdict to every case, best score first."""
    shared: dict[tuple[str, ...], list[ConformanceDesign]] = {}
    for design in record.designs:
        key = tuple(_answered(design, case)[0] for case in record.cases)
        shared.setdefault(key, []).append(design)
    return sorted(shared.values(), key=lambda members: (-score(members[0])[0], score(members[0])[1], -len(members)))


def group_label(index: int, members: list[ConformanceDesign]) -> str:
    """A row's name: its designs when few, else the first two and how many more, linked to the full list."""
    names = [display_name(member) for member in members]
    shown = ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]} and {len(names) - 2} more"
    return f"[{shown}](#answers-{index})"


def class_cell(group_title: str, cases: list[ConformanceCase], design: ConformanceDesign) -> str:
    """One class of cases for one design: passed of applicable, coloured by the worst verdict, what failed as tooltip."""
    verdicts = {case.short: _answered(design, case)[0] for case in cases}
    applicable = [short for short, verdict in verdicts.items() if verdict not in ("n/a", "")]
    if not applicable:
        return not_run_cell()
    failed = [short for short in applicable if verdicts[short] == "fail"]
    lenient = [short for short in applicable if verdicts[short] == "lenient"]
    colour = COLOURS["fail" if failed else "lenient" if lenient else "pass"]
    said = f"{group_title}: passes {len(applicable) - len(failed)} of {len(applicable)}"
    said += f"; fails {', '.join(failed)}" if failed else ""
    said += f"; lenient in {', '.join(lenient)}" if lenient else ""
    return mark_cell(colour, f"{len(applicable) - len(failed)}/{len(applicable)}", said)


def answer_box(record: ConformanceRecord, groups_of_designs: list[list[ConformanceDesign]]) -> str:
    """The page's answer in three lines: who passes everything, who lets a smuggled request through, nginx's effect."""
    best = groups_of_designs[0]
    passed, _, applicable = score(best[0])
    smuggling = [case for case in record.cases if case.group == "smuggling"]
    alone, proxied = record.placed_designs(False), record.placed_designs(True)
    leaky_alone = [design for design in alone if any(fails(design, case) for case in smuggling)]
    leaky_proxied = [design for design in proxied if any(fails(design, case) for case in smuggling)]
    everything = "every case" if passed == applicable else f"{passed} of {applicable} cases"
    text = (f"{' and '.join(f'`{display_name(design)}`' for design in best)} pass{'es' if len(best) == 1 else ''} "
            f"{everything} that applies. Alone, {len(leaky_alone)} of {len(alone)} designs fail at least one "
            "smuggling case")
    if proxied:
        text += (f"; behind nginx, {len(leaky_proxied) or 'none'} of {len(proxied)} do"
                 + (", but nginx's own slips (below) become theirs" if not leaky_proxied else ""))
    return f'!!! abstract "The answer"\n\n    {text}.\n'


def compact_page(record: ConformanceRecord | None) -> str:
    """The answer first: a row per set of designs that answer alike, a column per class of case (the catalogue's
    groups, so a new case or class falls in without a change here), then what each row gets wrong, in words."""
    if record is None:
        return NOT_MEASURED
    groups = [(group, cases) for group, cases in grouped_cases(record) if cases]
    groups_of_designs = answer_groups(record)
    head = "| Designs that answer alike | " + " | ".join(
        f'<abbr title="{group.title}">{group.id.capitalize()}</abbr>' for group, _ in groups) + " |"
    lines = [head, "|---|" + ":-:|" * len(groups)]
    for index, members in enumerate(groups_of_designs, 1):
        cells = [class_cell(group.title, cases, members[0]) for group, cases in groups]
        lines.append(f"| {group_label(index, members)} | " + " | ".join(cells) + " |")
    legend = (f"Each cell: the cases of that class a design passes, of those that apply; "
              f"{legend_mark(COLOURS['pass'], 'green')} all as the RFC asks, "
              f"{legend_mark(COLOURS['lenient'], 'amber')} some only as the RFC also allows, "
              f"{legend_mark(COLOURS['fail'], 'red')} at least one answer the RFC does not allow. "
              f"Point at a cell for the cases it fails.\n")
    cases = {case.id: case for case in record.cases}
    grid = '<div class="survival-grid" markdown>\n\n' + "\n".join(lines) + "\n\n</div>\n"  # the grids' compact style
    out = [answer_box(record, groups_of_designs), caption(record), grid, legend,
           "**What each row gets wrong:**\n"]
    for index, members in enumerate(groups_of_designs, 1):
        names = ", ".join(f"`{display_name(member)}`" for member in members)
        out.append(f'- <a id="answers-{index}"></a>{names}: {verdict_line(members[0], cases, limit=len(cases))}')
    return "\n".join(out) + "\n"


def matrix_csv(record: ConformanceRecord) -> str:
    """Every design x every case, one line each: the download behind the reference grid."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["design", "behind_nginx", "case_number", "case_id", "case", "class", "verdict", "answer"])
    titles = {group.id: group.title for group in record.groups}
    for design in record.designs:
        for number, case in enumerate(record.cases, 1):
            answer = design.cases.get(case.id)
            if answer is not None:
                writer.writerow([design.design, design.behind_nginx, number, case.id, case.short,
                                 titles.get(case.group, case.group), answer.verdict, answer.code])
    return buffer.getvalue()


def conformance_grid_files(results_dir: Path, generated_dir: Path, plots_dir: Path) -> dict[Path, str]:
    """conformance-grid.md (the full grid, for the reference page), conformance-compact.md (the page's answer) and
    the download conformance-matrix.csv, from results_dir/conformance.json (or a line saying it is missing)."""
    record = load_record(results_dir)
    header = HEADER.format(source=f"results/{RECORD_NAME}")
    files = {generated_dir / "conformance-grid.md": header + grid_page(record),
             generated_dir / "conformance-compact.md": header + compact_page(record)}
    if record is not None:
        files[plots_dir / "conformance-matrix.csv"] = matrix_csv(record)
    return files
