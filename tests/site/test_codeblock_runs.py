"""The code-block runner (tests/codeblock_runs.py): server/client marks on a page, run by a real pytest."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from harness.model.paths import REPO_ROOT
from harness.system import processes

# Listens, and on SIGINT writes "stopping badly" to stderr and exits with status 1.
LISTENER = ("python -c \"import signal, socket, sys, time; signal.signal(signal.SIGINT, lambda *_: sys.exit('stopping badly')); "
            "s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)\"")


def run_page(tmp_path: Path, page: str, *options: str) -> subprocess.CompletedProcess[str]:
    """pytest on one markdown page with the project's settings and the runner loaded, as `make test` runs docs/."""
    path = tmp_path / "page.md"
    path.write_text(page, encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.codeblock_runs", *options,
               "-c", str(REPO_ROOT / "pyproject.toml"), "--rootdir", str(REPO_ROOT), str(path)]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)})


def test_a_pair_runs_the_server_and_its_client_and_leaves_nothing_behind(tmp_path: Path) -> None:
    port = processes.free_port()
    page = (f"# A page\n\n<!--pytest.mark.server(port={port})-->\n```bash\n"
            f"python -m http.server {port} --bind 127.0.0.1\n```\n\n"
            "<!--pytest.mark.client-->\n```bash\n"
            f'test "$VIRTUAL_ENV" = "{REPO_ROOT}/.venv" && test "$PWD" = "{REPO_ROOT}"\n'
            f"curl -sf http://127.0.0.1:{port}/ > /dev/null\n```\n")
    result = run_page(tmp_path, page)
    assert "2 passed" in result.stdout, result.stdout[-3000:]
    assert subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout == ""


def test_a_server_that_does_not_exit_cleanly_on_ctrl_c_fails(tmp_path: Path) -> None:
    port = processes.free_port()
    page = f"# A page\n\n<!--pytest.mark.server(port={port})-->\n```bash\n{LISTENER.format(port=port)}\n```\n"
    result = run_page(tmp_path, page)
    assert "1 failed" in result.stdout and "exited with 1 after SIGINT" in result.stdout, result.stdout[-3000:]
    assert "stopping badly" in result.stdout  # its stderr is in the report


def test_a_documented_exit_status_is_accepted(tmp_path: Path) -> None:
    port = processes.free_port()
    page = f"# A page\n\n<!--pytest.mark.server(port={port}, exit=1)-->\n```bash\n{LISTENER.format(port=port)}\n```\n"
    assert "1 passed" in run_page(tmp_path, page).stdout


def test_a_failing_client_fails_and_its_server_is_stopped(tmp_path: Path) -> None:
    port = processes.free_port()
    page = (f"# A page\n\n<!--pytest.mark.server(port={port})-->\n```bash\n"
            f"python -m http.server {port} --bind 127.0.0.1\n```\n\n"
            "<!--pytest.mark.client-->\n```bash\nsleep 30 &\nfalse\n```\n")
    result = run_page(tmp_path, page)
    assert "1 failed, 1 passed" in result.stdout and "exited with 1" in result.stdout, result.stdout[-3000:]
    assert subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout == ""


def test_stop_sigterm_signals_the_command_not_the_shell(tmp_path: Path) -> None:
    """A server that ignores Ctrl-C, stopped as its page says, with `kill -TERM` on its process: status 0."""
    port = processes.free_port()
    server = ("python -c \"import signal, socket, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
              "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
              f"s = socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); time.sleep(60)\"")
    page = f'# A page\n\n<!--pytest.mark.server(port={port}, stop="SIGTERM")-->\n```bash\n{server}\n```\n'
    result = run_page(tmp_path, page)
    assert "1 passed" in result.stdout, result.stdout[-3000:]


def test_a_failing_block_reports_its_exit_status_and_output_even_from_an_xdist_worker(tmp_path: Path) -> None:
    page = "# A page\n\n```bash\necho partial output; echo what went wrong >&2; exit 3\n```\n"
    result = run_page(tmp_path, page, "-n", "1")
    assert "1 failed" in result.stdout and "INTERNALERROR" not in result.stdout + result.stderr, result.stdout[-3000:]
    assert "the block exited 3" in result.stdout
    assert "partial output" in result.stdout and "what went wrong" in result.stdout


def test_the_pages_code_blocks_share_one_xdist_worker() -> None:
    """`make test`'s workers: the pages' plain blocks on one of them, in page order (the next test: the blocks on a
    fixed port on another).

    Guards against a pytest/pytest-xdist pair that ignores the groups silently (pytest 9.2 with
    xdist 3.8 does: pytest-dev/pytest-xdist#1386). The pages live under build/ so that the
    root conftest.py, which sets the groups, applies to them.
    """
    pages = REPO_ROOT / "build" / "test-xdist-groups"
    pages.mkdir(parents=True, exist_ok=True)
    try:
        for name in ("a", "b"):
            (pages / f"{name}.md").write_text("# A page\n\n" + "```bash\necho block\n```\n\n" * 3, encoding="utf-8")
        result = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2",
                                 "--dist", "loadgroup", str(pages)], cwd=REPO_ROOT, capture_output=True, text=True,
                                timeout=120)
    finally:
        for page in pages.glob("*.md"):
            page.unlink()
        pages.rmdir()
    passed = [line for line in result.stdout.splitlines() if " PASSED " in line]
    assert len(passed) == 6, result.stdout[-3000:]
    assert all(line.rstrip().endswith("@code-blocks") for line in passed), passed
    assert len({line.split()[0] for line in passed}) == 1, passed  # one worker, e.g. [gw0]


class CollectedBlock:
    """What the root conftest's pytest_itemcollected reads of a code-block item: its path and marks."""

    def __init__(self, marks: list[str]) -> None:
        self.path = REPO_ROOT / "docs" / "page.md"
        self.marks = [getattr(pytest.mark, name).mark for name in marks]

    def iter_markers(self, name: str) -> list[pytest.Mark]:
        return [mark for mark in self.marks if mark.name == name]

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.marks.append(mark.mark)

    def group(self) -> str:
        (group,) = [mark.args[0] for mark in self.marks if mark.name == "xdist_group"]
        return group


def test_blocks_on_a_fixed_port_share_a_worker_of_their_own() -> None:
    """A page's `server` and `client` blocks listen on the port the page names (8000): all of them on one worker,
    never two at once; every other block on another, beside them."""
    spec = importlib.util.spec_from_file_location("root_conftest", REPO_ROOT / "conftest.py")
    assert spec is not None and spec.loader is not None
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    blocks = {marks: CollectedBlock(list(marks)) for marks in [("server",), ("client",), (), ("skip",)]}
    for block in blocks.values():
        root_conftest.pytest_itemcollected(block)
    assert {marks: block.group() for marks, block in blocks.items()} == {
        ("server",): "code-blocks-on-ports", ("client",): "code-blocks-on-ports", (): "code-blocks",
        ("skip",): "code-blocks"}
