"""The daily summary's GPU and node health section: each GPU with a fault by node (its Xids, its
conditions, its throttled GPU-hours counted within the day), the Xid codes with their classes,
and the platform's reaction to a fatal fault; a healthy day says so in one sentence, and only
when the agents sampled the GPUs that day."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from observer.detectors import gpu_in_service
from observer.domain import (
    Finding,
    FindingKind,
    JsonValue,
    SchedulerNode,
    SchedulerSnapshot,
    Severity,
)
from observer.gpu.xid import xid_info
from observer.records import StoredNodeChange
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Language, Words
from tests.reports.builders import DAY, at, context, node, sampled

GRACE_SECONDS = 600.0


def xid(code: int, when: datetime, host: str, index: int) -> Finding:
    """An Xid as the agent reports it (agent/xids.py): the catalogue's words in its evidence."""
    info = xid_info(code)
    return Finding(
        detector="gpu_xid",
        kind=FindingKind.EVENT,
        subject={"node": host, "pci_bus_id": f"0000:{index:02x}:00.0", "xid": str(code)},
        severity=Severity.CRITICAL if info.fatal else Severity.WARNING,
        summary=f"Xid {code}",
        opened_at=when,
        closed_at=when,
        evidence={
            "xid": code,
            "meaning": info.meaning,
            "xid_class": info.xid_class.value,
            "fatal": info.fatal,
            "gpu_index": index,
            "gpu_uuid": f"GPU-{host}-{index}",
        },
    )


def condition(
    detector: str,
    opened: datetime,
    closed: datetime | None,
    host: str,
    index: int,
    **evidence: Any,
) -> Finding:
    """A GPU condition as the agent keeps it (detectors/gpu_health.py, node_leaks.py)."""
    return Finding(
        detector=detector,
        kind=FindingKind.CONDITION,
        subject={"node": host, "gpu_uuid": f"GPU-{host}-{index}"},
        severity=Severity.WARNING,
        summary=detector,
        opened_at=opened,
        closed_at=closed,
        evidence={"gpu_index": index, "gpu_uuid": f"GPU-{host}-{index}", **evidence},
    )


def ecc_rise(opened: datetime, host: str, index: int, before: int, after: int) -> Finding:
    counters = {"aggregate": {"before": before, "after": after}}
    return condition("gpu_ecc_uncorrected", opened, None, host, index, counters=counters)


def kept_in_service(fault: Finding, seen: datetime, *job_ids: str) -> Finding:
    """The controller's unhealthy_gpu_in_service for `fault`, from the real rule."""
    placed = tuple(
        gpu_in_service.Placed(j, "research", None, fault.opened_at + timedelta(minutes=5 + i))
        for i, j in enumerate(job_ids)
    )
    host = fault.subject["node"]
    known = {
        host: gpu_in_service.Fault(
            host, fault.opened_at, fault.detector, fault.subject, fault.summary, placed
        )
    }
    scheduler = SchedulerSnapshot(seen, (), (SchedulerNode(host, "a100", 8, 4, "mixed"),), ())
    [symptom] = gpu_in_service.evaluate(known, scheduler, GRACE_SECONDS)
    return Finding(
        detector=symptom.detector,
        kind=FindingKind.CONDITION,
        subject=symptom.subject,
        severity=symptom.severity,
        summary=symptom.summary,
        opened_at=seen,
        closed_at=None,
        evidence=symptom.evidence,
    )


def rendered(
    *findings: Finding,
    nodes: tuple[str, ...] = ("node-1", "node-3"),
    sampled_nodes: tuple[str, ...] = ("node-1", "node-3"),
    changes: tuple[StoredNodeChange, ...] = (),
    language: Language = "en",
) -> tuple[str, dict[str, Any]]:
    """The day's health section as Markdown, and the day's JSON."""
    data = PeriodData(
        DAY,
        findings=findings,
        nodes_at_start=[node(n, "a100", 8, 4) for n in nodes],
        node_changes=changes,
        gpu=sampled(*sampled_nodes),
    )
    report = build_daily(
        DailyInputs(
            context=context(),
            day=DAY.start.date(),
            data=data,
            previous=None,
            soak=data,
            intervention_match_seconds=3600,
            layer_blind_max_share=0.1,
        )
    )
    out = render_daily(report, language)
    heading = f"## {said(language, 'sec.health')}\n"
    section = out.markdown.split(heading, 1)[1].split("\n## ", 1)[0]
    return section, json.loads(out.json)


def table(section: str, language: Language, heading_key: str) -> list[dict[str, str]]:
    """The rows of the Markdown table under a sub-heading, by column header."""
    part = section.split(f"### {said(language, heading_key)}\n", 1)[1].split("\n### ", 1)[0]
    lines = [line for line in part.splitlines() if line.startswith("|")]
    headers = [h.strip() for h in lines[0].strip("|").split("|")]
    return [
        dict(zip(headers, (c.strip() for c in line.strip("|").split("|")), strict=True))
        for line in lines[2:]
    ]


def said(language: Language, key: str, **params: JsonValue) -> str:
    return Words(language, UTC)(key, **params)


def col(language: Language, key: str) -> str:
    return said(language, key)


# Node-1 GPU 0: a job's own faults (Xid 13 twice), an uncorrected ECC rise, and throttling
# from 22:00 the evening before until 01:30 and again 10:00 to 10:30: 2 GPU-hours in the day.
NODE_1 = (
    xid(13, at(8), "node-1", 0),
    xid(13, at(9), "node-1", 0),
    ecc_rise(at(11), "node-1", 0, before=3, after=5),
    condition("gpu_clock_slowdown", at(-2), at(1, 30), "node-1", 0),
    condition("gpu_clock_slowdown", at(10), at(10, 30), "node-1", 0),
)
# Node-3 GPU 2 fell off the bus at 03:00 and stayed lost.
FELL_OFF = xid(79, at(3), "node-3", 2)
LOST = replace(
    condition("gpu_lost", at(3, 0, 5), None, "node-3", 2), subject={"node": "node-3", "gpu": "2"}
)
NODE_3 = (FELL_OFF, LOST)


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_each_faulty_gpu_is_a_row_by_node_with_its_xids_conditions_and_throttled_hours(
    language: Language,
):
    section, data = rendered(*NODE_1, *NODE_3, language=language)

    rows = table(section, language, "sub.health_gpus")
    assert [(r[col(language, "col.node")], r[col(language, "col.gpu")]) for r in rows] == [
        ("node-1", "0"),
        ("node-3", "2"),
    ]
    first, second = rows
    xids = first[col(language, "col.xids")]
    assert "13 ×2" in xids and said(language, "xid_class.application") in xids
    assert "3 → 5" in first[col(language, "col.gpu_conditions")]
    assert first[col(language, "col.throttled_gpu_hours")] == "2.00"
    assert second[col(language, "col.xids")] == said(
        language,
        "health.xid_cell_fatal",
        code=79,
        count=1,
        xid_class=said(language, "xid_class.bus"),
    )
    assert said(language, "health.cond.gpu_lost") in second[col(language, "col.gpu_conditions")]
    assert second[col(language, "col.throttled_gpu_hours")] == "—"

    health = data["gpu_health"]
    assert health["throttled_gpu_hours"] == 2.0
    assert [(g["node"], g["gpu"], g["xids"]) for g in health["gpus"]] == [
        ("node-1", "0", {"13": 2}),
        ("node-3", "2", {"79": 1}),
    ]
    ecc = health["gpus"][0]["conditions"]["gpu_ecc_uncorrected"]
    assert ecc["measured"] == {"before": 3, "after": 5}
    assert ecc["open_at_end"] is True


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_the_xid_table_names_each_code_with_its_class_count_and_whether_it_is_fatal(
    language: Language,
):
    section, data = rendered(*NODE_1, *NODE_3, language=language)

    rows = table(section, language, "sub.health_xids")
    by_code = {r[col(language, "col.xid")]: r for r in rows}
    assert list(by_code) == ["79", "13"]  # the fatal first
    bus, application = by_code["79"], by_code["13"]
    assert bus[col(language, "col.meaning")] == said(language, "xid.79")
    assert bus[col(language, "col.class")] == said(language, "xid_class.bus")
    assert bus[col(language, "col.fatal")] == said(language, "word.yes")
    assert bus[col(language, "col.count")] == "1"
    assert application[col(language, "col.class")] == said(language, "xid_class.application")
    assert application[col(language, "col.count")] == "2"
    assert application[col(language, "col.nodes")] == "node-1"
    assert [
        (x["code"], x["xid_class"], x["count"], x["fatal"]) for x in data["gpu_health"]["xids"]
    ] == [
        (79, "bus", 1, True),
        (13, "application", 2, False),
    ]


def test_throttling_that_spans_midnight_counts_only_its_hours_within_the_day():
    overnight = condition("gpu_clock_slowdown", at(23), at(25), "node-1", 0)  # 23:00 to 01:00

    _, data = rendered(overnight)

    assert data["gpu_health"]["throttled_gpu_hours"] == 1.0
    [gpu] = data["gpu_health"]["gpus"]
    assert gpu["conditions"]["gpu_clock_slowdown"]["seconds"] == 3600
    assert gpu["conditions"]["gpu_clock_slowdown"]["open_at_end"] is True


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_a_node_kept_in_service_after_a_fatal_fault_names_when_and_the_jobs_placed_there(
    language: Language,
):
    kept = kept_in_service(FELL_OFF, at(3, 15), "slurm-41", "slurm-42")

    section, data = rendered(*NODE_3, kept, language=language)

    [row] = table(section, language, "sub.health_reaction")
    assert row[col(language, "col.node")] == "node-3"
    assert row[col(language, "col.fault")] == "Xid 79"
    assert row[col(language, "col.fault_at")].endswith("03:00")  # the platform's timezone
    assert row[col(language, "col.out_of_service_after")] == said(
        language, "health.not_out_of_service"
    )
    assert row[col(language, "col.kept_in_service_since")].endswith("03:15")
    jobs = row[col(language, "col.jobs_placed")]
    assert jobs.startswith("2") and "slurm-41" in jobs and "slurm-42" in jobs
    [reaction] = data["gpu_health"]["reactions"]
    assert [j["job_id"] for j in reaction["jobs_placed"]] == ["slurm-41", "slurm-42"]


def test_a_node_the_platform_drained_says_how_soon():
    drained = StoredNodeChange(at(3, 20), node("node-3", "a100", 8, 0, state="drained"))

    _, data = rendered(*NODE_3, changes=(drained,))

    [reaction] = data["gpu_health"]["reactions"]
    assert reaction["out_of_service_after_seconds"] == 20 * 60
    assert reaction["kept_in_service_since"] is None


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_a_fault_free_day_the_agents_sampled_says_healthy_and_lists_nothing(language: Language):
    section, data = rendered(language=language)

    healthy = said(language, "note.health_healthy", sampled=2)
    assert section.strip() == healthy
    assert data["gpu_health"]["gpus"] == []
    assert data["gpu_health"]["reactions"] == []


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_a_day_without_gpu_samples_never_says_healthy(language: Language):
    section, data = rendered(sampled_nodes=(), language=language)

    assert section.strip() == said(language, "note.health_not_observed")
    assert data["gpu_health"]["observed"] is False


def test_nodes_the_agents_did_not_sample_are_named_beside_the_healthy_ones():
    section, data = rendered(nodes=("node-1", "node-2", "node-3"))

    assert section.strip() == said("en", "note.health_healthy_but", sampled=2, nodes="node-2")
    assert data["gpu_health"]["nodes_not_sampled"] == ["node-2"]


def incident_rows(section: str, language: Language) -> list[dict[str, str]]:
    return table(section, language, "sub.health_incidents")


@pytest.mark.parametrize("language", ["en", "zh-CN"])
def test_an_xid_79_the_gpu_it_leaves_lost_and_the_node_kept_in_service_are_one_incident(
    language: Language,
):
    kept = kept_in_service(FELL_OFF, at(3, 15), "slurm-41")

    section, data = rendered(*NODE_3, kept, language=language)

    assert said(language, "note.health_incidents", incidents=1, fatal=1, findings=3) in section
    [row] = incident_rows(section, language)
    assert (row[col(language, "col.node")], row[col(language, "col.gpu")]) == ("node-3", "2")
    assert row[col(language, "col.fatal")] == said(language, "word.yes")
    symptoms = row[col(language, "col.symptoms")].split(said(language, "cell.separator"))
    names = [
        f"{said(language, 'health.cond.gpu_xid')} 79",
        said(language, "health.cond.gpu_lost"),
        said(language, "health.cond.unhealthy_gpu_in_service"),
    ]
    assert [s.startswith(n) for s, n in zip(symptoms, names, strict=True)] == [True] * 3
    [incident] = data["gpu_health"]["incidents"]
    assert [s["detector"] for s in incident["symptoms"]] == [
        "gpu_xid",
        "gpu_lost",
        "unhealthy_gpu_in_service",
    ]
    assert incident["fatal"] is True


def test_an_ecc_error_and_the_row_remap_it_needs_are_one_incident():
    ecc = ecc_rise(at(11), "node-1", 0, before=3, after=5)
    remap = condition("gpu_row_remap_pending", at(11, 1), None, "node-1", 0)

    section, data = rendered(ecc, remap)

    assert said("en", "note.health_incidents", incidents=1, fatal=0, findings=2) in section
    [incident] = data["gpu_health"]["incidents"]
    assert [s["detector"] for s in incident["symptoms"]] == [
        "gpu_ecc_uncorrected",
        "gpu_row_remap_pending",
    ]


def test_faults_on_two_gpus_or_apart_in_time_on_one_are_separate_incidents():
    other_gpu = condition("gpu_row_remap_pending", at(11, 1), None, "node-1", 1)
    long_after = condition("gpu_row_remap_pending", at(20), None, "node-1", 0)
    ecc = replace(ecc_rise(at(11), "node-1", 0, before=3, after=5), closed_at=at(12))

    _, data = rendered(ecc, other_gpu, long_after, *NODE_3)

    assert [(i["node"], i["gpu"], len(i["symptoms"])) for i in data["gpu_health"]["incidents"]] == [
        ("node-3", "2", 2),
        ("node-1", "0", 1),
        ("node-1", "1", 1),
        ("node-1", "0", 1),
    ]
