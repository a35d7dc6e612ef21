"""The inference probe (`controller.inference`): a service the controller keeps up on the
platform, requests every few seconds, and in each plan window scales out once and restarts
once; opt-in."""

from __future__ import annotations

from pydantic import Field, model_validator

from observer.settings.base import FieldProblems, Group


class InferenceSettings(Group):
    enabled: bool = Field(
        False,
        description="Run the inference probe (Kubernetes: a Deployment and a Service; Slurm: "
        "a job per replica).",
    )
    name: str = Field(
        "observer-inference",
        pattern=r"^[a-z]([-a-z0-9]{0,40}[a-z0-9])?$",
        description="The service's name: a DNS label, also the Deployment's and the Service's "
        "(Slurm: in its jobs' names and comments).",
    )
    tenant: str | None = Field(
        None,
        description="The tenant (namespace; Slurm: account, in its queue) it runs as; unset: "
        "the first tenant.",
    )
    replicas: int = Field(
        1, ge=1, description="Replicas it starts with, and is scaled back in to as a window begins."
    )
    scale_out_replicas: int = Field(
        2, ge=1, description="Replicas it is scaled out to in each window (at least `replicas`)."
    )
    gpus_per_replica: int = Field(1, ge=1, description="GPUs each replica requests.")
    port: int = Field(
        8000,
        ge=1,
        le=65535,
        description="Port each replica serves on (Slurm, where replicas share nodes: this plus "
        "the replica's ordinal).",
    )
    latency_ms: float = Field(20.0, ge=0, description="Latency of the stand-in's /infer.")
    warmup_seconds: float = Field(
        5.0, ge=0, description="The stand-in's warm-up: /healthz answers 503 until it is over."
    )
    ready_period_seconds: float = Field(
        2.0,
        gt=0,
        description="How often the platform probes each replica's /healthz (Slurm has no "
        "probe: the controller asks at each look).",
    )
    interval_seconds: float = Field(
        5.0, gt=0, description="How often each ready replica is sent one /infer request."
    )
    request_timeout_seconds: float = Field(
        2.0, gt=0, description="A request not answered in this is an error."
    )
    scale_out_after_seconds: float = Field(
        300.0,
        ge=0,
        description="After the start is ready, or a window began, the service is scaled out.",
    )
    restart_after_seconds: float = Field(
        300.0, ge=0, description="After the scale-out is ready, a rolling restart."
    )
    unavailable_max_seconds: float = Field(
        60.0,
        ge=0,
        description="No ready replica answering, or errors above max_error_rate, longer than "
        "this opens inference_unavailable.",
    )
    max_error_rate: float = Field(
        0.05, ge=0, le=1, description="Share of a look's requests that may fail."
    )
    scale_out_max_wait_seconds: float = Field(
        600.0,
        gt=0,
        description="A scale-out whose replicas are not all ready after this opens "
        "inference_scale_out_stalled.",
    )

    @model_validator(mode="after")
    def _scales_out(self) -> InferenceSettings:
        if self.scale_out_replicas < self.replicas:
            raise FieldProblems([("scale_out_replicas", "must be at least replicas")])
        return self
