"""The sentences builders speak in: a message key and its parameters, language-free; only
rendering picks the words."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from observer.domain import JsonValue


@dataclass(frozen=True, slots=True)
class Note:
    """A sentence of a report, language-free. Parameters named `*_seconds` are written as
    durations, `share` and `*_share` (0..1) as percentages, `subject` (Subjects.params) as
    whom and where, only the parts that name something."""

    key: str
    params: Mapping[str, JsonValue] = field(default_factory=dict)
