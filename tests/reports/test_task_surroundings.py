"""What each probe run had and met while it lived, in its row of the per-task record: the
quota in force for its tenant (the queue's nominal quota the scheduler showed, else the
configured one), the utilisation and memory of its own GPUs (the samples attributed to it on
its nodes while it ran), the GPU errors on its nodes while it ran and the alerts that fired
while it lived, concerning its nodes, its tenant or the whole platform. In the daily's table
(en and zh-CN), its CSV and JSON, and `observer runs --json` through the real command line;
every figure checked against what the test stored."""

from __future__ import annotations

import csv
import io
import json
import random
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from observer.detectors.gpu_health import (
    CLOCK_SLOWDOWN,
    ECC_UNCORRECTED,
    GPU_XID,
    ROW_REMAP_PENDING,
)
from observer.domain import (
    Finding,
    FindingKind,
    Outcome,
    ProbeRun,
    QueueState,
    SchedulerSnapshot,
    Severity,
)
from observer.records import RunGpuFigures, StoredAlert, StoredGpuSample, StoredQueueSample
from observer.reports.compute.daily import DailyInputs, build_daily
from observer.reports.compute.data import PeriodData
from observer.reports.compute.run_surroundings import Quota, QuotaSource, surroundings
from observer.reports.inputs import load_daily
from observer.reports.render.blocks import Rendered
from observer.reports.render.daily import render_daily
from observer.reports.render.tasks import CSV_COLUMNS
from observer.settings import Settings, load_settings
from observer.storage.store import Store
from tests.reports.builders import DAY, at, context, run
from tests.support.cli import run_cli
from tests.support.databases import migrated_sqlite

GIB = 1 << 30
# Its tenant's queue guaranteed 8 GPUs, then 6 from 11:00, borrowing up to 4 more.
NOMINAL = ((at(9), 8), (at(11), 6))
BORROWING = 4
PROD_QUOTA = 4  # configured; prod's queue guarantees nothing


@dataclass(frozen=True)
class Stored:
    busy: ProbeRun  # research's gpu-busy on n1, 10:10 to 12:00
    held: ProbeRun  # prod's, held by its quota from 14:00 until given up on at 15:00
    samples: list[StoredGpuSample]
    its_errors: list[Finding]  # on its GPU or its whole node while it ran
    alerts_on_busy: list[str]
    alerts_on_held: list[str]
    settings: Settings
    config: Path
    en: Rendered
    zh: Rendered


def _samples(rng: random.Random) -> list[StoredGpuSample]:
    """Every 5 minutes from 09:00 to 13:00: n1's GPU 0 held by research's gpu-busy, its GPU 1
    by a prod job, n2's GPU 0 by research's gpu-busy too (another run's node)."""
    holders = [("n1", 0, "research", "gpu-busy"), ("n1", 1, "prod", "job")]
    holders.append(("n2", 0, "research", "gpu-busy"))
    taken = []
    for step in range(4 * 12):
        when = at(9) + timedelta(minutes=5 * step)
        for node, index, tenant, task in holders:
            taken.append(
                StoredGpuSample(
                    node=node,
                    gpu_uuid=f"GPU-{node}-{index}",
                    gpu_index=index,
                    at=when,
                    utilization_gpu_percent=rng.randint(0, 100),
                    memory_used_bytes=rng.randint(1, 80) * GIB,
                    memory_total_bytes=80 * GIB,
                    tenant=tenant,
                    task=task,
                )
            )
    return taken


def _finding(
    detector: str, opened: datetime, node: str, holders: list[str], **evidence: object
) -> Finding:
    return Finding(
        detector=detector,
        kind=FindingKind.EVENT if detector == GPU_XID else FindingKind.CONDITION,
        subject={
            "node": node,
            "gpu_uuid": f"GPU-{node}-0",
            **({"xid": "79"} if detector == GPU_XID else {}),
        },
        severity=Severity.CRITICAL if evidence.get("fatal") else Severity.WARNING,
        summary=f"{detector} on {node}",
        opened_at=opened,
        closed_at=opened + timedelta(minutes=5),
        evidence={"gpu_owner_ids": holders, **evidence},
    )


def _alert(name: str, starts: datetime, minutes: int, **labels: str) -> StoredAlert:
    return StoredAlert(
        fingerprint=name,
        name=name,
        severity="warning",
        starts_at=starts,
        ends_at=starts + timedelta(minutes=minutes),
        last_seen_at=starts + timedelta(minutes=minutes),
        labels={"alertname": name, **labels},
    )


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    tmp = tmp_path_factory.mktemp("surroundings")
    busy = replace(
        run("gpu-busy", "research", submitted=at(10), wait_seconds=600, finished=at(12)),
        node_names=("n1",),
        owner_ids=("job-1",),
    )
    held = run(
        "short",
        "prod",
        submitted=at(14),
        wait_seconds=None,
        outcome=Outcome.TIMED_OUT,
        reason="QuotaExceeded",
        pending={"QuotaExceeded": 3600.0},
        finished=at(15),
    )
    samples = _samples(random.Random(11))
    its_errors = [
        _finding(GPU_XID, at(10, 30), "n1", ["job-1"], fatal=True),
        _finding(ROW_REMAP_PENDING, at(11), "n1", []),  # no holder named: maybe its own
    ]
    others = [
        _finding(ECC_UNCORRECTED, at(11, 15), "n1", ["job-9"]),  # another job's GPU
        _finding(GPU_XID, at(10, 45), "n2", ["job-2"], fatal=True),  # another node
        _finding(CLOCK_SLOWDOWN, at(11, 20), "n1", ["job-1"]),  # throttling, no error
        _finding(ECC_UNCORRECTED, at(12, 30), "n1", ["job-1"]),  # after it ended
    ]
    alerts = [
        _alert("PlatformDegraded", at(9), 70),  # no node, no tenant: the whole platform's
        _alert("GpuHot", at(10, 30), 30, node="n1", severity="warning"),
        _alert("GpuHotElsewhere", at(10, 30), 30, node="n2"),
        _alert("ResearchQuota", at(11, 50), 40, tenant="research"),
        _alert("ProdQuota", at(14, 30), 10, namespace="prod"),
        _alert("Watchdog", at(9), 600),  # ignored by the settings
        _alert("AfterAll", at(16), 10),
    ]
    database = tmp / "soak.db"
    url = migrated_sqlite(database)
    with Store(url) as store:
        store.save_runs([busy, held])
        store.add_gpu_samples(samples)
        store.save_findings([*its_errors, *others])
        store.save_alerts(alerts)
        for step in range(8 * 6):  # every 10 minutes from 09:00 to 17:00
            when = at(9) + timedelta(minutes=10 * step)
            nominal = [gpus for since, gpus in NOMINAL if since <= when][-1]
            queues = (
                QueueState("prod", None, 0, 0, 0, 0, 0.0),
                QueueState("research", None, 0, 0, 1, 1, 0.0, {}, nominal, BORROWING),
            )
            store.save_scheduler_snapshot(SchedulerSnapshot(when, queues, (), ()))
    config = tmp / "observer.yaml"
    config.write_text(
        f"storage:\n  sqlite_path: {database}\n"
        "controller:\n  timezone: Asia/Shanghai\n  agent_urls: ['http://n1:9400']\n"
        f"  tenants:\n    - name: research\n      quota_gpus: 16\n"
        f"    - name: prod\n      quota_gpus: {PROD_QUOTA}\n"
        "reports:\n  alertmanager_url: http://alertmanager:9093\n"
        f"  soak_started_at: '{DAY.start.isoformat()}'\n",
        encoding="utf-8",
    )
    settings = load_settings(config)
    with Store(url) as store:
        report = build_daily(load_daily(store, settings, DAY.start.date(), DAY.end + timedelta(1)))
    return Stored(
        busy,
        held,
        samples,
        its_errors,
        ["PlatformDegraded", "GpuHot", "ResearchQuota"],
        ["ProdQuota"],
        settings,
        config,
        render_daily(report, "en"),
        render_daily(report, "zh-CN"),
    )


def _its_own(stored: Stored) -> list[StoredGpuSample]:
    busy = stored.busy
    assert busy.started_at is not None and busy.finished_at is not None
    return [
        s
        for s in stored.samples
        if s.node in busy.node_names
        and busy.started_at <= s.at < busy.finished_at
        and (s.tenant, s.task) == (busy.tenant, busy.probe)
    ]


def _expected(stored: Stored) -> dict[str, dict[str, object]]:
    mine = _its_own(stored)
    percents = [s.utilization_gpu_percent or 0 for s in mine]
    assert stored.busy.started_at is not None
    return {
        stored.busy.run_id: {
            # 8 GPUs until 11:00, 6 after: both were in force while it lived.
            "quota": {"source": "queue", "gpus": [8, 6], "borrowing_limit_gpus": BORROWING},
            "gpu_samples": len(mine),
            "gpu_utilization_avg": round(sum(percents) / len(percents), 3),
            "gpu_utilization_max": max(percents),
            "gpu_memory_peak_bytes": max(s.memory_used_bytes or 0 for s in mine),
            "gpu_errors": {
                "count": len(stored.its_errors),
                "worst": GPU_XID,
                "xid": "79",
                "fatal": True,
            },
            "alerts": stored.alerts_on_busy,
        },
        stored.held.run_id: {
            "quota": {"source": "configured", "gpus": [PROD_QUOTA], "borrowing_limit_gpus": 0},
            # Never started: it held no GPU.
            "gpu_samples": None,
            "gpu_utilization_avg": None,
            "gpu_utilization_max": None,
            "gpu_memory_peak_bytes": None,
            "gpu_errors": None,
            "alerts": stored.alerts_on_held,
        },
    }


def test_each_record_carries_what_its_run_had_and_met_in_the_json(stored: Stored) -> None:
    records = json.loads(stored.en.json)["task_records"]
    expected = _expected(stored)

    assert {r["run_id"]: {k: r[k] for k in expected[r["run_id"]]} for r in records} == expected


def test_its_gpus_are_only_the_samples_attributed_to_it_on_its_nodes_while_it_ran(stored):
    mine = _its_own(stored)
    elsewhere = [s for s in stored.samples if (s.tenant, s.task) == ("research", "gpu-busy")]
    assert 0 < len(mine) < len(elsewhere)  # n2's and those outside its run are not its own
    [record] = [
        r for r in json.loads(stored.en.json)["task_records"] if r["run_id"] == stored.busy.run_id
    ]
    assert record["gpu_samples"] == len(mine)


def test_the_csv_has_a_column_for_each_figure(stored: Stored) -> None:
    assert stored.en.csv is not None
    reader = csv.DictReader(io.StringIO(stored.en.csv))
    rows = {r["run_id"]: r for r in reader}
    assert tuple(reader.fieldnames or ()) == CSV_COLUMNS
    expected = _expected(stored)[stored.busy.run_id]
    busy = rows[stored.busy.run_id]

    assert (busy["quota_gpus"], busy["quota_source"]) == ("8 6", "queue")
    assert int(busy["gpu_samples"]) == expected["gpu_samples"]
    assert float(busy["gpu_utilization_avg"]) == pytest.approx(
        expected["gpu_utilization_avg"], abs=1e-3
    )
    assert int(busy["gpu_utilization_max"]) == expected["gpu_utilization_max"]
    assert int(busy["gpu_memory_peak_bytes"]) == expected["gpu_memory_peak_bytes"]
    assert (busy["gpu_errors"], busy["gpu_errors_worst"], busy["gpu_errors_xid"]) == (
        str(len(stored.its_errors)),
        GPU_XID,
        "79",
    )
    assert busy["alerts"].split() == stored.alerts_on_busy
    held = rows[stored.held.run_id]
    assert (held["quota_gpus"], held["quota_source"], held["gpu_samples"]) == (
        str(PROD_QUOTA),
        "configured",
        "",
    )


def test_the_table_says_it_in_one_cell_in_both_languages(stored: Stored) -> None:
    mine = _its_own(stored)
    peak = max(s.memory_used_bytes or 0 for s in mine) / GIB
    top = max(s.utilization_gpu_percent or 0 for s in mine)

    def row(rendered: Rendered, run: ProbeRun) -> str:
        [line] = [x for x in rendered.markdown.splitlines() if x.startswith(f"| {run.run_id[:8]} ")]
        return line

    busy = row(stored.en, stored.busy)
    assert "quota: 8 → 6 GPU(s) (the queue's nominal quota; borrowing limit 4)" in busy
    assert f"{top:.1f}% peak utilisation, {peak:.1f} GiB peak memory" in busy
    assert "GPU errors: 2, the worst Xid 79 (fatal)" in busy
    assert "alerts: PlatformDegraded, GpuHot, ResearchQuota" in busy
    held = row(stored.en, stored.held)
    assert "quota: 4 GPU(s) (configured)" in held and "its GPUs" not in held
    assert "| While it ran |" in stored.en.markdown

    zh = row(stored.zh, stored.busy)
    assert "配额：8 → 6 卡（队列标称配额，借用上限 4 卡）" in zh
    assert f"峰值利用率 {top:.1f}%，显存峰值 {peak:.1f} GiB" in zh
    assert "GPU 错误 2 个，最严重者：Xid 79（致命）" in zh
    assert "告警：PlatformDegraded、GpuHot、ResearchQuota" in zh
    assert "| 运行期间 |" in stored.zh.markdown


def test_without_agents_or_alertmanager_the_record_says_not_observed() -> None:
    ran = replace(run(wait_seconds=60, finished=at(11)), node_names=("n1",))
    data = PeriodData(DAY, runs=(ran,))
    bare = context(agents=False, alertmanager=False)
    report = build_daily(DailyInputs(bare, DAY.start.date(), data, None, data, 900.0, 0.1))
    rendered = render_daily(report, "en")

    [record] = json.loads(rendered.json)["task_records"]
    assert (record["gpu_samples"], record["gpu_errors"], record["alerts"]) == (None, None, None)
    assert "its GPUs: not observed (no node agent)" in rendered.markdown
    assert "GPU errors: not observed (no node agent)" in rendered.markdown
    assert "alerts: not observed (no Alertmanager)" in rendered.markdown


def test_with_agents_and_no_sample_of_its_gpus_it_says_so() -> None:
    ran = replace(run(wait_seconds=60, finished=at(11)), node_names=("n1",))
    data = PeriodData(DAY, runs=(ran,))
    report = build_daily(DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1))
    rendered = render_daily(report, "en")

    [record] = json.loads(rendered.json)["task_records"]
    assert (record["gpu_samples"], record["gpu_errors"]["count"], record["alerts"]) == (0, 0, [])
    assert "its GPUs: not sampled; GPU errors: none found; alerts: none fired" in rendered.markdown


def test_observer_runs_json_carries_the_same_fields(stored: Stored) -> None:
    day = DAY.start.date().isoformat()
    result = run_cli("runs", "--config", str(stored.config), "--date", day, "--json")
    assert result.exit_code == 0, result.stderr
    printed = {r["run_id"]: r for r in map(json.loads, result.stdout.splitlines())}
    expected = _expected(stored)

    assert {i: {k: printed[i][k] for k in fields} for i, fields in expected.items()} == expected
    table = run_cli("runs", "--config", str(stored.config), "--date", day).stdout
    assert "While it ran" in table.splitlines()[1]


def test_a_run_between_two_snapshots_has_the_quota_in_force_when_it_came() -> None:
    short = run(submitted=at(10), wait_seconds=60, finished=at(10, 30))
    samples = tuple(
        StoredQueueSample(when, QueueState("research", None, 0, 0, 0, 0, 0.0, {}, gpus, 0))
        for when, gpus in ((at(9), 8), (at(12), 6))
    )
    data = PeriodData(DAY, runs=(short,), queue_samples=samples)

    assert surroundings(data, context())[short.run_id].quota == Quota(QuotaSource.QUEUE, (8,), 0)


@pytest.mark.parametrize(
    ("percent", "memory", "en", "zh"),
    [
        (None, None, "sampled, neither utilisation nor memory read", "已采样，未读到利用率与显存"),
        (
            None,
            3 * GIB,
            "utilisation not read, 3.0 GiB peak memory",
            "未读到利用率，显存峰值 3.0 GiB",
        ),
        (
            40,
            None,
            "40.0% average and 40.0% peak utilisation, memory not read",
            "平均利用率 40.0%，峰值利用率 40.0%，未读到显存",
        ),
    ],
)
def test_a_figure_no_sample_read_is_said_unread(percent, memory, en, zh) -> None:
    ran = replace(run(wait_seconds=60, finished=at(11)), node_names=("n1",))
    figures = RunGpuFigures(ran.run_id, 3, 1, percent, percent, memory)
    data = PeriodData(DAY, runs=(ran,), run_gpu={ran.run_id: figures})
    report = build_daily(DailyInputs(context(), DAY.start.date(), data, None, data, 900.0, 0.1))

    assert f"its 1 GPU(s): {en};" in render_daily(report, "en").markdown
    assert f"所用 1 卡：{zh}；" in render_daily(report, "zh-CN").markdown
