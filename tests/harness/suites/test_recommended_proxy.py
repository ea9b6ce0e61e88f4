"""Every "behind nginx" measurement goes through nginx as the site recommends it (issue 31, finding 1).

The site recommends client keep-alive, `proxy_http_version 1.1`, a `keepalive` cache in the upstream block and an
empty Connection header (docs/deployment.md, servers/nginx_upstream_keep_alive.conf): only then can a second
request share a connection to the design with the first, which is where a smuggled request goes. A proxy without
them (servers/nginx_reverse_proxy.conf) cannot smuggle, so a suite measured through it says nothing about the
reader's set-up. The suites that put designs behind nginx (hostile, conformance: suites/subjects.PROXY_TEMPLATE),
every `proxy` in the catalogue and the committed records must use a config that keeps its connections alive; a
scenario may keep the HTTP/1.0 proxy only by saying why in `proxy_http_1_0`, naming a page that explains it.
"""

from __future__ import annotations

import json
import re

import pytest

from harness.model.catalogue import CATALOGUE_DIR, load_catalogue
from harness.model.paths import REPO_ROOT
from harness.suites import subjects

RECOMMENDED = "servers/nginx_upstream_keep_alive.conf"
HTTP_1_0 = "servers/nginx_reverse_proxy.conf"


def _without_comments(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def missing_keep_alive(text: str) -> list[str]:
    """What an nginx config lacks of the recommended proxy: [] when it keeps client and upstream connections."""
    config = _without_comments(text)
    upstream = re.search(r"upstream\s+\w+\s*\{(?P<body>[^}]*)\}", config)
    missing = []
    if upstream is None or not re.search(r"^\s*keepalive\s+[1-9]\d*\s*;", upstream["body"], re.MULTILINE):
        missing.append("`keepalive N` in the upstream block")
    if not re.search(r"^\s*proxy_http_version\s+1\.1\s*;", config, re.MULTILINE):
        missing.append("`proxy_http_version 1.1`")
    if not re.search(r'^\s*proxy_set_header\s+Connection\s+""\s*;', config, re.MULTILINE):
        missing.append('`proxy_set_header Connection ""`')
    if re.search(r"^\s*keepalive_timeout\s+0\s*;", config, re.MULTILINE):
        missing.append("client keep-alive (`keepalive_timeout 0` turns it off)")
    return missing


def config_problems(path: str) -> list[str]:
    return missing_keep_alive((REPO_ROOT / path).read_text(encoding="utf-8"))


def unexplained(proxied: dict[str, tuple[str, str | None]]) -> list[str]:
    """Scenario id -> (its proxy, its proxy_http_1_0): each one measured through a proxy that lacks keep-alive
    without a reason that names a page which mentions that proxy."""
    found = []
    for scenario, (proxy, reason) in proxied.items():
        problems = config_problems(proxy)
        if not problems:
            continue
        page = (reason or "").split(":", 1)[0].strip()
        if not page.startswith("docs/") or not (REPO_ROOT / page).is_file():
            found.append(f"{scenario}: {proxy} lacks {', '.join(problems)} and `proxy_http_1_0` names no page")
        elif proxy.rsplit("/", 1)[-1] not in (REPO_ROOT / page).read_text(encoding="utf-8"):
            found.append(f"{scenario}: {page} does not mention {proxy}, so it cannot explain it")
    return found


def test_the_recommended_proxy_keeps_connections() -> None:
    assert config_problems(RECOMMENDED) == []


def test_the_http_1_0_proxy_is_caught() -> None:
    """The guard can fail: the HTTP/1.0 proxy lacks all four, and dropping one line of the recommended one is seen."""
    assert len(config_problems(HTTP_1_0)) == 4
    recommended = (REPO_ROOT / RECOMMENDED).read_text(encoding="utf-8")
    assert missing_keep_alive(recommended.replace("keepalive 256;", "")) == ["`keepalive N` in the upstream block"]


def test_suites_put_designs_behind_the_recommended_proxy() -> None:
    assert subjects.PROXY_TEMPLATE == RECOMMENDED
    assert config_problems(subjects.PROXY_TEMPLATE) == []


def test_every_catalogue_proxy_keeps_connections_or_says_why() -> None:
    catalogue = load_catalogue()
    proxied = {}
    for scenario in catalogue.scenarios.values():
        settings = scenario.settings(quick=False)
        if settings.proxy:
            proxied[scenario.id] = (settings.proxy, settings.proxy_http_1_0)
    assert proxied, "no scenario measures behind nginx: the guard has nothing to check"
    assert unexplained(proxied) == []
    # any other `proxy = ...` in the catalogue (the deployment suite's tables) has no way to explain itself
    for path in sorted(CATALOGUE_DIR.rglob("*.toml")):
        for proxy in re.findall(r'^\s*proxy\s*=\s*"([^"]+)"', path.read_text(encoding="utf-8"), re.MULTILINE):
            if proxy not in {value for value, _ in proxied.values()}:
                assert config_problems(proxy) == [], f"{path.name}: {proxy}"


def test_a_scenario_without_a_reason_is_caught() -> None:
    assert unexplained({"x": (HTTP_1_0, None)}) != []
    assert unexplained({"x": (HTTP_1_0, "docs/index.md: because")}) != []  # a page that never names the proxy
    assert unexplained({"x": (RECOMMENDED, None)}) == []


@pytest.mark.parametrize("record", ["conformance.json", "hostile.json", "deployment/slow-clients/hostile.json"])
def test_behind_nginx_records_were_measured_through_the_recommended_proxy(record: str) -> None:
    data = json.loads((REPO_ROOT / "results" / record).read_text(encoding="utf-8"))
    proxy = data.get("proxy") or data.get("settings", {}).get("proxy")
    assert proxy, f"results/{record} does not say which proxy its designs sat behind: re-measure it"
    assert config_problems(proxy) == [], f"results/{record} was measured behind {proxy}"

