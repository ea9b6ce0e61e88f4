"""The keep-alive hypothesis, judged from two records: the same designs over a slow path, keep-alive on and off.

The hypothesis (docs/keep-alive.md): "Designing Python Web Servers" measured over a
network path of about 70 ms, and keep-alive decided its ranking: the servers that
kept connections alive (NGINX 672 req/s, Waitress 449, Gunicorn gevent 338) beat the
hand-written servers that closed after every answer (about 50 to 80 req/s).

What the records can say: over a path with one-way delay d, c clients can send at
most c / 2d requests a second on kept-alive connections (one round trip each) and
c / 4d when every request opens a connection (a handshake's round trip more). The
rule, written here once and rendered with the numbers it used:

- holds: keep-alive multiplies the measured rate by at least 3/4 of the article's
  gap (its NGINX figure over the median figure of the designs that only close);
- holds in part: the gain falls short of that, but the keep-alive rate of the
  design that reproduces the article's NGINX is within 25% of the article's figure
  (keep-alive explains the fast servers' level, not the slow servers' depth);
- does not hold: neither.
"""

from __future__ import annotations

import statistics

from harness.model.records.scenario_record import Outcome, ScenarioRecord
from harness.render.cells import format_rate, summarise_cell
from harness.render.presentation import design_link

ON_SCENARIO, OFF_SCENARIO = "keep-alive-slow-path-on", "keep-alive-slow-path-off"
NGINX_ATTEMPT = "designing-servers/nginx"
FULL_GAIN_SHARE = 0.75
LEVEL_TOLERANCE = 0.25


def median_rates(record: ScenarioRecord) -> dict[str, float]:
    """Median requests/s of each design that was measured."""
    rates = {}
    for design in record.designs:
        runs = [run for run in design.runs if not run.error]
        if runs:
            rates[design.name] = summarise_cell(runs)["rate"]["median"]
    return rates


def published(record: ScenarioRecord, design: Outcome) -> float | None:
    figures = (record.scenario.published or {}).get("figures", {})  # the catalogue's free-form block
    return next((figures[attempt] for attempt in design.reproduces if attempt in figures), None)


def verdict_page(records: dict[str, ScenarioRecord]) -> str:
    """The comparison table and the verdict, or why there is none yet."""
    if ON_SCENARIO not in records or OFF_SCENARIO not in records:
        return (f"*Not measured yet: the verdict needs `results/{ON_SCENARIO}.json` and `results/{OFF_SCENARIO}.json`; "
                f"`python scripts/bench.py run --scenario {ON_SCENARIO} --quick` (and the same for "
                f"`{OFF_SCENARIO}`) measures them on your machine.*\n")
    on, off = records[ON_SCENARIO], records[OFF_SCENARIO]
    on_rates, off_rates = median_rates(on), median_rates(off)
    one_way_s = off.settings.network_delay_ms / 1000
    clients = off.settings.concurrency[0]
    lines = ["| Design | Keep-alive on, req/s | Keep-alive off, req/s | On ÷ off | Article, req/s |",
             "|---|---|---|---|---|"]
    gains = []
    for design in off.designs:
        name = design.name
        figure = published(off, design)
        on_text = format_rate(on_rates[name]) if name in on_rates else "(closes: not in the keep-alive table)"
        off_text = format_rate(off_rates[name]) if name in off_rates else "not measured"
        gain = on_rates[name] / off_rates[name] if name in on_rates and name in off_rates else None
        if gain is not None:
            gains.append(gain)
        lines.append(f"| {design_link(name, design.title)} | {on_text} | {off_text} | "
                     f"{'–' if gain is None else f'{gain:.1f}×'} | {'–' if figure is None else f'{figure:g}'} |")
    closers = [published(off, design) for design in off.designs if design.name not in on_rates]
    closer_figures = [figure for figure in closers if figure is not None]
    nginx = next((design for design in on.designs if NGINX_ATTEMPT in design.reproduces), None)
    nginx_figure = published(on, nginx) if nginx else None
    if not gains or not closer_figures or nginx is None or nginx_figure is None or nginx.name not in on_rates:
        return "\n".join(lines) + "\n\n*No verdict: the records lack a design measured both ways, or the article's figures.*\n"
    gain = statistics.median(gains)
    article_gap = nginx_figure / statistics.median(closer_figures)
    nginx_level = on_rates[nginx.name] / nginx_figure
    if gain >= FULL_GAIN_SHARE * article_gap:
        verdict = "**The hypothesis holds**: keep-alive alone opens a gap as wide as the article's."
    elif abs(nginx_level - 1) <= LEVEL_TOLERANCE:
        verdict = ("**The hypothesis holds in part**: keep-alive puts the fast servers where the article found "
                   "NGINX, but is worth far less than the article's gap; the slow servers' figures need another cause.")
    else:
        verdict = "**The hypothesis does not hold** on this path: neither the gain nor the level matches the article."
    bound_on, bound_off = clients / (2 * one_way_s), clients / (4 * one_way_s)
    summary = (
        f"Over a {2 * one_way_s * 1000:g} ms round trip, {clients} clients can send at most "
        f"{format_rate(bound_on)} requests a second on kept-alive connections (one round trip each) and "
        f"{format_rate(bound_off)} when every request opens a connection (two). Keep-alive multiplied the measured rate "
        f"by {gain:.1f} (median of the designs measured both ways). In the article, NGINX ({nginx_figure:g} req/s) "
        f"was {article_gap:.1f} times as fast as the median of the servers here that always close "
        f"({statistics.median(closer_figures):g} req/s); `{nginx.name}` with keep-alive reached "
        f"{nginx_level:.0%} of the article's NGINX figure. {verdict}")
    return "\n".join(lines) + "\n\n" + summary + "\n"
