"""The pages as their readers meet them: the decision or the day on the first screen with
links to what says more, a contents entry for every section, the raw evidence after every
table, no Markdown syntax left in the HTML, and the charts' hours named by their timezone
with the windows shaded. Read from the played week's daily summaries and verdict, in both
languages."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from observer.reports.compute.daily import build_daily
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import load_daily, load_verdict
from observer.reports.render.blocks import Rendered
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language
from observer.reports.render.verdict import render_verdict
from tests.reports.conftest import PlayedWeek
from tests.reports.week import DAYS

LANGUAGES: tuple[Language, ...] = ("en", "zh-CN")
FIRST_SCREEN_LINES = 12  # of the Markdown: the title, the lead and no more


def _daily(played: PlayedWeek, language: Language) -> Rendered:
    settings = played.settings.model_copy(
        update={"reports": played.settings.reports.model_copy(update={"language": language})}
    )
    return render_daily(
        build_daily(load_daily(played.store, settings, DAYS[4], played.built_at)), language
    )


def _verdict(played: PlayedWeek, language: Language) -> Rendered:
    return render_verdict(
        build_verdict(load_verdict(played.store, played.settings, played.built_at)), language
    )


class _Page(HTMLParser):
    """The elements of a page in order: (tag, attributes, text inside until the next tag)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], list[str]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, []))

    def handle_data(self, data: str) -> None:
        if self.elements:
            self.elements[-1][2].append(data)

    def text(self, i: int) -> str:
        return "".join(self.elements[i][2])

    def ids(self) -> set[str]:
        return {a["id"] for _, a, _ in self.elements if "id" in a}

    def links(self, start: int = 0, end: int | None = None) -> list[str]:
        return [
            a["href"][1:]
            for _, a, _ in self.elements[start:end]
            if a.get("href", "").startswith("#")
        ]

    def first(self, tag: str, **attrs: str) -> int:
        return next(
            i
            for i, (t, a, _) in enumerate(self.elements)
            if t == tag and all(a.get(k) == v for k, v in attrs.items())
        )


def _pages(played: PlayedWeek) -> list[tuple[str, Rendered]]:
    return [
        (f"{kind}-{language}", render(played, language))
        for language in LANGUAGES
        for kind, render in (("daily", _daily), ("verdict", _verdict))
    ]


def _slug(heading: str) -> str:
    """GitHub's id of a Markdown heading, as its readers' viewers give it."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_every_section_is_in_the_contents_and_every_link_leads_somewhere(played: PlayedWeek):
    for name, rendered in _pages(played):
        page = _Page(rendered.html)
        ids = page.ids()
        sections = [a.get("id") for t, a, _ in page.elements if t == "h2"]
        assert sections and all(sections), (name, sections)
        nav = page.first("nav", **{"class": "contents"})
        end = next(i for i in range(nav + 1, len(page.elements)) if page.elements[i][0] == "h2")
        listed = page.links(nav, end)
        # One entry per section, in the page's order; then the readers' lines, each a subset.
        assert listed[: len(sections)] == sections, name
        assert set(listed[len(sections) :]) <= set(sections), name
        readers = [
            page.text(i) for i, (t, a, _) in enumerate(page.elements) if a.get("class") == "readers"
        ]
        assert len(readers) == 4, (name, readers)
        assert not set(page.links()) - ids, (name, set(page.links()) - ids)

        headings = {
            _slug(line.lstrip("#").strip())
            for line in rendered.markdown.splitlines()
            if line.startswith("#")
        }
        markdown_links = set(re.findall(r"\]\(#([^)]+)\)", rendered.markdown))
        assert markdown_links and not markdown_links - headings, (name, markdown_links - headings)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_daily_first_screen_says_the_day_with_links(played: PlayedWeek, language: Language):
    rendered = _daily(played, language)
    figures = json.loads(rendered.json)
    first = "\n".join(rendered.markdown.splitlines()[:FIRST_SCREEN_LINES])
    tasks = next(line for line in first.splitlines() if str(figures["tasks_total"]) in line)
    assert str(figures["tasks_failed"]) in tasks and "](#" in tasks, tasks
    assert first.count("](#") >= 5, first

    page = _Page(rendered.html)
    lead = page.first("div", **{"class": "lead"})
    body = page.first("body")
    assert [t for t, _, _ in page.elements[body + 1 : lead]] == ["h1"]  # the page's first block
    assert {"tasks", "findings", "gpu", "queue", "blind"} <= set(page.links(lead, lead + 20))


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_verdict_first_screen_says_the_decision_and_the_criteria_behind_it(
    played: PlayedWeek, language: Language
):
    rendered = _verdict(played, language)
    verdict = json.loads(rendered.json)
    first = rendered.markdown.splitlines()[:FIRST_SCREEN_LINES]
    decision = next(line for line in first if line.startswith("- "))
    assert verdict["recommendation_text"] in decision, (decision, verdict["recommendation_text"])
    must_fix = [i["criterion"] for i in verdict["tiers"]["must_fix"]]
    assert must_fix
    page = _Page(rendered.html)
    lead = page.first("div", **{"class": "lead"})
    links = page.links(lead, lead + 30)
    assert "recommendation" in links
    assert {f"criterion-{c}" for c in must_fix} <= set(links), links


def test_raw_evidence_comes_after_every_table_and_collapsed(played: PlayedWeek):
    for name, rendered in _pages(played):
        html = rendered.html
        if "<pre>" not in html:
            continue
        assert html.index("<pre>") > html.rindex("</table>"), name
        assert html.count("<pre>") == html.count("<details><summary>"), name
        lines = rendered.markdown.splitlines()
        table_rows = [i for i, line in enumerate(lines) if line.startswith("|")]
        assert lines.index("```json") > table_rows[-1], name


def test_the_html_has_no_markdown_backticks(played: PlayedWeek):
    for name, rendered in _pages(played):
        assert "`" not in rendered.html, (
            name,
            rendered.html[rendered.html.index("`") - 80 :][:160],
        )
    commands = [r.html for _, r in _pages(played)]
    assert any("<code>observer runs --date YYYY-MM-DD</code>" in h for h in commands)


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_hours_chart_names_its_timezone_and_shades_the_windows(
    played: PlayedWeek, language: Language
):
    windows = sorted(w.name for w in played.settings.controller.windows)
    # The daily summary is a Friday's, which has both of the week's windows, as the week has.
    for rendered in (_daily(played, language), _verdict(played, language)):
        chart = re.search(r'<svg[^>]*data-chart="utilisation".*?</svg>', rendered.html, re.S)
        axis = re.search(r'class="axis">([^<]+)<', chart.group(0)) if chart else None
        zone = re.search(r'<p class="meta">[^<]*?[:：]\s*([^<]+)</p>', rendered.html)
        assert chart and axis and zone, rendered.html[:200]
        assert zone.group(1) in axis.group(1), (zone.group(1), axis.group(1))
        svg = chart.group(0)
        bands = re.findall(r'class="band-label">([^<]+)<', svg)
        assert sorted(bands) == windows, bands
        assert svg.count('class="band"') >= len(windows)
