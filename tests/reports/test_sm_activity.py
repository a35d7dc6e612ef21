"""GPM's SM activity in the daily summary, from what the controller stored: beside
utilisation overall, per pool, window and tenant, its figures the stored samples' own sums
over those that had one; the nodes whose GPUs have no GPM named as not supported, never
counted as 0; and the sentence chosen from what was reported."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from observer.records import GpuMeasure, StoredGpuSample
from observer.reports.compute.daily import build_daily
from observer.reports.compute.data import PeriodData, gpu_usage
from observer.reports.compute.figures import period_figures
from observer.reports.compute.gpu import gpm_note
from observer.reports.compute.notes import Note
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from tests.controller.test_job_tallies import T0, Platform
from tests.reports.builders import CALENDAR, DAY, at, context, gpu

GPM_NODE, OLD_NODE = "h200-0", "a100-0"


def _samples() -> list[StoredGpuSample]:
    """A day every 10 minutes: an H200 node whose GPU 0 prod's job holds (SM activity far
    below its utilisation, unread on the agent's first tick) and whose GPU 1 research's job
    holds; an A100 node without GPM, prod's."""
    taken = []
    for tick in range(6 * 22):
        when = T0 + timedelta(minutes=10 * tick)
        first = tick == 0
        taken += [
            StoredGpuSample(
                GPM_NODE,
                "GPU-h-0",
                0,
                when,
                100,
                tenant="prod",
                task="job",
                sm_active_percent=None if first else 3 + tick % 5,
                gpm_supported=None if first else True,
            ),
            StoredGpuSample(
                GPM_NODE,
                "GPU-h-1",
                1,
                when,
                60 + tick % 40,
                tenant="research",
                task="job",
                sm_active_percent=None if first else 40 + tick % 50,
                gpm_supported=None if first else True,
            ),
            StoredGpuSample(
                OLD_NODE, "GPU-a-0", 0, when, 90, tenant="prod", task="job", gpm_supported=False
            ),
        ]
    return taken


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory):
    platform = Platform(Path(tmp_path_factory.mktemp("sm")))
    samples = _samples()
    platform.store.add_gpu_samples(samples)
    day = T0.date()
    after = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=2)
    report = build_daily(load_daily(platform.store, platform.settings, day, after))
    yield samples, report, render_daily(report, "en"), render_daily(report, "zh-CN")
    platform.store.close()


def _avg(values: list[int]) -> float:
    return sum(values) / len(values)


def test_stored_sm_activity_is_the_samples_own_average_beside_utilisation(played):
    samples, report, _, _ = played
    g = report.figures.gpu
    reported = [s for s in samples if s.sm_active_percent is not None]
    assert g.sm_overall is not None and g.overall is not None
    assert g.sm_overall.samples == len(reported) < len(samples)
    assert g.sm_overall.avg_percent == pytest.approx(_avg([s.sm_active_percent for s in reported]))
    assert g.overall.avg_percent == pytest.approx(
        _avg([s.utilization_gpu_percent for s in samples])
    )
    for tenant in ("prod", "research"):
        theirs = [s.sm_active_percent for s in reported if s.tenant == tenant]
        assert g.sm_by_tenant[tenant].avg_percent == pytest.approx(_avg(theirs))
        [record] = [r for r in report.tenants.tenants if r.tenant == tenant]
        assert record.sm_active == g.sm_by_tenant[tenant]
    # prod's GPU ran a kernel all the time on a few SMs: utilisation 100 %, SM activity < 10 %
    assert g.by_tenant["prod"].avg_percent > 90 > 10 > g.sm_by_tenant["prod"].avg_percent
    # every node is in no pool here; the pool's SM activity is the same samples'
    assert g.by_pool["-"].sm_active == g.sm_overall


def test_nodes_without_gpm_are_named_not_supported_never_zero(played):
    samples, report, en, zh = played
    g = report.figures.gpu
    assert g.gpm_not_supported_nodes == (OLD_NODE,)
    assert g.gpm_not_supported_samples == sum(s.gpm_supported is False for s in samples)
    assert g.sm_overall is not None and g.sm_overall.samples == sum(
        s.sm_active_percent is not None for s in samples
    )  # none of the A100's samples is among them: not a 0
    assert "SM active (avg)" in en.markdown
    assert "do not support" in en.markdown and OLD_NODE in en.markdown
    assert "不支持" in zh.markdown and OLD_NODE in zh.markdown
    assert "SM 活跃度（平均）" in zh.markdown


def test_json_puts_sm_activity_beside_utilisation(played):
    _, report, en, _ = played
    data = json.loads(en.json)  # figures to two decimals
    g = report.figures.gpu
    assert data["gpu_sm_active_avg"] == pytest.approx(g.sm_overall.avg_percent, abs=0.005)
    assert data["gpu_utilization_avg"] == pytest.approx(g.overall.avg_percent, abs=0.005)
    assert data["gpu"]["gpm_not_supported_nodes"] == [OLD_NODE]
    assert data["gpu"]["sm_by_tenant"]["prod"]["avg_percent"] == pytest.approx(
        g.sm_by_tenant["prod"].avg_percent, abs=0.005
    )
    assert data["gpu"]["by_pool"]["-"]["sm_active"]["p95_percent"] is not None


def test_the_sentence_says_what_was_reported():
    def note(*samples: StoredGpuSample) -> Note:
        usage = replace(
            gpu_usage(samples, {}, CALENDAR),
            sm_active=gpu_usage(samples, {}, CALENDAR, GpuMeasure.SM_ACTIVE),
        )
        figures = period_figures(
            PeriodData(DAY, gpu=usage),
            context(),
            intervention_match_seconds=3600,
            layer_blind_max_share=0.1,
        )
        return gpm_note(figures.gpu)

    with_gpm = StoredGpuSample("n1", "g", 0, at(10), 50, sm_active_percent=7, gpm_supported=True)
    without = StoredGpuSample("n2", "g", 0, at(10), 50, gpm_supported=False)
    assert note(with_gpm) == Note("note.gpm_reported", {"samples": 1})
    assert note(with_gpm, without) == Note(
        "note.gpm_not_supported", {"nodes": ["n2"], "samples": 1}
    )
    # utilisation read, GPM not read yet (a first tick): nothing known, nothing unsupported
    assert note(gpu("n1", at(10), 50)) == Note("note.gpm_none")
