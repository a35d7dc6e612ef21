"""The zh-CN reports of the played week, Markdown and HTML, say nothing in English: once code,
evidence, ids (runs, nodes, tenants, probes, windows, detectors, metrics, Xid numbers, units)
and the platform's own words, quoted「so」, are taken out, no three Latin-script words in a
row remain, and no id the catalogue has words for (a detector, a criterion, an intervention,
an outcome, ...) is written raw. And the check does catch a report with one English finding
summary left. Their
Chinese text is spaced by one rule (docs/ARCHITECTURE.md, "Chinese text"): a space between
Chinese and Latin letters or digits, none between two Chinese characters or beside full-width
punctuation, never two; a measure Babel writes (4小时, 2026年12月1日) is one word."""

from __future__ import annotations

import html
import re
from dataclasses import replace

import pytest
from babel.messages.pofile import read_po

from observer.reports.compute.daily import build_daily
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import load_daily, load_verdict
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import LOCALE_DIR
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
    re.compile(r"<(style|script|pre|code|details)\b.*?</\1>", re.S),
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


_CJK = "\u4e00-\u9fff"
_FULL_WIDTH = "（）「」，。：；、！？“”"
# A duration or a date as CLDR writes it (Babel): digits and Chinese units with no space.
_MEASURE = re.compile(r"(?:\d[\d,.]*(?:年|月|日|天|小时|分钟|秒|毫秒))+")
# Stands for a measure: a digit at its start, a Chinese unit at its end, and a joiner between
# them that no rule below reads as a letter or a character.
_MEASURED = "0\u2060时"
_SPACING = {
    "Chinese against a letter or digit": re.compile(rf"[{_CJK}][A-Za-z0-9]|[A-Za-z0-9][{_CJK}]"),
    "a space between Chinese characters": re.compile(rf"[{_CJK}] +[{_CJK}]"),
    "a space beside full-width punctuation": re.compile(rf" [{_FULL_WIDTH}]|[{_FULL_WIDTH}] "),
    "a measure's number and unit apart": re.compile(r"\d (?:年|月|日|天|小时|分钟|秒|毫秒)"),
    "two spaces": re.compile(r"\S  +\S"),
}
# Markdown's table cells and a heading's " — status" are layout, not text.
_CELLS = re.compile(r" *\| *| — ")


def spacing_left(text: str, form: str) -> list[str]:
    """Cells and lines of Chinese text that break the spacing rule, each with what breaks it."""
    for pattern in _MARKDOWN_OUT if form == "md" else _HTML_OUT:
        text = pattern.sub("\n", text)
    if form == "html":
        text = html.unescape(text)
    text = _URL.sub("\n", _QUOTED.sub("「」", text))
    return [
        f"{rule}: {cell}"
        for line in text.splitlines()
        for cell in _CELLS.split(line.strip().strip("#").strip())
        for rule, pattern in _SPACING.items()
        if pattern.search(_MEASURE.sub(_MEASURED, cell.strip()))
    ]


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


# The kinds of id the catalogue gives words to (its keys' prefixes), and an id as written:
# snake_case, not inside a setting's dotted name, a subject's a=b or a path.
_WORDED = ("detector.", "crit.", "action.", "cause.", "outcome.", "expectation.", "xid_class.")
_SNAKE = re.compile(r"(?<![\w.=/-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w.=/-])")


def worded_ids() -> set[str]:
    """Every snake_case id the zh-CN catalogue has words for."""
    with (LOCALE_DIR / "zh_CN" / "LC_MESSAGES" / "observer.po").open("rb") as po:
        keys = [str(m.id) for m in read_po(po) if m.id]
    ids = {k.removeprefix(p) for k in keys for p in _WORDED if k.startswith(p)}
    return {i for i in ids if _SNAKE.fullmatch(i)}


def raw_ids_left(text: str, form: str, ids: set[str]) -> list[str]:
    """Ids written raw in a report's text where the catalogue has words for them."""
    return [m.group(0) for m in _SNAKE.finditer(prose(text, form)) if m.group(0) in ids]


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
def test_no_id_the_catalogue_has_words_for_is_left_raw(chinese, form):
    daily, verdict = chinese
    rendered = [render_daily(report, "zh-CN") for report in daily.values()]
    rendered.append(render_verdict(verdict, "zh-CN"))
    ids = worded_ids()
    left = {
        i for r in rendered for i in raw_ids_left(r.markdown if form == "md" else r.html, form, ids)
    }
    assert not left, sorted(left)


def test_the_raw_id_check_catches_an_id_and_spares_settings_and_subjects():
    ids = worded_ids()
    assert {"job_cancelled", "gpu_unusable", "tenant_isolation"} <= ids
    said = "未登记：11:00 对 run_id=c798, tenant=research 的 job_cancelled。记为 gpu_unusable 发现"
    assert raw_ids_left(said, "md", ids) == ["job_cancelled", "gpu_unusable"]
    spared = "设置 storage.space_warning_days；对象 detector=gpu_lost；见 `gpu_lost`"
    assert raw_ids_left(spared, "md", ids) == []


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
def test_the_chinese_reports_space_chinese_text_by_one_rule(chinese, form):
    daily, verdict = chinese
    rendered = [render_daily(report, "zh-CN") for report in daily.values()]
    rendered.append(render_verdict(verdict, "zh-CN"))
    left = {
        line
        for r in rendered
        for line in spacing_left(r.markdown if form == "md" else r.html, form)
    }
    assert not left, sorted(left)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("观测器：在时限 4小时 内未开始", "a space between Chinese characters"),
        ("在 10 分钟内相继出现", "a measure's number and unit apart"),
        ("NVML在 1.5% 的观察期内", "Chinese against a letter or digit"),
        ("共 3个节点", "Chinese against a letter or digit"),
        ("退出码 3 ；已取消", "a space beside full-width punctuation"),
        ("租户  research", "two spaces"),
    ],
)
def test_the_spacing_check_catches_each_break_of_the_rule(text, rule):
    assert spacing_left(text, "md") == [f"{rule}: {text}"]
    good = "| 在时限 4小时内未开始，被平台以「QuotaExceeded」挂起 10分钟；退出码 3 | GPU 利用率 |"
    assert spacing_left(good, "md") == []


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
