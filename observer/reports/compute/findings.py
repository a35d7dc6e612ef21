"""A finding's sentence as Notes, from its detector, subject and evidence: what the stored
English `summary` says, in words the report's language chooses. The first Note is the
sentence; any more are its details (what was seen, each its own clause). None: a finding
whose evidence lacks what its sentence needs (stored by an older observer), which the
reports show by its stored summary, quoted.

Each detector's wording is one entry of _BY_DETECTOR: most say one Note, each parameter read
from the finding (`_note` and its readers); a detector whose sentence takes one of several
forms, or adds details for what was seen, has its own function."""

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
from observer.domain import JsonValue, compare_seconds
from observer.reports.compute.notes import Note

Evidence = Mapping[str, JsonValue]
Subject = Mapping[str, str]
Sentence = tuple[Note, ...]
Wording = Callable[[Subject, Evidence], Sentence]
Reader = Callable[[Subject, Evidence], JsonValue]  # one parameter of a Note, from the finding


def describe(detector: str, subject: Subject, evidence: Evidence) -> Sentence | None:
    words = _BY_DETECTOR.get(detector)
    if words is None:
        return None
    try:
        return words(subject, evidence)
    except (KeyError, TypeError, IndexError):
        return None


def _note(key: str, **params: Reader) -> Wording:
    """A sentence of one Note: `key` (whole, finding.*, so that extraction sees it) and each
    parameter as its reader reads it from the finding."""

    def words(s: Subject, e: Evidence) -> Sentence:
        return (Note(key, {name: read(s, e) for name, read in params.items()}),)

    return words


# --- readers: a parameter from the finding ------------------------------------------------


def _subject(part: str) -> Reader:
    return lambda s, e: s[part]


def _evidence(name: str) -> Reader:
    """The evidence's value as it is."""
    return lambda s, e: e[name]


def _text(name: str) -> Reader:
    return lambda s, e: str(e[name])


def _memory(name: str) -> Reader:
    """A size in bytes (rendering writes it in GiB or MiB); not observed: not a number."""
    return lambda s, e: _bytes(e[name])


def _count(name: str) -> Reader:
    """How many the evidence's list holds (0: not a list)."""
    return lambda s, e: len(held) if isinstance(held := e[name], list) else 0


def _names(name: str) -> Reader:
    return lambda s, e: _as_names(e[name])


def _gpu(s: Subject, e: Evidence) -> JsonValue:
    """The GPU's index, and the MIG instance's UUID (`MIG-...`, which names itself in either
    language) when the finding is about one."""
    mig = e.get("mig_uuid")
    return f"{e['gpu_index']} {mig}" if mig else str(e["gpu_index"])


def _owner(s: Subject, e: Evidence) -> JsonValue:
    return str(e.get("owner_name") or e["owner"])


def _program(s: Subject, e: Evidence) -> JsonValue:
    return str(e.get("command") or e.get("executable") or "?")


def _bytes(n: JsonValue) -> int | float | None:
    return n if isinstance(n, int | float) and not isinstance(n, bool) else None


def _as_names(values: JsonValue) -> JsonValue:
    """A list of the evidence's as names (rendering lists them); anything else as it is."""
    return [str(v) for v in values] if isinstance(values, list) else str(values)


def _usage_series(s: Subject, e: Evidence) -> JsonValue:
    """The tenant's own GPUs at each change the hold's series keeps, oldest first; as names,
    since a bare count last would read as how many more were left out."""
    series = e["tenant_usage_gpus_series"]
    return [str(p[1]) for p in series if isinstance(p, list)] if isinstance(series, list) else []


def _fault(s: Subject, e: Evidence) -> JsonValue:
    fault = e["fault"]
    assert isinstance(fault, Mapping)
    return str(fault["detector"])


def _gpus_held(s: Subject, e: Evidence) -> JsonValue:
    held = e["gpus_of_jobs"]  # a job over several nodes holds a share of its GPUs on each
    whole = isinstance(held, float) and held.is_integer()
    return int(held) if whole else held


def _p95_latency(s: Subject, e: Evidence) -> JsonValue:
    latency = e["latency_seconds"]
    assert isinstance(latency, Mapping)
    return latency["p95"]


def _first_error(s: Subject, e: Evidence) -> JsonValue:
    errors = e["errors"] if "errors" in e else {"": e["error"]}
    assert isinstance(errors, Mapping)
    return str(next(iter(errors.values())))


def _error(key: str, *names: str) -> Wording:
    """A source the observer could not read, in its own error's words."""
    return _note(f"finding.{key}", error_words=_first_error, **{n: _subject(n) for n in names})


# --- sentences of several forms, or with details ----------------------------------------


def _allocated_idle(s: Subject, e: Evidence) -> Sentence:
    if "pid" not in s:
        return (
            Note(
                "finding.allocated_idle.assigned",
                {"owner": str(e["owner"]), "gpu": _gpu(s, e), "node": s["node"]},
            ),
        )
    params = {
        "owner": _owner(s, e),
        "memory_bytes": _bytes(e["used_memory_bytes"]),
        "gpu": _gpu(s, e),
    }
    if "sm_active_ratio" not in e:
        return (Note("finding.allocated_idle.process", params),)
    # Judged on SM activity (GPM): busy to utilisation, maybe, but not to the SMs.
    shares = {
        "sm_active_share": e["sm_active_ratio"],
        "utilization_share": e["utilization_gpu_percent"] / 100,
    }
    return (Note("finding.allocated_idle.process_sm", {**params, **shares}),)


def _orphan_process(s: Subject, e: Evidence) -> Sentence:
    # The allocation layer knew the GPU and named nobody: assigned to no one.
    form = (
        "finding.orphan_process.unassigned"
        if e.get("gpu_assigned_to") == []
        else "finding.orphan_process"
    )
    params = {
        "pid": str(e["pid"]),
        "program_words": _program(s, e),
        "gpu": _gpu(s, e),
        "memory_bytes": _bytes(e["used_memory_bytes"]),
    }
    return (Note(form, params),)


def _gpu_not_assigned(s: Subject, e: Evidence) -> Sentence:
    holders = e.get("gpu_assigned_to")
    params: dict[str, JsonValue] = {
        "owner": _owner(s, e),
        "pid": str(e["pid"]),
        "program_words": _program(s, e),
        "gpu": _gpu(s, e),
        "source": str(e["source"]),
    }
    if holders:
        given = {"holders": _as_names(holders), **params}
        return (Note("finding.gpu_not_assigned.given_other", given),)
    return (Note("finding.gpu_not_assigned", params),)


def _slowdown(s: Subject, e: Evidence) -> Sentence:
    params: dict[str, JsonValue] = {
        "gpu": _gpu(s, e),
        "node": s["node"],
        "reasons": _as_names(e["reasons"]),
    }
    if e["owners"]:
        owned = {"owners": _as_names(e["owners"]), **params}
        return (Note("finding.gpu_clock_slowdown", owned),)
    return (Note("finding.gpu_clock_slowdown.unowned", params),)


def _nvlink(s: Subject, e: Evidence) -> Sentence:
    seen = []
    if e["recovery_errors"]:
        seen.append(Note("finding.gpu_nvlink_errors.recovery", {"errors": e["recovery_errors"]}))
    rate, limit = e["replay_and_crc_errors_per_minute"], e["replay_and_crc_errors_per_minute_max"]
    if isinstance(rate, int | float) and isinstance(limit, int | float) and rate > limit:
        seen.append(Note("finding.gpu_nvlink_errors.rate", {"per_minute": float(rate)}))
    head = Note("finding.gpu_nvlink_errors", {"gpu": _gpu(s, e), "node": s["node"]})
    return (head, *seen)


def _mig_reconfigured(s: Subject, e: Evidence) -> Sentence:
    """Which of MIG mode turned on, turned off, or a repartition: from the counts before and
    after (None: MIG mode off)."""
    before, after = e["mig_devices_before"], e["mig_devices_after"]
    params: dict[str, JsonValue] = {"gpu": _gpu(s, e), "node": s["node"]}
    if before is None:
        return (Note("finding.mig_reconfigured.enabled", {**params, "after": after}),)
    if after is None:
        return (Note("finding.mig_reconfigured.disabled", {**params, "before": before}),)
    return (Note("finding.mig_reconfigured", {**params, "before": before, "after": after}),)


def _xid(s: Subject, e: Evidence) -> Sentence:
    gpu = e.get("gpu_index")
    form = "finding.gpu_xid.fatal" if e["fatal"] else "finding.gpu_xid"
    head = Note(
        form,
        {
            "xid": s["xid"],
            "gpu": "?" if gpu is None else str(gpu),
            "pci_bus_id": s["pci_bus_id"],
            "node": s["node"],
            "xid_meaning": s["xid"],
            "xid_class_id": str(e["xid_class"]),
        },
    )
    if e.get("pid") is not None:
        owner = e.get("owner_name") or e.get("owner")
        process = {"pid": str(e["pid"]), "program_words": str(e.get("process_name") or "?")}
        if owner:
            return (head, Note("finding.gpu_xid.process", {"owner": str(owner), **process}))
        return (head, Note("finding.gpu_xid.process_unowned", process))
    if e.get("gpu_owners"):
        return (head, Note("finding.gpu_xid.running", {"owners": _as_names(e["gpu_owners"])}))
    return (head,)


def _unexplained_wait(s: Subject, e: Evidence) -> Sentence:
    who = {"job": s["run_id"], "tenant": s["tenant"]}
    if e["kind"] == "no_reason":
        return (Note("finding.unexplained_wait.no_reason", who),)
    if "free_nodes" in e:
        free = e["free_nodes"]
        return (
            Note(
                "finding.unexplained_wait.gpus_free",
                {
                    "reason_words": str(e["reason"]),
                    "nodes": len(free) if isinstance(free, list) else 0,
                    "gpus": e["gpus_per_node"],
                    **who,
                },
            ),
        )
    if "quota_gpus" in e:
        return (
            Note(
                "finding.unexplained_wait.quota_left",
                {
                    "reason_words": str(e["reason"]),
                    "held": e["tenant_running_gpus"],
                    "quota": e["quota_gpus"],
                    **who,
                },
            ),
        )
    nothing_ahead = {"reason_words": str(e["reason"]), **who}
    return (Note("finding.unexplained_wait.nothing_ahead", nothing_ahead),)


def _scale_out_stalled(s: Subject, e: Evidence) -> Sentence:
    head = Note(
        "finding.inference_scale_out_stalled",
        {
            "service": s["service"],
            "tenant": s["tenant"],
            "replicas": e["scale_out_to"],
            "ready": e["ready_replicas"],
        },
    )
    reason = e["pending_reason"]
    if reason is None:
        return (head,)
    return (head, Note("finding.inference_pending", {"reason_words": str(reason)}))


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
            Note(
                form,
                {
                    "lines": e["missing_lines"],
                    "expected": e["expected_lines"],
                    "seqs": shown,
                    "more": more,
                },
            )
        )
    counts = (
        ("duplicated", e["duplicate_deliveries"]),
        ("out_of_order", e["out_of_order_lines"]),
        ("torn", e["malformed_lines"]),
    )
    seen += [Note(f"finding.log_loss.{form}", {"lines": n}) for form, n in counts if n]
    unexpected = e["unexpected_seq_ranges"]
    if unexpected:
        seqs = _as_names([_seq(*r) for r in unexpected])
        seen.append(Note("finding.log_loss.unexpected", {"seqs": seqs}))
    head = Note("finding.log_loss", {"run_id": s["run_id"], "pipeline": s["pipeline"]})
    return (head, *seen)


def _monitoring_lag(s: Subject, e: Evidence) -> Sentence:
    check = s["check"]
    if check == monitoring_lag.HEARTBEAT:
        if "lag_seconds" not in e:
            return (Note("finding.monitoring_lag.heartbeat_absent"),)
        late = {"lag_seconds": e["lag_seconds"]}
        return (Note("finding.monitoring_lag.heartbeat_late", late),)
    if check == monitoring_lag.FRESHNESS:
        if "stale_series" not in e:
            return (Note("finding.monitoring_lag.no_data", {"series": s["series"]}),)
        stalest = e["stalest"]
        assert isinstance(stalest, list) and isinstance(stalest[0], dict)
        return (
            Note(
                "finding.monitoring_lag.stale",
                {
                    "series": s["series"],
                    "stale": e["stale_series"],
                    "total": e["total_series"],
                    "age_seconds": stalest[0]["age_seconds"],
                },
            ),
        )
    if check == monitoring_lag.SCRAPE:
        seen = []
        if e["health"] == "down":
            error = e.get("last_error")
            seen.append(
                Note("finding.monitoring_lag.scrape_failed", {"error_words": str(error)})
                if error
                else Note("finding.monitoring_lag.scrape_failed_silent")
            )
        age = e["last_scrape_age_seconds"]
        limit = e["max_age_seconds"]
        if isinstance(age, int | float) and isinstance(limit, int | float) and age > limit:
            seen.append(Note("finding.monitoring_lag.scrape_old", {"age_seconds": age}))
        target = {"job": s["job"], "instance": s["instance"]}
        return (Note("finding.monitoring_lag.scrape", target), *seen)
    if check == monitoring_lag.FLATLINE:
        return (
            Note(
                "finding.monitoring_lag.flatline",
                {
                    "series": s["series"],
                    "value": str(e["prometheus_value"]),
                    "values": e["agent_distinct_values"],
                },
            ),
        )
    form = "gpu_busy_late" if e["first_busy_at"] else "gpu_busy_missing"
    return (
        Note(
            f"finding.monitoring_lag.{form}",
            {"gpu": s["gpu_uuid"], "run_id": str(e["run_id"]), "lag_seconds": e["lag_seconds"]},
        ),
    )


# A GPU health condition's: which GPU, on which node.
_HEALTH: dict[str, Reader] = {"gpu": _gpu, "node": _subject("node")}


def _store_space_low(s: Subject, e: Evidence) -> Sentence:
    """When the store fills its volume against the warning's horizon, as both are written."""
    fills_in, limit = e["fills_in_seconds"], e["limit_seconds"]
    if not isinstance(fills_in, int | float) or not isinstance(limit, int | float):
        raise TypeError("store_space_low's evidence lacks its figures")
    return (
        Note(
            f"finding.store_space_low.{compare_seconds(fills_in, limit)}",
            {
                "store": s["store"],
                "free_bytes": _bytes(e["free_bytes"]),
                "growth_bytes": _bytes(e["growth_bytes_per_day"]),
                "fills_in_seconds": fills_in,
                "limit_seconds": limit,
            },
        ),
    )


_BY_DETECTOR: dict[str, Wording] = {
    # The node agent's findings.
    "nvml_unavailable": _note("finding.nvml_unavailable", node=_subject("node")),
    "gpu_lost": _note("finding.gpu_lost", node=_subject("node"), gpu=_subject("gpu")),
    gpu_health.XID_SOURCE_UNAVAILABLE: _note(
        "finding.xid_source_unavailable",
        node=_subject("node"),
        nvml_words=_text("nvml"),
        kernel_log_words=_text("kernel_log"),
    ),
    "memory_without_process": _note(
        "finding.memory_without_process",
        node=_subject("node"),
        gpu=_gpu,
        memory_bytes=_memory("excess_bytes"),
    ),
    node_leaks.OWNER_STATE_UNKNOWN: _note(
        "finding.owner_state_unknown", node=_subject("node"), source=_text("source")
    ),
    "allocated_idle": _allocated_idle,
    "vanished_process": _note(
        "finding.vanished_process",
        pid=_text("pid"),
        gpu=_gpu,
        memory_bytes=_memory("used_memory_bytes"),
    ),
    "orphan_process": _orphan_process,
    "unreleased_memory": _note(
        "finding.unreleased_memory",
        pid=_text("pid"),
        memory_bytes=_memory("used_memory_bytes"),
        gpu=_gpu,
        owner=_owner,
    ),
    node_leaks.GPU_NOT_ASSIGNED: _gpu_not_assigned,
    # GPU health.
    gpu_health.ECC_UNCORRECTED: _note(
        "finding.gpu_ecc_uncorrected", **_HEALTH, errors=_evidence("new_errors")
    ),
    gpu_health.ROW_REMAP_PENDING: _note(f"finding.{gpu_health.ROW_REMAP_PENDING}", **_HEALTH),
    gpu_health.ROW_REMAP_FAILED: _note(f"finding.{gpu_health.ROW_REMAP_FAILED}", **_HEALTH),
    gpu_health.RETIRED_PAGES_PENDING: _note(
        f"finding.{gpu_health.RETIRED_PAGES_PENDING}", **_HEALTH
    ),
    gpu_health.CLOCK_SLOWDOWN: _slowdown,
    gpu_health.PCIE_REPLAY_RATE: _note(
        "finding.gpu_pcie_replay_rate",
        **_HEALTH,
        per_minute=lambda s, e: float(e["replays_per_minute"]),
    ),
    gpu_health.NVLINK_ERRORS: _nvlink,
    gpu_health.GPU_XID: _xid,
    "mig_reconfigured": _mig_reconfigured,
    gpu_in_service.UNHEALTHY_GPU_IN_SERVICE: _note(
        "finding.unhealthy_gpu_in_service",
        node=_subject("node"),
        state_words=_text("node_state"),
        fault_age_seconds=_evidence("fault_age_seconds"),
        fault=_fault,
        jobs=_count("jobs_placed_since"),
    ),
    # The controller's findings.
    gpu_unusable.DETECTOR: _note(
        "finding.gpu_unusable", node=_subject("node"), probe=_text("probe"), job_id=_text("job_id")
    ),
    unreleased.ALLOCATED_WITHOUT_JOB: _note(
        "finding.allocated_without_job",
        node=_subject("node"),
        allocated=_evidence("gpus_allocated"),
        held=_gpus_held,
    ),
    unreleased.KILL_TASK_FAILED_DETECTOR: _note(
        "finding.kill_task_failed",
        node=_subject("node"),
        state_words=_text("node_state"),
        reason_words=_text("reason"),
    ),
    unreleased.STUCK_TERMINATING: _note(
        "finding.stuck_terminating",
        job_id=_subject("job_id"),
        tenant=_subject("tenant"),
        gpus=_evidence("gpus"),
        node=_subject("node"),
        grace_seconds=_evidence("grace_seconds"),
    ),
    probe_release.DETECTOR: _note(
        "finding.probe_unreleased",
        probe=_text("probe"),
        tenant=_subject("tenant"),
        job_id=_text("job_id"),
        gpus=_count("gpus"),
        node=_subject("node"),
        grace_seconds=_evidence("grace_seconds"),
    ),
    unexplained_wait.UNEXPLAINED_WAIT: _unexplained_wait,
    fairness.PERSISTENT_UNFAIRNESS: _note(
        "finding.persistent_unfairness",
        tenant=_subject("tenant"),
        bad=_evidence("disadvantaged_occurrences"),
        weighed=_evidence("occurrences_weighed"),
        windows=_names("windows"),
    ),
    quota_reclaim.DETECTOR: _note(
        "finding.quota_not_reclaimed",
        tenant=_subject("tenant"),
        job=_subject("run_id"),
        reason_words=_text("pending_reason"),
        waited_seconds=_evidence("waited_seconds"),
        usage=_usage_series,
        quota=_evidence("quota_gpus"),
    ),
    inference.UNAVAILABLE: _note(
        "finding.inference_unavailable",
        service=_subject("service"),
        tenant=_subject("tenant"),
        ready=_evidence("ready_replicas"),
        errors=_evidence("errors"),
        requests=_evidence("requests"),
    ),
    inference.SCALE_OUT_STALLED: _scale_out_stalled,
    "log_loss": _log_loss,
    "log_delivery_latency": _note(
        "finding.log_delivery_latency",
        run_id=_subject("run_id"),
        pipeline=_subject("pipeline"),
        p95_seconds=_p95_latency,
        limit_seconds=_evidence("p95_max_seconds"),
    ),
    monitoring_lag.DETECTOR: _monitoring_lag,
    monitoring_lag.UNREACHABLE: _error("prometheus_unreachable"),
    # The controller's own sources (controller/observe.py, detect.py, alerts.py).
    "agent_unreachable": _error("agent_unreachable", "agent"),
    "log_pipeline_unreachable": _error("log_pipeline_unreachable", "pipeline"),
    "store_unreachable": _error("store_unreachable", "store"),
    "store_space_low": _store_space_low,
    "accounting_unreachable": _error("accounting_unreachable", "accounting"),
    "scheduler_partly_visible": _error("scheduler_partly_visible", "scheduler"),
    "alertmanager_unreachable": _error("alertmanager_unreachable"),
}
