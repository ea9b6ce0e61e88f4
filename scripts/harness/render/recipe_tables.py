"""Render the recipe page (docs/recipe.md): the rules as JSON for the calculator, the rules table, worked
examples, the recipe's two configurations checked on the real stack, and workers against a CPU quota.

The rules and the arithmetic are model/deployment_recipe.py's; this module only shows them. rules.json is
what the page embeds for docs/assets/recipe.js. The check table puts the recipe's prediction for each
configuration and rate beside what vegeta measured (results/deployment/recipe-check.json); the quota table
shows each worker count's throttling, rate and p99 (results/deployment/cpu-quota.json).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from harness.model.deployment_recipe import (
    RULES,
    RecipeInputs,
    gunicorn_conf,
    granian_command,
    nginx_upstream,
    predict,
    recipe,
    rules_json,
    uvicorn_command,
)
from harness.model.records.deployment_records import OverloadCell
from harness.model.records.recipe_records import COUNTER_EXAMPLE, CheckRecord, CheckRun, QuotaRecord
from harness.render.deployment_tables import read_record
from harness.render.presentation import wide_table
from harness.render.generated_header import HEADER

CHECK_PATH = "deployment/recipe-check.json"
QUOTA_PATH = "deployment/cpu-quota.json"
MODEL_NAMES = {"threads": "Gunicorn gthread", COUNTER_EXAMPLE: "Gunicorn gthread without worker_connections",
               "event-loop": "uvicorn"}

# The worked examples: the page's answer without JavaScript, and inputs the browser test checks the calculator on.
EXAMPLES: list[tuple[str, RecipeInputs]] = [
    ("A Django app on a 4-core VM behind nginx",
     RecipeInputs(cores=4, rate=150, cpu_ms=15, wait_ms=60, max_connections=100, reserved=3, longest_s=30)),
    ("A FastAPI service in a container: docker --cpus 2 on a 16-core host",
     RecipeInputs(cores=16, quota=2, rate=800, cpu_ms=2, wait_ms=40, max_connections=100, reserved=3, longest_s=10)),
    ("Eight cores, 2,000 requests a second, PostgreSQL's default 100 connections",
     RecipeInputs(cores=8, rate=2000, cpu_ms=3, wait_ms=30, max_connections=100, reserved=3, longest_s=5)),
]
VERDICTS = {"fits": "fits, no pooler", "pooler": "**PgBouncer needed**", "too-many": "**does not fit, even pooled**"}


def rules_table() -> str:
    lines = ["| rule | backed by | measured here |", "|---|---|---|"]
    for rule in RULES:
        lines.append(f"| {rule['rule']} | [`{rule['record']}`]({rule['page']}) | {rule['limit']} |")
    return wide_table("\n".join(lines))


def inputs_line(inputs: RecipeInputs) -> str:
    cpus = f"{inputs.cores} cores" + (f", quota {inputs.quota:g} CPUs" if inputs.quota is not None else "")
    return (f"{cpus}; {inputs.rate:g} req/s; {inputs.cpu_ms:g} ms CPU + {inputs.wait_ms:g} ms waiting per request; "
            f"max_connections {inputs.max_connections} less {inputs.reserved} reserved; longest request "
            f"{inputs.longest_s:g} s; {'behind a proxy' if inputs.proxy else 'no proxy'}")


def answer_rows(result: dict[str, Any]) -> list[str]:
    threads, loop, times = result["models"]["threads"], result["models"]["event-loop"], result["timeouts"]
    cpu = (f"{result['cpu_needed']:.2f} of {result['cpu_capacity']:g} CPUs" if result["cpu_fits"] else
           f"**does not fit**: {result['cpu_needed']:.2f} CPUs of work, {result['cpu_capacity']:g} to give")
    usable = f"{result['usable_cpus']}" + (" (past two CPUs: not measured here)" if result["beyond_measured"] else "")
    return [f"| CPU work × headroom | {cpu} |", f"| usable CPUs | {usable} |",
            f"| Gunicorn gthread | {threads['workers']} workers × {threads['threads']} threads; pool "
            f"{threads['pool_per_worker']} per worker, {threads['pool_total']} in all; "
            f"{threads['database']['at_restart']} during a restart of {threads['database']['budget']}: "
            f"{VERDICTS[threads['database']['verdict']]} |",
            f"| uvicorn / Granian | {loop['workers']} workers; pool {loop['pool_per_worker']} per worker, "
            f"{loop['pool_total']} in all; cap {loop['admission_per_worker']} per worker; "
            f"{loop['database']['at_restart']} during a restart of {loop['database']['budget']}: "
            f"{VERDICTS[loop['database']['verdict']]} |",
            f"| timeouts | keep-alive {times['server_keepalive_s']} s (proxy {times['proxy_keepalive_s']} s), graceful "
            f"{times['graceful_s']} s, proxy read {times['proxy_read_timeout_s']} s |"]


def examples_page() -> str:
    """Each example's inputs and answer; the first one's configuration in full."""
    parts = []
    for index, (title, inputs) in enumerate(EXAMPLES):
        result = recipe(inputs)
        parts.append(f"**{title}**: {inputs_line(inputs)}.\n\n| | the recipe |\n|---|---|\n"
                     + "\n".join(answer_rows(result)) + "\n")
        if index == 0:
            parts.append(configuration_blocks(result))
    return "\n".join(parts)


def configuration_blocks(result: dict[str, Any]) -> str:
    return ("\n".join([
        '??? example "Its configuration: gunicorn.conf.py, uvicorn, Granian, nginx"',
        "", '    ```py title="gunicorn.conf.py"',  # `py`: highlighted as Python, not run as a page's command *("    " + line for line in gunicorn_conf(result).splitlines()),
        "    ```", "", "    ```text", "    " + uvicorn_command(result), "    " + granian_command(result), "    ```", "",
        '    ```nginx title="nginx: the upstream and its location"',
        *("    " + line for line in nginx_upstream(result).splitlines()), "    ```"]) + "\n")


def latency(cell: OverloadCell) -> Any:
    return cell.latency_ms_2xx


def ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def predicted_label(prediction: dict[str, Any], model: str) -> str:
    if prediction["within"]:
        return f"all answered, p99 ≤ {ms(prediction['p99_bound_ms'])} ms"
    if model == "threads":
        return f"{prediction['answered_rps']:,.0f}/s answered, a queue: the last waits ~{prediction['last_wait_s']:g} s"
    return (f"{prediction['answered_rps']:,.0f}/s answered, {prediction['refused_share']:.0%} refused (503), "
            f"what it admits takes ≤ {ms(prediction['mean_bound_ms'])} ms on average")


def held(cell: OverloadCell, prediction: dict[str, Any]) -> str:
    """✓ where the measurement is what the recipe predicted, ✗ where not."""
    lat = latency(cell)
    p99 = lat.p99 if lat else None
    served = (cell.status_counts or {}).get("200", 0)
    sent = cell.requests_sent or 0
    if prediction["within"]:
        ok = bool(sent) and served >= 0.99 * sent and p99 is not None and p99 <= prediction["p99_bound_ms"]
    elif "last_wait_s" in prediction:  # a queue: about the capacity answered (within 10%), and late
        ok = (0.9 * prediction["answered_rps"] <= (cell.requests_per_second or 0) <= 1.1 * prediction["answered_rps"]
              and p99 is not None
              and p99 > 1000 * prediction["last_wait_s"] / 2)  # the queue shows: p99 past half the last one's wait
    else:  # refusals, and by Little's law the admitted requests' mean: cap / capacity
        ok = lat is not None and lat.mean is not None and lat.mean <= prediction["mean_bound_ms"] and (
            cell.answers(503) > 0)
    return "✓" if ok else "✗"


def run_name(run: CheckRun, result: dict[str, Any]) -> str:
    """The configuration as the table names it: its counts, and the repeat."""
    counts = result["models"]["threads" if run.model == COUNTER_EXAMPLE else run.model]
    counts_text = (f"{counts['workers']} worker, pool {counts['pool_per_worker']}, cap {counts['admission_per_worker']}"
                   if run.model == "event-loop" else f"{counts['workers']} × {counts['threads']} threads")
    return f"{MODEL_NAMES[run.model]}: {counts_text} (run {run.repeat + 1})"


def measured_cells(cell: OverloadCell) -> str:
    """answered 2xx/s, 503, no answer, mean, p50 and p99 ms: the measured columns of one row."""
    lat = latency(cell)
    return (f"{cell.requests_per_second or 0:,.0f} | {cell.answers(503)} | {cell.failed or 0} | "
            f"{ms(lat.mean if lat else None)} | {ms(lat.p50 if lat else None)} | {ms(lat.p99 if lat else None)}")


def check_table(record: CheckRecord | None) -> str:
    if record is None:
        return ("*Not measured yet: no `results/deployment/recipe-check.json`. `python scripts/bench.py recipe check` "
                "measures it (about four minutes).*\n")
    result = record.recipe
    now = recipe(record.plan.inputs())
    stale = "" if now == result else (
        "\n**The rules changed since this run: the configurations measured are not what the recipe gives now. "
        "Re-run `python scripts/bench.py recipe check`.**\n")
    lines = ["| configuration | offered | predicted | answered 2xx/s | 503 | no answer | mean ms | p50 ms | p99 ms "
             "| as predicted |", "|---|--:|---|--:|--:|--:|--:|--:|--:|:-:|"]
    for run in sorted(record.runs, key=lambda run: (list(MODEL_NAMES).index(run.model), run.repeat)):  # by config
        name = run_name(run, result)
        judged = "threads" if run.model == COUNTER_EXAMPLE else run.model  # the same prediction, without the rule
        if run.error and not run.cells:
            lines.append(f"| {name} | | failed: {run.error[:100]} | | | | | | | |")
            continue
        if run.warmup is not None:
            lines.append(f"| {name} | {run.warmup.rate or 0:g}/s, its first {record.plan.warmup_seconds:g} s "
                         f"(warm-up) | not judged: starting | {measured_cells(run.warmup)} | – |")
        for cell in run.cells:
            prediction = predict(result, judged, cell.rate or 0, record.plan.schedule_seconds)
            lines.append(f"| {name} | {cell.rate or 0:g}/s ({cell.multiple or 0:g}×) | "
                         f"{predicted_label(prediction, judged)} | {measured_cells(cell)} | {held(cell, prediction)} |")
    ceiling = record.ceiling[0] if record.ceiling else None
    late = ceiling.late_ms.p99 if ceiling and ceiling.late_ms else None
    plan = record.plan
    warmup = (f"each fresh stack first took the sized rate for {plan.warmup_seconds:g} s (its warm-up row, not "
              "judged), then " if plan.warmup_seconds else "")
    database_pinned = (record.database_command or [""])[0] == "taskset"
    caption = (f"\n*{plan.title}. Inputs: {inputs_line(plan.inputs())}. Vegeta (open loop, a new connection per "
               f"request to nginx): {warmup}each rate for {plan.schedule_seconds:g} s, the same server taking the "
               f"sized rate, then twice it; {plan.repeat} fresh servers per configuration. Latency of the 2xx "
               f"answers, from when vegeta sent the request; ✓ as the text below says. The server, nginx"
               f"{' and PostgreSQL' if database_pinned else ''} share CPU {record.environment.pinning.server_cpu}, "
               f"vegeta has CPU "
               f"{record.environment.pinning.load_tool_cpu}. The tool's ceiling: nginx alone at "
               f"{ceiling.rate or 0:g}/s answered {ceiling.requests_per_second or 0:,.0f}/s"
               f"{f', vegeta p99 {late:g} ms behind its schedule' if late is not None else ''}. "
               f"Record `results/{CHECK_PATH}`, commit `{record.environment.commit[:10]}`, "
               f"{record.started_utc[:10]}.*\n" if ceiling else "")
    return wide_table("\n".join(lines)) + caption + stale


def spread(values: list[float], unit: str = " ms", scale: float = 1.0) -> str:
    """The runs' values as 'a-b unit' (or one value): what a finding quotes."""
    shown = sorted({ms(value / scale) if unit == " ms" else f"{value / scale:,.{1 if scale > 1 else 0}f}"
                    for value in values}, key=lambda text: float(text.replace(",", "")))
    return (shown[0] if len(shown) == 1 else f"{shown[0]}–{shown[-1]}") + unit if shown else "–"


def check_findings(record: CheckRecord | None) -> str:
    """What the check's record shows against the prediction, one bullet a configuration and rate, every figure
    from the record (the page's prose says how to read them)."""
    if record is None:
        return "*Not measured yet.*\n"
    result, plan = record.recipe, record.plan
    bullets = []
    for model in ("threads", COUNTER_EXAMPLE, "event-loop"):
        runs = [run for run in record.runs if run.model == model and run.cells]
        if not runs:
            continue
        judged = "threads" if model == COUNTER_EXAMPLE else model
        name = MODEL_NAMES[model]
        for multiple in sorted({cell.multiple or 0 for run in runs for cell in run.cells}):
            cells = [cell for run in runs for cell in run.cells if cell.multiple == multiple]
            prediction = predict(result, judged, cells[0].rate or 0, plan.schedule_seconds)
            verdicts = [held(cell, prediction) for cell in cells]
            runs_text = {1: "", 2: " in either run"}.get(len(cells), f" in any of its {len(cells)} runs")
            held_text = ("as predicted" + (f" in all {len(cells)} runs" if len(cells) > 1 else "")
                         if "✗" not in verdicts else "**not** as predicted" + runs_text if "✓" not in verdicts
                         else f"as predicted in {verdicts.count('✓')} of {len(cells)} runs")
            p99s = [cell.latency_ms_2xx.p99 for cell in cells if cell.latency_ms_2xx and cell.latency_ms_2xx.p99]
            means = [cell.latency_ms_2xx.mean for cell in cells if cell.latency_ms_2xx and cell.latency_ms_2xx.mean]
            rates = [cell.requests_per_second or 0 for cell in cells]
            if prediction["within"]:
                text = (f"**{name} at the sized rate** ({multiple:g}×): p99 {spread(p99s)} against the "
                        f"{ms(prediction['p99_bound_ms'])} ms bound, {held_text}.")
            elif "last_wait_s" in prediction:
                text = (f"**{name} at {multiple:g}× the rate**: answered {spread(rates, '/s')} of the "
                        f"{prediction['answered_rps']:,.0f}/s predicted and queued the rest, p99 "
                        f"{spread(p99s, ' s', 1000)}, {held_text}.")
            else:
                refused = [cell.answers(503) / cell.requests_sent for cell in cells if cell.requests_sent]
                text = (f"**{name} at {multiple:g}× the rate**: refused {spread([100 * r for r in refused], '%')} "
                        f"with 503 ({prediction['refused_share']:.0%} predicted); what it admitted took "
                        f"{spread(means)} on average (≤ {ms(prediction['mean_bound_ms'])} ms predicted), p99 "
                        f"{spread(p99s)}: {held_text}.")
            bullets.append(f"- {text}")
        warmups = [run.warmup for run in runs if run.warmup and run.warmup.latency_ms_2xx]
        if warmups:
            bullets.append(f"- {name}, its first {plan.warmup_seconds:g} s after a start (the warm-up, not judged): "
                           f"p99 {spread([cell.latency_ms_2xx.p99 for cell in warmups if cell.latency_ms_2xx.p99])}.")
    return "\n".join(bullets) + "\n"


def quota_table(record: QuotaRecord | None) -> str:
    if record is None:
        return ("*Not measured yet: no `results/deployment/cpu-quota.json`. `python scripts/bench.py recipe quota` "
                "measures it (as root, where the cpu controller exists).*\n")
    lines = ["| workers | sized by | usable_cpus() / os.cpu_count() inside | req/s | p99 ms | throttled periods "
             "| throttled s | errors |", "|--:|---|--:|--:|--:|--:|--:|--:|"]
    for run in sorted(record.runs, key=lambda run: (-run.workers, run.repeat)):
        if run.error:
            lines.append(f"| {run.workers} | {run.sized_by} | | failed: {run.error[:100]} | | | | |")
            continue
        share = (f"{run.throttled_periods} of {run.periods} ({run.throttled_periods / run.periods:.0%})"
                 if run.periods else "–")
        lines.append(f"| {run.workers} | {run.sized_by} | {run.usable_cpus} / {run.cpu_count} | "
                     f"{run.requests_per_second or 0:,.0f} | {ms(run.latency_ms.p99 if run.latency_ms else None)} | "
                     f"{share} | {run.throttled_s:g} | {run.errors} |")
    plan = record.plan
    caption = (f"\n*{plan.title}. A fresh cgroup (v{record.cgroup_version}) per run with cpu.cfs_quota_us = "
               f"{plan.quota_us:,} in every cpu.cfs_period_us = {plan.period_us:,}: "
               f"{plan.quota_us / plan.period_us:g} CPU of time; the server may run on CPUs "
               f"{record.environment.pinning.server_cpu}, wrk ({plan.connections} connections, {plan.seconds:g} s) "
               f"is pinned to CPU {record.environment.pinning.load_tool_cpu} outside the group. Throttling is "
               f"cpu.stat's over the load alone. Record `results/{QUOTA_PATH}`, commit "
               f"`{record.environment.commit[:10]}`, {record.started_utc[:10]}.*\n")
    return wide_table("\n".join(lines)) + caption


def quota_medians(record: QuotaRecord | None) -> dict[int, dict[str, float]]:
    """Per worker count, the median rate, p99 and throttled share over its runs (for the prose's figures)."""
    out: dict[int, dict[str, float]] = {}
    if record is None:
        return out
    for workers in sorted({run.workers for run in record.runs}):
        runs = [run for run in record.runs if run.workers == workers and not run.error and run.latency_ms]
        if runs:
            out[workers] = {"rps": statistics.median(run.requests_per_second or 0 for run in runs),
                            "p99": statistics.median(run.latency_ms.p99 or 0 for run in runs if run.latency_ms),
                            "throttled": statistics.median(run.throttled_periods / run.periods if run.periods else 0
                                                           for run in runs)}
    return out


def recipe_files(results_dir: Path, generated_dir: Path) -> dict[Path, str]:
    """Every generated file of the recipe page."""
    out = generated_dir / "recipe"
    check = read_record(results_dir / CHECK_PATH, CheckRecord)
    quota = read_record(results_dir / QUOTA_PATH, QuotaRecord)
    text = json.dumps(rules_json(), indent=1, ensure_ascii=False) + "\n"
    if "</" in text:
        raise ValueError("rules.json holds '</', which would end the page's <script> element early")
    return {
        out / "rules.json": text,
        out / "rules.md": HEADER.format(source="scripts/harness/model/deployment_recipe.py") + "\n" + rules_table(),
        out / "examples.md": HEADER.format(source="scripts/harness/model/deployment_recipe.py") + "\n" + examples_page(),
        out / "check.md": HEADER.format(source=f"results/{CHECK_PATH}") + "\n" + check_table(check),
        out / "check-findings.md": HEADER.format(source=f"results/{CHECK_PATH}") + "\n" + check_findings(check),
        out / "quota.md": HEADER.format(source=f"results/{QUOTA_PATH}") + "\n" + quota_table(quota),
    }
