"""Three HTTP/1.1 request parsers as references, side by side, without sockets: bytes in, a verdict out.

- h11 (pure Python, used by uvicorn without httptools, and by hypercorn);
- httptools (llhttp, the C parser of Node.js; uvicorn's default when installed);
- the hardened design's own parser (servers/hardened_event_loop.py `RequestParser`), and the parser
  of any other strict design in servers/ built on the same three names (RequestParser, RequestError,
  END_OF_REQUEST), such as servers/fast_and_correct.py.

Each parser is driven the way a server drives it: all the bytes at once, every complete request
counted (and, for h11, answered with an empty 200 so the next cycle can start), stopping where a
server would close (after a request that is not keep-alive). The verdict says whether the first
request was accepted, how many requests were read before the bytes ran out or the parser stopped,
the status the parser's error names (h11's hint, the hardened RequestError's status; llhttp names
none, so 400), and whether the connection would stay open after the last request.

Known limits: a parser is not a server. What a design answers to a method or a target is the
application's business (every design here answers 405 to anything but GET); a parser only says
whether the framing and syntax are acceptable. httptools' error ends the message, not the
connection: what a server built on it does next is the server's (uvicorn answers 400 and closes).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cache
from types import ModuleType
from typing import Any

import h11
import httptools

from harness.model.paths import REPO_ROOT

SERVERS_DIR = REPO_ROOT / "servers"
PARSER_MARKERS = ("class RequestParser", "class RequestError", "END_OF_REQUEST = object()")


@dataclass(frozen=True)
class ParserVerdict:
    """What one parser made of one byte string."""

    parser: str
    outcome: str  # "accept" (a first request was read whole), "reject" (an error first), "incomplete"
    requests: int  # complete requests read before the bytes ran out, an error, or a close
    status: int | None  # the status the error names (None when accepted or incomplete)
    keep_alive: bool | None  # after the last complete request: would the connection stay open?
    detail: str = ""  # the error, or what stopped the reading

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def h11_verdict(data: bytes) -> ParserVerdict:
    """h11.Connection as a server: each complete request answered with an empty 200, then the next cycle."""
    connection = h11.Connection(h11.SERVER)
    connection.receive_data(data)
    requests, keep_alive = 0, None
    try:
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA or event is h11.PAUSED:
                break
            if isinstance(event, h11.EndOfMessage):
                requests += 1
                try:
                    connection.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                    connection.send(h11.EndOfMessage())
                except h11.LocalProtocolError:  # an Upgrade or CONNECT: the connection is no longer HTTP/1.1
                    return ParserVerdict("h11", "accept", requests, None, False, "switches protocol")
                keep_alive = connection.our_state is not h11.MUST_CLOSE
                if not keep_alive:
                    return ParserVerdict("h11", "accept", requests, None, False, "closes after answering")
                connection.start_next_cycle()
    except h11.RemoteProtocolError as error:
        status = getattr(error, "error_status_hint", 400)
        if requests:
            return ParserVerdict("h11", "accept", requests, None, keep_alive,
                                 f"then {status}: {error}")
        return ParserVerdict("h11", "reject", 0, status, None, str(error))
    return ParserVerdict("h11", "accept" if requests else "incomplete", requests, None, keep_alive,
                         "" if requests else "needs more bytes")


class _HttptoolsCounter:
    """httptools calls these as it parses; we count complete messages and note keep-alive."""

    def __init__(self) -> None:
        self.parser: httptools.HttpRequestParser | None = None
        self.requests = 0
        self.keep_alive: bool | None = None

    def on_message_complete(self) -> None:
        self.requests += 1
        self.keep_alive = self.parser.should_keep_alive()


def httptools_verdict(data: bytes) -> ParserVerdict:
    """httptools.HttpRequestParser fed everything at once; a message that is not keep-alive ends the reading."""
    counter = _HttptoolsCounter()
    parser = httptools.HttpRequestParser(counter)
    counter.parser = parser
    try:
        parser.feed_data(data)
    except httptools.HttpParserUpgrade:
        pass  # an Upgrade or CONNECT: the parser hands the rest over; the head itself was accepted
    except httptools.HttpParserError as error:
        if counter.requests:
            if counter.keep_alive is False:  # llhttp refuses bytes after a closing message: a server has closed
                return ParserVerdict("httptools", "accept", counter.requests, None, False, "closes after answering")
            return ParserVerdict("httptools", "accept", counter.requests, None, counter.keep_alive,
                                 f"then 400: {error}")
        return ParserVerdict("httptools", "reject", 0, 400, None, str(error))
    if counter.requests:
        return ParserVerdict("httptools", "accept", counter.requests, None, counter.keep_alive)
    return ParserVerdict("httptools", "incomplete", 0, None, None, "needs more bytes")


def load_server_module(path_name: str) -> ModuleType:
    """Import a design's file from servers/ by path (servers/ is not a package): its parser, not its server."""
    path = SERVERS_DIR / path_name
    name = f"_reference_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def design_parser_verdict(module: ModuleType, name: str, data: bytes) -> ParserVerdict:
    """A design's RequestParser: next_event until it needs bytes, each request ended and the next started."""
    parser = module.RequestParser()
    parser.feed(data)
    requests, keep_alive = 0, None
    request = None
    try:
        while True:
            event = parser.next_event()
            if event is None:
                break
            if event is module.END_OF_REQUEST:
                requests += 1
                keep_alive = request.keep_alive
                if not keep_alive:
                    return ParserVerdict(name, "accept", requests, None, False, "closes after answering")
                parser.start_next_request()
            else:
                request = event
    except module.RequestError as error:
        if requests:
            return ParserVerdict(name, "accept", requests, None, keep_alive, f"then {error.status}")
        return ParserVerdict(name, "reject", 0, error.status, None, f"RequestError({error.status})")
    return ParserVerdict(name, "accept" if requests else "incomplete", requests, None, keep_alive,
                         "" if requests else "needs more bytes")


@cache
def design_parsers() -> dict[str, ModuleType]:
    """Every strict design's parser module, by file stem: servers/*.py whose text defines the three names.

    The text is read first, so only files built on this parser are imported (their servers never start).
    """
    found = {}
    for path in sorted(SERVERS_DIR.glob("*.py")):
        if all(marker in path.read_text(encoding="utf-8") for marker in PARSER_MARKERS):
            found[path.stem] = load_server_module(path.name)
    return dict(sorted(found.items(), key=lambda item: item[0] != "hardened_event_loop"))  # the hardened one first


def parser_label(stem: str) -> str:
    """'hardened_event_loop' -> 'hardened'; another hardened_* file keeps its own name."""
    return "hardened" if stem == "hardened_event_loop" else stem.replace("_", "-")


def parsers() -> dict[str, Callable[[bytes], ParserVerdict]]:
    """Every reference parser by name, in the order the page shows them."""
    chosen: dict[str, Callable[[bytes], ParserVerdict]] = {"h11": h11_verdict, "httptools": httptools_verdict}
    for stem, module in design_parsers().items():
        label = parser_label(stem)
        chosen[label] = lambda data, module=module, label=label: design_parser_verdict(module, label, data)
    return chosen


def run_all(data: bytes) -> dict[str, ParserVerdict]:
    """The bytes through every reference parser."""
    return {name: verdict(data) for name, verdict in parsers().items()}


def versions() -> dict[str, str]:
    """The parsers' versions, for the record."""
    found = {"h11": h11.__version__, "httptools": httptools.__version__}
    found.update({parser_label(stem): f"servers/{stem}.py" for stem in design_parsers()})
    return found
