"""Blocks as Markdown."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from observer.reports.render.blocks import Block, Cell, Evidence, Heading, List, Table, Text
from observer.reports.render.json import json_text


def to_markdown(blocks: Sequence[Block]) -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            if not block.html_only:
                out.append("#" * block.level + " " + block.text)
        elif isinstance(block, Text):
            out.append(block.text)
        elif isinstance(block, Table):
            out.append(
                "\n".join(
                    [
                        "| " + " | ".join(_md_cell(h) for h in block.headers) + " |",
                        "|" + "|".join("---" for _ in block.headers) + "|",
                        *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows),
                    ]
                )
            )
        elif isinstance(block, List):
            out.append(
                "\n".join(
                    f"{i + 1}. {item}" if block.ordered else f"- {item}"
                    for i, item in enumerate(block.items)
                )
            )
        elif isinstance(block, Evidence):
            out.append(
                f"<details><summary>{escape(block.title)}</summary>\n\n```json\n"
                f"{json_text(block.data)}\n```\n\n</details>"
            )
    return "\n\n".join(out) + "\n"


def _md_cell(cell: Cell) -> str:
    text = cell if isinstance(cell, str) else ", ".join(link.text for link in cell)
    return " ".join(text.replace("|", "\\|").split())
