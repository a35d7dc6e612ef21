"""The HTML reports as a person sees them: opened in headless Chromium, a screenshot taken,
and the rendered page checked for the key figures and the charts. Chromium is Debian's
`chromium` package; without it these tests are skipped here and fail in CI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from observer.reports.build.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from tests.reports.conftest import PlayedWeek
from tests.reports.week import DAYS

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHARTS = (
    "utilisation",
    "queue-wait-per-tenant",
    "peak-vs-night-wait",
    "peak-vs-night-utilisation",
)


@pytest.fixture(scope="session")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        reason = "headless Chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _open(
    chromium: str, page: Path, profile: Path, *action: str
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
            "--window-size=1280,2000",
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
