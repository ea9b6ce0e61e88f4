"""Adding a design is a command: `bench.py new-design NAME --grows-from OTHER` (issue 30, item 4).

The refusals are checked here, on the real catalogue, without writing anything. The command itself
runs once in a scratch copy of the repository (the tracked files and the uncommitted ones git does
not ignore, plus the site's fetched assets), rendered first: there, the new design keeps the HTTP contract
(`bench.py check`), the site builds strictly, `render --check` passes, the files the command changed
are the ones README.md's "Adding a design" lists, and a second run refuses and writes nothing.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import bench
import pytest
from harness.model import new_design
from harness.model.catalogue import load_catalogue
from harness.model.paths import REPO_ROOT

NAME, OTHER, TITLE = "pool-of-four", "thread-pool-queue", "A pool of four threads"
PYTHON = sys.executable
COMMAND = ["scripts/bench.py", "new-design", NAME, "--grows-from", OTHER, "--title", TITLE]
IGNORED_BUT_NEEDED = ["build/site-assets"]  # fetched by `make install`; the strict build needs them


# --- refusals: nothing written ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "other", "message"), [
    ("thread-pool-executor", OTHER, "exists already"),
    (NAME, "thread-pool-queu", "did you mean thread-pool-queue"),
    (NAME, "uvicorn", "one of our own Python servers"),
    (NAME, "nginx", "one of our own Python servers"),
    ("Pool_Of_Four", OTHER, "not a design name"),
    ("wsgi-app", OTHER, "servers/wsgi_app.py exist"),  # a file that is no design's name is still taken
])
def test_the_command_refuses_bad_input_with_exit_2_and_writes_nothing(
        name: str, other: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    catalogue = load_catalogue()
    assert "wsgi-app" not in catalogue.designs
    before = snapshot(REPO_ROOT, ["servers", "docs/designs", "scripts/catalogue", "mkdocs.yml"])
    with pytest.raises(new_design.NewDesignError, match=re.escape(message)):
        new_design.plan(catalogue, name, other)
    assert bench.main(["new-design", name, "--grows-from", other]) == bench.EXIT_BAD_INPUT
    assert message in capsys.readouterr().err
    assert snapshot(REPO_ROOT, ["servers", "docs/designs", "scripts/catalogue", "mkdocs.yml"]) == before


def test_the_plan_names_the_new_design_and_keeps_the_model() -> None:
    """The server file differs from its parent only in the docstring; the page opens with the model."""
    planned = new_design.plan(load_catalogue(), NAME, OTHER, TITLE)
    other = load_catalogue().design(OTHER)
    server = planned.files[REPO_ROOT / planned.server_file]
    parent = (REPO_ROOT / other.file).read_text(encoding="utf-8")
    assert server.startswith(f'"""{TITLE} (the design {NAME}): it grows from thread_pool_queue.py.\n')
    assert re.search(r"^Grows from: thread_pool_queue\.py ", server, re.M)
    assert server.split('"""', 2)[2] == parent.split('"""', 2)[2]  # the code after the docstring, unchanged
    page = planned.files[REPO_ROOT / "docs" / planned.page]
    assert page.index('--8<-- "servers/pool_of_four.py:model"') < page.index('--8<-- "servers/pool_of_four.py"\n')
    assert '--8<-- "docs/_generated/designs/pool-of-four.md"' in page
    assert "TODO" not in page and "TODO" not in server


# --- the command, in a scratch copy -----------------------------------------------------------------------------


def snapshot(root: Path, parts: list[str] | None = None) -> dict[str, str]:
    """path -> sha256 of every file under root (or under the given parts of it), caches and builds aside."""
    found = {}
    for start in [root / part for part in parts] if parts else [root]:
        for path in [start] if start.is_file() else start.rglob("*"):
            relative = path.relative_to(root)
            if path.is_file() and not {"__pycache__", ".pytest_cache", "build", "site"} & set(relative.parts):
                found[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def copy_repository(target: Path) -> None:
    """The working tree as git sees it (tracked and untracked-not-ignored files), and the site's assets."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO_ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is skipped
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    for name in IGNORED_BUT_NEEDED:
        if (REPO_ROOT / name).exists():
            shutil.copytree(REPO_ROOT / name, target / name)


@dataclass
class Scratch:
    root: Path
    changed: set[str]  # files the command wrote or changed
    site: Path  # where the copy's strict build went
    after: dict[str, subprocess.CompletedProcess[str]]  # the checks run in the copy once the command wrote it


def checks_after(root: Path, site_dir: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """The three checks of the written copy, run at once (each reads the copy, none writes to what another reads;
    one after another they were 75 s of this file's 178 s beside a busy loop): the new design's HTTP contract, the
    strict build with its page, and `render --check`."""
    commands = {
        "check": [PYTHON, "scripts/bench.py", "check", NAME],
        "build": [PYTHON, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site_dir)],
        "render --check": [PYTHON, "scripts/bench.py", "render", "--check"],
    }
    with concurrent.futures.ThreadPoolExecutor(len(commands)) as pool:
        futures = {name: pool.submit(subprocess.run, command, cwd=root, capture_output=True, text=True, timeout=300)
                   for name, command in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def run(root: Path, *arguments: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, *arguments], cwd=root, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory, rendered: dict[Path, str]) -> Scratch:
    root = tmp_path_factory.mktemp("new-design") / "repo"
    copy_repository(root)
    # A shared tree may hold records not rendered yet, and what the command changes is measured from a render: the
    # run's one render of results/ (conftest's `rendered`: every generated file `bench.py render` writes from the
    # records; the files it keeps in step with the catalogue, such as servers/README.md, come from the tree as they
    # are) goes into the copy first.
    for path, text in rendered.items():
        (root / path.relative_to(REPO_ROOT)).parent.mkdir(parents=True, exist_ok=True)
        (root / path.relative_to(REPO_ROOT)).write_text(text, encoding="utf-8")
    before = snapshot(root)
    made = run(root, *COMMAND, timeout=300)  # it renders the whole site: 120 s was too short beside a busy loop
    assert made.returncode == 0, made.stdout + made.stderr
    after = snapshot(root)
    changed = {path for path, digest in after.items() if before.get(path) != digest}
    site = root.parent / "site"
    return Scratch(root, changed, site, checks_after(root, site))


def readme_steps() -> list[str]:
    """The paths README.md's "Adding a design" says the command writes (backticked, with <name> placeholders)."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Adding a design", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `([^`]+)`", section, re.M)


def test_the_command_writes_what_the_readme_lists(scratch: Scratch) -> None:
    patterns = [step.replace("<name_with_underscores>", NAME.replace("-", "_")).replace("<name>", NAME)
                for step in readme_steps()]
    assert len(patterns) >= 6, patterns
    unlisted = sorted(path for path in scratch.changed if not any(fnmatch(path, pattern) for pattern in patterns))
    assert unlisted == [], "the command wrote files README.md's list does not name"
    unwritten = [pattern for pattern in patterns if not pattern.startswith("docs/plots/")  # only when markers move
                 and not any(fnmatch(path, pattern) for path in scratch.changed)]
    assert unwritten == [], "README.md lists files the command did not write"


def test_the_new_design_keeps_the_http_contract(scratch: Scratch) -> None:
    checked = scratch.after["check"]
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{NAME}: OK" in checked.stdout


def test_the_site_builds_strictly_with_the_new_page(scratch: Scratch) -> None:
    built = scratch.after["build"]
    assert built.returncode == 0, built.stderr[-4000:]
    assert (scratch.site / "designs" / NAME / "index.html").exists()


def test_the_generated_files_are_up_to_date(scratch: Scratch) -> None:
    checked = scratch.after["render --check"]
    assert checked.returncode == 0, checked.stderr[-4000:]


def test_a_second_run_refuses_and_writes_nothing(scratch: Scratch) -> None:
    before = snapshot(scratch.root)
    again = run(scratch.root, *COMMAND)
    assert again.returncode == bench.EXIT_BAD_INPUT
    assert "exists already" in again.stderr
    assert snapshot(scratch.root) == before
