"""Who used what, in the daily summary, from what the controller stored: GPU-hours per tenant x
pool x task type add up, per pool, to the pool's allocated GPU-hours of the scheduler's node
log (what no sample attributed to a tenant being the not-attributed row), each attributed row
is its stored samples times the time each stands for, busy and idle are their utilisation and
their 0 % reads, cost is hours times the pool's price; memory percentiles per tenant; GPU-hours
per user from the queue snapshots; demand against capacity; in the JSON, the CSV and both
languages' pages."""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import RowMapping

from observer.domain import QueueState, SchedulerNode, SchedulerSnapshot
from observer.records import GpuUsageCounts, StoredGpuSample
from observer.reports.compute.daily import build_daily
from observer.reports.compute.data import Allocation, Period, PeriodData
from observer.reports.compute.usage import usage
from observer.reports.compute.verdict import build_verdict
from observer.reports.inputs import gpu_sample_seconds, load_daily, load_verdict
from observer.reports.render.daily import render_daily
from observer.reports.render.i18n import Words
from observer.reports.render.usage import CSV_COLUMNS
from observer.reports.render.verdict import render_verdict
from observer.settings import Settings
from observer.storage.gpu_samples import GIB
from observer.storage.store import Store
from observer.storage.tables import gpu_samples_table, node_states_table
from tests.reports.builders import context
from tests.support.databases import migrated_sqlite

DAY = date(2026, 11, 30)
START = datetime(2026, 11, 30, tzinfo=UTC)
STEP = timedelta(seconds=300)  # the snapshots' and the kept samples' spacing
NODES = {"n0": "pool-a", "n1": "pool-a", "n2": "pool-b"}
PRICES = {"pool-a": 2.5, "*": 1.0}


def _settings() -> Settings:
    return Settings.model_validate(
        {
            "controller": {
                "tenants": [{"name": "research"}, {"name": "prod"}],
                "timezone": "UTC",
                "windows": [{"name": "night", "start": "22:00", "end": "06:00"}],
                "plan": [],
                "snapshot_interval_seconds": 300,
                "observe_interval_seconds": 15,
                "gpu_sample_interval_seconds": 300,
            },
            "reports": {
                "soak_started_at": START.isoformat(),
                "soak_ended_at": (START + timedelta(days=1)).isoformat(),
                "gpu_hour_price": PRICES,
                "currency": "CNY",
            },
        }
    )


def _play(store: Store, rng: random.Random) -> None:
    """A day, every 300 s: each node's first `allocated` GPUs held, by research or prod (or
    by an owner the observer could not name), of a type; the queues' running GPUs by user,
    and pending GPUs that at times ask for more than the fleet has."""
    at = START
    while at < START + timedelta(days=1):
        nodes, samples = [], []
        running: dict[str, dict[str, int]] = {"research": {}, "prod": {}}
        for name, pool in NODES.items():
            allocated = rng.randint(0, 8)
            nodes.append(SchedulerNode(name, pool, 8, allocated, "mixed"))
            for gpu in range(8):
                tenant = rng.choice(("research", "prod", None)) if gpu < allocated else None
                if tenant is not None:
                    user = rng.choice(("alice", "bob"))
                    running[tenant][user] = running[tenant].get(user, 0) + 1
                samples.append(
                    StoredGpuSample(
                        node=name,
                        gpu_uuid=f"GPU-{name}-{gpu}",
                        gpu_index=gpu,
                        at=at,
                        utilization_gpu_percent=rng.choice((0, 0, 40, 100)),
                        memory_used_bytes=rng.choice((2, 30, 79)) * GIB if gpu < allocated else 0,
                        tenant=tenant,
                        task="job" if tenant else None,
                        task_type=rng.choice(("training", "probe")) if tenant else None,
                    )
                )
        queues = tuple(
            QueueState(
                tenant,
                None,
                pending_jobs=1,
                pending_gpus=rng.choice((0, 4, 20)),
                running_jobs=1,
                running_gpus=sum(users.values()),
                longest_wait_seconds=0.0,
                running_gpus_by_user=users,
            )
            for tenant, users in running.items()
        )
        store.save_scheduler_snapshot(SchedulerSnapshot(at, queues, tuple(nodes), ()))
        store.add_gpu_samples(samples)
        at += STEP


@pytest.fixture(scope="module")
def stored_day(tmp_path_factory: pytest.TempPathFactory):
    url = migrated_sqlite(Path(tmp_path_factory.mktemp("usage")) / "observer.db")
    settings = _settings()
    with Store(url) as store:
        _play(store, random.Random(11))
        report = build_daily(load_daily(store, settings, DAY, START + timedelta(days=2)))
        rendered = render_daily(report, "en"), render_daily(report, "zh-CN")
        verdict = render_verdict(
            build_verdict(load_verdict(store, settings, START + timedelta(days=2))), "zh-CN"
        )
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        samples = connection.execute(sa.select(gpu_samples_table)).mappings().all()
        nodes = connection.execute(sa.select(node_states_table)).mappings().all()
        with Store(url) as store:
            queues = store.queue_samples(START, START + timedelta(days=1))
    engine.dispose()
    yield samples, nodes, queues, *rendered, verdict


def _allocated_hours_by_pool(nodes: Sequence[RowMapping]) -> dict[str, float]:
    """The node log integrated: each stored state holds until the node's next, the last until
    the day's end."""
    hours: dict[str, float] = {}
    by_node: dict[str, list[RowMapping]] = {}
    for row in sorted(nodes, key=lambda r: r["at"]):
        by_node.setdefault(row["node"], []).append(row)
    end = START + timedelta(days=1)
    for states in by_node.values():
        for state, after in zip(states, [*states[1:], None], strict=True):
            until = end if after is None else after["at"].replace(tzinfo=UTC)
            held = (until - state["at"].replace(tzinfo=UTC)).total_seconds() / 3600
            hours[state["pool"]] = hours.get(state["pool"], 0.0) + state["gpus_allocated"] * held
    return hours


def test_each_pools_rows_add_up_to_its_allocated_gpu_hours_in_the_node_log(stored_day):
    _, nodes, _, en, _, _ = stored_day
    daily = json.loads(en.json)
    expected = _allocated_hours_by_pool(nodes)
    assert set(expected) == {"pool-a", "pool-b"}
    assert daily["gpu_hours_pools"] == pytest.approx(expected, abs=0.001)
    for pool, hours in expected.items():
        rows = [r for r in daily["gpu_hours"] if r["pool"] == pool]
        assert sum(r["allocated"] for r in rows) == pytest.approx(hours, abs=0.01)
        # Some held GPUs' owner was never named: their hours are the not-attributed row.
        [unattributed] = [r for r in rows if r["tenant"] == ""]
        assert unattributed["allocated"] > 0
        assert unattributed["busy"] is None and unattributed["idle"] is None


def test_each_attributed_row_is_its_stored_samples_utilisation_and_idle_reads(stored_day):
    samples, _, _, en, _, _ = stored_day
    each = gpu_sample_seconds(300, 15) / 3600
    expected: dict[tuple[str, str, str], list[float]] = {}
    for s in samples:
        if s["tenant"] is not None:
            row = expected.setdefault((s["tenant"], NODES[s["node"]], s["task_type"]), [0, 0, 0])
            row[0] += each
            row[1] += s["utilization_gpu_percent"] / 100 * each
            row[2] += each if s["utilization_gpu_percent"] == 0 else 0
    rows = json.loads(en.json)["gpu_hours"]
    attributed = {(r["tenant"], r["pool"], r["task_type"]): r for r in rows if r["tenant"]}
    assert set(attributed) == set(expected)
    assert {k[2] for k in expected} == {"training", "probe"}
    for key, (allocated, busy, idle) in expected.items():
        row = attributed[key]
        assert (row["allocated"], row["busy"], row["idle"]) == pytest.approx(
            (allocated, busy, idle), abs=0.001
        )
        assert row["busy"] < row["allocated"] and 0 < row["idle"] < row["allocated"]


def test_cost_is_allocated_hours_times_the_pools_price(stored_day):
    daily = json.loads(stored_day[3].json)
    assert daily["gpu_hours_currency"] == "CNY"
    for row in daily["gpu_hours"]:
        price = PRICES.get(row["pool"], PRICES["*"])
        assert row["cost"] == pytest.approx(row["allocated"] * price, abs=0.01)


def test_memory_percentiles_are_the_tenants_stored_samples(stored_day):
    samples, _, _, en, _, _ = stored_day
    memory = {m["tenant"]: m for m in json.loads(en.json)["gpu_memory"]}
    for tenant in ("research", "prod"):
        used = sorted(
            s["memory_used_bytes"] // GIB
            for s in samples
            if s["tenant"] == tenant and s["memory_used_bytes"] is not None
        )
        assert memory[tenant]["samples"] == len(used)
        assert memory[tenant]["p50_gib"] == used[-(-len(used) // 2) - 1]
        assert memory[tenant]["p95_gib"] == used[-(-len(used) * 95 // 100) - 1]


def test_gpu_hours_per_user_and_demand_against_capacity_come_from_the_queue_snapshots(stored_day):
    _, _, queues, en, _, _ = stored_day
    each = 300 / 3600
    users: dict[tuple[str, str], float] = {}
    demand: dict[datetime, int] = {}
    for q in queues:
        for user, gpus in q.state.running_gpus_by_user.items():
            users[q.state.tenant, user] = users.get((q.state.tenant, user), 0.0) + gpus * each
        demand[q.at] = demand.get(q.at, 0) + q.state.running_gpus + q.state.pending_gpus
    daily = json.loads(en.json)
    assert {
        (u["tenant"], u["user"]): u["allocated"] for u in daily["gpu_hours_by_user"]
    } == pytest.approx(users, abs=0.001)
    [whole] = [c for c in daily["capacity"] if c["window"] == ""]
    assert whole["pool"] is None  # the queues do not say which pool: the whole fleet
    assert whole["capacity_gpus"] == 8 * len(NODES)
    assert whole["peak_demand_gpus"] == max(demand.values())
    over = sum(each for d in demand.values() if d > 8 * len(NODES))
    assert over > 0
    assert whole["over_capacity_hours"] == pytest.approx(over, abs=0.001)
    assert whole["observed_hours"] == pytest.approx(24.0)
    assert {c["window"] for c in daily["capacity"]} == {"", "night"}
    words = Words("en", UTC)
    said = f"for {words.duration(over * 3600)} of the {words.duration(24 * 3600)} observed"
    assert said in en.markdown


def test_the_csv_has_a_row_per_json_row_and_both_languages_have_the_section(stored_day):
    _, _, _, en, zh, _ = stored_day
    [(name, text)] = en.more_csv
    assert name == "gpu_hours"
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == CSV_COLUMNS
    daily = json.loads(en.json)
    assert len(rows) == len(daily["gpu_hours"])
    assert sum(float(r["allocated"]) for r in rows) == pytest.approx(
        sum(daily["gpu_hours_pools"].values()), abs=0.01
    )
    assert "## Who used what" in en.markdown
    assert "not attributed" in en.markdown
    assert "## 谁用了什么" in zh.markdown
    assert "未归属" in zh.markdown and "训练" in zh.markdown
    assert "Who used what" in en.html


def test_the_verdict_over_a_one_day_soak_shows_the_days_rows(stored_day):
    _, nodes, _, en, _, verdict = stored_day
    daily, over_soak = json.loads(en.json), json.loads(verdict.json)
    for key in ("gpu_hours", "gpu_hours_pools", "gpu_memory", "gpu_hours_by_user"):
        assert over_soak[key] == daily[key]
    assert over_soak["gpu_hours_pools"] == pytest.approx(_allocated_hours_by_pool(nodes), abs=0.001)
    assert "## 谁用了什么" in verdict.markdown and "整个时段" in verdict.markdown
    [(name, _)] = verdict.more_csv
    assert name == "gpu_hours"


def test_a_pool_whose_samples_attribute_more_than_the_scheduler_allocated_is_said_so():
    """Jobs shorter than the samples' interval: 12 samples of 300 s are 1 GPU-hour, where the
    node log allocated 0.4."""
    period = PeriodData(
        Period(START, START + timedelta(days=1)),
        nodes_at_start=[SchedulerNode("n1", "pool-a", 8, 0, "idle")],
        allocation=Allocation(allocated_gpu_seconds={"pool-a": 0.4 * 3600}),
        usage=GpuUsageCounts(usage=(("n1", "research", "batch", 12, 600, 6),)),
    )
    used = usage(period, replace(context(), gpu_sample_seconds=300.0))
    assert [(r.tenant, r.allocated_hours) for r in used.rows] == [("research", 1.0)]
    [note] = used.pool_notes
    said = Words("en", UTC).note(note)
    assert said.startswith("In pool pool-a the samples attribute 1.0 GPU-hours")
    assert "more than the 0.4 the scheduler reported allocated" in said
