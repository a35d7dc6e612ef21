"""The isolation probe in the controller's plan: each tenant's credentials against every other
tenant's work, one run per tenant, stored done at once: PASSED when every read was refused,
FAILED with the breaches named (a must-fix) when any got through. It holds no GPUs, so the
budget never stops it, and it is counted like every other run."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from observer.backends.kubernetes.backend import KubernetesBackend
from observer.backends.slurm.backend import SlurmBackend
from observer.clock import SystemClock
from observer.controller.compose import build_controller
from observer.controller.runs import isolation_message
from observer.controller.work import Controller
from observer.domain import AccessAttempt, Expectation, Outcome, ProbeRun, RunState
from observer.metrics import ControllerMetrics
from observer.records import SkipReason
from observer.storage.store import Store
from tests.backends.k8s_harness import KubernetesHarness
from tests.backends.slurm_harness import SlurmHarness, slurm_harness
from tests.controller.test_controller_simulated import Soak, _settings
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

ISOLATION = {"window": "weekday-peak", "probe": "isolation", "every_seconds": 1200}
READS = ["list jobs", "list pods", "read pod log", "list secrets", "read secret"]


def _isolation_soak(tmp_path: Path, **controller: object) -> Soak:
    return Soak(tmp_path, _settings(plan=[ISOLATION], **controller))


def _ran(soak: Soak) -> list[ProbeRun]:
    return [r for r in soak.store.runs() if r.probe == "isolation"]


def test_a_compliant_platform_passes_every_tenants_isolation_run(tmp_path: Path):
    soak = _isolation_soak(tmp_path)
    soak.run(5 * 60 + 60 * 60)  # the hour-long window: launches 15, 35 and 55 minutes in

    runs = _ran(soak)
    assert sorted(r.tenant for r in runs) == ["prod"] * 3 + ["research"] * 3
    for run in runs:
        assert (run.state, run.outcome, run.reason) == (RunState.DONE, Outcome.PASSED, None)
        assert run.expectation is Expectation.DENIED
        assert (run.gpus, run.job_id, run.queue_wait_seconds) == (0, None, None)
        assert run.window == "weekday-peak"
    research = next(r for r in runs if r.tenant == "research")
    assert research.message is not None
    assert research.message.startswith(
        "denied: list jobs in prod, list pods in prod, read pod log in prod/"
    )
    assert "allowed" not in research.message.split(". Answers:")[0]
    assert (
        'cannot list resource "secrets" in API group "" in the namespace "prod"' in research.message
    )
    passed = soak.metrics.probe_runs_total.labels("isolation", "research", "weekday-peak", "passed")
    assert passed._value.get() == 3
    assert soak.controller.runner.active() == ()


def test_a_broken_platform_fails_the_run_naming_every_breach(tmp_path: Path):
    soak = _isolation_soak(tmp_path)
    soak.cluster.faults.isolation_broken = True
    soak.run(20 * 60 + 60)  # the first launch, 20 minutes after the controller started

    runs = _ran(soak)
    assert {r.tenant for r in runs} == {"research", "prod"}
    assert {(r.outcome, r.reason) for r in runs} == {(Outcome.FAILED, "IsolationBreach")}
    prod = next(r for r in runs if r.tenant == "prod")
    summary = (prod.message or "").split(". Answers:")[0]
    assert summary.startswith("allowed: list jobs in research, list pods in research, ")
    assert "read secret in research/" in summary and "denied" not in summary
    failed = soak.metrics.probe_runs_total.labels("isolation", "prod", "weekday-peak", "failed")
    assert failed._value.get() == 1


def test_every_other_tenant_is_tried_and_the_gpu_budget_does_not_apply(tmp_path: Path):
    tenants = [{"name": "research"}, {"name": "prod"}, {"name": "vision"}]
    soak = _isolation_soak(tmp_path, tenants=tenants, max_probe_gpus=1, max_probe_gpus_per_tenant=1)
    soak.run(20 * 60 + 60)

    runs = {r.tenant: r for r in _ran(soak)}
    assert set(runs) == {"research", "prod", "vision"}
    message = runs["vision"].message or ""
    for other in ("research", "prod"):
        for read in READS:
            assert f"{read} in {other}" in message.split(". Answers:")[0]
    assert "in vision" not in message
    skipped = soak.metrics.probe_runs_skipped_total.labels("isolation", "budget")._value.get()
    assert skipped == 0


def test_an_unreachable_platform_records_no_verdict_and_counts_the_error(tmp_path: Path):
    soak = _isolation_soak(tmp_path)
    soak.run(5 * 60 - 1)
    soak.cluster.faults.reachable = False
    entry = soak.controller.plan[0]
    soak.clock.advance(2)

    assert soak.controller.launch(entry) == []
    assert _ran(soak) == []
    assert soak.metrics.scheduler_errors_total.labels("probe_isolation")._value.get() == 2
    skipped = soak.metrics.probe_runs_skipped_total.labels("isolation", "backend_error")
    assert skipped._value.get() == 2
    now = soak.clock.now()
    stored = soak.store.probe_skips(now - timedelta(hours=1), now + timedelta(seconds=1))
    assert sorted((s.tenant, s.reason) for s in stored) == [
        ("prod", SkipReason.BACKEND_ERROR),
        ("research", SkipReason.BACKEND_ERROR),
    ]


def test_a_tenant_whose_credentials_are_missing_is_rejected_with_the_reason(tmp_path: Path):
    # On Kubernetes: prod has a token, research has none configured.
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    with KubernetesHarness() as k8s:
        settings = controller_settings(
            backend="kubernetes",
            tenants=[{"name": "research"}, {"name": "prod"}],
            plan=[{"window": "always", "probe": "isolation", "every_seconds": 60}],
        )
        only_prod = {"prod": k8s.settings.tenant_token_files["prod"]}
        backend = KubernetesBackend(
            k8s.settings.model_copy(update={"tenant_token_files": only_prod}), k8s.clock
        )
        metrics = ControllerMetrics(CollectorRegistry())
        controller = build_controller(settings, backend, store, k8s.clock, metrics)
        k8s.grant_cross_namespace("prod", "research", ("secrets",))

        runs = {r.tenant: r for r in controller.launch(controller.plan[0])}
        backend.close()

    assert (runs["research"].outcome, runs["research"].reason) == (
        Outcome.REJECTED,
        "ProbeNotRunnable",
    )
    assert "no token of tenant research" in (runs["research"].message or "")
    prod = runs["prod"]
    assert (prod.outcome, prod.reason) == (Outcome.FAILED, "IsolationBreach")
    assert (prod.message or "").startswith(
        "allowed: list secrets in research, read secret in research/"
    )
    assert {r.run_id for r in store.runs()} == {r.run_id for r in runs.values()}
    store.close()


def test_the_message_puts_breaches_first_and_keeps_the_platforms_words():
    attempts = [
        AccessAttempt("list jobs", "prod", False, 'jobs.batch is forbidden: User "x"'),
        AccessAttempt("list pods", "prod", True, "listed 2 pods"),
        AccessAttempt("read secret", "prod/db", False, 'secrets "db" is   forbidden\n' * 40),
    ]

    message = isolation_message(attempts)

    summary, answers = message.split(". Answers: ")
    assert (
        summary == "allowed: list pods in prod; denied: list jobs in prod, read secret in prod/db"
    )
    parts = answers.split(" | ")
    assert parts[0] == "list pods in prod: listed 2 pods"
    assert parts[1] == 'list jobs in prod: jobs.batch is forbidden: User "x"'
    assert parts[2].startswith('read secret in prod/db: secrets "db" is forbidden secrets')
    assert len(parts[2]) < 350 and parts[2].endswith("…")


def _slurm_controller(slurm: SlurmHarness, store: Store) -> Controller:
    settings = controller_settings(
        backend="slurm",
        tenants=[{"name": "research", "queue": "gpu"}, {"name": "prod", "queue": "gpu"}],
        plan=[{"window": "always", "probe": "isolation", "every_seconds": 60}],
    )
    backend = SlurmBackend(
        slurm.settings.model_copy(update={"tenant_users": {"research": "alice", "prod": "bob"}}),
        SystemClock(),
    )
    metrics = ControllerMetrics(CollectorRegistry())
    return build_controller(settings, backend, store, SystemClock(), metrics)


@pytest.mark.slurm
def test_on_real_slurm_visible_jobs_fail_the_run_and_private_data_passes_it(tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    with slurm_harness() as slurm:
        controller = _slurm_controller(slurm, store)
        entry = controller.plan[0]
        leaky = {r.tenant: r for r in controller.launch(entry)}
        with slurm.private_data("jobs"):
            private = {r.tenant: r for r in controller.launch(entry)}
    store.close()

    assert {(r.outcome, r.reason) for r in leaky.values()} == {(Outcome.FAILED, "IsolationBreach")}
    assert (leaky["research"].message or "").startswith(
        "allowed: list jobs with squeue in prod, show job with scontrol in prod/"
    )
    assert {(r.outcome, r.reason) for r in private.values()} == {(Outcome.PASSED, None)}
    assert "slurm_load_jobs error: Invalid job id specified" in (private["prod"].message or "")
