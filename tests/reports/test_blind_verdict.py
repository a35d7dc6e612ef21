"""A soak the observer hardly saw, stored and read back: the verdict is not decidable, and no
criterion that needs the blind scheduler passes."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from observer.domain import SchedulerSnapshot
from observer.reports.compute.criteria.result import Status
from observer.reports.compute.layers import NEEDS
from observer.reports.compute.verdict import Recommendation, build_verdict
from observer.reports.inputs import load_verdict
from observer.reports.render.verdict import render_verdict
from observer.settings import Settings
from observer.storage.store import Store
from tests.reports.builders import DAY, DAY_START, node, queue, run

# A soak of one day in Shanghai, the scheduler read every 30 s.
SETTINGS = Settings.model_validate(
    {
        "controller": {"timezone": "Asia/Shanghai", "snapshot_interval_seconds": 30},
        "reports": {"soak_started_at": DAY.start.isoformat(), "soak_ended_at": DAY.end.isoformat()},
    }
)


def test_a_soak_blind_97_percent_is_not_decidable(store: Store) -> None:
    # The scheduler was read for the first 42 minutes, then never again.
    for i in range(84):
        at = DAY_START + timedelta(seconds=30 * i)
        sample = queue(at, "research")
        store.save_scheduler_snapshot(
            SchedulerSnapshot(at, (sample.state,), (node("n1", "a", 8, 0, "idle"),), ())
        )
    store.save_runs([run(submitted=DAY_START + timedelta(minutes=10))])

    verdict = build_verdict(load_verdict(store, SETTINGS, DAY.end + timedelta(hours=9)))

    assert verdict.figures.blind.share is not None and verdict.figures.blind.share > 0.97
    assert verdict.recommendation is Recommendation.NOT_DECIDABLE
    for criterion in verdict.criteria:
        if "scheduler" in NEEDS[criterion.criterion]:
            assert criterion.status is Status.NOT_OBSERVED, criterion.criterion
            assert "ev.layer_blind" in [n.key for n in criterion.evidence]
    data = json.loads(render_verdict(verdict, "en").json)
    assert data["recommendation"] == "not_decidable"
    assert data["recommendation_text"].startswith("Not decidable: the observer was blind 97.1%")
    zh = json.loads(render_verdict(verdict, "zh-CN").json)
    assert zh["recommendation_text"].startswith("无法判定：观测器在 97.1% 的观察期内处于盲区")


def test_the_days_blind_time_reads_as_a_duration_as_the_headline_gives_it(store: Store) -> None:
    # One day, read for its first 42 minutes: the day's blind time is the soak's.
    for i in range(84):
        at = DAY_START + timedelta(seconds=30 * i)
        store.save_scheduler_snapshot(
            SchedulerSnapshot(at, (queue(at, "research").state,), (node("n1", "a", 8, 0),), ())
        )
    verdict = build_verdict(load_verdict(store, SETTINGS, DAY.end + timedelta(hours=9)))

    page = render_verdict(verdict, "en").markdown

    [day] = [line for line in page.splitlines() if line.startswith(f"| {DAY.start.date()} |")]
    blind = day.strip("| ").split(" | ")[-1]
    [headline] = [line for line in page.splitlines() if line.startswith("| Observer blind time |")]
    assert re.fullmatch(r"\d+ h \d+ min", blind)
    assert headline.startswith(f"| Observer blind time | {blind} (")
