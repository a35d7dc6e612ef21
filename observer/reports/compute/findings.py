"""A finding's sentence as Notes, from its detector, subject and evidence: what the stored
English `summary` says, in words the report's language chooses. The first Note is the
sentence; any more are its details (what was seen, each its own clause). None: a finding
whose evidence lacks what its sentence needs (stored by an older observer), which the
reports show by its stored summary, quoted."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from observer.detectors import (
    fairness,
    gpu_health,
    gpu_in_service,
    gpu_unusable,
    inference,
    monitoring_lag,
    node_leaks,
    probe_release,
    quota_reclaim,
    unexplained_wait,
    unreleased,
)
from observer.domain import JsonValue
from observer.reports.compute.notes import Note

Evidence = Mapping[str, JsonValue]
Subject = Mapping[str, str]
Sentence = tuple[Note, ...]


def describe(detector: str, subject: Subject, evidence: Evidence) -> Sentence | None:
    words = _BY_DETECTOR.get(detector)
    if words is None:
        return None
    try:
        return words(subject, evidence)
    except (KeyError, TypeError, IndexError):
        return None


def _note(key: str, **params: JsonValue) -> Note:
    """A finding's Note; `key` is whole (finding.*), so that extraction sees it."""
    return Note(key, params)


def _memory(n: JsonValue) -> str:
    if not isinstance(n, int):
        return "?"
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _names(values: JsonValue) -> JsonValue:
    """A list of the evidence's as names (rendering lists them); anything else as it is."""
    return [str(v) for v in values] if isinstance(values, list) else str(values)


def _owner(e: Evidence) -> str:
    return str(e.get("owner_name") or e["owner"])


def _program(e: Evidence) -> str:
    return str(e.get("command") or e.get("executable") or "?")


def _gpu(e: Evidence) -> str:
    return str(e["gpu_index"])


# --- the node agent's findings ----------------------------------------------------------


def _nvml_unavailable(s: Subject, e: Evidence) -> Sentence:
    return (_note("finding.nvml_unavailable", node=s["node"]),)


def _gpu_lost(s: Subject, e: Evidence) -> Sentence:
    return (_note("finding.gpu_lost", node=s["node"], gpu=s["gpu"]),)


def _memory_without_process(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.memory_without_process",
            node=s["node"],
            gpu=_gpu(e),
            memory=_memory(e["excess_bytes"]),
        ),
    )


def _owner_state_unknown(s: Subject, e: Evidence) -> Sentence:
    return (_note("finding.owner_state_unknown", node=s["node"], source=str(e["source"])),)


def _allocated_idle(s: Subject, e: Evidence) -> Sentence:
    if "pid" not in s:
        return (
            _note(
                "finding.allocated_idle.assigned",
                owner=str(e["owner"]),
                gpu=_gpu(e),
                node=s["node"],
            ),
        )
    return (
        _note(
            "finding.allocated_idle.process",
            owner=_owner(e),
            memory=_memory(e["used_memory_bytes"]),
            gpu=_gpu(e),
        ),
    )


def _vanished_process(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.vanished_process",
            pid=str(e["pid"]),
            gpu=_gpu(e),
            memory=_memory(e["used_memory_bytes"]),
        ),
    )


def _orphan_process(s: Subject, e: Evidence) -> Sentence:
    # The allocation layer knew the GPU and named nobody: assigned to no one.
    form = (
        "finding.orphan_process.unassigned"
        if e.get("gpu_assigned_to") == []
        else "finding.orphan_process"
    )
    return (
        _note(
            form,
            pid=str(e["pid"]),
            program_words=_program(e),
            gpu=_gpu(e),
            memory=_memory(e["used_memory_bytes"]),
        ),
    )


def _unreleased_memory(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.unreleased_memory",
            pid=str(e["pid"]),
            memory=_memory(e["used_memory_bytes"]),
            gpu=_gpu(e),
            owner=_owner(e),
        ),
    )


def _gpu_not_assigned(s: Subject, e: Evidence) -> Sentence:
    holders = e.get("gpu_assigned_to")
    params: dict[str, JsonValue] = {
        "owner": _owner(e),
        "pid": str(e["pid"]),
        "program_words": _program(e),
        "gpu": _gpu(e),
        "source": str(e["source"]),
    }
    if holders:
        return (_note("finding.gpu_not_assigned.given_other", holders=_names(holders), **params),)
    return (_note("finding.gpu_not_assigned", **params),)


# --- GPU health ---------------------------------------------------------------------------


def _gpu_health(key: str) -> Callable[[Subject, Evidence], Sentence]:
    def words(s: Subject, e: Evidence) -> Sentence:
        return (_note(f"finding.{key}", gpu=_gpu(e), node=s["node"]),)

    return words


def _ecc(s: Subject, e: Evidence) -> Sentence:
    return (
        _note("finding.gpu_ecc_uncorrected", gpu=_gpu(e), node=s["node"], errors=e["new_errors"]),
    )


def _slowdown(s: Subject, e: Evidence) -> Sentence:
    params: dict[str, JsonValue] = {
        "gpu": _gpu(e),
        "node": s["node"],
        "reasons": _names(e["reasons"]),
    }
    if e["owners"]:
        return (_note("finding.gpu_clock_slowdown", owners=_names(e["owners"]), **params),)
    return (_note("finding.gpu_clock_slowdown.unowned", **params),)


def _pcie(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.gpu_pcie_replay_rate",
            gpu=_gpu(e),
            node=s["node"],
            per_minute=float(e["replays_per_minute"]),
        ),
    )


def _nvlink(s: Subject, e: Evidence) -> Sentence:
    seen = []
    if e["recovery_errors"]:
        seen.append(_note("finding.gpu_nvlink_errors.recovery", errors=e["recovery_errors"]))
    rate, limit = e["replay_and_crc_errors_per_minute"], e["replay_and_crc_errors_per_minute_max"]
    if isinstance(rate, int | float) and isinstance(limit, int | float) and rate > limit:
        seen.append(_note("finding.gpu_nvlink_errors.rate", per_minute=float(rate)))
    return (_note("finding.gpu_nvlink_errors", gpu=_gpu(e), node=s["node"]), *seen)


def _xid(s: Subject, e: Evidence) -> Sentence:
    gpu = e.get("gpu_index")
    form = "finding.gpu_xid.fatal" if e["fatal"] else "finding.gpu_xid"
    head = _note(
        form,
        xid=s["xid"],
        gpu="?" if gpu is None else str(gpu),
        pci_bus_id=s["pci_bus_id"],
        node=s["node"],
        xid_meaning=s["xid"],
        xid_class_id=str(e["xid_class"]),
    )
    if e.get("pid") is not None:
        owner = e.get("owner_name") or e.get("owner")
        process = {"pid": str(e["pid"]), "program_words": str(e.get("process_name") or "?")}
        if owner:
            return (head, _note("finding.gpu_xid.process", owner=str(owner), **process))
        return (head, _note("finding.gpu_xid.process_unowned", **process))
    if e.get("gpu_owners"):
        return (head, _note("finding.gpu_xid.running", owners=_names(e["gpu_owners"])))
    return (head,)


def _in_service(s: Subject, e: Evidence) -> Sentence:
    fault = e["fault"]
    assert isinstance(fault, Mapping)
    jobs = e["jobs_placed_since"]
    return (
        _note(
            "finding.unhealthy_gpu_in_service",
            node=s["node"],
            state_words=str(e["node_state"]),
            fault_age_seconds=e["fault_age_seconds"],
            fault=str(fault["detector"]),
            jobs=len(jobs) if isinstance(jobs, list) else 0,
        ),
    )


# --- the controller's findings ------------------------------------------------------------


def _gpu_unusable(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.gpu_unusable", node=s["node"], probe=str(e["probe"]), job_id=str(e["job_id"])
        ),
    )


def _allocated_without_job(s: Subject, e: Evidence) -> Sentence:
    held = e["gpus_of_jobs"]  # a job over several nodes holds a share of its GPUs on each
    whole = isinstance(held, float) and held.is_integer()
    return (
        _note(
            "finding.allocated_without_job",
            node=s["node"],
            allocated=e["gpus_allocated"],
            held=int(held) if whole else held,
        ),
    )


def _kill_task_failed(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.kill_task_failed",
            node=s["node"],
            state_words=str(e["node_state"]),
            reason_words=str(e["reason"]),
        ),
    )


def _stuck(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.stuck_terminating",
            job_id=s["job_id"],
            tenant=s["tenant"],
            gpus=e["gpus"],
            node=s["node"],
            grace_seconds=e["grace_seconds"],
        ),
    )


def _probe_unreleased(s: Subject, e: Evidence) -> Sentence:
    gpus = e["gpus"]
    return (
        _note(
            "finding.probe_unreleased",
            probe=str(e["probe"]),
            tenant=s["tenant"],
            job_id=str(e["job_id"]),
            gpus=len(gpus) if isinstance(gpus, list) else 0,
            node=s["node"],
            grace_seconds=e["grace_seconds"],
        ),
    )


def _unexplained_wait(s: Subject, e: Evidence) -> Sentence:
    who = {"job": s["run_id"], "tenant": s["tenant"]}
    if e["kind"] == "no_reason":
        return (_note("finding.unexplained_wait.no_reason", **who),)
    if "free_nodes" in e:
        free = e["free_nodes"]
        return (
            _note(
                "finding.unexplained_wait.gpus_free",
                reason_words=str(e["reason"]),
                nodes=len(free) if isinstance(free, list) else 0,
                gpus=e["gpus_per_node"],
                **who,
            ),
        )
    if "quota_gpus" in e:
        return (
            _note(
                "finding.unexplained_wait.quota_left",
                reason_words=str(e["reason"]),
                held=e["tenant_running_gpus"],
                quota=e["quota_gpus"],
                **who,
            ),
        )
    return (_note("finding.unexplained_wait.nothing_ahead", reason_words=str(e["reason"]), **who),)


def _quota_not_reclaimed(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.quota_not_reclaimed",
            tenant=s["tenant"],
            job=s["run_id"],
            reason_words=str(e["pending_reason"]),
            waited_seconds=e["waited_seconds"],
            usage=e["tenant_usage_gpus"],
            quota=e["quota_gpus"],
        ),
    )


def _inference_unavailable(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.inference_unavailable",
            service=s["service"],
            tenant=s["tenant"],
            ready=e["ready_replicas"],
            errors=e["errors"],
            requests=e["requests"],
        ),
    )


def _scale_out_stalled(s: Subject, e: Evidence) -> Sentence:
    head = _note(
        "finding.inference_scale_out_stalled",
        service=s["service"],
        tenant=s["tenant"],
        replicas=e["scale_out_to"],
        ready=e["ready_replicas"],
    )
    reason = e["pending_reason"]
    if reason is None:
        return (head,)
    return (head, _note("finding.inference_pending", reason_words=str(reason)))


def _unfairness(s: Subject, e: Evidence) -> Sentence:
    return (
        _note(
            "finding.persistent_unfairness",
            tenant=s["tenant"],
            bad=e["disadvantaged_occurrences"],
            weighed=e["occurrences_weighed"],
            windows=_names(e["windows"]),
        ),
    )


def _seq(first: JsonValue, last: JsonValue) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _log_loss(s: Subject, e: Evidence) -> Sentence:
    seen = []
    if e["missing_lines"]:
        ranges = e["missing_ranges"]
        assert isinstance(ranges, list)
        shown = [_seq(r["first_seq"], r["last_seq"]) for r in ranges[:3] if isinstance(r, dict)]
        more = int(e["missing_range_count"]) - len(shown)
        form = "finding.log_loss.missing.more" if more > 0 else "finding.log_loss.missing"
        seen.append(
            _note(
                form,
                lines=e["missing_lines"],
                expected=e["expected_lines"],
                seqs=", ".join(shown),
                more=more,
            )
        )
    counts = (
        ("duplicated", e["duplicate_deliveries"]),
        ("out_of_order", e["out_of_order_lines"]),
        ("torn", e["malformed_lines"]),
    )
    seen += [_note(f"finding.log_loss.{form}", lines=n) for form, n in counts if n]
    unexpected = e["unexpected_seq_ranges"]
    if unexpected:
        seen.append(
            _note("finding.log_loss.unexpected", seqs=_names([_seq(*r) for r in unexpected]))
        )
    return (_note("finding.log_loss", run_id=s["run_id"], pipeline=s["pipeline"]), *seen)


def _log_latency(s: Subject, e: Evidence) -> Sentence:
    latency = e["latency_seconds"]
    assert isinstance(latency, Mapping)
    return (
        _note(
            "finding.log_delivery_latency",
            run_id=s["run_id"],
            pipeline=s["pipeline"],
            p95_seconds=latency["p95"],
            limit_seconds=e["p95_max_seconds"],
        ),
    )


def _monitoring_lag(s: Subject, e: Evidence) -> Sentence:
    check = s["check"]
    if check == monitoring_lag.HEARTBEAT:
        if "lag_seconds" not in e:
            return (_note("finding.monitoring_lag.heartbeat_absent"),)
        return (_note("finding.monitoring_lag.heartbeat_late", lag_seconds=e["lag_seconds"]),)
    if check == monitoring_lag.FRESHNESS:
        if "stale_series" not in e:
            return (_note("finding.monitoring_lag.no_data", series=s["series"]),)
        stalest = e["stalest"]
        assert isinstance(stalest, list) and isinstance(stalest[0], dict)
        return (
            _note(
                "finding.monitoring_lag.stale",
                series=s["series"],
                stale=e["stale_series"],
                total=e["total_series"],
                age_seconds=stalest[0]["age_seconds"],
            ),
        )
    if check == monitoring_lag.SCRAPE:
        seen = []
        if e["health"] == "down":
            error = e.get("last_error")
            seen.append(
                _note("finding.monitoring_lag.scrape_failed", error_words=str(error))
                if error
                else _note("finding.monitoring_lag.scrape_failed_silent")
            )
        age = e["last_scrape_age_seconds"]
        limit = e["max_age_seconds"]
        if isinstance(age, int | float) and isinstance(limit, int | float) and age > limit:
            seen.append(_note("finding.monitoring_lag.scrape_old", age_seconds=age))
        return (_note("finding.monitoring_lag.scrape", job=s["job"], instance=s["instance"]), *seen)
    if check == monitoring_lag.FLATLINE:
        return (
            _note(
                "finding.monitoring_lag.flatline",
                series=s["series"],
                value=str(e["prometheus_value"]),
                values=e["agent_distinct_values"],
            ),
        )
    form = "gpu_busy_late" if e["first_busy_at"] else "gpu_busy_missing"
    return (
        _note(
            f"finding.monitoring_lag.{form}",
            gpu=s["gpu_uuid"],
            run_id=str(e["run_id"]),
            lag_seconds=e["lag_seconds"],
        ),
    )


def _error(key: str, *names: str) -> Callable[[Subject, Evidence], Sentence]:
    """A source the observer could not read, in its own error's words."""

    def words(s: Subject, e: Evidence) -> Sentence:
        errors = e["errors"] if "errors" in e else {"": e["error"]}
        assert isinstance(errors, Mapping)
        first = next(iter(errors.values()))
        return (_note(f"finding.{key}", error_words=str(first), **{n: s[n] for n in names}),)

    return words


_BY_DETECTOR: dict[str, Callable[[Subject, Evidence], Sentence]] = {
    "nvml_unavailable": _nvml_unavailable,
    "gpu_lost": _gpu_lost,
    "memory_without_process": _memory_without_process,
    node_leaks.OWNER_STATE_UNKNOWN: _owner_state_unknown,
    "allocated_idle": _allocated_idle,
    "vanished_process": _vanished_process,
    "orphan_process": _orphan_process,
    "unreleased_memory": _unreleased_memory,
    node_leaks.GPU_NOT_ASSIGNED: _gpu_not_assigned,
    gpu_health.ECC_UNCORRECTED: _ecc,
    gpu_health.ROW_REMAP_PENDING: _gpu_health(gpu_health.ROW_REMAP_PENDING),
    gpu_health.ROW_REMAP_FAILED: _gpu_health(gpu_health.ROW_REMAP_FAILED),
    gpu_health.RETIRED_PAGES_PENDING: _gpu_health(gpu_health.RETIRED_PAGES_PENDING),
    gpu_health.CLOCK_SLOWDOWN: _slowdown,
    gpu_health.PCIE_REPLAY_RATE: _pcie,
    gpu_health.NVLINK_ERRORS: _nvlink,
    gpu_health.GPU_XID: _xid,
    gpu_in_service.UNHEALTHY_GPU_IN_SERVICE: _in_service,
    gpu_unusable.DETECTOR: _gpu_unusable,
    unreleased.ALLOCATED_WITHOUT_JOB: _allocated_without_job,
    unreleased.KILL_TASK_FAILED_DETECTOR: _kill_task_failed,
    unreleased.STUCK_TERMINATING: _stuck,
    probe_release.DETECTOR: _probe_unreleased,
    unexplained_wait.UNEXPLAINED_WAIT: _unexplained_wait,
    fairness.PERSISTENT_UNFAIRNESS: _unfairness,
    quota_reclaim.DETECTOR: _quota_not_reclaimed,
    inference.UNAVAILABLE: _inference_unavailable,
    inference.SCALE_OUT_STALLED: _scale_out_stalled,
    "log_loss": _log_loss,
    "log_delivery_latency": _log_latency,
    monitoring_lag.DETECTOR: _monitoring_lag,
    monitoring_lag.UNREACHABLE: _error("prometheus_unreachable"),
    # The controller's own sources (controller/observe.py, detect.py, alerts.py).
    "agent_unreachable": _error("agent_unreachable", "agent"),
    "log_pipeline_unreachable": _error("log_pipeline_unreachable", "pipeline"),
    "store_unreachable": _error("store_unreachable", "store"),
    "alertmanager_unreachable": _error("alertmanager_unreachable"),
}
