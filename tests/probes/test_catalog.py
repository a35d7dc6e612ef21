"""The probe catalog and the per-probe changes a configuration may make to it."""

import pytest

from observer.domain import Behaviour, Expectation
from observer.probes.catalog import builtin_catalog, quota_probe, with_overrides


def test_multi_gpu_probes_scale_with_the_node_size():
    catalog = builtin_catalog(gpus_per_node=4)
    assert catalog["multi-gpu"].workload.gpus == 4
    assert catalog["multi-node"].workload.gpus == 8
    assert catalog["multi-node"].workload.nodes == 2


def test_the_quota_probe_asks_one_gpu_beyond_the_quota():
    spec = quota_probe(quota_gpus=6, gpus_per_node=4)
    assert spec.workload.gpus >= 7
    assert spec.workload.gpus_per_node <= 4
    assert spec.expectation is Expectation.BLOCKED


def test_overrides_change_only_what_they_name():
    catalog = builtin_catalog(gpus_per_node=8)
    changed = with_overrides(catalog, {"short": {"duration_seconds": 2, "copies": 3}})
    assert changed["short"].workload.duration_seconds == 2
    assert changed["short"].copies == 3
    assert changed["short"].workload.gpus == catalog["short"].workload.gpus
    assert changed["long"] == catalog["long"]


def test_an_override_for_an_unknown_probe_is_refused():
    with pytest.raises(KeyError, match="shrot"):
        with_overrides(builtin_catalog(8), {"shrot": {"duration_seconds": 2}})


def test_the_log_burst_is_a_canary_of_padded_lines_written_without_pause():
    burst = builtin_catalog(gpus_per_node=8)["log-burst"].workload
    assert burst.behaviour is Behaviour.LOG_CANARY  # read back and checked as every canary
    assert (burst.log_line_bytes, burst.log_interval_seconds) == (1024, 0)
    assert burst.log_lines * burst.log_line_bytes > 10 * 2**20  # kubelet's default rotation


def test_the_canary_line_size_can_be_changed():
    changed = with_overrides(builtin_catalog(8), {"log-burst": {"log_line_bytes": 4096}})
    assert changed["log-burst"].workload.log_line_bytes == 4096
