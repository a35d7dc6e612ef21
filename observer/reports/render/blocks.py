"""The block model both serialisers write: a report's content said once, so its Markdown and
its HTML say the same things (charts and headings over charts appear in HTML only)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Rendered:
    """A report in its forms, each a whole file: the daily summary also has its per-task
    record as CSV, and further tables as CSV (`more_csv`: name, text), each filed beside it
    as `<stem>-<name>.csv`."""

    markdown: str
    html: str
    json: str
    csv: str | None = None
    more_csv: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str
    html_only: bool = False  # a heading over charts only
    anchor: str = ""  # the HTML id that the contents and the first screen lead to


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    css: str = ""


@dataclass(frozen=True, slots=True)
class Link:
    """Text that leads to a row of another table of the same report (`Table.row_ids`); in
    Markdown, the text alone."""

    text: str
    anchor: str


Cell = str | tuple[Link, ...]


@dataclass(frozen=True, slots=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Cell]]
    css: str = ""
    cell_css: Mapping[str, str] = dataclasses.field(default_factory=dict)  # text -> class
    row_ids: Sequence[str] = ()  # HTML ids of the rows, which Links lead to
    filter_label: str | None = None  # HTML: a search box showing only rows with its text


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


@dataclass(frozen=True, slots=True)
class Lead:
    """The first screen: the decision or the day in a few lines, each followed by the
    headings of the sections that say more."""

    lines: Sequence[tuple[str, Sequence[Heading]]]


@dataclass(frozen=True, slots=True)
class Contents:
    """One entry per section, and for each kind of reader the sections written for them."""

    title: str
    sections: Sequence[Heading]
    readers: Sequence[tuple[str, Sequence[Heading]]]


Block = Heading | Text | Table | List | Evidence | Chart | Lead | Contents
