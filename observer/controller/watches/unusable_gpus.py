"""GPUs a probe's program could not use: an event for each run that changed and says so."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from observer.controller.watches.base import Checked, Look
from observer.detectors import gpu_unusable
from observer.domain import Finding


class UnusableGpus:
    def resume(self, left_open: Sequence[Finding], now: datetime) -> None:
        """Events only: nothing is left open to take over."""

    def check(self, look: Look) -> Checked:
        return Checked([f for run in look.changed for f in gpu_unusable.evaluate(run)])
