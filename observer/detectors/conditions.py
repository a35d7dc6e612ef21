"""Conditions open when a symptom persists beyond its hold time and close when it is gone.

The tracker is the one stateful piece between pure detectors and stored findings: it keeps
when each symptom was first seen and which conditions are open, de-duplicated by key. A
condition closes only when an evaluation that *covers* it no longer shows the symptom, so a
blind tick never closes anything (silence is not health)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from observer.domain import Finding, FindingKind, Subject, Symptom

Covers = Callable[[str, Subject], bool]


def _covers_all(detector: str, subject: Subject) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class _Pending:
    first_seen: datetime
    detector: str
    subject: Mapping[str, str]


class ConditionTracker:
    def __init__(self) -> None:
        self._seen: dict[str, _Pending] = {}
        self._open: dict[str, Finding] = {}

    def open_findings(self) -> list[Finding]:
        return list(self._open.values())

    def update(
        self, symptoms: Iterable[Symptom], now: datetime, covers: Covers = _covers_all
    ) -> list[Finding]:
        """Feed one evaluation; return the findings that opened or closed on it. `covers`
        says which (detector, subject) this evaluation could see at all."""
        changed: list[Finding] = []
        present: set[str] = set()
        for symptom in symptoms:
            key = symptom.key
            present.add(key)
            first = self._seen.setdefault(
                key, _Pending(now, symptom.detector, symptom.subject)
            ).first_seen
            since = min(first, symptom.since) if symptom.since else first
            evidence = {
                **symptom.evidence,
                "rule": symptom.rule,
                "condition_since": since.isoformat(),
            }
            if key in self._open:
                self._open[key] = replace(
                    self._open[key],
                    severity=symptom.severity,
                    summary=symptom.summary,
                    evidence=evidence,
                )
            elif (now - since).total_seconds() >= symptom.hold_seconds:
                finding = Finding(
                    detector=symptom.detector,
                    kind=FindingKind.CONDITION,
                    subject=dict(symptom.subject),
                    severity=symptom.severity,
                    summary=symptom.summary,
                    opened_at=now,
                    closed_at=None,
                    evidence=evidence,
                )
                self._open[key] = finding
                changed.append(finding)
        for key in [k for k in self._seen if k not in present]:
            pending = self._seen[key]
            if not covers(pending.detector, pending.subject):
                continue
            del self._seen[key]
            if key in self._open:
                changed.append(replace(self._open.pop(key), closed_at=now))
        return changed
