"""The go-live verdict's content as blocks: recommendation, its launch scope and what widens
it, the scoring by layer, its three tiers and conditions, each criterion with its layer and
evidence, the data's later optimisations, the plan to verify again and the soak day by
day."""

from __future__ import annotations

from collections.abc import Sequence
from zoneinfo import ZoneInfo

from observer.reports.compute.criteria.result import CriterionResult, FailureClass, Status
from observer.reports.compute.events import NODE_NAMES
from observer.reports.compute.scope import Widen
from observer.reports.compute.verdict import TierItem, Verdict
from observer.reports.render import charts
from observer.reports.render.blocks import Block, Chart, Heading, List, Rendered, Table, Text
from observer.reports.render.events import finding_items
from observer.reports.render.gpu import utilisation_chart
from observer.reports.render.headline import headline_rows, verdict_title
from observer.reports.render.i18n import Language, Words, forget_texts
from observer.reports.render.json import json_text, tier_text, verdict_json
from observer.reports.render.layout import to_html, to_markdown
from observer.reports.render.page import page_blocks
from observer.reports.render.usage import gpu_hours_csv, usage_blocks


def render_verdict(verdict: Verdict, language: Language) -> Rendered:
    try:
        words = Words(language, ZoneInfo(verdict.timezone))
        title = verdict_title(verdict, words)
        blocks = _verdict_blocks(verdict, words, title)
        return Rendered(
            markdown=to_markdown(blocks),
            html=to_html(title, language, blocks),
            json=json_text(verdict_json(verdict, language)) + "\n",
            more_csv=(("gpu_hours", gpu_hours_csv(verdict.usage)),),
        )
    finally:
        forget_texts()


def _verdict_blocks(v: Verdict, w: Words, title: str) -> list[Block]:
    rec = v.recommendation.value
    period: list[Block] = [
        Text(w("label.timezone", timezone=w.zone(v.soak_started_at, v.soak_ended_at)), "meta"),
        Text(
            w(
                "label.soak",
                start=w.instant(v.soak_started_at),
                end=w.instant(v.soak_ended_at),
                length_seconds=(v.soak_ended_at - v.soak_started_at).total_seconds(),
            ),
            "meta",
        ),
        *(
            [Text(w("note.provisional", at=v.soak_ended_at.isoformat()), "note")]
            if v.provisional
            else []
        ),
    ]
    blocks: list[Block] = [
        Heading(2, w("sec.recommendation"), anchor="recommendation"),
        Text(w(f"rec.{rec}"), f"rec {rec}"),
        Text(w.note(v.because)),
        *_launch_blocks(v, w),
        *_scoring_blocks(v, w),
        Heading(3, w("sec.tiers")),
        *(block for tier, items in v.tiers.items() for block in _tier_blocks(tier, items, w)),
        Heading(3, w("sec.scope")),
        Text(w.note(v.observation_rule), "note"),
    ]
    if v.scope:
        blocks.append(List([w.note(n) for n in v.scope]))
    blocks += [
        *_layer_blocks(v, w),
        Heading(2, w("sec.criteria"), anchor="criteria"),
        Table(
            [
                w("col.criterion"),
                w("col.score_layer"),
                w("col.status"),
                w("col.class"),
                w("col.reason"),
            ],
            [
                [
                    w(f"crit.{c.criterion}"),
                    w(f"score.{v.score_layers[c.criterion].value}"),
                    _status(c, w),
                    w(f"class.{c.failure_class.value}") if c.failure_class else "—",
                    w.note(c.class_reason) if c.class_reason else "—",
                ]
                for c in v.criteria
            ],
            cell_css={
                **{w(f"verdict.status.{s.value}"): s.value for s in Status},
                w("verdict.status.pass_narrowed"): Status.PASS.value,
            },
        ),
    ]
    for c in v.criteria:
        blocks += _criterion_blocks(c, w)
    if v.later:
        blocks.append(Heading(2, w("sec.later"), anchor="later"))
        for c in v.later:
            blocks += _criterion_blocks(c, w, later=True)
    blocks += [
        Heading(2, w("sec.reverification"), anchor="reverification"),
        List([w.note(n) for n in v.reverification], ordered=True),
        Heading(2, w("sec.days"), anchor="days"),
        Chart(_days_chart(v, w)),
        Chart(utilisation_chart("chart.util_by_hour", v.figures, w)),
        Table(
            [
                w("col.date"),
                w("fig.tasks_total"),
                w("fig.tasks_failed"),
                w("fig.queue_wait_avg"),
                w("fig.gpu_util_avg"),
                w("col.sm_active_avg"),
                w("col.findings_new"),
                w("col.blind"),
            ],
            [
                [
                    d.day.isoformat(),
                    w.integer(d.tasks_total),
                    w.integer(d.tasks_failed),
                    w.duration(d.queue_wait_seconds_avg),
                    w.percent(d.gpu_utilization_avg),
                    w.percent(d.gpu_sm_active_avg),
                    w.integer(d.findings_new),
                    w.duration(d.blind_seconds),
                ]
                for d in v.days
            ],
        ),
        *usage_blocks(v.usage, w),
        Heading(2, w("sec.headline"), anchor="headline"),
        Table(
            [w("col.figure"), w("col.soak_to_date")],
            [[w(key), value(v.figures)] for key, value in headline_rows(w)],
            "headline",
        ),
    ]
    return page_blocks(title, _lead(v, w), period, blocks, w)


def _lead(v: Verdict, w: Words) -> list[tuple[str, tuple[str, ...]]]:
    """The decision, why, and each tier's criteria, each with the sections that say more."""
    rec = v.recommendation.value
    later = {c.criterion for c in v.later}
    lines: list[tuple[str, tuple[str, ...]]] = [
        (
            w("lead.recommendation", recommendation=w(f"rec.{rec}"), because=w.note(v.because)),
            ("recommendation",),
        ),
        (w.note(v.launch), ("launch-scope",)),
    ]
    for tier, items in v.tiers.items():
        named = w.names([w(f"crit.{i.criterion}") for i in items]) if items else w("word.none")
        anchors = tuple(_anchor(i.criterion, later=i.criterion in later) for i in items)
        lines.append((w("lead.tier", tier=w(f"tier.{tier.value}"), criteria=named), anchors))
    lines.append(
        (
            w("lead.soak", tasks=v.figures.tasks.total, failed=v.figures.tasks.failed),
            ("days", "layers"),
        )
    )
    return lines


def _launch_blocks(v: Verdict, w: Words) -> list[Block]:
    """The launch scope in a sentence; for each tenant or pool left out, the must criteria it
    waits on and the steps of the plan to verify again (numbered as that list is) for them."""
    blocks: list[Block] = [
        Heading(3, w("sec.launch_scope"), anchor="launch-scope"),
        Text(w.note(v.launch)),
    ]
    if not v.launch_scope.widen:
        return blocks
    rows = [
        [
            _left_out(item, w),
            w.names([w(f"crit.{c}") for c in item.criteria]),
            _steps([str(v.reverification.index(n) + 1) for n in item.reverify], w),
        ]
        for item in v.launch_scope.widen
    ]
    return [
        *blocks,
        Text(w("note.widen"), "note"),
        Table([w("col.left_out"), w("col.must_pass"), w("col.reverify")], rows),
    ]


def _steps(numbers: Sequence[str], w: Words) -> str:
    if not numbers:
        return "—"
    key = "widen.step" if len(numbers) == 1 else "widen.steps"
    return w(key, steps=list(numbers))


def _left_out(item: Widen, w: Words) -> str:
    return w(f"widen.{item.part}", name=item.name)


def _scoring_blocks(v: Verdict, w: Words) -> list[Block]:
    """Per layer, the criteria that passed, failed and went unobserved, counted and named:
    every criterion appears once, so the table is also the mapping of criteria to layers."""

    def cell(criteria: Sequence[str]) -> str:
        if not criteria:
            return w.integer(0)
        return w(
            "score.cell", count=len(criteria), names=w.names([w(f"crit.{c}") for c in criteria])
        )

    rows = [
        [w(f"score.{layer.value}"), cell(s.passed), cell(s.failed), cell(s.not_observed)]
        for layer, s in v.scoring.items()
    ]
    return [
        Heading(3, w("sec.scoring"), anchor="scoring"),
        Text(w("note.scoring"), "note"),
        Table(
            [
                w("col.score_layer"),
                w("col.passed"),
                w("col.failed"),
                w("col.not_observed"),
            ],
            rows,
        ),
    ]


def _anchor(criterion: str, *, later: bool) -> str:
    return f"later-{criterion}" if later else f"criterion-{criterion}"


def _status(c: CriterionResult, w: Words) -> str:
    """A pass that holds on part of the fleet only says so."""
    if c.status is Status.PASS and c.not_observed:
        return w("verdict.status.pass_narrowed")
    return w(f"verdict.status.{c.status.value}")


def _layer_blocks(v: Verdict, w: Words) -> list[Block]:
    rows = [
        [
            w(f"src.{layer.layer}"),
            w("word.yes") if layer.set_up else w("word.no"),
            w.percent(100 * layer.share) if layer.set_up else "—",
            w("value.owner_state_known", known=layer.covered, nodes=layer.nodes)
            if layer.nodes
            else "—",
            w.names(list(layer.not_covered[:NODE_NAMES]), len(layer.not_covered[NODE_NAMES:])),
        ]
        for layer in v.layers.values()
    ]
    columns = [
        w("col.layer"),
        w("col.set_up"),
        w("col.coverage"),
        w("col.nodes_covered"),
        w("col.not_covered"),
    ]
    return [
        Heading(2, w("sec.layers"), anchor="layers"),
        Text(w("note.layers"), "note"),
        Table(columns, rows),
    ]


def _tier_blocks(tier: FailureClass, items: Sequence[TierItem], w: Words) -> list[Block]:
    heading = Heading(4, w(f"tier.{tier.value}"))
    if not items:
        return [heading, List([w("word.none")])]
    return [heading, List([tier_text(i, w) for i in items])]


def _criterion_blocks(c: CriterionResult, w: Words, later: bool = False) -> list[Block]:
    """`later`: one of the data's later optimisations, named by its class and its reason."""
    if later and c.failure_class and c.class_reason:
        status = w(f"class.{c.failure_class.value}")
        evidence = [w.note(c.class_reason), *(w.note(n) for n in c.evidence)]
    else:
        status = w(f"verdict.status.{c.status.value}")
        evidence = [w.note(n) for n in c.evidence]
    blocks: list[Block] = [
        Heading(
            3, f"{w(f'crit.{c.criterion}')} — {status}", anchor=_anchor(c.criterion, later=later)
        ),
        List(evidence),
    ]
    if c.findings:
        blocks += finding_items(c.findings, w)
    return blocks


def _days_chart(v: Verdict, w: Words) -> str:
    return charts.bars(
        "tasks-per-day",
        w("chart.tasks_per_day"),
        [d.day.isoformat() for d in v.days],
        [
            charts.Series(w("chart.tasks"), [float(d.tasks_total) for d in v.days]),
            charts.Series(w("chart.failed"), [float(d.tasks_failed) for d in v.days]),
        ],
        lambda x: w.integer(None if x is None else round(x)),
        w("chart.no_data"),
        w.labelled,
    )
