"""What an alert source answers: the alerts firing now, each as a FiringAlert."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class FiringAlert:
    fingerprint: str
    name: str  # the alertname label
    severity: str | None  # the severity label, when the rule sets one
    starts_at: datetime
    ends_at: datetime | None  # while firing: when it resolves unless Prometheus refreshes it
    labels: Mapping[str, str]
    summary: str | None  # the summary (else description) annotation


class AlertSource(Protocol):
    def firing(self) -> list[FiringAlert]:
        """Every alert firing now (silenced and inhibited ones too: they fired). Raises
        BackendError when the source cannot be read."""
        ...
