"""One generic mapping between a frozen dataclass and a table row: a field is stored in the
column of its name, an enum by its value, a mapping as a dict and a tuple as a list (the JSON
columns), everything else (instants included: the tables' UtcDateTime keeps them in UTC) as
it is. Overrides name the few columns that differ."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from enum import Enum
from operator import attrgetter
from typing import Any, Generic, TypeVar

import sqlalchemy as sa

Convert = Callable[[Any], Any]
T = TypeVar("T")


class RowMapping(Generic[T]):
    """Rows of `table` to and from `record`s. `columns` renames fields (field -> column),
    `convert` replaces a field's (to row, from row) conversion, and `derived` adds columns
    computed from a record that are written but never read back.

    `value` reads a row selected with `columns` first (`select()`), by position: named
    access costs more than the query on large reads."""

    def __init__(
        self,
        record: type[T],
        table: sa.Table,
        *,
        columns: Mapping[str, str] | None = None,
        convert: Mapping[str, tuple[Convert, Convert]] | None = None,
        derived: Mapping[str, Callable[[T], Any]] | None = None,
    ) -> None:
        names = [f.name for f in fields(record)]  # type: ignore[arg-type]
        hints = typing.get_type_hints(record)
        renamed = columns or {}
        overrides = convert or {}
        conversions = [overrides.get(name) or _conversion(hints[name]) for name in names]
        self._record = record
        self.columns: tuple[sa.Column[Any], ...] = tuple(
            table.c[renamed.get(name, name)] for name in names
        )
        self._keys = tuple(c.name for c in self.columns)
        self._get = attrgetter(*names)
        self._to_row = tuple(c[0] for c in conversions)
        self._from_row = tuple(c[1] for c in conversions)
        self._plain = all(c is _AS_IS for c in conversions)
        self._derived = dict(derived or {})

    def select(self, *more: sa.ColumnElement[Any]) -> sa.Select[Any]:
        """SELECT this mapping's columns, then `more` (read from the row past `len(columns)`)."""
        return sa.select(*self.columns, *more)

    def row(self, value: T) -> dict[str, Any]:
        """The row storing `value`."""
        values = self._get(value) if len(self._keys) > 1 else (self._get(value),)
        if self._plain:
            row = dict(zip(self._keys, values, strict=True))
        else:
            row = {
                key: to_row(v)
                for key, to_row, v in zip(self._keys, self._to_row, values, strict=True)
            }
        for key, compute in self._derived.items():
            row[key] = compute(value)
        return row

    def value(self, row: Sequence[Any]) -> T:
        """The record stored in `row`, whose first entries are this mapping's columns."""
        if self._plain:
            return self._record(*row[: len(self._keys)])
        return self._record(*(f(v) for f, v in zip(self._from_row, row, strict=False)))


def _same(value: Any) -> Any:
    return value


_AS_IS: tuple[Convert, Convert] = (_same, _same)


def _conversion(hint: Any) -> tuple[Convert, Convert]:
    """How a field of this type is stored and read back."""
    args = typing.get_args(hint)
    optional = typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            return _AS_IS
        to_row, from_row = _conversion(rest[0])
        if to_row is _same:
            return _AS_IS
        return (
            lambda v: None if v is None else to_row(v),
            lambda v: None if v is None else from_row(v),
        )
    origin = typing.get_origin(hint) or hint
    if isinstance(origin, type) and issubclass(origin, Enum):
        return (attrgetter("value"), origin)
    if origin in (Mapping, dict):
        # JSON columns read back as dicts already.
        return (dict, _same)
    if origin is tuple:
        return (list, tuple)
    return _AS_IS


def instant(value: datetime | str) -> datetime:
    """An instant as the driver returns it from a column read without its type (for speed,
    or computed): UTC text from SQLite, an aware datetime from PostgreSQL."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return value.astimezone(UTC)
