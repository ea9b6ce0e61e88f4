"""Render results/hostile.json (the hostile suite) into the tables docs/survive.md includes.

Rendering never measures. Four files, each saying "not measured yet" when the record
is missing, so the page always builds:

- survive-matrix.md: designs x cases, a mark and the status per cell, split into tables
  of at most five cases so the page reads at 1280 px, with the legend and totals;
- survive-cases.md: per case, what it is, who does it, its RFC or CVE; every design's details
  (status per variant, time to close, fds and threads leaked, peak RSS, CPU seconds, the probe
  during the case) are the download survive-details.csv, one line per design and case (thirty
  rows a case made the page 33,000 words);
- survive-limits.md: each real server's documented limits (scripts/catalogue/hostile/
  limits.toml, cited from its documentation) beside what the suite measured, and
  whether the two agree;
- survive-emfile.md: case 15 (EMFILE) in sentences: which designs spun at the limit, which had a worker
  die there (and replaced), which stayed quiet there, which never reached it, and every design's figures.
- survive-emfile-settings.md: case 15 against Waitress, Gunicorn gthread and Granian at their defaults
  and with their own cap on connections (results/hostile-emfile-settings.json).
"""

from __future__ import annotations

import csv
import io
import json
import tomllib
from pathlib import Path

from harness.model.catalogue import CATALOGUE_DIR
from harness.model.records.hostile_record import (CaseResult, DesignResult, EmfileFigures, EmfileSettingRun,
                                                  EmfileSettingsRecord, HostileRecord)
from harness.model.typed import Typed
from harness.render.presentation import design_link, wide_table
from harness.render.generated_header import HEADER

LIMITS_FILE = CATALOGUE_DIR / "hostile" / "limits.toml"
RECORD_NAME = "hostile.json"
SETTINGS_RECORD_NAME = "hostile-emfile-settings.json"  # suites/hostile/emfile_settings.py
# The cases are described on docs/survive.md; the reference page's grids link there (an absolute link, checked).
CASE_PAGE = "/survive.md"
MARKS = {"robust": "✔", "weak": "⚠", "stalled": "✘", "died": "☠", "n/a": "–"}  # in every common font
LEGEND = {
    "robust": "survived (the probe client was served during and after the case) and gave the robust answer",
    "weak": "survived, but did not give the robust answer (the status shows what it gave)",
    "stalled": "the probe client was not served within 2 s during the case, or not after it",
    "died": "the server process died (its stderr tail is in the record)",
    "n/a": "not applicable (no `GET /big` on this design)",
}
CASES_PER_TABLE = 5
NOT_MEASURED = ("*Not measured yet: `results/hostile.json` does not exist. "
                "`python scripts/bench.py hostile --quick` measures a few designs on your machine "
                "(records under build/results/).*\n")


def load_record(results_dir: Path, name: str = RECORD_NAME) -> HostileRecord | None:
    """The hostile record results_dir/name, typed; None when it has not been made yet."""
    path = results_dir / name
    if not path.exists():
        return None
    return HostileRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def compact_status(statuses: list[str]) -> str:
    """['400', '400', '505', '0.9'] -> '400/505/0.9': each distinct answer once, in the order met."""
    seen: list[str] = []
    for part in statuses:
        if part not in seen:
            seen.append(part)
    return "/".join(seen)


def cell(result: CaseResult | None) -> str:
    if result is None:
        return "–"
    mark = MARKS[result.verdict]
    if result.verdict in ("n/a", "died"):
        return mark
    return f"{mark} {_escape(compact_status(result.statuses))}"


def design_label(design: DesignResult) -> str:
    """The design's short name, linked to its page, and whether it ran behind nginx."""
    suffix = " behind nginx" if design.behind_nginx else ""
    return f"{design_link(design.design)}{suffix}"


def totals(design: DesignResult) -> dict[str, int]:
    counts = {verdict: 0 for verdict in MARKS}
    for result in design.cases:
        counts[result.verdict] += 1
    return counts


def matrix_tables(record: HostileRecord) -> str:
    """The designs x cases matrix, in tables of CASES_PER_TABLE cases, then each design's totals."""
    cases = record.cases
    parts = []
    tables = -(-len(cases) // CASES_PER_TABLE)
    base, extra = divmod(len(cases), tables)  # balanced: 17 cases make tables of 5, 4, 4, 4, not 5, 5, 5, 2
    starts = [index * base + min(index, extra) for index in range(tables + 1)]
    for start, end in zip(starts, starts[1:]):
        chunk = cases[start:end]
        header = "| Design | " + " | ".join(f"[{case.number}. {case.column}]({CASE_PAGE}#case-{case.id})" for case in chunk) + " |"
        lines = [header, "|---|" + "---|" * len(chunk)]
        for design in record.designs:
            lines.append(f"| {design_label(design)} | " + " | ".join(cell(design.result(case.id)) for case in chunk)
                         + " |")
        parts.append("\n".join(lines))
    total_lines = ["| Design | " + " | ".join(f"{MARKS[verdict]} {verdict}" for verdict in MARKS) + " | Problems |",
                   "|---|" + "---|" * (len(MARKS) + 1)]
    grand = {verdict: 0 for verdict in MARKS}
    for design in record.designs:
        counts = totals(design)
        for verdict, count in counts.items():
            grand[verdict] += count
        problems = _escape("; ".join(design.problems)) or "–"
        total_lines.append(f"| {design_label(design)} | " + " | ".join(str(counts[verdict]) for verdict in MARKS)
                           + f" | {problems} |")
    total_lines.append("| **all** | " + " | ".join(f"**{grand[verdict]}**" for verdict in MARKS) + " | |")
    parts.append("\n".join(total_lines))
    return "\n\n".join(parts) + "\n"


def legend() -> str:
    return "\n".join(f"- {MARKS[verdict]} **{verdict}**: {text}" for verdict, text in LEGEND.items()) + "\n"


def caption(record: HostileRecord) -> str:
    settings, environment = record.settings, record.environment
    return (f"Each design started alone (no CPU pinning) with a {settings.delay:g} s simulated call; "
            f"a case waits at most {settings.short_bound or settings.bound:g} s for a parser's answer and "
            f"{settings.bound:g} s for a close (body stall, slowloris, idle, slow reader); the probe is a GET / that "
            f"must get 200 within {settings.probe_timeout:g} s, {settings.probe_at:g} s into the case, and "
            f"another within {settings.after_timeout:g} s after it. Machine: {environment.cpu_model}, "
            f"{environment.cpu_count} CPUs, Linux {environment.kernel}, Python {environment.python}, "
            f"{', '.join(environment.tools.values())}; commit `{environment.commit[:10]}`, "
            f"{record.started_utc} to {record.finished_utc} ({record.mode} run). "
            "Raw record: `results/hostile.json`.\n")


def matrix_page(record: HostileRecord | None) -> str:
    if record is None:
        return NOT_MEASURED
    return legend() + "\n" + matrix_tables(record) + "\n" + caption(record)


def seconds(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def details(summary: str, lines: list[str]) -> str:
    """A collapsed block (pymdownx.details): thirty rows per case would bury the page's prose."""
    return f'??? note "{summary}"\n\n' + "".join(f"    {line}\n" for line in lines)


def cases_page(record: HostileRecord | None) -> str:
    """Each case: what it is, its robust answer, who does it, its reference; what each design did is in the download."""
    if record is None:
        return NOT_MEASURED
    parts = []
    for case in record.cases:
        parts.append(
            f"### {case.number}. {case.title} {{#case-{case.id}}}\n\n"
            f"**Robust answer:** {case.robust}.  \n**In the wild:** {case.wild}  \n"
            f"**Reference:** {case.reference}.\n")
    return "\n".join(parts)


def details_csv(record: HostileRecord) -> str:
    """Every design x every case, connection by connection: the download the page links in place of thirty rows a case."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["design", "behind_nginx", "case_number", "case_id", "verdict", "probe_during", "answers",
                     "seconds_to_close", "fds_leaked", "threads_leaked", "peak_rss_mib", "cpu_seconds"])
    for design in record.designs:
        for result in design.cases:
            during = result.probe_during
            probe = "" if during is None else (f"{during.status} in {during.seconds:.2f} s" if during.status
                                               else "not served")
            answers = "; ".join(f"{variant.name}: {variant.status}" + (f" ({variant.note})" if variant.note else "")
                                for variant in result.variants)
            writer.writerow([design.design, design.behind_nginx, result.number, result.case, result.verdict, probe,
                             answers, seconds(result.seconds_to_close).replace("–", ""), result.fds_leaked,
                             result.threads_leaked, result.peak_rss_mib, result.cpu_seconds])
    return buffer.getvalue()


class DocumentedLimit(Typed):
    """One real server's documented limit (scripts/catalogue/hostile/limits.toml), read through Typed so a misspelt
    key is refused: where it is documented, our setting, and the case (and variant) that measures it, if any."""

    server: str
    design: str  # the catalogue's design the suite ran the server as
    setting: str
    source: str  # the documentation's address
    default: str  # the documented default, in words
    ours: str = "the default"
    case: str | None = None  # the case that isolates it (None: none does)
    variant: str | None = None  # the case's variant that shows it (the first when None)
    promises_status: list[int] | None = None  # the documentation says it answers one of these
    promises_note: str | None = None  # ... or that the variant's note says this
    closes_within: float | None = None  # ... or that it closes within this many seconds


def load_limits(path: Path = LIMITS_FILE) -> list[DocumentedLimit]:
    entries = tomllib.loads(path.read_text(encoding="utf-8"))["limit"]
    return [DocumentedLimit.from_json(entry, f"{path}: [[limit]] {index + 1}") for index, entry in enumerate(entries)]


def measured(record: HostileRecord, limit: DocumentedLimit) -> tuple[str, bool | None]:
    """What the suite measured for a documented limit, and whether it keeps the promise (None: nothing to compare)."""
    if limit.case is None:
        return "no case isolates it", None
    design = next((design for design in record.designs if design.name == limit.design), None)
    result = None if design is None else design.result(limit.case)
    if result is None:
        return "not measured", None
    variant = next((variant for variant in result.variants if variant.name == limit.variant), result.variants[0])
    shown = f"case {result.number} ({variant.name}): {variant.status}"
    closed = variant.seconds_to_close
    bound = record.settings.bound
    if closed is not None:
        shown += f", closed after {closed:.1f} s"
    elif limit.closes_within is not None:
        shown += f", open after {bound:g} s"
    if result.probe_during is not None and not result.probe_during.status:
        shown += "; probe not served"
    checks: list[bool] = []
    if limit.promises_status is not None:
        checks.append(variant.status.split("→")[-1] in {str(status) for status in limit.promises_status})
    if limit.promises_note is not None:
        checks.append(limit.promises_note in variant.note)
        shown += f" ({variant.note})"
    if limit.closes_within is not None:
        if closed is None and limit.closes_within > bound:
            return shown + f" (the promise is longer than the suite's {bound:g} s)", None
        checks.append(closed is not None and closed <= limit.closes_within + 1.0)
    return shown, (all(checks) if checks else None)


def limits_page(record: HostileRecord | None, limits: list[DocumentedLimit] | None = None) -> str:
    """One table per real server: each documented limit, our setting, what the suite measured, and the verdict."""
    limits = load_limits() if limits is None else limits
    parts = []
    for server in dict.fromkeys(limit.server for limit in limits):
        lines = [f"**{server}**", "", "| Setting | Documented default | Ours | Measured | Kept? |", "|---|---|---|---|---|"]
        for limit in (limit for limit in limits if limit.server == server):
            shown, agrees = ("not measured yet", None) if record is None else measured(record, limit)
            mark = {True: "yes", False: "**no**", None: "–"}[agrees]
            lines.append(f"| [{limit.setting}]({limit.source}) | {_escape(limit.default)} | "
                         f"{_escape(limit.ours)} | {_escape(shown)} | {mark} |")
        parts.append("\n".join(lines))
    # Prose in every cell (documented default, measured answer): wide on purpose, the setting pinned.
    return wide_table("\n\n".join(parts))


def proxy_page(record: HostileRecord | None) -> str:
    if record is None:
        return NOT_MEASURED
    proxied = [design for design in record.designs if design.behind_nginx]
    alone = {design.name: design for design in record.designs if not design.behind_nginx}
    pairs = [(alone[design.design], design) for design in proxied if design.design in alone]
    if not pairs:
        return "*No design was measured both alone and behind nginx in this record.*\n"
    header = "| Case | " + " | ".join(f"`{solo.design}` alone | behind nginx" for solo, _ in pairs) + " |"
    lines = [header, "|---|" + "---|---|" * len(pairs)]
    for case in record.cases:
        cells = []
        for solo, fronted in pairs:
            for design in (solo, fronted):
                cells.append(cell(design.result(case.id)))
        lines.append(f"| {case.number}. {case.id} | " + " | ".join(cells) + " |")
    summary = []
    for solo, fronted in pairs:
        fixed = [case.number for case in record.cases
                 if solo.verdict(case.id) in ("stalled", "weak", "died") and fronted.verdict(case.id) == "robust"]
        worse = [case.number for case in record.cases
                 if solo.verdict(case.id) == "robust" and fronted.verdict(case.id) in ("stalled", "weak", "died")]
        summary.append(f"- `{solo.design}`: robust in {totals(solo)['robust']} cases alone, "
                       f"{totals(fronted)['robust']} behind nginx; nginx turns cases "
                       f"{', '.join(map(str, fixed)) or 'none'} robust, and cases "
                       f"{', '.join(map(str, worse)) or 'none'} from robust to not.")
    # Two columns per design (alone, behind nginx): wide on purpose, the case pinned.
    return wide_table("\n".join(lines)) + "\n" + "\n".join(summary) + "\n"


def emfile_figures(record: HostileRecord) -> list[tuple[DesignResult, EmfileFigures]]:
    """(design, figures) for every design whose case 15 measured them (records since the limit is lowered live)."""
    rows = []
    for design in record.designs:
        result = design.result("emfile")
        figures = None if result is None else result.figures
        if figures:
            rows.append((design, figures))
    return rows


def emfile_page(record: HostileRecord | None) -> str:
    """Case 15 in a few sentences: who spun, whose worker died at the limit, who stayed quiet there, who never reached
    it; then every figure."""
    if record is None:
        return NOT_MEASURED
    rows = emfile_figures(record)
    case = record.case("emfile")
    if not rows or case is None:
        return "*This record was measured before case 15 lowered the limit of the running server.*\n"
    busy_share = 0.5 if case.busy_cpu_share is None else case.busy_cpu_share
    first = rows[0][1]
    verdicts = {design.name: design.verdict("emfile") for design in record.designs}
    died = [(design, figures) for design, figures in rows if verdicts[design.name] == "died"]
    rows = [(design, figures) for design, figures in rows if verdicts[design.name] != "died"]
    busy = [(design, figures) for design, figures in rows if figures.cpu_share > busy_share]
    calm = [(design, figures) for design, figures in rows if figures.cpu_share <= busy_share]
    replaced = [(design, figures) for design, figures in calm if figures.died_at_limit and figures.replaced]
    lost = [(design, figures) for design, figures in calm if figures.died_at_limit and not figures.replaced]
    calm = [(design, figures) for design, figures in calm if not figures.died_at_limit]
    quiet = [(design, figures) for design, figures in calm if figures.at_limit]
    never = [(design, figures) for design, figures in calm if not figures.at_limit]
    measured = {design.name for design, _ in rows + died}
    unmeasured = [design for design in record.designs if design.name not in measured
                  and design.result("emfile") is not None]
    total = len(rows) + len(died) + len(unmeasured)

    def named(entries: list[tuple[DesignResult, EmfileFigures]], with_cpu: bool = False) -> str:
        return ", ".join(design.name + (f" ({figures.cpu_share:.0%})" if with_cpu else "")
                         for design, figures in entries) or "none"

    lines = [(f"Each process's limit was lowered, once the design answered, to the descriptors it held + "
              f"{first.headroom}; the CPU was measured for {first.hold_seconds:g} s while the connections "
              f"were held. More than {busy_share:.0%} of a CPU is a busy loop."), ""]
    lines.append(f"- **A busy loop at the limit** ({len(busy)} of {total}): {named(busy, with_cpu=True)}.")
    if quiet:
        top = max(figures.cpu_share for _, figures in quiet)
        lines.append(f"- **At the limit and quiet** ({len(quiet)} of {total}): at most {top:.0%} of a CPU.")
    if replaced:
        lines.append(f"- **A worker died at the limit and was replaced** ({len(replaced)} of {total}: a process of the "
                     "group ran out of descriptors and exited, and a process started after it: its supervisor "
                     f"replacing it): {named(replaced)}.")
    if lost:
        lines.append(f"- **A worker died at the limit, none replaced it** ({len(lost)} of {total}): {named(lost)}.")
    if died:
        lines.append(f"- **Died in this case** ({len(died)} of {total}: its stderr is in the record): {named(died)}.")
    lines.append(f"- **Never at the limit** ({len(never)} of {total}: no process ran out of descriptors, so "
                 f"`accept()` never failed): {named(never)}.")
    if unmeasured:
        errors = sorted({error for design in unmeasured for result in design.cases if result.case == "emfile"
                         for error in result.errors})
        lines.append(f"- **Not measured** ({len(unmeasured)} of {total}: the case could not run; "
                     f"{'; '.join(errors) or 'no figures'}): {', '.join(design.name for design in unmeasured)}.")
    table = ["| Design | CPU while held | Processes at the limit | Connections held |", "|---|---|---|---|"]
    table += [f"| {design_label(design)} | {figures.cpu_share:.0%} | {figures.at_limit} of "
              f"{figures.processes} | {figures.connections_held} |" for design, figures in rows]
    return "\n".join(lines) + "\n\n" + details("Every design's figures in case 15", table)


def load_settings_record(results_dir: Path) -> EmfileSettingsRecord | None:
    """results_dir/hostile-emfile-settings.json, typed; None before it is measured."""
    path = results_dir / SETTINGS_RECORD_NAME
    if not path.exists():
        return None
    return EmfileSettingsRecord.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


def settings_run_cells(run: EmfileSettingRun, busy_share: float) -> list[str]:
    """One run's cells: CPU while held, processes at the limit, the held connections asked again after the hold,
    EMFILE lines in the server's log, processes replaced, the probe after."""
    result = run.result
    figures = None if result is None else result.figures
    if result is None or figures is None:
        return [f"not measured: {_escape(run.problem or (result.errors[0] if result and result.errors else '?'))}",
                "–", "–", "–", "–", "–"]
    busy = " (a busy loop)" if figures.cpu_share > busy_share else ""
    asked = ("–" if figures.held_answered is None else
             f"{figures.held_answered} / {figures.held_closed} / {figures.held_silent} of {figures.connections_held}")
    logged = "–" if run.emfile_logged is None else str(run.emfile_logged)
    replaced = "–" if run.processes_replaced is None else str(run.processes_replaced)
    after = result.probe_after
    probe = "dead" if after is None else str(after.status) if after.status else _escape(after.error or "no answer")
    return [f"{figures.cpu_share:.0%}{busy}", f"{figures.at_limit} of {figures.processes}", asked, logged, replaced,
            probe]


def emfile_settings_table(record: EmfileSettingsRecord | None) -> str:
    """Each server's cap: case 15 at its defaults and with the cap, side by side, and what was measured."""
    if record is None:
        return (f"*Not measured yet: `results/{SETTINGS_RECORD_NAME}` does not exist. "
                "`python scripts/bench.py hostile --emfile-settings` measures it.*\n")
    busy_share = 0.5 if record.case.busy_cpu_share is None else record.case.busy_cpu_share
    within = record.case.ask_held_within
    lines = ["| Server (design) | Run | CPU while held | Processes at the limit | "
             "Held connections asked again: answered / closed / nothing | EMFILE lines in its log | "
             "Processes replaced | Probe after |",
             "|---|---|---|---|---|---|---|---|"]
    for row in record.rows:
        setting = row.setting
        for label, run in (("defaults", row.default),
                           (f"[`{setting.setting}`]({setting.source}) {setting.value}", row.with_setting)):
            lines.append(f"| {setting.server} ({design_link(setting.design)}) | {label} | "
                         + " | ".join(settings_run_cells(run, busy_share)) + " |")
    first = next((run.result.figures for row in record.rows for run in (row.default, row.with_setting)
                  if run.result is not None and run.result.figures is not None), None)
    held = (f"each process's limit lowered, once it answered, to what it held + {first.headroom}, then "
            f"{first.hold_seconds:g} s of held connections past it" if first else "case 15")
    defaults = "; ".join(f"{row.setting.server} `{row.setting.setting}`: {_escape(row.setting.default)}"
                         for row in record.rows)
    versions = ", ".join(f"{name} {version}" for name, version in record.environment.tools.items())
    asked = ("" if within is None else
             f"*Asked again*: after the hold, before closing them, a GET on every held connection, and what came "
             f"back within {within:g} s: a status line, a close, or nothing (a client in the backlog of a server "
             "at its limit, or on a connection no thread reads). ")
    return (wide_table("\n".join(lines) + "\n") + "\n"
            f"Case 15 as on the matrix ({held}), at each server's defaults and then with its setting, one "
            f"after the other in one run, each with a server of its own. More than {busy_share:.0%} of a CPU is a "
            f"busy loop. {asked}*EMFILE lines*: lines of the server's stderr naming `Too many open files`, over "
            "the whole case; *processes replaced*: processes of the server's group after the probe that were not "
            f"there before the case (a worker that died and was started again). The documented defaults: "
            f"{defaults}. {versions}; commit `{record.environment.commit[:10]}`"
            f"{' (with uncommitted changes)' if record.environment.dirty else ''}; {record.mode} run of "
            f"{record.started_utc}.\n")


def survival_files(results_dir: Path, generated_dir: Path, plots_dir: Path) -> dict[Path, str]:
    """Every file this piece renders, by path, from results_dir/hostile.json (or saying it is missing), and the
    download survive-details.csv beside the plots."""
    record = load_record(results_dir)
    header = HEADER.format(source="results/hostile.json")
    downloads = {plots_dir / "survive-details.csv": details_csv(record)} if record is not None else {}
    return downloads | {
        generated_dir / "survive-matrix.md": header + matrix_page(record),
        generated_dir / "survive-cases.md": header + cases_page(record),
        generated_dir / "survive-limits.md": HEADER.format(source="results/hostile.json and "
                                                                  "scripts/catalogue/hostile/limits.toml")
        + limits_page(record),
        generated_dir / "survive-emfile.md": header + emfile_page(record),
        generated_dir / "survive-emfile-settings.md": HEADER.format(source=f"results/{SETTINGS_RECORD_NAME}")
        + emfile_settings_table(load_settings_record(results_dir)),
    }
