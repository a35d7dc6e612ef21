"""The alert boundary against an HTTP server answering as Alertmanager's API v2 does: each
firing stored once however often it is polled, a new firing of the same alert kept apart,
ignored names never stored, and a failed read counted, raised and recorded as a condition
(the alert count's blind time), never read as silence."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from observer.alerting.alertmanager import AlertmanagerHttp
from observer.clock import ManualClock
from observer.controller.alerts import ALERTMANAGER_UNREACHABLE, AlertPoller
from observer.errors import BackendError
from observer.metrics import FindingMetrics, ReportMetrics
from observer.storage.store import Store

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
UNREACHABLE = {"detector": ALERTMANAGER_UNREACHABLE, "severity": "warning"}


def findings() -> FindingMetrics:
    return FindingMetrics(CollectorRegistry())


def _alert(
    name: str,
    fingerprint: str,
    starts: str,
    severity: str | None = "critical",
    state: str = "active",
) -> dict[str, Any]:
    labels = {"alertname": name, "namespace": "gpu-soak", "prometheus": "monitoring/k8s"}
    if severity:
        labels["severity"] = severity
    return {
        "annotations": {
            "description": f"{name} has been firing for 5 minutes.",
            "runbook_url": f"https://runbooks.example/{name}",
            "summary": f"{name} on gpu-node-07",
        },
        "endsAt": "2026-12-01T02:19:30.123Z",
        "fingerprint": fingerprint,
        "receivers": [{"name": "soak-team"}],
        "startsAt": starts,
        "status": {"inhibitedBy": [], "silencedBy": [], "state": state},
        "updatedAt": "2026-12-01T02:15:30.456+00:00",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=up+%3D%3D+0",
        "labels": labels,
    }


class Alertmanager:
    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.status = 200
        self.queries: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.queries.append(self.path)
                body = json.dumps(owner.alerts).encode()
                if not self.path.startswith("/api/v2/alerts"):
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body if owner.status == 200 else b'{"code":503}')

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def alertmanager() -> Iterator[Alertmanager]:
    server = Alertmanager()
    yield server
    server.close()


def test_firings_are_stored_once_and_a_new_firing_apart(alertmanager: Alertmanager, store: Store):
    clock = ManualClock(T0)
    metrics = ReportMetrics(CollectorRegistry())
    alertmanager.alerts = [
        _alert("GPUNodeDown", "a1b2", "2026-12-01T02:00:00.000Z"),
        _alert(
            "ObserverSchedulerStale",
            "c3d4",
            "2026-12-01T01:58:12.5+00:00",
            "warning",
            state="suppressed",
        ),
        _alert("Watchdog", "ffff", "2026-11-30T00:00:00Z", severity="none"),
    ]
    with AlertmanagerHttp(alertmanager.url, timeout_seconds=5) as source:
        poller = AlertPoller(source, store, clock, metrics, findings(), ignored={"Watchdog"})
        assert poller.poll() == 2
        clock.advance(60)
        poller.poll()
        # GPUNodeDown resolved and fired again: a second firing of the same fingerprint.
        alertmanager.alerts[0] = _alert("GPUNodeDown", "a1b2", "2026-12-01T03:00:00Z")
        clock.advance(3600)
        poller.poll()

    stored = store.alerts(T0.replace(hour=0), T0.replace(hour=4))
    assert [(a.name, a.starts_at.strftime("%H:%M:%S")) for a in stored] == [
        ("ObserverSchedulerStale", "01:58:12"),
        ("GPUNodeDown", "02:00:00"),
        ("GPUNodeDown", "03:00:00"),
    ]
    stale = stored[0]
    assert stale.severity == "warning"
    assert stale.summary == "ObserverSchedulerStale on gpu-node-07"
    assert stale.labels["namespace"] == "gpu-soak"
    assert stale.last_seen_at == T0.replace(hour=3, minute=1)  # polled three times
    assert stale.ends_at == datetime(2026, 12, 1, 2, 19, 30, 123000, tzinfo=UTC)
    assert "active=true" in alertmanager.queries[0] and "silenced=true" in alertmanager.queries[0]
    assert metrics.alerts_firing._value.get() == 2


def test_a_failed_read_is_counted_and_raised(alertmanager: Alertmanager, store: Store):
    metrics = ReportMetrics(CollectorRegistry())
    alertmanager.status = 503
    with (
        AlertmanagerHttp(alertmanager.url, timeout_seconds=5) as source,
        pytest.raises(BackendError, match="HTTP 503"),
    ):
        AlertPoller(source, store, ManualClock(T0), metrics, findings()).poll()
    assert metrics.alert_source_errors_total._value.get() == 1
    with (
        AlertmanagerHttp("http://127.0.0.1:9", timeout_seconds=1) as source,
        pytest.raises(BackendError, match="alertmanager"),
    ):
        source.firing()


def test_an_answer_that_is_not_alertmanagers_is_an_error(alertmanager: Alertmanager):
    alertmanager.alerts = [{"labels": {"alertname": "X"}}]  # no fingerprint, no startsAt
    with (
        AlertmanagerHttp(alertmanager.url, timeout_seconds=5) as source,
        pytest.raises(BackendError, match="unexpected alert"),
    ):
        source.firing()


def test_alertmanager_unreadable_is_a_condition_from_the_failed_poll_to_the_next_good_one(
    alertmanager: Alertmanager, store: Store
):
    clock = ManualClock(T0)
    metrics = ReportMetrics(CollectorRegistry())
    registry = CollectorRegistry()
    counted = FindingMetrics(registry)
    with AlertmanagerHttp(alertmanager.url, timeout_seconds=5) as source:
        poller = AlertPoller(source, store, clock, metrics, counted)
        poller.poll()
        clock.advance(60)
        alertmanager.status = 503
        for _ in range(3):
            with pytest.raises(BackendError):
                poller.poll()
            clock.advance(60)
        assert [f.closed_at for f in store.findings(detector=ALERTMANAGER_UNREACHABLE)] == [None]
        # Counted with every other finding: open now, opened once.
        assert registry.get_sample_value("observer_findings_open", UNREACHABLE) == 1
        assert registry.get_sample_value("observer_findings_total", UNREACHABLE) == 1
        alertmanager.status = 200
        poller.poll()
    assert registry.get_sample_value("observer_findings_open", UNREACHABLE) == 0
    assert registry.get_sample_value("observer_findings_total", UNREACHABLE) == 1

    [blind] = store.findings(detector=ALERTMANAGER_UNREACHABLE)
    assert (blind.opened_at, blind.closed_at) == (T0.replace(minute=1), T0.replace(minute=4))
    assert "HTTP 503" in str(blind.evidence["error"])
    assert metrics.alert_source_errors_total._value.get() == 3


def test_a_condition_left_open_by_a_previous_controller_ends_when_polling_resumes(
    alertmanager: Alertmanager, store: Store
):
    metrics = ReportMetrics(CollectorRegistry())
    alertmanager.status = 503
    with AlertmanagerHttp(alertmanager.url, timeout_seconds=5) as source:
        with pytest.raises(BackendError):
            AlertPoller(source, store, ManualClock(T0), metrics, findings()).poll()
        alertmanager.status = 200
        AlertPoller(source, store, ManualClock(T0.replace(hour=5)), metrics, findings()).poll()

    [blind] = store.findings(detector=ALERTMANAGER_UNREACHABLE)
    assert (blind.opened_at, blind.closed_at) == (T0, T0.replace(hour=5))
