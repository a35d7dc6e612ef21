"""The inference probe over the Kubernetes emulator, driven by the controller's own tasks: a
Deployment of the real `observer probe serve` (each pod bound to its own loopback address,
ready when its /healthz says so), requested over real HTTP every look; its time to ready,
a scale-out to more replicas than there are free GPUs that waits on them in the scheduler's
words (and opens inference_scale_out_stalled until the GPUs free), a rolling restart with
no look unanswered, and the daily summary's section in both languages."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from observer.detectors.inference import SCALE_OUT_STALLED, UNAVAILABLE
from observer.records import PhaseKind
from observer.reports.compute.daily import build_daily
from observer.reports.inputs import load_daily
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Words
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.k8s_harness import KubernetesHarness
from tests.support.databases import migrated_sqlite
from tests.support.settings import ALWAYS, controller_settings

LATENCY_MS = 20.0
STALL_SECONDS = 20


def _settings(windows: list[dict[str, str]] | None = None, **inference: object) -> Settings:
    return controller_settings(
        backend="kubernetes",
        windows=windows or [ALWAYS],
        tenants=[{"name": "research"}, {"name": "prod"}],
        plan=[],
        follow_interval_seconds=1,
        snapshot_interval_seconds=5,
        inference={
            "enabled": True,
            "tenant": "research",
            "replicas": 1,
            "scale_out_replicas": 3,
            "gpus_per_replica": 2,
            "latency_ms": LATENCY_MS,
            "warmup_seconds": 0,
            "ready_period_seconds": 1,
            "interval_seconds": 2,
            "scale_out_after_seconds": 10,
            "restart_after_seconds": 10,
            "unavailable_max_seconds": 6,
            "scale_out_max_wait_seconds": STALL_SECONDS,
            **inference,
        },
    )


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory):
    """A soak of the service: prod holds 8 of the 12 GPUs, so the scale-out to three replicas
    of two GPUs leaves one waiting until the test ends prod's first pod."""
    url = migrated_sqlite(tmp_path_factory.mktemp("inference") / "observer.db")
    store = Store(url)
    settings = _settings()
    with KubernetesHarness() as k8s:
        k8s.add_pod("prod", "train-0", 4, node="gpu-node-0")
        k8s.add_pod("prod", "train-1", 4, node="gpu-node-1")
        started = k8s.clock.now()
        settings = settings.model_copy(
            update={"reports": settings.reports.model_copy(update={"soak_started_at": started})}
        )
        soak = SimulatedSoak(settings, k8s.clock, store, k8s.backend)
        waits: set[str] = set()

        def step() -> None:
            k8s.step()
            pending = k8s.core.list_namespaced_pod("research").items
            waits.update(
                c.message or ""
                for pod in pending
                for c in (pod.status.conditions if pod.status else None) or []
                if c.type == "PodScheduled" and c.status == "False"
            )

        soak.run_for(55, step)  # ready within seconds, scaled out 10 s later, then waiting
        k8s.core.delete_namespaced_pod("train-0", "prod")
        freed_at = k8s.clock.now()
        soak.run_for(60, step)
        stalled_open = [
            f for f in store.findings(open_only=True) if f.detector == SCALE_OUT_STALLED
        ]
        watch = soak.composition.inference
        assert watch is not None
        watch.stop()  # as the daemon does once its loops have stopped
        for _ in range(3):
            k8s.step()
        left = k8s.core.list_namespaced_pod("research").items
        now = k8s.clock.now()
        registry = soak.registry
    yield store, settings, now, started, freed_at, waits, stalled_open, left, registry
    store.close()


def test_time_to_ready_latency_and_a_scale_out_that_waited_on_gpus(soaked):
    store, _, now, started, freed_at, waits, stalled_open, left, registry = soaked
    phases = {p.kind: p for p in store.inference_phases(started, now + timedelta(1))}
    assert set(phases) == {PhaseKind.START, PhaseKind.SCALE_OUT, PhaseKind.RESTART}

    start = phases[PhaseKind.START]
    time_to_ready = (start.ready_at - start.started_at).total_seconds()
    assert 0 < time_to_ready <= 10  # scheduled, started, then ready at its first /healthz
    assert (start.replicas_from, start.replicas_to, start.pending_seconds) == (0, 1, 0.0)

    scale_out = phases[PhaseKind.SCALE_OUT]
    assert (scale_out.replicas_from, scale_out.replicas_to) == (1, 3)
    assert scale_out.pending_reason == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert scale_out.pending_reason in waits
    # The third replica waited from the scale-out until prod's pod went, to within a look.
    waited = (freed_at - scale_out.started_at).total_seconds()
    assert waited > STALL_SECONDS
    assert waited - 2 <= scale_out.pending_seconds <= waited + 4
    assert (scale_out.ready_at - scale_out.started_at).total_seconds() >= scale_out.pending_seconds

    restart = phases[PhaseKind.RESTART]
    assert (restart.replicas_from, restart.replicas_to) == (3, 3)
    assert restart.unavailable_seconds == 0

    samples = store.inference_samples(started, now + timedelta(1))
    latencies = sorted(ms for s in samples for ms in s.latencies_ms)
    assert sum(s.requests for s in samples) == len(latencies) > 20
    assert all(s.errors == 0 for s in samples)
    assert latencies[0] >= LATENCY_MS  # the real program's latency, timed over real HTTP
    assert max(s.ready_replicas for s in samples) == 3 + 1  # the restart's one surge replica
    labels = {"service": "observer-inference"}
    ok = registry.get_sample_value("observer_inference_requests_total", {**labels, "result": "ok"})
    assert ok == len(latencies)
    timed = registry.get_sample_value("observer_inference_request_seconds_count", labels)
    assert timed == len(latencies)
    ready = registry.get_sample_value("observer_inference_replicas", {**labels, "state": "ready"})
    assert ready == 3

    stalled = [f for f in store.findings() if f.detector == SCALE_OUT_STALLED]
    assert len(stalled) == 1 and stalled_open == []  # opened while it waited, closed once ready
    assert stalled[0].closed_at is not None
    assert stalled[0].evidence["pending_reason"] == scale_out.pending_reason
    opened_after = (stalled[0].opened_at - scale_out.started_at).total_seconds()
    assert STALL_SECONDS <= opened_after <= STALL_SECONDS + 2
    assert not [f for f in store.findings() if f.detector == UNAVAILABLE]
    assert all(pod.metadata.deletion_timestamp is not None for pod in left)  # removed at stop


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_daily_summary_reports_the_service_by_window_and_its_changes(soaked, language):
    store, settings, now, *_ = soaked
    words = Words(language, UTC)
    day = now.date()  # controller.timezone: UTC
    report = build_daily(load_daily(store, settings, day, now, partial=True))

    rendered = render_daily(report, language)

    lines = rendered.markdown.splitlines()
    assert f"## {words('sec.inference')}" in lines
    windows = lines[lines.index(f"### {words('sub.inference_windows')}") :]
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ") for line in windows[4:6]}
    assert set(rows) == {words("inference.whole_day"), "always"}
    whole = rows[words("inference.whole_day")]
    assert whole[1] == "100.0%" and whole[3] == "0"
    p50 = float(whole[4].split()[0])
    assert p50 >= LATENCY_MS
    phases = lines[lines.index(f"### {words('sub.inference_phases')}") :]
    kinds = [line.split(" | ")[0].removeprefix("| ") for line in phases[4:7]]
    assert kinds == [words(f"inference.phase.{k}") for k in ("start", "scale_out", "restart")]
    assert "Insufficient nvidia.com/gpu" in phases[5]
    assert words("sec.inference") in rendered.html
    data = json.loads(rendered.json)["inference_service"]
    assert data["services"] == ["observer-inference"]
    assert [p["kind"] for p in data["phases"]] == ["start", "scale_out", "restart"]
    assert data["windows"][0]["window"] == "" and data["windows"][0]["availability"] == 1.0


def test_a_service_whose_replicas_stop_answering_is_unavailable_beyond_the_bound(tmp_path):
    url = migrated_sqlite(tmp_path / "observer.db")
    with Store(url) as store, KubernetesHarness() as k8s:
        settings = _settings(scale_out_replicas=1, restart_after_seconds=3600)
        soak = SimulatedSoak(settings, k8s.clock, store, k8s.backend)
        soak.run_for(10, k8s.step)
        assert store.inference_phases(k8s.clock.now() - timedelta(1), k8s.clock.now())
        k8s.crash_servers("research")
        crashed_at = k8s.clock.now()
        soak.run_for(12, k8s.step)

        (finding,) = [f for f in store.findings(open_only=True) if f.detector == UNAVAILABLE]
        assert finding.subject == {"service": "observer-inference", "tenant": "research"}
        since = datetime.fromisoformat(str(finding.evidence["condition_since"]))
        assert 0 <= (since - crashed_at).total_seconds() <= 2  # the first look after it
        assert (finding.opened_at - since).total_seconds() >= 6  # unavailable_max_seconds
        late = store.inference_samples(crashed_at + timedelta(seconds=3), k8s.clock.now())
        assert late and all(s.requests == s.errors for s in late)


def test_each_window_gets_its_own_scale_out_and_restart_after_scaling_back_in(tmp_path):
    """Two windows of a minute each: the service starts late in the first and is carried through
    its scale-out and restart there; when the second begins it is scaled back in, and the
    second has a scale-out and a restart of its own, each phase under its window."""
    url = migrated_sqlite(tmp_path / "observer.db")
    windows = [
        {"name": "early", "days": "*", "start": "10:00", "end": "10:01"},
        {"name": "late", "days": "*", "start": "10:01", "end": "10:02"},
    ]
    settings = _settings(
        windows,
        scale_out_replicas=2,
        gpus_per_replica=1,
        scale_out_after_seconds=3,
        restart_after_seconds=3,
    )
    with Store(url) as store, KubernetesHarness() as k8s:
        tomorrow = k8s.clock.now().date() + timedelta(days=1)
        second = datetime.combine(tomorrow, datetime.min.time(), UTC).replace(hour=10, minute=1)
        begun = second - timedelta(seconds=25)  # the last 25 s of the first window
        k8s.clock.set(begun)
        reports = settings.reports.model_copy(update={"soak_started_at": begun})
        settings = settings.model_copy(update={"reports": reports})
        soak = SimulatedSoak(settings, k8s.clock, store, k8s.backend)
        soak.run_for(50, k8s.step)
        phases = store.inference_phases(begun, k8s.clock.now())
        samples = store.inference_samples(begun, k8s.clock.now())
        report = build_daily(load_daily(store, settings, tomorrow, k8s.clock.now(), partial=True))

    cycle = [(p.kind, p.started_at < second) for p in phases]
    assert cycle == [
        (PhaseKind.START, True),
        (PhaseKind.SCALE_OUT, True),
        (PhaseKind.RESTART, True),
        (PhaseKind.SCALE_OUT, False),
        (PhaseKind.RESTART, False),
    ]
    late_scale_out = phases[3]
    assert (late_scale_out.replicas_from, late_scale_out.replicas_to) == (1, 2)
    after = (late_scale_out.started_at - second).total_seconds()
    assert 3 <= after <= 3 + 2 * 2  # scale_out_after_seconds once back in, to within a look
    in_second = [s for s in samples if second <= s.at < late_scale_out.started_at]
    assert in_second and all(s.desired_replicas == 1 for s in in_second)  # scaled back in
    assert report.inference is not None
    assert [p.windows for p in report.inference.phases] == [("early",)] * 3 + [("late",)] * 2
    rendered = render_daily(report, "en")
    assert json.loads(rendered.json)["inference_service"]["phases"][3]["windows"] == ["late"]
    table = rendered.markdown.splitlines()
    rows = [line for line in table if line.startswith("| Scale-out |")]
    assert [row.split(" | ")[1] for row in rows] == ["early", "late"]
