"""The zh-CN reports of the played week, Markdown and HTML, say nothing in English: once code,
evidence, ids (runs, nodes, tenants, probes, windows, detectors, metrics, Xid numbers, units)
and the platform's own words, quoted「so」, are taken out, no three Latin-script words in a
row remain. And the check does catch a report with one English finding summary left."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import pytest

from observer.reports.compute.daily import build_daily
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import load_daily, load_verdict
from observer.reports.render.daily import render_daily
from observer.reports.render.verdict import render_verdict
from tests.reports.conftest import PlayedWeek
from tests.reports.week import DAYS

# The played week (tests/reports/conftest.py) is set up by whichever test needs it first:
# seven simulated days, minutes, more on a loaded machine.
pytestmark = pytest.mark.timeout(600)

# Code, evidence and the platform's quoted words, as each form writes them.
_MARKDOWN_OUT = [
    re.compile(r"```.*?```", re.S),
    re.compile(r"<details>.*?</details>", re.S),
    re.compile(r"`[^`\n]*`"),
]
_HTML_OUT = [
    re.compile(r"<(style|script|pre|code|details|svg)\b.*?</\1>", re.S),
    re.compile(r"<[^>]+>"),
    re.compile(r"`[^`\n]*`"),
]
_QUOTED = re.compile(r"「[^」]*」")
_URL = re.compile(r"https?://\S+")
# An id or a measure: a token with a digit, an underscore, a hyphen, a dot, a slash, a colon,
# an equals sign or an @ in it (node-3, run ids, gpu_xid, job/sim-1, 10:00, 8.0, a=b).
_ID = re.compile(r"[^\s,;()（）、，；：。|]*[0-9_\-./:=@][^\s,;()（）、，；：。|]*")
_SENTENCE = re.compile(r"[A-Za-z][A-Za-z']*(?:[ ,'()]+[A-Za-z][A-Za-z']*){2,}")
# Half-width punctuation touching Chinese text ("2小时 (1.5%)", "原因: ...").
_HALF_WIDTH = re.compile(r"[\u4e00-\u9fff（）「」，。：；、] ?[(,;:]|[(,;:] ?[\u4e00-\u9fff]")


def prose(text: str, form: str) -> str:
    """A report's text without its code, evidence, links and the platform's quoted words."""
    for pattern in _MARKDOWN_OUT if form == "md" else _HTML_OUT:
        text = pattern.sub(" | ", text)
    if form == "html":
        text = html.unescape(text)
    return _URL.sub(" | ", _QUOTED.sub(" | ", text))


def half_width_left(text: str, form: str) -> list[str]:
    """Half-width parentheses, commas, colons and semicolons against Chinese text."""
    return [line.strip() for line in prose(text, form).splitlines() if _HALF_WIDTH.search(line)]


def english_left(text: str, form: str, names: set[str]) -> list[str]:
    """Runs of three or more Latin words left in a report once code, ids, names and the
    platform's quoted words are taken out."""
    text = prose(text, form)
    text = _ID.sub(" | ", text)
    words = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names, key=len)[::-1])) + r")\b")
    text = words.sub(" | ", text)
    return [m.group(0) for line in text.splitlines() for m in _SENTENCE.finditer(line)]


def _names(played: PlayedWeek) -> set[str]:
    """What the week names: its tenants, windows, probes, pipelines, detectors, nodes."""
    c = played.settings.controller
    names = {t.name for t in c.tenants} | {w.name for w in c.windows} | {p.probe for p in c.plan}
    for f in played.store.findings():
        names.add(f.detector)
        names.update(f.subject.values())
    return names


@pytest.fixture(scope="module")
def chinese(played: PlayedWeek):
    settings = played.settings.model_copy(
        update={"reports": played.settings.reports.model_copy(update={"language": "zh-CN"})}
    )
    daily = {
        day: build_daily(load_daily(played.store, settings, day, played.built_at)) for day in DAYS
    }
    verdict = build_verdict(load_verdict(played.store, settings, played.built_at))
    return daily, verdict


def test_the_week_has_findings_and_failures_to_translate(chinese):
    daily, _ = chinese
    items = [i for report in daily.values() for i in report.figures.findings.items]
    assert items and all(i.sentence is not None for i in items)
    assert any(report.figures.tasks.failure_groups for report in daily.values())


@pytest.mark.parametrize("form", ["md", "html"])
def test_no_english_sentence_is_left_in_the_chinese_reports(played: PlayedWeek, chinese, form):
    daily, verdict = chinese
    names = _names(played)
    rendered = [render_daily(report, "zh-CN") for report in daily.values()]
    rendered.append(render_verdict(verdict, "zh-CN"))
    left = {
        phrase
        for r in rendered
        for phrase in english_left(r.markdown if form == "md" else r.html, form, names)
    }
    assert not left, sorted(left)


@pytest.mark.parametrize("form", ["md", "html"])
def test_the_chinese_reports_punctuate_chinese_text_in_full_width(chinese, form):
    daily, verdict = chinese
    rendered = [render_daily(report, "zh-CN") for report in daily.values()]
    rendered.append(render_verdict(verdict, "zh-CN"))
    left = {
        line
        for r in rendered
        for line in half_width_left(r.markdown if form == "md" else r.html, form)
    }
    assert not left, sorted(left)


@pytest.mark.parametrize("form", ["md", "html"])
def test_one_english_summary_left_in_a_chinese_report_is_caught(played: PlayedWeek, chinese, form):
    daily, _ = chinese
    report = next(r for r in daily.values() if r.figures.findings.items)
    findings = report.figures.findings
    first, *rest = findings.items
    # A finding with no sentence of its own: the report falls back to its stored English.
    untranslated = replace(first, sentence=None)
    bad = replace(
        report,
        figures=replace(report.figures, findings=replace(findings, items=(untranslated, *rest))),
    )

    rendered = render_daily(bad, "zh-CN")
    left = english_left(rendered.markdown if form == "md" else rendered.html, form, _names(played))

    assert left, first.summary
    assert all(phrase in first.summary for phrase in left), left
