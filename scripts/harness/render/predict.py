"""Predict, then measure: one question per design page, its measured answer folded away beneath it.

Each design page asks the reader, before its results, to guess one number ("10 clients, a 100 ms
call: how many requests a second?"), and keeps the measured answer in a collapsed block
(pymdownx.details, `??? question`) with the arithmetic that explains it. The answer is a cell of a
committed record, read here and never typed: docs/_generated/predict/<design>.md, one file per
design that has a suitable cell, which its page includes just before its results.

Which cell: the first of QUESTIONS that holds the design, in that order. A scenario with a simulated
call gives the question its bounds (clients ÷ call: every wait overlapped; 1 ÷ call: one at a
time) and the answer its reading (the rate × the call is how many calls were in flight at once, on
average). A scenario without a call is only asked where the record measured the load tool's
ceiling: with nothing to wait for, the design's rate is read against what the tool alone reaches.
A design in none of them gets no file, and its page no question; a page that shows two designs
(asyncio-echo and its minimal version) asks about the first only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.model import limits
from harness.model.catalogue import load_catalogue
from harness.model.records.scenario_record import ScenarioRecord
from harness.model.settings import LINE_ECHO_TOOLS
from harness.render.cells import cells_by_level, format_rate, is_rate_sweep, rate_flags, summarise_cell
from harness.render.generated_header import HEADER

# (scenario, clients): the cells a question may come from, the most telling first. Ten clients and a
# 100 ms call is the articles' own example; fifty and a hundred show a pool's cap; the thousands, a
# loop's; the zero-call ones only where the record holds the tool's ceiling.
QUESTIONS: list[tuple[str, int]] = [
    ("from-scratch", 10), ("database-sleep", 50), ("sweep-io", 100), ("timeline", 10),
    ("keep-alive-1000", 1000), ("sweep-10k", 10000), ("async-python-part-1", 1000),
    ("concurrency-models", 8), ("sweep-hello", 50), ("keep-alive", 50), ("peak", 50),
]


def _cell(record: ScenarioRecord, name: str, clients: int) -> dict[str, Any] | None:
    """The design's summarised cell at that many clients, or None when the record has no such cell."""
    design = record.design(name)
    if design is None:
        return None
    runs = cells_by_level(design.runs).get(clients)
    return summarise_cell(runs) if runs else None


def _load(record: ScenarioRecord, clients: int) -> str:
    """'10 clients, each request waiting on a 100 ms call, a new connection per request'."""
    delay = record.settings.delay
    if record.scenario.tool in LINE_ECHO_TOOLS:
        return f"{clients:,} clients, each sending one line that the server sends back after a {delay * 1000:g} ms wait"
    call = f"each request waiting on a {delay * 1000:g} ms call" if delay else "no call to wait for (hello world)"
    connection = "kept-alive connections" if record.settings.keep_alive else "a new connection per request"
    return f"{clients:,} clients, {call}, {connection}"


def _why_with_call(rate: float, clients: int, delay: float) -> str:
    """The bounds a call sets, and how many calls the measured rate kept in flight."""
    overlapped, one_at_a_time = round(clients / delay), round(1 / delay)
    in_flight = rate * delay
    reading = ("the waits overlapped" if in_flight >= 2 else "the calls ran about one at a time")
    return (f"{clients:,} clients that each wait {delay * 1000:g} ms can ask for at most "
            f"{overlapped:,} requests a second ({clients:,} ÷ {delay:g} s), if every wait overlaps "
            f"the others; a server that makes one call at a time answers at most {one_at_a_time:,} "
            f"(1 ÷ {delay:g} s). The measured rate times the call, {format_rate(rate)} × {delay:g} s, is about "
            f"{in_flight:,.1f} calls in flight at once, on average: {reading}.")


def _why_without_call(rate: float, ceiling: float, ceiling_title: str) -> str:
    """With nothing to wait for: the design's rate against what the load tool alone reaches."""
    return (f"With nothing to wait for, only work limits the rate: the server's and the load tool's. The tool "
            f"alone, against {ceiling_title[:1].lower() + ceiling_title[1:]}, reached {format_rate(ceiling)} requests a second in the same record; "
            f"this design reached {rate / ceiling:.0%} of that, so the rest of the time per request is its own.")


def question(record: ScenarioRecord, name: str, clients: int) -> str | None:
    """The question and its folded answer for one design, or None when the cell cannot answer it."""
    if is_rate_sweep(record):
        return None
    cell = _cell(record, name, clients)
    if cell is None:
        return None
    delay = record.settings.delay
    ceiling = limits.ceilings(record).get(clients)
    if not delay and not ceiling:
        return None  # no call and no ceiling: nothing to read the number against
    rate = cell["rate"]["median"]
    if delay:
        why = _why_with_call(rate, clients, delay)
    else:  # no call, so the tool's ceiling was measured (above): the record has its ceiling design
        assert record.ceiling is not None and ceiling is not None
        why = _why_without_call(rate, ceiling, record.ceiling.title)
    scenario_id = record.id
    flags = rate_flags(cell, ceiling, record=record)
    runs = f"the median of {cell['repetitions']} runs" if cell["repetitions"] > 1 else "one run"
    return (f'??? question "Predict, then open: {_load(record, clients)}. How many requests a second?"\n\n'
            f"    **Measured: {format_rate(rate)} requests a second**{flags}, {runs} "
            f"(scenario `{scenario_id}`, in the results below).\n\n"
            f"    {why}\n")


def predict_files(records: dict[str, ScenarioRecord], generated_dir: Path) -> dict[Path, str]:
    """docs/_generated/predict/<design>.md for every design one of QUESTIONS' cells can answer for."""
    files: dict[Path, str] = {}
    pages = {name: design.page or name for name, design in load_catalogue().designs.items()}
    asked: set[str] = set()
    for scenario_id, clients in QUESTIONS:
        record = records.get(scenario_id)
        if record is None:
            continue
        for design in record.designs:
            page = pages.get(design.name, design.name)
            if page in asked:
                continue  # an earlier scenario already asked this design's page
            text = question(record, design.name, clients)
            if text is not None:
                asked.add(page)
                files[generated_dir / "predict" / f"{design.name}.md"] = (
                    HEADER.format(source=f"results/{scenario_id}.json") + text)
    return files
