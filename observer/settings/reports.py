"""The reports' settings (`reports`): summaries and the verdict, their delivery channels
and the alerts they count."""

from __future__ import annotations

from datetime import time
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, Field, SecretStr, field_validator, model_validator

from observer.settings.base import FieldProblems, Group, HttpUrl, LocalTime, repeated


class EmailSettings(Group):
    host: str = Field(min_length=1)
    port: int = Field(587, ge=1, le=65535)
    sender: str = Field(min_length=3)
    recipients: list[str] = Field(min_length=1)
    security: Literal["starttls", "tls", "none"] = "starttls"
    username: str | None = None
    password: SecretStr | None = Field(
        None, description="From the environment or a Secret (OBSERVER_REPORTS__DELIVERY__...)."
    )

    @model_validator(mode="after")
    def _each_recipient_once(self) -> EmailSettings:
        if problems := repeated("recipients", self.recipients):
            raise FieldProblems(problems)
        return self


class DeliverySettings(Group):
    """Where built reports go besides reports.output_dir (always written first). Webhook URLs
    and signing secrets are secrets: give them through the environment or a mounted Secret."""

    public_base_url: HttpUrl | None = Field(
        None, description="Where output_dir is served; chats that get the short form link here."
    )
    backoff_seconds: tuple[float, ...] = Field(
        (1.0, 5.0, 30.0), description="Waits between retries of a failed delivery."
    )
    timeout_seconds: float = Field(10.0, gt=0, description="Each delivery request.")
    slack_url: SecretStr | None = None
    feishu_url: SecretStr | None = None
    feishu_secret: SecretStr | None = None
    dingtalk_url: SecretStr | None = None
    dingtalk_secret: SecretStr | None = None
    wecom_url: SecretStr | None = None
    email: EmailSettings | None = None


# The go-live verdict's criteria, in the order it lists them (reports/compute/criteria/judge.py
# judges each: its CRITERIA are these).
Criterion = Literal[
    "queue_explainable",
    "monitoring_linked",
    "quota_enforced",
    "quota_released",
    "failure_evidence",
    "no_unreleased_resources",
    "no_log_loss",
    "monitoring_lag_bound",
    "alerting_chain",
    "no_persistent_unfairness",
    "interventions_audited",
    "tenant_isolation",
    "gpu_health",
    "inference_available",
]

TaskType = Literal["training", "inference", "interactive", "batch", "other"]


class TaskTypeRule(Group):
    """Tenants' jobs of this type: those in `queue` (Slurm partition, Kueue LocalQueue) and
    of `priority` (Slurm QOS, priorityClassName); an unset one matches any."""

    type: TaskType
    queue: str | None = Field(None, min_length=1)
    priority: str | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _names_something(self) -> TaskTypeRule:
        if self.queue is None and self.priority is None:
            raise FieldProblems([("queue", "a rule names a queue, a priority or both")])
        return self


class ReportSettings(Group):
    """Daily summaries and the go-live verdict, and the alerts they count."""

    language: Literal["en", "zh-CN"] = Field("en", description="Language of the reports.")
    delivery: DeliverySettings = DeliverySettings()
    daily_build_time: LocalTime = Field(
        time(8),
        description="Local time (controller.timezone) at which yesterday's summary is built.",
    )
    output_dir: Path = Field(
        Path("reports"), description="Where summaries and verdicts are written (md, html, json)."
    )
    soak_started_at: AwareDatetime | None = Field(
        None, description="Start of the soak; unset: the first stored probe run's submission."
    )
    soak_ended_at: AwareDatetime | None = Field(
        None,
        description="End of the soak for the verdict; unset: the start of today in the "
        "platform's timezone (whole days only, so the verdict agrees with the summaries).",
    )
    alertmanager_url: HttpUrl | None = Field(
        None, description="Alertmanager's base URL, whose /api/v2/alerts is polled; unset: off."
    )
    alertmanager_timeout_seconds: float = Field(5.0, gt=0, description="Each Alertmanager read.")
    alert_poll_interval_seconds: float = Field(
        60.0,
        gt=0,
        description="How often firing alerts are read; shorter than the shortest alert worth "
        "counting.",
    )
    ignored_alerts: tuple[str, ...] = Field(
        ("Watchdog", "InfoInhibitor"),
        description="Alert names never counted: kube-prometheus-stack's always-firing ones.",
    )
    verdict_monitoring_lag_max_seconds: float = Field(
        600.0,
        gt=0,
        description="Longest a monitoring-lag condition may stay open before the verdict calls "
        "monitoring lag out of bound; the detector's own limits open it, this judges how long "
        "it lasted (ten minutes: an alert is late, not lost).",
    )
    verdict_unexplained_wait_max_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Share of probe runs that waited without a reason the platform could "
        "explain that still passes (one run in twenty).",
    )
    verdict_unexplained_failure_max_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Share of failed tasks whose cause (application, GPU/driver, node, "
        "scheduling, platform configuration) the evidence cannot tell that still passes the "
        "failure-evidence criterion.",
    )
    verdict_blind_max_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Share of the soak the observer may have been blind (to any source) before "
        "the verdict is not decidable: silence is not health.",
    )
    verdict_layer_blind_max_share: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Share of the soak a layer (scheduler, its accounting, node agents, "
        "Prometheus, log backend) may have been blind before the criteria that need it are "
        "not observed; likewise the share of a period a node's owner state may have been "
        "unknown before the reports count it as not known.",
    )
    verdict_intervention_match_seconds: float = Field(
        3600.0,
        ge=0,
        description="A detected intervention counts as audited when a recorded one names the "
        "same subject within this.",
    )
    verdict_criteria_layers: dict[Criterion, Literal["must", "key", "experience"]] = Field(
        default_factory=dict,
        description="The verdict's scoring layer of a criterion where the default does not "
        "suit (must: isolation, quota, released GPUs, failure evidence, explainable queues, "
        "logs, GPU health; key: utilisation reporting, scheduling policy, monitoring and its "
        "alerting chain; experience: the rest). A must criterion not observed leaves the "
        "verdict not decidable, and the launch scope is where every must criterion passed.",
    )
    later_utilisation_share_of_allocated: float = Field(
        0.75,
        gt=0,
        le=1,
        description="A pool whose average GPU utilisation stays below this share of the share "
        "of its GPUs allocated is a later optimisation in the verdict: jobs hold GPUs they "
        "barely use (never blocks a launch).",
    )
    later_quota_hold_seconds: float = Field(
        3600.0,
        gt=0,
        description="A tenant whose jobs were held by its quota longer than this is a later "
        "optimisation in the verdict: its quota is smaller than its work (never blocks a "
        "launch).",
    )

    task_types: tuple[TaskTypeRule, ...] = Field(
        (),
        description="The type of each tenant's own job (training, inference, interactive, "
        "batch), by what the platform gives each job: the first rule whose queue and priority "
        "match; a job no rule matches is 'other'. The observer's own are 'probe'.",
    )
    gpu_hour_price: dict[str, float] = Field(
        default_factory=dict,
        description="Price of one allocated GPU-hour per pool (the scheduler's pool name), "
        "'*' for any other pool; empty: the reports show hours, no cost.",
    )
    currency: str = Field(
        "CNY", min_length=1, max_length=8, description="The currency of gpu_hour_price."
    )

    @field_validator("gpu_hour_price")
    @classmethod
    def _prices_not_negative(cls, prices: dict[str, float]) -> dict[str, float]:
        if below := sorted(pool for pool, price in prices.items() if price < 0):
            raise ValueError(f"a price is never negative (pool {', '.join(below)})")
        return prices

    @model_validator(mode="after")
    def _soak_ends_after_it_starts(self) -> ReportSettings:
        started, ended = self.soak_started_at, self.soak_ended_at
        if started is not None and ended is not None and ended <= started:
            after = f"must be after reports.soak_started_at ({started.isoformat()})"
            raise FieldProblems([("soak_ended_at", after)])
        return self
