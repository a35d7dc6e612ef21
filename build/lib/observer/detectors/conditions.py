"""Conditions open when a symptom persists beyond its hold time and close when it is gone.

The tracker is the one stateful piece between pure detectors and stored findings: it keeps
when each symptom was first seen and which conditions are open, de-duplicated by key. A
condition closes only when an evaluation that *covers* it no longer shows the symptom, so a
blind tick never closes anything (silence is not health); every caller says what its
evaluation covered. An evaluation that saw nothing at all (its view was stale) is `blind`:
it closes nothing and holds no symptom's time, so a hold starts over from the first view that
sees the symptom again."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from observer.domain import Finding, FindingKind, Subject, Symptom

Covers = Callable[[str, Subject], bool]


def covers_all(detector: str, subject: Subject) -> bool:
    """For an evaluation that saw every subject its detectors speak of."""
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

    def resume(self, findings: Iterable[Finding]) -> None:
        """Take over conditions a previous process left open (as the store has them), so a
        restart neither opens a second copy of one nor leaves the first open forever."""
        for finding in findings:
            if finding.kind is FindingKind.CONDITION and finding.is_open:
                since = finding.evidence.get("condition_since")
                first = datetime.fromisoformat(since) if isinstance(since, str) else None
                pending = _Pending(first or finding.opened_at, finding.detector, finding.subject)
                self._seen[finding.key] = pending
                self._open[finding.key] = finding

    def blind(self) -> None:
        """Nothing could be seen: open conditions stay open, and the symptoms not yet held
        long enough are forgotten (their hold starts over once they are seen again)."""
        self._seen = {key: seen for key, seen in self._seen.items() if key in self._open}

    def update(
        self,
        symptoms: Iterable[Symptom],
        now: datetime,
        covers: Covers,
        as_of: datetime | None = None,
    ) -> list[Finding]:
        """Feed one evaluation; return the findings that opened or closed on it. `covers`
        says which (detector, subject) this evaluation could see at all; `as_of`, when the
        view it evaluated was taken (default `now`): holds are timed on the views, so an
        old view read again confirms nothing."""
        seen = as_of or now
        changed: list[Finding] = []
        present: set[str] = set()
        for symptom in symptoms:
            key = symptom.key
            present.add(key)
            first = self._seen.setdefault(
                key, _Pending(seen, symptom.detector, symptom.subject)
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
            elif (seen - since).total_seconds() >= symptom.hold_seconds:
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
