"""The hostile suite drawn as coloured grids (render/grid.py, as the conformance grid is), from results/hostile.json.

- survive-compact.md, the answer docs/survive.md opens with: three lines from the record (who survives every
  case, how many can be stopped, by which case), then one row per set of designs (alone or behind nginx) with
  the same verdict in every case, one narrow column per case, then what each row suffers, in words.
- survive-grid.md, for the reference page (docs/reference/survive-matrix.md): one row per design; each cell
  the verdict's mark on the verdict's colour, what the design answered as its tooltip; a legend for every
  mark, colour and status code, then one line per design (its verdict, the cases it did not survive or
  answered weakly). The text matrix (render/survival.py, survive-matrix.md) is on that page too.
- survive-proxy-grid.md: the designs measured both alone and behind nginx, a row for each way, then
  survival.py's line per pair (which cases nginx turns robust, and which it turns from robust to not).
"""

from __future__ import annotations

from pathlib import Path

from harness.model.records.hostile_record import CaseResult, DesignResult, HostileCase, HostileRecord
from harness.render.grid import Column, grid_table, legend_mark, mark_cell, not_run_cell
from harness.render.survival import CASE_PAGE, LEGEND, MARKS, compact_status, design_label, load_record, proxy_page, totals
from harness.render.generated_header import HEADER

# Every code a status can hold (suites/hostile/cases.py, status_label and the cases that set their
# own): what it means, in the order a reader meets them.
CODES = {
    "200, 400, 405, 408, 413, 414, 431, 501": "the HTTP status of the answer the connection got",
    "a/b/c": "the case's connections got different answers: each distinct one once, in the order met",
    "open": "no answer, and the connection still open at the suite's bound",
    "closed": "the server closed the connection without an answer",
    "reset": "the connection ended with a reset (RST) instead of a close",
    "n×200": "of the pipelined requests, n were answered with 200 (1×200: the first only, then the close)",
    "0.9": "an HTTP/0.9 answer: the page without a status line",
    "a→b": "two answers on one connection: first a (a 100 Continue, or the answer to what was parsed), then b",
    "cpu n%": "case 15 (EMFILE): the share of a CPU the server used while connections waited past its "
              "open-files limit; near 100% is a busy loop",
}
VERDICT_WORDS = {"robust": "robust", "weak": "weak in", "stalled": "stalled in", "died": "died in"}


def _cell(case: HostileCase, result: CaseResult | None) -> str:
    """One grid cell: the verdict's mark on its colour, the answers as tooltip and as text for a screen reader."""
    if result is None:
        return not_run_cell()
    verdict = result.verdict
    answers = compact_status(result.statuses)
    said = f"{case.number}. {case.column}: {verdict}" + (f", {answers}" if answers else "")
    return mark_cell(f"sv-{verdict.replace('/', '')}", MARKS[verdict], said)


def grid(record: HostileRecord, designs: list[DesignResult] | None = None, case_page: str = "") -> str:
    """Designs (every one, or those given) x cases, a coloured mark per cell, the case numbers linking to their sections
    (on `case_page` when the grid is on another page)."""
    cases = record.cases
    columns = [Column(str(case.number), f"{case_page}#case-{case.id}", case.column) for case in cases]
    rows = []
    for design in record.designs if designs is None else designs:
        rows.append((design_label(design), [_cell(case, design.result(case.id)) for case in cases]))
    return grid_table(columns, rows)


def legend(record: HostileRecord) -> str:
    """Every mark and its colour, every case's number, every status code."""
    marks = "\n".join(f'- {legend_mark("sv-" + verdict.replace("/", ""), MARKS[verdict])} **{verdict}**: {text}'
                      for verdict, text in LEGEND.items())
    numbers = ", ".join(f"{case.number} {case.column}" for case in record.cases)
    codes = "\n".join(f"- `{code}`: {meaning}" for code, meaning in CODES.items())
    return (f"{marks}\n\n**Cases:** {numbers}. Point at a cell for what the design answered.\n\n"
            f'??? info "What the answers in a cell\'s tooltip, the text matrix and the case tables mean"\n\n'
            + "".join(f"    {line}\n" for line in codes.splitlines()) + "\n")


def verdict_line(record: HostileRecord, design: DesignResult) -> str:
    """'robust in 12 of 17; stalled in 10 slowloris, 11 idle; weak in 3 long line'."""
    counts = totals(design)
    applicable = sum(count for verdict, count in counts.items() if verdict != "n/a")
    short = {case.id: f"{case.number} {case.column}" for case in record.cases}
    parts = [f"robust in {counts['robust']} of {applicable}"]
    for verdict in ("died", "stalled", "weak"):
        named = [short.get(result.case, result.case) for result in design.cases if result.verdict == verdict]
        if named:
            parts.append(f"{VERDICT_WORDS[verdict]} {', '.join(named)}")
    if design.problems:
        parts.append("; ".join(design.problems))
    return "; ".join(parts).replace("|", "/")


def verdicts(record: HostileRecord) -> str:
    lines = ["| Design | Verdict |", "|---|---|"]
    lines += [f"| {design_label(design)} | {verdict_line(record, design)} |" for design in record.designs]
    return "\n".join(lines) + "\n"


def grid_page(record: HostileRecord | None) -> str:
    if record is None:
        return "*Not measured yet: `results/hostile.json` does not exist.*\n"
    return grid(record, case_page=CASE_PAGE) + "\n" + legend(record) + "\n**One line per design:**\n\n" + verdicts(record)


def proxy_grid_page(record: HostileRecord | None) -> str:
    """Each design measured both ways: its row alone, then behind nginx; then survival.py's line per pair."""
    if record is None:
        return "*Not measured yet: `results/hostile.json` does not exist.*\n"
    alone = {design.name: design for design in record.designs if not design.behind_nginx}
    rows = [row for design in record.designs if design.behind_nginx and design.design in alone
            for row in (alone[design.design], design)]
    if not rows:
        return proxy_page(record)  # its own line: no design was measured both ways
    summary = [line for line in proxy_page(record).splitlines() if line.startswith("- `")]
    return grid(record, rows) + "\n" + "\n".join(summary) + "\n"


def alike(record: HostileRecord) -> list[list[DesignResult]]:
    """Designs (alone and behind nginx) with the same verdict in every case, most robust first."""
    shared: dict[tuple[str | None, ...], list[DesignResult]] = {}
    for design in record.designs:
        shared.setdefault(tuple(design.verdict(case.id) for case in record.cases), []).append(design)
    return sorted(shared.values(), key=lambda members: (-totals(members[0])["robust"],
                                                         totals(members[0])["stalled"] + totals(members[0])["died"]))


def _name(design: DesignResult) -> str:
    return design.design + (" + nginx" if design.behind_nginx else "")


def answer_box(record: HostileRecord, groups: list[list[DesignResult]]) -> str:
    """The page's answer in three lines: who survives everything, who can be stopped by one client, and by what."""
    alone = [design for design in record.designs if not design.behind_nginx]
    down = [design for design in alone if totals(design)["stalled"] + totals(design)["died"]]
    applicable = {design.name: sum(n for verdict, n in totals(design).items() if verdict != "n/a") for design in alone}
    whole = [design for design in alone if totals(design)["robust"] == applicable[design.name]]
    stoppers = sorted(record.cases, key=lambda case: -sum(design.verdict(case.id) in ("stalled", "died")
                                                         for design in alone))
    worst = stoppers[0]
    stopped = sum(design.verdict(worst.id) in ("stalled", "died") for design in alone)
    best = groups[0]
    survivors = (f"{len(whole)} of the {len(alone)} designs alone {'answers' if len(whole) == 1 else 'answer'} "
                 "every case as a robust server does"
                 if whole else f"No design alone answers every case as a robust server does; the best, "
                 f"{' and '.join(f'`{_name(design)}`' for design in best[:3])}, in {totals(best[0])['robust']}")
    return ('!!! abstract "The answer"\n\n'
            f"    {survivors}. {len(down)} of {len(alone)} can be stopped (an ordinary client not served) by at least "
            f"one case; the case that stops the most is {worst.number}, {worst.title.lower()} ({stopped} designs).\n")


def compact_page(record: HostileRecord | None) -> str:
    """The answer first: a row per set of designs with the same verdicts, a column per case, what each row suffers."""
    if record is None:
        return "*Not measured yet: `results/hostile.json` does not exist.*\n"
    groups = alike(record)
    columns = [Column(str(case.number), f"#case-{case.id}", case.column) for case in record.cases]
    rows = []
    for index, members in enumerate(groups, 1):
        names = [_name(member) for member in members]
        shown = ", ".join(names) if len(names) <= 3 else f"{names[0]}, {names[1]} and {len(names) - 2} more"
        rows.append((f"[{shown}](#alike-{index})", [_cell(case, members[0].result(case.id)) for case in record.cases]))
    marks = " ".join(f'{legend_mark("sv-" + verdict.replace("/", ""), MARKS[verdict])} {verdict}' for verdict in LEGEND)
    listed = [f'- <a id="alike-{index}"></a>{", ".join(f"`{_name(member)}`" for member in members)}: '
              f"{verdict_line(record, members[0])}" for index, members in enumerate(groups, 1)]
    return (answer_box(record, groups) + "\n" + grid_table(columns, rows) + "\n" + marks
            + ". Point at a cell for what the design answered; the column numbers link to the cases below.\n\n"
            "**What each row suffers:**\n\n" + "\n".join(listed) + "\n")


def survival_grid_files(results_dir: Path, generated_dir: Path) -> dict[Path, str]:
    """survive-compact.md (the page's answer), survive-grid.md (every design, for the reference page) and
    survive-proxy-grid.md from results_dir/hostile.json (or a line saying it is missing)."""
    record = load_record(results_dir)
    header = HEADER.format(source="results/hostile.json")
    return {generated_dir / "survive-compact.md": header + compact_page(record),
            generated_dir / "survive-grid.md": header + grid_page(record),
            generated_dir / "survive-proxy-grid.md": header + proxy_grid_page(record)}
