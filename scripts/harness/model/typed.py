"""Typed data, the one checker of the harness: the records' and the catalogue's tables' shapes as frozen dataclasses,
read from JSON (or TOML) and written back to it.

A record kind is a dataclass deriving from `Typed` whose fields are the record's keys, typed with
what this module can check: str, int, float (an int is a float too), bool, Any (kept as it is), a
Typed class, list[T], dict[K, T], T | None, Literal[...] and Annotated[T, Check(...)].
Reading (`Kind.from_json(data)`) checks every key:
one the class does not know is an error naming the key, where it is and the nearest known key, so a
misspelt key fails where it is written or read, not as a silent None in a table. A key the data
lacks reads as the field's default (records written before a field existed still load); a field
without a default must be there. Writing (`record.to_json()`) gives the keys in field order; a field
made with `optional()` is left out while it is None, so a record carries only what its run had. A field made
with `tagged(by)` is optional too, and typed with a union of Typed classes of which its data picks one: the option
whose `TAG` is the value of the record's own field `by` (a run's `extras` are its tool's: scenario_record.py).

A top-level record kind also says its `SCHEMA` (the version written now) and, in `MIGRATIONS`, how to
bring each older version's data up to it, one version at a time; `from_json` applies them, so old
records load without being rewritten. Data of a newer version than the code is refused. Its `schema` field
defaults to SCHEMA, so a record made now carries the version its class writes without a writer saying it.

The catalogue's tables are read by it too (model/catalogue.py: Design, and Scenario, whose settings are checked
against ScenarioSettings' annotations, model/settings.py), and the suites' `[suite]` tables and plans. An
annotation may add a condition in words with `Annotated[T, Check(...)]` (NON_EMPTY: a list with at least one
item) and name the values it allows with `Literal[...]`; `type_name` says any annotation in words, for errors and
the catalogue's README. A field made with `any_age()` is read leniently (`from_json(data, lenient=True)`), as a
record of any age: keys its class no longer knows are left out and a field without a default that the data lacks
reads None (a scenario record's settings, written before a setting was retired or became required).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar, Union

T = TypeVar("T", bound="Typed")
WORDS = {int: "integer", float: "number", bool: "boolean", str: "string"}  # how type_name says the plain types


@dataclasses.dataclass(frozen=True)
class Check:
    """A condition an annotation adds (`Annotated[T, Check(...)]`): the words that name the annotated type ("{}" for
    T's own name) and what a value of T must also satisfy."""

    words: str
    holds: Callable[[Any], bool] = lambda value: True


NON_EMPTY = Check("non-empty {}", bool)


class RecordShapeError(ValueError):
    """Data that is not the shape its record kind declares: names the key, where it is, and what was expected."""


def optional(**kwargs: Any) -> Any:
    """A field a record may lack: None when absent, and left out of the JSON while None."""
    return dataclasses.field(default=None, metadata={"omit_none": True}, **kwargs)


def any_age() -> Any:
    """A field read as a record of any age keeps it: leniently (module docstring), whatever its record's schema."""
    return dataclasses.field(metadata={"lenient": True})


def tagged(by: str) -> Any:
    """An optional field read as the option of its union whose TAG equals the record's field `by` (its tag)."""
    return dataclasses.field(default=None, metadata={"omit_none": True, "tagged_by": by})


def tagged_option(kind: Any, tag: Any, where: str) -> type[Typed]:
    """The Typed class of the union `kind` whose TAG is `tag`; RecordShapeError naming the tags it knows if none."""
    options = {option.TAG: option for option in typing.get_args(kind)
               if isinstance(option, type) and issubclass(option, Typed)}
    if tag not in options:
        raise RecordShapeError(f"{where}: no record for {tag!r} (known: {', '.join(sorted(map(str, options)))})")
    return options[tag]


@dataclasses.dataclass(frozen=True)
class Typed:
    """Base of every typed record and of the parts it is made of."""

    SCHEMA: ClassVar[int | None] = None  # set on a top-level record kind: the version it writes
    MIGRATIONS: ClassVar[dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {}  # version -> data at version+1
    TAG: ClassVar[str | None] = None  # set on an option of a tagged() field's union: the tag that picks it

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every subclass is a frozen, keyword-only dataclass: declaring the fields is all a kind writes."""
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("SCHEMA") is not None and "schema" in cls.__dict__.get("__annotations__", {}):
            cls.schema = cls.SCHEMA  # the field's default: a record made now carries the version its class writes
        dataclasses.dataclass(frozen=True, kw_only=True)(cls)

    @classmethod
    def from_json(cls, data: Any, where: str = "", *, lenient: bool = False) -> Self:
        """The record read from JSON data (migrated to SCHEMA first if the class has one); RecordShapeError if it does
        not fit. Lenient: keys the class does not know are left out, and one it needs that the data lacks reads None."""
        where = where or cls.__name__
        if cls.SCHEMA is not None:
            data = migrate(cls, data, where)
        return _read(cls, data, where, lenient)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data: its keys in field order, optional fields left out while None."""
        out: dict[str, Any] = {}
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if value is None and item.metadata.get("omit_none"):
                continue
            out[item.name] = _write(value)
        return self.to_flat(out)

    @classmethod
    def from_flat(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Where a kind's JSON is flatter than its fields (a nested part's keys kept at the top), gather them."""
        return data

    def to_flat(self, data: dict[str, Any]) -> dict[str, Any]:
        """The inverse of from_flat, on the way out."""
        return data


def migrate(cls: type[Typed], data: Any, where: str) -> dict[str, Any]:
    """Data of any schema version brought up to cls.SCHEMA through cls.MIGRATIONS, one version at a time."""
    if not isinstance(data, dict):
        raise RecordShapeError(f"{where}: expected a JSON object, found {type(data).__name__}")
    version = data.get("schema", 0)  # 0: written before its kind carried a version (a migration from 0 reads it)
    if not isinstance(version, int) or isinstance(version, bool) or (version == 0 and 0 not in cls.MIGRATIONS):
        raise RecordShapeError(f"{where}: no schema version (a key `schema` with an integer)")
    assert cls.SCHEMA is not None
    if version > cls.SCHEMA:
        raise RecordShapeError(f"{where}: schema {version} is newer than this harness reads ({cls.SCHEMA}): update it")
    while version < cls.SCHEMA:
        step = cls.MIGRATIONS.get(version)
        if step is None:
            raise RecordShapeError(f"{where}: schema {version} cannot be read (no migration to {version + 1})")
        data = {**step(data), "schema": version + 1}
        version += 1
    return data


@cache
def field_types(cls: type[Typed]) -> dict[str, Any]:
    """Each field's annotation, Annotated conditions kept."""
    return typing.get_type_hints(cls, include_extras=True)


def _read(cls: type[T], data: Any, where: str, lenient: bool = False) -> T:
    if not isinstance(data, dict):
        raise RecordShapeError(f"{where}: expected a JSON object ({cls.__name__}), found {type(data).__name__}")
    data = cls.from_flat(data)
    known = {item.name: item for item in dataclasses.fields(cls)}
    unknown = [key for key in data if key not in known]
    if unknown and not lenient:
        key = unknown[0]
        near = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean `{near[0]}`?)" if near else ""
        raise RecordShapeError(f"{where}: unknown key `{key}`{hint}; {cls.__name__} has: {', '.join(known)}")
    hints = field_types(cls)
    values = {}
    for name, item in known.items():
        if name in data:
            kind = hints[name]
            if "tagged_by" in item.metadata and data[name] is not None:
                kind = tagged_option(kind, data.get(item.metadata["tagged_by"]), f"{where}.{name}")
            values[name] = read_value(kind, data[name], f"{where}.{name}", item.metadata.get("lenient", False))
        elif item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
            if not lenient:
                raise RecordShapeError(f"{where}: missing key `{name}` ({cls.__name__} needs it)")
            values[name] = None
    return cls(**values)


def read_value(kind: Any, value: Any, where: str, lenient: bool = False) -> Any:
    """value checked (and built, for Typed classes, leniently if asked) against the annotation kind."""
    if kind is Any:
        return value
    origin = typing.get_origin(kind)
    if origin is Annotated:
        inner, *conditions = typing.get_args(kind)
        try:
            value = read_value(inner, value, where, lenient)
        except RecordShapeError:
            if inner not in WORDS:  # a nested value's error says where in it
                raise
            raise RecordShapeError(f"{where}: expected {type_name(kind)}, found {type(value).__name__} {value!r:.60}") \
                from None  # a plain value: the annotation's words say what it is for, not only its type
        if not all(condition.holds(value) for condition in conditions if isinstance(condition, Check)):
            raise RecordShapeError(f"{where}: expected {type_name(kind)}, found {value!r:.60}")
        return value
    if origin is Literal:
        if any(type(value) is type(option) and value == option for option in typing.get_args(kind)):
            return value
        raise RecordShapeError(f"{where}: expected {type_name(kind)}, found {value!r:.60}")
    if origin in (Union, types.UnionType):
        options = typing.get_args(kind)
        if value is None:
            if type(None) in options:
                return None
            raise RecordShapeError(f"{where}: null where {type_name(kind)} is expected")
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return read_value(option, value, where, lenient)
            except RecordShapeError as error:
                errors.append(error)
        if len(errors) == 1:
            raise errors[0]
        raise RecordShapeError(f"{where}: {value!r:.60} is not {type_name(kind)}")
    if origin is list:
        if not isinstance(value, list):
            raise RecordShapeError(f"{where}: expected a list, found {type(value).__name__}")
        (item,) = typing.get_args(kind)
        return [read_value(item, element, f"{where}[{index}]", lenient) for index, element in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise RecordShapeError(f"{where}: expected an object, found {type(value).__name__}")
        key_kind, item = typing.get_args(kind)
        return {read_value(key_kind, key, f"{where}: key {key!r}"): read_value(item, element, f"{where}.{key}", lenient)
                for key, element in value.items()}
    if isinstance(kind, type) and issubclass(kind, Typed):
        return _read(kind, value, where, lenient)
    if kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value  # an int stays an int: a record reads back exactly as it was written
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind in (str, bool):
        if isinstance(value, kind):
            return value
    else:
        raise TypeError(f"{where}: a record field typed {kind!r}, which typed.py cannot check")
    if value is None:
        raise RecordShapeError(f"{where}: null where {type_name(kind)} is expected")
    raise RecordShapeError(f"{where}: expected {type_name(kind)}, found {type(value).__name__} {value!r:.60}")


def type_name(kind: Any) -> str:
    """An annotation in words, as errors and scripts/catalogue/README.md say it: list[int] is "list of integers",
    T | None is T's name (None is unset, not a value), a Typed class its name."""
    origin, options = typing.get_origin(kind), typing.get_args(kind)
    if origin is Annotated:
        words = type_name(options[0])
        for condition in options[1:]:
            words = condition.words.format(words) if isinstance(condition, Check) else words
        return words
    if origin is Literal:
        return " or ".join(json.dumps(option) for option in options)
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(option) for option in options if option is not type(None))
    if origin is list:
        item = type_name(options[0])
        return f"list of {item}s" if options[0] in WORDS else f"list of {item}"
    if origin is dict:
        return f"table of {type_name(options[0])} -> {type_name(options[1])}"
    if kind is Any:
        return "anything"
    return WORDS.get(kind) or getattr(kind, "__name__", None) or str(kind).replace("typing.", "")


def _write(value: Any) -> Any:
    if isinstance(value, Typed):
        return value.to_json()
    if isinstance(value, list):
        return [_write(item) for item in value]
    if isinstance(value, dict):
        return {key: _write(item) for key, item in value.items()}
    return value
