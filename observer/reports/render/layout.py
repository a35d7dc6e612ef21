"""Blocks laid out as a page: the Jinja2 templates in `layouts/` write the Markdown file and the
self-contained HTML page from the same blocks, so both say the same things."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import jinja2
from markupsafe import Markup, escape

from observer.reports.render import charts
from observer.reports.render.blocks import (
    Block,
    Cell,
    Chart,
    Contents,
    Evidence,
    Heading,
    Lead,
    List,
    Table,
    Text,
)
from observer.reports.render.i18n import Language
from observer.reports.render.json import json_text


def to_html(title: str, language: Language, blocks: Sequence[Block]) -> str:
    return _HTML.render(
        title=title, language=language, blocks=blocks, chart_max_width=charts.MAX_WIDTH
    )


def to_markdown(blocks: Sequence[Block]) -> str:
    return _MARKDOWN.render(blocks=blocks)


def _cell_class(cell: str, cell_css: Mapping[str, str]) -> str | None:
    css = cell_css.get(cell)
    if css is not None:
        return css
    if _NUMBER.match(cell):
        return "num"
    return "when" if _WHEN.match(cell) else None


def _code(text: str) -> Markup:
    """HTML: the catalogue's `command` spans as code, not as backticks."""
    return Markup(_CODE.sub(r"<code>\1</code>", str(escape(text))))


def _slug(text: str) -> str:
    """The id GitHub and GitLab give a Markdown heading."""
    return _NOT_IN_SLUG.sub("", text.lower()).replace(" ", "-")


def _md_cell(cell: Cell) -> str:
    text = cell if isinstance(cell, str) else ", ".join(link.text for link in cell)
    return " ".join(text.replace("|", "\\|").split())


# A figure: a number with its unit or percentage (and a share aside, full-width in Chinese),
# right-aligned; not a day or a time.
_NUMBER = re.compile(
    r"^-?[\d.,]+(%|\s?[^\d\s]{1,3})?(\s[\d.,]+\s?[^\d\s]{1,3})?(\s?[(\uff08][\d.,]+%[)\uff09])?$"
)

# A day, or an instant: printed whole, never broken across lines.
_WHEN = re.compile(
    r"^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}(:\d{2})?)?( \(?(UTC|GMT)?[+\-\u2212]\d{1,2}(:?\d{2})?\)?)?$"
)
_CODE = re.compile(r"`([^`]+)`")
_NOT_IN_SLUG = re.compile(r"[^\w\- ]")


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
        "lead": Lead,
        "contents": Contents,
    }
    environment.tests.update(
        {name: (lambda block, kind=kind: isinstance(block, kind)) for name, kind in kinds.items()}
    )
    environment.filters.update(
        cell_class=_cell_class, md_cell=_md_cell, json_text=json_text, code=_code, slug=_slug
    )
    return environment


_HTML = _environment(html=True).get_template("report.html.j2")
_MARKDOWN = _environment(html=False).get_template("report.md.j2")
