"""The server files as teaching text: one skeleton, the model first, plumbing copies that never drift.

Every server file in servers/ is complete on its own, so the protocol plumbing
(parsing, the response, the graceful close, ...) is copied into each one on
purpose, between `# --8<-- [start:plumbing]` markers. The first tests keep those
copies identical, name by name, with every deliberate variant listed below with
its reason; the next ones check that each design page opens with its file's
model section. The last ones are behaviour the shared skeleton promises: one
deadline for the whole request head, GET /big, and a close that only waits for
the client when the client left bytes unread.
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import re
import select
import socket
import threading
import time
from pathlib import Path

import pytest
from harness.clients import probe
from harness.model.catalogue import Design
from harness.model.paths import REPO_ROOT
from python_source import top_level_names

from conftest import CATALOGUE, HTTP_DESIGNS, started

SERVERS = REPO_ROOT / "servers"
MARKER = re.compile(r"^[ \t]*# --8<-- \[(start|end):([\w-]+)\]$", re.M)  # a section may end inside a class

# Copies of a plumbing name that differ on purpose: name -> {variant: (reason, files)}. Every file
# carrying the name and not listed here carries the main copy; the copies inside each group are identical.
EVENT_LOOP_FILES = {"selectors_blocking_sleep.py", "selectors_timer.py"}
ASYNCIO_STREAMS_FILES = {"asyncio_streams.py", "asyncio_executor.py", "event_loop_workers.py", "asyncio_asyncpg.py",
                         "asyncio_psycopg_pool.py", "sse_asyncio_streams.py", "sse_asyncio_no_drain.py"}
THREAD_KEEP_ALIVE_FILES = {"thread_per_connection_keep_alive.py", "gevent_thread_per_connection.py"}
# The database designs keep connections alive too (issue 31): the same parser and response, socket-free, whatever
# the model (threads, greenlets, asyncio streams).
KEEP_ALIVE_FILES = THREAD_KEEP_ALIVE_FILES | {"threads_psycopg_pool.py", "thread_per_connection_psycopg.py",
                                              "gevent_psycopg.py", "asyncio_asyncpg.py", "asyncio_psycopg_pool.py"}
VARIANTS: dict[str, dict[str, tuple[str, set[str]]]] = {
    "build_response": {
        "keep-alive": ("says whether the connection stays open (Connection: keep-alive or close)",
                       KEEP_ALIVE_FILES),
    },
    "parse_request_head": {
        "keep-alive": ("also returns whether to keep the connection, from the version and the Connection header",
                       KEEP_ALIVE_FILES),
    },
    "read_request_head": {
        "selectors": ("an event loop reads one chunk per event into the connection's buffer", EVENT_LOOP_FILES),
        "epoll": ("the same, on epoll: the comment names what reported the socket", {"epoll_loop.py"}),
        "asyncio streams": ("StreamReader.readuntil loops, capped by the reader limit", ASYNCIO_STREAMS_FILES),
        "asyncio sockets": ("awaits loop.sock_recv instead of calling recv", {"asyncio_sock_api.py"}),
    },
    "close_gracefully": {
        "selectors": ("the loop drains later, in events; the selector is the owner", EVENT_LOOP_FILES),
        "epoll": ("the loop drains later, in events; the Loop is the owner", {"epoll_loop.py"}),
        "asyncio streams": ("write_eof and the reader: a transport reads eagerly, so there is no socket to peek at",
                            ASYNCIO_STREAMS_FILES),
        "asyncio sockets": ("awaits loop.sock_recv while it drains", {"asyncio_sock_api.py"}),
    },
    "close_connection": {"epoll": ("the Loop, not a selector, forgets the connection", {"epoll_loop.py"})},
    "drain": {"epoll": ("the Loop, not a selector, forgets the connection", {"epoll_loop.py"})},
    "close_idle": {"epoll": ("the Loop keeps the watched connections itself", {"epoll_loop.py"})},
    "stop_children": {"library": ("ForkingTCPServer keeps the children: collect_children, not waitpid",
                                  {"forking_tcpserver.py"})},
}
# Constants that mean the same thing in every file that has them, outside the sections too.
SHARED_CONSTANTS = ["HOST", "PORT", "WORK", "BACKLOG", "MAX_HEAD_BYTES", "HEAD_TIMEOUT", "SEND_TIMEOUT",
                    "DRAIN_TIMEOUT", "BODY", "BIG_BODY", "REASONS", "REQUEST_LINE", "ACCEPT_BACKOFF",
                    "OUT_OF_RESOURCES"]


def sections(text: str) -> dict[str, tuple[int, int]]:
    """Snippet sections of a file: name -> (first line, last line), 1-based, markers excluded."""
    found: dict[str, tuple[int, int]] = {}
    starts: dict[str, int] = {}
    for match in MARKER.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        kind, name = match.groups()
        if kind == "start":
            assert name not in starts and name not in found, f"section {name} opens twice"
            starts[name] = line
        else:
            assert name in starts, f"section {name} closes before it opens"
            found[name] = (starts.pop(name) + 1, line - 1)
    assert not starts, f"sections never closed: {sorted(starts)}"
    return found


def server_files() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(SERVERS.glob("*.py"))}


def plumbing_copies() -> dict[str, dict[str, str]]:
    """Every name defined in a plumbing section: name -> {file: source}."""
    copies: dict[str, dict[str, str]] = {}
    for name, text in server_files().items():
        span = sections(text).get("plumbing")
        if span:
            for defined, source in top_level_names(None, text, span).items():
                copies.setdefault(defined, {})[name] = source
    return copies


PLUMBING = plumbing_copies()
HAND_WRITTEN = [design for design in CATALOGUE.designs.values()
                if design.file.endswith(".py") and design.command[:2] == ["{python}", "{file}"]]
OUR_HTTP = [design for design in HAND_WRITTEN if design.kind == "http" and design.file != "servers/waitress_server.py"]


# --- the copies ------------------------------------------------------------------------------------------------


def test_the_plumbing_sections_hold_the_shared_functions() -> None:
    """Sanity for the tests below: the functions every design shares are found in many files."""
    for name in ("RequestError", "build_response", "parse_request_head", "read_request_head", "close_gracefully",
                 "simulated_cpu_work"):
        assert len(PLUMBING.get(name, {})) >= 5, f"{name} is in the plumbing of {sorted(PLUMBING.get(name, {}))}"


def grown_from(file: str) -> str | None:
    """The server file a file's docstring says it grows from ("Grows from: x.py"), if it is one."""
    docstring = ast.get_docstring(ast.parse((SERVERS / file).read_text(encoding="utf-8"))) or ""
    parent = GROWS_FROM.search(docstring)
    return parent.group(1) if parent and (SERVERS / parent.group(1)).exists() else None


def variant_of(name: str, file: str) -> str | None:
    """The variant of `name` a file carries: the one VARIANTS lists it in, else its parent's (a file grown from a
    variant, `bench.py new-design` say, keeps it unless it is listed elsewhere), else None (the main copy)."""
    seen: set[str] = set()
    current: str | None = file
    while current and current not in seen:
        seen.add(current)
        listed = [variant for variant, (_, files) in VARIANTS.get(name, {}).items() if current in files]
        if listed:
            return listed[0]
        if current != file and current in PLUMBING[name]:
            return None  # the nearest ancestor that carries the name carries the main copy
        current = grown_from(current)
    return None


@pytest.mark.parametrize("name", sorted(name for name, files in PLUMBING.items() if len(files) > 1))
def test_every_copy_of_a_plumbing_function_is_identical(name: str) -> None:
    copies = PLUMBING[name]
    groups: dict[str, set[str]] = {"main copy": set(copies)}
    for variant, (reason, files) in VARIANTS.get(name, {}).items():
        assert reason, f"{name}: variant {variant} needs a reason"
        missing = files - set(copies)
        assert not missing, f"{name}: variant {variant} lists files that do not carry it: {sorted(missing)}"
        groups[variant] = files | {file for file in copies if variant_of(name, file) == variant}
        groups["main copy"] -= groups[variant]
    for variant, files in groups.items():
        sources = {copies[file] for file in files}
        assert len(sources) <= 1, (
            f"{name} differs between {sorted(files)} ({variant}); copy the changed one to the others, "
            f"or list a deliberate variant in VARIANTS with its reason")


def test_every_variant_listed_is_still_a_plumbing_copy() -> None:
    for name in VARIANTS:
        assert len(PLUMBING.get(name, {})) > 1, f"VARIANTS lists {name}, which no longer has copies"


# Copies outside the plumbing: a design that grows from another and keeps one of its functions word for
# word (event-loop workers run asyncio streams' handler in each worker; three designs stop accepting the same
# way; the two selectors loops pause accepting the same way out of descriptors). name -> the files that carry it.
SAME_OUTSIDE_PLUMBING = {"handle_request": ("asyncio_streams.py", "event_loop_workers.py"),
                         "stop_reading_listeners": ("asyncio_streams.py", "asyncio_executor.py",
                                                    "event_loop_workers.py", "asyncio_asyncpg.py"),
                         "accept_connection": tuple(sorted(EVENT_LOOP_FILES)),
                         "AcceptPause": tuple(sorted(EVENT_LOOP_FILES)),
                         # The two thread designs that stream share the stream; the pool only dispatches it.
                         "send_events": ("sse_thread_per_connection.py", "sse_thread_pool.py")}
# Fast and correct grows from the hardened design and keeps its strict parser and its limits word for word: the
# fast path in front of the parser may answer less than the parser does, never decide otherwise.
HARDENED_FILES = ("fast_and_correct.py", "hardened_event_loop.py")
SAME_OUTSIDE_PLUMBING |= {name: HARDENED_FILES for name in (
    "RequestParser", "Request", "RequestError", "END_OF_REQUEST", "STRICT_REQUEST_LINE", "TARGET", "HEADER_LINE",
    "CONTENT_LENGTH", "CHUNK_SIZE_LINE", "REQUEST_LINE_BYTES", "check_partial_request_line", "parse_request_line",
    "parse_header_line", "STATUS_REASONS", "MAX_REQUEST_LINE_BYTES", "MAX_HEADER_LINE_BYTES", "MAX_HEADER_LINES",
    "MAX_METHOD_BYTES", "MAX_BODY_BYTES", "MAX_CHUNK_SIZE_DIGITS", "MAX_CHUNK_LINE_BYTES", "MAX_PIPELINED_BYTES",
    "MAX_CONNECTIONS", "BODY_TIMEOUT", "KEEP_ALIVE_TIMEOUT", "SHUTDOWN_GRACE", "Server", "serve_forever")}


@pytest.mark.parametrize("name", SAME_OUTSIDE_PLUMBING)
def test_a_function_kept_from_the_design_grown_from_stays_identical(name: str) -> None:
    texts = server_files()
    copies = {file: top_level_names(None, texts[file]).get(name)
              for file in SAME_OUTSIDE_PLUMBING[name]}
    assert None not in copies.values(), f"{name} is missing from {[file for file, src in copies.items() if src is None]}"
    assert len(set(copies.values())) == 1, f"{name} differs between {sorted(copies)}"


@pytest.mark.parametrize("constant", SHARED_CONSTANTS)
def test_shared_constants_have_one_value(constant: str) -> None:
    values = {}
    for name, text in server_files().items():
        source = top_level_names(None, text).get(constant)
        if source is not None:
            values[name] = ast.unparse(ast.parse(source).body[0].value)  # comments may differ, the value may not
    assert len(values) >= 2, f"{constant} is in {sorted(values)} only"
    assert len(set(values.values())) == 1, f"{constant} differs: {values}"


def test_an_edited_copy_is_caught(tmp_path: Path) -> None:
    """The comparison above sees a one-character change inside a function."""
    text = (SERVERS / "sequential_sockets.py").read_text(encoding="utf-8")
    edited = text.replace("return sum(number * number % 7", "return sum(number * number % 5")
    assert edited != text
    span = sections(edited)["plumbing"]
    original = top_level_names(None, text, span)["simulated_cpu_work"]
    changed = top_level_names(ast.parse(edited), edited, span)["simulated_cpu_work"]
    assert original != changed


# --- the model first ------------------------------------------------------------------------------------------

GROWS_FROM = re.compile(r"^Grows from: (\w+\.py)", re.M)
MODEL_FENCE = re.compile(r'^ *```python title="(?P<title>[^"]*)"(?: hl_lines="(?P<lines>[^"]*)")?\n'
                         r' *--8<-- "(?P<file>servers/\w+\.py):model"$', re.M)


def model_section(file: str) -> list[str]:
    """The lines of a file's model section, as a page shows them."""
    text = (REPO_ROOT / file).read_text(encoding="utf-8")
    first, last = sections(text)["model"]
    return text.splitlines()[first - 1:last]


def highlighted_lines(file: str) -> str:
    """hl_lines for a model section: its lines that are not in the model of the design it grows from."""
    docstring = ast.get_docstring(ast.parse((REPO_ROOT / file).read_text(encoding="utf-8"))) or ""
    parent = GROWS_FROM.search(docstring)
    if parent is None or not (SERVERS / parent.group(1)).exists():
        return ""
    lines = model_section(file)
    matcher = difflib.SequenceMatcher(None, model_section(f"servers/{parent.group(1)}"), lines, autojunk=False)
    changed = [(start + 1, end) for tag, _, _, start, end in matcher.get_opcodes() if tag in ("replace", "insert")]
    return " ".join(f"{first}" if first == last else f"{first}-{last}" for first, last in changed)


@pytest.mark.parametrize("design", HAND_WRITTEN, ids=lambda design: design.name)
def test_every_hand_written_design_opens_with_its_model(design: Design) -> None:
    """After the docstring, the imports and the constants, the first thing in the file is the model section."""
    text = (REPO_ROOT / design.file).read_text(encoding="utf-8")
    found = sections(text)
    assert "model" in found, f"{design.file} has no model section"
    tree = ast.parse(text)
    first_definition = next(node for node in tree.body
                            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))
    first, last = found["model"]
    assert first <= first_definition.lineno <= last, f"{design.file}: {first_definition.name} comes before the model"
    if "plumbing" in found:
        assert found["plumbing"][0] > last, f"{design.file}: the plumbing comes before the model"


MAX_MODEL_LINES = 40  # issue 13: a page opens with the idea in 20-40 lines; the armour follows in its own section


@pytest.mark.parametrize("design", HAND_WRITTEN, ids=lambda design: design.name)
def test_every_model_section_is_at_most_40_lines(design: Design) -> None:
    """Every line between the model markers counts, as the page shows them: docstrings, comments, blank lines."""
    count = len(model_section(design.file))
    assert count <= MAX_MODEL_LINES, (
        f"{design.file}: the model section is {count} lines (at most {MAX_MODEL_LINES}); "
        f"move the armour (stop, refusals, deadlines, supervision) into the armour section after it")


@pytest.mark.parametrize("design", HAND_WRITTEN, ids=lambda design: design.name)
def test_the_armour_comes_after_the_model_and_before_the_plumbing(design: Design) -> None:
    found = sections((REPO_ROOT / design.file).read_text(encoding="utf-8"))
    if "armour" not in found:
        pytest.skip(f"{design.file} has no armour section")
    assert found["armour"][0] > found["model"][1], f"{design.file}: the armour comes before the model ends"
    if "plumbing" in found:
        assert found["armour"][1] < found["plumbing"][0], f"{design.file}: the armour comes after the plumbing starts"


@pytest.mark.parametrize("design", HAND_WRITTEN, ids=lambda design: design.name)
def test_every_design_page_opens_with_its_model_and_keeps_the_whole_file(design: Design) -> None:
    page = (REPO_ROOT / "docs" / design.page).read_text(encoding="utf-8")
    model = f'--8<-- "{design.file}:model"'
    whole = f'--8<-- "{design.file}"'
    assert model in page, f"{design.page} does not include {design.file}'s model section"
    assert whole in page, f"{design.page} does not include the whole of {design.file}"
    assert page.index(model) < page.index(whole), f"{design.page} shows the whole file before the model"
    collapsed = page[:page.index(whole)].rsplit("\n??? ", 1)
    assert len(collapsed) == 2 and "\n#" not in collapsed[1], f"{design.page}: whole file not collapsed"


@pytest.mark.parametrize("design", HAND_WRITTEN, ids=lambda design: design.name)
def test_the_model_listing_highlights_what_changed_from_the_design_it_grows_from(design: Design) -> None:
    """hl_lines on the page are the model's lines not in the parent's model ("Grows from:" in the docstring)."""
    page = (REPO_ROOT / "docs" / design.page).read_text(encoding="utf-8")
    fences = {match["file"]: match["lines"] or "" for match in MODEL_FENCE.finditer(page)}
    assert design.file in fences, f"{design.page} has no model listing for {design.file}"
    assert fences[design.file] == highlighted_lines(design.file), (
        f"{design.page}: hl_lines for {design.file} should be {highlighted_lines(design.file)!r}")


# --- behaviour the skeleton promises ---------------------------------------------------------------------------


def head_timeout() -> float:
    values = set()
    for design in OUR_HTTP:
        text = (REPO_ROOT / design.file).read_text(encoding="utf-8")
        values.add(ast.literal_eval(top_level_names(None, text)["HEAD_TIMEOUT"].split("=", 1)[1].strip()))
    assert len(values) == 1, values
    return values.pop()


HEAD_TIMEOUT = head_timeout()
TRICKLE_PAUSE = 0.5  # one byte every half second: never quiet for long, never done


def trickle_until_closed(host: str, port: int, give_up_after: float) -> tuple[float | None, bytes]:
    """Send a never-ending head a byte at a time; return when the server closed (seconds) and what it sent."""
    endless = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000
    received = b""
    with socket.create_connection((host, port), timeout=5) as conn:
        opened = time.monotonic()
        for byte in endless:
            elapsed = time.monotonic() - opened
            if elapsed > give_up_after:
                return None, received
            try:
                conn.sendall(bytes([byte]))
                readable, _, _ = select.select([conn], [], [], TRICKLE_PAUSE)
                if readable:
                    chunk = conn.recv(65536)
                    received += chunk
                    if not chunk:
                        return time.monotonic() - opened, received
            except OSError:  # reset, or a send after the server's close
                return time.monotonic() - opened, received
    return None, received


@pytest.fixture(scope="module")
def trickled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[float | None, bytes]]:
    """Every design of ours, all at once (about HEAD_TIMEOUT in all): when each closed on a trickling client."""
    results: dict[str, tuple[float | None, bytes]] = {}
    tmp_path = tmp_path_factory.mktemp("trickle")
    with contextlib.ExitStack() as stack:
        servers = {design.name: stack.enter_context(started(design, tmp_path)) for design in OUR_HTTP}

        def one(name: str) -> None:
            results[name] = trickle_until_closed(servers[name].host, servers[name].port, HEAD_TIMEOUT + 5)

        threads = [threading.Thread(target=one, args=(name,)) for name in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=HEAD_TIMEOUT + 15)
    return results


@pytest.mark.parametrize("design", OUR_HTTP, ids=lambda design: design.name)
def test_one_deadline_bounds_the_whole_head_however_it_trickles(design: Design, trickled) -> None:
    """A byte every 0.5 s never leaves the connection quiet, yet it is closed about HEAD_TIMEOUT after it opened."""
    closed_after, answer = trickled[design.name]
    assert closed_after is not None, f"{design.name} still reading a trickled head after {HEAD_TIMEOUT + 5} s"
    assert HEAD_TIMEOUT - 1 <= closed_after <= HEAD_TIMEOUT + 3, f"{design.name} closed after {closed_after:.1f} s"
    assert answer == b"", f"{design.name} answered a head that never ended: {answer[:60]!r}"


BIG_SIZE = 1024 * 1024


@pytest.mark.parametrize("design", HTTP_DESIGNS, ids=lambda design: design.name)
def test_get_big_answers_one_mebibyte_of_text(design: Design, tmp_path) -> None:
    if design.file.startswith("servers/nginx"):
        pytest.skip("the nginx configurations have no /big: their page is written in them, and 1 MiB would be too")
    with started(design, tmp_path) as server:
        big = probe.get(server.host, server.port, path="/big", timeout=30)
        page = probe.get(server.host, server.port)
    assert big.status == 200
    assert big.headers["content-type"].split(";")[0] == "text/plain"
    assert int(big.headers["content-length"]) == len(big.body) == BIG_SIZE
    assert page.status == 200 and b"<h1>Hello from a Python server</h1>" in page.body  # every other path: the page


def test_a_plain_request_does_not_wait_for_the_clients_close(tmp_path) -> None:
    """Sequential server: a client that reads its answer and stays connected does not hold up the next one.

    Draining after every answer waited for the client's FIN (up to DRAIN_TIMEOUT, 1 s). With nothing
    left unread, a close sends FIN and not RST, so the server no longer waits.
    """
    with started(CATALOGUE.design("sequential-sockets"), tmp_path) as server:
        with socket.create_connection((server.host, server.port), timeout=5) as lingering:
            lingering.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while chunk := lingering.recv(65536):  # until the server's FIN: the answer is complete
                answer += chunk
            started_at = time.monotonic()
            next_one = probe.get(server.host, server.port)  # while `lingering` is still open
            waited = time.monotonic() - started_at
    assert probe.parse_response(answer).status == 200 and next_one.status == 200
    assert waited < 0.5, f"the next client waited {waited:.2f} s: the server waited for the first one's close"


def test_leftover_bytes_are_still_drained_so_the_answer_survives(tmp_path) -> None:
    """Sequential server: a head followed by bytes we never read still gets its answer, not a reset."""
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + b"unread" * 20_000
    with started(CATALOGUE.design("sequential-sockets"), tmp_path) as server:
        raw = probe.exchange(server.host, server.port, request)  # ConnectionResetError if the server reset
    assert probe.parse_response(raw).status == 200
