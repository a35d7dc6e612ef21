"""Every sentence a detector can say has its words in both languages: the detectors are run
on inputs that make each of them speak in each of its forms (the node agent on fake GPUs and
a fake host, the controller's rules on scheduler snapshots, canary deliveries and Prometheus
readings), and each finding's sentence (compute/findings.py) is written from the catalogue's
templates with the parameters its evidence gives, in English and in Chinese."""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from babel.messages.pofile import read_po

from observer.agent.mig_changes import MigChanges
from observer.controller.watches import outages
from observer.controller.watches.base import Look
from observer.controller.watches.outages import SpaceLow
from observer.detectors import (
    fairness,
    gpu_health,
    gpu_in_service,
    gpu_unusable,
    inference,
    log_loss,
    monitoring_lag,
    node_leaks,
    quota_reclaim,
    unreleased,
)
from observer.detectors.gpu_health import DETECTORS as GPU_HEALTH
from observer.detectors.gpu_health import HealthView
from observer.detectors.monitoring_lag import (
    BusyProbeReading,
    FlatlineReading,
    LagView,
    SeriesAge,
)
from observer.detectors.node_leaks import NodeView
from observer.detectors.probe_release import DETECTOR as PROBE_UNRELEASED
from observer.detectors.unexplained_wait import UNEXPLAINED_WAIT, unexplained_waits
from observer.domain import (
    DriverState,
    DriverStatus,
    Expectation,
    GpmActivity,
    GpuAssignment,
    GpuIdentity,
    GpuReading,
    GpuSample,
    JobPhase,
    JobStatus,
    JsonValue,
    MigInstance,
    NodeAllocation,
    Owner,
    OwnerKind,
    OwnerPhase,
    OwnerState,
    ProbeRun,
    QueueState,
    RunState,
    SchedulerNode,
    SchedulerSnapshot,
    TargetState,
    XidSourcesState,
)
from observer.gpu.fake import GIB
from observer.gpu.xid import _TABLE as XIDS
from observer.log_readers.base import DeliveredLine
from observer.reports.compute.findings import describe
from observer.reports.render.i18n import LANGUAGES, LOCALE_DIR, Words
from observer.settings.detectors import LogLossSettings, MonitoringLagSettings, NodeLeakSettings
from observer.settings.inference import InferenceSettings
from observer.storage.store import Store
from tests.agent.test_gpu_health import HW_SLOWDOWN, POD, Node
from tests.agent.test_gpu_health import RULES as GPU_RULES
from tests.detectors import test_gpu_in_service as in_service
from tests.detectors import test_probe_release as release
from tests.detectors import test_unexplained_wait as waits
from tests.detectors import test_unreleased as scheduler_side
from tests.detectors.test_fairness import RULES as FAIRNESS
from tests.detectors.test_fairness import night
from tests.detectors.test_gpu_unusable import RUN as NO_GPU_RUN
from tests.log_readers.test_log_loss import RUN as CANARY
from tests.log_readers.test_log_loss import T0 as CANARY_T0
from tests.log_readers.test_log_loss import line, lines, loss_findings
from tests.monitoring.test_monitoring_lag import GPU, NOW, ago, beat, target
from tests.support.databases import migrated_sqlite

Said = tuple[str, Mapping[str, str], Mapping[str, JsonValue]]  # detector, subject, evidence
# The controller's reads of its own sources, in the words of their error (not a rule).
OWN_SOURCES = {
    "agent_unreachable",
    "log_pipeline_unreachable",
    "store_unreachable",
    "store_space_low",
    "alertmanager_unreachable",
    "accounting_unreachable",
    "scheduler_partly_visible",
}
ENDED_POD = Owner(OwnerKind.POD, "0a1b2c3d-2222-4b4b-8d8d-0123456789ab")
OTHER_POD = Owner(OwnerKind.POD, "7e6d5c4b-3333-4c4c-9e9e-0123456789ab")


def _templates(locale: str) -> dict[str, str]:
    """A language's catalogue as written: each key's template, placeholders unfilled."""
    with (LOCALE_DIR / locale / "LC_MESSAGES" / "observer.po").open("rb") as po:
        return {str(m.id): str(m.string) for m in read_po(po) if m.id}


TEMPLATES = {"en": _templates("en"), "zh-CN": _templates("zh_CN")}


def _agent(tmp_path: Path) -> Iterator[Said]:
    """The node agent on eight fake GPUs: every GPU health condition, Xid events with and
    without a process, and each process the node's leak rules name; then its snapshot read
    with the node allocation layer up, down, and with the driver gone."""
    node = Node(tmp_path, gpus=8)
    gpus = node.gpus.gpus
    node.run_job(0, pid=100)  # a running pod: its GPU slowed, then an Xid under it
    node.host.spawn(101, ENDED_POD)
    node.host.owners[ENDED_POD] = OwnerState(OwnerPhase.ENDED, name="team-b/train-1")
    gpus[1].processes[101] = 20 * GIB  # its pod ended, its memory stays
    node.host.spawn(102)  # no pod or job
    gpus[2].processes[102] = 2 * GIB
    gpus[3].processes[103] = 1 * GIB  # gone from the host
    gpus[5].memory_used_bytes = 10 * GIB  # no process listed
    node.tick(11)
    gpus[0].clock_event_reasons = HW_SLOWDOWN
    gpus[4].ecc_volatile_uncorrected_errors = 2
    gpus[4].remapped_rows_pending = True
    gpus[4].retired_pages_pending = True
    gpus[6].remapped_rows_failed = True
    gpus[6].pcie_replay_errors = 50
    gpus[7].nvlink_recovery_errors = 1
    gpus[7].nvlink_replay_errors, gpus[7].nvlink_crc_errors = 40, 40
    node.gpus.xid(0, 79)
    node.kernel_xid(node.clock.now(), "(PCI:0000:02:00): 43, pid=101, name=python3, Ch 0010")
    node.kernel_xid(node.clock.now(), "(PCI:0000:03:00): 13, pid=4242, name=python3, Ch 0011")
    node.tick(40)
    gpus[7].lost = True
    node.tick(2)
    snapshot = node.agent.snapshot()
    assert snapshot is not None
    yield from ((f.detector, f.subject, f.evidence) for f in [*node.history, *snapshot.findings])

    rules = NodeLeakSettings(grace_seconds=1, idle_seconds=1, baseline_memory_bytes=600 * 2**20)
    uuids = [g.identity.uuid for g in snapshot.gpus if g.identity is not None]
    kubelet = NodeAllocation(
        "kubelet",
        True,
        None,
        snapshot.at,
        (GpuAssignment(uuids[0], OTHER_POD, None), GpuAssignment(uuids[5], POD, None)),
        frozenset(uuids),
    )
    views = [
        NodeView(snapshot.node, snapshot.driver, snapshot.gpus, snapshot.processes, None),
        NodeView(snapshot.node, snapshot.driver, snapshot.gpus, snapshot.processes, kubelet),
        NodeView(
            snapshot.node,
            snapshot.driver,
            snapshot.gpus,
            snapshot.processes,
            replace(kubelet, up=False, reason="connection refused", assignments=()),
        ),
        NodeView(snapshot.node, DriverStatus(DriverState.NOT_LOADED), (), (), None),
    ]
    # The running pod's GPU goes quiet while it holds memory, and the one it was not given.
    idle = [replace(p, owner_state=OwnerState(OwnerPhase.RUNNING)) for p in snapshot.processes]
    quiet = tuple(
        replace(g, sample=replace(g.sample, utilization_gpu_percent=0)) if g.sample else g
        for g in snapshot.gpus
    )
    views.append(NodeView(snapshot.node, snapshot.driver, quiet, tuple(idle), kubelet))
    for view in views:
        yield from ((s.detector, s.subject, s.evidence) for s in node_leaks.evaluate(view, rules))
    # Busy to utilisation while one warp spins, judged on SM activity.
    spinning = tuple(replace(g, activity=GpmActivity(0.01, 0.0, 0.0, 0.0)) for g in snapshot.gpus)
    on_sm = rules.model_copy(update={"idle_sm_active_ratio": 0.05})
    view = NodeView(snapshot.node, snapshot.driver, spinning, tuple(idle), None)
    yield from ((s.detector, s.subject, s.evidence) for s in node_leaks.evaluate(view, on_sm))
    # A GPU slowed under a process the agent could not yet attribute to anyone.
    unattributed = HealthView(snapshot.node, snapshot.at, snapshot.gpus, ())
    slowed, _ = gpu_health.evaluate(unattributed, {}, GPU_RULES)
    yield from ((s.detector, s.subject, s.evidence) for s in slowed)
    # Neither of its Xid sources sees the GPUs' Xids.
    sources = XidSourcesState("events not opened: Driver Not Loaded", "not read")
    blind = HealthView(snapshot.node, snapshot.at, (), (), sources)
    unseen, _ = gpu_health.evaluate(blind, {}, GPU_RULES)
    yield from ((s.detector, s.subject, s.evidence) for s in unseen)


def _scheduler_side() -> Iterator[Said]:
    """The controller's rules over the scheduler, the probes and the pipelines."""
    stuck = release.job("slurm-41", gpus=3, ending_since=release.at(0))
    symptoms = scheduler_side.evaluate(300, [stuck], allocated=5)
    killed = SchedulerNode("node-9", "a", 4, 0, "drained", "Kill task failed")
    symptoms += unreleased.evaluate(
        SchedulerSnapshot(release.at(0), (), (killed,), ()),
        {},
        release.at(0),
        grace_seconds=0,
        stuck_grace_seconds=0,
        snapshot_max_age_seconds=60,
        memory_tolerance_bytes=0,
    )
    left = release.process(2, 4242, release.OURS, used=20 * GIB)
    symptoms += release.check(100, [release.agent(95, [left])], release.scheduler(95)).symptoms
    me = waits.job("4242", JobPhase.PENDING, "research")
    quotas = (QueueState("prod", "gpu", 1, 1, 2, 2, 60.0),)
    for job, snap, quota in [
        (waits.pending(None), waits.snapshot(*waits.FULL), None),
        (waits.pending("Resources"), waits.snapshot(*waits.ONE_FREE), None),
        (waits.pending("Priority"), waits.snapshot(*waits.FULL, jobs=(me,)), None),
        (
            waits.pending("QuotaExceeded", tenant="prod"),
            waits.snapshot(*waits.FULL, queues=quotas),
            {"prod": 6},
        ),
    ]:
        symptoms += unexplained_waits(job, snap, waits.RULES, quotas=quota)
    history = [night(0, True), night(1, False), night(2, True), night(3, False), night(4, True)]
    symptoms += fairness.evaluate(history, FAIRNESS)
    [fault] = gpu_in_service.faults(
        release.agent(10, findings=[in_service.xid(79, True)], node=release.NODE)
    )
    known = gpu_in_service.remember(
        {}, [fault], in_service.scheduler(300, started=200), release.at(300)
    )
    symptoms += gpu_in_service.evaluate(
        known, in_service.scheduler(in_service.GRACE + 10), in_service.GRACE
    )
    rules = MonitoringLagSettings()
    stale = [SeriesAge({"node": "n1"}, 900.0), SeriesAge({"node": "n2"}, 5.0)]
    views = [
        LagView(now=NOW, heartbeat=None),
        LagView(
            now=NOW,
            heartbeat=beat(600),
            freshness={"observer_gpu_up": [], "observer_gpu_utilization_ratio": stale},
            targets=[
                target(health=TargetState.DOWN, last_error="connection refused"),
                target(instance="10.0.3.8:9400", scraped_seconds_ago=900),
                target(instance="10.0.3.9:9400", health=TargetState.DOWN),
            ],
            flatlines=[FlatlineReading("gpu0_util", [0.5] * 5, [0.1, 0.5, 0.9, 0.3, 0.7])],
            busy_probes=[
                BusyProbeReading("run-1", GPU, ago(900), ago(10)),
                BusyProbeReading("run-2", GPU, ago(900), None),
            ],
        ),
        LagView(now=NOW, read_errors={"heartbeat": "connection refused"}),
    ]
    for view in views:
        symptoms += monitoring_lag.evaluate(view, rules)
    within = ProbeRun(
        "reclaim-1", "quota-reclaim", "batch", None, "night", Expectation.SUCCEED, 1, 1,
        RunState.PENDING, "71", NOW - timedelta(minutes=10), reason="AssocGrpGRES",
        reclaims_run_id="over-1",
    )  # fmt: skip
    held = quota_reclaim.Reclaim(within, "over-1", NOW - timedelta(minutes=10))
    for minutes in (10, 9, 0):  # the tenant's own work left room from 9 minutes ago
        own = JobStatus("own", None, "batch", None, JobPhase.RUNNING, 4 if minutes == 10 else 1)
        snapshot = SchedulerSnapshot(NOW - timedelta(minutes=minutes), (), (), (own,))
        held = quota_reclaim.observed(held, within, snapshot, {"batch": 4})
    symptoms += quota_reclaim.evaluate(
        [held], snapshot, NOW, reclaim_seconds=300, quotas={"batch": 4}
    )
    # Unavailable while a scale-out waits for a node, and a scale-out waiting without a word.
    look = inference.ServiceLook("svc", "prod", NOW, True, 1, 1, 1, NOW, 3, "Unschedulable")
    for seen in (look, replace(look, errors=0, pending_reason=None)):
        symptoms += inference.symptoms(seen, InferenceSettings())
    yield from ((s.detector, s.subject, s.evidence) for s in symptoms)

    findings = gpu_unusable.evaluate(NO_GPU_RUN)
    for seqs in [[*range(0, 3), *range(5, 8), *range(10, 13), *range(15, 18), 19], [*range(10), 3]]:
        findings += loss_findings(lines(seqs), 20)
    torn = DeliveredLine(f"observer-canary run={CANARY} seq=5", "collected.log")
    report = log_loss.analyse(CANARY, 8, [*lines(range(5)), line(7), line(6), line(42), torn])
    slow = log_loss.analyse(CANARY, 5, lines(range(5), delivered_after=45.0))
    for canary in (report, slow):
        findings += log_loss.findings(
            canary,
            tenant="research",
            pipeline="loki",
            rules=LogLossSettings(delivery_p95_max_seconds=30),
            at=CANARY_T0 + timedelta(minutes=5),
        )
    yield from ((f.detector, f.subject, f.evidence) for f in findings)


def _mig_reconfigured() -> Iterator[Said]:
    """GPU 1 of n1 put in MIG mode with two MIG devices, repartitioned into one, MIG turned off."""
    changes = MigChanges("n1", timedelta(hours=1), 10)
    identity = GpuIdentity(1, "GPU-1", "NVIDIA H200", None, None)
    at = CANARY_T0
    layouts = (None, ("MIG-a", "MIG-b"), ("MIG-c",), None)
    for minute, uuids in enumerate(layouts):
        instances = None if uuids is None else tuple(MigInstance(u, 1, 0) for u in uuids)
        sample = GpuSample(at=at, index=1, mig_instances=instances)
        found = changes.take(
            [GpuReading(1, identity, sample, None, None)], at + timedelta(minutes=minute)
        )
        yield from ((f.detector, f.subject, f.evidence) for f in found)


@pytest.fixture(scope="module")
def said(tmp_path_factory: pytest.TempPathFactory) -> list[Said]:
    return [
        *_agent(tmp_path_factory.mktemp("agent")),
        *_scheduler_side(),
        *_mig_reconfigured(),
    ]


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def test_every_detector_speaks_and_every_sentence_has_its_words(said: list[Said]):
    detectors = {d for d, _, _ in said}
    assert detectors >= node_leaks.DETECTORS | GPU_HEALTH | unreleased.DETECTORS
    assert detectors >= {
        PROBE_UNRELEASED,
        UNEXPLAINED_WAIT,
        fairness.PERSISTENT_UNFAIRNESS,
        gpu_in_service.UNHEALTHY_GPU_IN_SERVICE,
        gpu_unusable.DETECTOR,
        monitoring_lag.DETECTOR,
        monitoring_lag.UNREACHABLE,
        *log_loss.EVENT_DETECTORS,
        quota_reclaim.DETECTOR,
        *inference.DETECTORS,
    }
    keys = set()
    for detector, subject, evidence in said:
        sentence = describe(detector, subject, evidence)
        assert sentence is not None, (detector, subject, evidence)
        for note in sentence:
            keys.add(note.key)
            for language in LANGUAGES:
                template = TEMPLATES[language].get(note.key)
                assert template is not None, (language, note.key)
                assert _fields(template) <= set(note.params), (language, note.key, note.params)
    # Every finding template of the catalogue is one some detector said here, but the
    # controller's reads of its own sources.
    templates = {
        k
        for k in TEMPLATES["en"]
        if k.startswith("finding.")
        and k not in {"finding.details", "finding.separator", "finding.stored"}
        and k.removeprefix("finding.").split(".")[0] not in OWN_SOURCES
    }
    assert templates == keys


def test_each_sentence_reads_in_both_languages(said: list[Said]):
    zh, en = Words("zh-CN", ZoneInfo("Asia/Shanghai")), Words("en", ZoneInfo("Asia/Shanghai"))
    for detector, subject, evidence in said:
        sentence = describe(detector, subject, evidence)
        chinese, english = zh.finding(sentence, ""), en.finding(sentence, "")
        assert "{" not in chinese and "{" not in english, detector
        assert any("\u4e00" <= c <= "\u9fff" for c in chinese), chinese


def test_every_detector_is_named_in_chinese_and_by_its_id_in_english(said: list[Said]):
    zh, en = Words("zh-CN", ZoneInfo("Asia/Shanghai")), Words("en", ZoneInfo("Asia/Shanghai"))
    for detector in {d for d, _, _ in said} | OWN_SOURCES:
        assert en.detector(detector) == detector
        name = zh.detector(detector)
        assert name != detector and any("\u4e00" <= c <= "\u9fff" for c in name), detector
    # A detector a newer observer stored, which this catalogue does not know: its id.
    assert zh.detector("gpu_new_rule") == "gpu_new_rule"


def test_an_accounting_outage_is_said_with_the_platforms_words_in_both_languages():
    refused = "finished_jobs: sacct failed: Problem talking to the database: Connection refused"
    sentence = describe("accounting_unreachable", {"accounting": "slurm"}, {"error": refused})
    zh, en = Words("zh-CN", ZoneInfo("Asia/Shanghai")), Words("en", ZoneInfo("Asia/Shanghai"))
    english, chinese = en.finding(sentence, ""), zh.finding(sentence, "")
    assert english.startswith("The slurm scheduler's accounting cannot be read")
    assert refused in english and refused in chinese
    assert "记账" in chinese


def test_a_store_about_to_fill_its_volume_is_said_by_its_figures_in_both_languages(
    tmp_path: Path,
):
    store = Store(migrated_sqlite(tmp_path / "observer.db"))
    # 3 GiB free at 1.5 GiB a day: full in 2 days, sooner than the 3 days warned of.
    low = SpaceLow(NOW, 3 * 2**30, 1.5 * 2**30, timedelta(days=3))
    watch = outages.Unreachable(outages.room(store, lambda: low))
    (opened,) = watch.check(Look(NOW, (), (), {}, None, blind=False)).changed
    sentence = describe(opened.detector, opened.subject, opened.evidence)
    shanghai = ZoneInfo("Asia/Shanghai")
    for words in (Words("en", shanghai), Words("zh-CN", shanghai)):
        said = words.finding(sentence, "")
        assert words.duration(2 * 86400) in said
        assert words.duration(3 * 86400) in said
        assert "1.5 GiB" in said and "3.0 GiB" in said
        assert store.where in said
    english = Words("en", shanghai).finding(sentence, "")
    assert "fills its volume in about" in english
    store.close()


def test_a_quota_not_reclaimed_is_said_with_the_tenants_usage_over_the_hold(said: list[Said]):
    [(subject, evidence)] = [(s, e) for d, s, e in said if d == quota_reclaim.DETECTOR]
    sentence = describe(quota_reclaim.DETECTOR, subject, evidence)
    shanghai = ZoneInfo("Asia/Shanghai")
    english, chinese = (Words(lang, shanghai).finding(sentence, "") for lang in ("en", "zh-CN"))
    # the own usage filled the quota (4 of 4), then left room (1 of 4) at every snapshot
    assert "left room at every scheduler snapshot since (its GPUs used of 4" in english
    assert english.endswith(": 4, 1)")
    assert "每次调度器快照" in chinese and "配额 4 块：4、1）" in chinese
    # stored by an older observer, without the series: its summary instead
    older = {k: v for k, v in evidence.items() if k != "tenant_usage_gpus_series"}
    assert describe(quota_reclaim.DETECTOR, subject, older) is None


def test_a_finding_stored_without_the_evidence_its_sentence_needs_shows_its_summary():
    assert describe("unreleased_memory", {"node": "n1"}, {"pid": 4}) is None
    assert describe("a_detector_from_later", {}, {}) is None
    zh = Words("zh-CN", ZoneInfo("Asia/Shanghai"))
    assert zh.finding(None, "pid 4 still holds 1 GiB") == "（英文原文）pid 4 still holds 1 GiB"


def test_every_catalogued_xid_has_its_meaning_in_both_languages():
    for code, (meaning, _, _) in XIDS.items():
        assert TEMPLATES["en"][f"xid.{code}"] == meaning
        assert any("\u4e00" <= c <= "\u9fff" for c in TEMPLATES["zh-CN"][f"xid.{code}"]), code


def test_the_platforms_words_are_quoted_and_never_translated():
    zh = Words("zh-CN", ZoneInfo("Asia/Shanghai"))
    assert zh("why.platform", words="Error — exit 1") == "平台：「Error — exit 1」"
