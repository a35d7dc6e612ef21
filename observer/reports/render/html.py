"""Blocks as one self-contained HTML page: inline CSS, charts as inline SVG, wide tables
scrolling on their own on a phone, and a few lines of inline script for the filter boxes
(the page reads the same without them, as in a mail client that drops scripts)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from html import escape

from observer.reports.render.blocks import Block, Cell, Evidence, Heading, Link, List, Table, Text
from observer.reports.render.i18n import Language
from observer.reports.render.json import json_text

_CSS = """
body{font-family:"Noto Sans CJK SC","Noto Sans SC","Noto Sans","Helvetica Neue",Arial,
sans-serif;margin:24px auto;max-width:1120px;color:#1d2329;line-height:1.45;padding:0 16px}
h1{font-size:26px;margin-bottom:4px}h2{font-size:20px;margin-top:32px;border-bottom:2px solid
#e3e7eb;padding-bottom:4px}h3{font-size:16px;margin-top:20px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:13px}
th,td{border:1px solid #d5dbe1;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f2f4f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
table.headline td:first-child{font-weight:600}table.headline td{min-width:120px}
.meta{color:#58636e;margin:2px 0}.note{color:#58636e;font-size:13px}
.chart{display:block;margin:12px 0 20px;max-width:100%;height:auto}
.pass{color:#1d7a3e;font-weight:700}.fail{color:#b3261e;font-weight:700}
.not_observed{color:#6b7380;font-weight:700}
.rec{font-size:24px;font-weight:800;padding:10px 16px;border-radius:6px;display:inline-block}
.rec.go{background:#dff3e4;color:#1d7a3e}.rec.limited_go{background:#fff1d6;color:#8a5a00}
.rec.no_go{background:#fbe0de;color:#b3261e}.rec.not_decidable{background:#e4e4e4;color:#3c3c3c}
details{margin:4px 0 10px}pre{background:#f6f8fa;padding:8px;font-size:12px;overflow:auto}
.scroll{overflow-x:auto;max-width:100%}input.filter{margin:4px 0;padding:4px 8px;width:260px;
max-width:100%;font:inherit}tr:target{background:#fff6d6}
"""
# A filter box hides the rows of the table after it that do not contain its text.
_FILTER_SCRIPT = (
    "<script>document.querySelectorAll('input.filter').forEach(function(f){"
    "var rows=f.nextElementSibling.querySelectorAll('tbody tr');"
    "f.addEventListener('input',function(){var q=f.value.toLowerCase();"
    "rows.forEach(function(r){r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0;});"
    "});});</script>\n"
)


def to_html(title: str, language: Language, blocks: Sequence[Block]) -> str:
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{escape(block.text)}</h{block.level}>")
        elif isinstance(block, Text):
            css = f' class="{block.css}"' if block.css else ""
            body.append(f"<p{css}>{escape(block.text)}</p>")
        elif isinstance(block, Table):
            body.append(_html_table(block))
        elif isinstance(block, List):
            tag = "ol" if block.ordered else "ul"
            items = "".join(f"<li>{escape(item)}</li>" for item in block.items)
            body.append(f"<{tag}>{items}</{tag}>")
        elif isinstance(block, Evidence):
            body.append(
                f"<details><summary>{escape(block.title)}</summary>"
                f"<pre>{escape(json_text(block.data))}</pre></details>"
            )
        else:
            body.append(block.svg)
    return (
        f'<!DOCTYPE html>\n<html lang="{language}"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n"
        + (_FILTER_SCRIPT if any(isinstance(b, Table) and b.filter_label for b in blocks) else "")
        + "</body></html>\n"
    )


def _html_table(table: Table) -> str:
    css = f' class="{table.css}"' if table.css else ""
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headers)
    ids = [f' id="{escape(i)}"' for i in table.row_ids] or [""] * len(table.rows)
    rows = "".join(
        f"<tr{row_id}>" + "".join(_html_cell(c, table.cell_css) for c in row) + "</tr>"
        for row_id, row in zip(ids, table.rows, strict=True)
    )
    search = ""
    if table.filter_label:
        label = escape(table.filter_label)
        search = f'<input type="search" class="filter" placeholder="{label}" aria-label="{label}">'
    return (
        f'<div class="scroll">{search}<table{css}><thead><tr>{head}</tr></thead>'
        f"<tbody>{rows}</tbody></table></div>"
    )


def _html_cell(cell: Cell, cell_css: Mapping[str, str]) -> str:
    if not isinstance(cell, str):
        return "<td>" + ", ".join(_html_link(link) for link in cell) + "</td>"
    css = cell_css.get(cell)
    if css is None and _NUMBER.match(cell):
        css = "num"
    return f'<td class="{css}">{escape(cell)}</td>' if css else f"<td>{escape(cell)}</td>"


def _html_link(link: Link) -> str:
    return f'<a href="#{escape(link.anchor)}">{escape(link.text)}</a>'


# A figure: a number with its unit or percentage, right-aligned; not a day or a time.
_NUMBER = re.compile(r"^-?[\d.,]+(%|\s?[^\d\s]{1,3})?(\s[\d.,]+\s?[^\d\s]{1,3})?(\s\([\d.,]+%\))?$")
