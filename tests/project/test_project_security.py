"""The project's own security (issue 9, section 4): loopback by default, and workflows that cannot be turned.

- Every HTTP design, hand-written or real, listens on 127.0.0.1 only when the harness
  starts it, and the real servers' own defaults are loopback too
  (tests/servers/test_behaviour.py checks our Python files' --host default).
- Every workflow grants nothing at the top and least privilege per job, pins each
  action to a full commit SHA with its version in a comment, never runs on
  pull_request_target, and never interpolates an expression into a `run:` script.
- zizmor, run offline, finds nothing of medium severity or above.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from harness.model.catalogue import Design
from harness.model.paths import REPO_ROOT

from conftest import started

WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"#\s*v\d+(\.\d+)*\s*$")
LISTEN = "0A"


def socket_inodes(pgid: int) -> set[str]:
    """The socket inodes every process of the group holds open."""
    inodes = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat[stat.rindex(")") + 2:].split()[2]) != pgid:
                continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def listening_addresses(inodes: set[str]) -> list[str]:
    """Local addresses (hex, as /proc/net/tcp{,6} writes them) of the listening sockets among `inodes`."""
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text(encoding="ascii").splitlines()[1:]:
            fields = row.split()
            if fields[3] == LISTEN and fields[9] in inodes:
                addresses.append(fields[1].rsplit(":", 1)[0])
    return addresses


def test_every_design_listens_on_loopback_only(http_design: Design, tmp_path: Path) -> None:
    """Every listening socket of the whole process group (master and workers) is 127.0.0.1."""
    with started(http_design, tmp_path) as server:
        addresses = listening_addresses(socket_inodes(server.process.pid))
    assert addresses, "no listening socket found in the design's process group"
    assert set(addresses) == {"0100007F"}, f"{http_design.name} listens on {addresses} (0100007F is 127.0.0.1)"


def test_the_real_servers_default_to_loopback_when_no_host_is_given() -> None:
    import uvicorn

    for config in ("servers/gunicorn_sync.conf.py", "servers/gunicorn_gevent.conf.py"):
        binds = runpy.run_path(str(REPO_ROOT / config))["bind"]
        assert all(bind.startswith("127.0.0.1:") for bind in binds), (config, binds)
    assert uvicorn.Config(app=None).host == "127.0.0.1"
    for template in ("servers/nginx.conf", "servers/nginx_reverse_proxy.conf"):
        listens = re.findall(r"^\s*listen\s+([^;]+);", (REPO_ROOT / template).read_text(), flags=re.M)
        assert listens and all(listen.startswith("@HOST@:") for listen in listens), (template, listens)


def load_workflow(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_a_workflow_grants_nothing_at_the_top_and_least_privilege_per_job(path: Path) -> None:
    workflow = load_workflow(path)
    assert workflow.get("permissions") == {}, "top-level permissions must be {} (each job asks for its own)"
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"job {name} does not say which permissions it needs"
        granted = {scope for scope, level in job["permissions"].items() if level == "write"}
        assert granted <= {"contents", "pages", "id-token"}, (name, granted)


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_a_workflow_pins_every_action_to_a_commit_with_its_version_beside_it(path: Path) -> None:
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\s*-?\s*uses:\s*(\S+)(.*)$", line)
        if match is None or match.group(1).startswith("./"):
            continue  # a workflow of this repository
        assert PINNED.match(match.group(1)), f"not pinned to a full commit SHA: {line.strip()}"
        assert VERSION_COMMENT.search(match.group(2)), f"no `# vX.Y.Z` comment saying which version: {line.strip()}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_a_workflow_never_runs_untrusted_code_with_secrets(path: Path) -> None:
    workflow = load_workflow(path)
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as True
    assert "pull_request_target" not in (triggers if isinstance(triggers, (dict, list)) else [triggers])
    for name, job in workflow["jobs"].items():
        for step in job.get("steps", []):
            assert "${{" not in step.get("run", ""), (
                f"job {name}, step {step.get('name', step.get('uses'))}: an expression inside run: is "
                "pasted into the script before it runs; pass it through env: instead")


def zizmor(directory: Path) -> subprocess.CompletedProcess[str]:
    """zizmor offline (no GitHub API), reporting medium severity and above; exit 0 means none."""
    executable = Path(sys.executable).parent / "zizmor"
    assert executable.exists(), "zizmor is installed from requirements.lock by `make install`"
    return subprocess.run([str(executable), "--offline", "--no-progress", "--min-severity", "medium", "--format", "plain",
                           str(directory)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_zizmor_finds_nothing_of_medium_severity_or_above() -> None:
    result = zizmor(REPO_ROOT / ".github" / "workflows")
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_would_catch_an_injection(tmp_path: Path) -> None:
    """The audit above can fail: an issue title pasted into run: is reported."""
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    (workflows / "bad.yml").write_text(
        "on: issues\npermissions: {}\njobs:\n  greet:\n    runs-on: ubuntu-latest\n    permissions: {}\n"
        "    steps:\n      - run: echo \"${{ github.event.issue.title }}\"\n", encoding="utf-8")
    result = zizmor(workflows)
    assert result.returncode != 0 and "template-injection" in result.stdout, result.stdout + result.stderr
