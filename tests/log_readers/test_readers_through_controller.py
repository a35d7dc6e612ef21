"""Each log reader the controller can be configured with, end to end through the
composition: a log-canary probe runs on the simulated cluster, its output goes into a log
pipeline as a node would send it, the controller reads it back with the reader
`controller.logs` selects, and a deliberate loss is a `log_loss` finding.

- files: the real rsyslog pipeline (logs-up.sh), its shipper stopped while lines are written
  and the file rotated (copytruncate) before it resumes: those lines never arrive. In real
  time, and reported in the daily summary.
- Loki and Elasticsearch: the stand-ins of stand_ins.py, fed through their ingest APIs (push,
  _doc) by a shipper that is down for a while and drops what it reads meanwhile."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path
from typing import Any

import httpx
import pytest

from observer.backends.simulated import SimulatedCluster
from observer.clock import Clock, ManualClock, SystemClock
from observer.controller.compose import Task, build_backend
from observer.domain import Finding, ProbeRun, RunState
from observer.reports.publish import write_daily
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.log_readers.conftest import Serve
from tests.log_readers.rsyslog import Pipeline
from tests.log_readers.stand_ins import FakeLoki, FakeSearch, iso, ns
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

pytestmark = pytest.mark.rsyslog

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
LAUNCH = START + timedelta(seconds=600)  # the plan entry's first firing
SETTLE_SECONDS = 60


class CanaryOutput:
    """The node's side of the pipeline, as a world task: each step, the lines every log
    canary wrote since the last step, handed to `ship` (a shipper's send). While `down`, what
    it reads is dropped and kept in `dropped`, as a shipper that loses its buffer."""

    def __init__(
        self, cluster: SimulatedCluster, store: Store, ship: Callable[[list[str]], None]
    ) -> None:
        self._cluster, self._store, self._ship = cluster, store, ship
        self._sent: dict[str, int] = {}  # job id -> lines read
        self.down = False
        self.dropped: list[str] = []

    def __call__(self) -> None:
        for run in self._store.runs(probe="log-canary"):
            if run.job_id is None:
                continue
            lines = self._cluster.logs(run.job_id).splitlines()
            new = lines[self._sent.get(run.job_id, 0) :]
            self._sent[run.job_id] = len(lines)
            if not new:
                continue
            if self.down:
                self.dropped += new
            else:
                self._ship(new)


def settings(
    logs: dict[str, Any], reports: dict[str, Any] | None = None, **controller: Any
) -> Settings:
    """One tenant, one log canary at a time, every 10 minutes (30 s of lines, 2 min of job)."""
    canary: dict[str, Any] = {
        "tenants": [{"name": "research"}],
        "plan": [{"window": "always", "probe": "log-canary", "every_seconds": 600}],
        "probes": {"log-canary": {"log_lines": 300, "log_interval_seconds": 0.1}},
        "logs": {"settle_seconds": SETTLE_SECONDS, **logs},
        "max_probe_gpus": 1,
        "max_probe_gpus_per_tenant": 1,
        "gpus_per_node": 4,
        "simulation": {"nodes": 1, "gpus_per_node": 4, "pools": ["a"]},
    }
    return controller_settings(reports, **(canary | controller))


class Soak:
    """The controller's composition over a simulated cluster and a store, with the canary's
    output going to the pipeline `ship` sends to."""

    def __init__(
        self, tmp_path: Path, cfg: Settings, clock: Clock, ship: Callable[[list[str]], None]
    ) -> None:
        url = migrated_sqlite(tmp_path / "observer.db")
        self.store = Store(url)
        self.settings = cfg
        self.clock = clock
        cluster = build_backend(cfg.controller, clock)
        assert isinstance(cluster, SimulatedCluster)
        self.output = CanaryOutput(cluster, self.store, ship)
        self.soak = SimulatedSoak(
            cfg, clock, self.store, cluster, world=[Task("canary-output", 0.05, self.output)]
        )

    def canary(self) -> ProbeRun | None:
        return next(iter(self.store.runs(probe="log-canary")), None)

    def run_until(self, done: Callable[[], object], seconds: float, step: Any = None) -> None:
        """Step the soak until `done()` is true; fails after `seconds` of its clock."""
        end = self.clock.monotonic() + seconds
        while not done():
            assert self.clock.monotonic() < end, "the soak never got there"
            self.soak.run_for(self.settings.controller.follow_interval_seconds, step)

    def log_loss(self) -> list[Finding]:
        return self.store.findings(detector="log_loss")


def shipper_down_for(soak: Soak, down: timedelta) -> None:
    """On the manual clock: the shipper goes down 10 s into the canary's lines, for `down`."""
    soak.run_until(lambda: soak.clock.now() >= LAUNCH + timedelta(seconds=10), 700)
    canary = soak.canary()
    assert canary is not None and canary.state is RunState.RUNNING
    soak.output.down = True
    soak.soak.run_for(down.total_seconds())
    soak.output.down = False


def checked_loss(soak: Soak, lost_lines: list[str]) -> Finding:
    """The canary's log_loss finding once the controller read it back, and that it counts
    exactly the lines the pipeline lost."""
    soak.run_until(soak.log_loss, SETTLE_SECONDS + 300, soak_step(soak.clock))
    (finding,) = soak.log_loss()
    canary = soak.canary()
    assert canary is not None and canary.state is RunState.DONE
    assert finding.subject["run_id"] == canary.run_id
    lost = sorted(seq_of(line) for line in lost_lines)
    assert lost and lost == list(range(lost[0], lost[-1] + 1))
    assert finding.evidence["missing_lines"] == len(lost)
    (missing,) = finding.evidence["missing_ranges"]
    assert (missing["first_seq"], missing["last_seq"]) == (lost[0], lost[-1])
    return finding


def seq_of(line: str) -> int:
    return int(line.split(" seq=")[1].split(maxsplit=1)[0])


def soak_step(clock: Clock) -> Callable[[], object] | None:
    """A manual clock moves one second a step; a real one is waited on."""
    if isinstance(clock, ManualClock):
        return None
    return lambda: time.sleep(0.05)


# --- Loki ----------------------------------------------------------------------------------


def loki_push(client: httpx.Client, clock: Clock, tenant: str) -> Callable[[list[str]], None]:
    """A shipper's push of the lines it read, each stamped when read (1 ns apart)."""

    def ship(lines: list[str]) -> None:
        at = ns(clock.now())
        stream = {"namespace": "research", "container": "probe", "pod": "probe-1"}
        body = {
            "streams": [
                {"stream": stream, "values": [[str(at + i), line] for i, line in enumerate(lines)]}
            ]
        }
        response = client.post("/loki/api/v1/push", json=body, headers={"X-Scope-OrgID": tenant})
        assert response.status_code == 204

    return ship


def test_loki_through_the_controller_finds_lines_the_shipper_dropped(
    tmp_path: Path, serve: Serve, monkeypatch: Any
) -> None:
    loki = serve(FakeLoki())
    clock = ManualClock(START)
    monkeypatch.setenv("OBSERVER_TEST_LOKI_TOKEN", "s3cret")
    cfg = settings(
        {
            "reader": "loki",
            "loki": {
                "url": loki.url,
                "selector": FakeLoki.SELECTOR,
                "tenant": "soak",
                "page_limit": 100,  # the run's 300 lines over several pages
                "auth": {"bearer_token": {"env": "OBSERVER_TEST_LOKI_TOKEN"}},
            },
        }
    )
    with httpx.Client(base_url=loki.url) as client:
        soak = Soak(tmp_path, cfg, clock, loki_push(client, clock, "soak"))
        shipper_down_for(soak, timedelta(seconds=5))
        finding = checked_loss(soak, soak.output.dropped)

    assert finding.subject["pipeline"] == f"loki:{loki.url}"
    assert f"via loki:{loki.url}" in finding.summary
    queries = [r for r in loki.requests if r.path == "/loki/api/v1/query_range"]
    assert len(queries) >= 3  # paged
    assert all(r.headers["x-scope-orgid"] == "soak" for r in queries)
    assert all(r.headers["authorization"] == "Bearer s3cret" for r in queries)


# --- Elasticsearch -------------------------------------------------------------------------


def es_index(client: httpx.Client, index: str, clock: Clock) -> Callable[[list[str]], None]:
    """A shipper indexing each line it read, stamped when read (1 ms apart)."""

    def ship(lines: list[str]) -> None:
        for i, line in enumerate(lines):
            at = clock.now() + timedelta(milliseconds=i)
            response = client.post(f"/{index}/_doc", json={"message": line, "@timestamp": iso(at)})
            assert response.status_code == 201

    return ship


def test_elasticsearch_through_the_controller_finds_lines_the_shipper_dropped(
    tmp_path: Path, serve: Serve
) -> None:
    clock = ManualClock(START)
    search = FakeSearch("logs-probes", ingested=clock.now)
    server = serve(search)
    password = tmp_path / "es-password"
    password.write_text("hunter2\n")  # as a mounted Secret's key
    cfg = settings(
        {
            "reader": "elasticsearch",
            "elasticsearch": {
                "url": server.url,
                "index": "logs-probes",
                "delivered_field": "event.ingested",
                "page_size": 50,
                "auth": {"username": "observer", "password": {"file": str(password)}},
            },
        }
    )
    with httpx.Client(base_url=server.url) as client:
        soak = Soak(tmp_path, cfg, clock, es_index(client, "logs-probes", clock))
        shipper_down_for(soak, timedelta(seconds=5))
        finding = checked_loss(soak, soak.output.dropped)

    assert finding.subject["pipeline"] == f"elasticsearch:{server.url}/logs-probes"
    searches = [r for r in server.requests if r.path.endswith("/_search")]
    assert len(searches) >= 5 and "search_after" in searches[-1].body  # paged
    # basic auth of observer:hunter2, the file's trailing newline not part of it
    assert all(r.headers["authorization"] == "Basic b2JzZXJ2ZXI6aHVudGVyMg==" for r in searches)


# --- files at the end of the real rsyslog pipeline -----------------------------------------


class AppLog:
    """The node's log file: every line appended to app.log as the container runtime writes
    a job's output; those appended while the shipper is stopped are kept in `lost`."""

    def __init__(self, pipeline: Pipeline) -> None:
        self._pipeline = pipeline
        self.stopped = False
        self.written = 0
        self.lost: list[str] = []

    def ship(self, lines: list[str]) -> None:
        self._pipeline.append(lines)
        self.written += len(lines)
        if self.stopped:
            self.lost += lines


def test_files_through_the_controller_find_a_stalled_shippers_loss_and_report_it(
    tmp_path: Path, pipeline: Pipeline
) -> None:
    pipeline.start_empty()
    clock = SystemClock()
    cfg = settings(
        {
            "reader": "files",
            "settle_seconds": 2,
            "files": {
                "pattern": str(pipeline.dir / "collected.log"),
                "delivery_time": "leading_timestamp",
            },
        },
        plan=[{"window": "always", "probe": "log-canary", "every_seconds": 1}],
        probes={
            "log-canary": {"log_lines": 200, "log_interval_seconds": 0.02, "duration_seconds": 5}
        },
        reports={"output_dir": str(tmp_path / "reports")},
        follow_interval_seconds=0.2,
        snapshot_interval_seconds=1,
    )
    app_log = AppLog(pipeline)
    soak = Soak(tmp_path, cfg, clock, app_log.ship)
    step = soak_step(clock)

    # 100 lines shipped and collected; the shipper stopped while the next are written
    soak.run_until(lambda: app_log.written >= 100, 30, step)
    canary = soak.canary()
    assert canary is not None and canary.state is RunState.RUNNING
    since = datetime.now(UTC) - timedelta(minutes=1)
    assert len(pipeline.wait_collected(canary.run_id, since, app_log.written)) == app_log.written
    pipeline.stop_shipper()
    app_log.stopped = True
    soak.soak.run_for(1.0, step)
    assert app_log.lost  # written while it was stopped, then rotated away (copytruncate)
    pipeline.rotate()
    app_log.stopped = False
    pipeline.resume_shipper()
    # the first line after the truncation lets imfile see it (test_files_rsyslog.py)
    shipped = app_log.written - len(app_log.lost)
    soak.run_until(lambda: app_log.written > shipped + len(app_log.lost), 30, step)
    pipeline.wait_collected(canary.run_id, since, shipped + 1)
    finding = checked_loss(soak, app_log.lost)

    assert finding.subject["pipeline"] == f"files:{pipeline.dir / 'collected.log'}"
    # the day's summary, as the controller builds it once the day is over
    day = finding.opened_at.date()
    over = datetime.combine(day + timedelta(days=1), dt_time(0), UTC)
    markdown, _, as_json = write_daily(soak.store, soak.settings, day, over)
    assert finding.summary in markdown.read_text()
    (item,) = (
        i
        for i in json.loads(as_json.read_text())["findings"]["items"]
        if i["detector"] == "log_loss"
    )
    assert item["evidence"]["missing_lines"] == len(app_log.lost)
