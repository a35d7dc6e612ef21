"""Blocks laid out as a page: the Jinja2 templates in `layouts/` write the Markdown file and the
self-contained HTML page from the same blocks, so both say the same things."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import jinja2

from observer.reports.render.blocks import (
    Block,
    Cell,
    Chart,
    Evidence,
    Heading,
    List,
    Table,
    Text,
)
from observer.reports.render.i18n import Language
from observer.reports.render.json import json_text


def to_html(title: str, language: Language, blocks: Sequence[Block]) -> str:
    return _HTML.render(title=title, language=language, blocks=blocks)


def to_markdown(blocks: Sequence[Block]) -> str:
    return _MARKDOWN.render(blocks=blocks)


def _cell_class(cell: str, cell_css: Mapping[str, str]) -> str | None:
    css = cell_css.get(cell)
    return "num" if css is None and _NUMBER.match(cell) else css


def _md_cell(cell: Cell) -> str:
    text = cell if isinstance(cell, str) else ", ".join(link.text for link in cell)
    return " ".join(text.replace("|", "\\|").split())


# A figure: a number with its unit or percentage (and a share aside, full-width in Chinese),
# right-aligned; not a day or a time.
_NUMBER = re.compile(
    r"^-?[\d.,]+(%|\s?[^\d\s]{1,3})?(\s[\d.,]+\s?[^\d\s]{1,3})?(\s?[(\uff08][\d.,]+%[)\uff09])?$"
)


def _environment(*, html: bool) -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("observer.reports.render", "layouts"),
        autoescape=html,
        keep_trailing_newline=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    kinds: dict[str, type] = {
        "heading": Heading,
        "text": Text,
        "table": Table,
        "list": List,
        "evidence": Evidence,
        "chart": Chart,
    }
    environment.tests.update(
        {name: (lambda block, kind=kind: isinstance(block, kind)) for name, kind in kinds.items()}
    )
    environment.filters.update(cell_class=_cell_class, md_cell=_md_cell, json_text=json_text)
    return environment


_HTML = _environment(html=True).get_template("report.html.j2")
_MARKDOWN = _environment(html=False).get_template("report.md.j2")
