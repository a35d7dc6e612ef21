"""The reports' words, in English and Simplified Chinese, by message key. A pure string table,
longer than a module should be for that reason alone."""

from __future__ import annotations

CATALOG: dict[str, dict[str, str]] = {
    "en": {
        # words
        "word.not_observed": "not observed",
        "word.incomplete": "incomplete",
        "word.none": "none",
        "word.unknown": "unknown",
        "word.yes": "yes",
        "word.no": "no",
        "word.not_set_up": "not set up",
        # titles and labels
        "title.daily": "Daily operational summary — {day}",
        "title.daily_partial": "Daily operational summary — {day}, so far",
        "note.partial": "Partial: the day so far, up to {at}. Its figures will still change; "
        "the day's summary is built once the day is over.",
        "title.verdict": "Go-live verdict",
        "label.timezone": "Platform timezone: {timezone}",
        "label.period": "Period: {start} to {end}",
        "label.soak_started": "Soak started: {start}",
        "label.soak": "Soak: {start} to {end} ({length_seconds})",
        "title.verdict_provisional": "Go-live verdict, provisional",
        "note.provisional": "Provisional: built over the soak so far, up to {at}, whose last "
        "day is not over. Criteria and the recommendation may still change.",
        "col.figure": "Figure",
        "col.day": "This day",
        "col.previous_day": "Previous day",
        "col.soak_to_date": "Soak to date",
        # headline figures
        "fig.tasks_total": "Probe tasks",
        "fig.tasks_failed": "Failed tasks",
        "fig.tasks_cancelled": "Cancelled tasks",
        "fig.tasks_unfinished": "Unfinished tasks",
        "fig.all_jobs_total": "All jobs ended",
        "fig.all_jobs_failed": "All jobs failed",
        "fig.all_jobs_cancelled": "All jobs cancelled",
        "fig.all_jobs_observer_total": "of which the observer's own probes",
        "fig.all_jobs_observer_failed": "of which the observer's probes (expected failures too)",
        "fig.queue_wait_avg": "Average queue wait",
        "fig.queue_wait_p50": "Queue wait p50",
        "fig.queue_wait_p95": "Queue wait p95",
        "fig.gpu_util_avg": "GPU utilisation (average)",
        "fig.gpu_allocated_share": "GPUs allocated (scheduler)",
        "fig.gpu_busy_share": "GPUs in use (agents)",
        "fig.owner_state_known": "Owner state known (agents)",
        "value.owner_state_known": "{known} of {nodes} nodes",
        "fig.alerts_total": "Alerts fired",
        "fig.interventions_total": "Manual interventions",
        "fig.incidents_opened": "Incidents (findings sharing a cause)",
        "sub.incidents": "Incidents",
        "note.incidents": "{findings} findings in {incidents} incidents: findings that name the "
        "same pipeline, node, job or run and opened within 10 minutes of each other are one "
        "incident (one Prometheus stall seen by every check; one leak seen at the node, by the "
        "probe and by the scheduler). Incidents of more than one finding:",
        "col.findings": "Findings",
        "col.detectors": "Detectors",
        "fig.findings_opened": "Findings opened",
        "fig.findings_closed": "Findings closed",
        "fig.findings_still_open": "Findings still open",
        "fig.findings_events": "Events raised",
        "fig.blind_time": "Observer blind time",
        # sections
        "sec.headline": "Headline figures",
        "sec.charts": "Charts",
        "sec.tasks": "Tasks and failures",
        "sec.queue": "Queue wait",
        "sec.gpu": "GPU utilisation",
        "sec.alerts": "Alerts",
        "sec.interventions": "Manual interventions",
        "sec.findings": "Findings",
        "sec.blind": "Observer blind time",
        "sec.deliveries": "Report deliveries",
        "sec.criteria": "Criteria",
        "sec.recommendation": "Recommendation",
        "sec.scope": "Scope and conditions",
        "sec.reverification": "Re-verification plan",
        "sec.days": "Day by day",
        "sub.failures": "Probe failures by reason",
        "sub.by_tenant": "Per tenant",
        "sub.by_window": "Per window",
        "sub.by_probe": "Per probe kind",
        "sub.coverage": "Probe coverage",
        "note.coverage": "Each copy of a probe that came due was run (submitted) or skipped, "
        "with why. Most together: the most runs of the probe one tenant had in flight at once, "
        "which a burst needs to be one.",
        "col.due": "Due",
        "col.skipped": "Skipped",
        "col.together": "Most together",
        "cell.skipped": "{count}: {why}",
        "cell.ran_of_due": "{runs} of {due}",
        "coverage.why.budget": "over the probe GPU budget",
        "coverage.why.no_other_tenant": "no other tenant to try",
        "coverage.why.backend_error": "the platform could not be asked",
        "coverage.why.not_due": "no launch came due: its window never opened while the "
        "controller ran",
        "sub.all_jobs": "All jobs (the scheduler's queues)",
        "sub.all_jobs_tasks": "All jobs of every tenant, as the scheduler lists them",
        "sub.all_jobs_by_tenant": "All jobs per tenant (jobs / failed)",
        "sub.all_jobs_failures": "All jobs' failures, by cause and the scheduler's reason",
        "sub.by_pool": "Per node pool: allocated against used",
        "sub.by_detector": "Per detector",
        "sub.evidence": "Evidence",
        "sub.restarts": "Observer restarts",
        # columns
        "col.outcome": "Outcome",
        "col.reason": "Reason",
        "col.count": "Count",
        "col.probes": "Probes",
        "col.tenants": "Tenants",
        "col.explanation": "Explanation (whose words)",
        "col.failure_cause": "Cause",
        "col.observer_probes": "Of which the observer's probes",
        "col.cause_evidence": "Evidence",
        "cause.application": "application (code or data)",
        "cause.gpu_driver": "GPU / driver",
        "cause.node": "node",
        "cause.scheduling": "scheduling policy",
        "cause.platform_configuration": "platform configuration",
        "cause.unexplained": "unexplained",
        "col.runs_listed": "Runs",
        "col.run": "Run",
        "col.queue": "Queue",
        "col.asked": "Asked",
        "col.expected": "Expected",
        "col.submitted": "Submitted",
        "col.started": "Started",
        "col.ended": "Ended",
        "col.queue_wait": "Queue wait",
        "col.run_time": "Run time",
        "col.nodes": "Nodes",
        "cell.asked": "{gpus} GPU(s) × {nodes} node(s)",
        "cell.waited_never_started": "≥ {waited_seconds} (never started)",
        "word.unfinished": "unfinished",
        "sec.task_records": "Every task of the day",
        # the tenant, queue and quota record
        "sec.tenants": "Tenants, queues and quotas",
        "col.weight": "Weight",
        "col.quota_configured": "Quota (settings, GPUs)",
        "col.quota_at_start": "Quota at the day's start (the platform's last change)",
        "col.quota_changes": "Quota changes",
        "col.over_quota_attempts": "Over-quota attempts",
        "col.reclaimed_longest": "Quota freed after (longest)",
        "col.utilisation_avg": "Utilisation of its GPUs (avg)",
        "col.all_jobs_wait_avg": "All jobs' wait (avg)",
        "col.all_jobs_wait_p95": "All jobs' wait (p95)",
        "note.tenant_utilisation": "All jobs' waits are those of every job of the tenant that "
        "ended this day having started, from submission to start as the platform listed them. "
        "Utilisation is that of the GPUs each tenant's jobs held "
        "when the agents sampled them; per pool and per window it is in the GPU section. The "
        "samples name the tenant, not the task type, so utilisation by task type is not stored.",
        "sub.quota_changes": "Quota and limit changes of the day",
        "col.before": "Before",
        "col.after": "After",
        "word.not_recorded": "not recorded",
        "sub.over_quota": "Over-quota attempts and the quota's release",
        "col.platform_words": "The platform's words",
        "col.reclaimed_after": "Within-quota probe started after",
        "note.reclaim": "After each over-quota probe is refused, or held and cancelled, the "
        "observer submits a one-GPU probe within the tenant's quota; the time runs from the "
        "over-quota job's end to that probe's start, including any time the tenant's own "
        "running jobs filled the quota. Still held by the quota "
        "controller.quota_reclaim_seconds after its own usage left room: a "
        "quota_not_reclaimed finding.",
        "sub.received_entitled": "GPUs received against entitled, per window",
        "col.received_gpus": "Received GPUs (avg)",
        "col.entitled_gpus": "Entitled GPUs (avg)",
        "col.received_share": "Received / entitled",
        "note.received_entitled": "The fairness rule's assessment of each window that ended "
        "this day: means over the queue samples in which the tenant's jobs had waited past "
        "detectors.fairness.disadvantage_wait_seconds; a tenant never held so long, not "
        "observed.",
        "cell.quota_since": "{change} (since {at}, by {by})",
        "cell.not_reclaimed": "not freed",
        "cell.reclaim_waiting": "still waiting ({reason})",
        "cell.reclaim_never": "never started: {outcome} ({reason})",
        "note.task_records": "One row per probe run submitted in the day, in the order they "
        "were submitted (local time); a task that never started shows its wait so far, a lower "
        "bound. The same rows are in the CSV beside this report and printed by `observer runs "
        "--date YYYY-MM-DD`.",
        "label.filter_tasks": "Filter tasks (probe, tenant, outcome, run id…)",
        "note.explanations": "“Platform:” quotes the platform's reason and message; "
        "“Observer:” is the observer's reasoning from what it recorded (for a task it gave up "
        "on: how long it waited and on what). Each run leads to its row under “Every task of "
        "the day”.",
        "why.platform": "Platform: {words}",
        "why.none": "No explanation: the platform gave no reason, message or exit code",
        "why.no_gpu": "Observer: the probe's program found no usable GPU on {nodes} "
        "(platform: {words}); a node given GPUs it cannot use is a gpu_unusable finding",
        "why.observer": "Observer: {reason} — {message_words}",
        "why.unexpected": "Observer: expected “{expectation}”, it ended another way; "
        "platform: {words}",
        "why.timed_out_pending": "Observer: never started within its deadline of "
        "{deadline_seconds}, held by the platform's {reason_words} for {reason_seconds}; cancelled",
        "why.timed_out_silent": "Observer: never started within its deadline of "
        "{deadline_seconds}, and the platform gave no reason; cancelled",
        "why.timed_out_running": "Observer: started but not ended within its deadline of "
        "{deadline_seconds} (ran {run_seconds}); cancelled",
        "col.runs": "Runs",
        "col.avg": "Average",
        "col.p50": "p50",
        "col.p95": "p95",
        "col.max": "Max",
        "col.tenant": "Tenant",
        "col.jobs": "Jobs",
        "col.window": "Window",
        "col.probe": "Probe",
        "col.pending_jobs_avg": "Pending jobs (avg)",
        "col.pending_gpus_avg": "Pending GPUs (avg)",
        "col.running_gpus_avg": "Running GPUs (avg)",
        "col.longest_wait": "Longest wait",
        "col.pool": "Pool",
        "col.gpus": "GPUs (avg)",
        "col.allocated": "Allocated",
        "col.used": "In use",
        "col.utilization": "Utilisation (avg)",
        "col.samples": "Samples",
        "col.distribution": "Distribution (0–100%, by tenths)",
        "col.name": "Alert",
        "col.severity": "Severity",
        "col.at": "At",
        "col.source": "Source",
        "col.action": "Action",
        "col.by": "By",
        "col.subject": "Subject",
        "col.audited": "Recorded by",
        "col.detector": "Detector",
        "col.opened": "Opened",
        "col.closed": "Closed",
        "col.still_open": "Still open",
        "col.events": "Events",
        "col.status": "Status",
        "col.summary": "Summary",
        "col.duration": "Duration",
        "col.cause": "Cause",
        "col.from": "From",
        "col.to": "To",
        "col.down_from": "Down from",
        "col.up_at": "Up at",
        "col.criterion": "Criterion",
        "col.class": "Class",
        "col.date": "Day",
        "col.failed": "Failed",
        "col.findings_new": "New findings",
        "col.blind": "Blind time",
        "col.report": "Report",
        "col.channel": "Channel",
        "col.attempts": "Attempts",
        "col.detail": "Channel's answer",
        "col.allocated_gpus_avg": "Allocated GPUs (avg, scheduler)",
        "col.busy_share": "Busy",
        # notes
        "note.all_jobs_not_observed": "No listing of the scheduler's finished jobs covered "
        "this day: counts of all jobs are not observed (the probe tasks are below).",
        "note.all_jobs_incomplete": "Incomplete: the listings covered {listed} of the day, or "
        "the scheduler may have forgotten jobs ({notes}). The counts are lower bounds.",
        "note.tenant_util_not_observed": "Utilisation per tenant is not observed: no GPU sample "
        "was attributed to a tenant's job (on Kubernetes the agents know a GPU process's pod by "
        "its UID, which the scheduler's jobs do not carry). Allocated GPUs per tenant come from "
        "the scheduler's queues.",
        "note.tenant_util": "Used: the utilisation of the GPUs each tenant's jobs held when "
        "sampled (the agents' process owners joined with the scheduler's jobs; {attributed} of "
        "{samples} samples attributed). Allocated: GPUs running per tenant, from the "
        "scheduler's queues.",
        "note.deliveries_failed": "{failed} of {total} deliveries of earlier reports in this "
        "period failed; every report is still in the reports directory.",
        "note.deliveries_all": "All delivered: {total} deliveries of earlier reports in this "
        "period.",
        "note.deliveries_none": "No report was delivered in this period.",
        "note.deliveries_no_channels": "No delivery channel is configured (reports.delivery): "
        "reports are only written to the reports directory.",
        "note.alerts_blind": "Alertmanager could not be read for {blind_seconds} of this period: "
        "alerts that fired then are not counted.",
        "note.no_gpu_samples": "No GPU samples from the node agents were stored: utilisation is "
        "not observed.",
        "note.alerts_not_set_up": "No alert source is set up (reports.alertmanager_url): alerts "
        "are not observed.",
        "note.blind_not_set_up": "Not set up, so never observed: {sources}.",
        "note.scheduler_gaps": "Scheduler blind time is every gap longer than {limit_seconds} "
        "between stored scheduler snapshots.",
        "note.no_items": "None.",
        "note.unfinished_wait": "{count} task(s) ended without starting (refused, blocked or "
        "failed to start); they have no queue wait.",
        "note.gpu_coverage": "{sampled} of {known} scheduler nodes sampled by agents; "
        "{unread} samples could not read utilisation.",
        "sec.health": "GPU and node health",
        "sec.inference": "Inference service",
        "inference.services": "Kept up on the platform: {services}. Each look sends one "
        "request to every ready replica.",
        "sub.inference_windows": "Availability and latency by window",
        "sub.inference_phases": "Start, scale-out and rolling restart",
        "inference.whole_day": "Whole day",
        "inference.outside_windows": "Outside every window",
        "inference.ms": "{ms} ms",
        "inference.replicas": "{before} → {after}",
        "inference.phase.start": "Start",
        "inference.phase.scale_out": "Scale-out",
        "inference.phase.restart": "Rolling restart",
        "note.inference_availability": "Availability: the share of looks, once the service had "
        "started, in which some ready replica answered. Latency: of the requests answered, "
        "from sending to the last byte.",
        "col.availability": "Availability",
        "col.requests": "Requests",
        "col.errors": "Errors",
        "col.p99": "p99",
        "col.phase": "Change",
        "col.replicas": "Replicas",
        "col.time_to_ready": "Time to ready",
        "col.waited_for_node": "Waited for a node",
        "col.unavailable": "Unavailable meanwhile",
        "sub.health_gpus": "GPUs with faults, by node",
        "sub.health_xids": "Xid codes",
        "sub.health_reaction": "The platform's reaction to fatal GPU faults",
        "col.node": "Node",
        "col.gpu": "GPU",
        "col.xids": "Xid codes",
        "col.gpu_conditions": "Conditions",
        "col.throttled_gpu_hours": "Throttled GPU-hours",
        "col.xid": "Xid",
        "col.meaning": "Meaning (NVIDIA's catalogue)",
        "col.fatal": "Fatal",
        "col.fault": "Fatal fault",
        "col.fault_at": "First at",
        "col.out_of_service_after": "Out of service after",
        "col.kept_in_service_since": "Still in service past the grace, since",
        "col.jobs_placed": "Jobs placed there after the fault",
        "note.health_not_observed": "No GPU samples from the node agents were stored: the GPUs' "
        "health is not observed.",
        "note.health_healthy": "Every GPU the agents sampled, on {sampled} nodes, stayed healthy: "
        "no Xid, ECC, memory repair, PCIe, throttling or lost-GPU finding.",
        "note.health_healthy_but": "Every GPU the agents sampled, on {sampled} nodes, stayed "
        "healthy: no Xid, ECC, memory repair, PCIe, throttling or lost-GPU finding. Not sampled, "
        "so their health is not known: {nodes}.",
        "note.health_not_sampled": "Not sampled, so their health is not known: {nodes}.",
        "note.health_throttled": "{hours} GPU-hours throttled (hardware, thermal or power-brake "
        "slowdown while a job ran), counted within the day.",
        "health.xid_cell": "{code} ×{count} ({xid_class})",
        "health.xid_cell_fatal": "{code} ×{count} ({xid_class}, fatal)",
        "health.open_at_end": "{condition} (still open)",
        "health.not_out_of_service": "not seen out of service",
        "health.jobs": "{count}: {jobs}",
        "health.job": "{job_id} ({tenant}, {started_at})",
        "health.cond.gpu_xid": "Xid",
        "health.cond.gpu_ecc_uncorrected": "uncorrected ECC errors",
        "health.measured.gpu_ecc_uncorrected": "uncorrected ECC errors {before} → {after}",
        "health.cond.gpu_row_remap_pending": "row remap pending (needs a reset)",
        "health.cond.gpu_row_remap_failed": "row remap failed (needs service)",
        "health.cond.gpu_retired_pages_pending": "page retirement pending (needs a reset)",
        "health.cond.gpu_pcie_replay_rate": "PCIe replays",
        "health.measured.gpu_pcie_replay_rate": "PCIe replays up to {replays_per_minute}/min",
        "health.cond.gpu_nvlink_errors": "NVLink errors",
        "health.measured.gpu_nvlink_errors": "NVLink replay and CRC errors up to "
        "{replay_and_crc_errors_per_minute}/min",
        "health.cond.gpu_clock_slowdown": "throttled",
        "health.cond.gpu_lost": "GPU lost (fell off the bus)",
        "xid_class.application": "application",
        "xid_class.memory": "memory",
        "xid_class.bus": "bus",
        "xid_class.nvlink": "NVLink",
        "xid_class.firmware": "firmware",
        "xid_class.driver": "driver",
        "xid_class.thermal_power": "thermal or power",
        "xid_class.unknown": "unknown",
        "note.owner_state": "Owner state known on {known} of {nodes} nodes: each node's agent "
        "knew whether the pod or job of every GPU process still ran.",
        "note.owner_state_not_known": "Owner state known on {known} of {nodes} nodes; not known "
        "(its agent could not tell for more than {limit_share} of the period whether a GPU "
        "process's pod or job still ran) on {not_known}: memory left after a job ended is not "
        "seen there.",
        "note.generated_for": "Built from the data stored for this period; rebuilding it gives "
        "the same report.",
        # statuses, sources, actions
        "status.event": "event",
        "status.opened": "opened, still open",
        "status.opened_closed": "opened and closed",
        "status.closed": "closed",
        "status.open": "open all period",
        "source.recorded": "recorded",
        "source.detected": "detected",
        "action.recorded": "recorded by a person",
        "action.drain": "node drained",
        "action.resume": "node resumed",
        "action.cordon": "node cordoned",
        "action.uncordon": "node uncordoned",
        "action.taints_changed": "node taints changed",
        "action.job_cancelled": "probe job cancelled by someone else",
        "action.quota_changed": "quota changed",
        "src.controller": "controller",
        "src.scheduler": "scheduler",
        "src.store": "store (database)",
        "restart.stopped": "stopped",
        "restart.killed_or_crashed": "killed or crashed",
        "src.agents": "node agents",
        "src.nvml": "NVML",
        "src.prometheus": "Prometheus",
        "src.logs": "log backend",
        "src.alerts": "Alertmanager",
        # charts
        "chart.util_over_day": "GPU utilisation and allocation over the day",
        "chart.util_by_hour": "GPU utilisation and allocation by hour of day",
        "chart.wait_per_tenant": "Queue wait per tenant",
        "chart.peak_vs_night": "Per window: queue wait and GPU utilisation",
        "chart.used": "utilisation (avg)",
        "chart.allocated": "allocated",
        "chart.wait_avg": "average",
        "chart.wait_p95": "p95",
        "chart.wait": "queue wait",
        "chart.util": "GPU utilisation",
        "chart.tasks_per_day": "Tasks and failures per day",
        "chart.tasks": "tasks",
        "chart.failed": "failed",
        "chart.no_data": "not observed",
        # verdict
        "rec.go": "GO",
        "rec.limited_go": "LIMITED GO",
        "rec.no_go": "NO GO",
        "rec.go.text": "Every criterion passed on recorded evidence.",
        "rec.limited_go.text": "Go only within the scope below; the listed criteria must pass "
        "a re-verification before the platform opens fully.",
        "rec.no_go.text": "At least one must-fix failure: the platform must not open until it "
        "is fixed and verified again.",
        "rec.not_decidable": "NOT DECIDABLE",
        "rec.not_decidable.text": "Not decidable: the observer was blind {share} of the soak, "
        "too long to judge the platform; fix what blinded it and soak again.",
        "verdict.status.pass": "pass",
        "verdict.status.fail": "fail",
        "verdict.status.not_observed": "not observed",
        "class.must_fix": "must fix",
        "class.limited_launch": "limited launch",
        "class.later_optimisation": "later optimisation",
        "crit.queue_explainable": "Queue and priority behaviour explainable",
        "crit.monitoring_linked": "Monitoring linked to tasks and tenants",
        "crit.quota_enforced": "Quota over-limit handled and recorded",
        "crit.failure_evidence": "Failure evidence chain (reasons, explanations, exit codes)",
        "crit.no_unreleased_resources": "No unreleased resources",
        "crit.no_log_loss": "No log loss",
        "crit.gpu_health": "GPU and node health",
        "class.gpu_health.must_fix": "The platform kept scheduling on a failed GPU, or fatal GPU "
        "faults recur on a node: jobs keep landing where they will fail.",
        "class.gpu_health.limited_launch": "GPUs had fatal faults or errors: open only the pools "
        "and nodes that stayed healthy.",
        "class.gpu_health.later_optimisation": "GPUs were throttled (thermal, power or "
        "hardware slowdown) while jobs ran: capacity is lower than it looks.",
        "ev.gpu_health": "{fatal} fatal GPU faults (fatal Xids, lost GPUs, row remap failures), "
        "{errors} GPU error conditions (ECC, remap or retirement pending, PCIe replays, "
        "NVLink errors), "
        "{throttled} throttled stretches, {in_service} nodes kept in service after a fatal "
        "fault; nodes: {nodes}.",
        "scope.gpu_health": "Only the pools and nodes whose GPUs stayed healthy; the others "
        "after their GPUs are replaced or cleared.",
        "crit.monitoring_lag_bound": "Monitoring lag within bound",
        "crit.no_persistent_unfairness": "No persistent unfairness",
        "crit.interventions_audited": "Manual interventions audited",
        "crit.tenant_isolation": "Tenant isolation",
        "class.queue_explainable.limited_launch": "Users will see waits nobody can explain; "
        "open to tenants who accept that while the platform's reasons are fixed.",
        "class.monitoring_linked.limited_launch": "Part of the fleet or of the tasks cannot be "
        "traced from a metric to a task and tenant; incidents there cannot be diagnosed.",
        "class.quota_enforced.must_fix": "A job ran beyond its tenant's quota: quotas are a "
        "promise to every other tenant.",
        "class.quota_enforced.limited_launch": "Over-quota jobs were held without the quota "
        "named as the reason: users cannot tell why they wait.",
        "class.failure_evidence.limited_launch": "Failed tasks lack the platform's reason or "
        "explanation, or the platform forgot them: users' failures cannot be diagnosed.",
        "class.no_unreleased_resources.must_fix": "GPUs or their memory stay held after jobs "
        "end: capacity drains away over weeks.",
        "class.no_unreleased_resources.later_optimisation": "Only GPUs allocated but idle: a "
        "usage pattern to tune, not a leak.",
        "class.no_log_loss.must_fix": "Log lines were lost: the evidence of failures is lost "
        "with them.",
        "class.no_log_loss.limited_launch": "Log lines were duplicated or reordered: logs can "
        "mislead.",
        "class.no_log_loss.later_optimisation": "Logs arrive late but complete.",
        "class.monitoring_lag_bound.limited_launch": "Monitoring lagged beyond the bound: "
        "alerts and dashboards are late when it matters.",
        "class.no_persistent_unfairness.limited_launch": "A tenant is disadvantaged window after "
        "window: shares are not what was promised.",
        "class.interventions_audited.later_optimisation": "The platform was changed by hand "
        "without a record; the change process must close the gap.",
        "class.tenant_isolation.must_fix": "One tenant could read another's work or use GPUs "
        "it was not given.",
        # evidence
        "ev.no_waits": "No probe task waited in a queue ({runs} tasks): queueing was never "
        "exercised.",
        "ev.waits": "{waited} of {runs} tasks waited; {unexplained} waited without a reason the "
        "platform's state explains ({share}; limit {limit_share}).",
        "ev.pending_reason": "Pending reason {reason_words}: {total_seconds} in all.",
        "ev.no_gpu_samples": "No GPU samples from node agents were stored.",
        "ev.coverage": "{sampled} of {known} scheduler GPU nodes sampled by agents; never "
        "sampled: {missing}.",
        "ev.runs_attributed": "{attributed} of {runs} tasks carry their tenant and window.",
        "ev.gpus_attributed": "{attributed} of {samples} GPU samples name the tenant whose job "
        "held the GPU (the agents' owner joined to the scheduler's job: Slurm's job id, the "
        "pod's UID).",
        "ev.busy_lag": "{runs} GPU-busy probes ran; Prometheus showed {findings} of them late or "
        "never.",
        "ev.no_probe_runs": "The {probe} probe did not run.",
        "ev.quota": "{runs} over-quota tasks: {blocked} held or refused with a reason "
        "({reasons}), {ran} ran anyway, {held_without_reason} held without the quota named.",
        "ev.no_failures": "No task failed and no failure probe ran.",
        "ev.failures": "{runs} failed or failure-probe tasks: {complete} with the platform's "
        "reason and explanation, {bare} without, {lost} forgotten by the platform, "
        "{misreported} failing another way than expected.",
        "ev.failure_logs": "Logs of tasks are checked through the log canaries (see No log loss).",
        "ev.failure_causes": "Failed tasks by cause: {application} application, {gpu_driver} "
        "GPU/driver, {node} node, {scheduling} scheduling policy, {platform_configuration} "
        "platform configuration, {unexplained} unexplained ({unexplained_share}; limit "
        "{limit_share}).",
        "ev.all_job_failure_causes": "Every tenant's failed jobs by cause: {application} "
        "application, {gpu_driver} GPU/driver, {node} node, {scheduling} scheduling policy, "
        "{platform_configuration} platform configuration, {unexplained} unexplained "
        "({unexplained_share}; limit {limit_share}).",
        "ev.run": "Task {run_id} ({probe}, {tenant}): {outcome}, {reason_words} — {message_words}",
        "ev.unreleased": "Leaks: {leaks}; allocated but idle: {idle} ({detectors}).",
        "ev.owner_state": "Owner state known on {known} of {nodes} nodes.",
        "ev.owner_state_not_known": "Owner state known on {known} of {nodes} nodes; not known "
        "(unknown for more than {limit_share} of the soak) on {not_known}: memory held after "
        "a job ended is not observed there.",
        "ev.owner_state_not_observed": "No node's agent knew whether its GPU processes' pods or "
        "jobs still ran ({nodes} nodes): memory held after a job ended was not observed.",
        "ev.layer_not_set_up": "The {layer} is not set up: what only it sees was not observed.",
        "ev.layer_blind": "The {layer} was blind {share} of the soak (limit {limit_share}): not "
        "observed.",
        "ev.logs": "{canaries} log canaries ran: {lost} lost some of their lines ({lost_lines} "
        "lines in all), "
        "{damaged} had duplicated or reordered lines, {late} were delivered late.",
        "ev.lag": "{conditions} lag or unreachable conditions; {over} lasted beyond "
        "{limit_seconds}; the longest {longest_seconds}.",
        "ev.fairness": "Window occurrences with fairness probes: {occurrences} "
        "(at least {needed} needed, all windows together).",
        "ev.unfair": "Disadvantaged: {tenants}.",
        "ev.unfair_stretch.weighted_share": "{tenant} got least from {start_at} to {end_at} "
        "({window}): {received_gpus} GPUs of its entitled {entitled_gpus} (its weighted fair "
        "share), {short_gpus} short.",
        "ev.unfair_stretch.nominal_quota": "{tenant} got least from {start_at} to {end_at} "
        "({window}): {received_gpus} GPUs of its entitled {entitled_gpus} (its queue's nominal "
        "quota and what it may borrow), {short_gpus} short.",
        "ev.unfair_holder": "Meanwhile {holder} held {beyond_gpus} GPUs beyond its share.",
        "ev.unfair_holder_priority": "{holder}'s GPUs by priority (QOS, priority class): {names}.",
        "ev.unfair_holder_user": "{holder}'s GPUs by user: {names}.",
        "ev.unfair_favoured": "{tenant}'s probes waited longer ({wait_seconds} against "
        "{others_wait_seconds}, {window}), yet {tenant} is not the disadvantaged one: it received "
        "{received_gpus} GPUs of its entitled {entitled_gpus}, more than its share, and its "
        "waits are the price of asking for more; {disadvantaged} received less.",
        "ev.no_scheduler_data": "No scheduler state and no tasks were stored.",
        "ev.interventions": "{recorded} recorded, {detected} detected, {unaudited} detected "
        "without a record.",
        "ev.unaudited": "Not recorded: {action} on {subject} at {at} ({reason}).",
        "ev.isolation": "{runs} isolation probe runs, {breaches} let a read through.",
        "ev.gpu_isolation": "{findings} times a process ran on a GPU its pod or job was not given "
        "(gpu_not_assigned: the node agents compare each process with the kubelet's or slurmd's "
        "assignments).",
        # scope
        "scope.must_fix": "Blocker: {criterion}.",
        "scope.queue_explainable": "Tell tenants that some waits cannot yet be explained; "
        "no wait-time promise.",
        "scope.monitoring_linked": "Only nodes and workloads the monitoring covers; no SLO on "
        "the rest.",
        "scope.quota_enforced": "Tenants are told over-quota jobs may wait without saying why.",
        "scope.failure_evidence": "Only tenants able to debug failures with their own tooling.",
        "scope.monitoring_lag_bound": "Alerts are not relied on for paging until lag is within "
        "bound; on-call watches dashboards.",
        "scope.no_persistent_unfairness": "Guaranteed quotas instead of fair share for the "
        "disadvantaged tenants and windows.",
        "scope.no_log_loss": "Tenants keep their own copies of logs that matter.",
        "scope.not_observed": "Not shown by the soak, so not promised: {criterion}.",
        "scope.not_exercised": "Not exercised by the soak, so not promised: probe {probe} never "
        "ran ({why}).",
        "scope.not_together": "Not exercised as planned, so not promised: probe {probe} never "
        "had its {copies} copies in flight together (at most {most}).",
        "scope.partly_exercised": "Partly exercised: probe {probe} ran {runs} of the {due} "
        "copies that came due; most of the rest were skipped: {why}.",
        "scope.blind": "The observer was blind {share} of the soak (limit {limit_share}): what "
        "it did not see is not evidence of health.",
        "scope.later": "After launch: {criterion}.",
        "scope.rule": "A criterion is judged only on what was observed: it passes only when "
        "every layer it needs (scheduler, node agents, NVML, Prometheus, log backend) was set up "
        "and blind no more than {layer_limit_share} of the soak, else it is not observed, never "
        "passed; over {blind_limit_share} of blind time in all, the verdict is not decidable.",
        "scope.alerts_incomplete": "Alert counts are incomplete: Alertmanager could not be read "
        "for {blind_seconds} of the soak, when a missing alert means not seen, not none.",
        # tiers and subjects
        "sec.tiers": "Three-tier summary",
        "tier.must_fix": "Must fix",
        "tier.limited_launch": "Limited launch",
        "tier.later_optimisation": "Later optimisation",
        "tier.item": "{criterion}: {evidence} Concerns {subject}.",
        "subject.tenants": "tenants {names}",
        "subject.pools": "pools {names}",
        "subject.nodes": "nodes {names}",
        "subject.jobs": "tasks {names}",
        "subject.pipelines": "pipelines {names}",
        "subject.windows": "windows {names}",
        "subject.separator": "; ",
        "subject.none": "the whole platform",
        "sec.later": "Later optimisations from the data",
        "crit.low_utilisation": "GPU utilisation against allocation",
        "crit.long_quota_holds": "Work held by its quota",
        "class.low_utilisation.later_optimisation": "GPUs are allocated far more than they are "
        "used: jobs hold GPUs they barely use; right-size requests or share GPUs.",
        "class.long_quota_holds.later_optimisation": "Work waits long on its tenant's own quota: "
        "the quota is smaller than the work; resize it.",
        "ev.low_utilisation": "Pool {pool}: GPU utilisation averaged {utilisation_share} against "
        "{allocated_share} of its GPUs allocated (below {limit_share} of the allocation).",
        "ev.quota_hold": "Tenant {tenant}: work held by its quota for up to {longest_seconds} "
        "(bound {limit_seconds}).",
        "scope.where": "{criterion} concerns {subject}.",
        "scope.may_go": "Not named by any blocking or limiting criterion, so where a launch "
        "can begin: {subject}.",
        # re-verification
        "reverify.queue_explainable": "{criterion}: rerun {probes} under load on {subject} for "
        "{watch_seconds}; pass when the platform explains nearly every wait (findings of "
        "{detectors} within the share).",
        "reverify.monitoring_linked": "{criterion}: with agents on every GPU node, rerun {probes} "
        "on {subject} for {watch_seconds}; pass when every node is sampled and no finding of "
        "{detectors} (gpu_busy_lag) opens.",
        "reverify.quota_enforced": "{criterion}: rerun {probes} for every tenant with a quota on "
        "{subject} for {watch_seconds}; pass when every run is refused or held with the quota "
        "named.",
        "reverify.failure_evidence": "{criterion}: rerun {probes} on {subject} for "
        "{watch_seconds}; pass when each ends the expected way with the platform's reason and "
        "explanation.",
        "reverify.no_unreleased_resources": "{criterion}: with agents on every node reading their "
        "owner directory (agent.owners: the kubelet or slurmd), rerun {probes} on {subject} for "
        "{watch_seconds}; pass when no finding of {detectors} opens there.",
        "reverify.no_log_loss": "{criterion}: rerun {probes} through the production log "
        "pipeline, across log rotations, on {subject} for {watch_seconds}; pass when no finding "
        "of {detectors} opens there.",
        "reverify.monitoring_lag_bound": "{criterion}: with controller.prometheus_url set, rerun "
        "{probes} on {subject} for {watch_seconds}; pass when no finding of {detectors} outlasts "
        "the bound.",
        "reverify.no_persistent_unfairness": "{criterion}: rerun {probes} under contention on "
        "{subject} for {occurrences} occurrences of each window; pass when no finding of "
        "{detectors} opens.",
        "reverify.interventions_audited": "{criterion}: record every manual change on {subject} "
        "with `observer intervention add` for {watch_seconds}; pass when every detected "
        "intervention has its record.",
        "reverify.tenant_isolation": "{criterion}: with agents reading their owner directory on "
        "every node, rerun {probes} for every tenant on {subject} for {watch_seconds}; pass when "
        "every read of another tenant's work is refused and no finding of {detectors} opens.",
        "reverify.gpu_health": "{criterion}: with agents reading Xid events, rerun {probes} on "
        "{subject} for {watch_seconds}; pass when no finding of {detectors} opens there and each "
        "faulty node leaves service within detectors.gpu_in_service.grace_seconds.",
        "reverify.add_to_plan": "The soak's plan does not run {probes}: add them to "
        "controller.plan first.",
        "reverify.rerun": "Then soak again for at least {days} days covering every window "
        "({windows}) and build the verdict again.",
        # severities, outcomes, the platform's words, findings, Xid meanings (observer/gpu/xid.py)
        "severity.info": "info",
        "severity.warning": "warning",
        "severity.critical": "critical",
        "outcome.passed": "passed",
        "outcome.failed": "failed",
        "outcome.rejected": "rejected",
        "outcome.timed_out": "timed_out",
        "outcome.cancelled": "cancelled",
        "outcome.lost": "lost",
        "outcome.no_gpu": "no_gpu",
        "xid_meaning": "{xid_meaning}",
        "expectation.succeed": "succeed",
        "expectation.fail": "fail",
        "expectation.fail_to_start": "fail_to_start",
        "expectation.oom": "oom",
        "expectation.blocked": "blocked",
        "expectation.denied": "denied",
        "quote.platform": "“{text}”",
        "finding.details": "{head}: {details}",
        "finding.separator": ", ",
        "finding.stored": "{summary}",
        "finding.nvml_unavailable": "NVML unavailable on {node}: the node's GPUs are not observed",
        "finding.gpu_lost": "GPU {gpu} on {node} is lost (fell off the bus)",
        "finding.memory_without_process": "GPU {gpu} on {node} holds {memory} above its baseline "
        "with no process listed",
        "finding.owner_state_unknown": "Owner state unknown on {node}: {source} cannot be read, so "
        "no process's owner is known to run or to have ended",
        "finding.allocated_idle.assigned": "{owner} was given GPU {gpu} on {node} and runs nothing "
        "on it",
        "finding.allocated_idle.process": "{owner} holds {memory} on GPU {gpu} while the GPU does "
        "nothing",
        "finding.vanished_process": "pid {pid} is listed on GPU {gpu} ({memory}) but no longer "
        "exists on the host",
        "finding.orphan_process": "pid {pid} ({program_words}) uses GPU {gpu} ({memory}) and "
        "belongs to no pod or job",
        "finding.orphan_process.unassigned": "pid {pid} ({program_words}) uses GPU {gpu} "
        "({memory}) and belongs to no pod or job, and the GPU is assigned to nobody",
        "finding.unreleased_memory": "pid {pid} still holds {memory} on GPU {gpu} after its owner "
        "{owner} ended",
        "finding.gpu_not_assigned": "{owner} runs pid {pid} ({program_words}) on GPU {gpu}, which "
        "the {source} did not give it",
        "finding.gpu_not_assigned.given_other": "{owner} runs pid {pid} ({program_words}) on GPU "
        "{gpu}, which the {source} did not give it but gave {holders}",
        "finding.gpu_ecc_uncorrected": "GPU {gpu} on {node}: {errors} new uncorrected ECC error(s)",
        "finding.gpu_row_remap_pending": "GPU {gpu} on {node} has a row remap pending: it needs a "
        "reset before the faulty memory row is replaced",
        "finding.gpu_row_remap_failed": "GPU {gpu} on {node} failed to remap a memory row: it "
        "needs service",
        "finding.gpu_retired_pages_pending": "GPU {gpu} on {node} has a page retirement pending: "
        "it needs a reset",
        "finding.gpu_clock_slowdown": "GPU {gpu} on {node} is slowed ({reasons}) while {owners} "
        "runs on it",
        "finding.gpu_clock_slowdown.unowned": "GPU {gpu} on {node} is slowed ({reasons}) while a "
        "process runs on it",
        "finding.gpu_pcie_replay_rate": "GPU {gpu} on {node}: {per_minute} PCIe replays per minute",
        "finding.gpu_nvlink_errors": "NVLink errors on GPU {gpu} of {node}",
        "finding.gpu_nvlink_errors.recovery": "{errors} NVLink recovery error(s)",
        "finding.gpu_nvlink_errors.rate": "{per_minute} NVLink replay and CRC errors per minute",
        "finding.gpu_xid": "Xid {xid} on GPU {gpu} ({pci_bus_id}) of {node}: {xid_meaning} "
        "[{xid_class_id}]",
        "finding.gpu_xid.fatal": "Xid {xid} on GPU {gpu} ({pci_bus_id}) of {node}: {xid_meaning} "
        "[{xid_class_id}, fatal]",
        "finding.gpu_xid.process": "pid {pid} ({program_words}) of {owner}",
        "finding.gpu_xid.process_unowned": "pid {pid} ({program_words}), owner unknown",
        "finding.gpu_xid.running": "running {owners}",
        "finding.unhealthy_gpu_in_service": "{node} is still {state_words} {fault_age_seconds} "
        "after a fatal GPU fault ({fault}); the scheduler placed {jobs} job(s) there since",
        "finding.gpu_unusable": "Node {node} was allocated GPUs for probe {probe} ({job_id}) but "
        "its program found no usable GPU: no NVIDIA driver or no device visible",
        "finding.allocated_without_job": "{node}: the scheduler counts {allocated} GPUs allocated "
        "but its jobs hold {held}",
        "finding.kill_task_failed": "{node} is {state_words}: {reason_words}",
        "finding.stuck_terminating": "{job_id} of {tenant} still holds {gpus} GPUs on {node} "
        "{grace_seconds} after the platform began ending it",
        "finding.probe_unreleased": "Probe {probe} ({tenant}, job {job_id}) ended; {gpus} GPU(s) "
        "on {node} are not back to idle {grace_seconds} later",
        "finding.unexplained_wait.no_reason": "{job} of {tenant} is pending and the platform gives "
        "no reason",
        "finding.unexplained_wait.gpus_free": "{job} of {tenant} waits for {reason_words} while "
        "{nodes} schedulable node(s) have {gpus} GPU(s) free",
        "finding.unexplained_wait.nothing_ahead": "{job} of {tenant} waits for {reason_words} "
        "while no other job is pending",
        "finding.unexplained_wait.quota_left": "{job} of {tenant} waits for its quota "
        "({reason_words}) while the tenant holds {held} of its {quota} GPUs",
        "finding.persistent_unfairness": "Tenant {tenant} was disadvantaged in {bad} of the last "
        "{weighed} windows ({windows})",
        "finding.log_loss": "Log canary {run_id} via {pipeline}",
        "finding.log_loss.missing": "{lines} of {expected} lines missing: seq {seqs}",
        "finding.log_loss.missing.more": "{lines} of {expected} lines missing: seq {seqs} and "
        "{more} more ranges",
        "finding.log_loss.duplicated": "{lines} duplicate deliveries",
        "finding.log_loss.out_of_order": "{lines} lines out of order",
        "finding.log_loss.torn": "{lines} torn lines",
        "finding.log_loss.unexpected": "sequence numbers the canary never wrote: {seqs}",
        "finding.log_delivery_latency": "Log canary {run_id} via {pipeline}: p95 delivery latency "
        "{p95_seconds} (limit {limit_seconds})",
        "finding.monitoring_lag.heartbeat_absent": "The observer's heartbeat cannot be read back "
        "through Prometheus: what the observer exports does not reach it",
        "finding.monitoring_lag.heartbeat_late": "Metrics reach Prometheus {lag_seconds} late: the "
        "heartbeat read back is that old",
        "finding.monitoring_lag.no_data": "{series} has no data in Prometheus",
        "finding.monitoring_lag.stale": "{stale} of {total} {series} series are stale, the oldest "
        "last sampled {age_seconds} ago",
        "finding.monitoring_lag.scrape": "Prometheus does not get {job} {instance}",
        "finding.monitoring_lag.scrape_failed": "its last scrape failed ({error_words})",
        "finding.monitoring_lag.scrape_failed_silent": "its last scrape failed (no error given)",
        "finding.monitoring_lag.scrape_old": "it was last scraped {age_seconds} ago",
        "finding.monitoring_lag.flatline": "{series} is flat at {value} in Prometheus while the "
        "agent read {values} different values",
        "finding.monitoring_lag.gpu_busy_late": "GPU {gpu} showed busy in Prometheus {lag_seconds} "
        "after GPU-busy probe {run_id} started",
        "finding.monitoring_lag.gpu_busy_missing": "GPU {gpu} is still not busy in Prometheus "
        "{lag_seconds} after GPU-busy probe {run_id} started",
        "finding.prometheus_unreachable": "Prometheus could not be read, monitoring lag is "
        "unknown: {error_words}",
        "finding.agent_unreachable": "Agent {agent} cannot be read: its node's GPUs are not "
        "observed ({error_words})",
        "finding.log_pipeline_unreachable": "Log pipeline {pipeline} could not be read, log loss "
        "is unknown: {error_words}",
        "finding.store_unreachable": "The store {store} failed; what the observer saw is kept in "
        "memory until it is back: {error_words}",
        "finding.alertmanager_unreachable": "Alertmanager cannot be read: alerts firing now are "
        "not counted ({error_words})",
        "xid.8": "GPU stopped processing (channel idle timeout)",
        "xid.13": "Graphics engine exception",
        "xid.31": "GPU memory page fault",
        "xid.32": "Invalid or corrupted push buffer stream",
        "xid.38": "Driver firmware error",
        "xid.43": "GPU stopped processing (channel reset after a user application fault)",
        "xid.44": "Graphics engine fault during context switch",
        "xid.45": "Preemptive cleanup after earlier errors (the channel's processes were stopped)",
        "xid.46": "GPU stopped processing",
        "xid.48": "Double-bit ECC error",
        "xid.54": "Auxiliary power is not connected",
        "xid.56": "Display engine error",
        "xid.57": "Error programming video memory interface",
        "xid.58": "Unstable video memory interface detected",
        "xid.61": "Internal micro-controller breakpoint or warning",
        "xid.62": "Internal micro-controller halt",
        "xid.63": "ECC page retirement or row remapping recorded",
        "xid.64": "ECC page retirement or row remapping recording failed",
        "xid.68": "Video processor exception",
        "xid.69": "Graphics engine class error",
        "xid.74": "NVLink error",
        "xid.79": "GPU has fallen off the bus",
        "xid.92": "High single-bit ECC error rate",
        "xid.94": "Contained ECC error (only the application that touched the memory is affected)",
        "xid.95": "Uncontained ECC error (every application on the GPU is affected)",
        "xid.109": "Context switch timeout",
        "xid.110": "Security fault",
        "xid.119": "GSP RPC timeout",
        "xid.120": "GSP error",
        "xid.121": "C2C link corrected error",
        "xid.122": "SPI PMU RPC read failure",
        "xid.123": "SPI PMU RPC write failure",
        "xid.124": "SPI PMU RPC erase failure",
        "xid.140": "Unrecovered ECC error",
        "xid.143": "GPU initialisation failure",
        "xid.144": "NVLink SAW error",
        "xid.145": "NVLink RLW error",
        "xid.146": "NVLink TLW error",
        "xid.147": "NVLink TREX error",
        "xid.148": "NVLink NVLPW control error",
        "xid.149": "NVLink NETIR error",
        "xid.154": "GPU recovery action changed",
        "xid.unknown": "not in the Xid catalogue table",
        # the demo's console (observer/demo/run.py)
        "demo.started": "observer demo: {days} simulated day(s) from {start} ({timezone}); "
        "metrics on {url}",
        "demo.not_run": "; not run: {left_out}",
        "demo.settings": "settings that differ from the defaults (in {config}):",
        "demo.progress": "{hour}  runs {runs}  in flight {in_flight}  open findings {open}",
        "demo.open_detectors": " ({detectors})",
        "demo.when": "{weekday} {time}",
        "demo.reports": "Reports:",
        "demo.rebuilt": "Rebuilt from the demo's settings:",
        "demo.score": "Score (per fault and per detector): {file}",
        "demo.faults": "Injected faults and what reported them:",
        "demo.not_injected": "NOT INJECTED",
        "demo.never_on": "it was never switched on",
        "demo.quiet": "quiet",
        "demo.confounder": "(a confounder: must produce nothing)",
        "demo.missed": "MISSED",
        "demo.found": "found ",
        "demo.opened": "{detector} {subject} opened {when}",
        "demo.nothing_reported": "nothing reported {detector} {subject}",
        "demo.not_subject": " (not {subject})",
        "demo.miscaused": "run {run}: the report gives cause {reported}, not {cause}",
        "demo.caused": "run {run}: cause {cause} in the report",
        "demo.unexpected": "Findings no injected fault explains:",
        "demo.while_on": " (while {confounders} was on)",
        "demo.nothing_unexpected": "No finding that was not injected.",
        "demo.weekday.0": "Mon",
        "demo.weekday.1": "Tue",
        "demo.weekday.2": "Wed",
        "demo.weekday.3": "Thu",
        "demo.weekday.4": "Fri",
        "demo.weekday.5": "Sat",
        "demo.weekday.6": "Sun",
        "demo.scenario": "scenario {name}: {days} day(s) from {start}, seed {seed}, "
        "{faults} faults",
        "demo.windows": "timezone {timezone}; windows {windows}",
        "demo.tenant": "{name} weight {weight}",
        "demo.tenant_quota": " quota {gpus} GPUs",
        "demo.tenants": "tenants {tenants}; load {busy}x the GPUs in windows, {quiet}x outside",
        "demo.plan": "plan {entries} entries of {count} probes ({probes})",
        "demo.simulated": "simulated {nodes} nodes x {gpus} GPUs in pools {pools}",
        "demo.fairness": "fairness persistence {k} of {m} windows (default {default_k} of "
        "{default_m}: a day has two)",
    },
    "zh-CN": {
        "word.not_observed": "未观测",
        "word.incomplete": "不完整",
        "word.none": "无",
        "word.unknown": "未知",
        "word.yes": "是",
        "word.no": "否",
        "word.not_set_up": "未配置",
        "title.daily": "每日运行摘要：{day}",
        "title.daily_partial": "每日运行摘要：{day}（截至目前）",
        "note.partial": "部分数据：当日截至 {at}。各项数字仍会变化；"
        "当日结束后将生成正式的每日摘要。",
        "title.verdict": "上线评估结论",
        "label.timezone": "平台时区：{timezone}",
        "label.period": "统计区间：{start} 至 {end}",
        "label.soak_started": "稳定性观察开始：{start}",
        "label.soak": "稳定性观察期：{start} 至 {end}（{length_seconds}）",
        "title.verdict_provisional": "上线评估结论（临时）",
        "note.provisional": "临时结论：基于截至 {at} 的观察期数据，最后一天尚未结束。"
        "各评估项与结论建议仍可能变化。",
        "col.figure": "指标",
        "col.day": "当日",
        "col.previous_day": "前一日",
        "col.soak_to_date": "观察期至今",
        "fig.tasks_total": "探测任务数",
        "fig.tasks_failed": "失败任务数",
        "fig.tasks_cancelled": "取消任务数",
        "fig.tasks_unfinished": "未结束任务数",
        "fig.all_jobs_total": "全部作业结束数",
        "fig.all_jobs_failed": "全部作业失败数",
        "fig.all_jobs_cancelled": "全部作业取消数",
        "fig.all_jobs_observer_total": "其中观测器自身的探测任务",
        "fig.all_jobs_observer_failed": "其中观测器探测任务（含预期失败）",
        "fig.queue_wait_avg": "平均排队等待",
        "fig.queue_wait_p50": "排队等待 p50",
        "fig.queue_wait_p95": "排队等待 p95",
        "fig.gpu_util_avg": "GPU 利用率（平均）",
        "fig.gpu_allocated_share": "GPU 已分配（调度器）",
        "fig.gpu_busy_share": "GPU 使用中（节点代理）",
        "fig.owner_state_known": "已知属主状态的节点（节点代理）",
        "value.owner_state_known": "{nodes} 个节点中 {known} 个",
        "fig.alerts_total": "告警次数",
        "fig.interventions_total": "人工干预次数",
        "fig.incidents_opened": "事件数（同一原因的发现合并）",
        "sub.incidents": "事件",
        "note.incidents": "{incidents} 个事件共 {findings} 个发现：涉及同一数据管道、节点、"
        "作业或任务，且在 10 分钟内相继出现的发现合并为一个事件（例如一次 Prometheus "
        "停滞被各项检查同时发现；一次资源泄漏同时在节点、探测和调度器三层被发现）。"
        "包含多个发现的事件：",
        "col.findings": "发现数",
        "col.detectors": "检测器",
        "fig.findings_opened": "新发现问题",
        "fig.findings_closed": "已关闭问题",
        "fig.findings_still_open": "仍未关闭问题",
        "fig.findings_events": "单次事件数",
        "fig.blind_time": "观测盲区时长",
        "sec.headline": "关键指标",
        "sec.charts": "图表",
        "sec.tasks": "任务与失败",
        "sec.queue": "排队等待",
        "sec.gpu": "GPU 利用率",
        "sec.alerts": "告警",
        "sec.interventions": "人工干预",
        "sec.findings": "发现的问题",
        "sec.blind": "观测盲区",
        "sec.deliveries": "报告投递",
        "sec.criteria": "评估项",
        "sec.recommendation": "结论建议",
        "sec.scope": "范围与条件",
        "sec.reverification": "复验计划",
        "sec.days": "逐日数据",
        "sub.failures": "按原因分组的探测失败",
        "sub.by_tenant": "按租户",
        "sub.by_window": "按时间窗口",
        "sub.by_probe": "按探测类型",
        "sub.coverage": "探测覆盖",
        "note.coverage": "到期的每个探测副本要么已运行（已提交），要么被跳过并注明原因。"
        "最多同时在途：同一租户该探测同时在途的最多运行数，突发探测需要其副本同时在途。",
        "col.due": "到期",
        "col.skipped": "已跳过",
        "col.together": "最多同时在途",
        "cell.skipped": "{count}：{why}",
        "cell.ran_of_due": "{due} 个中运行 {runs} 个",
        "coverage.why.budget": "超出探测 GPU 预算",
        "coverage.why.no_other_tenant": "没有其他租户可供尝试",
        "coverage.why.backend_error": "无法访问平台",
        "coverage.why.not_due": "没有到期的启动：控制器运行期间其时间窗口从未开启",
        "sub.all_jobs": "全部作业（调度器队列）",
        "sub.all_jobs_tasks": "全部租户的全部作业（调度器所列）",
        "sub.all_jobs_by_tenant": "按租户的全部作业（作业数 / 失败数）",
        "sub.all_jobs_failures": "全部作业的失败，按失败原因类别和调度器给出的原因分组",
        "sub.by_pool": "按节点池：已分配与实际使用",
        "sub.by_detector": "按检测器",
        "sub.evidence": "证据",
        "sub.restarts": "观测器重启",
        "col.outcome": "结果",
        "col.reason": "原因",
        "col.count": "次数",
        "col.probes": "探测",
        "col.tenants": "租户",
        "col.explanation": "说明（出处）",
        "col.failure_cause": "失败原因类别",
        "col.observer_probes": "其中观测器探测任务",
        "col.cause_evidence": "证据",
        "cause.application": "应用（代码或数据）",
        "cause.gpu_driver": "GPU / 驱动",
        "cause.node": "节点",
        "cause.scheduling": "调度策略",
        "cause.platform_configuration": "平台配置",
        "cause.unexplained": "原因不明",
        "col.runs_listed": "任务编号",
        "col.run": "任务编号",
        "col.queue": "队列",
        "col.asked": "申请资源",
        "col.expected": "预期结果",
        "col.submitted": "提交时间",
        "col.started": "开始时间",
        "col.ended": "结束时间",
        "col.queue_wait": "排队等待",
        "col.run_time": "运行时长",
        "col.nodes": "节点",
        "cell.asked": "{gpus} 卡 × {nodes} 节点",
        "cell.waited_never_started": "≥ {waited_seconds}（未开始）",
        "word.unfinished": "未结束",
        "sec.task_records": "当日全部任务",
        # 租户、队列与配额
        "sec.tenants": "租户、队列与配额",
        "col.weight": "权重",
        "col.quota_configured": "配额（配置，GPU）",
        "col.quota_at_start": "当日开始时的配额（平台最近一次变更）",
        "col.quota_changes": "配额变更",
        "col.over_quota_attempts": "超配额提交",
        "col.reclaimed_longest": "配额释放用时（最长）",
        "col.utilisation_avg": "所用 GPU 利用率（平均）",
        "col.all_jobs_wait_avg": "全部作业排队等待（平均）",
        "col.all_jobs_wait_p95": "全部作业排队等待（p95）",
        "note.tenant_utilisation": "全部作业排队等待指该租户当日结束且曾启动的每个作业"
        "从提交到启动的时长，取自平台的作业列表。"
        "利用率指各租户作业占用的 GPU 在节点代理采样时的利用率；"
        "按资源池和时间窗口的数据见 GPU 一节。采样只记录租户，不记录任务类型，"
        "因此没有按任务类型的利用率。",
        "sub.quota_changes": "当日配额与限制变更",
        "col.before": "变更前",
        "col.after": "变更后",
        "word.not_recorded": "无记录",
        "sub.over_quota": "超配额提交与配额释放",
        "col.platform_words": "平台原话",
        "col.reclaimed_after": "配额内探测作业启动用时",
        "note.reclaim": "每次超配额探测作业被拒绝，或被挂起后取消，观察器都会以该租户身份提交一个"
        "配额内的单卡探测作业；用时从超配额作业结束算起，到该探测作业启动为止，"
        "包括该租户自身运行中的作业占满配额的时间。租户自身用量已腾出空间后，"
        "若超过 controller.quota_reclaim_seconds 仍因配额排队等待，即记为 "
        "quota_not_reclaimed 问题。",
        "sub.received_entitled": "各窗口实得 GPU 与应得 GPU",
        "col.received_gpus": "实得 GPU（平均）",
        "col.entitled_gpus": "应得 GPU（平均）",
        "col.received_share": "实得 / 应得",
        "note.received_entitled": "公平性规则对当日结束的每个窗口的评估：取该租户作业排队等待超过 "
        "detectors.fairness.disadvantage_wait_seconds 的队列采样求平均；从未等待这么久的租户即为"
        "未观测。",
        "cell.quota_since": "{change}（自 {at} 起，由 {by} 变更）",
        "cell.not_reclaimed": "未释放",
        "cell.reclaim_waiting": "仍在排队等待（{reason}）",
        "cell.reclaim_never": "始终未启动：{outcome}（{reason}）",
        "note.task_records": "当日提交的每个探测任务一行，按提交顺序排列（本地时间）；"
        "未开始的任务显示其已等待的时长（下限）。相同内容见本报告旁的 CSV 文件，"
        "也可运行 `observer runs --date YYYY-MM-DD` 查看。",
        "label.filter_tasks": "筛选任务（探测、租户、结果、任务编号……）",
        "note.explanations": "“平台：”为平台给出的原因与消息原文；“观测器：”为观测器依据其记录"
        "作出的判断（对超时放弃的任务：等待了多久、因何等待）。每个任务编号都链接到"
        "“当日全部任务”中的对应行。",
        "why.platform": "平台：{words}",
        "why.none": "无说明：平台未给出原因、消息或退出码",
        "why.no_gpu": "观测器：探测程序在 {nodes} 上找不到可用的 GPU（平台：{words}）；"
        "分配了 GPU 却无法使用的节点记为 gpu_unusable 发现",
        "why.observer": "观测器：{reason}——{message_words}",
        "why.unexpected": "观测器：预期为“{expectation}”，实际以其他方式结束；平台：{words}",
        "why.timed_out_pending": "观测器：在时限 {deadline_seconds} 内未开始，"
        "被平台以{reason_words}挂起 {reason_seconds}；已取消",
        "why.timed_out_silent": "观测器：在时限 {deadline_seconds} 内未开始，"
        "平台未给出原因；已取消",
        "why.timed_out_running": "观测器：已开始，但在时限 {deadline_seconds} 内未结束"
        "（已运行 {run_seconds}）；已取消",
        "col.runs": "任务数",
        "col.avg": "平均",
        "col.p50": "p50",
        "col.p95": "p95",
        "col.max": "最大",
        "col.tenant": "租户",
        "col.jobs": "作业数",
        "col.window": "时间窗口",
        "col.probe": "探测",
        "col.pending_jobs_avg": "排队作业（平均）",
        "col.pending_gpus_avg": "排队 GPU（平均）",
        "col.running_gpus_avg": "运行 GPU（平均）",
        "col.longest_wait": "最长等待",
        "col.pool": "节点池",
        "col.gpus": "GPU 数（平均）",
        "col.allocated": "已分配",
        "col.used": "使用中",
        "col.utilization": "利用率（平均）",
        "col.samples": "样本数",
        "col.distribution": "分布（0–100%，每 10% 一档）",
        "col.name": "告警",
        "col.severity": "级别",
        "col.at": "时间",
        "col.source": "来源",
        "col.action": "操作",
        "col.by": "操作人",
        "col.subject": "对象",
        "col.audited": "登记人",
        "col.detector": "检测器",
        "col.opened": "新开",
        "col.closed": "关闭",
        "col.still_open": "仍开",
        "col.events": "单次事件",
        "col.status": "状态",
        "col.summary": "摘要",
        "col.duration": "时长",
        "col.cause": "原因",
        "col.from": "开始",
        "col.to": "结束",
        "col.down_from": "停止于",
        "col.up_at": "恢复于",
        "col.criterion": "评估项",
        "col.class": "分类",
        "col.date": "日期",
        "col.failed": "失败",
        "col.findings_new": "新问题",
        "col.blind": "盲区时长",
        "col.report": "报告",
        "col.channel": "渠道",
        "col.attempts": "尝试次数",
        "col.detail": "渠道答复",
        "col.allocated_gpus_avg": "已分配 GPU（平均，调度器）",
        "col.busy_share": "使用中",
        "note.all_jobs_not_observed": "当日没有任何对调度器已结束作业的查询："
        "全部作业的任务数与失败数未观测（探测任务见下）。",
        "note.all_jobs_incomplete": "不完整：查询只覆盖了当日的 {listed}，"
        "或调度器可能已遗忘部分作业（{notes}）。以上计数为下限。",
        "note.tenant_util_not_observed": "按租户的 GPU 利用率未观测：没有 GPU 样本能归属到租户的作"
        "业（在 Kubernetes 上，节点代理只知道 GPU 进程所属 Pod 的 UID，而调度器的作业不带该 UID）"
        "。各租户已分配的 GPU 数来自调度器队列。",
        "note.tenant_util": "使用：各租户作业在采样时占用的 GPU 的利用率（节点代理的进程归属与调度"
        "器作业关联；{samples} 个样本中 {attributed} 个已归属）。已分配：各租户运行中的 GPU 数，来"
        "自调度器队列。",
        "note.deliveries_failed": "本时段对此前报告的 {total} 次投递中有 {failed} 次失败；所有报"
        "告仍保存在报告目录中。",
        "note.deliveries_all": "全部投递成功：本时段对此前报告共投递 {total} 次。",
        "note.deliveries_none": "本时段没有投递任何报告。",
        "note.deliveries_no_channels": "未配置投递渠道（reports.delivery）：报告只写入报告目录。",
        "note.alerts_blind": "本时段有 {blind_seconds} 无法读取 Alertmanager：其间触发的告警未计"
        "入。",
        "note.no_gpu_samples": "未保存节点代理的 GPU 样本：利用率未观测。",
        "note.alerts_not_set_up": "未配置告警来源（reports.alertmanager_url）：告警未观测。",
        "note.blind_not_set_up": "未配置，因此从未观测：{sources}。",
        "note.scheduler_gaps": "调度器盲区：相邻两次保存的调度器快照间隔超过 {limit_seconds} 的时"
        "段。",
        "note.no_items": "无。",
        "note.unfinished_wait": "{count} 个任务未启动即结束（被拒绝、被拦截或启动失败），无排队时"
        "间。",
        "note.gpu_coverage": "调度器中 {known} 个节点有 {sampled} 个被节点代理采样；"
        "{unread} 个样本未能读取利用率。",
        "sec.health": "GPU 与节点健康",
        "sec.inference": "推理服务",
        "inference.services": "在平台上持续运行：{services}。每次检查向每个就绪副本发送一个请求。",
        "sub.inference_windows": "各时间窗口的可用性与延迟",
        "sub.inference_phases": "启动、扩容与滚动重启",
        "inference.whole_day": "全天",
        "inference.outside_windows": "不在任何时间窗口内",
        "inference.ms": "{ms} 毫秒",
        "inference.replicas": "{before} → {after}",
        "inference.phase.start": "启动",
        "inference.phase.scale_out": "扩容",
        "inference.phase.restart": "滚动重启",
        "note.inference_availability": "可用性：服务启动完成后，至少有一个就绪副本作出应答的"
        "检查所占比例。延迟：已应答请求从发送到收到最后一个字节的时间。",
        "col.availability": "可用性",
        "col.requests": "请求数",
        "col.errors": "错误数",
        "col.p99": "p99",
        "col.phase": "变更",
        "col.replicas": "副本数",
        "col.time_to_ready": "就绪耗时",
        "col.waited_for_node": "等待调度",
        "col.unavailable": "期间不可用时长",
        "sub.health_gpus": "出现故障的 GPU（按节点）",
        "sub.health_xids": "Xid 错误码",
        "sub.health_reaction": "平台对致命 GPU 故障的处置",
        "col.node": "节点",
        "col.gpu": "GPU",
        "col.xids": "Xid 错误码",
        "col.gpu_conditions": "状况",
        "col.throttled_gpu_hours": "降频 GPU·小时",
        "col.xid": "Xid",
        "col.meaning": "含义（NVIDIA 目录）",
        "col.fatal": "致命",
        "col.fault": "致命故障",
        "col.fault_at": "首次出现",
        "col.out_of_service_after": "退出服务用时",
        "col.kept_in_service_since": "超过宽限期仍在服务，自",
        "col.jobs_placed": "故障后调度到该节点的作业",
        "note.health_not_observed": "未保存节点代理的 GPU 样本：GPU 健康状况未观测。",
        "note.health_healthy": "节点代理采样的 {sampled} 个节点上的 GPU 均保持健康：没有 Xid、"
        "ECC、内存修复、PCIe、降频或 GPU 丢失问题。",
        "note.health_healthy_but": "节点代理采样的 {sampled} 个节点上的 GPU 均保持健康：没有 Xid、"
        "ECC、内存修复、PCIe、降频或 GPU 丢失问题。以下节点未被采样，健康状况未知：{nodes}。",
        "note.health_not_sampled": "以下节点未被采样，健康状况未知：{nodes}。",
        "note.health_throttled": "当日降频 {hours} GPU·小时（作业运行时发生硬件、温度或功耗降速），"
        "只计当日之内。",
        "health.xid_cell": "{code} ×{count}（{xid_class}）",
        "health.xid_cell_fatal": "{code} ×{count}（{xid_class}，致命）",
        "health.open_at_end": "{condition}（仍未恢复）",
        "health.not_out_of_service": "未见退出服务",
        "health.jobs": "{count} 个：{jobs}",
        "health.job": "{job_id}（{tenant}，{started_at}）",
        "health.cond.gpu_xid": "Xid",
        "health.cond.gpu_ecc_uncorrected": "不可纠正 ECC 错误",
        "health.measured.gpu_ecc_uncorrected": "不可纠正 ECC 错误 {before} → {after}",
        "health.cond.gpu_row_remap_pending": "行重映射待完成（需重置 GPU）",
        "health.cond.gpu_row_remap_failed": "行重映射失败（需维修）",
        "health.cond.gpu_retired_pages_pending": "页退役待完成（需重置 GPU）",
        "health.cond.gpu_pcie_replay_rate": "PCIe 重放",
        "health.measured.gpu_pcie_replay_rate": "PCIe 重放最高每分钟 {replays_per_minute} 次",
        "health.cond.gpu_nvlink_errors": "NVLink 错误",
        "health.measured.gpu_nvlink_errors": "NVLink 重放与 CRC 错误最高每分钟 "
        "{replay_and_crc_errors_per_minute} 次",
        "health.cond.gpu_clock_slowdown": "降频",
        "health.cond.gpu_lost": "GPU 丢失（从总线掉线）",
        "xid_class.application": "应用程序",
        "xid_class.memory": "显存",
        "xid_class.bus": "总线",
        "xid_class.nvlink": "NVLink",
        "xid_class.firmware": "固件",
        "xid_class.driver": "驱动",
        "xid_class.thermal_power": "温度或供电",
        "xid_class.unknown": "未知",
        "note.owner_state": "{nodes} 个节点中 {known} 个的属主状态已知：每个节点的代理都知道每个 "
        "GPU 进程所属的 Pod 或作业是否仍在运行。",
        "note.owner_state_not_known": "{nodes} 个节点中 {known} 个的属主状态已知；{not_known} "
        "的属主状态未知（超过该时段 {limit_share} 的时间里，节点代理无法判断 GPU 进程所属的 Pod "
        "或作业是否仍在运行）：这些节点上作业结束后遗留的显存无法发现。",
        "note.generated_for": "根据该时段已保存的数据生成；重新生成结果相同。",
        "status.event": "单次事件",
        "status.opened": "新开，仍未关闭",
        "status.opened_closed": "新开并已关闭",
        "status.closed": "已关闭",
        "status.open": "整段时间未关闭",
        "source.recorded": "人工登记",
        "source.detected": "自动识别",
        "action.recorded": "人工登记",
        "action.drain": "节点被 drain",
        "action.resume": "节点恢复",
        "action.cordon": "节点被 cordon",
        "action.uncordon": "节点取消 cordon",
        "action.taints_changed": "节点污点变更",
        "action.job_cancelled": "探测作业被他人取消",
        "action.quota_changed": "配额变更",
        "src.controller": "控制器",
        "src.scheduler": "调度器",
        "src.store": "存储（数据库）",
        "restart.stopped": "正常停止",
        "restart.killed_or_crashed": "被终止或崩溃",
        "src.agents": "节点代理",
        "src.nvml": "NVML",
        "src.prometheus": "Prometheus",
        "src.logs": "日志后端",
        "src.alerts": "Alertmanager",
        "chart.util_over_day": "全天 GPU 利用率与分配率",
        "chart.util_by_hour": "按小时的 GPU 利用率与分配率",
        "chart.wait_per_tenant": "各租户排队等待",
        "chart.peak_vs_night": "按时间窗口：排队等待与 GPU 利用率",
        "chart.used": "利用率（平均）",
        "chart.allocated": "分配率",
        "chart.wait_avg": "平均",
        "chart.wait_p95": "p95",
        "chart.wait": "排队等待",
        "chart.util": "GPU 利用率",
        "chart.tasks_per_day": "每日任务数与失败数",
        "chart.tasks": "任务",
        "chart.failed": "失败",
        "chart.no_data": "未观测",
        "rec.go": "可以上线",
        "rec.limited_go": "限制上线",
        "rec.no_go": "不可上线",
        "rec.go.text": "所有评估项均凭已记录的证据通过。",
        "rec.limited_go.text": "仅可在下列范围内上线；所列评估项须复验通过后才可全面开放。",
        "rec.no_go.text": "存在必须修复的问题：修复并复验通过前平台不得开放。",
        "rec.not_decidable": "无法判定",
        "rec.not_decidable.text": "无法判定：观测器在 {share} 的观察期内处于盲区，"
        "无法据此评估平台；排除致盲原因后重新进行稳定性观察。",
        "verdict.status.pass": "通过",
        "verdict.status.fail": "未通过",
        "verdict.status.not_observed": "未观测",
        "class.must_fix": "必须修复",
        "class.limited_launch": "限制上线",
        "class.later_optimisation": "后续优化",
        "crit.queue_explainable": "排队与优先级行为可解释",
        "crit.monitoring_linked": "监控可关联到任务与租户",
        "crit.quota_enforced": "超配额请求被处理并记录",
        "crit.failure_evidence": "失败证据链完整（原因、说明、退出码）",
        "crit.no_unreleased_resources": "无未释放资源",
        "crit.no_log_loss": "无日志丢失",
        "crit.gpu_health": "GPU 与节点健康",
        "class.gpu_health.must_fix": "平台仍在故障 GPU 上调度作业，"
        "或同一节点反复出现致命 GPU 故障：作业会不断落到必然失败的位置。",
        "class.gpu_health.limited_launch": "GPU 出现致命故障或错误：仅开放保持健康的资源池和节点。",
        "class.gpu_health.later_optimisation": "作业运行时 GPU 被降频（温度、功耗或硬件降速）："
        "实际算力低于表面数值。",
        "ev.gpu_health": "致命 GPU 故障 {fatal} 次（致命 Xid、GPU 丢失、行重映射失败），"
        "GPU 错误状况 {errors} 个（ECC、待重映射或待退役页、PCIe 重放、NVLink 错误），"
        "降频 {throttled} 段，"
        "致命故障后仍在服务的节点 {in_service} 个；涉及节点：{nodes}。",
        "scope.gpu_health": "仅开放 GPU 保持健康的资源池和节点；其余待更换或修复 GPU 后再开放。",
        "crit.monitoring_lag_bound": "监控延迟在限值内",
        "crit.no_persistent_unfairness": "无持续性不公平",
        "crit.interventions_audited": "人工干预可审计",
        "crit.tenant_isolation": "租户隔离",
        "class.queue_explainable.limited_launch": "用户会遇到无法解释的等待；在修复平台原因说明期"
        "间，"
        "仅向能接受这一点的租户开放。",
        "class.monitoring_linked.limited_launch": "部分节点或任务无法从指标追溯到任务和租户，"
        "这些地方的故障无法诊断。",
        "class.quota_enforced.must_fix": "有作业超出租户配额仍在运行：配额是对其他租户的承诺。",
        "class.quota_enforced.limited_launch": "超配额作业被挂起，但原因中未指明配额：用户无法知道"
        "为何等待。",
        "class.failure_evidence.limited_launch": "失败任务缺少平台原因或说明，或被平台遗忘：用户的"
        "失败无法诊断。",
        "class.no_unreleased_resources.must_fix": "作业结束后 GPU 或显存仍被占用：容量会在数周内流"
        "失。",
        "class.no_unreleased_resources.later_optimisation": "仅有已分配但空闲的 GPU：属于使用方式"
        "问题，"
        "并非泄漏。",
        "class.no_log_loss.must_fix": "日志行丢失：失败的证据也随之丢失。",
        "class.no_log_loss.limited_launch": "日志行重复或乱序：日志可能误导排查。",
        "class.no_log_loss.later_optimisation": "日志完整但到达较晚。",
        "class.monitoring_lag_bound.limited_launch": "监控延迟超出限值：关键时刻告警和看板滞后。",
        "class.no_persistent_unfairness.limited_launch": "某租户在多个窗口中持续处于劣势：份额与承"
        "诺不符。",
        "class.interventions_audited.later_optimisation": "平台被手工变更但没有记录；需由变更流程"
        "补上。",
        "class.tenant_isolation.must_fix": "一个租户可以读取另一个租户的工作内容，"
        "或使用未分配给它的 GPU。",
        "ev.no_waits": "没有探测任务排队（共 {runs} 个任务）：排队行为未被检验。",
        "ev.waits": "{runs} 个任务中 {waited} 个排队；其中 {unexplained} 个的等待原因无法由平台状"
        "态解释"
        "（{share}；限值 {limit_share}）。",
        "ev.pending_reason": "平台给出的排队原因{reason_words}：累计 {total_seconds}。",
        "ev.no_gpu_samples": "未保存节点代理的 GPU 样本。",
        "ev.coverage": "调度器中 {known} 个 GPU 节点有 {sampled} 个被节点代理采样；从未采样："
        "{missing}。",
        "ev.runs_attributed": "{runs} 个任务中 {attributed} 个带有租户和时间窗口。",
        "ev.gpus_attributed": "{samples} 个 GPU 样本中 {attributed} 个标明了占用该 GPU 的作业所属"
        "租户（节点代理识别的属主与调度器的作业关联：Slurm 作业号、Pod 的 UID）。",
        "ev.busy_lag": "运行了 {runs} 个 GPU 繁忙探测；"
        "其中 {findings} 个在 Prometheus 中显示滞后或未显示。",
        "ev.no_probe_runs": "{probe} 探测未运行。",
        "ev.quota": "{runs} 个超配额任务：{blocked} 个被挂起或拒绝并给出原因（{reasons}），"
        "{ran} 个仍然运行，{held_without_reason} 个被挂起但未指明配额。",
        "ev.no_failures": "没有任务失败，也没有运行失败类探测。",
        "ev.failures": "{runs} 个失败或失败类探测任务：{complete} 个有平台原因和说明，{bare} 个没"
        "有，"
        "{lost} 个被平台遗忘，{misreported} 个以非预期方式失败。",
        "ev.failure_logs": "任务日志通过日志金丝雀检查（见“无日志丢失”）。",
        "ev.failure_causes": "失败任务按原因分类：应用 {application} 个，GPU/驱动 {gpu_driver} 个，"
        "节点 {node} 个，调度策略 {scheduling} 个，平台配置 {platform_configuration} 个，"
        "原因不明 {unexplained} 个（{unexplained_share}；上限 {limit_share}）。",
        "ev.all_job_failure_causes": "全部租户的失败作业按原因分类：应用 {application} 个，"
        "GPU/驱动 {gpu_driver} 个，节点 {node} 个，调度策略 {scheduling} 个，"
        "平台配置 {platform_configuration} 个，原因不明 {unexplained} 个"
        "（{unexplained_share}；上限 {limit_share}）。",
        "ev.run": "任务 {run_id}（{probe}，{tenant}）：{outcome}，平台原因{reason_words}——"
        "{message_words}",
        "ev.unreleased": "泄漏：{leaks}；已分配但空闲：{idle}（{detectors}）。",
        "ev.owner_state": "{nodes} 个节点中 {known} 个的属主状态已知。",
        "ev.owner_state_not_known": "{nodes} 个节点中 {known} 个的属主状态已知；{not_known} "
        "的属主状态未知（超过观察期的 {limit_share}）：这些节点上作业结束后仍占用的显存未"
        "观测。",
        "ev.owner_state_not_observed": "没有任何节点的代理知道其 GPU 进程所属的 Pod 或作业是否仍"
        "在运行（共 {nodes} 个节点）：作业结束后仍占用的显存未观测。",
        "ev.layer_not_set_up": "{layer}未配置：只有该层能看到的情况未观测。",
        "ev.layer_blind": "{layer}在 {share} 的观察期内处于盲区（限值 {limit_share}）：未观测。",
        "ev.logs": "运行了 {canaries} 个日志金丝雀：{lost} 个丢行（共丢失 {lost_lines} 行），"
        "{damaged} 个有重复或乱序，{late} 个送达延迟。",
        "ev.lag": "{conditions} 个延迟或不可达状况；{over} 个持续超过 {limit_seconds}；最长 "
        "{longest_seconds}。",
        "ev.fairness": "有公平性探测的窗口次数：{occurrences}（各窗口合计至少需要 {needed} 次）。",
        "ev.unfair": "处于劣势：{tenants}。",
        "ev.unfair_stretch.weighted_share": "{tenant} 在 {start_at} 至 {end_at}（{window}）"
        "获得最少：在应得的 {entitled_gpus} 个 GPU（按权重的公平份额）中只获得 {received_gpus} 个，"
        "缺少 {short_gpus} 个。",
        "ev.unfair_stretch.nominal_quota": "{tenant} 在 {start_at} 至 {end_at}（{window}）"
        "获得最少：在应得的 {entitled_gpus} 个 GPU（其队列的名义配额及可借用部分）中只获得 "
        "{received_gpus} 个，缺少 {short_gpus} 个。",
        "ev.unfair_holder": "同期 {holder} 超出其份额占用了 {beyond_gpus} 个 GPU。",
        "ev.unfair_holder_priority": "{holder} 按优先级（QOS、优先级类）占用的 GPU：{names}。",
        "ev.unfair_holder_user": "{holder} 按用户占用的 GPU：{names}。",
        "ev.unfair_favoured": "{tenant} 的探测排队等待更久（{wait_seconds}，其他租户为 "
        "{others_wait_seconds}，{window}），但处于劣势的并不是 {tenant}：它在应得的 "
        "{entitled_gpus} 个 GPU 中获得了 {received_gpus} 个，超过其份额，更长的等待是它申请超出"
        "份额的代价；获得不足的是 {disadvantaged}。",
        "ev.no_scheduler_data": "未保存调度器状态和任务。",
        "ev.interventions": "人工登记 {recorded} 次，自动识别 {detected} 次，其中 {unaudited} 次无"
        "登记。",
        "ev.unaudited": "未登记：{at} 对 {subject} 的 {action}（{reason}）。",
        "ev.isolation": "隔离探测 {runs} 次，{breaches} 次读取被放行。",
        "ev.gpu_isolation": "进程在未分配给其 Pod 或作业的 GPU 上运行 {findings} 次"
        "（gpu_not_assigned：节点代理将每个进程与 kubelet 或 slurmd 的分配结果比对）。",
        "scope.must_fix": "阻断项：{criterion}。",
        "scope.queue_explainable": "告知租户部分等待暂时无法解释；不承诺等待时长。",
        "scope.monitoring_linked": "仅限监控覆盖的节点和工作负载；其余不承诺 SLO。",
        "scope.quota_enforced": "告知租户超配额作业可能在无说明的情况下等待。",
        "scope.failure_evidence": "仅限能用自有工具排查失败的租户。",
        "scope.monitoring_lag_bound": "延迟达标前不依赖告警呼叫值班；值班人员盯看板。",
        "scope.no_persistent_unfairness": "对处于劣势的租户和窗口改用保障配额而非公平份额。",
        "scope.no_log_loss": "租户自行保留重要日志的副本。",
        "scope.not_observed": "稳定性观察未能证明，因此不作承诺：{criterion}。",
        "scope.not_exercised": "稳定性观察未覆盖，因此不作承诺：探测 {probe} 从未运行（{why}）。",
        "scope.not_together": "未按计划覆盖，因此不作承诺：探测 {probe} 的 {copies} 个副本从未"
        "同时在途（最多 {most} 个）。",
        "scope.partly_exercised": "部分覆盖：探测 {probe} 在到期的 {due} 个副本中运行了 {runs} "
        "个；其余大多被跳过：{why}。",
        "scope.blind": "观测器在 {share} 的观察期内处于盲区（限值 {limit_share}）：未观测到的部"
        "分不能视为健康。",
        "scope.later": "上线后处理：{criterion}。",
        "scope.rule": "评估项只依据已观测到的情况判定：所需的每一层（调度器、节点代理、NVML、"
        "Prometheus、日志后端）均已配置且盲区时间不超过观察期的 {layer_limit_share} "
        "才可通过，否则记为未观测，绝不记为通过；盲区时间合计超过 {blind_limit_share} 时，"
        "结论为无法判定。",
        "scope.alerts_incomplete": "告警次数不完整：观察期间有 {blind_seconds} 无法读取 "
        "Alertmanager，其间没有告警只表示未观测到，而非没有。",
        "sec.tiers": "三级汇总",
        "tier.must_fix": "必须修复",
        "tier.limited_launch": "限制上线",
        "tier.later_optimisation": "后续优化",
        "tier.item": "{criterion}：{evidence}涉及{subject}。",
        "subject.tenants": "租户 {names}",
        "subject.pools": "资源池 {names}",
        "subject.nodes": "节点 {names}",
        "subject.jobs": "作业 {names}",
        "subject.pipelines": "数据管道 {names}",
        "subject.windows": "时间窗口 {names}",
        "subject.separator": "；",
        "subject.none": "整个平台",
        "sec.later": "数据显示的后续优化项",
        "crit.low_utilisation": "GPU 利用率与分配量",
        "crit.long_quota_holds": "作业因配额被挂起",
        "class.low_utilisation.later_optimisation": "已分配的 GPU 远多于实际使用："
        "作业占着 GPU 却很少使用；应调整资源申请或共享 GPU。",
        "class.long_quota_holds.later_optimisation": "作业因本租户配额长时间等待："
        "配额小于实际工作量；应调整配额。",
        "ev.low_utilisation": "资源池 {pool}：GPU 平均利用率 {utilisation_share}，"
        "已分配 GPU 占 {allocated_share}（低于分配量的 {limit_share}）。",
        "ev.quota_hold": "租户 {tenant}：作业因配额被挂起最长 {longest_seconds}"
        "（上限 {limit_seconds}）。",
        "scope.where": "{criterion}涉及{subject}。",
        "scope.may_go": "未被任何阻断或限制项涉及、可先行上线的范围：{subject}。",
        "reverify.queue_explainable": "{criterion}：在负载下于{subject} 重新运行 {probes}，"
        "持续 {watch_seconds}；几乎所有等待都能由平台解释（{detectors} 不超过限值）即为通过。",
        "reverify.monitoring_linked": "{criterion}：在每个 GPU 节点运行节点代理，于{subject} 重新"
        "运行 {probes}，持续 {watch_seconds}；所有节点均被采样且未出现 {detectors}"
        "（gpu_busy_lag）即为通过。",
        "reverify.quota_enforced": "{criterion}：为每个有配额的租户于{subject} 重新运行 "
        "{probes}，持续 {watch_seconds}；每次都被拒绝或挂起并指明配额即为通过。",
        "reverify.failure_evidence": "{criterion}：于{subject} 重新运行 {probes}，持续 "
        "{watch_seconds}；每个都按预期失败并带有平台原因和说明即为通过。",
        "reverify.no_unreleased_resources": "{criterion}：在所有节点运行节点代理（每个都能读取其"
        "属主目录，agent.owners：kubelet 或 slurmd），于{subject} 重新运行 {probes}，持续 "
        "{watch_seconds}；其间未出现 {detectors} 即为通过。",
        "reverify.no_log_loss": "{criterion}：经生产日志管道、跨越日志轮转，于{subject} 重新运行 "
        "{probes}，持续 {watch_seconds}；其间未出现 {detectors} 即为通过。",
        "reverify.monitoring_lag_bound": "{criterion}：设置 controller.prometheus_url 后，"
        "于{subject} 重新运行 {probes}，持续 {watch_seconds}；{detectors} 均未超过限值即为通过。",
        "reverify.no_persistent_unfairness": "{criterion}：在资源争用下于{subject} 重新运行 "
        "{probes}，每个窗口 {occurrences} 次；未出现 {detectors} 即为通过。",
        "reverify.interventions_audited": "{criterion}：{subject} 的每次手工变更都用 `observer "
        "intervention add` 登记，持续 {watch_seconds}；每次自动识别的干预都有登记即为通过。",
        "reverify.tenant_isolation": "{criterion}：在每个节点的代理读取其属主目录的前提下，"
        "为每个租户于{subject} 重新运行 {probes}，持续 {watch_seconds}；所有跨租户读取都被拒绝且"
        "未出现 {detectors} 即为通过。",
        "reverify.gpu_health": "{criterion}：在节点代理读取 Xid 事件的前提下，于{subject} 重新运行 "
        "{probes}，持续 {watch_seconds}；其间未出现 {detectors}，且故障节点在 "
        "detectors.gpu_in_service.grace_seconds 内退出服务即为通过。",
        "reverify.add_to_plan": "本次稳定性观察的计划未运行 {probes}："
        "请先将其加入 controller.plan。",
        "reverify.rerun": "随后至少再进行 {days} 天覆盖所有窗口（{windows}）的稳定性观察，"
        "并重新生成结论。",
        # severities, outcomes, the platform's words, findings, Xid meanings
        "severity.info": "提示",
        "severity.warning": "警告",
        "severity.critical": "严重",
        "outcome.passed": "通过",
        "outcome.failed": "失败",
        "outcome.rejected": "被拒绝",
        "outcome.timed_out": "超时",
        "outcome.cancelled": "已取消",
        "outcome.lost": "丢失",
        "outcome.no_gpu": "无可用 GPU",
        "xid_meaning": "{xid_meaning}",
        "expectation.succeed": "成功",
        "expectation.fail": "失败",
        "expectation.fail_to_start": "无法启动",
        "expectation.oom": "内存不足（OOM）",
        "expectation.blocked": "被拦截",
        "expectation.denied": "被拒绝访问",
        "quote.platform": "「{text}」",
        "finding.details": "{head}，{details}",
        "finding.separator": "，",
        "finding.stored": "（英文原文）{summary}",
        "finding.nvml_unavailable": "{node} 上 NVML 不可用：该节点的 GPU 均未被观测",
        "finding.gpu_lost": "{node} 的 GPU {gpu} 已丢失（掉出总线）",
        "finding.memory_without_process": "{node} 的 GPU {gpu} 上没有任何进程，显存占用却比基线高出"
        " {memory}",
        "finding.owner_state_unknown": "{node} 的属主状态未知：无法读取 {source}，无法判断任何进程"
        "的属主仍在运行还是已经结束",
        "finding.allocated_idle.assigned": "{owner} 分配到了 {node} 的 GPU {gpu}，却没有在上面运行"
        "任何程序",
        "finding.allocated_idle.process": "{owner} 在 GPU {gpu} 上占用 {memory} 显存，而该 GPU 处于"
        "空闲",
        "finding.vanished_process": "进程 {pid} 仍列在 GPU {gpu} 上（{memory}），但主机上已没有这个"
        "进程",
        "finding.orphan_process": "进程 {pid}（程序{program_words}）占用 GPU {gpu}（{memory}），不"
        "属于任何 pod 或作业",
        "finding.orphan_process.unassigned": "进程 {pid}（程序{program_words}）占用 GPU {gpu}（"
        "{memory}），不属于任何 pod 或作业，且该 GPU 未分配给任何人",
        "finding.unreleased_memory": "属主 {owner} 已结束，进程 {pid} 仍在 GPU {gpu} 上占用 "
        "{memory}：显存未释放",
        "finding.gpu_not_assigned": "{owner} 在 GPU {gpu} 上运行进程 {pid}（程序{program_words}）"
        "，但 {source} 并未把该 GPU 分配给它",
        "finding.gpu_not_assigned.given_other": "{owner} 在 GPU {gpu} 上运行进程 {pid}（程序"
        "{program_words}），但 {source} 并未把该 GPU 分配给它，而是分配给了 {holders}",
        "finding.gpu_ecc_uncorrected": "{node} 的 GPU {gpu}：新增 {errors} 个不可纠正的 ECC 错误",
        "finding.gpu_row_remap_pending": "{node} 的 GPU {gpu} 有待完成的行重映射：需要重置 GPU 才能"
        "替换故障显存行",
        "finding.gpu_row_remap_failed": "{node} 的 GPU {gpu} 显存行重映射失败：需要送修",
        "finding.gpu_retired_pages_pending": "{node} 的 GPU {gpu} 有待退役的显存页：需要重置 GPU",
        "finding.gpu_clock_slowdown": "{node} 的 GPU {gpu} 在运行 {owners} 时降频（{reasons}）",
        "finding.gpu_clock_slowdown.unowned": "{node} 的 GPU {gpu} 在有进程运行时降频（{reasons}）",
        "finding.gpu_pcie_replay_rate": "{node} 的 GPU {gpu}：每分钟 {per_minute} 次 PCIe 重放",
        "finding.gpu_nvlink_errors": "{node} 的 GPU {gpu} 出现 NVLink 错误",
        "finding.gpu_nvlink_errors.recovery": "{errors} 次 NVLink 恢复错误",
        "finding.gpu_nvlink_errors.rate": "每分钟 {per_minute} 次 NVLink 重放与 CRC 错误",
        "finding.gpu_xid": "{node} 的 GPU {gpu}（{pci_bus_id}）发生 Xid {xid}：{xid_meaning}（类别"
        "：{xid_class_id}）",
        "finding.gpu_xid.fatal": "{node} 的 GPU {gpu}（{pci_bus_id}）发生 Xid {xid}："
        "{xid_meaning}（类别：{xid_class_id}，致命）",
        "finding.gpu_xid.process": "{owner} 的进程 {pid}（程序{program_words}）",
        "finding.gpu_xid.process_unowned": "进程 {pid}（程序{program_words}），属主未知",
        "finding.gpu_xid.running": "正在运行 {owners}",
        "finding.unhealthy_gpu_in_service": "{node} 在致命 GPU 故障（{fault}）发生 "
        "{fault_age_seconds}后仍处于调度器状态{state_words}，其间调度器又在该节点上放置了 {jobs} "
        "个作业",
        "finding.gpu_unusable": "节点 {node} 为探测任务 {probe}（作业 {job_id}）分配了 GPU，但其程"
        "序找不到可用的 GPU：没有 NVIDIA 驱动或看不到设备",
        "finding.allocated_without_job": "{node}：调度器记为已分配 {allocated} 块 GPU，但该节点上的"
        "作业只占用 {held} 块",
        "finding.kill_task_failed": "{node} 因作业进程无法结束被移出服务，调度器状态"
        "{state_words}，平台原因{reason_words}",
        "finding.stuck_terminating": "租户 {tenant} 的作业 {job_id} 在平台开始结束它 "
        "{grace_seconds}后仍占用 {node} 上的 {gpus} 块 GPU",
        "finding.probe_unreleased": "探测任务 {probe}（租户 {tenant}，作业 {job_id}）已结束，"
        "{grace_seconds}后 {node} 上仍有 {gpus} 块 GPU 未恢复空闲",
        "finding.unexplained_wait.no_reason": "租户 {tenant} 的任务 {job} 在排队等待，平台未给出原"
        "因",
        "finding.unexplained_wait.gpus_free": "租户 {tenant} 的任务 {job} 以平台原因"
        "{reason_words}排队等待，而 {nodes} 个可调度节点各有 {gpus} 块空闲 GPU",
        "finding.unexplained_wait.nothing_ahead": "租户 {tenant} 的任务 {job} 以平台原因"
        "{reason_words}排队等待，而没有其他作业在排队",
        "finding.unexplained_wait.quota_left": "租户 {tenant} 的任务 {job} 以配额为由（平台原因"
        "{reason_words}）排队等待，而该租户只占用了配额 {quota} 块 GPU 中的 {held} 块",
        "finding.persistent_unfairness": "租户 {tenant} 在最近 {weighed} 个时间窗口中有 {bad} 个处"
        "于不利地位（{windows}）",
        "finding.log_loss": "经 {pipeline} 的日志金丝雀 {run_id}",
        "finding.log_loss.missing": "{expected} 行中缺失 {lines} 行（序号 {seqs}）",
        "finding.log_loss.missing.more": "{expected} 行中缺失 {lines} 行（序号 {seqs}，另有 {more} "
        "段）",
        "finding.log_loss.duplicated": "重复投递 {lines} 次",
        "finding.log_loss.out_of_order": "{lines} 行乱序",
        "finding.log_loss.torn": "{lines} 行不完整",
        "finding.log_loss.unexpected": "出现金丝雀从未写出的序号：{seqs}",
        "finding.log_delivery_latency": "经 {pipeline} 的日志金丝雀 {run_id}：投递延迟 p95 为 "
        "{p95_seconds}（上限 {limit_seconds}）",
        "finding.monitoring_lag.heartbeat_absent": "无法通过 Prometheus 读回观测器的心跳：观测器导"
        "出的指标没有到达 Prometheus",
        "finding.monitoring_lag.heartbeat_late": "指标到达 Prometheus 延迟 {lag_seconds}：读回的心"
        "跳已是这么久以前的",
        "finding.monitoring_lag.no_data": "Prometheus 中没有 {series} 的数据",
        "finding.monitoring_lag.stale": "{series} 的 {total} 条序列中有 {stale} 条已过期，最旧的一"
        "条上次采样在 {age_seconds}前",
        "finding.monitoring_lag.scrape": "Prometheus 未能抓取 {job} {instance}",
        "finding.monitoring_lag.scrape_failed": "上次抓取失败（{error_words}）",
        "finding.monitoring_lag.scrape_failed_silent": "上次抓取失败（未给出错误）",
        "finding.monitoring_lag.scrape_old": "上次抓取在 {age_seconds}前",
        "finding.monitoring_lag.flatline": "{series} 在 Prometheus 中一直是 {value}，而节点代理读到"
        "了 {values} 个不同的值",
        "finding.monitoring_lag.gpu_busy_late": "GPU 繁忙探测任务 {run_id} 开始 {lag_seconds}后，"
        "GPU {gpu} 才在 Prometheus 中显示为繁忙",
        "finding.monitoring_lag.gpu_busy_missing": "GPU 繁忙探测任务 {run_id} 开始 {lag_seconds}后"
        "，GPU {gpu} 在 Prometheus 中仍未显示为繁忙",
        "finding.prometheus_unreachable": "无法读取 Prometheus，监控延迟未知：{error_words}",
        "finding.agent_unreachable": "无法读取节点代理 {agent}：其节点的 GPU 未被观测（"
        "{error_words}）",
        "finding.log_pipeline_unreachable": "无法读取日志管道 {pipeline}，日志丢失情况未知："
        "{error_words}",
        "finding.store_unreachable": "存储 {store} 出错，恢复前观测器所见暂存在内存中："
        "{error_words}",
        "finding.alertmanager_unreachable": "无法读取 Alertmanager：当前触发的告警未被计入（"
        "{error_words}）",
        "xid.8": "GPU 停止处理（通道空闲超时）",
        "xid.13": "图形引擎异常",
        "xid.31": "GPU 显存页错误",
        "xid.32": "推送缓冲区命令流无效或已损坏",
        "xid.38": "驱动固件错误",
        "xid.43": "GPU 停止处理（用户程序出错后通道被重置）",
        "xid.44": "上下文切换时图形引擎出错",
        "xid.45": "先前错误后的抢占式清理（该通道的进程已被停止）",
        "xid.46": "GPU 停止处理",
        "xid.48": "双比特 ECC 错误",
        "xid.54": "辅助电源未连接",
        "xid.56": "显示引擎错误",
        "xid.57": "显存接口编程出错",
        "xid.58": "检测到显存接口不稳定",
        "xid.61": "内部微控制器断点或警告",
        "xid.62": "内部微控制器停机",
        "xid.63": "已记录 ECC 页退役或行重映射",
        "xid.64": "ECC 页退役或行重映射记录失败",
        "xid.68": "视频处理器异常",
        "xid.69": "图形引擎类错误",
        "xid.74": "NVLink 错误",
        "xid.79": "GPU 已掉出总线",
        "xid.92": "单比特 ECC 错误率过高",
        "xid.94": "可隔离的 ECC 错误（只影响访问该显存的程序）",
        "xid.95": "不可隔离的 ECC 错误（影响该 GPU 上的所有程序）",
        "xid.109": "上下文切换超时",
        "xid.110": "安全故障",
        "xid.119": "GSP RPC 超时",
        "xid.120": "GSP 错误",
        "xid.121": "C2C 链路已纠正错误",
        "xid.122": "SPI PMU RPC 读取失败",
        "xid.123": "SPI PMU RPC 写入失败",
        "xid.124": "SPI PMU RPC 擦除失败",
        "xid.140": "未恢复的 ECC 错误",
        "xid.143": "GPU 初始化失败",
        "xid.144": "NVLink SAW 错误",
        "xid.145": "NVLink RLW 错误",
        "xid.146": "NVLink TLW 错误",
        "xid.147": "NVLink TREX 错误",
        "xid.148": "NVLink NVLPW 控制错误",
        "xid.149": "NVLink NETIR 错误",
        "xid.154": "GPU 恢复操作已变更",
        "xid.unknown": "不在 Xid 目录表中",
        # the demo's console (observer/demo/run.py)
        "demo.started": "observer demo：从 {start} 起模拟 {days} 天（{timezone}）；指标见 {url}",
        "demo.not_run": "；未运行：{left_out}",
        "demo.settings": "与默认值不同的设置（见 {config}）：",
        "demo.progress": "{hour}  任务 {runs}  进行中 {in_flight}  未关闭的发现 {open}",
        "demo.open_detectors": "（{detectors}）",
        "demo.when": "{weekday} {time}",
        "demo.reports": "报告：",
        "demo.rebuilt": "用演示的设置重新生成：",
        "demo.score": "评分（按故障和检测器）：{file}",
        "demo.faults": "注入的故障及报告它们的发现：",
        "demo.not_injected": "未注入",
        "demo.never_on": "从未开启",
        "demo.quiet": "应无发现",
        "demo.confounder": "（干扰项：不得产生任何发现）",
        "demo.missed": "漏报",
        "demo.found": "已发现",
        "demo.opened": "{detector} {subject} 于 {when} 开启",
        "demo.nothing_reported": "没有发现报告 {detector} {subject}",
        "demo.not_subject": "（而非 {subject}）",
        "demo.miscaused": "任务 {run}：报告给出的原因是 {reported}，而不是 {cause}",
        "demo.caused": "任务 {run}：报告给出的原因为 {cause}",
        "demo.unexpected": "没有注入故障可以解释的发现：",
        "demo.while_on": "（其间 {confounders} 处于开启状态）",
        "demo.nothing_unexpected": "没有未注入故障引起的发现。",
        "demo.weekday.0": "星期一",
        "demo.weekday.1": "星期二",
        "demo.weekday.2": "星期三",
        "demo.weekday.3": "星期四",
        "demo.weekday.4": "星期五",
        "demo.weekday.5": "星期六",
        "demo.weekday.6": "星期日",
        "demo.scenario": "场景 {name}：从 {start} 起共 {days} 天，随机种子 {seed}，"
        "故障 {faults} 个",
        "demo.windows": "时区 {timezone}；时间窗口 {windows}",
        "demo.tenant": "{name} 权重 {weight}",
        "demo.tenant_quota": " 配额 {gpus} 块 GPU",
        "demo.tenants": "租户 {tenants}；负载：窗口内为 GPU 总数的 {busy} 倍，窗口外为 {quiet} 倍",
        "demo.plan": "计划 {entries} 条，涉及 {count} 种探测（{probes}）",
        "demo.simulated": "模拟 {nodes} 个节点 × 每节点 {gpus} 块 GPU，资源池 {pools}",
        "demo.fairness": "公平性持续判定：{m} 个窗口中 {k} 个（默认 {default_m} 个中 {default_k} 个"
        "：一天有两个窗口）",
    },
}
