"""Which of our dependencies install on a CPython, how, and whether importing them turns the GIL back on.

A free-threaded CPython keeps the GIL off only while every C extension it imports declares that it
supports running without it (Py_mod_gil); importing one that does not switches the GIL on for the
whole process, with a RuntimeWarning, and `sys._is_gil_enabled()` says True from then on. Pure-Python
packages cannot do that. So for each interpreter (`python` versions, launcher.interpreter) and each
package the site's servers use, in a scratch environment of its own (never the environment the
measurements start servers with, so nothing installed here can change a measured server):

1. install the version requirements.lock pins, first from a wheel only (`--only-binary :all:`), and
   where none fits, from its source (`--no-binary`, a compiler at work: minutes), within a timeout;
2. in a fresh process per package, import its modules and ask `sys._is_gil_enabled()`.

The record (results/free-threaded/dependencies.json) keeps per interpreter and package: how it
installed (wheel, source, or the reason it did not), its version, and the GIL after import with
the warning CPython printed. `bench.py gil-dependencies` runs it (minutes: the source builds).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.model.catalogue import Catalogue
from harness.model.paths import REPO_ROOT
from harness.model.records import RESULTS_DIR, write_record_atomic
from harness.model.records.gil_dependencies_record import GilDependenciesRecord
from harness.system import launcher, processes
from harness.system.environment import utc_now

RECORD_PATH = RESULTS_DIR / "free-threaded" / "dependencies.json"
DEFAULT_VERSIONS = ("3.13.5", "3.13.5t")
LOCK_FILE = REPO_ROOT / "requirements.lock"
INSTALL_TIMEOUT_SECONDS = 420  # gevent or uvloop from source on two CPUs take minutes; longer is recorded as failed


@dataclass(frozen=True)
class Dependency:
    """A package the site's servers use, the modules a server imports from it, and which servers need it."""

    package: str
    modules: tuple[str, ...]
    used_by: str
    needs: tuple[str, ...] = ()  # packages installed with it (psycopg-binary is psycopg's C part)


DEPENDENCIES = [
    Dependency("gunicorn", ("gunicorn.app.wsgiapp", "gunicorn.workers.gthread"), "gunicorn-sync, gunicorn-gthread"),
    Dependency("waitress", ("waitress.server",), "waitress"),
    Dependency("granian", ("granian", "granian._granian"), "granian-wsgi, granian-asgi"),
    Dependency("uvicorn", ("uvicorn", "uvicorn.protocols.http.h11_impl"), "uvicorn (with h11)", ("h11",)),
    Dependency("httptools", ("httptools",), "uvicorn (its default parser)"),
    Dependency("uvloop", ("uvloop",), "uvicorn, uvloop-protocol-keep-alive, granian-asgi"),
    Dependency("greenlet", ("greenlet",), "gevent"),
    Dependency("gevent", ("gevent", "gevent.monkey"), "gunicorn-gevent, gevent-thread-per-connection"),
    Dependency("psycopg-binary", ("psycopg", "psycopg_binary"), "the psycopg designs", ("psycopg",)),
    Dependency("asyncpg", ("asyncpg",), "asyncio-asyncpg, uvicorn-asyncpg"),
]

# One line of Python run in a fresh process: import, then report the GIL and whether the warning came.
_IMPORT_CHECK = ("import importlib.metadata, sys, warnings\n"
                 "warnings.simplefilter('always')\n"
                 "with warnings.catch_warnings(record=True) as caught:\n"
                 "    for name in sys.argv[2:]: __import__(name)\n"
                 "print('enabled' if sys._is_gil_enabled() else 'disabled')\n"
                 "print(' | '.join(str(w.message).splitlines()[0] for w in caught if 'GIL' in str(w.message)))\n"
                 "print(importlib.metadata.version(sys.argv[1]) if sys.argv[1] else '')\n")


def pinned_versions(lock_file: Path = LOCK_FILE) -> dict[str, str]:
    """{package: version} from requirements.lock (names lower-cased, '_' as '-')."""
    pins = {}
    for line in lock_file.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line.strip())
        if match:
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def requirement(package: str, pins: dict[str, str]) -> str:
    return f"{package}=={pins[package]}" if package in pins else package


def install(python: str, package: str, pins: dict[str, str]) -> dict[str, Any]:
    """Install one package (and what it needs) into the scratch environment `python` runs: how it went."""
    wanted = [requirement(name, pins) for name in (package, *DEPENDENCIES_BY_NAME[package].needs)]
    base = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    wheel = processes.run_tool([*base, "--only-binary", ":all:", *wanted], timeout=INSTALL_TIMEOUT_SECONDS)
    if wheel.returncode == 0:
        return {"installed": "wheel"}
    source = processes.run_tool([*base, "--no-binary", package, *wanted], timeout=INSTALL_TIMEOUT_SECONDS)
    if source.returncode == 0:
        return {"installed": "built from source", "no_wheel": last_line(wheel.stderr)}
    failed = {"no_wheel": last_line(wheel.stderr), "source_build": last_line(source.stderr, 3)}
    if package in pins:  # an older release may have a wheel for this interpreter (Granian: 2.8.7 has none for 3.13t)
        older = processes.run_tool([*base, "--only-binary", package, f"{package}<={pins[package]}",
                                    *wanted[1:]], timeout=INSTALL_TIMEOUT_SECONDS)
        if older.returncode == 0:
            return {"installed": "wheel of an older release", **failed}
    return {"installed": None, **failed}


def last_line(text: str, count: int = 1) -> str:
    """The last non-empty lines of a tool's stderr: its reason, short."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(lines[-count:])[-400:]


def gil_after_import(python: str, package: str, modules: tuple[str, ...]) -> dict[str, Any]:
    """Import the modules in a fresh process of `python`; the GIL then, CPython's warning if it gave one, and the
    package's installed version."""
    answer = processes.run_tool([python, "-c", _IMPORT_CHECK, package, *modules], timeout=60)
    lines = answer.stdout.splitlines() + ["", "", ""]
    if answer.returncode != 0 or not lines[0]:
        return {"gil_after_import": None, "import_error": last_line(answer.stderr)}
    return {"gil_after_import": lines[0], "warning": lines[1] or None, "installed_version": lines[2] or None}


DEPENDENCIES_BY_NAME = {dependency.package: dependency for dependency in DEPENDENCIES}


def check_interpreter(version: str, scratch: Path, pins: dict[str, str]) -> dict[str, Any]:
    """Every dependency on CPython `version`, in a fresh scratch environment; the interpreter's own facts first."""
    described = launcher.describe_interpreter(version)
    if described.get("version") is None:
        return {"interpreter": described, "packages": {}}
    environment = scratch / version
    shutil.rmtree(environment, ignore_errors=True)
    made = processes.run_tool([launcher.interpreter(version), "-m", "venv", str(environment)], timeout=120)
    if made.returncode != 0:
        return {"interpreter": described, "packages": {}, "error": last_line(made.stderr)}
    python = str(environment / "bin" / "python")
    packages = {}
    for dependency in DEPENDENCIES:
        print(f"{version}: {dependency.package} ...", flush=True)
        outcome = {"version": pins.get(dependency.package), "used_by": dependency.used_by,
                   "modules": list(dependency.modules), **install(python, dependency.package, pins)}
        if outcome["installed"]:
            outcome.update(gil_after_import(python, dependency.package, dependency.modules))
        packages[dependency.package] = outcome
        print(f"{version}: {dependency.package}: {outcome}", flush=True)
    baseline = gil_after_import(python, "", ())
    return {"interpreter": described, "gil_at_start": baseline.get("gil_after_import"), "packages": packages}


@dataclass(frozen=True)
class Plan:
    """`bench.py gil-dependencies`: the CPythons (as the catalogue names them) and where the record goes."""

    versions: tuple[str, ...] = DEFAULT_VERSIONS
    output: Path = RECORD_PATH
    scratch: Path = REPO_ROOT / "build" / "gil-dependencies"  # the interpreters' virtual environments


def measure_plan(catalogue: Catalogue, plan: Plan) -> tuple[Path, GilDependenciesRecord]:
    """Check every dependency on each interpreter; the record written atomically, its path and it."""
    versions, out, scratch = plan.versions, plan.output, plan.scratch
    started = utc_now()
    pins = pinned_versions()
    interpreters = {version: check_interpreter(version, scratch, pins) for version in versions}
    record = GilDependenciesRecord.from_json(
        {"schema": GilDependenciesRecord.SCHEMA, "kind": "gil-dependencies", "started_utc": started,
         "finished_utc": utc_now(), "lock_file": "requirements.lock", "interpreters": interpreters}, str(out))
    write_record_atomic(out, record)  # typed first: a key the record does not know stops here, not in render
    return out, record
