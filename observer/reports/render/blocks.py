"""The block model both serialisers write: a report's content said once, so its Markdown and
its HTML say the same things (charts and headings over charts appear in HTML only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Rendered:
    """A report in its three forms, each a whole file."""

    markdown: str
    html: str
    json: str


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str
    html_only: bool = False  # a heading over charts only


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    css: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]
    css: str = ""
    cell_css: Mapping[str, str] = dataclasses.field(default_factory=dict)  # text -> class


@dataclass(frozen=True, slots=True)
class List:
    items: Sequence[str]
    ordered: bool = False


@dataclass(frozen=True, slots=True)
class Evidence:
    title: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Chart:
    svg: str


Block = Heading | Text | Table | List | Evidence | Chart
