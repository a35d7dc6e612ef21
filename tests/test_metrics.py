"""The metrics as a scrape reads them: counters an alert takes increase() of are exported at
0 for every label set the controller knows from its start (its plan, its event detectors),
so that the first failure or event is a rise; store failures are counted."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from observer.clock import ManualClock
from observer.controller.compose import build_backend, build_controller
from observer.errors import StoreError
from observer.metrics import ControllerMetrics
from observer.settings import Settings
from observer.storage.store import Store
from tests.support.databases import migrated_sqlite

MONDAY_10 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
OUTCOMES = {"passed", "failed", "rejected", "timed_out", "cancelled", "lost", "no_gpu"}


def _exposed(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name == name
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    url = migrated_sqlite(tmp_path / "observer.db")
    with Store(url) as opened:
        yield opened


def test_planned_probe_runs_and_event_findings_are_exported_at_zero(store: Store):
    settings = Settings.model_validate(
        {
            "controller": {
                "windows": [
                    {"name": "peak", "start": "09:00", "end": "18:00"},
                    {"name": "night", "start": "22:00", "end": "06:00"},
                ],
                "tenants": [{"name": "research"}, {"name": "prod"}],
                "plan": [
                    {"window": "peak", "probe": "short", "every_seconds": 600},
                    {
                        "window": "night",
                        "probe": "long",
                        "every_seconds": 3600,
                        "tenants": ["prod"],
                    },
                ],
            }
        }
    )
    clock = ManualClock(MONDAY_10)
    registry = CollectorRegistry()
    build_controller(
        settings,
        build_backend(settings.controller, clock),
        store,
        clock,
        ControllerMetrics(registry),
    )

    runs = _exposed(registry, "observer_probe_runs_total")
    planned = {("short", "research", "peak"), ("short", "prod", "peak"), ("long", "prod", "night")}
    assert set(runs) == {
        (("outcome", outcome), ("probe", probe), ("tenant", tenant), ("window", window))
        for probe, tenant, window in planned
        for outcome in OUTCOMES
    }
    assert set(runs.values()) == {0.0}
    findings = _exposed(registry, "observer_findings_total")
    assert findings == {
        (("detector", detector), ("severity", severity)): 0.0
        for detector in ("log_loss", "log_delivery_latency", "gpu_unusable")
        for severity in ("critical", "warning")
    }


def test_each_failed_store_call_is_counted(tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    registry = CollectorRegistry()
    metrics = ControllerMetrics(registry)
    with Store(url, on_error=metrics.store_errors_total.inc) as store:
        assert _exposed(registry, "observer_store_errors_total") == {(): 0.0}
        store.findings()
        with sqlite3.connect(tmp_path / "observer.db") as other:
            other.execute("DROP TABLE findings")  # the database as a broken volume leaves it
        with pytest.raises(StoreError):
            store.findings()
    assert _exposed(registry, "observer_store_errors_total") == {(): 1.0}
