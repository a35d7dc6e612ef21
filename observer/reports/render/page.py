"""A report's blocks in the order its readers need them: the title, the first screen (the
decision or the day in a few lines), the period, the contents with who reads which section,
the sections, and last the findings' raw evidence, collapsed, never ahead of the tables."""

from __future__ import annotations

from collections.abc import Sequence

from observer.reports.render.blocks import Block, Contents, Evidence, Heading, Lead, Text
from observer.reports.render.i18n import Words


def page_blocks(
    title: str,
    lead: Sequence[tuple[str, Sequence[str]]],
    period: Sequence[Block],
    body: Sequence[Block],
    w: Words,
) -> list[Block]:
    """`lead`: the first screen's lines, each with the anchors of the headings that say more
    (a heading the report does not have is left out)."""
    evidence = [b for b in body if isinstance(b, Evidence)]
    appendix: list[Block] = (
        [Heading(2, w("sec.evidence"), anchor="evidence"), Text(w("note.evidence"), "note")]
        if evidence
        else []
    )
    headings = [b for b in [*body, *appendix] if isinstance(b, Heading) and b.anchor]
    by_anchor = {h.anchor: h for h in headings}

    def to(anchors: Sequence[str]) -> list[Heading]:
        return [by_anchor[a] for a in anchors if a in by_anchor]

    def see(text: str, anchors: Sequence[str]) -> tuple[str, list[Heading]]:
        # The arrow to the links is spaced as the language spaces it (none in Chinese).
        links = to(anchors)
        return (w("lead.see", text=text) if links else text), links

    sections = [h for h in headings if h.level == 2]
    readers = [(w("toc.reader", label=label), to(anchors)) for label, anchors in _readers(w)]
    return [
        Heading(1, title),
        Lead([see(text, anchors) for text, anchors in lead]),
        *period,
        Contents(w("toc.title"), sections, readers),
        *(b for b in body if not isinstance(b, Evidence)),
        *appendix,
        *evidence,
    ]


def _readers(w: Words) -> list[tuple[str, tuple[str, ...]]]:
    """Each kind of reader and the sections written for them, by anchor, in either report."""
    return [
        (
            w("toc.algorithm_engineers"),
            ("recommendation", "tasks", "task_records", "findings", "blind", "criteria"),
        ),
        (
            w("toc.platform_engineers"),
            (
                "queue",
                "wait_reasons",
                "expected_wait",
                "tenants",
                "gpu",
                "usage",
                "inference",
                "layers",
                "criteria",
            ),
        ),
        (
            w("toc.operations"),
            (
                "alerts",
                "health",
                "interventions",
                "findings",
                "blind",
                "deliveries",
                "reverification",
            ),
        ),
        (
            w("toc.managers"),
            ("recommendation", "headline", "charts", "gpu", "usage", "days", "later"),
        ),
    ]
