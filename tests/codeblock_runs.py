"""Runs the pages' code blocks the way a reader runs them, including "run it yourself" pairs.

Theory of operation. pytest-codeblocks turns every ```bash/```python block of README.md and docs/
into an item and evaluates each `<!--pytest.mark.X-->` comment before a block as a pytest mark.
This plugin adds two things:

1. Every code-block item runs as the pages tell the reader to: from the repository's root, after
   `source .venv/bin/activate` (docs/_snippets/before-you-run.md), i.e. with `.venv/bin` first on
   PATH and VIRTUAL_ENV set, whatever PATH pytest itself was started with.
2. Two marks (registered in pyproject.toml) make the blocks that "run until Ctrl-C" and the blocks
   "in a second terminal" executable:
   - `server(port=8000, exit=0)` on a block that starts a server: the item starts it exactly as
     written (bash, own process group), waits until the port listens, sends SIGINT to the group
     (what Ctrl-C does) and asserts the exit status (0 unless the mark documents another).
     `stop="SIGTERM"` replaces Ctrl-C with `kill -TERM` for a server whose page says Ctrl-C can hang it.
   - `client` on a block that talks to the server above it: the item starts the nearest preceding
     `server` block of the same page as above, runs the client block exactly as written within
     CLIENT_BUDGET, then stops the server and checks its exit. `client(ports=[8000, 8001])` starts
     the nearest preceding server block for each port (a page that compares two servers).
   Every process group started here is killed in `finally`, on failure and on Ctrl-C too.

Known limits: the pages use fixed ports (8000, 8001), so two test runs on one machine at the same
time would collide; a server item first waits up to PORT_FREE_WAIT for its port to be free and
fails clearly if it stays taken, rather than talking to someone else's server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV = REPO_ROOT / ".venv"
PORT_FREE_WAIT = 60.0  # seconds a server item waits for another run's server to release the port
LISTEN_WAIT = 15.0  # seconds a server may take to start listening
STOP_WAIT = 15.0  # seconds a server may take to exit after SIGINT (gunicorn/uvicorn allow 5 s of grace)
CLIENT_BUDGET = 60.0  # seconds a client block may take
LISTEN = "0A"  # the TCP state "listening" in /proc/net/tcp


def activated_environment() -> dict[str, str]:
    """os.environ as `source .venv/bin/activate` leaves it: .venv/bin first on PATH, VIRTUAL_ENV set."""
    environment = dict(os.environ)
    environment.pop("PYTHONHOME", None)
    environment["VIRTUAL_ENV"] = str(VENV)
    path = [entry for entry in environment.get("PATH", "").split(os.pathsep) if entry and entry != str(VENV / "bin")]
    environment["PATH"] = os.pathsep.join([str(VENV / "bin"), *path])
    return environment


def listening(port: int) -> bool:
    """Whether some socket listens on `port` (IPv4 or IPv6), read from /proc/net/tcp{,6} without connecting."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for row in Path(table).read_text(encoding="ascii").splitlines()[1:]:
                fields = row.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == LISTEN:
                    return True
    return False


@dataclass
class Block:
    """One server block of a page, as pytest-codeblocks parsed it, with its mark's arguments."""

    code: str
    lineno: int
    port: int
    exit: int
    stop: str  # "SIGINT": Ctrl-C, to the whole process group; "SIGTERM": `kill -TERM` to the command started


def is_codeblock(item: pytest.Item) -> bool:
    return type(item).__module__.startswith("pytest_codeblocks")


def server_of(item: pytest.Item) -> Block | None:
    mark = item.get_closest_marker("server")
    if mark is None:
        return None
    return Block(item.obj.code, item.obj.lineno, mark.kwargs.get("port", 8000), mark.kwargs.get("exit", 0),
                 mark.kwargs.get("stop", "SIGINT"))


@dataclass
class Running:
    """A started server block: its process (the leader of its group) and where its stderr goes."""

    process: subprocess.Popen[bytes]
    block: Block
    stderr_path: str


def ctrl_c_as_in_a_terminal() -> None:
    """In the server's process, before bash starts: SIGINT back to its default.

    A reader's shell delivers Ctrl-C to a command that has not asked otherwise. An xdist worker
    ignores SIGINT, and an ignored signal is inherited: bash cannot un-ignore it, and Python then
    installs no KeyboardInterrupt handler, so `python -m http.server` would sleep through Ctrl-C.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def running(block: Block, log_dir: Path) -> Iterator[Running]:
    """The server block running in its own process group until it listens; the group is killed on exit."""
    deadline = time.monotonic() + PORT_FREE_WAIT
    while listening(block.port):
        if time.monotonic() > deadline:
            pytest.fail(f"port {block.port} is taken by a process this test did not start")
        time.sleep(0.5)
    stdout = (log_dir / f"server-{block.lineno}.out").open("wb")
    stderr = (log_dir / f"server-{block.lineno}.err").open("wb")
    server = subprocess.Popen(["/bin/bash", script(block.code, log_dir / f"server-{block.lineno}.sh")],
                              cwd=REPO_ROOT, env=activated_environment(), preexec_fn=ctrl_c_as_in_a_terminal,
                              stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        deadline = time.monotonic() + LISTEN_WAIT
        while not listening(block.port):
            if server.poll() is not None:
                pytest.fail(f"server (line {block.lineno}) exited with {server.returncode} before listening on "
                            f"{block.port}:\n{tail(stderr.name)}")
            if time.monotonic() > deadline:
                pytest.fail(f"server (line {block.lineno}) not listening on {block.port} after {LISTEN_WAIT} s:\n"
                            f"{tail(stderr.name)}")
            time.sleep(0.05)
        yield Running(server, block, stderr.name)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)  # whatever is left of the group: workers, children
        server.wait()
        stdout.close()
        stderr.close()


def interrupt(server: Running) -> None:
    """Ctrl-C (SIGINT to the whole process group), or the stop the mark names; then its exit status within STOP_WAIT.

    `stop="SIGTERM"` is for a server the page tells to stop with `kill -TERM PID` because Ctrl-C can hang it: the
    signal goes to the command the block started (the children of the bash running the block), not to bash.
    """
    block = server.block
    if block.stop == "SIGINT":
        os.killpg(server.process.pid, signal.SIGINT)
    elif block.stop == "SIGTERM":
        children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
        assert children, f"server (line {block.lineno}) has no running command to stop"
        for child in children:
            os.kill(int(child), signal.SIGTERM)
    else:
        pytest.fail(f"server (line {block.lineno}): stop={block.stop!r} is neither SIGINT nor SIGTERM")
    try:
        status = server.process.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"server (line {block.lineno}) still running {STOP_WAIT} s after {block.stop}")
    assert status == block.exit, (f"server (line {block.lineno}) exited with {status} after {block.stop}, expected "
                                  f"{block.exit}:\n{tail(server.stderr_path)}")


def script(code: str, path: Path) -> str:
    """The block as a script file: run as `bash FILE`, its text is not in any command line that
    `pgrep -f` (used on the pages) could match, just as in the reader's interactive shell."""
    path.write_text(code, encoding="utf-8")
    return str(path)


def tail(path: str | None, limit: int = 4000) -> str:
    return Path(path).read_text(encoding="utf-8", errors="replace")[-limit:] if path else ""


def run_client(item: pytest.Item, log_dir: Path) -> None:
    """The client block exactly as written, with CLIENT_BUDGET; its whole process group is killed afterwards."""
    output = (log_dir / f"client-{item.obj.lineno}.log").open("wb")
    client = subprocess.Popen(["/bin/bash", script(item.obj.code, log_dir / f"client-{item.obj.lineno}.sh")],
                              cwd=REPO_ROOT, env=activated_environment(),
                              stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        status = client.wait(timeout=CLIENT_BUDGET)
    except subprocess.TimeoutExpired:
        pytest.fail(f"client (line {item.obj.lineno}) still running after {CLIENT_BUDGET} s:\n{tail(output.name)}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(client.pid, signal.SIGKILL)  # a `&` it left behind
        client.wait()
        output.close()
    assert status == 0, f"client (line {item.obj.lineno}) exited with {status}:\n{tail(output.name)}"


def servers_for(item: pytest.Item) -> list[Block]:
    """The server blocks a client item needs: for each port asked, the nearest server block above it."""
    mark = item.get_closest_marker("client")
    above = [block for sibling in item.parent.collect() if sibling.obj.lineno < item.obj.lineno
             and (block := server_of(sibling)) is not None]
    ports = mark.kwargs.get("ports")
    if ports is None:
        assert above, f"client (line {item.obj.lineno}) has no server block above it"
        return [above[-1]]
    chosen = []
    for port in ports:
        matching = [block for block in above if block.port == port]
        assert matching, f"client (line {item.obj.lineno}) has no server block for port {port} above it"
        chosen.append(matching[-1])
    return chosen


def run_server_item(item: pytest.Item) -> None:
    block = server_of(item)
    with tempfile.TemporaryDirectory(prefix="codeblock-") as log_dir, running(block, Path(log_dir)) as server:
        interrupt(server)


def run_client_item(item: pytest.Item) -> None:
    blocks = servers_for(item)
    with tempfile.TemporaryDirectory(prefix="codeblock-") as log_dir, contextlib.ExitStack() as stack:
        servers = [stack.enter_context(running(block, Path(log_dir))) for block in blocks]
        try:
            run_client(item, Path(log_dir))
        except BaseException:
            for server in servers:  # printed output is shown with the failure
                print(f"server (line {server.block.lineno}) stderr:\n{tail(server.stderr_path)}")
            raise
        for server in servers:
            interrupt(server)


def describe_failure(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> object:
    """What failed, as text. pytest-codeblocks reports the exception's first argument, which for a failed
    bash block is the bare exit status (an int: it says little, and cannot cross from an xdist worker)."""
    error = excinfo.value
    if isinstance(error, subprocess.CalledProcessError):
        output = {name: (stream or b"").decode(errors="replace")[-3000:]
                  for name, stream in (("stdout", error.stdout), ("stderr", error.stderr))}
        return (f"{item.name}: the block exited {error.returncode}\n--- the block ---\n{item.obj.code}"
                f"--- stdout (end) ---\n{output['stdout']}\n--- stderr (end) ---\n{output['stderr']}")
    if isinstance(error, RuntimeError) and error.args and isinstance(error.args[0], str):
        return error.args[0]  # pytest-codeblocks' own message for a python block or an output mismatch
    return pytest.Item.repr_failure(item, excinfo)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Server and client blocks run through this module instead of pytest-codeblocks' own runtest."""
    for item in items:
        if not is_codeblock(item):
            continue
        item.repr_failure = lambda excinfo, item=item: describe_failure(item, excinfo)
        if item.get_closest_marker("server"):
            item.runtest = lambda item=item: run_server_item(item)
        elif item.get_closest_marker("client"):
            item.runtest = lambda item=item: run_client_item(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Every code block runs from the repository's root with the environment `activate` makes."""
    if not is_codeblock(item):
        return (yield)
    saved_environment, saved_directory = dict(os.environ), os.getcwd()
    activated = activated_environment()
    os.environ.clear()
    os.environ.update(activated)
    os.chdir(REPO_ROOT)
    try:
        return (yield)
    finally:
        os.chdir(saved_directory)
        os.environ.clear()
        os.environ.update(saved_environment)
