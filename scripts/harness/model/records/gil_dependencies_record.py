"""The dependencies' record (suites/gil_dependencies.py, results/free-threaded/dependencies.json): per CPython and
package, how it installed and whether importing it left the GIL on."""

from __future__ import annotations

from typing import ClassVar

from harness.model.records.scenario_record import Interpreter
from harness.model.records.typed import Typed, optional


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
