"""The free-threaded page's records besides the scenarios': the dependencies' (suites/gil_dependencies.py,
results/free-threaded/dependencies.json: per CPython and package, how it installed and whether importing it left
the GIL on) and the build's (scripts/build_free_threaded_python.sh, results/free-threaded/build.json: how long each
step of a build took)."""

from __future__ import annotations

from typing import ClassVar

from harness.model.records.scenario_record import Interpreter
from harness.model.typed import Typed, optional


class PackageCheck(Typed):
    """One package on one CPython: installed from a wheel, built from source, or not (the reasons), and the GIL."""

    version: str | None  # as requirements.lock pins it
    used_by: str  # the designs that need it, in words
    modules: list[str]  # what was imported
    installed: str | None  # "wheel", "built from source", "wheel of an older release", or None: it did not install
    installed_version: str | None = optional()  # what the import found installed
    no_wheel: str | None = optional()  # pip's last word when no wheel fitted
    source_build: str | None = optional()  # pip's last words when the source build failed
    gil_after_import: str | None = optional()  # "enabled" / "disabled"; None: the import failed
    warning: str | None = optional()  # CPython's RuntimeWarning when the import turned the GIL on
    import_error: str | None = optional()


class InterpreterCheck(Typed):
    """One CPython: what it is, the GIL at start-up, and every package."""

    interpreter: Interpreter
    packages: dict[str, PackageCheck]
    gil_at_start: str | None = optional()
    error: str | None = optional()


class GilDependenciesRecord(Typed):
    """results/free-threaded/dependencies.json."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "gil-dependencies"
    started_utc: str
    finished_utc: str
    lock_file: str
    interpreters: dict[str, InterpreterCheck]


class BuildSeconds(Typed):
    """How long each step of the build took, in whole seconds."""

    source: int  # fetching the tarball from Debian's source archive and unpacking it
    gil: int  # configure, make -j2, make install: the default build
    free_threaded: int  # the same with --disable-gil
    environments: int  # both virtual environments with the servers (pip)


class FreeThreadedBuildRecord(Typed):
    """results/free-threaded/build.json: `make free-threaded-python` from a fresh clone with an empty cache."""

    SCHEMA: ClassVar[int | None] = 1

    schema: int
    kind: str  # "free-threaded-build"
    version: str
    started_utc: str
    finished_utc: str
    seconds: BuildSeconds
    commit: str
    cache: str  # the (empty) cache directory it built into
    cpus: int
    cpu_model: str
    machine: str
    make_jobs: int
