"""The HTML reports as a person sees them: opened in headless Chromium, a screenshot taken,
and the rendered page checked for the key figures and the charts, and for its layout at a
phone's 420 px and a desktop's 1400 px. Chromium is Debian's
`chromium` package; without it these tests are skipped here and fail in CI."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from observer.reports.compute.daily import build_daily
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import load_daily, load_verdict
from observer.reports.render.daily import render_daily
from observer.reports.render.verdict import render_verdict
from tests import components
from tests.reports.conftest import PlayedWeek
from tests.reports.week import DAYS

# The played week (tests/reports/conftest.py) is set up by whichever test needs it first:
# seven simulated days, minutes, more on a loaded machine.
pytestmark = [pytest.mark.chromium, pytest.mark.timeout(600)]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHARTS = (
    "utilisation",
    "queue-wait-per-tenant",
    "peak-vs-night-wait",
    "peak-vs-night-utilisation",
)


@pytest.fixture(scope="session")
def chromium() -> str:
    components.require("chromium")
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        components.unavailable("headless Chromium is not installed (apt-get install -y chromium)")
    return found


def _open(
    chromium: str, page: Path, profile: Path, *action: str, window: str = "1280,2000"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            f"--window-size={window}",
            *action,
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )


def _look(chromium: str, page: Path, out: Path) -> tuple[Path, str]:
    """Screenshot and the DOM after rendering."""
    screenshot = out / (page.stem + ".png")
    _open(chromium, page, out / "profile", f"--screenshot={screenshot}")
    dom = _open(chromium, page, out / "profile", "--dump-dom").stdout
    return screenshot, dom


def test_the_daily_summary_renders_with_its_figures_and_charts(
    played: PlayedWeek, chromium: str, tmp_path_factory: pytest.TempPathFactory
):
    out = tmp_path_factory.mktemp("chromium")
    _, html, js = played.daily[DAYS[4].isoformat()]
    screenshot, dom = _look(chromium, html, out)
    print(f"\nscreenshot of the daily summary: {screenshot}")

    image = screenshot.read_bytes()
    assert image.startswith(PNG_MAGIC)
    assert len(image) > 50_000  # a page of tables and charts, not a blank one
    figures = json.loads(js.read_text(encoding="utf-8"))
    assert "Daily operational summary — Fri 2026-12-04" in dom
    assert f'<td>Probe tasks</td><td class="num">{figures["tasks_total"]}</td>' in dom
    assert f'<td>Failed tasks</td><td class="num">{figures["tasks_failed"]}</td>' in dom
    assert "SubmissionFailed" in dom
    assert "GPUNodeDown" in dom
    for chart in CHARTS:
        assert f'data-chart="{chart}"' in dom, chart
    assert dom.count("<polyline") >= 2  # utilisation and allocation over the day
    assert "research" in dom and "prod" in dom
    assert "http://" not in html.read_text(encoding="utf-8").replace("http://www.w3.org/", "")


def test_the_verdict_and_a_chinese_summary_render(
    played: PlayedWeek, chromium: str, tmp_path_factory: pytest.TempPathFactory
):
    out = tmp_path_factory.mktemp("chromium-verdict")
    _, html, js = played.verdict
    screenshot, dom = _look(chromium, html, out)
    print(f"\nscreenshot of the verdict: {screenshot}")
    assert screenshot.read_bytes().startswith(PNG_MAGIC)
    verdict = json.loads(js.read_text(encoding="utf-8"))
    assert verdict["recommendation"] == "no_go"
    assert 'class="rec no_go"' in dom and "NO GO" in dom
    assert 'data-chart="tasks-per-day"' in dom
    assert "No unreleased resources" in dom

    settings = played.settings.model_copy(
        update={"reports": played.settings.reports.model_copy(update={"language": "zh-CN"})}
    )
    page = out / "daily-zh.html"
    report = build_daily(load_daily(played.store, settings, DAYS[4], played.built_at))
    page.write_text(render_daily(report, "zh-CN").html, encoding="utf-8")
    screenshot, dom = _look(chromium, page, out)
    print(f"screenshot of the Chinese summary: {screenshot}")
    assert screenshot.read_bytes().startswith(PNG_MAGIC)
    assert "每日运行摘要" in dom and "失败任务数" in dom
    assert 'data-chart="utilisation"' in dom


# Measured inside the page, at the width it is shown at: the page's own width against the
# viewport, and every element that reaches past it outside a box that scrolls on its own.
LAYOUT_PROBE = """<script>window.addEventListener("load", () => {
  const root = document.documentElement;
  const wide = [...document.querySelectorAll("body *")]
    .filter((e) => e.getBoundingClientRect().right > root.clientWidth + 1 && !e.closest(".scroll"))
    .map((e) => e.tagName.toLowerCase() + (e.className ? "." + e.className : ""));
  const out = parent.document.createElement("pre");
  out.id = "layout";
  out.textContent = JSON.stringify({viewport: root.clientWidth, page: root.scrollWidth, wide});
  parent.document.body.appendChild(out);
});</script>"""


def _at_width(
    chromium: str, page: Path, width: int, out: Path, probe: str = LAYOUT_PROBE
) -> tuple[Path, dict[str, Any]]:
    """The page in a frame `width` px wide (headless Chromium's window is never narrower than
    500 px): its screenshot, and what `probe` measured in it."""
    framed = out / f"{page.stem}-{width}.html"
    inner = page.read_text(encoding="utf-8").replace("</body>", probe + "</body>")
    framed.write_text(
        '<!doctype html><html><body style="margin:0">'
        f'<iframe style="width:{width}px;height:2400px;border:0" '
        f'srcdoc="{html.escape(inner, quote=True)}"></iframe></body></html>',
        encoding="utf-8",
    )
    screenshot = out / f"{page.stem}-{width}.png"
    budget, window = "--virtual-time-budget=5000", f"{max(width, 500)},2400"
    _open(chromium, framed, out / "profile", budget, f"--screenshot={screenshot}", window=window)
    dom = _open(chromium, framed, out / "profile", budget, "--dump-dom", window=window).stdout
    found = re.search(r'<pre id="layout">([^<]*)</pre>', dom)
    assert found, dom[-2000:]
    return screenshot, json.loads(html.unescape(found.group(1)))


@pytest.mark.parametrize("width", [420, 1400])
def test_every_report_fits_a_phone_and_a_desktop_without_scrolling_sideways(
    played: PlayedWeek, chromium: str, tmp_path_factory: pytest.TempPathFactory, width: int
):
    out = tmp_path_factory.mktemp(f"width-{width}")
    settings = played.settings.model_copy(
        update={"reports": played.settings.reports.model_copy(update={"language": "zh-CN"})}
    )
    chinese = out / "daily-zh-CN.html"
    report = build_daily(load_daily(played.store, settings, DAYS[4], played.built_at))
    chinese.write_text(render_daily(report, "zh-CN").html, encoding="utf-8")
    pages = [played.daily[DAYS[4].isoformat()][1], chinese, played.verdict[1]]
    for page in pages:
        screenshot, layout = _at_width(chromium, page, width, out)
        print(f"\n{width} px screenshot of {page.name}: {screenshot}")
        assert screenshot.read_bytes().startswith(PNG_MAGIC)
        # The frame's own scrollbar takes a little; the page is never wider than what is left.
        assert width - 20 <= layout["viewport"] <= width, layout
        assert layout["page"] == layout["viewport"] and layout["wide"] == [], (page, layout)


# Measured inside the page: every date or figure kept whole (nowrap) fits its cell; every
# table sits in a box that scrolls on its own, no wider than the page; every chart fits the
# page, its smallest text as shown, its window bands and its hour axis.
READING_PROBE = """<script>window.addEventListener("load", () => {
  const root = document.documentElement;
  const cells = [...document.querySelectorAll("td.num, td.when")];
  const broken = cells
    .filter((c) => getComputedStyle(c).whiteSpace !== "nowrap" || c.scrollWidth > c.clientWidth)
    .map((c) => c.textContent);
  const tables = [...document.querySelectorAll("table")].filter(
    (t) => !t.parentElement.classList.contains("scroll")
      || t.parentElement.getBoundingClientRect().width > root.clientWidth);
  const charts = [...document.querySelectorAll("svg.chart")].map((svg) => {
    const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    const sizes = [...svg.querySelectorAll("text")]
      .map((t) => scale * parseFloat(t.getAttribute("font-size")));
    return {name: svg.dataset.chart, width: svg.getBoundingClientRect().width,
            font: Math.min(...sizes), bands: svg.querySelectorAll("rect.band").length,
            axis: (svg.querySelector("text.axis") || {}).textContent || null};
  });
  const out = parent.document.createElement("pre");
  out.id = "layout";
  out.textContent = JSON.stringify({viewport: root.clientWidth, cells: cells.length, broken,
                                    tables: tables.length, charts});
  parent.document.body.appendChild(out);
});</script>"""


@pytest.mark.parametrize("width", [420, 1400])
def test_dates_figures_and_charts_read_at_a_phone_and_a_desktop_width(
    played: PlayedWeek, chromium: str, tmp_path_factory: pytest.TempPathFactory, width: int
):
    out = tmp_path_factory.mktemp(f"reading-{width}")
    print(f"\nscreenshots at {width} px in {out}")
    pages = []
    for language in ("en", "zh-CN"):
        settings = played.settings.model_copy(
            update={"reports": played.settings.reports.model_copy(update={"language": language})}
        )
        daily = build_daily(load_daily(played.store, settings, DAYS[4], played.built_at))
        verdict = build_verdict(load_verdict(played.store, settings, played.built_at))
        for name, text in (
            (f"daily-{language}", render_daily(daily, language).html),
            (f"verdict-{language}", render_verdict(verdict, language).html),
        ):
            page = out / f"{name}.html"
            page.write_text(text, encoding="utf-8")
            pages.append(page)
    for page in pages:
        screenshot, layout = _at_width(chromium, page, width, out, probe=READING_PROBE)
        assert screenshot.read_bytes().startswith(PNG_MAGIC)
        assert layout["cells"] > 10 and layout["broken"] == [], (page.name, layout["broken"])
        assert layout["tables"] == 0, page.name
        hours = [c for c in layout["charts"] if c["name"] == "utilisation"]
        assert hours and all(c["bands"] >= 2 and c["axis"] for c in hours), hours
        for chart in layout["charts"]:
            assert chart["width"] <= layout["viewport"], (page.name, chart)
            assert chart["font"] >= 10, (page.name, chart)
