"""Render results/conformance.json (the conformance suite) into the tables docs/conformance.md includes.

Rendering never measures. Three files, each saying "not measured yet" when the record is missing:

- conformance-smuggling.md: the smuggling cases as what an attacker gets from each design;
- conformance-parsers.md: h11, httptools and the hardened parser side by side on every case, where
  they disagree and which one the RFC supports, and gunicorn's own corpus through the three;
- conformance-cases.md: every case: its bytes, what the RFC asks, the section (on the reference page,
  docs/reference/conformance-matrix.md, under the full grid).

The page's answer (a row per set of designs that answer alike, a column per class of case), the full grid
and the every-design-by-every-case download are render/conformance_grid.py's. summary_table is the
command line's one line per design (bench.py conformance).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from harness.model.records.conformance_record import (
    Answer,
    CaseGroup,
    ConformanceCase,
    ConformanceDesign,
    ConformanceRecord,
    CorpusVerdict,
    ParserAnswer,
)
from harness.render.presentation import design_link, wide_table
from harness.render.generated_header import HEADER

RECORD_NAME = "conformance.json"
NOT_MEASURED = ("*Not measured yet: `results/conformance.json` does not exist. "
                "`python scripts/bench.py conformance --quick` runs two designs on your machine "
                "(record under build/results/).*\n")
MARKS = {"pass": "✔", "lenient": "≈", "fail": "✘", "n/a": "–"}
LEGEND = {
    "✔": "the answer the RFC asks for",
    "≈": "an answer the RFC also allows (a leniency such as accepting a bare LF), or a refusal by closing "
         "the connection without a status where the RFC asks for a 4xx or 5xx",
    "✘": "an answer the RFC does not allow",
    "–": "not applicable (the case needs a method other than GET; every design here answers 405 to it)",
}
# Every code a cell can show (suites/conformance/conformance_cases.py judge_answer and conformance_run.py),
# as the legend writes it and what it means; CODE_PARTS says which entries explain a given code.
STATUS = "200, 400, 405, 413, 417, 431, 501, 505"
CODES = {
    STATUS: "the status of the first answer",
    "200+200": "two answers: the bytes after the first request (a body, or bytes a conforming server refuses) "
               "were served as a request of their own",
    "200+400": "two answers, the second a refusal: the server answered before reading the bytes after the "
               "request, then refused them (nothing hidden was served, but one request drew two answers)",
    "200 open": "accepted, then the connection was left open where the RFC says the server must close it",
    "100→200": "a 100 Continue sent to an HTTP/1.0 client, then the answer",
    "0.9": "an HTTP/0.9 answer: the page without a status line",
    "200 as HTTP/1.2": "an answer whose status line claims the client's version, one the server does not implement",
    "closed": "the connection was closed without an answer",
    "no answer": "no answer, the connection still open after the suite's bound (waiting for bytes that a "
                 "conforming server would have refused)",
    "GET-only": "not applicable: the case needs a method other than GET, and the design answers 405 to every other",
    "405 next 200": "behind nginx, the next client's request (a POST on a new connection after the case, which the "
                    "design refuses with 405 on its own) got this answer instead: a 2xx is the answer to the hidden "
                    "request, left on the connection nginx keeps to the design and handed to the next client",
}
# A code is built in this order: an interim 100, the first answer (or none), further answers, ' open', ' as HTTP/x.y',
# and behind nginx ' next NNN' when the next client's request did not get its own answer (conformance_cases.judge_next).
CODE_GRAMMAR = re.compile(r"(?P<interim>100→)?(?P<first>\d{3}|0\.9|closed|no answer|GET-only)"
                          r"(?P<served>(\+2\d\d)+)?(?P<refused>(\+[3-5]\d\d)+)?(?P<open> open)?(?P<version> as HTTP/\d\.\d)?"
                          r"(?P<next> next (\d{3}|closed|no answer))?")
CODE_PARTS = {"interim": "100→200", "served": "200+200", "refused": "200+400", "open": "200 open",
              "version": "200 as HTTP/1.2", "next": "405 next 200"}


def code_legend(code: str) -> list[str]:
    """The CODES entries that explain `code`; a code the legend cannot explain is an error, not a silent cell."""
    match = CODE_GRAMMAR.fullmatch(code)
    if match is None:
        raise ValueError(f"conformance code {code!r} has no entry in the legend (render/conformance_tables.py CODES)")
    first = match["first"]
    entries = [first if first in CODES else STATUS]
    return entries + [CODE_PARTS[part] for part in CODE_PARTS if match[part]]


def load_record(results_dir: Path) -> ConformanceRecord | None:
    """results_dir/conformance.json, typed; None when it is missing."""
    path = results_dir / RECORD_NAME
    if not path.exists():
        return None
    return ConformanceRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Each verdict's colour in the matrix (docs/assets/site.css, the survival grid's classes): a cell reads at a glance.
COLOURS = {"pass": "sv-robust", "lenient": "sv-weak", "fail": "sv-stalled", "n/a": "sv-na"}


def mark(verdict: str) -> str:
    """The verdict's mark on its colour."""
    return f'<span class="sv {COLOURS[verdict]}">{MARKS[verdict]}</span>'


def cell(result: Answer | ParserAnswer) -> str:
    return f"{mark(result.verdict)} {_escape(result.code)}"


def score(design: ConformanceDesign) -> tuple[int, int, int]:
    """(passed, lenient among them, applicable)."""
    verdicts = [result.verdict for result in design.cases.values() if result.verdict != "n/a"]
    passed = sum(verdict in ("pass", "lenient") for verdict in verdicts)
    return passed, sum(verdict == "lenient" for verdict in verdicts), len(verdicts)


def verdict_line(design: ConformanceDesign, cases: dict[str, ConformanceCase], limit: int = 6) -> str:
    """'passes 80 of 97 (9 leniently); fails: no Host → 200, CL.TE → 200+200, … (+4 more)'."""
    passed, lenient, applicable = score(design)
    if design.status != "ok" and not applicable:
        return "did not run: " + "; ".join(design.problems)
    failed = [f"{cases[case_id].short} → {result.code}" for case_id, result in design.cases.items()
              if result.verdict == "fail" and case_id in cases]
    text = f"passes {passed} of {applicable}" + (f" ({lenient} leniently)" if lenient else "")
    if failed:
        more = f" (+{len(failed) - limit} more)" if len(failed) > limit else ""
        text += "; fails " + ", ".join(failed[:limit]) + more
    if design.problems:
        text += "; " + "; ".join(design.problems)
    return _escape(text)


def design_name(design: ConformanceDesign) -> str:
    return design_link(design.design) + (" + nginx" if design.behind_nginx else "")


def plain_name(design: ConformanceDesign) -> str:
    return f"`{design.design}`" + (" + nginx" if design.behind_nginx else "")


def summary_table(record: ConformanceRecord) -> str:
    cases = {case.id: case for case in record.cases}
    lines = ["| Design | Passes | Verdict |", "|---|---:|---|"]
    for design in record.designs:
        passed, _, applicable = score(design)
        lines.append(f"| {design_name(design)} | {passed}/{applicable} | {verdict_line(design, cases)} |")
    return "\n".join(lines) + "\n"


def caption(record: ConformanceRecord) -> str:
    environment = record.environment
    return (f"*{len(record.cases)} cases, {len(record.designs)} designs (alone and behind nginx), "
            f"{record.mode} run {record.started_utc} to {record.finished_utc}; Python "
            f"{environment.python}, {environment.tools.get('nginx', 'nginx ?')}; "  # tools: name -> version
            f"command `{' '.join(record.command)}`.*\n")


def grouped_cases(record: ConformanceRecord) -> list[tuple[CaseGroup, list[ConformanceCase]]]:
    """Each group of the record with its cases, in the record's order (a run of chosen cases may leave one empty)."""
    return [(group, [case for case in record.cases if case.group == group.id]) for group in record.groups]


def fails(design: ConformanceDesign, case: ConformanceCase) -> bool:
    """Did the design fail the case (a case it was not sent is not failed)?"""
    answer = design.cases.get(case.id)
    return answer is not None and answer.verdict == "fail"


def smuggling_page(record: ConformanceRecord) -> str:
    cases = [case for case in record.cases if case.group == "smuggling"]
    designs = record.placed_designs(behind_nginx=False)
    out = []
    for case in cases:
        served = [design for design in designs if fails(design, case)]
        cve = f" ({case.cve})" if case.cve else ""
        source = f" *Source:* {case.source}." if case.source else ""
        out.append(f"**{_escape(case.title)}**{cve}. *The RFC:* {case.rfc} ({case.section}){source}\n")
        if not served:
            out.append("- No design alone lets it through: every one refuses or closes.\n")
            continue
        attack = case.attack or "the hidden request is answered as a request of its own"
        outcomes: dict[tuple[str, str], list[str]] = {}  # one line per distinct outcome, its designs listed
        for design in served:
            result = design.cases[case.id]
            outcomes.setdefault((result.code, attacker_gets(result, attack)), []).append(f"`{design.design}`")
        for (code, gets), names in outcomes.items():
            out.append(f"- answered `{code}` ({', '.join(names)}): {gets}.")
        out.append("")
    proxied = record.placed_designs(behind_nginx=True)
    if proxied:
        out.append("**Behind nginx:** " + behind_nginx_words(record, cases, designs, proxied))
    return "\n".join(out) + "\n"


def behind_nginx_words(record: ConformanceRecord, cases: list[ConformanceCase], alone: list[ConformanceDesign],
                       proxied: list[ConformanceDesign]) -> str:
    """The smuggling cases behind nginx, case by case (every design, or which), whether nginx alone does the same,
    and whether a new client's request after each case got its own answer (conformance_cases.judge_next)."""
    nginx_alone = next((design for design in alone if design.design == "nginx"), None)
    parts = []
    for case in cases:
        leaking = [design for design in proxied if fails(design, case)]
        if not leaking:
            continue
        who = (f"every design ({len(leaking)} of {len(proxied)})" if len(leaking) == len(proxied)
               else ", ".join(design_link(design.design) for design in leaking))
        codes = ", ".join(sorted({design.cases[case.id].code for design in leaking}))
        same = (": nginx alone answers it so too, so the second request is nginx's own reading of the bytes, sent to "
                "the design as a request of its own" if nginx_alone is not None and fails(nginx_alone, case) else "")
        parts.append(f"{who} lets `{case.short}` through ({codes}){same}")
    if not record.settings.proxy:  # a record from before the suite said its proxy: the HTTP/1.0 one
        return ("; ".join(parts) + "." if parts else
                "no design lets any of these through: nginx refuses them or closes the connection after the first "
                "answer (`keepalive_timeout 0`).")
    shifted = [f"`{design.design}` after `{case.short}` ({design.cases[case.id].code})" for design in proxied
               for case in cases if " next " in design.cases.get(case.id, Answer(verdict="n/a", code="")).code]
    text = ("; ".join(parts) + ". " if parts else "no design lets any of these through. ")
    return text + (f"With nginx keeping its connections to the design alive (`{record.settings.proxy}`), after every "
                   "case a new client's request got the answer it gets on its own"
                   + (f", except {', '.join(shifted)}" if shifted else
                      ": no design left a hidden request's answer on a kept connection for the next client") + ".")


def attacker_gets(result: Answer, attack: str) -> str:
    """What a failed smuggling cell hands an attacker, in words."""
    if "+" in result.code:
        second = result.code.split("+", 1)[1].split()[0]
        if not second.startswith("2"):  # a second answer that refuses: nothing hidden was served
            return (f"it answered before reading the body, then refused the bytes after it with {second}: the "
                    "hidden request was not served, but one request drew two answers, so a front end that "
                    "reuses the connection can hand the second to the next client")
        return attack
    if "open" in result.code or result.ended == "open":
        return ("it kept the connection open after a request whose framing the RFC says must end it: the next bytes "
                "on it are read from wherever this server decided the request ended, which a front end may not "
                "agree with")
    if result.code.split("+")[0] in ("200", "405"):
        return ("it accepted framing the RFC refuses, then closed: the hidden request was not served here, but a "
                "front end that reads the bytes the other way and keeps its upstream connection open would disagree "
                "with it about where the request ends")
    return result.reason or ""


def parsers_page(record: ConformanceRecord) -> str:
    """The parsers side by side: reference tables, wider than the page's column, so each scrolls, case pinned."""
    return wide_table(_parsers_tables(record))


def _parsers_tables(record: ConformanceRecord) -> str:
    names = record.parser_names()
    versions = record.environment.tools
    out = ["| Case | " + " | ".join(f"{name} ({versions.get(name, '?')})" for name in names) + " |",
           "|---|" + "---|" * len(names)]
    for case in record.cases:
        row = record.parsers[case.id]
        out.append(f"| {_escape(case.short)} | " + " | ".join(cell(row[name]) for name in names) + " |")
    out.append("")
    scores = []
    for name in names:
        verdicts = [record.parsers[case.id][name].verdict for case in record.cases]
        scores.append(f"{name} passes {sum(v in ('pass', 'lenient') for v in verdicts)} of {len(verdicts)}")
    out.append("*" + "; ".join(scores) + ".*\n")
    out.append("### Where they disagree\n")
    out.append("| Case | " + " | ".join(names) + " | What the RFC supports |")
    out.append("|---|" + "---|" * len(names) + "---|")
    for case in record.cases:
        row = record.parsers[case.id]
        if len({row[name].code for name in names}) > 1:
            right = [name for name in names if row[name].verdict == "pass"]
            allowed = [name for name in names if row[name].verdict == "lenient"]
            support = (f"{', '.join(right) or 'none of them'}" + (f" (also allowed: {', '.join(allowed)})"
                                                                   if allowed else "")
                       + f": {case.section}, {case.rfc}")
            out.append(f"| {_escape(case.short)} | " + " | ".join(cell(row[name]) for name in names)
                       + f" | {_escape(support)} |")
    out.append("")
    out.append(gunicorn_corpus_section(record, names))
    return "\n".join(out)


def gunicorn_corpus_section(record: ConformanceRecord, names: list[str]) -> str:
    corpus = record.gunicorn_corpus
    out = ["### Gunicorn's own corpus\n"]
    if not corpus.fetched:
        return "\n".join(out + [f"*Not fetched in this run: {corpus.reason or 'no reason given'}.*\n"])
    requests = corpus.requests
    out.append(f"*{len(requests)} requests of gunicorn {corpus.gunicorn_version}'s `tests/requests/` "
               f"(`{corpus.command}`, unpacked under build/), fed to each parser whole.*\n")
    out.append("| Gunicorn files | " + " | ".join(f"{name} accepts / refuses / waits" for name in names) + " |")
    out.append("|---|" + "---:|" * len(names))
    for valid in (True, False):
        for needs in (False, True):
            subset = [request for request in requests if request.valid == valid and request.needs_setting == needs]
            if not subset:
                continue
            label = ("valid/" if valid else "invalid/") + (" (under a gunicorn setting)" if needs else "")
            counts = []
            for name in names:
                outcomes = [request.parsers[name].outcome for request in subset]
                counts.append(" / ".join(str(outcomes.count(outcome)) for outcome in ("accept", "reject", "incomplete")))
            out.append(f"| {label} ({len(subset)}) | " + " | ".join(counts) + " |")
    out.append("")
    split = [request for request in requests if not request.needs_setting
             and len({request.parsers[name].outcome for name in names}) > 1]
    out.append(f"The {len(split)} files (under gunicorn's default settings) on which the three parsers disagree:\n")
    out.append("| File | " + " | ".join(names) + " |")
    out.append("|---|" + "---|" * len(names))
    for request in split:
        out.append(f"| {request.name} | " + " | ".join(
            _escape(parse_cell(request.parsers[name])) for name in names) + " |")
    return "\n".join(out) + "\n"


def parse_cell(parsed: CorpusVerdict) -> str:
    if parsed.outcome == "reject":
        return f"refuses ({parsed.status})"
    if parsed.outcome == "accept":
        return "accepts" + (f" ×{parsed.requests}" if parsed.requests > 1 else "")
    return "waits"


def case_anchor(case: ConformanceCase) -> str:
    """The id of the case's row in the list of every case (the grid's column headers link to it)."""
    return f"case-{case.id}"


def cases_page(record: ConformanceRecord) -> str:
    out = []
    for group in record.groups:
        out.append(f"#### {group.title}\n")
        out.append("| Case | Bytes sent | The RFC asks | Section |")
        out.append("|---|---|---|---|")
        for number, case in enumerate(record.cases, 1):
            if case.group != group.id:
                continue
            shown = case.request.replace("{filler}", f"{{{case.filler or ''} × {case.filler_count or 0}}}")
            printable = repr(shown)[1:-1].replace("`", "\\`")
            asks = " or ".join(case.expect) + (f" (also allowed: {', '.join(case.lenient)})" if case.lenient else "")
            cve = f"; {case.cve}" if case.cve else ""
            source = f"; {_escape(case.source)}" if case.source else ""
            out.append(f"| <a id=\"{case_anchor(case)}\"></a>{number}. {_escape(case.short)}: {_escape(case.title)} | "
                       f"`{_escape(printable)}` | "
                       f"{_escape(asks)}: {_escape(case.rfc)} | {case.section}{cve}{source} |")
        out.append("")
    return "\n".join(out)


def conformance_files(results_dir: Path, generated_dir: Path) -> dict[Path, str]:
    """Every file docs/conformance.md includes, from results/conformance.json (or 'not measured yet')."""
    record = load_record(results_dir)
    source = HEADER.format(source=f"results/{RECORD_NAME}")
    names = ("smuggling", "parsers", "cases")
    if record is None:
        return {generated_dir / f"conformance-{name}.md": source + NOT_MEASURED for name in names}
    contents = {
        "smuggling": smuggling_page(record),
        "parsers": parsers_page(record),
        "cases": cases_page(record),
    }
    return {generated_dir / f"conformance-{name}.md": source + contents[name] for name in names}
