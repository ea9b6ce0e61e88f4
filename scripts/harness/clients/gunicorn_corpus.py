"""Gunicorn's own request corpus (tests/requests/valid and invalid in its sdist), fetched, never copied in.

`fetch` runs `pip download --no-binary :all: --no-deps gunicorn==VERSION` (the version pinned in
requirements.lock) into build/gunicorn-corpus/, unpacks only tests/requests/, and caches it there.
`load` reads every .http file the way gunicorn's tests/treq.py does: the file's newlines are
layout only, and the escapes \\r\\n, \\0, \\n, \\t and \\xHH stand for those bytes. We never run
the .py files beside them (they are gunicorn's expectations, code we have no reason to execute);
we only note whether one changes gunicorn's configuration (`cfg.set`), because such a request is
valid or invalid only under that setting (obsolete folding permitted, PROXY protocol on, ...).

Known limits: needs PyPI (or a pip index) the first time; `CorpusUnavailable` says why not.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from harness.model.paths import REPO_ROOT

CACHE_DIR = REPO_ROOT / "build" / "gunicorn-corpus"
LOCK_FILE = REPO_ROOT / "requirements.lock"
HEX_ESCAPE = re.compile(rb"\\x([0-9A-Fa-f]{2})")


class CorpusUnavailable(RuntimeError):
    """pip could not fetch gunicorn's sdist (no network, no index): the message says what pip said."""


@dataclass(frozen=True)
class CorpusRequest:
    name: str  # "valid/001.http"
    valid: bool  # in tests/requests/valid (gunicorn accepts it) or invalid (gunicorn refuses it)
    data: bytes
    needs_setting: bool  # its .py changes gunicorn's configuration: valid or invalid only under that


def pinned_version(lock: Path = LOCK_FILE) -> str:
    """gunicorn's version in requirements.lock."""
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line.lower().startswith("gunicorn=="):
            return line.split("==", 1)[1].split(";")[0].split()[0]
    raise CorpusUnavailable(f"{lock} pins no gunicorn version")


def fetch(version: str | None = None, cache_dir: Path = CACHE_DIR, timeout: float = 300) -> Path:
    """The unpacked tests/requests/ directory of gunicorn's sdist, downloaded once into the cache."""
    version = version or pinned_version()
    target = cache_dir / version
    requests_dir = target / "requests"
    if (requests_dir / "valid").is_dir() and (requests_dir / "invalid").is_dir():
        return requests_dir
    download = target / "sdist"
    download.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
               f"gunicorn=={version}", "-d", str(download)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise CorpusUnavailable(f"pip download took more than {timeout:g} s") from error
    archives = sorted(download.glob(f"gunicorn-{version}.tar.gz"))
    if result.returncode != 0 or not archives:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise CorpusUnavailable(f"pip download gunicorn=={version} failed: {tail[0]}")
    unpack_requests(archives[0], requests_dir)
    return requests_dir


def unpack_requests(archive: Path, requests_dir: Path) -> None:
    """Only tests/requests/{valid,invalid}/*.http and *.py, flattened into requests_dir; nothing else."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if (member.isfile() and len(parts) == 5 and parts[1:3] == ("tests", "requests")
                    and parts[3] in ("valid", "invalid") and member.name.endswith((".http", ".py"))):
                destination = requests_dir / parts[3] / parts[4]
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(tar.extractfile(member).read())


def decode(raw: bytes) -> bytes:
    """A .http file's text as the bytes it stands for (gunicorn's tests/treq.py, the same replacements)."""
    data = raw.replace(b"\n", b"").replace(b"\\r\\n", b"\r\n")
    data = data.replace(b"\\0", b"\000").replace(b"\\n", b"\n").replace(b"\\t", b"\t")
    return HEX_ESCAPE.sub(lambda match: bytes([int(match.group(1), 16)]), data)


def load(requests_dir: Path) -> list[CorpusRequest]:
    """Every request of the corpus, valid ones first, each by its file name."""
    found = []
    for kind in ("valid", "invalid"):
        for path in sorted((requests_dir / kind).glob("*.http")):
            expectation = path.with_suffix(".py")
            text = expectation.read_text(encoding="utf-8", errors="replace") if expectation.exists() else ""
            found.append(CorpusRequest(f"{kind}/{path.name}", kind == "valid", decode(path.read_bytes()),
                                       "cfg.set" in text or "cfg =" in text))
    return found
