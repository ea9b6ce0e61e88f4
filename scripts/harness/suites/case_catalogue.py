"""Cases as data: what a suite read from its catalogue file shares, whatever its cases are.

A suite whose cases are a TOML table (the hostile suite's scripts/catalogue/hostile/cases.toml,
the conformance corpus's scripts/catalogue/conformance/cases.toml) reads it into a subclass of
CaseCatalogue: its `[suite]` settings, the `[suite.quick]` overrides for `--quick`, and its cases
in the catalogue's order. A subclass says which names select a case (`names`); `select` then
takes the command line's `--case` arguments the same way in every suite. A run reads its settings
typed: each suite's own Typed class, read by `typed_settings` (model/typed.py: an unknown key, a missing
one or a value of the wrong type is an error naming the file and the key).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from harness.model.catalogue import UnknownNameError
from harness.model.typed import Typed

T = TypeVar("T", bound=Typed)


def typed_settings(kind: type[T], table: dict[str, Any], path: Path) -> T:
    """A suite's settings table as its typed settings; RecordShapeError (a ValueError) naming the file and key."""
    return kind.from_json(table, f"{path}: [suite]")


@dataclass(frozen=True)
class CaseCatalogue:
    settings: dict[str, Any]
    quick: dict[str, Any]
    cases: Sequence[Any]  # a subclass's own case type, in the catalogue's order

    what: ClassVar[str] = "case"  # for the error message: "unknown hostile case 'x'"

    def table(self, quick: bool) -> dict[str, Any]:
        """The settings of a run as written: the `[suite]` table, with `[suite.quick]` over it for a quick run."""
        return {**self.settings, **self.quick} if quick else dict(self.settings)

    def names(self, case: Any) -> set[str]:
        """Every name that selects this case on the command line."""
        return {case.id}

    def select(self, wanted: list[str] | None) -> list[Any]:
        """The cases a name selects, in the catalogue's order; every case when none is given."""
        if not wanted:
            return list(self.cases)
        known = set().union(*(self.names(case) for case in self.cases))
        for name in wanted:
            if name not in known:
                raise UnknownNameError(self.what, name, sorted(known, key=lambda known_name: (
                    not known_name.isdigit(), int(known_name) if known_name.isdigit() else 0, known_name)))
        return [case for case in self.cases if self.names(case) & set(wanted)]
