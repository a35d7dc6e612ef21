"""The sentences builders speak in: a message key and its parameters, language-free; only
rendering picks the words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from observer.domain import JsonValue


@dataclass(frozen=True, slots=True)
class Note:
    """A sentence of a report, language-free. Parameters named `*_seconds` are written as
    durations, `share` and `*_share` (0..1) as percentages, `subject` (Subjects.params) as
    whom and where, only the parts that name something, and a list as names listed the way
    the language lists them (`named`: one cut short ends with how many more)."""

    key: str
    params: Mapping[str, JsonValue] = field(default_factory=dict)


def named(names: Sequence[str], limit: int) -> list[JsonValue]:
    """The first `limit` of `names` as a Note's list parameter, then how many more there are:
    a large fleet's nodes are counted, not named."""
    shown: list[JsonValue] = list(names[:limit])
    return [*shown, len(names) - limit] if len(names) > limit else shown
