"""A probe Kueue holds for quota, followed by the controller over the Kubernetes emulator: the
run's pending reason and message are Kueue's, naming the LocalQueue and ClusterQueue; once
the quota frees, it runs and passes."""

from __future__ import annotations

from pathlib import Path

from observer.domain import Outcome, RunState
from observer.settings import Settings
from observer.simulation.soak import SimulatedSoak
from observer.storage.store import Store
from tests.backends.k8s_harness import KubernetesHarness
from tests.support.databases import migrated_sqlite
from tests.support.settings import controller_settings

QUEUE = "team-a"


def _settings() -> Settings:
    return controller_settings(
        backend="kubernetes",
        tenants=[{"name": "research", "weight": 1.0, "queue": QUEUE}],
        plan=[{"window": "always", "probe": "short", "every_seconds": 2}],
        probes={"short": {"duration_seconds": 6}},
        gpus_per_node=4,
        follow_interval_seconds=1,
        snapshot_interval_seconds=5,
    )


def test_a_probe_kueue_holds_for_quota_waits_in_kueues_words_then_runs(tmp_path: Path):
    url = migrated_sqlite(tmp_path / "observer.db")
    store = Store(url)
    with KubernetesHarness() as k8s:
        k8s.install_queues()
        k8s.play_kueue("gpu-pool", gpus=1)  # one short probe at a time
        soak = SimulatedSoak(_settings(), k8s.clock, store, k8s.backend)
        held_words: set[str] = set()

        def step() -> None:
            k8s.step()
            held_words.update(
                run.message or ""
                for run in soak.controller.runner.active()
                if run.reason == "QuotaReserved=False: Pending"
            )

        soak.run_for(12, step)
        deadline = k8s.clock.monotonic() + 120
        while soak.controller.runner.active() and k8s.clock.monotonic() < deadline:
            soak.controller.follow()
            step()

    runs = store.runs()
    store.close()
    held = [run for run in runs if "QuotaReserved=False: Pending" in run.pending_reasons]
    assert held, [run.pending_reasons for run in runs]
    assert all(run.state is RunState.DONE and run.outcome is Outcome.PASSED for run in runs)
    assert held_words
    for words in held_words:
        assert words.startswith(
            f"LocalQueue research/{QUEUE} (ClusterQueue gpu-pool: 1 of 1 nvidia.com/gpu nominal "
            "in use, borrowing limit 0, "
        )
        assert "insufficient unused quota for nvidia.com/gpu" in words
