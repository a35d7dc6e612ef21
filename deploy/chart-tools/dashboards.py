# ruff: noqa: E501 - a PromQL query reads best on one line
"""Writes the chart's Grafana dashboards (helm/observer/dashboards/*.json) from the panel
definitions below: one place to read every query, the JSON is generated.

    python deploy/chart-tools/dashboards.py          # write the files
    python deploy/chart-tools/dashboards.py --check  # exit 1 when a file is out of date

Conventions: Grafana schemaVersion 39, the data source is the template variable
`${datasource}` (type prometheus), `$node`, `$pool`, `$tenant`, `$window` and `$job` are
multi-value variables whose "All" is `.*`. Queries use only metrics `observer metrics list`
prints, Prometheus' own series (up, scrape_*, ALERTS) and kube-state-metrics' restart
counter, and stay within PromQL of Prometheus 2.42. GPU series carry `gpu` and `uuid`;
their node comes from observer_gpu_info (a join on uuid), their pool from the scheduler's
observer_scheduler_node_gpus (a join on node).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[2] / "helm" / "observer" / "dashboards"
DS = {"type": "prometheus", "uid": "${datasource}"}
TAG = "gpu-soak-observer"
UNEXPECTED = 'outcome=~"failed|timed_out|lost|rejected"'

# Joins: a GPU series' node (and pool) as labels, values unchanged.
NODE = 'on (uuid) group_left (node) max by (uuid, node) (observer_gpu_info{node=~"$node"})'
POOL = (
    "on (node) group_left (pool) "
    '0 * max by (node, pool) (observer_scheduler_node_gpus{state="total", pool=~"$pool"})'
)
AGENT_NODE = (
    'on (instance) group_left (node) max by (instance, node) (observer_gpu_info{node=~"$node"})'
)


def by_node(metric: str) -> str:
    return f"{metric} * {NODE}"


def by_pool(metric: str) -> str:
    return f"{metric} * {NODE} + {POOL}"


# --- building blocks -----------------------------------------------------------------------


@dataclass
class Q:
    expr: str
    legend: str = ""
    instant: bool = False
    table: bool = False


@dataclass
class P:
    kind: str  # stat, timeseries, table, text, row
    title: str
    queries: list[Q] = field(default_factory=list)
    unit: str = "short"
    w: int = 12
    h: int = 8
    description: str = ""
    stack: bool = False
    text: str = ""
    thresholds: list[tuple[float | None, str]] | None = None
    max: float | None = None


def stat(
    title: str, expr: str, unit: str = "short", *, red_at: float | None = None, **kw: Any
) -> P:
    steps: list[tuple[float | None, str]] = [(None, "green")]
    if red_at is not None:
        steps.append((red_at, "red"))
    return P("stat", title, [Q(expr, instant=True)], unit, w=4, h=4, thresholds=steps, **kw)


def ts(title: str, *queries: Q, unit: str = "short", **kw: Any) -> P:
    return P("timeseries", title, list(queries), unit, **kw)


def table(title: str, *queries: Q, unit: str = "short", **kw: Any) -> P:
    for q in queries:
        q.instant = q.table = True
    return P("table", title, list(queries), unit, **kw)


def row(title: str) -> P:
    return P("row", title, w=24, h=1)


def text(title: str, content: str, w: int = 24, h: int = 3) -> P:
    return P("text", title, w=w, h=h, text=content)


def _target(q: Q, ref: str) -> dict[str, Any]:
    target: dict[str, Any] = {
        "datasource": DS,
        "refId": ref,
        "expr": q.expr,
        "legendFormat": q.legend or "__auto",
        "range": not q.instant,
        "instant": q.instant,
        "editorMode": "code",
    }
    if q.table:
        target["format"] = "table"
    return target


def _panel(p: P, pid: int, x: int, y: int) -> dict[str, Any]:
    grid = {"h": p.h, "w": p.w, "x": x, "y": y}
    if p.kind == "row":
        return {
            "type": "row",
            "id": pid,
            "title": p.title,
            "collapsed": False,
            "gridPos": grid,
            "panels": [],
        }
    if p.kind == "text":
        return {
            "type": "text",
            "id": pid,
            "title": p.title,
            "gridPos": grid,
            "options": {"mode": "markdown", "content": p.text},
        }
    steps = p.thresholds or [(None, "green")]
    defaults: dict[str, Any] = {
        "unit": p.unit,
        "thresholds": {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in steps]},
        "color": {"mode": "thresholds" if p.kind == "stat" else "palette-classic"},
    }
    if p.max is not None:
        defaults["max"] = p.max
    panel: dict[str, Any] = {
        "type": p.kind,
        "id": pid,
        "title": p.title,
        "description": p.description,
        "datasource": DS,
        "gridPos": grid,
        "targets": [_target(q, chr(ord("A") + i)) for i, q in enumerate(p.queries)],
        "fieldConfig": {"defaults": defaults, "overrides": []},
    }
    if p.kind == "stat":
        panel["options"] = {
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "value",
            "graphMode": "none",
            "justifyMode": "auto",
            "orientation": "auto",
            "textMode": "auto",
        }
    elif p.kind == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line",
            "lineWidth": 1,
            "fillOpacity": 20 if p.stack else 5,
            "showPoints": "never",
            "spanNulls": False,
            "stacking": {"mode": "normal" if p.stack else "none", "group": "A"},
        }
        panel["options"] = {
            "legend": {
                "displayMode": "table",
                "placement": "bottom",
                "showLegend": True,
                "calcs": ["mean", "max", "lastNotNull"],
            },
            "tooltip": {"mode": "multi", "sort": "desc"},
        }
    elif p.kind == "table":
        panel["options"] = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
        panel["transformations"] = [
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True}}},
        ]
    return panel


def _layout(panels: list[P]) -> list[dict[str, Any]]:
    out, x, y, row_h = [], 0, 0, 0
    for pid, p in enumerate(panels, start=1):
        if p.kind == "row" or x + p.w > 24:
            x, y, row_h = 0, y + row_h, 0
        out.append(_panel(p, pid, x, y))
        if p.kind == "row":
            y += 1
            continue
        x += p.w
        row_h = max(row_h, p.h)
    return out


def datasource_var() -> dict[str, Any]:
    return {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }


def query_var(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "hide": 0,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "options": [],
        "refresh": 2,
        "regex": "",
        "sort": 1,
    }


def dashboard(
    uid: str,
    title: str,
    description: str,
    panels: list[P],
    variables: list[dict[str, Any]],
    time_from: str = "now-24h",
) -> dict[str, Any]:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": [TAG],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [
            {
                "type": "dashboards",
                "tags": [TAG],
                "asDropdown": True,
                "title": "Soak dashboards",
                "includeVars": False,
                "keepTime": True,
            }
        ],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": {"list": [datasource_var(), *variables]},
        "panels": _layout(panels),
    }


# --- the dashboards --------------------------------------------------------------------------


def soak_overview() -> dict[str, Any]:
    wait_mean = (
        "sum(increase(observer_probe_queue_wait_seconds_sum[$__range])) "
        "/ sum(increase(observer_probe_queue_wait_seconds_count[$__range]))"
    )
    panels = [
        row("Today (the dashboard's time range)"),
        stat("Probe runs", "sum(increase(observer_probe_runs_total[$__range])) or vector(0)"),
        stat(
            "Failed runs",
            f"sum(increase(observer_probe_runs_total{{{UNEXPECTED}}}[$__range])) or vector(0)",
            red_at=1,
            description="Runs that ended other than their probe expects: failed, timed out, lost, rejected.",
        ),
        stat("Average queue wait", wait_mean, "s"),
        stat(
            "GPU utilisation",
            "avg(avg_over_time(observer_gpu_utilization_ratio[$__range]))",
            "percentunit",
        ),
        stat(
            "Alerts firing",
            'count(ALERTS{alertstate="firing", alertname=~"Observer.*"}) or vector(0)',
            red_at=1,
        ),
        stat(
            "Findings raised",
            "sum(increase(observer_findings_total[$__range])) or vector(0)",
            red_at=1,
        ),
        row("Now"),
        stat("Open findings", "sum(observer_findings_open) or vector(0)", red_at=1),
        stat(
            "Blind agents",
            "count(observer_nvml_up == 0) or vector(0)",
            red_at=1,
            description="Agents whose NVML does not answer: their node's GPUs are unobserved.",
        ),
        stat("Lost GPUs", "count(observer_gpu_up == 0) or vector(0)", red_at=1),
        stat(
            "Unreachable agents",
            'sum(observer_findings_open{detector="agent_unreachable"}) or vector(0)',
            red_at=1,
            description="Agents the controller could not read past controller.agent_unreachable_grace_seconds.",
        ),
        stat(
            "Scheduler snapshot age",
            "time() - max(observer_scheduler_last_snapshot_timestamp_seconds)",
            "s",
            red_at=300,
        ),
        stat(
            "Blind time: agents",
            "sum(sum_over_time((observer_nvml_up == bool 0)[$__range:1m])) / 60 or vector(0)",
            "h",
            red_at=0.01,
            description="Node-hours in the range with NVML not answering (sampled each minute).",
        ),
        stat(
            "Blind time: controller",
            "sum(sum_over_time((time() - observer_scheduler_last_snapshot_timestamp_seconds > bool 300)[$__range:1m])) / 60 or vector(0)",
            "h",
            red_at=0.01,
            description="Hours in the range whose last scheduler snapshot was over 5 minutes old.",
        ),
        row("Findings and outcomes"),
        table(
            "Open findings",
            Q("sum by (detector, severity) (observer_findings_open) > 0"),
            description="Conditions open now, by detector and severity.",
        ),
        ts(
            "Findings raised per hour",
            Q(
                "sum by (detector, severity) (increase(observer_findings_total[1h]))",
                "{{detector}} {{severity}}",
            ),
        ),
        ts(
            "Probe outcomes per hour",
            Q("sum by (outcome) (increase(observer_probe_runs_total[1h]))", "{{outcome}}"),
            stack=True,
        ),
        ts(
            "Observer alerts firing",
            Q(
                'count by (alertname, severity) (ALERTS{alertstate="firing", alertname=~"Observer.*"})',
                "{{alertname}}",
            ),
            stack=True,
        ),
    ]
    return dashboard(
        "observer-soak-overview",
        "GPU Soak / Overview",
        "Today's figures of the soak: runs, failures, queue wait, GPU utilisation, alerts, findings and blind time.",
        panels,
        [],
        time_from="now/d",
    )


def gpu_fleet() -> dict[str, Any]:
    util = by_node("observer_gpu_utilization_ratio")
    panels = [
        row("Fleet"),
        stat("GPUs reporting", f"count({by_node('observer_gpu_up')} == 1) or vector(0)"),
        stat("GPUs lost", "count(observer_gpu_up == 0) or vector(0)", red_at=1),
        stat("Blind agents", "count(observer_nvml_up == 0) or vector(0)", red_at=1),
        stat("Average utilisation", f"avg({util})", "percentunit"),
        stat(
            "Unreleased memory",
            f"sum({by_node('observer_gpu_unreleased_memory_bytes')}) or vector(0)",
            "bytes",
            red_at=1,
        ),
        stat(
            "Idle allocations",
            'sum(observer_findings_open{detector="allocated_idle"}) or vector(0)',
            red_at=1,
            description="GPUs held by a running owner at 0 % utilisation past detectors.node.idle_seconds.",
        ),
        row("By node"),
        ts(
            "GPU utilisation by node",
            Q(f"avg by (node) ({util})", "{{node}}"),
            unit="percentunit",
            max=1,
        ),
        ts(
            "GPU memory used by node",
            Q(
                f"sum by (node) ({by_node('observer_gpu_memory_used_bytes')}) "
                f"/ sum by (node) ({by_node('observer_gpu_memory_total_bytes')})",
                "{{node}}",
            ),
            unit="percentunit",
            max=1,
        ),
        ts(
            "Unreleased GPU memory by node",
            Q(f"sum by (node) ({by_node('observer_gpu_unreleased_memory_bytes')})", "{{node}}"),
            unit="bytes",
            description="Memory held by processes of open unreleased-memory, vanished- and orphan-process findings.",
        ),
        ts(
            "Idle allocations by node",
            Q(
                f'sum by (node) (observer_findings_open{{detector="allocated_idle"}} * {AGENT_NODE})',
                "{{node}}",
            ),
        ),
        ts(
            "Power by node",
            Q(f"sum by (node) ({by_node('observer_gpu_power_watts')})", "{{node}}"),
            unit="watt",
        ),
        ts(
            "Hottest GPU by node",
            Q(f"max by (node) ({by_node('observer_gpu_temperature_celsius')})", "{{node}}"),
            unit="celsius",
        ),
        row("By pool"),
        ts(
            "GPU utilisation by pool",
            Q(f"avg by (pool) ({by_pool('observer_gpu_utilization_ratio')})", "{{pool}}"),
            unit="percentunit",
            max=1,
        ),
        ts(
            "GPU memory used by pool",
            Q(
                f"sum by (pool) ({by_pool('observer_gpu_memory_used_bytes')}) "
                f"/ sum by (pool) ({by_pool('observer_gpu_memory_total_bytes')})",
                "{{pool}}",
            ),
            unit="percentunit",
            max=1,
        ),
        ts(
            "GPUs allocated by the scheduler, by pool",
            Q(
                'sum by (pool) (observer_scheduler_node_gpus{state="allocated", pool=~"$pool"})',
                "{{pool}} allocated",
            ),
            Q(
                'sum by (pool) (observer_scheduler_node_gpus{state="total", pool=~"$pool"})',
                "{{pool}} total",
            ),
        ),
        ts(
            "Unreleased GPU memory by pool",
            Q(f"sum by (pool) ({by_pool('observer_gpu_unreleased_memory_bytes')})", "{{pool}}"),
            unit="bytes",
        ),
        row("By tenant"),
        ts(
            "GPU-hours by tenant (each hour)",
            Q(
                "sum by (tenant) (avg_over_time(observer_scheduler_running_gpus[1h]))",
                "{{tenant}}",
            ),
            description="GPU-hours the scheduler ran for each tenant's jobs in the hour before "
            "each point: its running GPUs averaged over the hour. The daily summary's "
            "'Who used what' splits them by pool and task type, with busy and idle hours.",
        ),
        table(
            "GPU-hours by tenant over the range",
            Q(
                "sum by (tenant) (sum_over_time(observer_scheduler_running_gpus[$__range:1m]))"
                " / 60",
                "{{tenant}}",
            ),
            description="Running GPUs read every minute over the dashboard's range, added up: "
            "GPU-minutes, / 60.",
        ),
        row("GPUs"),
        table(
            "GPUs now",
            Q(util),
            Q(by_node("observer_gpu_memory_used_bytes")),
            Q(by_node("observer_gpu_unreleased_memory_bytes")),
            Q(by_node("observer_gpu_temperature_celsius")),
            w=24,
            description="One row per GPU: utilisation (A), memory used (B), unreleased memory (C), temperature (D).",
        ),
        ts(
            "GPU memory by owner (top 10)",
            Q(
                "topk(10, sum by (owner_kind, owner) (observer_gpu_process_memory_used_bytes"
                f" * {NODE}))",
                "{{owner_kind}} {{owner}}",
            ),
            unit="bytes",
            w=24,
        ),
    ]
    return dashboard(
        "observer-gpu-fleet",
        "GPU Soak / GPU fleet",
        "Utilisation, memory, unreleased memory and idle allocations per node and pool, from every node's agent.",
        panels,
        [
            query_var("node", "Node", "label_values(observer_gpu_info, node)"),
            query_var("pool", "Pool", "label_values(observer_scheduler_node_gpus, pool)"),
        ],
    )


def probes_queues() -> dict[str, Any]:
    sel = 'tenant=~"$tenant", window=~"$window"'

    def wait_quantile(q: float) -> str:
        return (
            f"histogram_quantile({q}, sum by (le, tenant) "
            f"(increase(observer_probe_queue_wait_seconds_bucket{{{sel}}}[1h])))"
        )

    relative_wait = (
        "(sum by (tenant) (increase(observer_probe_queue_wait_seconds_sum[6h])) "
        "/ sum by (tenant) (increase(observer_probe_queue_wait_seconds_count[6h]))) "
        "/ scalar(sum(increase(observer_probe_queue_wait_seconds_sum[6h])) "
        "/ sum(increase(observer_probe_queue_wait_seconds_count[6h])))"
    )
    panels = [
        row("Queue waits"),
        ts("Queue wait p95 by tenant (1 h)", Q(wait_quantile(0.95), "{{tenant}}"), unit="s"),
        ts("Queue wait p50 by tenant (1 h)", Q(wait_quantile(0.5), "{{tenant}}"), unit="s"),
        table(
            "Mean wait by tenant and window",
            Q(
                f"sum by (tenant, window) (increase(observer_probe_queue_wait_seconds_sum{{{sel}}}[$__range])) "
                f"/ sum by (tenant, window) (increase(observer_probe_queue_wait_seconds_count{{{sel}}}[$__range]))"
            ),
            unit="s",
        ),
        ts(
            "Expected vs actual wait: start minus expected start (1 h)",
            *(
                Q(
                    f"histogram_quantile({q}, sum by (le, source) "
                    f"(increase(observer_wait_estimate_error_seconds_bucket[1h])))",
                    f"{{{{source}}}} p{round(q * 100)}",
                )
                for q in (0.5, 0.9)
            ),
            unit="s",
            description="How far off each estimate of a waiting job's start was, at its start "
            "(late: positive): the platform's (Slurm's backfill StartTime; none on Kubernetes) "
            "and the observer's own at a probe's submission. No series: no estimate was made.",
        ),
        ts(
            "Longest pending wait (scheduler)",
            Q(
                'max by (tenant, queue) (observer_scheduler_longest_wait_seconds{tenant=~"$tenant"})',
                "{{tenant}} {{queue}}",
            ),
            unit="s",
        ),
        row("Outcomes"),
        ts(
            "Probe outcomes per hour",
            Q(
                f"sum by (tenant, outcome) (increase(observer_probe_runs_total{{{sel}}}[1h]))",
                "{{tenant}} {{outcome}}",
            ),
            stack=True,
        ),
        table(
            "Runs by probe, tenant and outcome",
            Q(
                f"sum by (probe, tenant, outcome) (increase(observer_probe_runs_total{{{sel}}}[$__range])) > 0"
            ),
        ),
        ts(
            "Skipped launches per hour",
            Q(
                "sum by (probe, reason) (increase(observer_probe_runs_skipped_total[1h]))",
                "{{probe}} {{reason}}",
            ),
            description="Launches the controller skipped, e.g. over its probe GPU budget.",
        ),
        ts(
            "Probe run time p95 (1 h)",
            Q(
                'histogram_quantile(0.95, sum by (le, probe) (increase(observer_probe_run_seconds_bucket{tenant=~"$tenant"}[1h])))',
                "{{probe}}",
            ),
            unit="s",
        ),
        row("Pending"),
        ts(
            "Pending jobs by tenant and queue",
            Q(
                'sum by (tenant, queue) (observer_scheduler_pending_jobs{tenant=~"$tenant"})',
                "{{tenant}} {{queue}}",
            ),
        ),
        ts(
            "Pending and running GPUs by tenant",
            Q(
                'sum by (tenant) (observer_scheduler_pending_gpus{tenant=~"$tenant"})',
                "{{tenant}} pending",
            ),
            Q(
                'sum by (tenant) (observer_scheduler_running_gpus{tenant=~"$tenant"})',
                "{{tenant}} running",
            ),
        ),
        ts(
            "Probe runs and GPUs in flight",
            Q('sum by (tenant) (observer_probe_runs_active{tenant=~"$tenant"})', "{{tenant}} runs"),
            Q('sum by (tenant) (observer_probe_gpus_active{tenant=~"$tenant"})', "{{tenant}} GPUs"),
        ),
        ts(
            "Waits the platform does not explain",
            Q(
                'sum by (severity) (observer_findings_open{detector="unexplained_wait"})',
                "open {{severity}}",
            ),
            Q(
                'sum by (severity) (increase(observer_findings_total{detector="unexplained_wait"}[1h]))',
                "raised {{severity}}",
            ),
            description="Findings of the unexplained_wait detector: pending time that the scheduler's pending reasons, "
            "quotas and capacity do not account for. Each run's pending reason is in the stored runs and the daily summary.",
        ),
        row("Fairness"),
        ts(
            "Share of running GPUs by tenant",
            Q(
                'sum by (tenant) (observer_scheduler_running_gpus{tenant=~"$tenant"}) '
                "/ scalar(sum(observer_scheduler_running_gpus))",
                "{{tenant}}",
            ),
            unit="percentunit",
            max=1,
            description="Compare with each tenant's entitled weight (controller.tenants[].weight).",
        ),
        ts(
            "Queue wait relative to the fleet mean (6 h)",
            Q(relative_wait, "{{tenant}}"),
            description="1 = the mean of all tenants; a tenant above 1 window after window is disadvantaged.",
        ),
        ts(
            "Persistent unfairness findings",
            Q(
                'sum by (severity) (observer_findings_open{detector="persistent_unfairness"})',
                "open {{severity}}",
            ),
            Q(
                'sum by (severity) (increase(observer_findings_total{detector="persistent_unfairness"}[1h]))',
                "raised {{severity}}",
            ),
            w=24,
        ),
    ]
    return dashboard(
        "observer-probes-queues",
        "GPU Soak / Probes and queues",
        "Probe waits per tenant and window, outcomes, pending work and fairness against entitlement.",
        panels,
        [
            query_var("tenant", "Tenant", "label_values(observer_probe_runs_total, tenant)"),
            query_var("window", "Window", "label_values(observer_probe_runs_total, window)"),
        ],
    )


def pipelines() -> dict[str, Any]:
    panels = [
        text(
            "About",
            "Log loss and monitoring lag are found by the controller's detectors: canary lines sent "
            "through the log pipeline and freshness checks of Prometheus. These panels count their "
            "findings (`log_loss`, `log_delivery_latency`, `monitoring_lag`); the observer's own "
            "freshness in Prometheus is measured directly.",
        ),
        row("Log pipeline"),
        stat(
            "Log loss findings in range",
            'sum(increase(observer_findings_total{detector="log_loss"}[$__range])) or vector(0)',
            red_at=1,
        ),
        stat(
            "Late log delivery findings in range",
            'sum(increase(observer_findings_total{detector="log_delivery_latency"}[$__range])) or vector(0)',
            red_at=1,
        ),
        ts(
            "Log findings per hour",
            Q(
                'sum by (detector, severity) (increase(observer_findings_total{detector=~"log_loss|log_delivery_latency"}[1h]))',
                "{{detector}} {{severity}}",
            ),
            w=16,
        ),
        row("Monitoring lag"),
        stat(
            "Monitoring lag findings open",
            'sum(observer_findings_open{detector="monitoring_lag"}) or vector(0)',
            red_at=1,
        ),
        ts(
            "Monitoring lag findings",
            Q(
                'sum by (severity) (observer_findings_open{detector="monitoring_lag"})',
                "open {{severity}}",
            ),
            Q(
                'sum by (severity) (increase(observer_findings_total{detector="monitoring_lag"}[1h]))',
                "raised {{severity}}",
            ),
            w=20,
        ),
        ts(
            "Freshness of the observer's series in Prometheus",
            Q(
                'max by (job) (time() - timestamp(observer_loop_last_success_timestamp_seconds{job=~"$job"}))',
                "{{job}}",
            ),
            unit="s",
            description="Age of the newest sample Prometheus holds: the scrape interval plus any scrape delay.",
        ),
        ts(
            "Age of the last good tick at the source",
            Q(
                'max by (job, loop) (time() - observer_loop_last_success_timestamp_seconds{job=~"$job", loop=~"agent|follow|fleet|scheduler"})',
                "{{job}} {{loop}}",
            ),
            unit="s",
        ),
        ts(
            "Scrape duration",
            Q('max by (job) (scrape_duration_seconds{job=~"$job"})', "{{job}}"),
            unit="s",
        ),
        ts(
            "Scheduler snapshot age",
            Q("time() - observer_scheduler_last_snapshot_timestamp_seconds", "{{job}}"),
            unit="s",
        ),
    ]
    return dashboard(
        "observer-pipelines",
        "GPU Soak / Pipelines",
        "Log loss and monitoring lag: the detectors' findings and the freshness of the observer's own series.",
        panels,
        [query_var("job", "Job", "label_values(observer_loop_ticks_total, job)")],
    )


def self_health() -> dict[str, Any]:
    job = 'job=~"$job"'
    panels = [
        row("Targets"),
        stat("Targets up", f"sum(up{{{job}}})"),
        stat("Targets down", f"count(up{{{job}}} == 0) or vector(0)", red_at=1),
        stat("Blind agents", f"count(observer_nvml_up{{{job}}} == 0) or vector(0)", red_at=1),
        stat(
            "Scheduler snapshot age",
            "time() - max(observer_scheduler_last_snapshot_timestamp_seconds)",
            "s",
            red_at=300,
        ),
        stat(
            "Restarts (1 h)",
            'sum(increase(kube_pod_container_status_restarts_total{container=~"agent|controller|db-upgrade", pod=~".*-(agent|controller)-.*"}[1h])) or vector(0)',
            red_at=1,
            description="From kube-state-metrics, where it runs.",
        ),
        stat(
            "Loop errors (1 h)",
            f"sum(increase(observer_loop_errors_total{{{job}}}[1h])) or vector(0)",
            red_at=1,
        ),
        ts("Up", Q(f"up{{{job}}}", "{{job}} {{instance}}"), max=1),
        ts(
            "Last good tick age",
            Q(
                f'max by (job, instance, loop) (time() - observer_loop_last_success_timestamp_seconds{{{job}, loop=~"agent|follow|fleet|scheduler"}})',
                "{{instance}} {{loop}}",
            ),
            unit="s",
        ),
        row("Loops"),
        ts(
            "Loop ticks per second",
            Q(
                f"sum by (job, loop) (rate(observer_loop_ticks_total{{{job}}}[$__rate_interval]))",
                "{{job}} {{loop}}",
            ),
        ),
        ts(
            "Loop errors per second",
            Q(
                f"sum by (job, loop, stage) (rate(observer_loop_errors_total{{{job}}}[$__rate_interval]))",
                "{{loop}} {{stage}}",
            ),
        ),
        row("Agents"),
        ts(
            "Sample time p99 by tier",
            Q(
                "histogram_quantile(0.99, sum by (le, tier) "
                f"(rate(observer_agent_sample_duration_seconds_bucket{{{job}}}[$__rate_interval])))",
                "{{tier}}",
            ),
            unit="s",
        ),
        ts(
            "NVML up by agent",
            Q(f"min by (instance) (observer_nvml_up{{{job}}})", "{{instance}}"),
            max=1,
        ),
        ts(
            "NVML read errors per second",
            Q(
                f"sum by (instance, call, error) (rate(observer_gpu_read_errors_total{{{job}}}[$__rate_interval]))",
                "{{instance}} {{call}} {{error}}",
            ),
        ),
        ts(
            "NVML initialisation failures per hour",
            Q(
                f"sum by (instance, state) (increase(observer_nvml_init_errors_total{{{job}}}[1h]))",
                "{{instance}} {{state}}",
            ),
        ),
        row("Controller"),
        ts(
            "Agent snapshot read failures per second",
            Q(
                "sum by (agent) (rate(observer_agent_read_errors_total[$__rate_interval]))",
                "{{agent}}",
            ),
            description="The controller's failed reads of each agent's /v1/snapshot.",
        ),
        ts(
            "Scheduler errors per second",
            Q(
                "sum by (operation) (rate(observer_scheduler_errors_total[$__rate_interval]))",
                "{{operation}}",
            ),
        ),
        ts(
            "Scheduler snapshot age",
            Q("time() - observer_scheduler_last_snapshot_timestamp_seconds", "{{job}}"),
            unit="s",
        ),
        ts("Scrape duration", Q(f"scrape_duration_seconds{{{job}}}", "{{instance}}"), unit="s"),
        ts("Samples per scrape", Q(f"scrape_samples_scraped{{{job}}}", "{{instance}}")),
    ]
    return dashboard(
        "observer-self-health",
        "GPU Soak / Observer health",
        "Is the observer itself working: targets, loops, NVML, the scheduler connection and scrapes.",
        panels,
        [query_var("job", "Job", "label_values(observer_loop_ticks_total, job)")],
        time_from="now-6h",
    )


DASHBOARDS = {
    "soak-overview.json": soak_overview,
    "gpu-fleet.json": gpu_fleet,
    "probes-queues.json": probes_queues,
    "pipelines.json": pipelines,
    "self-health.json": self_health,
}


def render() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when a file is out of date")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    stale = []
    for name, content in render().items():
        path = args.out / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != content:
                stale.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    if stale:
        print("out of date (run python deploy/chart-tools/dashboards.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
